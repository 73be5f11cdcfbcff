"""Update functions: TD targets for SAC/TD3/DDPG, actor and alpha updates, optimizers."""

import copy
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from super_sac import Agent, learning, nets, optim
from super_sac import learning_utils as lu
from super_sac.nets.mlps import ContinuousDeterministicActor
from super_sac.replay import Batch


class LinearInActionCritic(nn.Module):
    """Q_i(s, a) = c_i + sum(a): known values for hand-computed targets."""

    def __init__(self, constants):
        super().__init__()
        self.c = torch.tensor(constants).view(-1, 1, 1)

    def forward(self, state, action, detach_params=False):
        return self.c + action.sum(-1, keepdim=True).unsqueeze(0)


class ConstantActor(nn.Module):
    def __init__(self, value):
        super().__init__()
        self.value = value

    def forward(self, state):
        return torch.full((state.shape[0], 1), self.value)


class FixedPolicy:
    def __init__(self, action, log_prob):
        self.action, self.log_prob = action, log_prob

    def rsample_with_log_prob(self):
        return self.action, self.log_prob


def _batch(reward, done, discount):
    b = len(reward)
    col = lambda v: torch.tensor(v, dtype=torch.float32).view(b, 1)  # noqa: E731
    return Batch(
        obs={"obs": torch.zeros(b, 2)},
        action=torch.zeros(b, 1),
        reward=col(reward),
        next_obs={"obs": torch.zeros(b, 2)},
        done=col(done),
        discount=col(discount),
        weights=torch.ones(b, 1),
        idxs=None,
    )


def _stub_agent(actor, critic, stochastic, num_critics=2):
    return SimpleNamespace(
        encoder=lambda o: o["obs"],
        actor=actor,
        critic=critic,
        stochastic=stochastic,
        num_critics=num_critics,
        discrete=False,
    )


def test_sac_target_with_entropy_term_terminal_and_truncated():
    policy = FixedPolicy(torch.tensor([[0.2], [0.2]]), torch.tensor([[-1.5], [-1.5]]))
    agent = _stub_agent(lambda rep: policy, None, True)
    target_agent = _stub_agent(None, LinearInActionCritic([3.0, 2.0]), True)
    batch = _batch(reward=[1.0, 1.0], done=[1.0, 0.0], discount=[0.99, 0.99])
    y = learning.compute_td_target(
        agent, target_agent, batch, alpha=torch.tensor(0.1), target_critic_ensemble_n=2
    )
    # min(3.2, 2.2) - 0.1 * (-1.5) = 2.35; row 0 terminated, row 1 truncated (bootstraps)
    assert torch.allclose(y, torch.tensor([[1.0], [1.0 + 0.99 * 2.35]]))


def test_sac_nstep_target_uses_stored_discount():
    policy = FixedPolicy(torch.tensor([[0.0]]), torch.tensor([[0.0]]))
    agent = _stub_agent(lambda rep: policy, None, True)
    target_agent = _stub_agent(None, LinearInActionCritic([4.0, 5.0]), True)
    # a 3-step transition with gamma 0.5: reward 1 + 0.5*2 + 0.25*3 = 2.75, discount 0.125
    y = learning.compute_td_target(
        agent,
        target_agent,
        _batch([2.75], [0.0], [0.125]),
        alpha=torch.tensor(0.0),
        target_critic_ensemble_n=2,
    )
    assert y.item() == pytest.approx(2.75 + 0.125 * 4.0)


def test_td3_target_uses_target_actor_and_clipped_smoothing_noise():
    agent = _stub_agent(ConstantActor(-0.5), None, False)
    target_agent = _stub_agent(ConstantActor(0.5), LinearInActionCritic([1.0, 2.0]), False)
    batch = _batch([0.0] * 4000, [0.0] * 4000, [1.0] * 4000)
    kwargs = dict(alpha=torch.tensor(0.0), target_critic_ensemble_n=2)
    y = learning.compute_td_target(
        agent, target_agent, batch, use_target_actor=True, target_noise_std=0.0, **kwargs
    )
    assert torch.allclose(y, torch.full((4000, 1), 1.5))  # min(1, 2) + mu'(s') = 1 + 0.5
    y_online = learning.compute_td_target(
        agent, target_agent, batch, use_target_actor=False, target_noise_std=0.0, **kwargs
    )
    assert torch.allclose(y_online, torch.full((4000, 1), 0.5))
    torch.manual_seed(0)
    y_noisy = learning.compute_td_target(
        agent,
        target_agent,
        batch,
        use_target_actor=True,
        target_noise_std=0.2,
        target_noise_clip=0.3,
        **kwargs,
    )
    # a' = clip(0.5 + clip(eps, -0.3, 0.3), -1, 1) lies in [0.2, 0.8]
    assert y_noisy.min() >= 1.2 - 1e-6 and y_noisy.max() <= 1.8 + 1e-6
    assert y_noisy.std() > 0.1
    assert y_noisy.mean().item() == pytest.approx(1.5, abs=0.01)


def _agent(actor_cls=None, num_critics=2):
    kwargs = {} if actor_cls is None else {"actor_network_cls": actor_cls}
    return Agent(2, nets.FlatEncoder(3), num_critics=num_critics, hidden_size=16, **kwargs)


def _real_batch(b=8):
    torch.manual_seed(1)
    return Batch(
        obs={"obs": torch.randn(b, 3)},
        action=torch.rand(b, 2) * 2 - 1,
        reward=torch.randn(b, 1),
        next_obs={"obs": torch.randn(b, 3)},
        done=torch.zeros(b, 1),
        discount=torch.full((b, 1), 0.99),
        weights=torch.ones(b, 1),
        idxs=None,
    )


def test_critic_update_trains_only_critics():
    agent = _agent()
    target = learning.make_target_agent(agent)
    opt = optim.build_optimizer(optim.ParamGroup(list(agent.critic.parameters()), 1e-2))
    actor_before = copy.deepcopy(agent.actor.state_dict())
    critic_before = copy.deepcopy(agent.critic.state_dict())
    batch = _real_batch()
    losses = [
        learning.critic_update(
            agent, target, batch, opt, alpha=torch.tensor(0.1), target_critic_ensemble_n=2
        )["critic/loss"]
        for _ in range(30)
    ]
    assert losses[-1] < losses[0]
    for k, v in agent.actor.state_dict().items():
        assert torch.equal(v, actor_before[k])
    assert any(not torch.equal(v, critic_before[k]) for k, v in agent.critic.state_dict().items())
    assert all(not p.requires_grad for p in target.parameters())


def test_sac_actor_loss_matches_formula_and_leaves_critics_alone():
    agent = _agent()
    opt = optim.build_optimizer(optim.ParamGroup(list(agent.actor.parameters()), 1e-3))
    batch = _real_batch()
    alpha = torch.tensor(0.2)
    reference = copy.deepcopy(agent)
    torch.manual_seed(5)
    rep = reference.encoder(batch.obs)
    action, log_prob = reference.actor(rep).rsample_with_log_prob()
    q = reference.critic(rep, action)
    expected_min = (alpha * log_prob - q.amin(0)).mean()
    expected_mean = (alpha * log_prob - q.mean(0)).mean()
    critic_before = copy.deepcopy(agent.critic.state_dict())
    torch.manual_seed(5)
    logs = learning.online_actor_update(agent, batch, opt, alpha=alpha, actor_q_reduction="min")
    assert logs["actor/loss"].item() == pytest.approx(expected_min.item(), abs=1e-5)
    assert logs["actor/log_prob"].item() == pytest.approx(log_prob.mean().item(), abs=1e-5)
    for k, v in agent.critic.state_dict().items():
        assert torch.equal(v, critic_before[k])
    assert all(p.grad is None for p in agent.critic.parameters())
    agent2 = copy.deepcopy(reference)
    opt2 = optim.build_optimizer(optim.ParamGroup(list(agent2.actor.parameters()), 1e-3))
    torch.manual_seed(5)
    logs = learning.online_actor_update(agent2, batch, opt2, alpha=alpha, actor_q_reduction="mean")
    assert logs["actor/loss"].item() == pytest.approx(expected_mean.item(), abs=1e-5)


def test_deterministic_actor_loss_uses_first_critic():
    agent = _agent(ContinuousDeterministicActor)
    opt = optim.build_optimizer(optim.ParamGroup(list(agent.actor.parameters()), 1e-3))
    batch = _real_batch()
    with torch.no_grad():
        rep = agent.encoder(batch.obs)
        expected = -agent.critic(rep, agent.actor(rep))[0].mean()
    logs = learning.online_actor_update(
        agent, batch, opt, alpha=torch.tensor(0.0), actor_q_reduction="first"
    )
    assert logs["actor/loss"].item() == pytest.approx(expected.item(), abs=1e-6)


def test_alpha_update_moves_alpha_towards_target_entropy():
    log_alpha = torch.tensor(0.0, requires_grad=True)
    opt = torch.optim.Adam([log_alpha], lr=0.1)
    # entropy estimate -E[log pi] = -2 is below the target 0 -> alpha must grow
    logs = learning.alpha_update(log_alpha, opt, torch.tensor(2.0), target_entropy=0.0)
    # Adam's first step moves by exactly lr: log alpha 0 -> 0.1; the logs report the new alpha
    assert log_alpha.item() == pytest.approx(0.1)
    assert logs["alpha/value"].item() == pytest.approx(math.exp(0.1))
    logs = learning.alpha_update(log_alpha, opt, torch.tensor(-2.0), target_entropy=0.0)
    assert log_alpha.item() < 0.1


def test_optimizer_groups_keep_their_own_lr_l2_and_clip():
    a = nn.Parameter(torch.zeros(3))
    b = nn.Parameter(torch.zeros(3))
    opt = optim.build_optimizer(
        optim.ParamGroup([a], 0.1, l2=0.5, clip=1.0),
        optim.ParamGroup([b], 0.2),
        optim.ParamGroup([], 0.3),
    )
    assert len(opt.param_groups) == 2
    assert opt.param_groups[0]["weight_decay"] == 0.5
    assert opt.param_groups[0]["max_grad_norm"] == 1.0
    loss = (a * torch.tensor([30.0, 40.0, 0.0])).sum() + (b * 100.0).sum()
    optim.optimizer_step(opt, loss)
    # a's gradient (norm 50) was clipped to norm 1; b's (norm 173) was not
    assert torch.allclose(a.grad.norm(), torch.tensor(1.0), atol=1e-5)
    assert torch.allclose(b.grad, torch.full((3,), 100.0))
    assert optim.build_optimizer(optim.ParamGroup([], 1.0)) is None


def test_make_target_agent_is_a_frozen_copy():
    agent = _agent()
    target = learning.make_target_agent(agent)
    for p, q in zip(agent.parameters(), target.parameters()):
        assert torch.equal(p, q) and p is not q and not q.requires_grad
    lu.soft_update(lu.params_of(target.critic), lu.params_of(agent.critic), 1.0)


class TrainableOffsetCritic(nn.Module):
    """Q_i(s, a) = c_i + sum(a) with trainable offsets c_i."""

    def __init__(self, constants):
        super().__init__()
        self.c = nn.Parameter(torch.tensor(constants).view(-1, 1, 1))

    def forward(self, state, action, detach_params=False):
        return self.c + action.sum(-1, keepdim=True).unsqueeze(0)


def test_critic_update_reports_each_critics_weighted_mse():
    policy = FixedPolicy(torch.zeros(2, 1), torch.zeros(2, 1))
    critic = TrainableOffsetCritic([1.0, 3.0])
    agent = _stub_agent(lambda rep: policy, critic, True)
    target_agent = _stub_agent(None, LinearInActionCritic([2.0, 4.0]), True)
    batch = _batch(reward=[1.0, 0.0], done=[0.0, 1.0], discount=[0.5, 0.5])
    batch.action = torch.tensor([[0.5], [-1.0]])
    batch.weights = torch.tensor([[1.0], [3.0]])
    opt = torch.optim.SGD(critic.parameters(), lr=0.1)
    logs = learning.critic_update(
        agent, target_agent, batch, opt, alpha=torch.tensor(0.3), target_critic_ensemble_n=2
    )
    # y = r + 0.5 (1 - done) min(2, 4) = [2, 0]; Q_1 = 1 + a = [1.5, 0], Q_2 = 3 + a = [3.5, 2]
    # critic 1: (1 * 0.25 + 3 * 0) / 2 = 0.125; critic 2: (1 * 2.25 + 3 * 4) / 2 = 7.125
    torch.testing.assert_close(logs["critic/member_mse"], torch.tensor([0.125, 7.125]))
    assert logs["critic/loss"].item() == pytest.approx(0.5 * (0.125 + 7.125))
    assert critic.c.flatten().tolist() != [1.0, 3.0]  # the step ran after the errors were taken


def test_alpha_update_gradient_equals_autograd_of_the_loss():
    log_alpha = torch.tensor(0.3, requires_grad=True)
    log_prob_mean = torch.tensor(-0.7)
    lu.alpha_loss(log_alpha, log_prob_mean, -2.0).backward()
    expected = log_alpha.grad.clone()  # -(E[log pi] + H) = -(-0.7 - 2.0) = 2.7
    assert expected.item() == pytest.approx(2.7)

    class Recorder(torch.optim.SGD):
        def step(self, closure=None):
            self.seen = log_alpha.grad.clone()

    log_alpha.grad = None
    opt = Recorder([log_alpha], lr=0.0)
    logs = learning.alpha_update(log_alpha, opt, log_prob_mean, -2.0)
    assert torch.equal(opt.seen, expected)
    assert logs["alpha/loss"].item() == pytest.approx(-0.3 * -2.7)


def test_redq_target_is_the_min_over_the_drawn_subset_of_target_critics():
    agent = _agent(num_critics=10)
    target = learning.make_target_agent(agent)
    with torch.no_grad():  # give each target critic a distinct offset: Q'_i = net_i + 10 i
        target.critic.output_layer.bias.copy_(torch.arange(10.0).view(10, 1, 1) * 10.0)
    batch = _real_batch()
    alpha = torch.tensor(0.3)
    torch.manual_seed(11)
    y = learning.compute_td_target(agent, target, batch, alpha=alpha, target_critic_ensemble_n=2)
    # the same draws by hand: the policy sample, then the subset of 2 out of 10
    torch.manual_seed(11)
    with torch.no_grad():
        rep = batch.next_obs["obs"]
        action, log_prob = agent.actor(rep).rsample_with_log_prob()
        subset = torch.randperm(10)[:2]
        all_q = target.critic(rep, action)  # (10, B, 1): every critic, evaluated in full
        expected = batch.reward + 0.99 * (all_q[subset].amin(0) - alpha * log_prob)
    assert torch.allclose(y, expected, atol=1e-5)
    # and it is not the min over all ten (critic 0 would win then)
    if 0 not in subset.tolist():
        assert not torch.allclose(y, batch.reward + 0.99 * (all_q.amin(0) - alpha * log_prob))


class AffineEncoder(nets.Encoder):
    """A trainable 3 -> 3 linear encoder (so online and target encoders can differ)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    @property
    def embedding_dim(self):
        return 3

    def forward(self, obs_dict):
        return self.fc(obs_dict["obs"])


@pytest.mark.parametrize("encoder", ["target", "online"])
def test_next_action_reads_the_chosen_encoder_and_q_the_target_encoder(encoder):
    torch.manual_seed(0)
    agent = Agent(
        2, AffineEncoder(), hidden_size=16, actor_network_cls=ContinuousDeterministicActor
    )
    target = learning.make_target_agent(agent)
    with torch.no_grad():
        target.encoder.fc.weight.add_(0.5)  # the target encoder lags behind the online one
    batch = _real_batch()
    backup = learning.td_backup(
        agent, target, batch, alpha=torch.tensor(0.0), target_critic_ensemble_n=2,
        target_noise_std=0.0, next_action_encoder=encoder,
    )  # fmt: skip
    with torch.no_grad():
        online_rep, target_rep = agent.encoder(batch.next_obs), target.encoder(batch.next_obs)
        reader = online_rep if encoder == "online" else target_rep
        expected_action = agent.actor(reader)
        q = target.critic(target_rep, expected_action).amin(0)
    assert torch.equal(backup.next_rep, target_rep)  # Q'(s', a') reads the target encoder
    assert torch.allclose(backup.next_action, expected_action)
    assert torch.allclose(backup.target, batch.reward + 0.99 * q)
    other = agent.actor(online_rep if encoder == "target" else target_rep).detach()
    assert not torch.allclose(backup.next_action, other)
