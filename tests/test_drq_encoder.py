"""The DrQ / DrQ-v2 pixel encoder (super_sac.nets.cnns.DrQPixelEncoder)."""

import gin
import pytest
import torch
from torch import nn

from super_sac.augmentations import center_crop
from super_sac.nets import conv_weight_init
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


# ----------------------------------------------------------------------------- the papers' layout


def test_without_its_head_the_encoder_returns_the_flattened_convolutions():
    torch.manual_seed(0)
    enc = DrQPixelEncoder(channels=3, image_size=16, trunk=False)
    # 16 -> (16 - 3) // 2 + 1 = 7 -> 5 -> 3 -> 1: 32 channels of 1x1
    assert enc.embedding_dim == 32 and enc.fc is None and enc.norm is None
    frames = _frames(batch=2, channels=3, size=16)
    out = enc({"obs": frames})
    expected = enc.convs(enc.image({"obs": frames})).flatten(1)
    assert out.shape == (2, 32) and torch.equal(out, expected)
    assert (out >= 0).all()  # ReLU features, no tanh
    assert sum(p.numel() for p in enc.parameters()) == sum(
        p.numel() for p in enc.convs.parameters()
    )


def test_trunk_is_tanh_of_layernorm_of_a_linear_map_and_can_detach_its_parameters():
    from super_sac.nets.mlps import Trunk

    torch.manual_seed(0)
    trunk = Trunk(4, 3)
    with torch.no_grad():
        trunk.norm.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        trunk.norm.bias.copy_(torch.tensor([0.0, 0.1, -0.2]))
    x = torch.randn(5, 4, requires_grad=True)
    h = x @ trunk.fc.weight.T + trunk.fc.bias
    mean, var = h.mean(-1, keepdim=True), h.var(-1, unbiased=False, keepdim=True)
    by_hand = torch.tanh((h - mean) / torch.sqrt(var + 1e-5) * trunk.norm.weight + trunk.norm.bias)
    assert torch.allclose(trunk(x), by_hand, atol=1e-6)
    trunk(x, detach_params=True).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    assert all(p.grad is None for p in trunk.parameters())


def test_critic_trunk_is_shared_by_the_members_and_actors_own_theirs():
    from super_sac.nets.mlps import (
        ContinuousCritic,
        ContinuousDeterministicActor,
        ContinuousStochasticActor,
    )

    torch.manual_seed(0)
    critic = ContinuousCritic(32, 2, num_critics=3, hidden_size=8, trunk_dim=5)
    assert critic.trunk.fc.weight.shape == (5, 32)
    assert critic.net.layers[0].weight.shape == (3, 5 + 2, 8)  # every member reads [trunk, a]
    state, action = torch.randn(4, 32), torch.rand(4, 2) * 2 - 1
    q, feats = critic(state, action, return_features=True)
    x = torch.cat((critic.trunk(state), action), -1)
    assert torch.allclose(q, critic.net(x)) and q.shape == (3, 4, 1)
    assert torch.allclose(feats, critic.features(state, action))
    action.requires_grad_(True)
    critic(state, action, detach_params=True).sum().backward()  # the actor update's call
    assert action.grad.abs().sum() > 0
    assert all(p.grad is None for p in critic.parameters())
    for actor in (
        ContinuousStochasticActor(32, 2, hidden_size=8, trunk_dim=5),
        ContinuousDeterministicActor(32, 2, hidden_size=8, trunk_dim=5),
    ):
        assert actor.net[0].in_features == 5 and actor.trunk.fc.in_features == 32
    with pytest.raises(ValueError, match="trunk_dim"):
        ContinuousCritic(32, 2, trunk_dim=0)
    # without trunk_dim the networks are the plain ones
    assert ContinuousCritic(32, 2).trunk is None
    assert ContinuousDeterministicActor(32, 2).trunk is None


def test_the_papers_dmc_files_use_per_network_trunks_and_the_markov_file_a_shared_head():
    from pathlib import Path

    from super_sac.nets.mlps import ContinuousCritic

    dmc = Path(__file__).resolve().parents[1] / "experiments" / "dmc"
    for name, actor, trunk in [
        ("drqv2.gin", "ContinuousDeterministicActor", 50),
        ("drqv1.gin", "ContinuousStochasticActor", 50),
        ("rad.gin", "ContinuousStochasticActor", 50),
        ("drqv2_markov.gin", "ContinuousDeterministicActor", None),
    ]:
        gin.clear_config()
        import super_sac.augmentations  # noqa: F401  (registers the configurables)
        import super_sac.main  # noqa: F401
        from super_sac.config import parse_gin

        parse_gin([dmc / name])
        assert gin.query_parameter("DrQPixelEncoder.trunk") is (trunk is None), name
        assert gin.query_parameter(f"{actor}.trunk_dim") == trunk, name
        assert gin.query_parameter("ContinuousCritic.trunk_dim") == trunk, name
    gin.clear_config()
    assert ContinuousCritic(8, 1).trunk is None  # cleared: the default is back


# ------------------------------------------------------------------- conv init and pixel scaling


def _flat_kernels(enc: DrQPixelEncoder) -> list[torch.Tensor]:
    return [conv.weight.detach().flatten(1) for conv in enc.convs if isinstance(conv, nn.Conv2d)]


def test_orthogonal_conv_init_fills_the_kernel_with_orthogonal_rows_of_the_relu_gain():
    torch.manual_seed(0)
    enc = DrQPixelEncoder(9, image_size=16, conv_init="orthogonal")
    gain = nn.init.calculate_gain("relu")
    convs = [m for m in enc.convs if isinstance(m, nn.Conv2d)]
    for conv, w in zip(convs, _flat_kernels(enc)):
        assert w.shape[0] <= w.shape[1]  # 32 <= 81 and 32 <= 288: the rows are orthogonal
        eye = torch.eye(w.shape[0])
        assert torch.allclose(w @ w.T, gain**2 * eye, atol=1e-4)
        off_centre = conv.weight.detach().clone()
        off_centre[:, :, 1, 1] = 0.0
        assert off_centre.abs().sum() > 0  # taps beyond the centre are filled
        assert torch.count_nonzero(conv.bias) == 0
    # the head's linear layer is still orthogonal, unscaled ((50, 32): orthonormal columns)
    fc = enc.fc.weight.detach()
    assert torch.allclose(fc.T @ fc, torch.eye(fc.shape[1]), atol=1e-4)


def test_delta_orthogonal_conv_init_is_the_default_and_leaves_off_centre_taps_zero():
    torch.manual_seed(0)
    gain = nn.init.calculate_gain("relu")
    for enc in (
        DrQPixelEncoder(9, image_size=16),
        DrQPixelEncoder(9, 16, conv_init="delta_orthogonal"),
    ):
        assert enc.conv_init == "delta_orthogonal"
        for conv in (m for m in enc.convs if isinstance(m, nn.Conv2d)):
            w = conv.weight.detach()
            centre = w[:, :, 1, 1]
            off_centre = w.clone()
            off_centre[:, :, 1, 1] = 0.0
            assert torch.count_nonzero(off_centre) == 0
            if centre.shape[0] <= centre.shape[1]:  # 32 x 32 centres: orthogonal rows
                assert torch.allclose(centre @ centre.T, gain**2 * torch.eye(32), atol=1e-4)


def test_delta_orthogonal_draws_are_those_of_weight_init():
    torch.manual_seed(3)
    by_name = DrQPixelEncoder(9, image_size=16, conv_init="delta_orthogonal")
    torch.manual_seed(3)
    default = DrQPixelEncoder(9, image_size=16)
    for a, b in zip(by_name.state_dict().values(), default.state_dict().values()):
        assert torch.equal(a, b)


def test_an_unknown_conv_init_is_refused_by_name():
    with pytest.raises(ValueError, match="'delta_orthogonal', 'orthogonal'.*'xavier'"):
        DrQPixelEncoder(9, image_size=16, conv_init="xavier")
    with pytest.raises(ValueError, match="conv_init"):
        conv_weight_init("delta-orthogonal")


def test_pixel_shift_zero_feeds_zero_to_one():
    enc = DrQPixelEncoder(3, image_size=16, pixel_shift=0.0)
    raw = torch.tensor([0, 51, 255, 255], dtype=torch.uint8).repeat(1, 3, 16, 4)
    image = enc.image({"obs": raw})
    assert torch.allclose(image, torch.tensor([0.0, 0.2, 1.0, 1.0]).repeat(1, 3, 16, 4))
    assert image.min() == 0.0 and image.max() == 1.0
    floats = raw.float()  # an augmented batch: read, not written
    kept = floats.clone()
    assert torch.equal(enc.image({"obs": floats}), floats * (1.0 / 255.0))
    assert torch.equal(floats, kept)


# ---------------------------------------------------------------------------- the trunk's tanh


def test_trunk_without_tanh_returns_the_layernorm_output():
    from super_sac.nets.mlps import Trunk

    torch.manual_seed(0)
    plain, bare = Trunk(4, 3), Trunk(4, 3, tanh=False)
    bare.load_state_dict(plain.state_dict())
    with torch.no_grad():
        for t in (plain, bare):
            t.norm.weight.copy_(torch.tensor([3.0, 2.0, 0.5]))
    x = torch.randn(64, 4)
    pre = bare.norm(bare.fc(x))
    assert torch.equal(bare(x), pre)
    assert bare(x).abs().max() > 1.0  # unbounded: the LayerNorm's scale reaches beyond 1
    assert torch.equal(plain(x), torch.tanh(pre))  # the default is unchanged
    assert plain(x).abs().max() < 1.0


def test_trunk_tanh_reaches_the_actor_and_critic_trunks_from_gin():
    from super_sac.nets.mlps import (
        ContinuousCritic,
        ContinuousDeterministicActor,
        ContinuousStochasticActor,
    )

    for cls in (ContinuousStochasticActor, ContinuousDeterministicActor, ContinuousCritic):
        assert cls(8, 2, trunk_dim=4).trunk.tanh is True, cls.__name__
        assert cls(8, 2, trunk_dim=4, trunk_tanh=False).trunk.tanh is False, cls.__name__
        assert cls(8, 2, trunk_tanh=False).trunk is None  # ignored without a trunk
    with gin.unlock_config():
        gin.bind_parameter("ContinuousCritic.trunk_tanh", False)
        gin.bind_parameter("ContinuousStochasticActor.trunk_tanh", False)
    try:
        assert ContinuousCritic(8, 2, trunk_dim=4).trunk.tanh is False
        assert ContinuousStochasticActor(8, 2, trunk_dim=4).trunk.tanh is False
        assert ContinuousDeterministicActor(8, 2, trunk_dim=4).trunk.tanh is True
    finally:
        gin.clear_config()


def test_the_dmc_files_bind_each_papers_encoder_init_pixels_and_heads():
    from pathlib import Path

    import super_sac.augmentations  # noqa: F401  (registers the configurables)
    import super_sac.main  # noqa: F401
    from super_sac.config import parse_gin

    dmc = Path(__file__).resolve().parents[1] / "experiments" / "dmc"

    def bound(name: str, default: object) -> object:
        try:
            return gin.query_parameter(name)
        except ValueError:  # not bound: the class default
            return default

    # file: (conv_init, pixel_shift, actor, trunk_tanh)
    expected = {
        "drqv1.gin": ("orthogonal", 0.0, "ContinuousStochasticActor", True),
        "rad.gin": ("delta_orthogonal", 0.0, "ContinuousStochasticActor", False),
        "drqv2.gin": ("orthogonal", -0.5, "ContinuousDeterministicActor", True),
        "drqv2_markov.gin": ("orthogonal", -0.5, "ContinuousDeterministicActor", True),
        "bc_from_pixels.gin": ("delta_orthogonal", -0.5, "ContinuousStochasticActor", True),
        "afbc_from_pixels.gin": ("delta_orthogonal", -0.5, "ContinuousStochasticActor", True),
    }
    for name, (conv_init, shift, actor, tanh) in expected.items():
        gin.clear_config()
        parse_gin([dmc / name])
        assert bound("DrQPixelEncoder.conv_init", "delta_orthogonal") == conv_init, name
        assert bound("DrQPixelEncoder.pixel_shift", -0.5) == shift, name
        assert bound(f"{actor}.trunk_tanh", True) is tanh, name
        assert bound("ContinuousCritic.trunk_tanh", True) is tanh, name
    gin.clear_config()


def test_weights_of_another_pixel_scaling_or_head_are_refused_by_name(tmp_path):
    """The input scaling and the heads' tanh change what the weights compute, so a file saved
    with other values names the difference instead of loading into a different policy."""
    from super_sac import Agent
    from super_sac.nets.mlps import ContinuousCritic, ContinuousStochasticActor

    def agent(shift=-0.5, tanh=True):
        return Agent(
            1,
            DrQPixelEncoder(channels=3, image_size=20, pixel_shift=shift, trunk=False),
            actor_network_cls=lambda *a, **kw: ContinuousStochasticActor(
                *a, **kw, trunk_dim=8, trunk_tanh=tanh
            ),
            critic_network_cls=lambda *a, **kw: ContinuousCritic(
                *a, **kw, trunk_dim=8, trunk_tanh=tanh
            ),
            hidden_size=8,
        )

    assert "pixel_shift" not in agent().signature()  # the defaults: older files stay loadable
    file = agent().save(tmp_path / "old")
    with pytest.raises(ValueError, match=r"pixel_shift: saved None, this agent 0\.0"):
        agent(shift=0.0).load(file)
    with pytest.raises(ValueError, match=r"trunk_without_tanh: saved None, this agent \['actor', "):
        agent(tanh=False).load(file)
    agent(shift=0.0, tanh=False).load(agent(shift=0.0, tanh=False).save(tmp_path / "new"))
