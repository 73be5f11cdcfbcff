"""The training loop end to end: gin files, run directory, determinism, gymnasium semantics and
the errors raised before training."""

import dataclasses
import json
from functools import partial
from pathlib import Path

import gin
import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

import super_sac
from super_sac import Agent, ReplayBuffer, augmentations, cli, nets
from super_sac.config import GinConfigError, parse_gin
from super_sac.loggers import NullLogger
from super_sac.main import ConfigError, TrainConfig, Trainer
from super_sac.validation import ConfigWarning
from super_sac.wrappers import NormActionSpace, SimpleGymWrapper, make_gym_env

ROOT = Path(__file__).resolve().parents[1]
train_gym = partial(cli.train_gym, search_dirs=[ROOT / "experiments" / "gym"])

SMALL = [
    "Agent.hidden_size = 32",
    "ReplayBuffer.size = 5000",
    "super_sac.batch_size = 32",
    "super_sac.random_warmup_steps = 100",
    "super_sac.eval_interval = 150",
    "super_sac.eval_episodes = 1",
    "super_sac.log_interval = 100",
    "super_sac.save_interval = 150",
    "super_sac.verbosity = 0",
    "super_sac.max_episode_steps = 50",
]


def _train(config, steps=300, extra=(), argv=()):
    bindings = [x for b in SMALL + list(extra) for x in ("--gin_bindings", b)]
    return train_gym(
        [
            "--env",
            "Pendulum-v1",
            "--config",
            config,
            "--steps",
            str(steps),
            "--seed",
            "0",
            *bindings,
            *argv,
        ]
    )


@pytest.mark.parametrize("config", ["sac.gin", "td3.gin", "ddpg.gin", "redq.gin", "sunrise.gin"])
def test_each_gin_file_trains_and_writes_its_run_directory(config):
    summary = _train(config)
    run_dir = Path(summary["run_dir"])
    assert summary["env_steps"] == 300
    # no updates during the 100 warm-up steps; REDQ makes 20 critic updates per step
    per_step = 20 if config == "redq.gin" else 1
    assert summary["critic_updates"] == 200 * per_step
    assert np.isfinite(summary["final_eval_return"])
    assert (run_dir / "agent.pt").exists()
    saved = json.loads((run_dir / "summary.json").read_text())
    for key in (
        "env_steps",
        "critic_updates",
        "final_eval_return",
        "best_eval_return",
        "env_steps_per_s",
        "updates_per_s",
        "wall_seconds",
    ):
        assert key in saved
    config_text = (run_dir / "config.gin").read_text()
    assert "super_sac.batch_size = 32" in config_text
    assert list(run_dir.glob("events.out.tfevents.*"))


def test_popart_trains_end_to_end_and_pop_needs_it():
    summary = _train(
        "sac.gin", steps=150, extra=["Agent.auto_rescale_targets = True", "super_sac.pop = True"]
    )
    assert summary["critic_updates"] == 50 and np.isfinite(summary["final_eval_return"])
    gin.clear_config()
    with pytest.raises(ConfigError, match="pop = True.*auto_rescale_targets"):
        _run(pop=True)


def test_beta_policy_trains_end_to_end():
    summary = _train("sac.gin", steps=150, extra=["Agent.beta_dist = True"])
    assert summary["critic_updates"] == 50 and np.isfinite(summary["final_eval_return"])


def test_algorithms_differ_as_their_papers_say():
    parse_gin(["td3.gin"], search_dirs=[ROOT / "experiments" / "gym"])
    assert gin.query_parameter("super_sac.actor_delay") == 2
    assert gin.query_parameter("super_sac.target_noise_std") == 0.2
    assert gin.query_parameter("super_sac.use_target_actor") is True
    gin.clear_config()
    parse_gin(["redq.gin"], search_dirs=[ROOT / "experiments" / "gym"])
    assert gin.query_parameter("Agent.num_critics") == 10
    assert gin.query_parameter("super_sac.target_critic_ensemble_n") == 2
    assert gin.query_parameter("super_sac.critic_updates_per_step") == 20
    assert gin.query_parameter("super_sac.actor_q_reduction") == "mean"
    gin.clear_config()
    parse_gin(["sunrise.gin"], search_dirs=[ROOT / "experiments" / "gym"])
    assert gin.query_parameter("Agent.ensemble_size") == 5
    assert gin.query_parameter("Agent.ucb_bonus") == 1.0
    assert gin.query_parameter("super_sac.weighted_bellman_temp") == 20.0
    assert gin.query_parameter("super_sac.weight_type") == "sunrise"
    gin.clear_config()
    parse_gin(["ddpg.gin"], search_dirs=[ROOT / "experiments" / "gym"])
    assert gin.query_parameter("Agent.num_critics") == 1
    assert gin.query_parameter("super_sac.target_noise_std") == 0.0
    assert gin.query_parameter("super_sac.actor_delay") == 1


def test_td3_update_schedule_counts():
    summary = _train("td3.gin", steps=300)
    assert summary["critic_updates"] == 200
    assert summary["actor_updates"] == 100  # every second step


@pytest.fixture
def actor_updates_at(monkeypatch) -> list[int]:
    """The learner's critic-update count at each policy-gradient actor update of the test."""
    from super_sac.learner import Learner

    counts: list[int] = []
    actor_step = Learner.pg_actor_step

    def recording(self, *args, **kwargs):
        counts.append(self.critic_updates)
        return actor_step(self, *args, **kwargs)

    monkeypatch.setattr(Learner, "pg_actor_step", recording)
    return counts


@pytest.mark.parametrize(
    "extra", [["super_sac.random_warmup_steps = 99"], ["super_sac.transitions_per_online_step = 3"]]
)
def test_td3_actor_and_targets_move_on_the_same_update_step(actor_updates_at, extra):
    """TD3 updates the actor and every target on each d-th critic update, whatever the phase
    of the loop's step counter when updates start (an odd warm-up, 3 transitions a step)."""
    summary = _train("td3.gin", steps=300, extra=extra)
    updates = summary["critic_updates"]
    # from step 100 (after 99 warm-up steps), or from step 34 (the 100 warm-up transitions
    # end inside the 34th step of 3): either way the first update falls on an even step
    assert updates in (201, 267)
    # targets move after critic updates 2, 4, ... (target_delay 2): so does the actor
    assert actor_updates_at == list(range(2, updates + 1, 2))


def test_actor_delay_counts_steps_of_updates_with_several_critic_updates(actor_updates_at):
    extra = ["super_sac.critic_updates_per_step = 2", "super_sac.random_warmup_steps = 99"]
    summary = _train("td3.gin", steps=120, extra=extra)
    assert summary["critic_updates"] == 2 * 21
    # every second step of 2 critic updates: after critic updates 4, 8, ...
    assert actor_updates_at == list(range(4, 43, 4))


def test_original_style_gin_file_loads_unchanged(tmp_path):
    cfg = tmp_path / "old_style.gin"
    cfg.write_text(
        "agent.Agent.num_critics = 2\n"
        "agent.Agent.hidden_size = 32\n"
        "agent.Agent.critic_network_cls = @super_sac.nets.mlps.ContinuousCritic\n"
        "agent.Agent.actor_network_cls = @super_sac.nets.mlps.ContinuousStochasticActor\n"
        "main.super_sac.batch_size = 32\n"
        "main.super_sac.random_warmup_steps = 50\n"
        "main.super_sac.eval_episodes = 1\n"
        "main.super_sac.verbosity = 0\n"
        "main.super_sac.max_episode_steps = 20\n"
        "replay.ReplayBuffer.size = 1000\n"
    )
    summary = train_gym(["--config", str(cfg), "--steps", "100", "--logging", "none"])
    assert summary["env_steps"] == 100 and summary["critic_updates"] == 50


def test_unknown_gin_binding_names_the_fix():
    with pytest.raises(GinConfigError, match="Did you mean 'batch_size'"):
        parse_gin(bindings=["super_sac.batchsize = 3"])
    with pytest.raises(GinConfigError, match="Did you mean.*ContinuousCritic"):
        parse_gin(bindings=["Agent.critic_network_cls = @ContinuousCritc"])
    with pytest.raises(FileNotFoundError, match="nope.gin"):
        parse_gin(["nope.gin"])


def test_same_seed_gives_identical_parameters():
    def params():
        summary = _train("sac.gin", steps=200, extra=["super_sac.save_to_disk = True"])
        agent = Agent(1, nets.FlatEncoder(3), hidden_size=32)
        agent.load(summary["run_dir"])
        return agent.state_dict()

    first, second = params(), params()
    for k in first:
        assert torch.equal(first[k], second[k]), k


# ----------------------------------------------------------------------------- semantics


class CountingEnv(gym.Env):
    """obs = [t]; terminates when t reaches ``terminate_at``; reward = t."""

    def __init__(self, terminate_at=None):
        self.observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.terminate_at = terminate_at

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return np.array([self.t], np.float32), float(self.t), terminated, False, {}


def _counting_trainer(terminate_at=None, time_limit=None, n_step=1, **cfg):
    def make():
        env = CountingEnv(terminate_at)
        if time_limit:
            env = gym.wrappers.TimeLimit(env, time_limit)
        return SimpleGymWrapper(env)

    agent = Agent(1, nets.FlatEncoder(1), hidden_size=8)
    buffer = ReplayBuffer(100, verbose=False)
    config = TrainConfig(
        random_warmup_steps=100,
        save_to_disk=False,
        log_to_disk=False,
        verbosity=0,
        n_step=n_step,
        gamma=0.5,
        **cfg,
    )
    trainer = Trainer(agent, buffer, make(), make(), config)
    trainer.reset_envs()
    return trainer


def _stored(buffer):
    n = len(buffer)
    return (
        buffer._obs["obs"][:n, 0],
        buffer._next_obs["obs"][:n, 0],
        buffer._done[:n],
        buffer._discount[:n],
        buffer._reward[:n],
    )


def test_truncation_bootstraps_from_the_true_final_observation():
    trainer = _counting_trainer(time_limit=3)
    trainer.collect(7)
    obs, next_obs, done, _, _ = _stored(trainer.buffer)
    assert obs.tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert next_obs.tolist() == [1, 2, 3, 1, 2, 3, 1]  # 3 is the final obs, not the reset obs 0
    assert done.tolist() == [0] * 7  # truncation never stops bootstrapping
    assert trainer.episodes == 2


def test_termination_stops_bootstrapping_and_dones_can_be_overridden():
    trainer = _counting_trainer(terminate_at=2)
    trainer.collect(4)
    assert _stored(trainer.buffer)[2].tolist() == [0, 1, 0, 1]
    trainer = _counting_trainer(terminate_at=2, ignore_all_dones=True)
    trainer.collect(4)
    assert _stored(trainer.buffer)[2].tolist() == [0, 0, 0, 0]
    trainer = _counting_trainer(terminate_at=2, infinite_bootstrap=True, max_episode_steps=2)
    trainer.collect(2)
    assert _stored(trainer.buffer)[2].tolist() == [0, 0]


def test_nstep_transitions_in_the_loop():
    trainer = _counting_trainer(terminate_at=3, n_step=2)
    trainer.collect(3)
    obs, next_obs, done, discount, reward = _stored(trainer.buffer)
    # rewards 1, 2, 3 (terminal at t=3), gamma 0.5, n=2
    assert obs.tolist() == [0, 1, 2]
    assert reward.tolist() == [1 + 0.5 * 2, 2 + 0.5 * 3, 3]
    assert next_obs.tolist() == [2, 3, 3]
    assert done.tolist() == [0, 1, 1]
    assert discount.tolist() == [0.25, 0.25, 0.5]


def test_parallel_envs_collect_with_final_observations():
    venv = gym.vector.SyncVectorEnv(
        [lambda: SimpleGymWrapper(gym.wrappers.TimeLimit(CountingEnv(), 2))] * 2,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    agent = Agent(1, nets.FlatEncoder(1), hidden_size=8)
    config = TrainConfig(
        random_warmup_steps=100,
        save_to_disk=False,
        log_to_disk=False,
        verbosity=0,
        transitions_per_online_step=2,
    )
    trainer = Trainer(
        agent, ReplayBuffer(100, verbose=False), venv, SimpleGymWrapper(CountingEnv()), config
    )
    trainer.reset_envs()
    trainer.collect(6)
    obs, next_obs, *_ = _stored(trainer.buffer)
    assert obs.tolist() == [0, 0, 1, 1, 0, 0]
    assert next_obs.tolist() == [1, 1, 2, 2, 1, 1]
    assert trainer.env_steps == 6


# ----------------------------------------------------------------------------- errors


def _run(agent=None, train_env=None, test_env=None, **kwargs):
    env = make_gym_env("Pendulum-v1")
    agent = agent or Agent(1, nets.FlatEncoder(3), hidden_size=8)
    kwargs = {
        "num_steps_online": 1,
        "save_to_disk": False,
        "log_to_disk": False,
        "verbosity": 0,
        "random_warmup_steps": 0,
        **kwargs,
    }
    return super_sac.super_sac(
        agent,
        ReplayBuffer(100, verbose=False),
        train_env or env,
        test_env or make_gym_env("Pendulum-v1"),  # a test env of its own
        **kwargs,
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"target_critic_ensemble_n": 3}, "target_critic_ensemble_n = 3.*exceeds"),
        ({"n_step": 0}, "n_step = 0: must be >= 1"),
        ({"gamma": 1.5}, "gamma"),
        ({"logging_method": "csv", "log_to_disk": True}, "logging_method = 'csv'"),
        ({"random_warmup_steps": 1000}, "random_warmup_steps = 1000.*buffer"),
        ({"alpha_lr": 1e-3, "init_alpha": -0.1}, "init_alpha = -0.1: must be >= 0"),
        ({"actor_q_reduction": "max"}, "actor_q_reduction"),
        ({"reward_clip": 0.0}, r"reward_clip = 0.0: clips rewards to \[-c, c\] and must be > 0"),
    ],
)
def test_bad_settings_fail_before_training(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        _run(**kwargs)


def test_reward_clip_clips_the_stored_rewards_not_the_reported_returns():
    env, test_env = make_gym_env("Pendulum-v1", 20), make_gym_env("Pendulum-v1", 20)
    buffer = ReplayBuffer(100, verbose=False)
    settings = dict(verbosity=0, save_to_disk=False, log_to_disk=False, max_episode_steps=20)
    trainer = Trainer(
        Agent(1, nets.FlatEncoder(3), hidden_size=8),
        buffer,
        env,
        test_env,
        TrainConfig(**settings, reward_clip=0.5, seed=0),
    )
    returns = trainer.collector.collect(40)  # two episodes of Pendulum: rewards in [-16.3, 0]
    stored = buffer._reward[:40]
    assert stored.min() == -0.5 and (stored > -0.5).sum() < 40
    assert len(returns) == 2 and min(returns) < -0.5 * 20  # the env's own returns
    plain = ReplayBuffer(100, verbose=False)
    same_seed = Trainer(
        Agent(1, nets.FlatEncoder(3), hidden_size=8),
        plain,
        make_gym_env("Pendulum-v1", 20),
        make_gym_env("Pendulum-v1", 20),
        TrainConfig(**settings, seed=0),
    )
    assert same_seed.collector.collect(40) == returns
    np.testing.assert_array_equal(np.clip(plain._reward[:40], -0.5, 0.5), stored)


def test_deterministic_actor_combinations():
    agent = Agent(
        1,
        nets.FlatEncoder(3),
        hidden_size=8,
        actor_network_cls=super_sac.nets.mlps.ContinuousDeterministicActor,
    )
    with pytest.raises(ConfigError, match="deterministic.*init_alpha = 0 and alpha_lr = 0"):
        _run(agent=agent)
    with pytest.raises(ConfigError, match="use_exploration_process = True"):
        _run(agent=agent, init_alpha=0.0, alpha_lr=0.0)


def test_wandb_without_account_names_the_variables(monkeypatch):
    monkeypatch.delenv("SSAC_WANDB_ACCOUNT", raising=False)
    monkeypatch.delenv("SSAC_WANDB_PROJECT", raising=False)
    with pytest.raises(ValueError, match="SSAC_WANDB_ACCOUNT.*SSAC_WANDB_PROJECT"):
        _run(logging_method="wandb", log_to_disk=True)


def test_non_dict_observations_need_a_wrapper():
    env = NormActionSpace(gym.make("Pendulum-v1"))
    with pytest.raises(ConfigError, match="SimpleGymWrapper"):
        _run(train_env=env, test_env=env)


def test_unbounded_and_unnormalised_action_spaces():
    class Unbounded(CountingEnv):
        def __init__(self):
            super().__init__()
            self.action_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)

    env = SimpleGymWrapper(Unbounded())
    agent = Agent(1, nets.FlatEncoder(1), hidden_size=8)
    with pytest.raises(ConfigError, match="unbounded action space"):
        _run(agent=agent, train_env=env, test_env=env)
    with pytest.raises(ValueError, match="unbounded"):
        NormActionSpace(Unbounded())
    raw = SimpleGymWrapper(gym.make("Pendulum-v1"))  # actions in [-2, 2]
    with pytest.raises(ConfigError, match="NormActionSpace"):
        _run(train_env=raw, test_env=raw)


def test_wrong_action_size_and_unimplemented_loop_features():
    with pytest.raises(ConfigError, match="act_space_size=1"):
        _run(agent=Agent(2, nets.FlatEncoder(3), hidden_size=8))
    with pytest.raises(ConfigError, match="num_steps_offline = 10.*buffer is empty.*load_dataset"):
        _run(num_steps_offline=10)
    with pytest.raises(ConfigError, match="augmenter = <object.*must be callable"):
        _run(augmenter=object())


def test_vector_env_in_next_step_mode_is_rejected():
    venv = gym.vector.SyncVectorEnv([lambda: make_gym_env("Pendulum-v1")])
    with pytest.raises(ConfigError, match="DISABLED.*SAME_STEP"):
        _run(train_env=venv, test_env=make_gym_env("Pendulum-v1"))


def test_norm_action_space_rescales_to_env_bounds():
    env = NormActionSpace(gym.make("Pendulum-v1"))
    assert env.action_space.low.tolist() == [-1.0] and env.action_space.high.tolist() == [1.0]
    assert env.action(np.array([1.0], np.float32)).tolist() == [2.0]
    assert env.action(np.array([-0.5], np.float32)).tolist() == [-1.0]


def test_verbosity_zero_silences_the_buffers_allocation_message(capsys):
    def run(verbosity):
        super_sac.super_sac(
            Agent(1, nets.FlatEncoder(3), hidden_size=8), ReplayBuffer(100),  # verbose buffer
            make_gym_env("Pendulum-v1"), make_gym_env("Pendulum-v1"), num_steps_online=3,
            random_warmup_steps=0, verbosity=verbosity, save_to_disk=False, log_to_disk=False,
            eval_episodes=0,
        )  # fmt: skip
        return capsys.readouterr().out

    assert "ReplayBuffer: 100 transitions" in run(1)
    assert run(0) == ""


def test_zero_eval_episodes_skips_evaluation(tmp_path, capsys):
    summary = _run(eval_episodes=0, num_steps_online=3)
    assert summary["eval_history"] == [] and np.isnan(summary["final_eval_return"])
    # on disk the missing returns are JSON nulls (strict parsers refuse a bare NaN)
    run_dir = tmp_path / "run"
    _run(eval_episodes=0, num_steps_online=3, save_to_disk=True, run_dir=str(run_dir), verbosity=1)
    text = (run_dir / "summary.json").read_text()
    assert "NaN" not in text
    saved = json.loads(text)
    assert saved["final_eval_return"] is None and saved["best_eval_return"] is None
    assert "no evaluations after 3 env steps" in capsys.readouterr().out


class _RecordingLogger(NullLogger):
    def __init__(self):
        self.calls: list[tuple[dict[str, float], int]] = []

    def log(self, metrics, step):
        self.calls.append((dict(metrics), step))


def test_each_update_metric_is_logged_once_and_only_what_applies():
    """Update metrics are logged once (a log with no update since the last sends only the
    schedule), per critic for per-critic vectors; the exploration std only when noise is added,
    the env steps per second only online."""
    from super_sac import reporting

    trainer = Trainer(
        Agent(1, nets.FlatEncoder(3), hidden_size=8),
        ReplayBuffer(100, verbose=False),
        make_gym_env("Pendulum-v1"),
        make_gym_env("Pendulum-v1"),
        TrainConfig(verbosity=0, save_to_disk=False, log_to_disk=False),
    )
    trainer.logger = logger = _RecordingLogger()
    trainer.last_logs = {
        "critic/loss": torch.tensor(2.0),
        "critic/member_mse": torch.tensor([1.0, 3.0]),
        "actor/loss": torch.tensor([0.5, 1.5]),  # a batch of values: their mean
    }
    trainer.phase = "offline"
    reporting.log(trainer, 1.0)
    trainer.phase = "online"
    reporting.log(trainer, 1.0)
    (first, _), (second, _) = logger.calls
    assert first["critic/loss"] == 2.0 and first["actor/loss"] == 1.0
    assert (first["critic/member_mse/0"], first["critic/member_mse/1"]) == (1.0, 3.0)
    assert "critic/member_mse" not in first
    assert not any(k.startswith(("critic/", "actor/")) for k in second)
    assert "perf/env_steps_per_s" not in first and "perf/env_steps_per_s" in second
    assert "schedule/exploration_std" not in first | second  # SAC adds no noise
    trainer.cfg = dataclasses.replace(trainer.cfg, use_exploration_process=True)
    reporting.log(trainer, 1.0)
    assert logger.calls[-1][0]["schedule/exploration_std"] == trainer.noise.std


def test_matmul_precision_applies_during_the_run_and_is_restored():
    seen = {}

    class Spy(Trainer):
        def update(self):
            seen["precision"] = torch.get_float32_matmul_precision()
            super().update()

    before = torch.get_float32_matmul_precision()
    env = make_gym_env("Pendulum-v1")
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=16)
    cfg = TrainConfig(
        num_steps_online=3,
        random_warmup_steps=1,
        batch_size=2,
        eval_episodes=0,
        verbosity=0,
        save_to_disk=False,
        log_to_disk=False,
        matmul_precision="medium",
    )
    Spy(agent, ReplayBuffer(100, verbose=False), env, make_gym_env("Pendulum-v1"), cfg).run()
    assert seen["precision"] == "medium"
    assert torch.get_float32_matmul_precision() == before
    with pytest.raises(ConfigError, match="matmul_precision = 'low'"):
        _run(matmul_precision="low")


# ----------------------------------------------------------------------------- custom encoders


class ImageAndStateObs(gym.ObservationWrapper):
    """Pendulum as ``{"image": (3, 8, 8) uint8, "state": (10,) float64}`` (float64 on purpose:
    numpy's default dtype, which the buffer stores as float32)."""

    def __init__(self, env):
        super().__init__(env)
        self.observation_space = spaces.Dict(
            {
                "image": spaces.Box(0, 255, (3, 8, 8), np.uint8),
                "state": spaces.Box(-np.inf, np.inf, (10,), np.float64),
            }
        )

    def observation(self, obs):
        image = np.full((3, 8, 8), int(127 * (1 + obs[0])), np.uint8)
        return {"image": image, "state": np.resize(obs, 10).astype(np.float64)}


class ConvAndStateEncoder(nets.Encoder):
    """The README's encoder example, as written there (``nn.LazyLinear`` included)."""

    def __init__(self, channels: int, state_dim: int, emb_dim: int = 16):
        super().__init__()
        self.conv = torch.nn.Sequential(torch.nn.Conv2d(channels, 4, 3), torch.nn.ReLU(),
                                        torch.nn.Flatten())  # fmt: skip
        self.fc = torch.nn.LazyLinear(emb_dim - state_dim)
        self._dim = emb_dim

    @property
    def embedding_dim(self) -> int:
        return self._dim

    def forward(self, obs_dict):
        image = obs_dict["image"].float() / 255.0
        return torch.cat([self.fc(self.conv(image)), obs_dict["state"]], dim=-1)


def _image_and_state_env():
    return NormActionSpace(ImageAndStateObs(gym.make("Pendulum-v1", max_episode_steps=50)))


def test_the_readme_encoder_with_lazy_modules_and_float64_state_trains():
    torch.manual_seed(0)
    agent = Agent(1, ConvAndStateEncoder(3, 10), hidden_size=8)
    obs, _ = _image_and_state_env().reset(seed=0)
    # acting casts float64 to float32 as the buffer does, so a custom encoder sees one dtype
    assert agent.forward(obs).shape == (1,)
    agent = Agent(1, ConvAndStateEncoder(3, 10), hidden_size=8)  # lazy again
    summary = super_sac.super_sac(
        agent, ReplayBuffer(200, verbose=False), _image_and_state_env(), _image_and_state_env(),
        num_steps_online=40, random_warmup_steps=10, batch_size=8, eval_interval=1000,
        eval_episodes=1, save_to_disk=False, log_to_disk=False, verbosity=0, seed=0,
    )  # fmt: skip
    assert summary["critic_updates"] == 30
    # the LazyLinear was materialised before the target copy: 4 * 6 * 6 conv features in
    assert agent.encoder.fc.weight.shape == (6, 144)


@pytest.mark.parametrize(
    "encoder, message",
    [
        (nets.FlatEncoder(4), r"FlatEncoder returns features of shape \(2, 3\) for a batch of "
                              r"2, but its embedding_dim is 4.*needs dim = 3"),
        (ConvAndStateEncoder(3, 10), r"ConvAndStateEncoder cannot read the env's observations "
                                     r"\{'obs': '\(3,\) float32'\}.*KeyError.*Fix: build"),
    ],
)  # fmt: skip
def test_an_encoder_that_does_not_fit_the_observations_fails_before_training(encoder, message):
    buffer = ReplayBuffer(100, verbose=False)
    with pytest.raises(ConfigError, match=message):
        super_sac.super_sac(Agent(1, encoder, hidden_size=8), buffer, make_gym_env("Pendulum-v1"),
                            make_gym_env("Pendulum-v1"), num_steps_online=5, verbosity=0,
                            random_warmup_steps=0, save_to_disk=False,
                            log_to_disk=False)  # fmt: skip
    assert not buffer.allocated  # refused before anything was allocated


class WrongWidth(nets.FlatEncoder):
    @property
    def embedding_dim(self) -> int:
        return 5


def test_an_encoder_whose_width_is_not_its_embedding_dim_fails_before_training():
    with pytest.raises(ConfigError, match=r"WrongWidth returns features of shape \(2, 3\) for a "
                       r"batch of 2, but its embedding_dim is 5.*Fix"):  # fmt: skip
        _run(agent=Agent(1, WrongWidth(3), hidden_size=8), num_steps_online=5)


class ImageObs(gym.ObservationWrapper):
    """Pendulum seen as a ``{"image"}`` dict of the given shape and dtype (plus a "vel" key)."""

    def __init__(self, env, shape=(3, 8, 8), dtype=np.uint8, high=255, vel=True):
        super().__init__(env)
        keys = {"image": spaces.Box(0, high, shape, dtype)}
        if vel:
            keys["vel"] = spaces.Box(-8.0, 8.0, (1,), np.float32)
        self.observation_space = spaces.Dict(keys)

    def observation(self, obs):
        space = self.observation_space
        out = {
            "image": np.full(space["image"].shape, 0.5 * space["image"].high, space["image"].dtype)
        }
        if "vel" in space.spaces:
            out["vel"] = obs[2:3].astype(np.float32)
        return out


def _image_env(**kwargs):
    return NormActionSpace(ImageObs(gym.make("Pendulum-v1", max_episode_steps=50), **kwargs))


class ImageVelEncoder(nets.Encoder):
    """Reads a (3, 8, 8) image and the "vel" key; ``channels_last``: (8, 8, 3) images, permuted
    by the encoder itself (a user's fix for channels-last frames)."""

    def __init__(self, channels_last: bool = False):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 2, 3)
        self.channels_last = channels_last

    @property
    def embedding_dim(self) -> int:
        return 2 * 6 * 6 + 1

    def forward(self, obs_dict):
        image = obs_dict["image"].float() / 255.0
        if self.channels_last:
            image = image.permute(0, 3, 1, 2)
        return torch.cat([self.conv(image).flatten(1), obs_dict["vel"]], dim=-1)


def test_a_test_env_with_other_observations_is_refused_before_training():
    agent = Agent(1, ImageVelEncoder(), hidden_size=8)
    with pytest.raises(
        ConfigError,
        match=r"test_env's observations differ from train_env's: "
        r"'image' is \(3, 10, 10\) uint8 \(train_env: \(3, 8, 8\) uint8\).*Fix",
    ):
        _run(agent=agent, train_env=_image_env(), test_env=_image_env(shape=(3, 10, 10)))
    with pytest.raises(
        ConfigError,
        match=r"lacks the key\(s\) \['vel'\], and the encoder "
        r"ImageVelEncoder cannot read its observations without them.*Fix",
    ):
        _run(agent=agent, train_env=_image_env(), test_env=_image_env(vel=False))
    # a key the encoder ignores may be missing, and uint8 frames may be float32 0..255 there
    image_only = Agent(1, nets.FlatEncoder(192, keys=("image",)), hidden_size=8)
    _run(agent=image_only, train_env=_image_env(), test_env=_image_env(vel=False))
    _run(agent=image_only, train_env=_image_env(), test_env=_image_env(dtype=np.float32))


def test_channels_last_is_judged_by_the_smallest_last_axis():
    from super_sac.validation.probes import _looks_channels_last

    assert _looks_channels_last((84, 84, 3)) and _looks_channels_last((64, 64, 9))
    assert _looks_channels_last((10, 10, 6))  # raw MinAtar space_invaders grids
    assert not _looks_channels_last((9, 84, 84)) and not _looks_channels_last((4, 10, 10))
    assert not _looks_channels_last((10, 10, 10)) and not _looks_channels_last((84, 84))


def test_an_augmenter_reads_only_its_own_keys_for_the_layout_check():
    from super_sac.validation.probes import _validate_augmented_keys

    obs = {"hwc": torch.zeros(2, 8, 8, 3), "chw": torch.zeros(2, 3, 8, 8)}
    shift = [augmentations.Drqv2Aug()]
    _validate_augmented_keys(augmentations.AugmentationSequence(shift, keys=("chw",)), obs)
    with pytest.raises(ConfigError, match=r"'hwc' look channels-last"):
        _validate_augmented_keys(augmentations.AugmentationSequence(shift), obs)


def test_channels_last_images_are_named_with_the_wrapper_that_fixes_them():
    hwc = {"shape": (8, 8, 3)}
    agent = Agent(1, ConvAndStateEncoder(3, 1, emb_dim=8), hidden_size=8)
    with pytest.raises(
        ConfigError,
        match=r"cannot read .*'image' look channels-last \(H, W, C\)"
        r".*Fix: wrap the env with super_sac.wrappers.ChannelsFirstWrapper\(env, "
        r"keys=\('image',\)\)",
    ):
        _run(agent=agent, train_env=_image_env(**hwc), test_env=_image_env(**hwc))
    # an encoder that permutes the frames itself trains, but an augmenter would shift colours
    _run(
        agent=Agent(1, ImageVelEncoder(channels_last=True), hidden_size=8),
        train_env=_image_env(**hwc),
        test_env=_image_env(**hwc),
    )
    with pytest.raises(
        ConfigError,
        match=r"augmenter = .*shift and crop the last two axes.*"
        r"'image' look channels-last.*Fix: wrap the env",
    ):
        _run(
            agent=Agent(1, ImageVelEncoder(channels_last=True), hidden_size=8),
            train_env=_image_env(**hwc),
            test_env=_image_env(**hwc),
            augmenter=augmentations.AugmentationSequence([augmentations.Drqv2Aug()]),
        )


def test_an_augmenter_without_images_to_augment_warns():
    with pytest.warns(ConfigWarning, match=r"augmenter = .*nothing to augment.*\['obs'\]"):
        _run(augmenter=augmentations.AugmentationSequence([augmentations.Drqv2Aug()]))


def test_an_encoder_returning_float64_features_is_refused_before_training():
    class Float64(nets.FlatEncoder):
        def forward(self, obs_dict):
            return super().forward(obs_dict).double()

    with pytest.raises(
        ConfigError,
        match=r"Float64 returns a torch.float64 tensor, but the actor "
        r"and critics read float32.*Fix: return float32",
    ):
        _run(agent=Agent(1, Float64(3), hidden_size=8))


def test_a_pixel_encoder_on_float_images_in_0_1_is_refused():
    floats = {"shape": (3, 16, 16), "dtype": np.float32, "high": 1.0, "vel": False}

    def agent():
        encoder = nets.cnns.DrQPixelEncoder(3, 8, image_key="image", image_size=16)
        return Agent(1, encoder, hidden_size=8)

    with pytest.raises(
        ConfigError,
        match=r"pixel_scale = 0.00392157.*'image' holds floats "
        r"declared in \[0, 1\].*Fix: wrap the env with super_sac.wrappers.Uint8",
    ):
        _run(agent=agent(), train_env=_image_env(**floats), test_env=_image_env(**floats))
    pixels = {**floats, "high": 255.0}  # float32 pixel values 0..255 are what it is made for
    _run(agent=agent(), train_env=_image_env(**pixels), test_env=_image_env(**pixels))


def test_a_non_dict_image_env_is_pointed_to_the_wrapper_that_keeps_uint8():
    class Frames(gym.ObservationWrapper):
        def __init__(self, env):
            super().__init__(env)
            self.observation_space = spaces.Box(0, 255, (8, 8, 3), np.uint8)

        def observation(self, obs):
            return np.zeros((8, 8, 3), np.uint8)

    env = NormActionSpace(Frames(gym.make("Pendulum-v1")))
    with pytest.raises(
        ConfigError,
        match=r"Box observations.*DictObsWrapper\(env\) \(the frames under 'obs'.*then "
        r"ChannelsFirstWrapper",
    ):
        _run(train_env=env, test_env=NormActionSpace(Frames(gym.make("Pendulum-v1"))))


def test_one_env_object_as_train_and_test_env_is_refused_online_only():
    env = make_gym_env("Pendulum-v1")
    with pytest.raises(ConfigError, match=r"train_env and test_env are the same env object.*Fix"):
        _run(train_env=env, test_env=env, num_steps_online=5)
    same_step = gym.vector.AutoresetMode.SAME_STEP
    vector = gym.vector.SyncVectorEnv([lambda: env], autoreset_mode=same_step)
    with pytest.raises(ConfigError, match="same env object"):
        _run(train_env=vector, test_env=env, num_steps_online=5)
