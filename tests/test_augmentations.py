"""Image augmentations: each checked by hand on small images (shifts, crops, flips, rotations,
grayscale weights, cutout boxes, colour ops), never in place, shared vs independent draws,
seeding, gin construction and the error messages."""

import gin
import pytest
import torch
import torch.nn.functional as F

from super_sac import augmentations as A

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ALL_AUGS = [
    A.IdentityAug,
    A.DrqAug,
    A.Drqv2Aug,
    A.RadAug,
    A.TranslateAug,
    A.RotateAug,
    A.HorizontalFlipAug,
    A.VerticalFlipAug,
    A.CutoutAug,
    A.CutoutColorAug,
    A.GrayscaleAug,
    A.ColorJitterAug,
    A.GammaAug,
    A.RandomConvAug,
]
SMALL_SETTINGS = {A.RadAug: {"crop": 4}, A.CutoutAug: {"box_min": 2, "box_max": 5}}
SMALL_SETTINGS[A.CutoutColorAug] = SMALL_SETTINGS[A.CutoutAug]


def make(cls, **kwargs):
    return cls(**{**SMALL_SETTINGS.get(cls, {}), **kwargs})


def uint8_images(b=4, c=6, h=12, w=12, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (b, c, h, w), dtype=torch.uint8, generator=g)


def arange_image(c=1, h=3, w=3):
    return torch.arange(c * h * w, dtype=torch.float32).view(1, c, h, w)


# ----------------------------------------------------------------------------- every augmentation


@pytest.mark.parametrize("cls", ALL_AUGS)
def test_shapes_dtype_range_and_never_in_place(cls):
    images = uint8_images()
    before = images.clone()
    out = make(cls, batch_size=256)(images)  # the ignored positional batch size of the original
    expected_hw = (8, 8) if cls is A.RadAug else (12, 12)
    assert out.shape == (4, 6, *expected_hw) and out.dtype == torch.float32
    assert 0.0 <= float(out.min()) and float(out.max()) <= 255.0
    assert torch.equal(images, before)
    floats = images.float()
    floats_before = floats.clone()
    out = make(cls)(floats)
    assert torch.equal(floats, floats_before)
    assert out.data_ptr() != floats.data_ptr()


@pytest.mark.parametrize("cls", ALL_AUGS)
def test_seeded_draws_repeat(cls):
    images = uint8_images()
    aug = make(cls)
    torch.manual_seed(3)
    first = aug(images)
    torch.manual_seed(3)
    assert torch.equal(aug(images), first)
    gen_a, gen_b = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(aug(images, generator=gen_a), aug(images, generator=gen_b))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("cls", ALL_AUGS)
def test_stays_on_the_input_device(cls):
    images = uint8_images().cuda()
    out = make(cls)(images)
    assert out.device == images.device
    gen = torch.Generator(device="cpu").manual_seed(0)  # a CPU generator serves a GPU batch too
    assert make(cls)(images, generator=gen).device == images.device


# ----------------------------------------------------------------------------- shifts and crops


def replicate_shift(images, pad, dy, dx):
    """The hand-made reference: replicate-pad, then slice the window at (dy, dx)."""
    h, w = images.shape[-2:]
    padded = F.pad(images.float(), (pad, pad, pad, pad), mode="replicate")
    return padded[..., dy : dy + h, dx : dx + w]


def test_drqv2_centre_shift_is_identity():
    images = uint8_images(h=10, w=14)
    aug = A.Drqv2Aug(pad=4)
    params = {"shift": torch.full((4, 2), 4.0)}
    torch.testing.assert_close(aug.apply(images, params), images.float(), atol=1e-2, rtol=0)


def test_drqv2_known_shift_equals_replicate_padded_window():
    images = uint8_images(b=2, h=10, w=14)
    aug = A.Drqv2Aug(pad=4)
    shift = torch.tensor([[0.0, 8.0], [7.0, 1.0]])  # (dy, dx) per sample
    out = aug.apply(images, {"shift": shift})
    for i, (dy, dx) in enumerate([(0, 8), (7, 1)]):
        expected = replicate_shift(images[i : i + 1], 4, dy, dx)
        torch.testing.assert_close(out[i : i + 1], expected, atol=1e-2, rtol=0)


def test_drqv2_by_hand_on_3x3():
    # pad 1, shift (0, 0): out[i, j] = x[max(i - 1, 0), max(j - 1, 0)]
    x = arange_image()  # [[0 1 2] [3 4 5] [6 7 8]]
    out = A.Drqv2Aug(pad=1).apply(x, {"shift": torch.zeros(1, 2)})
    expected = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [3.0, 3.0, 4.0]])
    torch.testing.assert_close(out[0, 0], expected, atol=1e-4, rtol=0)
    # a half-pixel continuous shift mixes neighbours: shift (1, 1.5) -> x[i, j] + 0.5 * (x[i, j+1]
    # - x[i, j]) inside, the replicated edge on the right
    out = A.Drqv2Aug(pad=1, continuous=True).apply(x, {"shift": torch.tensor([[1.0, 1.5]])})
    torch.testing.assert_close(out[0, 0, 0], torch.tensor([0.5, 1.5, 2.0]), atol=1e-4, rtol=0)


def test_drqv2_whole_pixel_shifts_are_the_bilinear_resampling_computed_as_a_crop():
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (81, 3, 12, 10), generator=gen, dtype=torch.uint8)
    shift = torch.cartesian_prod(torch.arange(9), torch.arange(9)).float()  # every (dy, dx)
    out = A.Drqv2Aug(pad=4).apply(images, {"shift": shift})
    reference = A.bilinear_shift(images, shift, 4)
    assert out.dtype == torch.float32 and out.shape == images.shape
    torch.testing.assert_close(out, reference, atol=1e-3, rtol=0)
    # float input (e.g. after another augmentation) gives the same values
    torch.testing.assert_close(A.Drqv2Aug(pad=4).apply(images.float(), {"shift": shift}), out)


def test_drqv2_draws_whole_pixels_in_range():
    aug = A.Drqv2Aug(pad=4)
    shift = aug.sample_params(2000, (3, 84, 84), "cpu")["shift"]
    assert torch.equal(shift, shift.round())
    assert set(shift.unique().tolist()) == set(range(9))
    cont = A.Drqv2Aug(pad=4, continuous=True).sample_params(2000, (3, 84, 84), "cpu")["shift"]
    assert 0.0 <= float(cont.min()) and float(cont.max()) <= 8.0
    assert not torch.equal(cont, cont.round())


def test_drq_known_shift_by_hand_and_against_reference():
    x = arange_image()
    out = A.DrqAug(pad=1).apply(x, {"shift": torch.tensor([[2, 0]])})
    # rows i + 2 - 1 = 1, 2, 3 -> clipped 1, 2, 2; cols j - 1 -> clipped 0, 0, 1
    expected = torch.tensor([[3.0, 3.0, 4.0], [6.0, 6.0, 7.0], [6.0, 6.0, 7.0]])
    assert torch.equal(out[0, 0], expected)
    images = uint8_images(b=3, h=9, w=11)
    shift = torch.tensor([[0, 8], [4, 4], [8, 3]])
    out = A.DrqAug(pad=4).apply(images, {"shift": shift})
    for i, (dy, dx) in enumerate(shift.tolist()):
        assert torch.equal(out[i : i + 1], replicate_shift(images[i : i + 1], 4, dy, dx))
    # the same integer shift through DrQ-v2's bilinear grid gives the same image
    v2 = A.Drqv2Aug(pad=4).apply(images, {"shift": shift.float()})
    torch.testing.assert_close(v2, out, atol=1e-2, rtol=0)


def test_rad_crop_positions():
    images = uint8_images(b=2, h=10, w=12)
    aug = A.RadAug(crop=4)
    out = aug.apply(images, {"corner": torch.tensor([[0, 4], [3, 1]])})
    assert out.shape == (2, 6, 6, 8)
    assert torch.equal(out[0], images[0, :, 0:6, 4:12].float())
    assert torch.equal(out[1], images[1, :, 3:9, 1:9].float())
    corner = aug.sample_params(2000, (3, 10, 12), "cpu")["corner"]
    assert set(corner.unique().tolist()) == set(range(5))  # {0, ..., crop}


def test_center_crop():
    x = torch.arange(30).view(1, 1, 5, 6)
    # top = (5 - 3) // 2 = 1, left = (6 - 2) // 2 = 2
    assert torch.equal(A.center_crop(x, (3, 2))[0, 0], torch.tensor([[8, 9], [14, 15], [20, 21]]))
    assert A.center_crop(x, (5, 6)).shape == x.shape
    with pytest.raises(ValueError, match="does not fit"):
        A.center_crop(x, (6, 6))


def test_translate_by_hand():
    x = torch.arange(27, dtype=torch.float32).view(1, 3, 3, 3)
    color = torch.tensor([[10.0, 20.0, 30.0]])
    out = A.TranslateAug(translate_max=1).apply(
        x, {"shift": torch.tensor([[1, -1]]), "color": color}
    )
    # content moves one row down and one column left: out[i, j] = x[i - 1, j + 1]
    assert torch.equal(
        out[0, 0], torch.tensor([[10.0, 10.0, 10.0], [1.0, 2.0, 10.0], [4.0, 5.0, 10.0]])
    )
    assert torch.equal(out[0, 2, 0], torch.full((3,), 30.0))


def test_rotate_matches_rot90_per_sample():
    images = uint8_images(b=4, c=3, h=5, w=5)
    k = torch.tensor([0, 1, 2, 3])
    out = A.RotateAug().apply(images, {"k": k})
    for i in range(4):
        assert torch.equal(out[i], torch.rot90(images[i].float(), int(k[i]), dims=(1, 2)))
    # k = 1 by hand on a 2x2: [[0 1] [2 3]] -> [[1 3] [0 2]]
    x = torch.arange(4.0).view(1, 1, 2, 2)
    assert torch.equal(
        A.RotateAug().apply(x, {"k": torch.tensor([1])})[0, 0],
        torch.tensor([[1.0, 3.0], [0.0, 2.0]]),
    )


def test_flips_by_hand():
    x = torch.arange(12.0).view(2, 1, 2, 3)
    flip = {"flip": torch.tensor([True, False])}
    out = A.HorizontalFlipAug().apply(x, flip)
    assert torch.equal(out[0, 0], torch.tensor([[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]))
    assert torch.equal(out[1], x[1])
    out = A.VerticalFlipAug().apply(x, flip)
    assert torch.equal(out[0, 0], torch.tensor([[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]]))
    assert torch.equal(out[1], x[1])
    draws = A.HorizontalFlipAug(p_rand=0.25).sample_params(4000, (3, 4, 4), "cpu")["flip"]
    assert abs(draws.float().mean().item() - 0.25) < 0.03


def test_cutout_area_by_hand():
    x = torch.ones(1, 6, 5, 6)
    params = {"size": torch.tensor([[2, 3]]), "corner": torch.tensor([[1, 2]])}
    out = A.CutoutAug().apply(x, params)
    assert int((out == 0).sum()) == 2 * 3 * 6
    assert torch.equal(out[0, :, 1:3, 2:5], torch.zeros(6, 2, 3))
    params["color"] = torch.tensor([[7.0, 8.0, 9.0]])
    out = A.CutoutColorAug().apply(x, params)
    assert torch.equal(out[0, :, 1, 2], torch.tensor([7.0, 8.0, 9.0, 7.0, 8.0, 9.0]))
    assert int((out != 1).sum()) == 2 * 3 * 6
    # drawn boxes stay inside the image and within the size bounds
    p = A.CutoutAug(box_min=2, box_max=5).sample_params(500, (3, 6, 7), "cpu")
    assert int(p["size"].min()) == 2 and int(p["size"].max()) == 4
    assert bool(((p["corner"] + p["size"]) <= torch.tensor([6, 7])).all())


# ----------------------------------------------------------------------------- photometric


def test_grayscale_weights():
    frame = torch.tensor([100.0, 50.0, 200.0]).view(1, 3, 1, 1).expand(2, 3, 2, 2)
    images = torch.cat([frame, frame.flip(1)], dim=1)  # two frames: (100, 50, 200), (200, 50, 100)
    out = A.GrayscaleAug().apply(images, {"gray": torch.tensor([True, False])})
    y1 = 0.299 * 100 + 0.587 * 50 + 0.114 * 200  # 82.05
    y2 = 0.299 * 200 + 0.587 * 50 + 0.114 * 100  # 100.55
    torch.testing.assert_close(out[0, :, 0, 0], torch.tensor([y1] * 3 + [y2] * 3))
    assert torch.equal(out[1], images[1])


def test_color_jitter_by_hand():
    x = torch.tensor([100.0, 50.0, 200.0]).view(1, 3, 1, 1).repeat(1, 2, 1, 2)
    x[..., 1] = x[..., 1] / 2  # two pixels: (100, 50, 200) and (50, 25, 100), two frames
    ones = torch.ones(1)
    params = {"brightness": ones, "contrast": ones, "saturation": ones, "jitter": ones.bool()}
    aug = A.ColorJitterAug()
    torch.testing.assert_close(aug.apply(x, params), x)
    # brightness 2 doubles and clips at 255
    out = aug.apply(x, {**params, "brightness": torch.tensor([2.0])})
    assert out[0, :3, 0, 0].tolist() == [200.0, 100.0, 255.0]
    # contrast 0: every pixel becomes the frame's mean luma (82.05 + 41.025) / 2
    out = aug.apply(x, {**params, "contrast": torch.zeros(1)})
    torch.testing.assert_close(out, torch.full_like(x, 61.5375))
    # saturation 0: each pixel becomes its luma; the skip mask leaves a sample unchanged
    out = aug.apply(x, {**params, "saturation": torch.zeros(1)})
    torch.testing.assert_close(out[0, :3, 0, 1], torch.full((3,), 41.025))
    assert torch.equal(aug.apply(x, {**params, "brightness": 2 * ones, "jitter": ~ones.bool()}), x)


def test_gamma_by_hand():
    x = torch.full((2, 3, 2, 2), 127.5)
    out = A.GammaAug().apply(x, {"gamma": torch.tensor([2.0, 1.0])})
    torch.testing.assert_close(out[0], torch.full((3, 2, 2), 63.75))  # 255 * 0.5 ** 2
    torch.testing.assert_close(out[1], x[1])
    assert (
        float(A.GammaAug(gamma_std=5.0).sample_params(1000, (3, 2, 2), "cpu")["gamma"].min()) >= 0.1
    )


def test_random_conv_identity_kernel_and_per_sample_reference():
    images = uint8_images(b=3, c=6, h=7, w=7)
    aug = A.RandomConvAug()
    identity = torch.zeros(3, 3, 3, 3, 3)
    identity[:, range(3), range(3), 1, 1] = 1.0
    out = aug.apply(images, {"weight": identity, "conv": torch.ones(3, dtype=torch.bool)})
    torch.testing.assert_close(out, images.float())
    params = aug.sample_params(3, images.shape[1:], "cpu")
    params["conv"] = torch.tensor([True, True, False])
    out = aug.apply(images, params)
    for i in range(2):
        frames = images[i].float().view(2, 3, 7, 7) / 255.0
        ref = (F.conv2d(frames, params["weight"][i], padding=1) * 255.0).clamp(0, 255)
        torch.testing.assert_close(out[i], ref.reshape(6, 7, 7), atol=1e-3, rtol=1e-5)
    assert torch.equal(out[2], images[2].float())


# ----------------------------------------------------------------------------- the sequence


def test_sequence_shared_vs_independent_draws():
    images = uint8_images(b=16)
    obs = {"pixels": images, "state": torch.arange(16.0).view(16, 1)}
    next_obs = {"pixels": images.clone(), "state": torch.ones(16, 1)}
    shared = A.AugmentationSequence([A.Drqv2Aug(), A.CutoutAug(box_min=2, box_max=5)])
    out, next_out = shared(obs, next_obs)
    assert torch.equal(out["pixels"], next_out["pixels"])
    assert not torch.equal(out["pixels"], images.float())
    independent = A.AugmentationSequence([A.Drqv2Aug()], shared_draw=False)
    out, next_out = independent(obs, next_obs)
    assert not torch.equal(out["pixels"], next_out["pixels"])


def test_sequence_keys_pass_through_and_no_in_place():
    images = uint8_images()
    state = torch.randn(4, 3)
    obs = {"pixels": images, "state": state, "flat": torch.zeros(4, 2, 2)}
    before = {k: v.clone() for k, v in obs.items()}
    out = A.AugmentationSequence([A.IdentityAug()])(obs)
    assert out is not obs and out["state"] is state and out["flat"] is obs["flat"]
    assert out["pixels"].dtype == torch.float32 and torch.equal(out["pixels"], images.float())
    assert all(torch.equal(obs[k], before[k]) for k in obs) and obs["pixels"] is images
    # float input and an empty chain: still a copy, never the stored tensor itself
    floats = {"pixels": images.float()}
    assert A.AugmentationSequence([])(floats)["pixels"].data_ptr() != floats["pixels"].data_ptr()
    # explicit keys: only those are augmented
    two = {"a": images, "b": images}
    out = A.AugmentationSequence([A.HorizontalFlipAug(p_rand=1.0)], keys=["a"])(two)
    assert torch.equal(out["a"], images.float().flip(3)) and out["b"] is images


def test_sequence_seeded_and_generator():
    obs = {"pixels": uint8_images()}
    seq = A.AugmentationSequence([A.Drqv2Aug(), A.ColorJitterAug()], shared_draw=False)
    torch.manual_seed(11)
    first = seq(obs, obs)
    torch.manual_seed(11)
    again = seq(obs, obs)
    assert all(torch.equal(a["pixels"], b["pixels"]) for a, b in zip(first, again))
    gen = torch.Generator().manual_seed(2)
    seq_a = A.AugmentationSequence([A.Drqv2Aug()], generator=gen)
    out_a = seq_a(obs)["pixels"]
    gen.manual_seed(2)
    assert torch.equal(seq_a(obs)["pixels"], out_a)


def test_sequence_chains_rad_crop_then_flip():
    images = uint8_images(h=12, w=12)
    seq = A.AugmentationSequence([A.RadAug(crop=4), A.HorizontalFlipAug()])
    out, next_out = seq({"pixels": images}, {"pixels": images})
    assert out["pixels"].shape == (4, 6, 8, 8) and torch.equal(out["pixels"], next_out["pixels"])


def test_gin_builds_a_drqv2_sequence():
    gin.parse_config(
        """
        import super_sac.augmentations
        super_sac.augmentations.AugmentationSequence.aug_list = [@augmentations.Drqv2Aug()]
        AugmentationSequence.shared_draw = False
        Drqv2Aug.pad = 2
        """
    )
    seq = A.AugmentationSequence()
    assert isinstance(seq.aug_list[0], A.Drqv2Aug) and seq.aug_list[0].pad == 2
    assert seq.shared_draw is False
    out = seq({"pixels": uint8_images()})
    assert out["pixels"].shape == (4, 6, 12, 12)
    gin.clear_config()
    gin.parse_config("main_aug/AugmentationSequence.aug_list = [@RadAug(), @GrayscaleAug()]")
    with gin.config_scope("main_aug"):
        seq = A.AugmentationSequence()
    assert [type(a) for a in seq.aug_list] == [A.RadAug, A.GrayscaleAug]


def test_error_messages():
    gray_stack = uint8_images(c=4)
    for cls in (A.GrayscaleAug, A.ColorJitterAug, A.RandomConvAug, A.CutoutColorAug):
        with pytest.raises(ValueError, match=r"C = 3 \* k channels\), got C=4.*keys="):
            make(cls)(gray_stack)
    with pytest.raises(ValueError, match="crop=16 leaves nothing of 12x12"):
        A.RadAug()(uint8_images())
    with pytest.raises(ValueError, match="square images, got 12x10"):
        A.RotateAug()(uint8_images(h=12, w=10))
    with pytest.raises(ValueError, match="box_max <= min"):
        A.CutoutAug()(uint8_images())
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        A.Drqv2Aug()(torch.zeros(3, 8, 8))
    with pytest.raises(KeyError, match="not in the observation"):
        A.AugmentationSequence([A.Drqv2Aug()], keys=["rgb"])({"pixels": uint8_images()})
    with pytest.raises(ValueError, match="key 'state'"):
        A.AugmentationSequence([A.Drqv2Aug()], keys=["state"])({"state": torch.zeros(4, 3)})
    with pytest.raises(TypeError, match="instances"):
        A.AugmentationSequence([A.Drqv2Aug])
    with pytest.raises(ValueError, match="use shared_draw=False"):
        A.AugmentationSequence([A.Drqv2Aug()])(
            {"pixels": uint8_images(h=12)}, {"pixels": uint8_images(h=10)}
        )
    with pytest.raises(ValueError, match="pad must be >= 0"):
        A.Drqv2Aug(pad=-1)
