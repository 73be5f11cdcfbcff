"""DR3 (Kumar et al. 2021, arXiv 2112.04716): the critics' penultimate features, the penalty
``dr3_coeff * mean_k mean_b phi_k(s, a) . phi_k(s', a')`` against hand computations, its
gradients, discrete critics, PopArt, SUNRISE, the settings, exact resume, and the original
super_sac's two DR3 configs run unchanged through our scripts."""

import copy
import dataclasses
import warnings
from pathlib import Path

import gin
import numpy as np
import pytest
import torch

from super_sac import Agent, ReplayBuffer, cli, learning, nets, optim, sunrise
from super_sac import datasets as ds
from super_sac import learning_utils as lu
from super_sac.main import TrainConfig, Trainer
from super_sac.nets.mlps import ContinuousDeterministicActor
from super_sac.replay import Batch
from super_sac.validation import ConfigError, ConfigWarning
from super_sac.wrappers import make_gym_env, make_minatar_env

ROOT = Path(__file__).resolve().parents[1]
ORIGINAL = ROOT / "tests" / "data" / "original_gin"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _batch(b=6, obs_dim=3, act_dim=2, discrete_actions=None, seed=1):
    g = torch.Generator().manual_seed(seed)
    if discrete_actions is None:
        action = torch.rand(b, act_dim, generator=g) * 2 - 1
    else:
        action = torch.randint(discrete_actions, (b, 1), generator=g)
    return Batch(
        obs={"obs": torch.randn(b, obs_dim, generator=g)},
        action=action,
        reward=torch.randn(b, 1, generator=g),
        next_obs={"obs": torch.randn(b, obs_dim, generator=g)},
        done=torch.zeros(b, 1),
        discount=torch.full((b, 1), 0.99),
        weights=torch.ones(b, 1),
        idxs=None,
    )


def _opt(*modules, lr=1e-3):
    params = [p for m in modules for p in m.parameters()]
    return optim.build_optimizer(optim.ParamGroup(params, lr))


# ------------------------------------------------------------------ features by hand


def _tiny_agent():
    """One state and one action dimension, two critics of width 2 with known weights:
    critic 0 is ``relu(relu([s, a]))``; critic 1 is ``relu(relu(2 [s, a]) + (-1, 0))``."""
    agent = Agent(1, nets.FlatEncoder(1), hidden_size=2)
    first, second, out = agent.critic.net.layers
    with torch.no_grad():
        first.weight.copy_(torch.stack([torch.eye(2), 2 * torch.eye(2)]))
        first.bias.zero_()
        second.weight.copy_(torch.stack([torch.eye(2), torch.eye(2)]))
        second.bias.copy_(torch.tensor([[[0.0, 0.0]], [[-1.0, 0.0]]]))
        out.weight.fill_(1.0)
        out.bias.fill_(0.5)
    return agent


S, A = torch.tensor([[1.0], [-2.0]]), torch.tensor([[0.5], [1.0]])
S1, A1 = torch.tensor([[0.0], [3.0]]), torch.tensor([[1.0], [-1.0]])
# critic 0: phi(s, a) = [[1, .5], [0, 1]], phi(s', a') = [[0, 1], [3, 0]]: dots .5, 0
# critic 1: phi(s, a) = [[1, 1], [0, 2]], phi(s', a') = [[0, 2], [5, 0]]: dots 2, 0
PHI = torch.tensor([[[1.0, 0.5], [0.0, 1.0]], [[1.0, 1.0], [0.0, 2.0]]])
PHI1 = torch.tensor([[[0.0, 1.0], [3.0, 0.0]], [[0.0, 2.0], [5.0, 0.0]]])


def test_critic_features_by_hand():
    critic = _tiny_agent().critic
    assert torch.equal(critic.features(S, A), PHI)
    assert torch.equal(critic.features(S1, A1), PHI1)
    q, features = critic(S, A, return_features=True)
    assert torch.equal(features, PHI)
    assert torch.equal(q, critic(S, A))  # the same values as the plain forward
    assert torch.equal(q, PHI.sum(-1, keepdim=True) + 0.5)


def test_feature_dot_and_dr3_term_by_hand():
    agent = _tiny_agent()
    assert torch.equal(lu.feature_dot(PHI, PHI1), torch.tensor([0.25, 1.0]))
    backup = learning.Backup(torch.zeros(2, 1), S1, A1)
    term, logs = learning.dr3_regularizer(agent, PHI, backup, 0.1)
    assert term.item() == pytest.approx(0.1 * (0.25 + 1.0) / 2)  # 0.0625
    assert logs["critic/dr3_loss"].item() == pytest.approx(0.0625)
    assert logs["critic/feature_dot"].item() == pytest.approx(0.625)
    term, logs = learning.dr3_regularizer(agent, PHI, backup, 0.0)
    assert term is None and set(logs) == {"critic/feature_dot"}
    assert logs["critic/feature_dot"].item() == pytest.approx(0.625)


def test_features_of_a_member_subset_and_of_grouped_actions():
    torch.manual_seed(0)
    critic = Agent(2, nets.FlatEncoder(3), num_critics=4, hidden_size=8).critic
    s, a = torch.randn(5, 3), torch.rand(2, 5, 2)  # two groups of two critics
    members = torch.tensor([3, 1])
    assert torch.allclose(critic.features(s, a[0], members), critic.features(s, a[0])[members])
    grouped = critic.features(s, a)
    assert torch.allclose(grouped[:2], critic.features(s, a[0])[:2])
    assert torch.allclose(grouped[2:], critic.features(s, a[1])[2:])


def _per_critic_features(critic, state, action, k):
    """Critic ``k``'s penultimate features with its own weights, one critic at a time."""
    first, second = critic.net.layers[0], critic.net.layers[1]
    x = torch.cat((state, action), dim=-1)
    h = torch.relu(x @ first.weight[k] + first.bias[k])
    return torch.relu(h @ second.weight[k] + second.bias[k])


def test_dr3_over_the_ensemble_equals_a_loop_over_the_critics():
    torch.manual_seed(0)
    agent = Agent(2, nets.FlatEncoder(3), num_critics=5, hidden_size=16)
    s, a, s1, a1 = torch.randn(7, 3), torch.rand(7, 2), torch.randn(7, 3), torch.rand(7, 2)
    term, logs = learning.dr3_regularizer(
        agent, agent.critic.features(s, a), learning.Backup(None, s1, a1), 0.3
    )
    per_critic = [
        (
            _per_critic_features(agent.critic, s, a, k)
            * _per_critic_features(agent.critic, s1, a1, k)
        )
        .sum(-1)
        .mean()
        for k in range(5)
    ]
    assert term.item() == pytest.approx(0.3 * torch.stack(per_critic).mean().item(), rel=1e-6)
    assert logs["critic/feature_dot"].item() == pytest.approx(
        torch.stack(per_critic).mean().item(), rel=1e-6
    )


# ------------------------------------------------------------------ the critic update


def _deterministic_agent(num_critics=2):
    torch.manual_seed(0)
    return Agent(
        2,
        nets.FlatEncoder(3),
        num_critics=num_critics,
        hidden_size=16,
        actor_network_cls=ContinuousDeterministicActor,
    )


def test_critic_update_adds_the_term_at_the_backups_next_action():
    """TD3/DDPG: ``a' = mu'(s')`` from the target actor (no smoothing noise), ``s'`` from the
    target encoder: the logged dot product is the hand-assembled one, and the loss is the TD
    loss plus ``dr3_coeff`` times it."""
    agent = _deterministic_agent()
    target = learning.make_target_agent(agent)
    with torch.no_grad():  # make the target actor differ from the online one
        for p in target.actor.parameters():
            p.mul_(-1.0)
    batch = _batch()
    with torch.no_grad():
        next_action = target.actor(batch.next_obs["obs"])
        dot = lu.feature_dot(
            agent.critic.features(batch.obs["obs"], batch.action),
            agent.critic.features(batch.next_obs["obs"], next_action),
        ).mean()
    plain = copy.deepcopy(agent)
    kw = dict(alpha=torch.tensor(0.0), target_critic_ensemble_n=2, use_target_actor=True)
    logs = learning.critic_update(agent, target, batch, _opt(agent.critic), dr3_coeff=0.5, **kw)
    base = learning.critic_update(plain, target, batch, _opt(plain.critic), **kw)
    assert logs["critic/feature_dot"].item() == pytest.approx(dot.item(), rel=1e-6)
    assert logs["critic/dr3_loss"].item() == pytest.approx(0.5 * dot.item(), rel=1e-6)
    assert logs["critic/loss"].item() == pytest.approx(
        base["critic/loss"].item() + 0.5 * dot.item(), rel=1e-6
    )
    assert "critic/feature_dot" not in base and "critic/dr3_loss" not in base


def test_drq_views_leave_the_term_on_the_batchs_own_rows():
    """With DrQ's extra augmentations (``extra_obs``, ``extra_next_obs``) the term stays on the
    batch's own ``(s, a)`` rows and its ``batch.next_obs`` backup."""
    agent = _deterministic_agent()
    views = copy.deepcopy(agent)
    target = learning.make_target_agent(agent)
    batch = _batch()
    other = {"obs": batch.obs["obs"] + 1.0}
    kw = dict(alpha=torch.tensor(0.0), target_critic_ensemble_n=2, dr3_coeff=0.1)
    plain = learning.critic_update(agent, target, batch, _opt(agent.critic), **kw)
    drq = learning.critic_update(
        views, target, batch, _opt(views.critic), extra_obs=[other], extra_next_obs=[other], **kw
    )
    assert drq["critic/feature_dot"].item() == pytest.approx(plain["critic/feature_dot"].item())
    assert drq["critic/loss"].item() != pytest.approx(plain["critic/loss"].item())


def test_sac_critic_update_uses_the_sampled_next_action():
    """SAC: ``a'`` is the backup's sample from the online actor; replaying the random stream
    recovers it."""
    torch.manual_seed(0)
    agent = Agent(2, nets.FlatEncoder(3), num_critics=3, hidden_size=16)
    target = learning.make_target_agent(agent)
    batch = _batch()
    kw = dict(alpha=torch.tensor(0.1), target_critic_ensemble_n=2)
    torch.manual_seed(7)
    backup = learning.td_backup(agent, target, batch, **kw)
    with torch.no_grad():
        dot = lu.feature_dot(
            agent.critic.features(batch.obs["obs"], batch.action),
            agent.critic.features(backup.next_rep, backup.next_action),
        ).mean()
    torch.manual_seed(7)
    logs = learning.critic_update(agent, target, batch, _opt(agent.critic), dr3_coeff=0.1, **kw)
    assert logs["critic/feature_dot"].item() == pytest.approx(dot.item(), rel=1e-6)
    assert backup.next_action.shape == (6, 2) and not backup.next_action.requires_grad


class LinearEncoder(nets.Encoder):
    """A learnable encoder, so the test can see which gradients reach it."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 4)

    @property
    def embedding_dim(self):
        return 4

    def forward(self, obs_dict):
        return self.linear(obs_dict["obs"])


def test_gradient_reaches_the_critic_trunk_and_the_online_encoder_not_the_targets():
    torch.manual_seed(0)
    agent = Agent(2, LinearEncoder(), hidden_size=8)
    target = learning.make_target_agent(agent)
    target.requires_grad_(True)  # would collect gradients if the term reached it
    batch = _batch()
    backup = learning.td_backup(
        agent, target, batch, alpha=torch.tensor(0.1), target_critic_ensemble_n=2
    )
    assert not backup.next_rep.requires_grad
    rep = agent.encoder(batch.obs)
    _, _, features = learning.critic_regression(
        agent, target, rep, batch.action, backup.target, batch.weights, return_features=True
    )
    term, _ = learning.dr3_regularizer(agent, features, backup, 1.0)
    term.backward()
    first, second, out = agent.critic.net.layers
    for layer in (first, second):
        assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0
    assert out.weight.grad is None  # the features come before the output layer
    assert agent.encoder.linear.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in target.parameters())
    assert all(p.grad is None for p in agent.actor.parameters())

    # the critic's gradient has both halves: phi(s', a') is the online critic's, with gradient
    grad = first.weight.grad.clone()
    agent.zero_grad(set_to_none=True)
    with torch.no_grad():
        rep_const = agent.encoder(batch.obs)
    phi = agent.critic.features(rep_const, batch.action)
    phi1 = agent.critic.features(backup.next_rep, backup.next_action)
    one_sided = lu.feature_dot(phi, phi1.detach()).mean()
    grad_one_sided = torch.autograd.grad(one_sided, first.weight, retain_graph=True)[0]
    both = lu.feature_dot(phi, phi1).mean()
    grad_both = torch.autograd.grad(both, first.weight)[0]
    assert torch.allclose(grad, grad_both, atol=1e-6)
    assert not torch.allclose(grad, grad_one_sided, atol=1e-4)


def test_dr3_online_next_trains_the_encoder_from_both_pairs():
    """The paper's regulariser is a function of the whole Q-network at (s, a) and (s', a'):
    with dr3_online_next, s' goes through the online encoder with gradient."""
    torch.manual_seed(0)
    agent = Agent(2, LinearEncoder(), hidden_size=8)
    target = learning.make_target_agent(agent)
    batch = _batch()
    opt = _opt(agent.critic, agent.encoder, lr=0.0)  # a step that changes nothing
    grads = {}
    for online in (False, True):
        agent.zero_grad(set_to_none=True)
        torch.manual_seed(1)  # the backup's sampled next actions
        learning.critic_update(
            agent, target, batch, opt, alpha=torch.tensor(0.1), target_critic_ensemble_n=2,
            dr3_coeff=1.0, dr3_online_next=online,
        )  # fmt: skip
        grads[online] = agent.encoder.linear.weight.grad.clone()
    torch.testing.assert_close(grads[True], _whole_network_encoder_grad(agent, target, batch))
    assert not torch.allclose(grads[True], grads[False], atol=1e-4)


def _whole_network_encoder_grad(agent, target, batch, **backup_settings):
    """By hand: the encoder's gradient from the TD loss plus DR3's term through both pairs,
    ``s'`` encoded online with gradient (the backup's next actions drawn after seed 1)."""
    torch.manual_seed(1)
    backup = learning.td_backup(
        agent, target, batch, alpha=torch.tensor(0.1), target_critic_ensemble_n=2,
        **backup_settings,
    )  # fmt: skip
    agent.zero_grad(set_to_none=True)
    rep, next_rep = agent.encoder(batch.obs), agent.encoder(batch.next_obs)
    loss, _, features = learning.critic_regression(
        agent, target, rep, batch.action, backup.target, batch.weights, return_features=True
    )
    phi1 = agent.critic.features(next_rep, backup.next_action)
    (loss + lu.feature_dot(features, phi1).mean()).backward()
    return agent.encoder.linear.weight.grad


def test_online_next_action_encoder_shares_the_dr3_pass_of_s_prime():
    """With next_action_encoder = "online" and dr3_online_next, s' goes through the online
    encoder once: the backup's actor reads those features detached, DR3 with gradient. The
    gradients equal the by-hand sum of the two uses (the target encoder differs from the online
    one, so an actor reading the target's features would not match)."""
    torch.manual_seed(0)
    agent = Agent(2, LinearEncoder(), hidden_size=8)
    target = learning.make_target_agent(agent)
    with torch.no_grad():
        target.encoder.linear.weight.add_(0.5)
    batch = _batch()
    opt = _opt(agent.critic, agent.encoder, lr=0.0)
    seen = []
    hook = agent.encoder.register_forward_hook(lambda m, args, out: seen.append(args[0]["obs"]))
    torch.manual_seed(1)
    learning.critic_update(
        agent, target, batch, opt, alpha=torch.tensor(0.1), target_critic_ensemble_n=2,
        dr3_coeff=1.0, dr3_online_next=True, next_action_encoder="online",
    )  # fmt: skip
    hook.remove()
    assert [x is batch.next_obs["obs"] for x in seen] == [True, False]  # s' once, then s
    grad = agent.encoder.linear.weight.grad.clone()
    by_hand = _whole_network_encoder_grad(agent, target, batch, next_action_encoder="online")
    torch.testing.assert_close(grad, by_hand)


def test_discrete_critic_uses_the_state_features():
    """Discrete critics: ``phi(s) . phi(s')``, the state features the output layer maps to every
    action's value; ``a'`` does not enter."""
    torch.manual_seed(0)
    agent = Agent(3, nets.FlatEncoder(3), discrete=True, hidden_size=16)
    target = learning.make_target_agent(agent)
    batch = _batch(discrete_actions=3)
    q_all, features = agent.critic(batch.obs["obs"], return_features=True)
    assert features.shape == (2, 6, 16) and torch.equal(q_all, agent.critic(batch.obs["obs"]))
    assert torch.equal(features, agent.critic.features(batch.obs["obs"]))
    with torch.no_grad():
        dot = lu.feature_dot(
            agent.critic.features(batch.obs["obs"]),
            agent.critic.features(batch.next_obs["obs"]),
        ).mean()
    backup = learning.td_backup(agent, target, batch, alpha=torch.tensor(0.1),
                                target_critic_ensemble_n=2)  # fmt: skip
    assert backup.next_action is None
    logs = learning.critic_update(
        agent,
        target,
        batch,
        _opt(agent.critic),
        alpha=torch.tensor(0.1),
        target_critic_ensemble_n=2,
        dr3_coeff=0.01,
    )
    assert logs["critic/feature_dot"].item() == pytest.approx(dot.item(), rel=1e-6)
    assert logs["critic/dr3_loss"].item() == pytest.approx(0.01 * dot.item(), rel=1e-6)


def test_popart_leaves_the_term_alone():
    """The features come before PopArt's normalised output layer: a PopArt critic and a plain
    one with the same weights log the same dot product, however large the targets."""
    torch.manual_seed(0)
    popart = Agent(2, nets.FlatEncoder(3), hidden_size=16, auto_rescale_targets=True)
    plain = Agent(2, nets.FlatEncoder(3), hidden_size=16)
    plain.critic.net.load_state_dict(popart.critic.net.state_dict())
    plain.actor.load_state_dict(popart.actor.state_dict())
    batch = _batch()
    batch = dataclasses.replace(batch, reward=batch.reward * 100 + 500)
    dots = []
    for agent in (popart, plain):
        target = learning.make_target_agent(agent)
        torch.manual_seed(3)
        logs = learning.critic_update(
            agent,
            target,
            batch,
            _opt(agent.critic),
            alpha=torch.tensor(0.1),
            target_critic_ensemble_n=2,
            pop=agent is popart,
            dr3_coeff=0.01,
        )
        assert torch.isfinite(logs["critic/loss"])
        dots.append(logs["critic/feature_dot"].item())
    assert dots[0] == pytest.approx(dots[1], rel=1e-6)
    assert popart.critic.popart.mu.abs().min() > 100  # the statistics did move


def test_log_feature_dot_logs_without_changing_the_update():
    agent = _deterministic_agent()
    logged = copy.deepcopy(agent)
    batch = _batch()
    kw = dict(alpha=torch.tensor(0.0), target_critic_ensemble_n=2)
    target = learning.make_target_agent(agent)
    base = learning.critic_update(agent, target, batch, _opt(agent.critic), **kw)
    logs = learning.critic_update(
        logged, target, batch, _opt(logged.critic), log_feature_dot=True, **kw
    )
    assert "critic/dr3_loss" not in logs and torch.isfinite(logs["critic/feature_dot"])
    assert logs["critic/loss"].item() == base["critic/loss"].item()
    for a, b in zip(agent.parameters(), logged.parameters()):
        assert torch.equal(a, b)


def test_sunrise_dr3_online_next_encodes_s_prime_with_the_online_encoder():
    torch.manual_seed(0)
    agent = Agent(2, LinearEncoder(), ensemble_size=3, num_critics=2, hidden_size=8)
    target = learning.make_target_agent(agent)
    with torch.no_grad():
        target.encoder.linear.weight.mul_(2.0)  # the encoders differ: so do the two choices
    batch = _batch()
    kw = dict(alpha=torch.full((3,), 0.1), target_critic_ensemble_n=2)
    dots = {}
    for online in (False, True):
        member = copy.deepcopy(agent)
        torch.manual_seed(11)
        backup, _ = sunrise.ensemble_td_backup(member, target, batch, **kw)
        with torch.no_grad():
            s = member.encoder(batch.obs)
            s1 = (member.encoder if online else target.encoder)(batch.next_obs)
            expected = torch.stack(
                [
                    (
                        _per_critic_features(member.critic, s, batch.action, k)
                        * _per_critic_features(member.critic, s1, backup.next_action[k // 2], k)
                    )
                    .sum(-1)
                    .mean()
                    for k in range(6)
                ]
            ).mean()
        torch.manual_seed(11)
        logs = sunrise.ensemble_critic_update(
            member, target, batch, _opt(member.critic, member.encoder), dr3_coeff=0.2,
            dr3_online_next=online, **kw,
        )  # fmt: skip
        dots[online] = logs["critic/feature_dot"].item()
        assert dots[online] == pytest.approx(expected.item(), rel=1e-5)
    assert dots[True] != pytest.approx(dots[False], rel=1e-3)


def test_sunrise_members_critics_use_their_own_next_actions():
    """SUNRISE: member ``e``'s critics are evaluated at ``(s', a'_e)``; the term is the mean
    over all members' critics, as a loop over the critics computes it."""
    torch.manual_seed(0)
    agent = Agent(2, nets.FlatEncoder(3), ensemble_size=3, num_critics=2, hidden_size=8)
    target = learning.make_target_agent(agent)
    batch = _batch()
    kw = dict(alpha=torch.full((3,), 0.1), target_critic_ensemble_n=2)
    torch.manual_seed(11)
    backup, _ = sunrise.ensemble_td_backup(agent, target, batch, **kw)
    assert backup.next_action.shape == (3, 6, 2)
    s = batch.obs["obs"]
    with torch.no_grad():
        per_critic = [
            (
                _per_critic_features(agent.critic, s, batch.action, k)
                * _per_critic_features(agent.critic, backup.next_rep, backup.next_action[k // 2], k)
            )
            .sum(-1)
            .mean()
            for k in range(6)
        ]
    torch.manual_seed(11)
    logs = sunrise.ensemble_critic_update(
        agent, target, batch, _opt(agent.critic), dr3_coeff=0.2, **kw
    )
    expected = torch.stack(per_critic).mean().item()
    assert logs["critic/feature_dot"].item() == pytest.approx(expected, rel=1e-5)
    assert logs["critic/dr3_loss"].item() == pytest.approx(0.2 * expected, rel=1e-5)


def test_sunrise_discrete_members_log_the_state_feature_dot():
    torch.manual_seed(0)
    agent = Agent(3, nets.FlatEncoder(3), discrete=True, ensemble_size=2, hidden_size=8)
    target = learning.make_target_agent(agent)
    batch = _batch(discrete_actions=3)
    with torch.no_grad():
        dot = lu.feature_dot(
            agent.critic.features(batch.obs["obs"]), agent.critic.features(batch.next_obs["obs"])
        ).mean()
    logs = sunrise.ensemble_critic_update(
        agent,
        target,
        batch,
        _opt(agent.critic),
        alpha=torch.full((2,), 0.1),
        target_critic_ensemble_n=2,
        log_feature_dot=True,
    )
    assert logs["critic/feature_dot"].item() == pytest.approx(dot.item(), rel=1e-6)


# ------------------------------------------------------------------ settings and the loop


def _parts(dataset):
    env, test_env = make_gym_env("Pendulum-v1", 20), make_gym_env("Pendulum-v1", 20)
    torch.manual_seed(0)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=16)
    buffer = ReplayBuffer(400, seed=0, verbose=False).load_dataset(dataset, env, gamma=0.99)
    return agent, buffer, env, test_env


def _settings(**kwargs):
    return {
        "batch_size": 8,
        "random_warmup_steps": 0,
        "eval_episodes": 1,
        "eval_interval": 1000,
        "max_episode_steps": 20,
        "verbosity": 0,
        "seed": 0,
        "init_alpha": 0.0,
        "alpha_lr": 0.0,
        "logging_method": "none",
        "num_steps_offline": 8,
        "num_steps_online": 0,
        "pg_actor_updates_per_step": 0,
        "use_pg_update_online": False,
        "dr3_coeff": 0.01,
        **kwargs,
    }


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """200 random Pendulum transitions (episodes of 20 steps), recorded by the library."""
    env = make_gym_env("Pendulum-v1", 20)
    episodes, _, act_space = ds.record_episodes(env, ds.random_policy(env, 0), 200, seed=0)
    return ds.save_npz(tmp_path_factory.mktemp("data") / "pendulum.npz", episodes, act_space)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dr3_coeff": -0.1}, r"super_sac.dr3_coeff = -0.1: DR3's weight must be >= 0.*Fix: use 0"),
        (
            {"dr3_online_next": True, "dr3_coeff": 0.0},
            r"dr3_online_next = True: only DR3's penalty .*dr3_coeff = 0",
        ),
    ],
)
def test_bad_dr3_settings_are_refused(dataset, kwargs, message):
    agent, buffer, env, test_env = _parts(dataset)
    with pytest.raises(ConfigError, match=message):
        import super_sac

        super_sac.super_sac(agent, buffer, env, test_env, **_settings(**kwargs))


def test_a_critic_without_features_is_refused(dataset):
    import super_sac
    from super_sac.nets.mlps import ContinuousCritic

    class OpaqueCritic(ContinuousCritic):
        features = None  # a custom critic that does not expose its features

    env = make_gym_env("Pendulum-v1", 20)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=16, critic_network_cls=OpaqueCritic)
    buffer = ReplayBuffer(400, seed=0, verbose=False).load_dataset(dataset, env, gamma=0.99)
    for kwargs, named in (({}, "dr3_coeff = 0.01"), ({"dr3_coeff": 0.0, "log_feature_dot": True},
                                                      "log_feature_dot = True")):  # fmt: skip
        with pytest.raises(ConfigError, match=f"super_sac.{named}: DR3 needs.*OpaqueCritic"):
            super_sac.super_sac(agent, buffer, env, env, **_settings(**kwargs))


def _trainer(dataset, tmp_path, **kwargs):
    agent, buffer, env, test_env = _parts(dataset)
    cfg = TrainConfig(
        **_settings(
            base_save_path=str(tmp_path),
            name="dr3",
            checkpoint_interval=3,
            keep_checkpoints=10,
            afbc_per=True,
            **kwargs,
        )
    )
    return Trainer(agent, buffer, env, test_env, cfg)


def test_resume_with_dr3_continues_exactly(dataset, tmp_path, monkeypatch):
    reference = _trainer(dataset, tmp_path / "a")
    reference.run()
    write = Trainer.write_checkpoint

    def crash_after_offline_step_6(self):
        write(self)
        if self.phase == "offline" and self.step == 6:
            raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "write_checkpoint", crash_after_offline_step_6)
    crashed = _trainer(dataset, tmp_path / "b")
    with pytest.raises(KeyboardInterrupt):
        crashed.run()
    monkeypatch.setattr(Trainer, "write_checkpoint", write)
    resumed = _trainer(dataset, tmp_path / "b", resume=str(crashed.run_dir))
    summary = resumed.run()
    assert summary["critic_updates"] == reference.critic_updates == 8
    for a, b in zip(reference.agent.state_dict().values(), resumed.agent.state_dict().values()):
        assert torch.equal(a, b)


def test_the_loop_logs_the_dr3_terms(dataset, tmp_path, monkeypatch):
    seen = []
    original = learning.critic_update_with_features

    def spy(*args, **kwargs):
        logs, features = original(*args, **kwargs)
        seen.append((kwargs["dr3_coeff"], kwargs["log_feature_dot"], sorted(logs)))
        return logs, features

    monkeypatch.setattr(learning, "critic_update_with_features", spy)
    trainer = _trainer(dataset, tmp_path, num_steps_offline=2)
    trainer.run()
    assert seen and all(coeff == 0.01 and not flag for coeff, flag, _ in seen)
    assert all({"critic/dr3_loss", "critic/feature_dot"} <= set(keys) for *_, keys in seen)


# ------------------------------------------------------------------ the original's configs


def _bindings(bindings):
    return [x for b in bindings for x in ("--gin_bindings", b)]


def _run(entry, argv):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = entry(argv)
    named = [
        str(w.message).split(":")[0].split(" ")[0]
        for w in caught
        if issubclass(w.category, ConfigWarning)
    ]
    return summary, named


SHORT = [  # shorter and smaller only: every other value comes from the original file
    "super_sac.batch_size = 16",
    "super_sac.eval_episodes = 1",
    "super_sac.verbosity = 0",
    "super_sac.logging_method = 'none'",
    "Agent.hidden_size = 16",
    "ReplayBuffer.size = 1000",
]


def test_original_minatar_basic_offline_trains_unchanged(tmp_path):
    env = make_minatar_env("breakout", max_episode_steps=100)
    episodes, _, act_space = ds.record_episodes(env, ds.random_policy(env, 0), 300, seed=0)
    path = ds.save_npz(tmp_path / "breakout-random.npz", episodes, act_space)
    argv = ["--game", "breakout", "--config", str(ORIGINAL / "minatar_basic_offline.gin"),
            "--dataset", str(path), "--seed", "0", "--offline_steps", "20",
            "--max_episode_steps", "100"]  # fmt: skip
    summary, named = _run(
        cli.train_minatar, argv + _bindings([*SHORT, "MinAtarEncoder.emb_dim = 8"])
    )
    assert summary["env_steps"] == 0 and summary["critic_updates"] == 20
    assert [e["phase"] for e in summary["eval_history"]] == ["offline"]
    assert np.isfinite(summary["final_eval_return"])
    assert named == []
    assert gin.query_parameter("super_sac.dr3_coeff") == 0.01  # the original's DR3 is on


def test_original_d4rl_basic_afbc_trains_unchanged(dataset):
    argv = ["--env", "Pendulum-v1", "--config", str(ORIGINAL / "d4rl_basic_afbc.gin"),
            "--dataset", str(dataset), "--seed", "0", "--offline_steps", "20",
            "--max_episode_steps", "20"]  # fmt: skip
    summary, named = _run(
        cli.train_offline, argv + _bindings([*SHORT, "super_sac.batch_size = 32"])
    )
    assert summary["env_steps"] == 0 and summary["critic_updates"] == 20
    assert [e["phase"] for e in summary["eval_history"]] == ["offline"]
    assert np.isfinite(summary["final_eval_return"])
    assert named == []
    assert gin.query_parameter("super_sac.dr3_coeff") == 0.01  # the original's DR3 is on
