"""Advantage estimates, AFBC filters, the AFBC loss and advantage-based priorities, with numbers
computed by hand on stub critics and actors."""

import math

import numpy as np
import pytest
import torch

from super_sac import Agent, adv_estimator, learning, nets, optim
from super_sac import learning_utils as lu
from super_sac.replay import AdvantageIndex, Batch, ReplayBuffer


class _Samples:
    """A stand-in for a policy distribution whose samples are fixed."""

    def __init__(self, actions):
        self.actions = actions

    def sample(self):
        return self.actions


class _ContinuousStub:
    """Q_c(s, a) = (c + 1) * a + s for c = 0, 1 (so the critic mean is 1.5 a + s); the actor's
    K = 3 samples for B = 2 states are rows (k, b) -> 0, 1, 2, -1, 4, 0."""

    discrete = False
    adv_method = "mean"

    def critic(self, rep, action):
        return torch.stack([(c + 1) * action + rep for c in range(2)])

    def actor(self, rep):
        assert rep.shape == (6, 1)  # K * B rows, k-major
        return _Samples(torch.tensor([[0.0], [1.0], [2.0], [-1.0], [4.0], [0.0]]))


class _DiscreteStub:
    """Two critics over 3 actions for one state: [1, 2, 6] and [3, 4, 2] (mean [2, 3, 4]);
    policy probabilities [0.5, 0.25, 0.25]."""

    discrete = True
    adv_method = "indirect"

    def critic(self, rep):
        return torch.tensor([[[1.0, 2.0, 6.0]], [[3.0, 4.0, 2.0]]])

    def actor(self, rep):
        return torch.distributions.Categorical(probs=torch.tensor([[0.5, 0.25, 0.25]]))


def test_mean_and_max_value_estimates_over_policy_samples():
    stub, rep = _ContinuousStub(), torch.tensor([[1.0], [2.0]])
    # state 1: samples 0, 2, 4 -> Q = 1, 4, 7; state 2: samples 1, -1, 0 -> Q = 3.5, 0.5, 2
    mean = adv_estimator.estimate_value(stub, rep, "mean", 3, critic_reduction="mean")
    assert torch.allclose(mean, torch.tensor([[4.0], [2.0]]))
    best = adv_estimator.estimate_value(stub, rep, "max", 3, critic_reduction="mean")
    assert torch.allclose(best, torch.tensor([[7.0], [3.5]]))
    # dataset action 2 in both states: Q = 4 and 5
    actions = torch.tensor([[2.0], [2.0]])
    adv = adv_estimator.estimate_advantage(stub, rep, actions, "mean", 3, critic_reduction="mean")
    assert torch.allclose(adv, torch.tensor([[0.0], [3.0]]))
    adv = adv_estimator.estimate_advantage(stub, rep, actions, "max", 3, critic_reduction="mean")
    assert torch.allclose(adv, torch.tensor([[-3.0], [1.5]]))
    # the default is the critics' minimum, as in the original: min(a + s, 2a + s);
    # state 1: samples 0, 2, 4 -> 1, 3, 5; state 2: samples 1, -1, 0 -> 3, 0, 2
    mean = adv_estimator.estimate_value(stub, rep, "mean", num_samples=3)
    assert torch.allclose(mean, torch.tensor([[3.0], [5.0 / 3.0]]))
    # dataset action 2: min Q = 3 and 4
    adv = adv_estimator.estimate_advantage(stub, rep, actions, "max", num_samples=3)
    assert torch.allclose(adv, torch.tensor([[3.0 - 5.0], [4.0 - 3.0]]))
    # the ensemble minimum instead of the mean: Q = min(a + s, 2a + s)
    q = adv_estimator.q_of_actions(stub, rep, torch.tensor([[-1.0], [1.0]]), "min")
    assert torch.allclose(q, torch.tensor([[-1.0], [3.0]]))


def test_indirect_value_is_the_policy_expectation_for_discrete_actions():
    stub, rep = _DiscreteStub(), torch.zeros(1, 4)
    value = adv_estimator.estimate_value(stub, rep, "indirect", critic_reduction="mean")
    assert torch.allclose(value, torch.tensor([[0.5 * 2 + 0.25 * 3 + 0.25 * 4]]))  # 2.75
    adv = adv_estimator.estimate_advantage(stub, rep, torch.tensor([2]), critic_reduction="mean")
    assert torch.allclose(adv, torch.tensor([[4.0 - 2.75]]))
    # default: the critics' minimum [1, 2, 2] -> V = 0.5 + 0.5 + 0.5 = 1.5, A(2) = 2 - 1.5
    adv = adv_estimator.estimate_advantage(stub, rep, torch.tensor([2]))
    assert torch.allclose(adv, torch.tensor([[0.5]]))
    with pytest.raises(ValueError, match="continuous actions.*indirect"):
        adv_estimator.estimate_value(stub, rep, "mean")
    with pytest.raises(ValueError, match="discrete actions.*'mean' or 'max'"):
        adv_estimator.estimate_value(_ContinuousStub(), torch.zeros(2, 1), "indirect")


def test_binary_exponential_and_unfiltered_weights():
    adv = torch.tensor([-1.0, 0.0, 0.5, 10.0])
    binary = adv_estimator.filter_weights(adv, "binary")
    assert binary.tolist() == [0.0, 1.0, 1.0, 1.0]  # A = 0 is kept, as in the original
    exp = adv_estimator.filter_weights(adv, "exp", temperature=2.0, max_weight=20.0)
    # exp(-0.5), exp(0), exp(0.25), exp(5) = 148.4 clipped at 20
    expected = [math.exp(-0.5), 1.0, math.exp(0.25), 20.0]
    assert torch.allclose(exp, torch.tensor(expected))
    huge = adv_estimator.filter_weights(torch.tensor([1e6]), "exp", 1.0, 20.0)
    assert torch.isfinite(huge).all() and huge.item() == pytest.approx(20.0)
    assert adv_estimator.filter_weights(adv, "none").tolist() == [1.0] * 4
    with pytest.raises(ValueError, match="unknown AFBC filter 'soft'"):
        adv_estimator.filter_weights(adv, "soft")


def test_afbc_loss_on_a_tiny_batch():
    log_prob = torch.tensor([[-1.0], [-2.0], [-3.0]])
    weights = torch.tensor([[1.0], [0.0], [2.0]])
    # -(1 * -1 + 0 * -2 + 2 * -3) / 3 = 7 / 3
    assert lu.afbc_actor_loss(log_prob, weights).item() == pytest.approx(7.0 / 3.0)


def _batch(obs, action):
    n = action.shape[0]
    ones = torch.ones(n, 1)
    return Batch({"obs": obs}, action, ones, {"obs": obs}, 0 * ones, ones, ones, np.arange(n))


def test_offline_actor_update_maximises_the_weighted_likelihood_of_data_actions():
    torch.manual_seed(0)
    agent = Agent(2, nets.FlatEncoder(3), hidden_size=16)
    obs, action = torch.randn(4, 3), torch.rand(4, 2) * 1.6 - 0.8
    batch = _batch(obs, action)
    importance = torch.tensor([[2.0], [0.0], [1.0], [1.0]])
    with torch.no_grad():
        log_prob = agent.actor(agent.encoder({"obs": obs})).log_prob(action)
    expected = -(importance * log_prob).mean()
    critic_before = [p.clone() for p in agent.critic.parameters()]
    opt = optim.build_optimizer(optim.ParamGroup(list(agent.actor.parameters()), 1e-2))
    logs = learning.offline_actor_update(
        agent, batch, opt, adv_filter="none", importance_weights=importance
    )
    assert logs["actor/afbc_loss"].item() == pytest.approx(expected.item(), rel=1e-5)
    assert logs["actor/advantages"].tolist() == [0.0] * 4  # no critic is evaluated
    for _ in range(30):
        learning.offline_actor_update(agent, batch, opt, adv_filter="none")
    with torch.no_grad():
        after = agent.actor(agent.encoder({"obs": obs})).log_prob(action)
    assert after.mean() > log_prob.mean() + 1.0  # the data became more likely
    assert all(torch.equal(a, b) for a, b in zip(critic_before, agent.critic.parameters()))


def test_deterministic_bc_error_on_a_tiny_batch():
    pred = torch.tensor([[0.5, -0.5], [0.0, 1.0]])
    action = torch.tensor([[0.0, 0.5], [0.0, -1.0]])
    # ((0.25 + 1) / 2, (0 + 4) / 2)
    assert lu.deterministic_bc_error(pred, action).tolist() == [[0.625], [2.0]]


def test_behavioral_cloning_fits_a_deterministic_actor_by_weighted_squared_error():
    torch.manual_seed(0)
    agent = Agent(
        2,
        nets.FlatEncoder(3),
        hidden_size=16,
        actor_network_cls=nets.mlps.ContinuousDeterministicActor,
    )
    obs, action = torch.randn(4, 3), torch.rand(4, 2) * 1.6 - 0.8
    importance = torch.tensor([[2.0], [0.0], [1.0], [1.0]])
    with torch.no_grad():
        pred = agent.actor(agent.encoder({"obs": obs}))
    # the batch mean of each sample's weighted mean squared error over the action's dimensions
    expected = (importance * (pred - action).pow(2)).mean()
    opt = optim.build_optimizer(optim.ParamGroup(list(agent.actor.parameters()), 1e-2))
    logs = learning.offline_actor_update(
        agent, _batch(obs, action), opt, adv_filter="none", importance_weights=importance
    )
    assert logs["actor/afbc_loss"].item() == pytest.approx(expected.item(), rel=1e-5)
    assert logs["actor/bc_mse"].item() == pytest.approx((pred - action).pow(2).mean().item())
    assert "actor/log_prob_data" not in logs
    # unweighted, the loss is d3rlpy's deterministic BC loss, F.mse_loss(mu(s), a)
    with torch.no_grad():
        pred = agent.actor(agent.encoder({"obs": obs}))
    logs = learning.offline_actor_update(agent, _batch(obs, action), opt, adv_filter="none")
    mse = torch.nn.functional.mse_loss(pred, action)
    assert logs["actor/afbc_loss"].item() == pytest.approx(mse.item(), rel=1e-5)
    for _ in range(100):
        learning.offline_actor_update(agent, _batch(obs, action), opt, adv_filter="none")
    with torch.no_grad():
        after = agent.actor(agent.encoder({"obs": obs}))
    assert (after - action).pow(2).mean() < 0.1 * mse


def test_binary_filter_ignores_actions_with_negative_advantage():
    torch.manual_seed(0)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=16)
    obs, action = torch.randn(8, 3), torch.rand(8, 1) * 1.6 - 0.8
    torch.manual_seed(1)
    adv = adv_estimator.estimate_advantage(agent, agent.encoder({"obs": obs}), action, "mean", 4)
    with torch.no_grad():
        log_prob = agent.actor(agent.encoder({"obs": obs})).log_prob(action)
    expected = -((adv >= 0).float() * log_prob).mean()
    opt = optim.build_optimizer(optim.ParamGroup(list(agent.actor.parameters()), 1e-3))
    torch.manual_seed(1)  # the same policy samples for V(s)
    logs = learning.offline_actor_update(agent, _batch(obs, action), opt, adv_filter="binary")
    assert logs["actor/afbc_loss"].item() == pytest.approx(expected.item(), rel=1e-5)
    assert torch.allclose(logs["actor/advantages"], adv.reshape(-1))
    assert logs["actor/filter_mean"].item() == pytest.approx((adv >= 0).float().mean().item())


def test_advantage_priorities_and_prioritized_actor_batches():
    # (max(A, 0) + 1e-4)^0.6 (Grigsby & Qi 2021; the original super_sac)
    priorities = adv_estimator.advantage_priorities(torch.tensor([[-3.0], [0.0], [1.0], [20.0]]))
    expected = [1e-4**0.6, 1e-4**0.6, 1.0001**0.6, 20.0001**0.6]  # 0.00398, 0.00398, 1.00006, 6.036
    assert torch.allclose(priorities, torch.tensor(expected))
    buffer = ReplayBuffer(4, seed=0, verbose=False)
    buffer.push(
        obs={"obs": np.arange(4, dtype=np.float32)[:, None]},
        action=np.zeros((4, 1), np.float32),
        reward=np.zeros(4),
        next_obs={"obs": np.zeros((4, 1), np.float32)},
        done=np.zeros(4),
        discount=np.full(4, 0.99),
    )
    index = AdvantageIndex(4, seed=0)
    index.add(np.arange(4))
    assert index.priorities(np.arange(4)).tolist() == [1.0] * 4  # unseen: the max priority
    index.update(np.arange(4), np.array([1.0, 1.0, 2.0, 4.0]))
    # total 8, four strata of width 2: [0,2) -> slot 0 or 1, [2,4) -> slot 2, [4,8) -> slot 3
    batch, importance = index.sample(buffer, 4)
    assert batch.idxs[0] in (0, 1) and batch.idxs[1:].tolist() == [2, 3, 3]
    assert batch.obs["obs"][1:, 0].tolist() == [2.0, 3.0, 3.0]  # gathered from the buffer
    # importance 1 / (N P(i)) = (8 / 4) / p_i
    assert importance[1:, 0].tolist() == [1.0, 0.5, 0.5]
    index.add(np.array([0]))  # an overwritten slot gets the largest priority seen (4)
    assert index.priorities(np.array([0])).tolist() == [4.0]
    restored = AdvantageIndex(4)
    restored.load_state_dict(index.state_dict())
    assert restored.priorities(np.arange(4)).tolist() == [4.0, 1.0, 2.0, 4.0]
    with pytest.raises(ValueError, match="positive"):
        index.update(np.array([0]), np.array([0.0]))


def test_importance_weights_keep_the_uniform_objective():
    """E_P[w_i / (N P(i))] equals the uniform mean of w (here over many draws)."""
    index, weights = AdvantageIndex(5, seed=3), np.array([0.5, 1.0, 2.0, 4.0, 0.1])
    index.add(np.arange(5))
    index.update(np.arange(5), weights)
    buffer = ReplayBuffer(5, verbose=False)
    buffer.push(
        obs={"obs": np.zeros((5, 1), np.float32)},
        action=np.zeros((5, 1), np.float32),
        reward=np.zeros(5),
        next_obs={"obs": np.zeros((5, 1), np.float32)},
        done=np.zeros(5),
        discount=np.ones(5),
    )
    batch, importance = index.sample(buffer, 20000)
    estimate = float((weights[batch.idxs] * importance[:, 0].numpy()).mean())
    assert estimate == pytest.approx(weights.mean(), rel=0.02)
