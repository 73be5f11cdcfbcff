"""SUNRISE ensembles (Lee et al. 2021): backup weights, bootstrap masks, UCB acting, per-member
alphas, and the vectorized ensemble updates against the same members trained one by one."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from super_sac import Agent, learning, nets, optim, sunrise
from super_sac import learning_utils as lu
from super_sac.replay import Batch


def _agent(ensemble_size=3, num_critics=2, **kwargs):
    torch.manual_seed(0)
    return Agent(
        2,
        nets.FlatEncoder(4),
        ensemble_size=ensemble_size,
        num_critics=num_critics,
        hidden_size=16,
        **kwargs,
    )


def _batch(size=8, idxs=None):
    gen = torch.Generator().manual_seed(1)
    return Batch(
        obs={"obs": torch.randn(size, 4, generator=gen)},
        action=torch.rand(size, 2, generator=gen) * 2 - 1,
        reward=torch.randn(size, 1, generator=gen),
        next_obs={"obs": torch.randn(size, 4, generator=gen)},
        done=(torch.rand(size, 1, generator=gen) < 0.3).float(),
        discount=torch.full((size, 1), 0.99),
        weights=torch.ones(size, 1),
        idxs=np.arange(size) if idxs is None else idxs,
    )


# ------------------------------------------------------------------ pure pieces
def test_sunrise_backup_weights_by_hand():
    std = torch.tensor([[0.0], [0.1], [1.0]])
    w = lu.backup_weights(std, 20.0, "sunrise")
    sig = lambda x: 1.0 / (1.0 + math.exp(-x))  # noqa: E731
    expected = [sig(0.0) + 0.5, sig(-2.0) + 0.5, sig(-20.0) + 0.5]
    assert torch.allclose(w.squeeze(1), torch.tensor(expected))
    assert w[0].item() == 1.0 and 0.5 <= w[2].item() < 0.5001


def test_softmax_backup_weights_by_hand():
    std = torch.tensor([[0.0], [0.1], [1.0]])
    w = lu.backup_weights(std, 2.0, "softmax")
    e = [math.exp(0.0), math.exp(-0.2), math.exp(-2.0)]
    expected = [3 * x / sum(e) for x in e]
    assert torch.allclose(w.squeeze(1), torch.tensor(expected))
    assert math.isclose(w.sum().item(), 3.0, rel_tol=1e-6)
    with pytest.raises(ValueError, match="weight_type"):
        lu.backup_weights(std, 2.0, "sigmoid")


def test_ucb_choice_by_hand():
    # K=2 critics, C=2 candidates, B=2 states; Q_k = c_k * a with c = (1, 3):
    # mean = 2a, std = |a|. State 0 candidates a = (-0.5, 0.1), state 1 a = (0.4, 0.2).
    a = torch.tensor([[-0.5, 0.4], [0.1, 0.2]])  # (C, B)
    q = torch.stack([1.0 * a, 3.0 * a])  # (K, C, B)
    # bonus 0: state 0 -> 0.1 (score 0.2 > -1.0); state 1 -> 0.4
    assert lu.ucb_choice(q, 0.0).tolist() == [1, 0]
    # bonus 10: state 0 scores -1 + 5 = 4 vs 0.2 + 1 = 1.2 -> the uncertain -0.5
    assert lu.ucb_choice(q, 10.0).tolist() == [0, 0]


def test_bootstrap_masks_are_fixed_per_slot_and_have_the_right_rate():
    idxs = torch.arange(100_000)
    m = lu.bootstrap_masks(idxs, 3, 0.5, seed=7)
    assert m.shape == (3, 100_000, 1) and m.dtype == torch.float32
    assert abs(m.mean().item() - 0.5) < 0.01
    # each member draws its own masks
    assert (m[0] != m[1]).float().mean().item() > 0.45
    # a slot keeps its mask whenever it is sampled (in any order)
    perm = torch.randperm(100_000)[:500]
    assert torch.equal(lu.bootstrap_masks(perm, 3, 0.5, seed=7), m[:, perm])
    assert not torch.equal(lu.bootstrap_masks(idxs, 3, 0.5, seed=8), m)
    assert lu.bootstrap_masks(idxs[:10], 2, 1.0).min().item() == 1.0


def test_member_subset_offsets_each_members_critics():
    assert lu.member_subset(3, 4, torch.tensor([2, 0])).tolist() == [2, 0, 6, 4, 10, 8]
    assert lu.member_subset(3, 4, None) is None


def test_critic_loss_with_per_critic_weights_by_hand():
    q = torch.tensor([[[1.0], [2.0]], [[0.0], [4.0]]])  # (N=2, B=2, 1)
    y = torch.tensor([[[0.0], [0.0]], [[1.0], [1.0]]])
    w = torch.tensor([[[1.0], [0.0]], [[2.0], [1.0]]])
    # critic 0: 0.5 * mean(1*1, 0*4) = 0.25; critic 1: 0.5 * mean(2*1, 1*9) = 2.75
    assert math.isclose(lu.critic_loss(q, y, w).item(), 3.0, rel_tol=1e-6)


# ------------------------------------------------------------------ the agent
def test_ensemble_shapes_and_evaluation_uses_the_mean_of_member_means():
    agent = _agent()
    rep = torch.randn(5, 4)
    agent.requires_grad_(False)
    dist = agent.actor(rep)
    assert dist.mean.shape == (3, 5, 2)
    assert agent.critic(rep, torch.zeros(5, 2)).shape == (6, 5, 1)
    assert agent.critic(rep, dist.mean).shape == (6, 5, 1)  # member e's actions to its critics
    assert torch.allclose(agent.mean_action(rep), dist.mean.mean(dim=0))
    out = agent({"obs": rep.numpy()}, batched=True)
    assert out.shape == (5, 2) and np.allclose(out, dist.mean.mean(dim=0).numpy(), atol=1e-6)
    assert agent.signature()["ensemble_size"] == 3


def test_grouped_actions_reach_their_members_critics():
    agent = _agent()
    rep, actions = torch.randn(5, 4), torch.randn(3, 5, 2)
    q = agent.critic(rep, actions)
    for e in range(3):
        alone = agent.critic(rep, actions[e])  # every critic judges member e's actions
        assert torch.allclose(q[2 * e : 2 * e + 2], alone[2 * e : 2 * e + 2], atol=1e-6)


class _Proposals:
    def __init__(self, actions):
        self.actions = actions

    def sample(self):
        return self.actions


class _ProposingActor(torch.nn.Module):
    def __init__(self, proposals):
        super().__init__()
        self.proposals = proposals
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # so that Agent.device works

    def forward(self, rep):
        return _Proposals(self.proposals)


class _LinearCritic(torch.nn.Module):
    """Q_k(s, a) = c_k * a_0 for every critic k."""

    def __init__(self, c):
        super().__init__()
        self.c = c.view(-1, 1, 1)

    def forward(self, rep, action):
        return self.c * action[:, :1].unsqueeze(0)


def test_ucb_exploration_picks_per_env_the_highest_upper_bound():
    agent = _agent(ensemble_size=3, ucb_bonus=10.0)
    # 3 members propose for 2 envs; 2 critics per member, Q = c * a[0] with c = 1 or 3
    proposals = torch.tensor(
        [[[-0.5, 0.0], [0.4, 0.0]], [[0.1, 0.0], [0.2, 0.0]], [[0.05, 0.0], [-0.1, 0.0]]]
    )
    agent.actor = _ProposingActor(proposals)
    agent.critic = _LinearCritic(torch.tensor([1.0, 3.0, 1.0, 3.0, 1.0, 3.0]))
    out = agent.sample_action({"obs": np.zeros((2, 4), np.float32)}, batched=True)
    # scores mean(Q) + 10 std(Q) = 2a + 10|a|: env 0 picks -0.5 (score 4), env 1 picks 0.4
    assert np.allclose(out, [[-0.5, 0.0], [0.4, 0.0]])
    agent.ucb_bonus = 0.0  # without a bonus: the highest mean, still chosen per env
    q = agent.critic_values_of_candidates(torch.zeros(2, 4), proposals)
    assert lu.ucb_choice(q, 0.0).tolist() == [1, 0]


def test_random_member_exploration_without_ucb():
    agent = _agent(ensemble_size=3)
    proposals = torch.arange(3.0).view(3, 1, 1).expand(3, 400, 2)
    agent.actor = _ProposingActor(proposals)
    out = agent.sample_action({"obs": np.zeros((400, 4), np.float32)}, batched=True)
    counts = np.bincount(out[:, 0].astype(int), minlength=3)
    assert counts.min() > 90  # every member is picked, about a third of the time


# ------------------------------------------------------------------ vectorized == one by one
def _copy_member_weights(single: Agent, agent: Agent, e: int) -> Agent:
    """Load ensemble member ``e``'s actor and critics into the single agent ``single``."""
    n = agent.num_critics
    linears = [m for m in single.actor.net if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for lin, ens in zip(linears, agent.actor.net.layers):
            lin.weight.copy_(ens.weight[e].T)
            lin.bias.copy_(ens.bias[e, 0])
        for mine, ens in zip(single.critic.net.layers, agent.critic.net.layers):
            mine.weight.copy_(ens.weight[e * n : (e + 1) * n])
            mine.bias.copy_(ens.bias[e * n : (e + 1) * n])
    return single


def _member(agent: Agent, e: int) -> Agent:
    """A single agent holding the weights of ensemble member ``e``."""
    single = Agent(
        agent.act_space_size,
        agent.encoder,
        num_critics=agent.num_critics,
        hidden_size=agent.hidden_size,
        log_std_low=agent.actor.log_std_low,
        log_std_high=agent.actor.log_std_high,
    )
    return _copy_member_weights(single, agent, e)


def _optimizers(agent, members=1):
    # plain SGD: Adam would turn the log-std head's ~1e-9 gradients (random-signed, from the
    # sampling noise) into full-size steps and hide the comparison. The ensemble's losses are
    # the mean over its ``members``, so its SGD steps are ``members`` times larger for one SGD
    # step to match each member's own
    return (
        torch.optim.SGD(agent.critic.parameters(), lr=0.1 * members),
        torch.optim.SGD(agent.actor.parameters(), lr=0.1 * members),
    )


def test_ensemble_updates_equal_members_trained_one_by_one():
    # a nearly deterministic policy (log-std ~ -20) and alpha = 0 make the sampled actions and
    # the targets deterministic, so both ways must agree to float precision
    agent = _agent(ensemble_size=3, log_std_low=-20.0, log_std_high=-19.0)
    target = learning.make_target_agent(agent)
    members = [_member(agent, e) for e in range(3)]
    member_targets = [_member(target, e) for e in range(3)]
    batch = _batch()
    alpha = torch.zeros(3)
    c_opt, a_opt = _optimizers(agent, members=3)
    logs = sunrise.ensemble_critic_update(
        agent, target, batch, c_opt, alpha=alpha, target_critic_ensemble_n=2
    )
    actor_logs = sunrise.ensemble_actor_update(agent, batch, a_opt, alpha=alpha)
    critic_losses, actor_losses = [], []
    for e in range(3):
        mc, ma = _optimizers(members[e])
        critic_losses.append(
            learning.critic_update(
                members[e],
                member_targets[e],
                batch,
                mc,
                alpha=torch.tensor(0.0),
                target_critic_ensemble_n=2,
            )["critic/loss"]
        )
        actor_losses.append(
            learning.online_actor_update(members[e], batch, ma, alpha=torch.tensor(0.0))[
                "actor/loss"
            ]
        )
    # the ensemble's losses are the members' mean (the original's scale), and each member's
    # critic loss is the mean over its critics
    assert torch.allclose(logs["critic/loss"], sum(critic_losses) / 3, rtol=1e-5)
    assert torch.allclose(actor_logs["actor/loss"], sum(actor_losses) / 3, rtol=1e-5)
    assert actor_logs["actor/log_prob"].shape == (3,)
    # after one SGD step every member's weights match its lone twin's
    for e in range(3):
        twin = members[e]
        for lin_twin, ens in zip(twin.critic.net.layers, agent.critic.net.layers):
            assert torch.allclose(lin_twin.weight, ens.weight[2 * e : 2 * e + 2], atol=1e-6)
        twin_linears = [m for m in twin.actor.net if isinstance(m, torch.nn.Linear)]
        for lin, ens in zip(twin_linears, agent.actor.net.layers):
            assert torch.allclose(lin.weight, ens.weight[e].T, atol=1e-6)


def test_weighted_backup_and_masks_enter_the_critic_loss():
    agent = _agent(ensemble_size=2, log_std_low=-20.0, log_std_high=-19.0)
    target = learning.make_target_agent(agent)
    batch = _batch()
    alpha = torch.zeros(2)
    # the targets the update will use, and the spread of the target critics behind the weights
    y, w = sunrise.compute_ensemble_td_target(
        agent, target, batch, alpha=alpha, target_critic_ensemble_n=2, weighted_bellman_temp=5.0
    )
    with torch.no_grad():
        rep = batch.next_obs["obs"]
        next_q = target.critic(rep, agent.actor(rep).mean)  # (4, B, 1)
        expected_w = torch.sigmoid(-next_q.std(dim=0, correction=0) * 5.0) + 0.5
        assert torch.allclose(w, expected_w, atol=1e-5)
        masks = torch.tensor([[1.0] * 4 + [0.0] * 4, [0.0] * 2 + [1.0] * 6]).unsqueeze(-1)
        q = agent.critic(batch.obs["obs"], batch.action)  # (4, B, 1)
        y4 = y.repeat_interleave(2, dim=0)
        m4 = masks.repeat_interleave(2, dim=0) / masks.mean(dim=(1, 2)).repeat_interleave(2).view(
            4, 1, 1
        )
        expected = (m4 * expected_w * (q - y4) ** 2).mean()  # mean over the 2 x 2 critics
    c_opt, _ = _optimizers(agent)
    logs = sunrise.ensemble_critic_update(
        agent,
        target,
        batch,
        c_opt,
        alpha=alpha,
        target_critic_ensemble_n=2,
        weighted_bellman_temp=5.0,
        masks=masks,
    )
    assert torch.allclose(logs["critic/loss"], expected, rtol=1e-4)
    assert "critic/backup_weight" in logs


def test_ensemble_target_uses_each_members_alpha_and_own_critics():
    agent = _agent(ensemble_size=2, log_std_low=-20.0, log_std_high=-19.0)
    target = learning.make_target_agent(agent)
    batch = _batch()
    alpha = torch.tensor([0.0, 0.5])
    torch.manual_seed(3)
    y, w = sunrise.compute_ensemble_td_target(
        agent, target, batch, alpha=alpha, target_critic_ensemble_n=2
    )
    assert y.shape == (2, 8, 1) and w is None
    with torch.no_grad():
        rep = batch.next_obs["obs"]
        dist = agent.actor(rep)
        torch.manual_seed(3)
        a, logp = dist.rsample_with_log_prob()
        q = target.critic(rep, a).view(2, 2, 8, 1).amin(dim=1)
        v = q - alpha.view(2, 1, 1) * logp
        expected = batch.reward + 0.99 * (1 - batch.done) * v
    assert torch.allclose(y, expected, atol=1e-4)


def test_each_member_tunes_its_own_alpha():
    log_alpha = torch.zeros(3, requires_grad=True)
    opt = optim.build_optimizer(optim.ParamGroup([log_alpha], 0.1))
    log_prob = torch.tensor([-3.0, 0.0, 2.0])
    learning.alpha_update(log_alpha, opt, log_prob, target_entropy=-1.0)
    # gradient -(E[log pi] + H) = (4, 1, -1): Adam's first step moves each by lr against its
    # sign, so the members over the target entropy lower alpha and the one under it raises it
    assert torch.allclose(log_alpha.detach(), torch.tensor([-0.1, -0.1, 0.1]), atol=1e-4)


def test_stub_free_trainer_has_one_alpha_per_member():
    from super_sac.main import TrainConfig, Trainer
    from super_sac.replay import ReplayBuffer
    from super_sac.wrappers import make_gym_env

    agent = Agent(1, nets.FlatEncoder(3), ensemble_size=4, hidden_size=16)
    trainer = Trainer(
        agent,
        ReplayBuffer(1000),
        make_gym_env("Pendulum-v1"),
        make_gym_env("Pendulum-v1"),
        TrainConfig(init_alpha=0.3, seed=0),
    )
    assert trainer.log_alpha.shape == (4,)
    assert torch.allclose(trainer.alpha, torch.full((4,), 0.3))


def test_sunrise_validation_errors():
    from super_sac.main import ConfigError, super_sac
    from super_sac.replay import ReplayBuffer
    from super_sac.wrappers import make_gym_env

    env = SimpleNamespace()  # never reached: the settings fail first
    del env
    single = Agent(1, nets.FlatEncoder(3), hidden_size=16)
    ensemble = Agent(1, nets.FlatEncoder(3), hidden_size=16, ensemble_size=2)
    common = dict(
        buffer=ReplayBuffer(2000),
        train_env=make_gym_env("Pendulum-v1"),
        test_env=make_gym_env("Pendulum-v1"),
        verbosity=0,
        save_to_disk=False,
        log_to_disk=False,
        num_steps_online=1,
    )
    with pytest.raises(ConfigError, match="need an ensemble"):
        super_sac(agent=single, weighted_bellman_temp=20.0, **common)
    with pytest.raises(ConfigError, match="weight_type"):
        super_sac(agent=ensemble, weight_type="sigmoid", **common)
    with pytest.raises(ConfigError, match="bootstrap_mask_prob"):
        super_sac(agent=ensemble, bootstrap_mask_prob=0.0, **common)
    with pytest.raises(ConfigError, match="no target actor"):
        super_sac(agent=ensemble, use_target_actor=True, **common)
    with pytest.raises(ConfigError, match="do not support it yet"):
        super_sac(agent=ensemble, num_steps_offline=10, **common)


# ------------------------------------------------------------------ discrete members
def _discrete_agent(ensemble_size=3, **kwargs):
    torch.manual_seed(0)
    return Agent(
        3,
        nets.FlatEncoder(4),
        discrete=True,
        ensemble_size=ensemble_size,
        num_critics=2,
        hidden_size=16,
        **kwargs,
    )


def _discrete_member(agent: Agent, e: int) -> Agent:
    single = Agent(
        agent.act_space_size,
        agent.encoder,
        discrete=True,
        num_critics=agent.num_critics,
        hidden_size=agent.hidden_size,
    )
    return _copy_member_weights(single, agent, e)


def _discrete_batch(size=8):
    batch = _batch(size)
    gen = torch.Generator().manual_seed(2)
    batch.action = torch.randint(0, 3, (size,), generator=gen)
    return batch


def test_discrete_ensemble_shapes_and_mean_probability_evaluation():
    agent = _discrete_agent()
    rep = torch.randn(5, 4)
    with torch.no_grad():
        probs = agent.actor(rep).probs
        assert probs.shape == (3, 5, 3)
        assert agent.critic(rep).shape == (6, 5, 3)
        assert torch.equal(agent.mean_action(rep), probs.mean(dim=0).argmax(dim=-1))


def test_discrete_ucb_gathers_each_members_proposal_per_env():
    agent = _discrete_agent(ucb_bonus=10.0)
    # two envs; critics k = 0..5 value action j as q[k, b, j]
    q = torch.tensor(
        [[[1.0, 0.0, 0.5], [0.0, 2.0, 0.0]], [[1.0, 3.0, 0.5], [0.0, 2.0, 1.0]]]
    ).repeat(3, 1, 1)  # (6, 2, 3)
    candidates = torch.tensor([[0, 1], [1, 1], [2, 2]])  # (C = 3 members, B = 2 envs)

    class FixedCritic(torch.nn.Module):
        def forward(self, rep, detach_params=False):
            return q

    agent.critic = FixedCritic()
    got = agent.critic_values_of_candidates(torch.zeros(2, 4), candidates)
    assert got.shape == (6, 3, 2)
    assert torch.equal(got[:, 1, 0], q[:, 0, 1]) and torch.equal(got[:, 2, 1], q[:, 1, 2])
    # env 0: action 0 -> mean 1, std 0; action 1 -> mean 1.5, std 1.5; action 2 -> 0.5, 0
    # env 1: action 1 -> mean 2, std 0; action 2 -> mean 0.5, std 0.5
    assert lu.ucb_choice(got, 10.0).tolist() == [1, 2]
    assert lu.ucb_choice(got, 0.0).tolist() == [1, 0]


def test_discrete_ensemble_updates_equal_members_trained_one_by_one():
    # discrete targets and losses are exact expectations: no sampling, so the match is exact
    agent = _discrete_agent()
    target = learning.make_target_agent(agent)
    members = [_discrete_member(agent, e) for e in range(3)]
    member_targets = [_discrete_member(target, e) for e in range(3)]
    batch = _discrete_batch()
    alpha = torch.tensor([0.1, 0.2, 0.3])
    c_opt, a_opt = _optimizers(agent, members=3)
    logs = sunrise.ensemble_critic_update(
        agent, target, batch, c_opt, alpha=alpha, target_critic_ensemble_n=2
    )
    actor_logs = sunrise.ensemble_actor_update(agent, batch, a_opt, alpha=alpha)
    critic_losses, actor_losses, log_probs = [], [], []
    for e in range(3):
        mc, ma = _optimizers(members[e])
        critic_losses.append(
            learning.critic_update(
                members[e], member_targets[e], batch, mc, alpha=alpha[e], target_critic_ensemble_n=2
            )["critic/loss"]
        )
        out = learning.online_actor_update(members[e], batch, ma, alpha=alpha[e])
        actor_losses.append(out["actor/loss"])
        log_probs.append(out["actor/log_prob"])
    # the ensemble's losses are the members' mean (the original's scale), and each member's
    # critic loss is the mean over its critics
    assert torch.allclose(logs["critic/loss"], sum(critic_losses) / 3, rtol=1e-5)
    assert torch.allclose(actor_logs["actor/loss"], sum(actor_losses) / 3, rtol=1e-5)
    assert torch.allclose(actor_logs["actor/log_prob"], torch.stack(log_probs), atol=1e-6)
    for e in range(3):
        twin_linears = [m for m in members[e].actor.net if isinstance(m, torch.nn.Linear)]
        for lin, ens in zip(twin_linears, agent.actor.net.layers):
            assert torch.allclose(lin.weight, ens.weight[e].T, atol=1e-6)
        for lin_twin, ens in zip(members[e].critic.net.layers, agent.critic.net.layers):
            assert torch.allclose(lin_twin.weight, ens.weight[2 * e : 2 * e + 2], atol=1e-6)


def test_discrete_backup_weights_use_each_members_expected_values():
    agent = _discrete_agent(ensemble_size=2)
    target = learning.make_target_agent(agent)
    batch = _discrete_batch()
    _, w = sunrise.compute_ensemble_td_target(
        agent,
        target,
        batch,
        alpha=torch.zeros(2),
        target_critic_ensemble_n=2,
        weighted_bellman_temp=4.0,
    )
    with torch.no_grad():
        rep = batch.next_obs["obs"]
        probs = agent.actor(rep).probs  # (2, B, A)
        q = target.critic(rep).view(2, 2, 8, 3)
        values = (probs.unsqueeze(1) * q).sum(-1).reshape(4, 8)
        expected = torch.sigmoid(-values.std(dim=0, correction=0) * 4.0) + 0.5
    assert torch.allclose(w.squeeze(-1), expected, atol=1e-6)
