"""Env worker processes (``AsyncVectorEnv``), stable-baselines3 ``VecEnv``\\ s as training envs,
the lockstep replay of running episodes on resume, and the ``--parallel_envs`` default."""

import warnings
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from super_sac import Agent, ReplayBuffer, cli, nets
from super_sac.main import ConfigError, TrainConfig, Trainer
from super_sac.vector_envs import SB3VecEnvAdapter, make_vector_env, replay_in_lockstep
from super_sac.wrappers import SimpleGymWrapper, make_gym_env

ROOT = Path(__file__).resolve().parents[1]
EPISODE = 15


def _pendulum():
    return make_gym_env("Pendulum-v1", max_episode_steps=EPISODE)


def _trainer(tmp_path, kind, steps, resume=False, save=True):
    torch.manual_seed(0)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=16)
    cfg = TrainConfig(
        random_warmup_steps=20,
        batch_size=16,
        verbosity=0,
        eval_episodes=0,
        base_save_path=str(tmp_path),
        save_to_disk=save,
        log_to_disk=False,
        name="vec",
        logging_method="none",
        seed=4,
        checkpoint_interval=10,
        num_steps_online=steps,
        transitions_per_online_step=2,
        n_step=3,
        resume=resume,
    )
    venv = make_vector_env(_pendulum, 2, kind)
    return Trainer(agent, ReplayBuffer(1000, verbose=False), venv, _pendulum(), cfg)


def _contents(buffer):
    batch = buffer.gather(np.arange(len(buffer)))
    return {
        "obs": batch.obs["obs"],
        "next_obs": batch.next_obs["obs"],
        "action": batch.action,
        "reward": batch.reward,
        "done": batch.done,
        "discount": batch.discount,
    }


def _run(trainer):
    try:
        trainer.run()
    finally:
        trainer.env.close()
    return trainer


def test_async_envs_store_the_same_transitions_as_sync_ones(tmp_path):
    sync = _run(_trainer(tmp_path / "s", "sync", 25, save=False))
    asyn = _run(_trainer(tmp_path / "a", "async", 25, save=False))
    assert isinstance(asyn.env, gym.vector.AsyncVectorEnv)
    assert len(sync.buffer) == len(asyn.buffer) > 2 * EPISODE  # episodes ended and were reset
    a, b = _contents(sync.buffer), _contents(asyn.buffer)
    for key in a:
        assert torch.equal(a[key], b[key]), key
    for (k, x), y in zip(sync.agent.state_dict().items(), asyn.agent.state_dict().values()):
        assert torch.equal(x, y), k


def test_async_run_resumes_exactly(tmp_path):
    full = _run(_trainer(tmp_path / "full", "async", 40))
    _run(_trainer(tmp_path / "part", "async", 25))  # checkpoint at 20, mid-episode, n-step pending
    resumed = _trainer(tmp_path / "part", "async", 40, resume=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(resumed)
    assert resumed.env_steps == full.env_steps == 80
    a, b = _contents(full.buffer), _contents(resumed.buffer)
    for key in a:
        assert torch.equal(a[key], b[key]), key
    for (k, x), y in zip(full.agent.state_dict().items(), resumed.agent.state_dict().values()):
        assert torch.equal(x, y), k


def _replayed_alone(make, seed, actions):
    env = make()
    obs, _ = env.reset(seed=seed)
    for action in actions:
        obs, *_ = env.step(action)
    return obs["obs"]


def test_lockstep_replay_rebuilds_each_env_even_when_fillers_end_episodes():
    """Env 1 has no actions and env 0 few, so they fill in for 11 steps, beyond the 7-step
    limit: their filler episodes end and are reset, yet each env ends where it would alone."""

    def make():
        return make_gym_env("Pendulum-v1", max_episode_steps=7)

    rng = np.random.default_rng(0)
    actions = [[rng.uniform(-1, 1, 1).astype(np.float32) for _ in range(n)] for n in (3, 0, 6)]
    seeds = [11, 22, 33]
    venv = make_vector_env(make, 3, "sync")
    obs, diverged = replay_in_lockstep(venv, seeds, actions)
    assert not diverged.any()
    for i in range(3):
        np.testing.assert_array_equal(obs["obs"][i], _replayed_alone(make, seeds[i], actions[i]))
    # a wrong seed is noticed: the replay is not trivially equal
    assert not np.array_equal(obs["obs"][0], _replayed_alone(make, 12, actions[0]))


# ----------------------------------------------------------------------------- SB3


class CountingEnv(gym.Env):
    """Observation = the step count; terminates at ``terminate_at`` (if given)."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, terminate_at=None):
        self.terminate_at, self.t = terminate_at, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return np.array([self.t], np.float32), 1.0, terminated, False, {}


def test_sb3_vec_env_trains_with_terminations_and_truncations_apart(tmp_path):
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv(
        [
            lambda: gym.wrappers.TimeLimit(CountingEnv(), 3),  # truncated at 3
            lambda: CountingEnv(terminate_at=2),  # terminated at 2
        ]
    )
    agent = Agent(1, nets.FlatEncoder(1), hidden_size=8)
    buffer = ReplayBuffer(100, verbose=False)
    summary = super_sac_run(agent, buffer, venv, SimpleGymWrapper(CountingEnv(5)), steps=6)
    assert summary["env_steps"] == 12
    c = _contents(buffer)
    obs, next_obs, done = c["obs"][:, 0], c["next_obs"][:, 0], c["done"][:, 0]
    # rows alternate env 0, env 1
    assert obs[0::2].tolist() == [0, 1, 2, 0, 1, 2]
    assert next_obs[0::2].tolist() == [1, 2, 3, 1, 2, 3]  # the true final obs, not the reset one
    assert done[0::2].tolist() == [0, 0, 0, 0, 0, 0]  # truncation bootstraps
    assert obs[1::2].tolist() == [0, 1, 0, 1, 0, 1]
    assert next_obs[1::2].tolist() == [1, 2, 1, 2, 1, 2]
    assert done[1::2].tolist() == [0, 1, 0, 1, 0, 1]  # termination stops bootstrapping


def test_sb3_vec_env_of_pendulums_trains_past_its_warmup():
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv([partial(make_gym_env, "Pendulum-v1", max_episode_steps=5)] * 2)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    buffer = ReplayBuffer(100, verbose=False)
    summary = super_sac_run(agent, buffer, venv, make_gym_env("Pendulum-v1"), steps=12, warmup=10)
    assert summary["env_steps"] == 24 and summary["critic_updates"] > 0
    c = _contents(buffer)
    assert not c["done"].any()  # Pendulum only truncates
    # each env's 5th transition ends at its true final observation, and the next one starts anew
    for env in (0, 1):
        obs, next_obs = c["obs"][env::2], c["next_obs"][env::2]
        assert torch.equal(next_obs[:4], obs[1:5])
        assert not torch.equal(next_obs[4], obs[5])


def super_sac_run(agent, buffer, train_env, test_env, steps, warmup=100):
    import super_sac

    return super_sac.super_sac(
        agent,
        buffer,
        train_env,
        test_env,
        num_steps_online=steps,
        transitions_per_online_step=2,
        random_warmup_steps=warmup,
        batch_size=4,
        save_to_disk=False,
        log_to_disk=False,
        verbosity=0,
        eval_episodes=0,
        seed=0,
    )


def test_sb3_adapter_refuses_observations_it_cannot_batch_as_a_dict():
    from stable_baselines3.common.vec_env import DummyVecEnv

    class DiscreteObs(CountingEnv):
        observation_space = gym.spaces.Discrete(4)

    with pytest.raises(TypeError, match="Box or a Dict of Box observations"):
        SB3VecEnvAdapter(DummyVecEnv([DiscreteObs]))


def test_sb3_adapter_keeps_integer_image_dtypes():
    from stable_baselines3.common.vec_env import DummyVecEnv

    class Frames(gym.Env):
        observation_space = gym.spaces.Box(0, 255, (2, 4, 4), np.uint8)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.full((2, 4, 4), 200, np.uint8), {}

        def step(self, action):
            return np.full((2, 4, 4), 201, np.uint8), 0.0, False, False, {}

    adapter = SB3VecEnvAdapter(DummyVecEnv([Frames, Frames]))
    assert adapter.single_observation_space["obs"].dtype == np.uint8
    obs, _ = adapter.reset()
    assert obs["obs"].dtype == np.uint8 and obs["obs"].shape == (2, 2, 4, 4)
    obs, *_ = adapter.step(np.array([0, 1]))
    assert obs["obs"].dtype == np.uint8 and (obs["obs"] == 201).all()


# ----------------------------------------------------------------------------- CLI

train_gym = partial(cli.train_gym, search_dirs=[ROOT / "experiments" / "gym"])
SMALL = [
    "Agent.hidden_size = 16",
    "ReplayBuffer.size = 500",
    "super_sac.batch_size = 8",
    "super_sac.random_warmup_steps = 100",
    "super_sac.eval_episodes = 0",
    "super_sac.verbosity = 0",
    "super_sac.save_to_disk = False",
    "super_sac.log_to_disk = False",
]


def _cli(*argv, bindings=()):
    args = [x for b in SMALL + list(bindings) for x in ("--gin_bindings", b)]
    return train_gym(["--env", "Pendulum-v1", "--steps", "5", "--seed", "0", *args, *argv])


def test_parallel_envs_alone_steps_every_env_once_per_online_step():
    summary = _cli("--parallel_envs", "2")
    assert summary["env_steps"] == 10


def test_parallel_envs_keeps_a_setting_of_the_user():
    summary = _cli("--parallel_envs", "2", bindings=["super_sac.transitions_per_online_step = 4"])
    assert summary["env_steps"] == 20
    with pytest.raises(ConfigError, match="transitions_per_online_step = 3: is not a multiple"):
        _cli("--parallel_envs", "2", bindings=["super_sac.transitions_per_online_step = 3"])


def test_vector_async_option_builds_worker_processes():
    args = cli.build_parser().parse_args(["--vector", "async", "--parallel_envs", "2"])
    train_env, test_env = cli.gym_envs(args)
    try:
        assert isinstance(train_env, gym.vector.AsyncVectorEnv) and train_env.num_envs == 2
        assert train_env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.DISABLED
        assert not isinstance(test_env, gym.vector.VectorEnv)
    finally:
        train_env.close()
    summary = _cli("--parallel_envs", "2", "--vector", "async")
    assert summary["env_steps"] == 10


@pytest.mark.parametrize("n", [0, -2, 1.5])
def test_a_vector_env_needs_at_least_one_env(n):
    with pytest.raises(ValueError, match=r"needs n >= 1 envs \(a whole number\), got"):
        make_vector_env(lambda: gym.make("Pendulum-v1"), n)


@pytest.mark.parametrize("value", ["0", "-2"])
def test_the_scripts_refuse_fewer_than_one_parallel_env(value, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.train_gym(["--parallel_envs", value, "--dry_run"])
    assert stop.value.code == 2
    assert f"--parallel_envs: must be 1 or more, got {int(value)}" in capsys.readouterr().err


def test_async_workers_are_closed_when_the_run_fails_before_training():
    import multiprocessing

    gym_dir = Path(__file__).resolve().parents[1] / "experiments" / "gym"
    argv = ["--parallel_envs", "2", "--vector", "async", "--dry_run"]
    bindings = ["--gin_bindings", "Agent.hidden_size = -3"]  # the agent cannot be built
    with pytest.raises(ValueError):
        cli.train_gym([*argv, *bindings], search_dirs=[gym_dir])
    assert not [p for p in multiprocessing.active_children() if "AsyncVectorEnv" in p.name]
