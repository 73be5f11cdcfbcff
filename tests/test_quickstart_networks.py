"""The quick-start interface's network classes: QNetwork, GaussianPolicy, DeterministicPolicy."""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from super_sac.nets.mlps import ContinuousCritic, ContinuousStochasticActor
from super_sac.quickstart import (
    SAC,
    DeterministicPolicy,
    GaussianPolicy,
    QNetwork,
    soft_update,
)

# a lopsided box: scale (2.5, 0.5), bias (7.5, -1.5)
BOX = spaces.Box(np.float32([5.0, -2.0]), np.float32([10.0, -1.0]))
SCALE, BIAS = torch.tensor([2.5, 0.5]), torch.tensor([7.5, -1.5])


def states(n: int = 6, width: int = 3) -> torch.Tensor:
    return torch.randn(n, width, generator=torch.Generator().manual_seed(1))


# ------------------------------------------------------------------------------ QNetwork
def test_qnetwork_returns_both_members_of_its_critic_pair():
    torch.manual_seed(0)
    net = QNetwork(3, 2, 8)
    s, a = states(), torch.rand(6, 2) * 2 - 1
    q1, q2 = net(s, a)
    assert q1.shape == q2.shape == (6, 1)
    both = net.critic(s, a)  # (2, B, 1)
    torch.testing.assert_close(q1, both[0])
    torch.testing.assert_close(q2, both[1])
    assert not torch.allclose(q1, q2)  # two independently initialised networks
    assert set(net.state_dict()) == {f"critic.{k}" for k in net.critic.state_dict()}


def test_qnetwork_with_an_action_space_feeds_its_critics_unit_actions():
    torch.manual_seed(0)
    net = QNetwork(3, 2, 8, BOX)
    s = states(2)
    env_actions = torch.tensor([[10.0, -2.0], [6.25, -1.25]])
    unit = torch.tensor([[1.0, -1.0], [-0.5, 0.5]])  # (a - bias) / scale by hand
    q1, q2 = net(s, env_actions)
    expected = net.critic(s, unit)
    torch.testing.assert_close(q1, expected[0])
    torch.testing.assert_close(q2, expected[1])


def test_soft_update_moves_a_target_qnetwork_toward_the_source():
    torch.manual_seed(0)
    critic = QNetwork(3, 2, 8)
    critic_target = copy.deepcopy(critic)
    with torch.no_grad():
        for p in critic.parameters():
            p.add_(1.0)
    before = [p.clone() for p in critic_target.parameters()]
    soft_update(critic_target, critic, 0.5)
    for old, new, src in zip(before, critic_target.parameters(), critic.parameters()):
        torch.testing.assert_close(new, 0.5 * old + 0.5 * src)


# ------------------------------------------------------------------------------ GaussianPolicy
def test_gaussian_policy_scales_actions_into_the_bounds():
    torch.manual_seed(0)
    policy = GaussianPolicy(3, 2, 8, BOX)
    torch.testing.assert_close(policy.action_scale, SCALE)
    torch.testing.assert_close(policy.action_bias, BIAS)
    mu, log_std = policy(states())
    assert mu.shape == log_std.shape == (6, 2)
    assert bool(((log_std >= -5.0) & (log_std <= 2.0)).all())
    action, log_prob, mean = policy.sample(states())
    assert action.shape == mean.shape == (6, 2) and log_prob.shape == (6, 1)
    torch.testing.assert_close(mean, torch.tanh(mu) * SCALE + BIAS)
    low, high = torch.as_tensor(BOX.low), torch.as_tensor(BOX.high)
    assert bool(((action >= low) & (action <= high)).all())


def test_gaussian_log_prob_is_the_density_of_the_env_unit_action():
    """Change of variables by hand: a = tanh(u) * scale + bias, so
    p(a) = N(u; mu, sigma) / prod(scale * (1 - tanh(u)^2)); u is recovered from a."""
    torch.manual_seed(0)
    policy = GaussianPolicy(3, 2, 8, BOX).double()
    s = states().double()
    action, log_prob, _ = policy.sample(s)
    mu, log_std = policy(s)
    u = torch.atanh((action - BIAS.double()) / SCALE.double())
    gaussian = torch.distributions.Normal(mu, log_std.exp()).log_prob(u)
    jacobian = torch.log(SCALE.double() * (1 - torch.tanh(u) ** 2))
    expected = (gaussian - jacobian).sum(-1, keepdim=True)
    torch.testing.assert_close(log_prob, expected, rtol=1e-6, atol=1e-6)


def test_gaussian_density_integrates_to_one_over_the_bounds():
    """One action dimension on [5, 10]: the trapezoid integral of exp(log_prob) over the
    policy's own sorted samples is 1 (less the mass beyond the extreme samples) only if
    log_prob is a density over env-unit actions (without the log-scale term it is 2.5)."""
    torch.manual_seed(0)
    box = spaces.Box(np.float32([5.0]), np.float32([10.0]))
    policy = GaussianPolicy(3, 1, 8, box).double()
    with torch.no_grad():
        action, log_prob, _ = policy.sample(states(1).double().expand(400_000, 3))
    order = action[:, 0].argsort()
    integral = torch.trapezoid(log_prob[order, 0].exp(), action[order, 0])
    assert float(integral) == pytest.approx(1.0, abs=2e-3)


def test_gaussian_sample_is_reparameterised():
    torch.manual_seed(0)
    policy = GaussianPolicy(3, 2, 8, BOX)
    action, log_prob, _ = policy.sample(states())
    (action.sum() + log_prob.sum()).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())


def test_policies_without_an_action_space_act_in_unit_bounds():
    torch.manual_seed(0)
    gaussian = GaussianPolicy(3, 2, 8)
    # 0-dim tensors, as the interface's: float() works on them
    assert float(gaussian.action_scale) == 1.0 and float(gaussian.action_bias) == 0.0
    action, _, mean = gaussian.sample(states())
    assert bool((action.abs() <= 1).all()) and bool((mean.abs() <= 1).all())


# ------------------------------------------------------------------------------ Deterministic
def test_deterministic_policy_noise_is_clipped_and_of_the_given_std():
    torch.manual_seed(0)
    policy = DeterministicPolicy(3, 2, 8, BOX, noise_std=0.1, noise_clip=0.25)
    s = states(1).expand(40_000, 3)
    with torch.no_grad():
        action, log_prob, mean = policy.sample(s)
        torch.testing.assert_close(mean, policy(s))
        torch.testing.assert_close(mean, torch.tanh(policy.actor.net(s)) * SCALE + BIAS)
    assert torch.equal(log_prob, torch.zeros(40_000, 1))
    unit_noise = (action - mean) / SCALE
    assert float(unit_noise.abs().max()) <= 0.25 + 1e-5
    inside = (mean[0] - BIAS) / SCALE  # the clamp to [-1, 1] only matters near the bounds
    assert bool((inside.abs() < 0.6).all())
    # a normal of std 0.1 clamped at 2.5 std keeps a std of 0.0989 (1.2% of draws at the clip)
    assert unit_noise.std(0).tolist() == pytest.approx([0.0989, 0.0989], rel=0.03)
    unclipped = DeterministicPolicy(3, 2, 8, BOX, noise_std=1.0, noise_clip=None)
    with torch.no_grad():
        wide, _, _ = unclipped.sample(s)
    low, high = torch.as_tensor(BOX.low), torch.as_tensor(BOX.high)
    assert bool(((wide >= low) & (wide <= high)).all())  # clamped to the bounds
    assert bool((wide == high).any()) and bool((wide == low).any())


# ------------------------------------------------------------------------------ inputs
def test_states_are_flattened_and_cast_and_wrong_widths_are_refused():
    torch.manual_seed(0)
    policy = GaussianPolicy(6, 2, 8)
    flat = torch.randn(4, 6)
    torch.testing.assert_close(policy(flat.view(4, 2, 3))[0], policy(flat)[0])
    torch.testing.assert_close(policy(flat.view(4, 1, 6))[0], policy(flat)[0])  # (B, 1, n)
    torch.testing.assert_close(policy(flat[0])[0], policy(flat)[0][0])  # one state
    torch.testing.assert_close(policy(flat.double())[0], policy(flat)[0])
    with pytest.raises(ValueError, match=r"expects states of shape \(B, 6\).*got \(4, 5\)"):
        policy(torch.randn(4, 5))


def test_bad_action_spaces_and_sizes_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="has 2 dimensions, but num_actions is 3"):
        GaussianPolicy(3, 3, 8, BOX)
    with pytest.raises(ValueError, match="finite bounds"):
        QNetwork(3, 1, 8, spaces.Box(-np.inf, np.inf, (1,)))
    with pytest.raises(TypeError, match="Box.*sac_discrete.gin"):
        DeterministicPolicy(3, 1, 8, spaces.Discrete(2))
    with pytest.raises(ValueError, match="num_inputs must be an int >= 1"):
        QNetwork(0, 1, 8)
    with pytest.raises(TypeError, match="wraps a ContinuousStochasticActor"):
        GaussianPolicy(3, 2, 8, actor=torch.nn.Linear(3, 4))
    with pytest.raises(ValueError, match="two critics"):
        QNetwork(3, 2, 8, critic=ContinuousCritic(3, 2, num_critics=3))
    with pytest.raises(ValueError, match="no Beta"):
        GaussianPolicy(3, 2, 8, actor=ContinuousStochasticActor(3, 2, beta_dist=True))


# ------------------------------------------------------------------------------ SAC's views
def test_sac_exposes_its_networks_through_the_interface_classes():
    sac = SAC(gym.make("Pendulum-v1"), hidden_size=16, batch_size=8, seed=3)
    policy, critic, target = sac.policy, sac.critic, sac.critic_target
    assert isinstance(policy, GaussianPolicy) and policy is sac.policy
    assert isinstance(critic, QNetwork) and isinstance(target, QNetwork)
    assert policy.actor is sac.agent.actor and critic.critic is sac.agent.critic
    assert target.critic is sac.target_agent.critic
    torch.testing.assert_close(policy.action_scale, torch.tensor([2.0]))
    obs, _ = sac.env.reset(seed=0)
    with torch.no_grad():
        _, _, mean = policy.sample(torch.as_tensor(obs)[None])
        np.testing.assert_allclose(mean[0].numpy(), sac.select_action(obs, evaluate=True), 1e-6)
        env_action = torch.tensor([[1.0]])  # 0.5 in the critics' [-1, 1]
        q1, q2 = critic(torch.as_tensor(obs)[None], env_action)
        both = sac.agent.critic(torch.as_tensor(obs)[None], torch.tensor([[0.5]]))
        t1, t2 = target(torch.as_tensor(obs)[None], env_action)
        target_both = sac.target_agent.critic(torch.as_tensor(obs)[None], torch.tensor([[0.5]]))
    torch.testing.assert_close(torch.stack([q1, q2]), both)
    torch.testing.assert_close(torch.stack([t1, t2]), target_both)


def test_sac_views_follow_training_and_a_replaced_network():
    sac = SAC(gym.make("Pendulum-v1"), hidden_size=16, batch_size=8, seed=3)
    s = torch.zeros(1, 3)
    before = sac.policy(s)[0].detach().clone()
    sac.train(num_episodes=1, max_steps=20, verbose=False, warmup_steps=10)
    assert sac.updates > 0
    assert not torch.equal(sac.policy(s)[0], before)  # same parameters as the trained actor
    old_view = sac.critic
    sac.agent.critic = copy.deepcopy(sac.agent.critic)
    assert sac.critic is not old_view and sac.critic.critic is sac.agent.critic


def test_deterministic_sac_policy_explores_with_its_own_noise():
    sac = SAC(
        gym.make("Pendulum-v1"), hidden_size=16, policy_type="Deterministic", exploration_noise=0.3
    )
    policy = sac.policy
    assert isinstance(policy, DeterministicPolicy) and policy.actor is sac.agent.actor
    assert policy.noise_std == 0.3 and policy.noise_clip is None
    sac.exploration_noise = 0.5
    assert sac.policy is policy and policy.noise_std == 0.5  # follows the agent's setting
    obs = torch.zeros(1, 3)
    with torch.no_grad():
        np.testing.assert_allclose(
            policy(obs)[0].numpy(), sac.select_action(np.zeros(3), evaluate=True), 1e-6
        )
    assert math.isclose(float(policy.action_scale), 2.0)


def test_sac_views_of_a_sac_on_a_row_observation_and_of_a_beta_actor(tmp_path):
    import gin

    row = gym.wrappers.TransformObservation(
        gym.make("Pendulum-v1"), lambda o: o[None], spaces.Box(-8.0, 8.0, (1, 3), np.float32)
    )  # observations of shape (1, 3): batches are (B, 1, 3)
    sac = SAC(row, hidden_size=16)
    batch = torch.zeros(2, 1, 3)
    action, log_prob, _ = sac.policy.sample(batch)
    assert action.shape == (2, 1) and log_prob.shape == (2, 1)
    assert sac.critic(batch, action)[0].shape == (2, 1)
    gin.parse_config("ContinuousStochasticActor.beta_dist = True")
    try:
        beta = SAC(gym.make("Pendulum-v1"), hidden_size=16)
    finally:
        gin.clear_config()
    with pytest.raises(ValueError, match="beta_dist = True.*Fix: use sac.agent.actor"):
        _ = beta.policy
