"""The DrQ / DrQ-v2 pixel encoder (super_sac.nets.cnns.DrQPixelEncoder)."""

import gin
import pytest
import torch

from super_sac.augmentations import center_crop
from super_sac.nets.cnns import DMCPixelEncoder, DrQPixelEncoder

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _frames(batch=2, channels=9, size=84, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (batch, channels, size, size), generator=gen, dtype=torch.uint8)


def test_output_shape_and_tanh_range():
    torch.manual_seed(0)
    enc = DrQPixelEncoder(9, emb_dim=50)
    out = enc({"obs": _frames()})
    assert out.shape == (2, 50) and enc.embedding_dim == 50
    assert out.abs().max() < 1.0
    # LayerNorm before tanh: the pre-activations have mean 0 and variance 1 per sample
    pre = enc.norm(enc.fc(enc.convs(enc.image({"obs": _frames()})).flatten(1)))
    assert torch.allclose(pre.mean(-1), torch.zeros(2), atol=1e-5)


def test_pixels_enter_in_minus_half_to_half_without_changing_the_input():
    enc = DrQPixelEncoder(3, image_size=16)  # the smallest size the four convs take is 15
    raw = torch.tensor([0, 51, 255, 255], dtype=torch.uint8).repeat(1, 3, 16, 4)
    before = raw.clone()
    image = enc.image({"obs": raw})
    expected = torch.tensor([-0.5, 0.2 - 0.5, 0.5, 0.5]).repeat(1, 3, 16, 4)
    assert torch.allclose(image, expected)
    assert torch.equal(raw, before)
    floats = raw.float()  # augmented batches arrive as float 0..255
    kept = floats.clone()
    assert torch.allclose(enc.image({"obs": floats}), expected)
    assert torch.equal(floats, kept)


def test_larger_images_are_centre_cropped_to_the_built_size():
    torch.manual_seed(0)
    enc = DrQPixelEncoder(3, image_size=(84, 84))
    big = _frames(channels=3, size=100)
    crop = big[..., 8:92, 8:92]
    assert torch.equal(center_crop(big, (84, 84)), crop)
    assert torch.allclose(enc({"obs": big}), enc({"obs": crop.contiguous()}))
    odd = torch.arange(5 * 5).reshape(1, 1, 5, 5)
    assert center_crop(odd, (2, 2)).flatten().tolist() == [6, 7, 11, 12]
    with pytest.raises(ValueError, match="smaller than the 84x84"):
        enc({"obs": _frames(channels=3, size=64)})


def test_parameter_count_by_hand():
    enc = DrQPixelEncoder(9, emb_dim=50, image_size=84)
    convs = (9 * 32 * 9 + 32) + 3 * (32 * 32 * 9 + 32)
    side = 84  # 3x3 convs, strides 2, 1, 1, 1: 84 -> 41 -> 39 -> 37 -> 35
    for stride in (2, 1, 1, 1):
        side = (side - 3) // stride + 1
    assert side == 35
    head = 32 * 35 * 35 * 50 + 50 + 2 * 50  # linear + LayerNorm's scale and shift
    assert sum(p.numel() for p in enc.parameters()) == convs + head == 1_990_518


def test_original_name_and_gin():
    enc = DMCPixelEncoder((6, 32, 32), emb_dim=8)
    assert isinstance(enc, DrQPixelEncoder) and enc.image_size == (32, 32)
    assert enc({"obs": _frames(channels=6, size=32)}).shape == (2, 8)
    with gin.unlock_config():
        gin.bind_parameter("DrQPixelEncoder.emb_dim", 7)
    try:
        assert DrQPixelEncoder(3, image_size=32).embedding_dim == 7
    finally:
        gin.clear_config()


def test_one_float_conversion_in_channels_last_with_the_reference_values():
    enc = DrQPixelEncoder(3, image_size=16)
    torch.manual_seed(1)
    raw = torch.randint(0, 256, (2, 3, 20, 20), dtype=torch.uint8)  # centre-cropped to 16
    image = enc.image({"obs": raw})
    reference = center_crop(raw, (16, 16)).float() * (1.0 / 255.0) + (-0.5)
    assert torch.equal(image, reference)  # same operations in the same order: bit-equal
    assert image.dtype == torch.float32
    assert image.is_contiguous(memory_format=torch.channels_last)
    # a float32 input (an augmented batch) is read, never written, even uncropped
    floats = torch.randint(0, 256, (2, 3, 16, 16)).float()
    kept = floats.clone()
    out = enc.image({"obs": floats})
    assert torch.equal(floats, kept) and out.data_ptr() != floats.data_ptr()
    assert torch.equal(out, floats * (1.0 / 255.0) + (-0.5))
    # a channels-last float32 input, which contiguous() and the conversion both alias
    floats_cl = floats.contiguous(memory_format=torch.channels_last)
    enc.image({"obs": floats_cl})
    assert torch.equal(floats_cl, kept)
