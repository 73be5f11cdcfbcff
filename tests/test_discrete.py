"""SAC-Discrete: categorical actor, per-action critics, exact-expectation targets and losses,
epsilon-greedy exploration, and the loop on CartPole."""

import dataclasses
import math
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from test_learning import _batch as learning_batch
from test_main import SMALL as GYM_SMALL

import super_sac
from super_sac import Agent, ReplayBuffer, cli, learning, nets, optim
from super_sac import learning_utils as lu
from super_sac.main import ConfigError
from super_sac.nets.mlps import (
    ContinuousDeterministicActor,
    ContinuousStochasticActor,
    DiscreteActor,
    DiscreteCritic,
)
from super_sac.wrappers import make_gym_env

ROOT = Path(__file__).resolve().parents[1]
train_gym = partial(cli.train_gym, search_dirs=[ROOT / "experiments" / "gym"])

LN_025, LN_075, LN_05 = math.log(0.25), math.log(0.75), math.log(0.5)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ----------------------------------------------------------------------------- networks


def test_discrete_actor_and_critic_shapes_and_gradients():
    actor = DiscreteActor(3, 4, hidden_size=16)
    dist = actor(torch.randn(5, 3))
    assert isinstance(dist, torch.distributions.Categorical)
    assert dist.probs.shape == (5, 4)
    assert torch.allclose(dist.probs.sum(-1), torch.ones(5))
    critic = DiscreteCritic(3, 4, num_critics=3, hidden_size=16)
    state = torch.randn(5, 3, requires_grad=True)
    q = critic(state)
    assert q.shape == (3, 5, 4)
    critic(state, detach_params=True).sum().backward()
    assert all(p.grad is None for p in critic.parameters())
    assert state.grad is not None
    with pytest.raises(ValueError, match="at least 2 actions"):
        DiscreteActor(3, 1)


def test_discrete_agent_builds_discrete_nets_and_acts_with_indices():
    agent = Agent(3, nets.FlatEncoder(4), discrete=True, hidden_size=16, num_critics=5)
    assert isinstance(agent.actor, DiscreteActor) and isinstance(agent.critic, DiscreteCritic)
    assert agent.critic(torch.zeros(2, 4)).shape == (5, 2, 3)
    obs = {"obs": np.random.randn(4).astype(np.float32)}
    a = agent.forward(obs)
    assert a.shape == () and a.dtype == np.int64
    # the evaluation action is the most probable one
    probs = agent.actor(torch.as_tensor(obs["obs"])[None]).probs
    assert int(a) == int(probs.argmax())
    batched = {"obs": np.random.randn(7, 4).astype(np.float32)}
    sampled = agent.sample_action(batched, batched=True)
    assert sampled.shape == (7,) and sampled.dtype == np.int64
    assert sampled.min() >= 0 and sampled.max() < 3


def test_discrete_agent_rejects_continuous_only_settings():
    with pytest.raises(ValueError, match="deterministic.*DiscreteActor"):
        Agent(3, nets.FlatEncoder(4), discrete=True, actor_network_cls=ContinuousDeterministicActor)
    with pytest.raises(ValueError, match="auto_rescale_targets"):
        Agent(3, nets.FlatEncoder(4), discrete=True, auto_rescale_targets=True)
    # the continuous defaults are swapped, not an error
    agent = Agent(
        3, nets.FlatEncoder(4), discrete=True, actor_network_cls=ContinuousStochasticActor
    )
    assert isinstance(agent.actor, DiscreteActor)


# ----------------------------------------------------------------------------- targets and losses


def _batch(reward, done, discount, action=None):
    batch = learning_batch(reward, done, discount)
    batch.action = torch.zeros(len(reward), dtype=torch.int64)
    if action is not None:
        batch.action = torch.tensor(action)
    return batch


def _stub(actor=None, critic=None):
    return SimpleNamespace(
        encoder=lambda o: o["obs"], actor=actor, critic=critic, discrete=True, stochastic=True
    )


def _const_critic(values):
    """Critic i gives Q_i(s, a) = values[i][a] in every state."""
    table = torch.tensor(values)

    def critic(rep, detach_params=False):
        return table[:, None, :].expand(-1, rep.shape[0], -1)

    return critic


def test_discrete_target_is_the_exact_expectation_over_next_actions():
    policy = lambda rep: torch.distributions.Categorical(  # noqa: E731
        probs=torch.tensor([[0.25, 0.75]]).expand(rep.shape[0], -1)
    )
    agent = _stub(actor=policy)
    target_agent = _stub(critic=_const_critic([[1.0, 3.0], [2.0, 2.0]]))
    batch = _batch(reward=[1.0, 1.0, 0.5], done=[0.0, 1.0, 0.0], discount=[0.99, 0.99, 0.9801])
    y = learning.compute_td_target(
        agent, target_agent, batch, alpha=torch.tensor(0.5), target_critic_ensemble_n=2
    )
    # per-action min over the two critics: [1, 2];
    # V = 0.25 (1 - 0.5 ln 0.25) + 0.75 (2 - 0.5 ln 0.75) = 0.4232868 + 1.6078808 = 2.0311676
    v = 2.0311676
    assert abs(0.25 * (1 - 0.5 * LN_025) + 0.75 * (2 - 0.5 * LN_075) - v) < 1e-6
    # row 1 terminated: no bootstrap; row 2 is a 2-step transition with discount 0.99^2
    expected = torch.tensor([[1.0 + 0.99 * v], [1.0], [0.5 + 0.9801 * v]])
    assert torch.allclose(y, expected, atol=1e-5)


def test_discrete_target_redq_subset_takes_the_min_of_a_drawn_pair_per_action():
    policy = lambda rep: torch.distributions.Categorical(  # noqa: E731
        probs=torch.tensor([[0.5, 0.5]]).expand(rep.shape[0], -1)
    )
    # three critics; each pair's per-action minimum gives a different value with alpha = 0
    critic = _const_critic([[1.0, 10.0], [2.0, 20.0], [4.0, 40.0]])
    batch = _batch(reward=[0.0], done=[0.0], discount=[1.0])
    # pairs {0,1}, {0,2}: min = [1, 10] -> 5.5; pair {1,2}: [2, 20] -> 11
    seen = set()
    for seed in range(30):
        torch.manual_seed(seed)
        y = learning.compute_td_target(
            _stub(actor=policy),
            _stub(critic=critic),
            batch,
            alpha=torch.tensor(0.0),
            target_critic_ensemble_n=2,
        )
        seen.add(round(float(y), 4))
    assert seen == {5.5, 11.0}


def test_critic_values_gather_the_taken_actions():
    q = torch.arange(2 * 3 * 4, dtype=torch.float32).view(2, 3, 4)
    out = lu.gather_actions(q, torch.tensor([3, 0, 2]))
    assert out.shape == (2, 3, 1)
    assert out.squeeze(-1).tolist() == [[3.0, 4.0, 10.0], [15.0, 16.0, 22.0]]


def test_discrete_critic_update_regresses_the_taken_action_only():
    torch.manual_seed(0)
    agent = Agent(3, nets.FlatEncoder(2), discrete=True, hidden_size=8)
    target = learning.make_target_agent(agent)
    batch = _batch(reward=[1.0, 0.0], done=[1.0, 1.0], discount=[0.99, 0.99], action=[2, 0])
    batch.obs = {"obs": torch.randn(2, 2)}
    q_before = agent.critic(batch.obs["obs"]).detach()
    opt = optim.build_optimizer(optim.ParamGroup(list(agent.critic.parameters()), 1e-3))
    logs = learning.critic_update(
        agent, target, batch, opt, alpha=torch.tensor(0.1), target_critic_ensemble_n=2
    )
    # terminal rows: y = r; loss = sum_i 0.5 mean_b (Q_i(s_b, a_b) - r_b)^2 with a = (2, 0)
    taken = q_before[:, [0, 1], [2, 0]]
    expected = 0.5 * ((taken - torch.tensor([1.0, 0.0])) ** 2).mean(dim=1).sum()
    assert torch.allclose(logs["critic/loss"], expected, atol=1e-6)
    assert logs["critic/abs_td_error"].shape == (2,)


def test_discrete_actor_loss_by_hand():
    probs = torch.tensor([[0.25, 0.75], [0.5, 0.5]])
    q = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    loss = lu.discrete_actor_loss(q, probs, probs.log(), torch.tensor(0.5))
    # row 0: 0.25 (0.5 ln .25 - 1) + 0.75 (0.5 ln .75 - 2) = -2.0311676; row 1: 0.5 ln .5
    assert math.isclose(float(loss), (-2.0311676 + 0.5 * LN_05) / 2, abs_tol=1e-6)


def test_discrete_alpha_loss_uses_the_exact_entropy():
    probs = torch.tensor([[0.25, 0.75]])
    e_log_pi = lu.expected_log_prob(probs, probs.log())
    # 0.25 ln 0.25 + 0.75 ln 0.75 = -0.3465736 - 0.2157616
    assert math.isclose(float(e_log_pi), -0.5623352, abs_tol=1e-6)
    h_target = lu.discrete_target_entropy(2, 0.3)
    assert math.isclose(h_target, 0.3 * 0.98 * math.log(2))
    assert math.isclose(lu.discrete_target_entropy(6, 1.0), 0.98 * math.log(6))
    log_alpha = torch.tensor(math.log(2.0), requires_grad=True)
    loss = lu.alpha_loss(log_alpha, e_log_pi, h_target)
    # -ln 2 * (-0.5623352 + 0.2037853) = 0.2485279
    assert math.isclose(float(loss.detach()), 0.2485279, abs_tol=1e-6)
    # the update's gradient is -(E[log pi] + H_target) > 0: entropy above target, alpha falls
    opt = torch.optim.SGD([log_alpha], lr=1.0)
    learning.alpha_update(log_alpha, opt, e_log_pi, h_target)
    assert math.isclose(float(log_alpha.detach()), math.log(2.0) - 0.3585499, abs_tol=1e-6)


def test_discrete_actor_update_trains_the_actor_only_and_reports_exact_log_prob():
    torch.manual_seed(0)
    agent = Agent(3, nets.FlatEncoder(2), discrete=True, hidden_size=8)
    batch = _batch(reward=[0.0] * 4, done=[0.0] * 4, discount=[0.99] * 4)
    batch.obs = {"obs": torch.randn(4, 2)}
    critic_before = [p.detach().clone() for p in agent.critic.parameters()]
    with torch.no_grad():
        probs = agent.actor(batch.obs["obs"]).probs
        q = agent.critic(batch.obs["obs"]).amin(0)
        expected_loss = (probs * (0.2 * probs.log() - q)).sum(-1).mean()
    opt = optim.build_optimizer(optim.ParamGroup(list(agent.actor.parameters()), 1e-3))
    logs = learning.online_actor_update(agent, batch, opt, alpha=torch.tensor(0.2))
    assert torch.allclose(logs["actor/loss"], expected_loss, atol=1e-6)
    assert torch.allclose(logs["actor/log_prob"], (probs * probs.log()).sum(-1).mean())
    assert all(torch.equal(a, b) for a, b in zip(critic_before, agent.critic.parameters()))
    assert all(p.grad is None for p in agent.critic.parameters())


# ----------------------------------------------------------------------------- exploration


def test_epsilon_greedy_probabilities():
    greedy = np.full(40_000, 2, dtype=np.int64)
    rng = np.random.default_rng(0)
    assert np.array_equal(lu.epsilon_greedy(greedy, 0.0, 4, rng), greedy)
    out = lu.epsilon_greedy(greedy, 1.0, 4, rng)
    assert np.allclose(np.bincount(out, minlength=4) / out.size, 0.25, atol=0.01)
    out = lu.epsilon_greedy(greedy, 0.2, 4, rng)
    # a random action differs from the greedy one with probability 0.2 * 3/4 = 0.15
    assert out.dtype == np.int64
    assert math.isclose(float(np.mean(out != 2)), 0.15, abs_tol=0.01)


def test_epsilon_follows_the_linear_schedule_in_the_loop():
    env = make_gym_env("CartPole-v1")
    agent = Agent(2, nets.FlatEncoder(4), discrete=True, hidden_size=8)
    cfg = super_sac.main.TrainConfig(
        use_exploration_process=True,
        exploration_param_init=1.0,
        exploration_param_final=0.1,
        exploration_param_anneal=1000,
        random_warmup_steps=0,
        save_to_disk=False,
        log_to_disk=False,
    )
    trainer = super_sac.main.Trainer(agent, ReplayBuffer(100, verbose=False), env, env, cfg)
    trainer.reset_envs()
    trainer.collect(250)
    # 1.0 + 250/1000 * (0.1 - 1.0) = 0.775
    assert math.isclose(trainer.noise.std, 0.775)
    trainer.collect(1000)
    assert math.isclose(trainer.noise.std, 0.1)
    # with epsilon = 0 the loop acts with the policy's sample (epsilon-greedy perturbs a sample,
    # as in the original super_sac), drawn from torch's generator
    trainer.noise.final = 0.0
    obs = {"obs": np.repeat(trainer.obs["obs"], 64, axis=0)}  # 64 samples: not all greedy
    torch.manual_seed(3)
    explored = trainer.collector.choose_actions(obs)
    torch.manual_seed(3)
    assert np.array_equal(explored, agent.sample_action(obs, batched=True))
    assert not np.array_equal(explored, agent.forward(obs, batched=True))


# ----------------------------------------------------------------------------- the loop

SMALL = [*GYM_SMALL, "super_sac.checkpoint_interval = 150"]


def _cartpole(steps=300, extra=(), argv=(), env="CartPole-v1", config="sac_discrete.gin"):
    bindings = [x for b in SMALL + list(extra) for x in ("--gin_bindings", b)]
    args = ["--env", env, "--config", config, "--steps", str(steps)]
    return train_gym([*args, "--seed", "0", *bindings, *argv])


def test_sac_discrete_gin_trains_on_cartpole_and_resumes():
    summary = _cartpole()
    assert summary["env_steps"] == 300 and summary["critic_updates"] == 200
    assert np.isfinite(summary["final_eval_return"])
    # the end-of-run checkpoint holds the running episode's integer actions; resuming replays them
    resumed = train_gym(["--resume", summary["run_dir"], "--steps", "400"])
    assert resumed["env_steps"] == 400


@pytest.mark.parametrize(
    "extra",
    [
        ["Agent.num_critics = 4", "super_sac.target_critic_ensemble_n = 2", "super_sac.n_step = 3"],
        ["super_sac.use_exploration_process = True", "super_sac.exploration_param_anneal = 200"],
        ["super_sac.init_alpha = 0.0", "super_sac.alpha_lr = 0.0"],
        [
            "Agent.ensemble_size = 3",
            "Agent.ucb_bonus = 1.0",
            "super_sac.weighted_bellman_temp = 20.0",
            "super_sac.bootstrap_mask_prob = 0.5",
        ],
    ],
    ids=["redq_nstep", "eps_greedy_with_max_entropy", "no_entropy", "sunrise"],
)
def test_sac_discrete_variants_run(extra):
    summary = _cartpole(steps=200, extra=["super_sac.save_to_disk = False", *extra])
    assert summary["env_steps"] == 200 and np.isfinite(summary["final_eval_return"])


def test_sac_discrete_lunarlander_gin_runs():
    pytest.importorskip("Box2D", reason="LunarLander needs box2d (pip install -e '.[box2d]')")
    small = ["super_sac.save_to_disk = False", "Agent.hidden_size = 32",
             "super_sac.batch_size = 32", "super_sac.random_warmup_steps = 100"]  # fmt: skip
    summary = _cartpole(200, small, env="LunarLander-v3", config="sac_discrete_lunarlander.gin")
    assert summary["env_steps"] == 200 and np.isfinite(summary["final_eval_return"])


def _run(agent, env, **kwargs):
    kwargs = {"num_steps_online": 1, "save_to_disk": False, "log_to_disk": False,
              "verbosity": 0, "random_warmup_steps": 0, **kwargs}  # fmt: skip
    return super_sac.super_sac(agent, ReplayBuffer(100, verbose=False), env, env, **kwargs)


def test_discrete_settings_and_spaces_are_validated():
    cartpole = make_gym_env("CartPole-v1")
    with pytest.raises(ConfigError, match="Discrete action space.*discrete=True"):
        _run(Agent(2, nets.FlatEncoder(4), hidden_size=8), cartpole)
    discrete = Agent(2, nets.FlatEncoder(4), discrete=True, hidden_size=8)
    with pytest.raises(ConfigError, match="use_target_actor = True"):
        _run(discrete, cartpole, use_target_actor=True)
    with pytest.raises(ConfigError, match="target_noise_std = 0.2"):
        _run(discrete, cartpole, target_noise_std=0.2)
    with pytest.raises(ConfigError, match="epsilon-greedy probabilities"):
        _run(discrete, cartpole, exploration_param_init=1.5)
    with pytest.raises(ConfigError, match="act_space_size=2"):
        _run(Agent(3, nets.FlatEncoder(4), discrete=True, hidden_size=8), cartpole)
    with pytest.raises(ConfigError, match="Agent.discrete = True but"):
        _run(
            Agent(2, nets.FlatEncoder(3), discrete=True, hidden_size=8), make_gym_env("Pendulum-v1")
        )


def test_discrete_buffer_stores_int64_scalar_actions():
    buffer = ReplayBuffer(10, verbose=False)
    env = make_gym_env("CartPole-v1")
    buffer.allocate(env.observation_space, env.action_space)
    obs = {"obs": np.zeros((2, 4), np.float32)}
    buffer.push(obs, np.array([1, 0]), np.ones(2), obs, np.zeros(2), np.full(2, 0.99))
    batch = buffer.sample(4)
    assert batch.action.dtype == torch.int64 and batch.action.shape == (4,)
    assert isinstance(env.action_space, gym.spaces.Discrete)


def test_awac_discrete_gin_runs_on_cartpole():
    summary = _cartpole(steps=200, config="awac_discrete.gin",
                        extra=["super_sac.save_to_disk = False"])  # fmt: skip
    assert summary["env_steps"] == 200 and summary["critic_updates"] == 100
    assert summary["actor_updates"] == 100 and np.isfinite(summary["final_eval_return"])


def _minatar_learner(**settings):
    from super_sac.learner import Learner
    from super_sac.main import TrainConfig
    from super_sac.nets.cnns import MinAtarEncoder

    torch.manual_seed(0)
    agent = Agent(3, MinAtarEncoder(2, emb_dim=8), discrete=True, hidden_size=16)
    cfg = TrainConfig(init_alpha=0.0, alpha_lr=0.0, actor_lr=1e-3, encoder_lr=2e-3, **settings)
    obs = {"obs": torch.randint(0, 2, (6, 2, 10, 10), dtype=torch.uint8)}
    batch = learning_batch([0.0] * 6, [0.0] * 6, [0.99] * 6)
    batch = dataclasses.replace(
        batch, obs=obs, next_obs=obs, action=torch.tensor([0, 1, 2, 2, 1, 0])
    )
    return Learner(agent, cfg), batch


def _encoder_params(agent):
    return [p.detach().clone() for p in agent.encoder.parameters()]


def test_afbc_trains_the_encoder_only_with_afbc_update_encoder():
    for update_encoder in (False, True):
        learner, batch = _minatar_learner(afbc_filter="none", afbc_update_encoder=update_encoder)
        before = _encoder_params(learner.agent)
        learner.afbc_step(batch)
        moved = [not torch.equal(b, p) for b, p in zip(before, learner.agent.encoder.parameters())]
        assert all(moved) if update_encoder else not any(moved)
        assert learner.actor_updates == 1


def test_afbc_update_encoder_takes_one_adam_step_of_the_filtered_bc_loss():
    # binary filter: the encoder's first Adam step is -lr * g / (|g| + eps), g the gradient of
    # -mean(1[A >= 0] log pi(a|s)) through the encoder, with A from the critics before the step
    learner, batch = _minatar_learner(afbc_filter="binary", afbc_update_encoder=True)
    agent = learner.agent
    before = _encoder_params(agent)
    rep = agent.encoder(batch.obs)
    with torch.no_grad():
        q = lu.reduce_critics(agent.critic(rep), "min")
        v = (agent.actor(rep).probs * q).sum(1, keepdim=True)
        keep = (q.gather(1, batch.action.reshape(-1, 1)) - v >= 0).float()
    assert 0 < keep.sum() < len(keep)  # the filter drops some rows: the weights matter
    loss = -(keep * agent.actor(rep).log_prob(batch.action).reshape(-1, 1)).mean()
    grads = torch.autograd.grad(loss, list(agent.encoder.parameters()))
    logs = learner.afbc_step(batch)
    assert torch.allclose(logs["actor/afbc_loss"], loss.detach())
    for b, g, p in zip(before, grads, agent.encoder.parameters()):
        expected = b - 2e-3 * g / (g.abs() + 1e-8)
        assert torch.allclose(p.detach(), expected, atol=1e-7)
    # the critic optimizer's state of the encoder is untouched: its moments are its own
    assert not any(p in learner.critic_optimizer.state for p in agent.encoder.parameters())


def test_afbc_update_encoder_drops_the_critic_features_it_made_stale():
    learner, batch = _minatar_learner(afbc_update_encoder=True)
    learner.critic_step(batch, learner.alpha, 0.0)
    assert learner.critic_features(batch) is not None
    learner.afbc_step(batch)
    assert learner.critic_features(batch) is None
    learner, batch = _minatar_learner()  # without it the actor reads the cached features
    learner.critic_step(batch, learner.alpha, 0.0)
    learner.afbc_step(batch)
    assert learner.critic_features(batch) is not None
