"""The quick-start SAC and ReplayMemory: acting, updating, training, saving and loading."""

import copy
import json
import pickle
import sys
import types
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.envs.classic_control.pendulum import PendulumEnv
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import super_sac
from super_sac import SAC, ReplayMemory
from super_sac.wrappers import ActionScaler

SMALL = dict(hidden_size=16, batch_size=8, memory_capacity=1_000)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: threads only add overhead on a shared machine
    yield
    torch.set_num_threads(threads)


class CounterEnv(gym.Env):
    """Observation ``[t]``; reward = the action; the episode ends after ``length`` steps, by
    termination or by truncation."""

    def __init__(self, length: int = 3, terminate: bool = False):
        self.observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.action_space = spaces.Box(-2.0, 2.0, (1,), np.float32)
        self.length, self.terminate = length, terminate

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        end = self.t >= self.length
        obs = np.array([self.t], np.float32)
        return obs, float(action[0]), end and self.terminate, end and not self.terminate, {}


class SpaceEnv(gym.Env):
    """An env that only has spaces (for the space checks)."""

    def __init__(self, observation_space, action_space):
        self.observation_space, self.action_space = observation_space, action_space


def pendulum(**kwargs):
    return SAC(gym.make("Pendulum-v1"), **{**SMALL, **kwargs})


def stored(memory: ReplayMemory, tmp_path) -> dict[str, np.ndarray]:
    """The memory's transitions, oldest first (read back from its saved file)."""
    path = memory.save_buffer("x", save_path=tmp_path / "dump.npz")
    with np.load(path) as data:
        return {
            "obs": data["obs_0"],
            "next_obs": data["next_obs_0"],
            "action": data["action"],
            "reward": data["reward"],
            "done": data["done"],
        }


def parameters(sac: SAC) -> list[torch.Tensor]:
    return [*sac.agent.parameters(), *sac.target_agent.parameters(), sac.log_alpha]


# ------------------------------------------------------------------------------ construction
@pytest.mark.parametrize(
    "obs_space, act_space, message",
    [
        (spaces.Discrete(4), spaces.Box(-1, 1, (1,)), "Box observation space"),
        (spaces.Box(-1, 1, (2,)), spaces.Discrete(3), "continuous"),
        (spaces.Box(-1, 1, (2,)), spaces.Box(-np.inf, np.inf, (1,)), "unbounded"),
    ],
)
def test_unsuitable_spaces_are_refused_with_the_fix(obs_space, act_space, message):
    with pytest.raises(ValueError, match=message):
        SAC(SpaceEnv(obs_space, act_space), **SMALL)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="policy_type"):
        pendulum(policy_type="Beta")
    with pytest.raises(ValueError, match="batch_size"):
        pendulum(batch_size=0)
    with pytest.raises(ValueError, match="alpha"):
        pendulum(alpha=0.0, automatic_entropy_tuning=True)


@pytest.mark.parametrize(
    "setting, error, message",
    [
        # a negative rate trains by gradient ascent, a string fails deep inside Adam
        ({"lr": -1.0}, ValueError, r"lr must be in \(0, inf\], got -1.0"),
        ({"policy_lr": 0.0}, ValueError, r"policy_lr must be in \(0, inf\]"),
        ({"lr": "abc"}, TypeError, r"lr must be a number, got 'abc'"),
        ({"lr": float("nan")}, ValueError, r"lr must be in"),
        ({"tau": 0.0}, ValueError, r"tau must be in \(0, 1\]"),
        ({"tau": 2.0}, ValueError, r"tau must be in \(0, 1\]"),
        ({"gamma": 1.5}, ValueError, r"gamma must be in \[0, 1\]"),
        ({"alpha": "0.2"}, TypeError, r"alpha must be a number"),
        ({"alpha": -0.1}, ValueError, r"alpha must be in \[0, inf\]"),
        ({"exploration_noise": -1.0}, ValueError, r"exploration_noise must be in \[0, inf\]"),
        ({"batch_size": 2.7}, TypeError, r"batch_size must be an int, got 2.7"),
        ({"memory_capacity": 1.5}, TypeError, r"memory_capacity must be an int"),
        ({"hidden_size": 0}, ValueError, r"hidden_size must be >= 1, got 0"),
        ({"log_every_updates": 0}, ValueError, r"log_every_updates must be >= 1"),
        ({"automatic_entropy_tuning": "no"}, TypeError, r"automatic_entropy_tuning must be True"),
        ({"seed": None}, TypeError, r"seed must be an int, got None"),
        ({"memory_capacity": 10, "batch_size": 64}, ValueError,
         r"batch_size 64 is larger than memory_capacity 10.*no update would ever run"),
    ],
)  # fmt: skip
def test_settings_of_the_wrong_type_or_range_are_refused_by_name(setting, error, message):
    with pytest.raises(error, match=message):
        pendulum(**setting)


def test_numpy_settings_are_accepted_and_saved_as_plain_numbers(tmp_path):
    sac = pendulum(batch_size=np.int64(8), lr=np.float32(1e-3), seed=np.int32(3))
    assert sac.batch_size == 8 and sac.seed == 3
    config = json.loads((sac.save(tmp_path / "run") / "config.json").read_text())
    assert config["init_args"]["lr"] == pytest.approx(1e-3) and config["init_args"]["seed"] == 3


def test_positional_arguments_follow_the_seed_interface():
    # SAC(env, updates_per_step, batch_size, memory_capacity, lr, policy_lr, gamma, tau, alpha,
    #     policy_type, target_update_interval, automatic_entropy_tuning, hidden_size, device,
    #     verbose_histogram, seed, log_dir, ...)
    sac = SAC(gym.make("Pendulum-v1"), 1, 8, 1000, 3e-4, 3e-4, 0.99, 0.005, 0.2, "Gaussian", 1,
              False, 16, "cpu", False, 7)  # fmt: skip
    assert sac.seed == 7 and sac.verbose_histogram is False and sac.agent.hidden_size == 16


@pytest.mark.parametrize("env", ["Pendulum-v1", None])
def test_something_that_is_not_an_env_is_refused_with_the_fix(env):
    with pytest.raises(TypeError, match=r"SAC needs a.*Fix: pass gymnasium.make"):
        SAC(env)


class OldApiEnv(gym.Env):
    """gym < 0.26's API: reset() gives the bare observation, step() four values."""

    observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = spaces.Box(-2.0, 2.0, (1,), np.float32)

    def __init__(self, bare_reset: bool):
        self.bare_reset = bare_reset

    def reset(self, *, seed=None, options=None):
        obs = np.zeros(3, np.float32)
        return obs if self.bare_reset else (obs, {})

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, False, {}


@pytest.mark.parametrize(
    "bare_reset, message",
    [(True, r"reset\(\) returned a bare observation"), (False, r"step\(\) returned 4 values")],
)
def test_an_env_with_the_old_gym_api_is_refused_with_the_fix(bare_reset, message):
    sac = SAC(OldApiEnv(bare_reset), **SMALL)
    with pytest.raises(TypeError, match=message + r".*terminated, truncated.*Fix: port the env"):
        sac.train(verbose=False)


def test_an_env_of_the_old_gym_package_is_named_as_such():
    class GymBox:  # a space of the gym package: not gymnasium's, and named like gym.spaces.Box
        def __repr__(self):
            return "Box(-1.0, 1.0, (3,), float32)"

    GymBox.__module__ = "gym.spaces.box"
    env = SpaceEnv(GymBox(), GymBox())
    with pytest.raises(ValueError, match=r"old gym package \(gym.spaces.box\), not gymnasium"):
        SAC(env, **SMALL)


def test_verbose_histogram_without_log_dir_is_warned_about():
    with pytest.warns(UserWarning, match="need log_dir"):
        pendulum(verbose_histogram=True)


def test_train_counts_of_the_wrong_type_or_range_are_refused():
    sac = pendulum()
    for kwargs, message in [
        ({"num_episodes": 1.5}, r"train: num_episodes must be an int, got 1.5"),
        ({"num_episodes": -1}, r"train: num_episodes must be >= 1, got -1"),
        ({"max_steps": 0}, r"train: max_steps must be >= 1, got 0"),
        ({"max_steps": 2.0}, r"max_steps must be an int or None"),
        ({"warmup_steps": -5}, r"warmup_steps must be >= 0"),
    ]:
        with pytest.raises((TypeError, ValueError), match=message):
            sac.train(verbose=False, **kwargs)
    assert sac.total_steps == 0  # refused before any step


def test_soft_update_is_polyak_averaging_of_modules():
    from super_sac.quickstart import soft_update

    target, source = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    before = [p.detach().clone() for p in target.parameters()]
    soft_update(target, source, 0.25)
    for old, new, src in zip(before, target.parameters(), source.parameters()):
        torch.testing.assert_close(new, 0.75 * old + 0.25 * src)
    with pytest.raises(ValueError, match="same architecture"):
        soft_update(target, torch.nn.Linear(3, 4), 0.5)


def test_builds_the_engines_agent_with_two_critics_and_a_frozen_target():
    sac = pendulum()
    assert isinstance(sac.agent, super_sac.Agent)
    assert sac.agent.num_critics == 2 and sac.agent.hidden_size == 16
    assert type(sac.agent.actor).__name__ == "ContinuousStochasticActor"
    assert type(sac.policy).__name__ == "GaussianPolicy" and sac.policy.actor is sac.agent.actor
    assert sac.critic.critic is sac.agent.critic
    assert sac.critic_target.critic is sac.target_agent.critic
    assert all(not p.requires_grad for p in sac.target_agent.parameters())
    assert sac.alpha == pytest.approx(0.2) and sac.target_entropy == -1.0
    det = pendulum(policy_type="Deterministic")
    assert type(det.agent.actor).__name__ == "ContinuousDeterministicActor" and det.alpha == 0.0
    assert type(det.policy).__name__ == "DeterministicPolicy"
    with pytest.warns(UserWarning, match="ignored"):
        assert pendulum(policy_type="Deterministic", automatic_entropy_tuning=True).alpha == 0.0


# ------------------------------------------------------------------------------ acting
def test_action_scaler_maps_unit_actions_to_the_bounds_and_back():
    scaler = ActionScaler(spaces.Box(np.float32([0, -1]), np.float32([10, 3])))
    unit = np.array([[-1.0, -1.0], [0.0, 0.0], [1.0, 0.5], [3.0, -7.0]])
    expected = np.array([[0.0, -1.0], [5.0, 1.0], [10.0, 2.0], [10.0, -1.0]])
    np.testing.assert_allclose(scaler.to_env(unit), expected)
    np.testing.assert_allclose(scaler.to_env_tensor(torch.tensor(unit).float()), expected)
    np.testing.assert_allclose(scaler.to_unit(expected[:3]), unit[:3])


def test_select_action_rescales_the_policy_mean_to_the_env_bounds():
    sac = pendulum()
    state, _ = sac.env.reset(seed=0)
    mean = sac.agent.forward({"obs": state[None].astype(np.float32)}, batched=True)[0]
    action = sac.select_action(state, evaluate=True)
    assert action.shape == (1,) and action.dtype == np.float32
    np.testing.assert_allclose(action, 2.0 * mean, rtol=1e-6)  # Pendulum's bounds are +-2
    np.testing.assert_array_equal(action, sac.select_action(state, evaluate=True))
    samples = np.stack([sac.select_action(state) for _ in range(50)])
    assert samples.std() > 0 and np.all(np.abs(samples) <= 2.0)


def test_select_action_batch_numpy_and_tensor():
    sac = pendulum()
    states = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    batch = sac.select_action_batch(states, evaluate=True)
    assert isinstance(batch, np.ndarray) and batch.shape == (4, 1)
    for row, state in zip(batch, states):
        np.testing.assert_allclose(row, sac.select_action(state, evaluate=True), atol=1e-6)
    tensor = sac.select_action_batch(torch.from_numpy(states), evaluate=True, return_tensor=True)
    assert isinstance(tensor, torch.Tensor) and tensor.device == sac.device
    np.testing.assert_allclose(tensor.numpy(), batch, atol=1e-6)
    assert sac.select_action_batch(states).shape == (4, 1)
    with pytest.raises(ValueError, match="shape"):
        sac.select_action_batch(states[:, :2])


def test_deterministic_policy_explores_with_clipped_gaussian_noise():
    sac = pendulum(policy_type="Deterministic", exploration_noise=0.1)
    state = np.zeros(3, np.float32)
    mean = sac.select_action(state, evaluate=True)
    noisy = np.stack([sac.select_action(state) for _ in range(400)])[:, 0]
    # std 0.1 in [-1, 1] units is 0.2 in Pendulum's units (clipping only narrows it)
    assert 0.1 < noisy.std() <= 0.21 and np.all(np.abs(noisy) <= 2.0)
    assert abs(noisy.mean() - mean[0]) < 0.05


# ------------------------------------------------------------------------------ updates
def filled_memory(sac: SAC, n: int = 32) -> ReplayMemory:
    rng = np.random.default_rng(0)
    for _ in range(n):
        sac.memory.push(
            rng.normal(size=3), rng.uniform(-2, 2, size=1), rng.normal(), rng.normal(size=3), 0.0
        )
    return sac.memory


def test_critic_update_reports_each_critics_loss():
    sac = pendulum()
    memory = filled_memory(sac)
    qf1, qf2, policy_loss, alpha_loss, alpha = sac.update_parameters(memory, 8, 0)
    assert all(isinstance(v, float) for v in (qf1, qf2, policy_loss, alpha_loss, alpha))
    assert qf1 > 0 and qf2 > 0 and qf1 != qf2
    assert alpha_loss == 0.0 and alpha == pytest.approx(0.2)
    assert sac.updates == 1


def test_automatic_entropy_tuning_moves_alpha():
    sac = pendulum(automatic_entropy_tuning=True, alpha=0.5)
    memory = filled_memory(sac)
    _, _, _, alpha_loss, alpha = sac.update_parameters(memory, 8, 0)
    assert alpha_loss != 0.0 and alpha != pytest.approx(0.5) and alpha == pytest.approx(sac.alpha)


def test_targets_follow_every_target_update_interval_updates():
    sac = pendulum(target_update_interval=2, tau=0.5)
    memory = filled_memory(sac)

    def target_snapshot():
        return [p.clone() for p in sac.target_agent.critic.parameters()]

    before = target_snapshot()
    # the gin loop's rule: the targets move after every target_update_interval-th update, i.e.
    # when (updates + 1) % interval == 0
    sac.update_parameters(memory, 8, 0)  # update 1: 1 % 2 != 0, targets stay
    assert all(torch.equal(a, b) for a, b in zip(before, target_snapshot()))
    sac.update_parameters(memory, 8, 1)  # update 2: 2 % 2 == 0, targets move halfway
    after = target_snapshot()
    for old, new, online in zip(before, after, sac.agent.critic.parameters()):
        torch.testing.assert_close(new, 0.5 * old + 0.5 * online)


def test_deterministic_update_uses_alpha_zero_and_moves_the_target_actor():
    sac = pendulum(policy_type="Deterministic", tau=1.0)
    memory = filled_memory(sac)
    *_, alpha_loss, alpha = sac.update_parameters(memory, 8, 0)
    assert alpha == 0.0 and alpha_loss == 0.0
    for target, online in zip(sac.target_agent.actor.parameters(), sac.agent.actor.parameters()):
        assert torch.equal(target, online)  # tau = 1 copies the updated actor


def test_update_parameters_checks_the_memory():
    sac = pendulum()
    plain = ReplayMemory(100, seed=0)
    for _ in range(8):
        plain.push(np.zeros(3), np.array([1.5]), 0.0, np.zeros(3), False)
    with pytest.raises(ValueError, match=r"outside \[-1, 1\]"):
        sac.update_parameters(plain, 8, 0)
    other_bounds = ReplayMemory(100, seed=0, action_space=spaces.Box(-1.0, 1.0, (1,)))
    for _ in range(8):
        other_bounds.push(np.zeros(3), np.array([0.5]), 0.0, np.zeros(3), False)
    with pytest.raises(ValueError, match="bounds"):
        sac.update_parameters(other_bounds, 8, 0)
    # a batch larger than the memory would repeat transitions (pytorch-sac's random.sample
    # refuses it too); a float batch size is refused by type
    with pytest.raises(ValueError, match=r"batch_size 9 is larger than the 8 transitions"):
        sac.update_parameters(plain, 9, 0)
    with pytest.raises(TypeError, match=r"batch_size must be an int, got 8.0"):
        sac.update_parameters(plain, 8.0, 0)
    with pytest.raises(TypeError, match="ReplayMemory"):
        sac.update_parameters([], 8, 0)
    # the gin loop's ReplayBuffer (dict observations, normalised actions) is accepted as is
    buffer = super_sac.ReplayBuffer(size=100, seed=0, verbose=False)
    buffer.push(
        {"obs": np.zeros((8, 3), np.float32)}, np.zeros((8, 1), np.float32), np.zeros(8),
        {"obs": np.zeros((8, 3), np.float32)}, np.zeros(8), np.full(8, 0.99),
    )  # fmt: skip
    assert len(sac.update_parameters(buffer, 8, 0)) == 5


# ------------------------------------------------------------------------------ train
def test_train_runs_episodes_stores_transitions_and_counts_updates(tmp_path, capsys):
    sac = pendulum()
    out = sac.train(2, max_steps=10, save_best=True, save_path=tmp_path / "best", verbose=True)
    assert set(out) == {"episode_rewards", "best_reward", "updates"}
    assert len(out["episode_rewards"]) == 2 and out["best_reward"] == max(out["episode_rewards"])
    # 20 transitions; updates start once the memory holds a batch of 8: after steps 8..20
    assert len(sac.memory) == 20 and out["updates"] == 13 == sac.updates
    data = stored(sac.memory, tmp_path)
    assert out["episode_rewards"][0] == pytest.approx(data["reward"][:10].sum(), rel=1e-5)
    assert np.all(data["done"] == 0.0)  # max_steps is a truncation
    assert np.all(np.abs(data["action"]) <= 1.0)  # the buffer holds normalised actions
    assert (tmp_path / "best" / "agent.pt").exists()
    assert "SAC" in capsys.readouterr().err  # the tqdm bar


def test_train_warmup_and_option_checks():
    sac = pendulum()
    out = sac.train(1, max_steps=12, verbose=False, warmup_steps=10)
    # random actions for 10 steps; then an update after each of steps 10, 11 and 12
    assert out["updates"] == 3 and len(sac.memory) == 12
    with pytest.raises(TypeError, match="warmup_stepz"):
        sac.train(1, verbose=False, warmup_stepz=3)
    with pytest.raises(TypeError, match="train_vector"):
        SAC(SyncVectorEnv([lambda: gym.make("Pendulum-v1")]), **SMALL).train(1)


def counter_vector(mode, terminate=False):
    return SyncVectorEnv([lambda: CounterEnv(3, terminate) for _ in range(2)], autoreset_mode=mode)


@pytest.mark.parametrize(
    "mode, num_stored, num_episodes",
    [
        # 2 envs x 6 steps: episodes end at t = 3 and 6
        (AutoresetMode.SAME_STEP, 12, 4),
        (AutoresetMode.DISABLED, 12, 4),
        # steps 1-3, the reset step (skipped), 1-2: 5 per env, one finished episode each
        (AutoresetMode.NEXT_STEP, 10, 2),
    ],
)
@pytest.mark.parametrize("terminate", [False, True])
def test_train_vector_never_stores_a_transition_across_a_reset(
    tmp_path, mode, num_stored, num_episodes, terminate
):
    sac = SAC(counter_vector(mode, terminate), **SMALL)
    out = sac.train_vector(total_steps=12, warmup_steps=100, log_every=4, verbose=False)
    assert out["env_steps"] == 12 and out["updates"] == 0
    assert len(out["episode_rewards"]) == num_episodes
    data = stored(sac.memory, tmp_path)
    assert len(data["obs"]) == num_stored
    np.testing.assert_array_equal(data["next_obs"], data["obs"] + 1)  # no reset crossed
    # bootstrapping stops on termination only; truncated ends keep bootstrapping
    np.testing.assert_array_equal(data["done"], terminate * (data["next_obs"][:, 0] == 3))
    np.testing.assert_allclose(data["reward"], 2.0 * data["action"][:, 0], rtol=1e-6)


def test_train_vector_updates_after_warmup_and_logs(tmp_path, capsys):
    sac = SAC(counter_vector(AutoresetMode.SAME_STEP), **SMALL)
    out = sac.train_vector(
        total_steps=12, warmup_steps=4, log_every=6, reward_window=2, save_best=True,
        save_path=tmp_path / "best",
    )  # fmt: skip
    # 2 transitions per vector step; a batch of 8 exists after the 4th: updates at steps 4, 5, 6
    assert out["updates"] == 3
    lines = [line for line in capsys.readouterr().out.splitlines() if "mean return" in line]
    assert len(lines) == 2 and "(last 2)" in lines[0]
    assert out["best_reward"] == pytest.approx(max(np.mean(out["episode_rewards"][-2:]), -1e9))
    assert (tmp_path / "best" / "config.json").exists()
    with pytest.raises(TypeError, match="VectorEnv"):
        pendulum().train_vector(total_steps=4)


# ------------------------------------------------------------------------------ save / load
def test_save_writes_the_documented_files(tmp_path):
    sac = pendulum(automatic_entropy_tuning=True)
    sac.train(1, max_steps=10, verbose=False)
    folder = sac.save(tmp_path / "run")
    names = {p.name for p in folder.iterdir()}
    assert names == {"config.json", "agent.pt", "target_agent.pt", "log_alpha.pt"}
    config = json.loads((folder / "config.json").read_text())
    assert config["init_args"]["hidden_size"] == 16 and config["init_args"]["seed"] == 42
    assert config["env"]["id"] == "Pendulum-v1" and config["policy"]["type"] == "Gaussian"
    assert config["env"]["action_space"]["low"] == [-2.0] and config["updates"] == 3
    sac.save(folder, save_gradients=True)
    assert (folder / "optimizers.pt").exists()
    sac.save(folder)  # a later save without gradients must not leave stale optimizer states
    assert not (folder / "optimizers.pt").exists()


def test_default_save_folder_is_the_gin_loops_save_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SSAC_SAVE", raising=False)
    folder = pendulum().save()
    assert folder.parent.name == "saves" and folder.name.startswith("sac_")
    assert (tmp_path / folder / "agent.pt").exists()
    monkeypatch.setenv("SSAC_SAVE", str(tmp_path / "elsewhere"))
    assert pendulum().save().parent == tmp_path / "elsewhere"
    # saves within one second get folders of their own (the name has the second only)
    from datetime import datetime as real_datetime

    class Frozen(real_datetime):
        @classmethod
        def now(cls, tz=None):
            return real_datetime(2026, 12, 6, 12, 0, 0)

    monkeypatch.setattr("super_sac.quickstart.persistence.datetime", Frozen)
    sac = pendulum()
    names = [sac.save().name for _ in range(3)]
    assert names == ["sac_20261206-120000", "sac_20261206-120000_1", "sac_20261206-120000_2"]


@pytest.mark.parametrize("policy_type", ["Gaussian", "Deterministic"])
def test_from_pretrained_gives_identical_actions(tmp_path, policy_type):
    sac = pendulum(policy_type=policy_type)
    sac.train(1, max_steps=20, verbose=False)
    loaded = SAC.from_pretrained(sac.save(tmp_path / "run"))  # env rebuilt from its spec
    assert loaded.env.spec.id == "Pendulum-v1" and loaded.policy_type == policy_type
    states = np.random.default_rng(1).normal(size=(16, 3)).astype(np.float32)
    np.testing.assert_array_equal(
        sac.select_action_batch(states, evaluate=True),
        loaded.select_action_batch(states, evaluate=True),
    )
    for a, b in zip(parameters(sac), parameters(loaded)):
        assert torch.equal(a, b)


def test_save_gradients_resumes_updates_bit_for_bit(tmp_path):
    def fresh():
        return pendulum(automatic_entropy_tuning=True, target_update_interval=2)

    sac = fresh()
    sac.train(1, max_steps=25, verbose=False)
    folder = sac.save(tmp_path / "run", save_gradients=True)
    resumed = SAC.from_pretrained(folder, load_gradients=True, env=sac.env)
    restarted = SAC.from_pretrained(folder, load_gradients=False, env=sac.env)
    assert resumed.updates == sac.updates == 18 and restarted.updates == 0
    memory = sac.memory
    for agent in (sac, resumed, restarted):
        memory.buffer.seed(123)
        torch.manual_seed(7)
        for _ in range(3):
            agent.update_parameters(memory, 8, agent.updates)
    for a, b in zip(parameters(sac), parameters(resumed)):
        assert torch.equal(a, b)
    # fresh Adam moments (and another target-update phase) give different parameters
    assert not all(torch.equal(a, b) for a, b in zip(parameters(sac), parameters(restarted)))


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_a_trained_sac_with_loggers_can_be_pickled_and_copied(tmp_path, how):
    sac = pendulum(log_dir=tmp_path / "tb", log_every_updates=1)
    sac.train(1, max_steps=25, verbose=False)
    copy_ = pickle.loads(pickle.dumps(sac)) if how == "pickle" else copy.deepcopy(sac)
    assert (copy_.total_steps, copy_.updates, len(copy_.memory)) == (25, 18, 25)
    assert copy_._loggers == [] and len(sac._loggers) == 1  # the original still logs
    for a, b in zip(parameters(sac), parameters(copy_)):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()
    state = np.linspace(-1, 1, 3, dtype=np.float32)
    assert np.array_equal(sac.select_action(state, True), copy_.select_action(state, True))
    copy_.train(1, max_steps=5, verbose=False)  # a new episode, counters carried on
    assert (copy_.total_steps, copy_.updates, sac.total_steps) == (30, 23, 25)
    sac.close()


def test_load_gradients_needs_a_save_with_gradients(tmp_path):
    folder = pendulum().save(tmp_path / "run")
    with pytest.raises(FileNotFoundError, match="save_gradients=True"):
        SAC.from_pretrained(folder, load_gradients=True)


def test_from_pretrained_env_handling(tmp_path):
    direct = SAC(PendulumEnv(), **SMALL)  # not made by gymnasium.make: no spec to rebuild from
    folder = direct.save(tmp_path / "direct")
    with pytest.raises(ValueError, match="env="):
        SAC.from_pretrained(folder)
    assert SAC.from_pretrained(folder, env=PendulumEnv()).env.spec is None
    with pytest.raises(ValueError, match="does not match"):
        SAC.from_pretrained(folder, env=gym.make("MountainCarContinuous-v0"))
    with pytest.raises(FileNotFoundError, match="neither a local folder"):
        SAC.from_pretrained(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match=r"is a file.*Fix: pass '.*direct'"):
        SAC.from_pretrained(folder / "agent.pt")
    assert SAC.from_pretrained(repo_name=folder, env=PendulumEnv()).seed == direct.seed


def test_a_save_of_an_earlier_version_with_float_counts_still_loads(tmp_path):
    # before the argument checks, SAC(memory_capacity=1e6, log_every_updates=0) was accepted
    # (truncated to an int, read as 1) and saved as given
    folder = pendulum().save(tmp_path / "old")
    config = json.loads((folder / "config.json").read_text())
    config["init_args"].update(memory_capacity=1e6, batch_size=8.0, log_every_updates=0)
    (folder / "config.json").write_text(json.dumps(config))
    loaded = SAC.from_pretrained(folder)
    assert loaded.memory.capacity == 1_000_000 and loaded.batch_size == 8
    assert loaded.log_every_updates == 1


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda f: (f / "config.json").write_text("{not json"), r"config.json is not valid JSON"),
        (lambda f: (f / "agent.pt").write_bytes(b""), r"agent.pt could not be read.*damaged"),
        (lambda f: (f / "target_agent.pt").write_bytes(b"\x80\x02garbage"),
         r"target_agent.pt could not be read"),
        (lambda f: (f / "log_alpha.pt").unlink(), r"log_alpha.pt is missing; the save is incom"),
    ],
)  # fmt: skip
def test_a_damaged_save_is_reported_by_file(tmp_path, damage, message):
    folder = pendulum().save(tmp_path / "run")
    damage(folder)
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        SAC.from_pretrained(folder)


def test_hub_id_without_huggingface_hub_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails, no network used
    # "namespace/name" may be a Hub id or a mistyped local path: the message covers both
    with pytest.raises(FileNotFoundError, match=r"no local folder 'someone/f16-sac'.*check the "
                       r'path, or pip install "super_sac\[hub\]"'):  # fmt: skip
        SAC.from_pretrained("someone/f16-sac")


def test_hub_download_failure_and_success_with_a_stub_client(tmp_path, monkeypatch):
    calls = []

    def failing(**kwargs):
        raise OSError("offline")

    monkeypatch.setitem(
        sys.modules, "huggingface_hub", types.SimpleNamespace(snapshot_download=failing)
    )
    with pytest.raises(RuntimeError, match="could not download 'someone/f16-sac'.*offline"):
        SAC.from_pretrained("someone/f16-sac")

    folder = pendulum().save(tmp_path / "snapshot")

    def local_snapshot(**kwargs):
        calls.append(kwargs)
        return str(folder)

    monkeypatch.setitem(
        sys.modules, "huggingface_hub", types.SimpleNamespace(snapshot_download=local_snapshot)
    )
    loaded = SAC.from_pretrained("someone/f16-sac", access_token="tok", version="v1")
    assert calls == [{"repo_id": "someone/f16-sac", "revision": "v1", "token": "tok"}]
    assert isinstance(loaded, SAC)


# ------------------------------------------------------------------------------ misc
def test_get_param_env_describes_env_and_policy():
    params = pendulum().get_param_env()
    env, policy = params["env"], params["policy"]
    assert env["id"] == "Pendulum-v1" and env["vector"] is False and env["num_envs"] == 1
    assert env["observation_space"]["shape"] == [3]
    assert env["action_space"] == {"shape": [1], "dtype": "float32", "low": [-2.0], "high": [2.0]}
    assert policy["obs_dim"] == 3 and policy["act_dim"] == 1 and policy["num_critics"] == 2
    json.dumps(params)
    vector_params = SAC(counter_vector(AutoresetMode.SAME_STEP), **SMALL).get_param_env()
    assert vector_params["env"]["vector"] is True and vector_params["env"]["num_envs"] == 2


def test_tensorboard_logging_and_close(tmp_path):
    sac = pendulum(log_dir=tmp_path / "tb")
    sac.train(1, max_steps=10, verbose=False)
    sac.close()
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_wandb_without_the_package_gives_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match=r"pip install .super_sac\[wandb\]."):
        pendulum(wandb_project="f16")


# ------------------------------------------------------------------------------ ReplayMemory
def test_replay_memory_push_sample_len():
    memory = ReplayMemory(capacity=5, seed=0)
    for i in range(7):
        memory.push(np.full(2, i), np.array([0.1 * i]), float(i), np.full(2, i + 1), i == 6)
    assert len(memory) == 5  # the two oldest were overwritten
    state, action, reward, next_state, done = memory.sample(64)
    assert state.shape == (64, 2) and action.shape == (64, 1) and reward.shape == (64,)
    assert next_state.shape == (64, 2) and done.shape == (64,)
    assert set(reward.tolist()) == {2.0, 3.0, 4.0, 5.0, 6.0}
    np.testing.assert_array_equal(state[:, 0], reward)
    np.testing.assert_allclose(action[:, 0], 0.1 * reward, rtol=1e-6)
    np.testing.assert_array_equal(done, reward == 6.0)
    twin = ReplayMemory(capacity=5, seed=0)
    for i in range(7):
        twin.push(np.full(2, i), np.array([0.1 * i]), float(i), np.full(2, i + 1), i == 6)
    memory.buffer.seed(3)
    twin.buffer.seed(3)
    for a, b in zip(memory.sample(16), twin.sample(16)):
        np.testing.assert_array_equal(a, b)


def test_replay_memory_normalises_env_scale_actions():
    memory = ReplayMemory(10, seed=0, action_space=spaces.Box(0.0, 10.0, (1,)))
    memory.push(np.zeros(2), np.array([7.5]), 0.0, np.zeros(2), False)
    assert memory.sample_batch(1, gamma=0.9).action.item() == pytest.approx(0.5)
    assert memory.sample_batch(1, gamma=0.9).discount.item() == pytest.approx(0.9)
    assert memory.sample(1)[1][0, 0] == pytest.approx(7.5)


def test_replay_memory_save_and_load_round_trip(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    memory = ReplayMemory(100, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(30):
        memory.push(rng.normal(size=3), rng.uniform(-1, 1, 1), rng.normal(), rng.normal(size=3), 0)
    path = memory.save_buffer("Pendulum-v1", suffix="test")
    assert path == "checkpoints/sac_buffer_Pendulum-v1_test.npz"
    restored = ReplayMemory(100, seed=0)
    restored.load_buffer(path)
    assert len(restored) == 30
    memory.buffer.seed(5)
    restored.buffer.seed(5)
    for a, b in zip(memory.sample(30), restored.sample(30)):
        np.testing.assert_array_equal(a, b)
    explicit = memory.save_buffer("ignored", save_path=tmp_path / "sub" / "buf.npz")
    assert explicit.endswith("sub/buf.npz")


# ----------------------------------------------------------------------------- issue 12 additions
DATA = Path(__file__).parent / "data"


def test_a_folder_saved_before_the_facade_still_loads_and_acts_the_same():
    # written by SAC.save of the pre-facade quick-start class (commit 7403719)
    folder = DATA / "pendulum_sac_v1"
    expected = json.loads((folder / "expected_actions.json").read_text())
    sac = SAC.from_pretrained(folder, load_gradients=True)
    actions = sac.select_action_batch(np.asarray(expected["obs"], np.float32), evaluate=True)
    np.testing.assert_allclose(actions, expected["actions"], rtol=0, atol=1e-6)
    assert sac.updates > 0 and sac.alpha_optim is not None
    sac.update_parameters(sac.memory if len(sac.memory) else _memory_for(sac), 4, sac.updates)


def _memory_for(sac):
    memory = ReplayMemory(100, seed=0, action_space=sac.action_space)
    rng = np.random.default_rng(0)
    for _ in range(8):
        memory.push(rng.normal(size=3), rng.uniform(-2, 2, size=1), 1.0, rng.normal(size=3), 0.0)
    return memory


def test_seed_defaults_batch_32_and_ten_million_transitions_allocated_lazily():
    sac = SAC(gym.make("Pendulum-v1"), hidden_size=8)
    assert sac.batch_size == 32 and sac.memory.capacity == 10_000_000
    assert not sac.memory.buffer.allocated  # nothing is allocated before the first transition


def test_verbose_histogram_writes_weight_histograms(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    sac = SAC(gym.make("Pendulum-v1"), hidden_size=8, log_dir=tmp_path, verbose_histogram=True)
    sac.update_parameters(_memory_for(sac), 4, 0)
    sac.close()
    events = EventAccumulator(str(tmp_path), size_guidance={"histograms": 0})
    events.Reload()
    tags = events.Tags()["histograms"]
    assert any(t.startswith("weights/actor") for t in tags)
    assert any(t.startswith("weights/critic") for t in tags)


def test_the_facade_trains_through_the_gin_loops_collector_and_learner():
    sac = SAC(gym.make("Pendulum-v1"), hidden_size=8, batch_size=8, seed=0)
    out = sac.train(num_episodes=1, max_steps=30, verbose=False, warmup_steps=10)
    from super_sac.collector import Collector
    from super_sac.learner import Learner

    assert isinstance(sac._collector, Collector) and isinstance(sac.learner, Learner)
    assert sac.total_steps == 30 and len(sac.memory) == 30 and len(out["episode_rewards"]) == 1
    # updates start once 10 warm-up steps are done and the memory holds a batch
    assert out["updates"] == 30 - 10 + 1
    assert sac.settings.target_delay == sac.target_update_interval


def test_an_offline_gin_binding_does_not_reach_the_quick_start_encoder():
    import gin

    gin.parse_config("FlatEncoder.standardize = True")  # as the offline gin files bind it
    sac = SAC(CounterEnv(), **SMALL)
    assert not sac.agent.encoder.standardize
    assert sac.agent.encoder.target_shared_buffers() == ()
