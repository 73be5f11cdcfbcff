"""Networks: the tanh-Gaussian, the vectorized critic ensemble and the encoder base class."""

import math

import pytest
import torch
from torch import nn

from super_sac import nets
from super_sac.nets.distributions import (
    ATANH_EDGE,
    ScaledBeta,
    SquashedNormal,
    preimage,
    tanh_log_det_jacobian,
)
from super_sac.nets.ensemble import EnsembleLinear
from super_sac.nets.mlps import (
    ContinuousCritic,
    ContinuousDeterministicActor,
    ContinuousStochasticActor,
)


def test_tanh_gaussian_log_prob_by_hand():
    loc, scale = torch.tensor([[0.5]]), torch.tensor([[2.0]])
    dist = SquashedNormal(loc, scale)
    a = torch.tensor([[0.3]])
    u = math.atanh(0.3)
    gauss = -0.5 * ((u - 0.5) / 2.0) ** 2 - math.log(2.0) - 0.5 * math.log(2 * math.pi)
    expected = gauss - math.log(1 - 0.3**2)
    assert dist.log_prob(a).item() == pytest.approx(expected, abs=1e-5)


def test_tanh_gaussian_matches_torch_transformed_distribution():
    torch.manual_seed(0)
    loc, scale = torch.randn(64, 3), torch.rand(64, 3) + 0.1
    dist = SquashedNormal(loc, scale)
    action, log_prob = dist.rsample_with_log_prob()
    ref = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(loc, scale), [torch.distributions.TanhTransform()]
    )
    assert action.shape == (64, 3) and log_prob.shape == (64, 1)
    ref_lp = ref.log_prob(action.clamp(-1 + 1e-6, 1 - 1e-6)).sum(-1, keepdim=True)
    close = action.abs().amax(-1) < 0.999  # atanh in the reference loses precision near +-1
    assert torch.allclose(log_prob[close], ref_lp[close], atol=1e-3)
    assert torch.allclose(dist.log_prob(action)[close], log_prob[close], atol=1e-3)


def test_preimage_is_atanh_kept_inside_the_bounds():
    """Inside the bounds it is atanh; on a bound (a dataset action of exactly +-1) it is the
    finite atanh(1 - 1e-6) ~ 7.254, and the log-probability of such an action uses the same."""
    a = torch.tensor([-1.0, -0.5, 0.0, 0.3, 1.0], dtype=torch.float64)
    edge = math.atanh(1 - 1e-6)
    expected = [-edge, math.atanh(-0.5), 0.0, math.atanh(0.3), edge]
    assert ATANH_EDGE == 1e-6
    assert preimage(a).tolist() == pytest.approx(expected, abs=1e-9)
    assert edge == pytest.approx(7.2543, abs=1e-4)
    dist = SquashedNormal(torch.zeros(1, 1), torch.ones(1, 1))
    on_bound = dist.log_prob(torch.ones(1, 1))
    assert torch.isfinite(on_bound).all()
    assert on_bound.item() == pytest.approx(
        dist.log_prob(torch.tensor([[1.0 - 1e-6]])).item(), abs=1e-4
    )


def test_tanh_log_det_jacobian_is_stable_for_large_inputs():
    u = torch.tensor([0.0, 5.0, 20.0, -40.0])
    out = tanh_log_det_jacobian(u)
    assert torch.isfinite(out).all()
    assert out[0].item() == pytest.approx(0.0, abs=1e-6)
    # log(1 - tanh(u)^2) -> log 4 - 2|u| for large |u|
    assert out[2].item() == pytest.approx(math.log(4.0) - 40.0, abs=1e-4)
    naive = torch.log(1 - torch.tanh(torch.tensor(20.0)) ** 2)
    assert not torch.isfinite(naive)


def test_tanh_gaussian_given_log_scale_equals_computed():
    """The actor hands over its log-std; the log-probability and its gradients are unchanged."""
    torch.manual_seed(0)
    loc = torch.randn(8, 2, requires_grad=True)
    log_std = torch.randn(8, 2, requires_grad=True)
    action = torch.rand(8, 2) * 1.8 - 0.9
    with_log = SquashedNormal(loc, log_std.exp(), log_scale=log_std).log_prob(action)
    without = SquashedNormal(loc, log_std.exp()).log_prob(action)
    torch.testing.assert_close(with_log, without)
    grads = [torch.autograd.grad(lp.sum(), (loc, log_std)) for lp in (with_log, without)]
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


def test_stochastic_actor_log_std_stays_in_its_bounds():
    """log_std = low + (high - low) (tanh(z) + 1) / 2, checked at z -> -inf, 0, +inf."""
    actor = ContinuousStochasticActor(3, 2, log_std_low=-4.0, log_std_high=1.0, hidden_size=8)
    with torch.no_grad():
        actor.net[-1].weight.zero_()
        for z, expected in ((-1e4, -4.0), (0.0, -1.5), (1e4, 1.0)):
            actor.net[-1].bias.fill_(z)
            dist = actor(torch.zeros(1, 3))
            torch.testing.assert_close(dist.log_scale, torch.full((1, 2), expected))
            torch.testing.assert_close(dist.scale, torch.full((1, 2), math.exp(expected)))


def test_rsample_is_differentiable():
    loc = torch.zeros(4, 2, requires_grad=True)
    scale = torch.ones(4, 2, requires_grad=True)
    a, lp = SquashedNormal(loc, scale).rsample_with_log_prob()
    (a.sum() + lp.sum()).backward()
    assert loc.grad is not None and scale.grad is not None


def test_stochastic_actor_log_std_bounds():
    actor = ContinuousStochasticActor(3, 2, log_std_low=-5.0, log_std_high=2.0, hidden_size=16)
    with torch.no_grad():
        actor.net[-1].bias.fill_(1e4)
    dist = actor(torch.zeros(5, 3))
    assert torch.allclose(dist.scale, torch.full((5, 2), math.exp(2.0)))
    with torch.no_grad():
        actor.net[-1].bias.fill_(-1e4)
    assert torch.allclose(actor(torch.zeros(5, 3)).scale, torch.full((5, 2), math.exp(-5.0)))
    with pytest.raises(ValueError, match="log_std_low"):
        ContinuousStochasticActor(3, 2, log_std_low=1.0, log_std_high=0.0)


def test_deterministic_actor_bounded():
    actor = ContinuousDeterministicActor(3, 2, hidden_size=16)
    out = actor(torch.randn(7, 3) * 100)
    assert out.shape == (7, 2) and out.abs().max() <= 1.0


def test_critic_ensemble_shapes():
    critic = ContinuousCritic(5, 2, num_critics=4, hidden_size=32)
    q = critic(torch.randn(9, 5), torch.randn(9, 2))
    assert q.shape == (4, 9, 1)


def test_vectorized_ensemble_equals_members_run_one_by_one():
    torch.manual_seed(0)
    critic = ContinuousCritic(5, 2, num_critics=3, hidden_size=8)
    s, a = torch.randn(6, 5), torch.randn(6, 2)
    layers = critic.net.layers
    singles = []
    for m in range(3):
        seq = nn.Sequential(nn.Linear(7, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
        for lin, ens in zip([seq[0], seq[2], seq[4]], layers):
            lin.weight.data.copy_(ens.weight.data[m].T)
            lin.bias.data.copy_(ens.bias.data[m, 0])
        singles.append(seq)
    x = torch.cat([s, a], -1)
    q = critic(s, a)
    for m in range(3):
        assert torch.allclose(q[m], singles[m](x), atol=1e-6)
    # gradients agree member by member
    (q**2).sum().backward()
    sum(((net(x)) ** 2).sum() for net in singles).backward()
    for m in range(3):
        assert torch.allclose(layers[0].weight.grad[m], singles[m][0].weight.grad.T, atol=1e-5)
        assert torch.allclose(layers[2].bias.grad[m, 0], singles[m][4].bias.grad, atol=1e-5)


def test_detach_params_blocks_critic_gradients_but_not_action_gradients():
    critic = ContinuousCritic(3, 1, num_critics=2, hidden_size=8)
    a = torch.zeros(4, 1, requires_grad=True)
    critic(torch.randn(4, 3), a, detach_params=True).sum().backward()
    assert a.grad is not None and a.grad.abs().sum() > 0
    assert all(p.grad is None for p in critic.parameters())


def test_ensemble_linear_accepts_per_member_inputs():
    layer = EnsembleLinear(2, 3, 4)
    x = torch.randn(2, 5, 3)
    out = layer(x)
    assert torch.allclose(out[1], x[1] @ layer.weight[1] + layer.bias[1], atol=1e-6)


def test_flat_encoder_concatenates_sorted_keys():
    enc = nets.FlatEncoder(5)
    obs = {"b": torch.ones(2, 3), "a": torch.zeros(2, 2)}
    out = enc(obs)
    assert out.shape == (2, 5)
    assert torch.equal(out[0], torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0]))
    assert enc.embedding_dim == 5


def test_flat_encoder_standardises_with_the_datasets_population_statistics():
    enc = nets.FlatEncoder(3, standardize=True)
    # keys concatenate in sorted order: "a" (width 1) then "b" (width 2)
    obs = {"b": torch.tensor([[1.0, 5.0], [3.0, 5.0]]), "a": torch.tensor([[0.0], [4.0]])}
    enc.fit_statistics({k: v.numpy() for k, v in obs.items()})
    # by hand: mean (2, 2, 5); population std (2, 1, 0), plus eps 1e-3
    assert torch.allclose(enc.obs_mean, torch.tensor([2.0, 2.0, 5.0]))
    assert torch.allclose(enc.obs_std, torch.tensor([2.001, 1.001, 0.001]))
    out = enc({"a": torch.tensor([[6.0]]), "b": torch.tensor([[0.0, 5.0]])})
    assert torch.allclose(out, torch.tensor([[4.0 / 2.001, -2.0 / 1.001, 0.0]]))
    assert bool(enc.statistics_fitted)
    # the statistics travel with the state dict (checkpoints and agent.pt)
    other = nets.FlatEncoder(3, standardize=True)
    other.load_state_dict(enc.state_dict())
    assert torch.equal(other.obs_std, enc.obs_std) and bool(other.statistics_fitted)
    # without standardize the state dict stays empty (older checkpoints load unchanged)
    assert nets.FlatEncoder(3).state_dict() == {}


def test_flat_encoder_statistics_errors_name_the_fix():
    with pytest.raises(ValueError, match="standardize=True"):
        nets.FlatEncoder(3).fit_statistics({"obs": torch.zeros(4, 3)})
    enc = nets.FlatEncoder(3, standardize=True)
    with pytest.raises(ValueError, match=r"shape \(4, 2\).*width 3"):
        enc.fit_statistics({"obs": torch.zeros(4, 2)})
    with pytest.raises(ValueError, match="at least one row"):
        enc.fit_statistics({"obs": torch.zeros(0, 3)})


def test_encoder_is_abstract():
    class Incomplete(nets.Encoder):
        pass

    with pytest.raises(TypeError):
        Incomplete()


def test_weight_init_orthogonal_member_by_member():
    layer = EnsembleLinear(3, 8, 8)
    layer.apply(nets.weight_init)
    for w in layer.weight.data:
        assert torch.allclose(w @ w.T, torch.eye(8), atol=1e-5)
    assert torch.all(layer.bias == 0)


def test_scaled_beta_log_prob_by_hand():
    c1, c0 = 2.0, 3.0
    dist = ScaledBeta(torch.tensor([[c1]]), torch.tensor([[c0]]))
    a = 0.2  # x = (a + 1) / 2 = 0.6
    x = 0.6
    log_beta_fn = math.lgamma(c1) + math.lgamma(c0) - math.lgamma(c1 + c0)
    expected = (c1 - 1) * math.log(x) + (c0 - 1) * math.log(1 - x) - log_beta_fn - math.log(2)
    assert dist.log_prob(torch.tensor([[a]])).item() == pytest.approx(expected, abs=1e-5)
    assert dist.mean.item() == pytest.approx(2 * c1 / (c1 + c0) - 1)


def test_scaled_beta_samples_are_bounded_and_differentiable():
    c1 = torch.full((256, 2), 0.5, requires_grad=True)
    c0 = torch.full((256, 2), 0.5, requires_grad=True)
    action, log_prob = ScaledBeta(c1, c0).rsample_with_log_prob()
    assert action.abs().max() <= 1.0 and torch.isfinite(log_prob).all()
    (action.sum() + log_prob.sum()).backward()
    assert c1.grad is not None and torch.isfinite(c1.grad).all()


def test_stochastic_actor_beta_concentrations_exceed_one():
    actor = ContinuousStochasticActor(3, 2, hidden_size=16, beta_dist=True)
    dist = actor(torch.randn(5, 3))
    assert isinstance(dist, ScaledBeta)
    assert (dist.concentration1 > 1).all() and (dist.concentration0 > 1).all()
