"""Offline datasets: Minari and .npz round trips, validation errors, and replay buffers that keep
the offline data while fine-tuning online."""

import warnings

import numpy as np
import pytest
from gymnasium import spaces

from super_sac import ReplayBuffer
from super_sac import datasets as ds
from super_sac.wrappers import make_gym_env


@pytest.fixture
def env():
    return make_gym_env("Pendulum-v1", 20)


def _episodes(env, n=50):
    return ds.record_episodes(env, ds.random_policy(env, 0), n, seed=0)


def test_minari_round_trip_gives_the_recorded_transitions(env, tmp_path):
    episodes, obs_space, act_space = _episodes(env)
    assert [len(ep.rewards) for ep in episodes] == [20, 20, 10]
    assert episodes[-1].truncations[-1] and not episodes[-1].terminations[-1]  # cut at 50
    ds.save_minari("test/pendulum-random-v0", episodes, obs_space, act_space, tmp_path)
    data, meta = ds.load_transitions("test/pendulum-random-v0", env, tmp_path)
    assert len(data) == 50
    raw = np.concatenate([ep.observations[:-1] for ep in episodes])
    assert np.array_equal(data.obs["obs"], raw)
    assert np.array_equal(data.next_obs["obs"][19], episodes[0].observations[20])
    # Pendulum's actions live in [-2, 2]: stored as recorded, rescaled to [-1, 1] on load
    actions = np.concatenate([ep.actions for ep in episodes])
    assert np.abs(actions).max() > 1.0
    assert np.allclose(data.action, actions / 2.0, atol=1e-6)
    assert np.allclose(data.reward, np.concatenate([ep.rewards for ep in episodes]))
    assert np.flatnonzero(data.truncated).tolist() == [19, 39, 49]
    assert not data.terminated.any()
    assert np.allclose(data.episode_returns, [np.sum(ep.rewards) for ep in episodes])
    # the .npz format holds the same transitions
    path = ds.save_npz(tmp_path / "p.npz", episodes, act_space)
    same, _ = ds.load_transitions(path, env)
    for name in ("action", "reward", "terminated", "truncated"):
        assert np.array_equal(getattr(same, name), getattr(data, name))
    assert np.array_equal(same.next_obs["obs"], data.next_obs["obs"])


def test_loading_into_the_buffer_keeps_terminations_and_truncations_apart(env, tmp_path):
    episodes, _, act_space = _episodes(env, 40)
    episodes[0].terminations[-1], episodes[0].truncations[-1] = True, False
    path = ds.save_npz(tmp_path / "p.npz", episodes, act_space)
    buffer = ReplayBuffer(100, verbose=False).load_dataset(path, env, gamma=0.9)
    assert len(buffer) == 40 and buffer.protected == 40
    batch = buffer.gather(np.array([19, 39, 5]))
    # terminated: no bootstrap; truncated and mid-episode: bootstrap with gamma
    assert batch.done[:, 0].tolist() == [1.0, 0.0, 0.0]
    assert np.allclose(batch.discount[:, 0].numpy(), 0.9)
    assert buffer.stored_discounts().tolist() == [np.float32(0.9)]


def _write(path, **arrays):
    np.savez(path, **arrays)
    return path


def _valid_arrays(n=4, obs_dim=3):
    return dict(
        **{"obs/obs": np.zeros((n, obs_dim), np.float32)},
        **{"next_obs/obs": np.zeros((n, obs_dim), np.float32)},
        action=np.zeros((n, 1), np.float32),
        reward=np.zeros(n),
        terminated=np.array([False] * (n - 1) + [True]),
        truncated=np.zeros(n, bool),
        action_low=np.array([-2.0], np.float32),
        action_high=np.array([2.0], np.float32),
    )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"terminated": None, "truncated": None, "done": np.ones(4)}, "missing keys.*'done'"),
        ({"reward": None}, r"missing keys \['reward'\]"),
        ({"obs/obs": np.zeros((4, 5), np.float32)}, r"obs\['obs'\] has shape \(4, 5\)"),
        ({"obs/obs": np.zeros((4, 3), np.complex64)}, "dtype complex64"),
        ({"next_obs/obs": np.full((4, 3), np.nan, np.float32)}, "next_obs.*NaN"),
        ({"reward": np.array([0.0, np.inf, 0.0, 0.0])}, r"reward holds NaN or inf.*\[1\]"),
        ({"action": np.array([[0.0], [3.0], [0.0], [0.0]], np.float32)}, "actions reach 1.5"),
        ({"action": np.zeros((4, 2), np.float32)}, r"actions have shape \(4, 2\)"),
        ({"action_low": None, "action_high": None}, "without 'action_low'"),
        ({"action_low": np.array([-1.0], np.float32)}, "action space.*differs"),
        ({"terminated": np.zeros(4, bool)}, "neither terminated nor truncated"),
        ({"terminated": np.array([0, 0, 0, 2])}, "terminated holds values other than 0/1"),
        ({"reward": np.zeros(3)}, r"reward has shape \(3,\)"),
        # an episode end without a flag: next_obs is not the next obs, yet nothing ends there
        ({"next_obs/obs": np.ones((4, 3), np.float32)},
         r"transitions \[0, 1, 2\] end no episode.*Fix: set terminated"),
        ({"action": np.zeros((4, 1), np.int64)}, r"continuous, but the dataset's have dtype int64"),
        ({"obs/obs": np.full((4, 3), 1e39)}, r"obs\['obs'\] holds values beyond float32's range"),
        ({"action": np.zeros(4, np.float32)}, r"shape \(4,\).*Fix: reshape the actions to \(4, 1"),
        ({"action_low": np.array([np.nan], np.float32)}, r"are not finite bounds with low < high"),
        ({k: v[:0] for k, v in _valid_arrays().items() if not k.startswith("action_")},
         r"the dataset holds no transitions"),
    ],
)
def test_each_validation_error_names_the_problem(env, tmp_path, change, message):
    arrays = _valid_arrays()
    for key, value in change.items():
        if value is None:
            arrays.pop(key)
        else:
            arrays[key] = value
    path = _write(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ds.DatasetError, match=message):
        ds.load_transitions(path, env)


def test_valid_arrays_pass_and_missing_sources_say_how_to_build_them(env, tmp_path):
    ds.load_transitions(_write(tmp_path / "ok.npz", **_valid_arrays()), env)
    # (N, 1) columns of rewards and flags, as some tools write them, are read as (N,)
    columns = {k: v[:, None] for k, v in _valid_arrays().items() if k in
               ("reward", "terminated", "truncated")}  # fmt: skip
    data, _ = ds.load_transitions(_write(tmp_path / "col.npz", **{**_valid_arrays(), **columns}),
                                  env)  # fmt: skip
    assert data.reward.shape == data.terminated.shape == (4,) and data.terminated[-1]
    with pytest.raises(ds.DatasetError, match="no dataset file.*record_replay.py --npz PATH"):
        ds.load_transitions(tmp_path / "nothing.npz", env)
    with pytest.raises(ds.DatasetError, match="no Minari dataset 'x/y-v0'.*record_replay"):
        ds.load_transitions("x/y-v0", env, tmp_path)


def test_actions_that_look_normalised_already_are_warned_about(env, tmp_path):
    episodes, _, act_space = _episodes(env, 120)
    for ep in episodes:  # actions already in [-1, 1] where the env's bounds are [-2, 2]
        ep.actions[:] = np.asarray(ep.actions) / 2.0
    path = ds.save_npz(tmp_path / "halved.npz", episodes, act_space)
    with pytest.warns(UserWarning, match=r"never leave \[-1, 1\] in env units.*-2.0"):
        ds.load_transitions(path, env)
    plain = ds.save_npz(tmp_path / "plain.npz", _episodes(env, 120)[0], act_space)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds.load_transitions(plain, env)  # actions beyond [-1, 1]: no warning


def test_minari_dataset_of_another_env_is_rejected(env, tmp_path):
    episodes, obs_space, _ = _episodes(env, 20)
    ds.save_minari("test/p-v0", episodes, obs_space, spaces.Box(-1.0, 1.0, (1,)), tmp_path)
    with pytest.raises(ds.DatasetError, match="action space.*differs"):
        ds.load_transitions("test/p-v0", env, tmp_path)
    with pytest.raises(ds.DatasetError, match="exists already.*overwrite"):
        ds.save_minari("test/p-v0", episodes, obs_space, spaces.Box(-2.0, 2.0, (1,)), tmp_path)


def _push(buffer, start, n, obs_dim=1):
    values = np.arange(start, start + n, dtype=np.float32)
    obs = np.repeat(values[:, None], obs_dim, axis=1)
    return buffer.push(
        obs={"obs": obs},
        action=np.zeros((n, 1), np.float32),
        reward=values,
        next_obs={"obs": obs},
        done=np.zeros(n),
        discount=np.full(n, 0.99),
    )


def test_protected_offline_data_survive_the_ring_wrapping(tmp_path):
    buffer = ReplayBuffer(6, verbose=False)
    _push(buffer, 0, 3)  # the "dataset": rewards 0, 1, 2
    buffer.protect()
    slots = _push(buffer, 10, 5)  # online: 10..14 into a ring of 3 slots
    assert slots.tolist() == [5, 3, 4]  # a batch longer than the ring keeps its newest
    assert buffer.gather(np.arange(6)).reward[:, 0].tolist() == [0, 1, 2, 13, 14, 12]
    _push(buffer, 20, 1)
    assert buffer.gather(np.arange(6)).reward[:, 0].tolist() == [0, 1, 2, 13, 14, 20]
    restored = ReplayBuffer(6, verbose=False).load(buffer.save(tmp_path / "b"))
    assert restored.protected == 3
    _push(restored, 30, 1)  # the ring continues where it was
    assert restored.gather(np.arange(6)).reward[:, 0].tolist() == [0, 1, 2, 30, 14, 20]
    with pytest.raises(ValueError, match="same size"):
        ReplayBuffer(10, verbose=False).load(tmp_path / "b")
    full = ReplayBuffer(3, verbose=False)
    _push(full, 0, 3)
    full.protect()
    with pytest.raises(ValueError, match="full of protected offline data.*larger size"):
        _push(full, 5, 1)
    wrapped = ReplayBuffer(2, verbose=False)
    _push(wrapped, 0, 3)
    with pytest.raises(ValueError, match="before the ring buffer wraps"):
        wrapped.protect()


def test_unprotected_dataset_is_overwritten_oldest_first(env, tmp_path):
    episodes, _, act_space = _episodes(env, 20)
    path = ds.save_npz(tmp_path / "p.npz", episodes, act_space)
    buffer = ReplayBuffer(20, verbose=False).load_dataset(path, env, gamma=0.99, protect=False)
    assert buffer.protected == 0
    _push(buffer, 100, 2, obs_dim=3)
    assert buffer.gather(np.array([0, 1])).reward[:, 0].tolist() == [100, 101]
    with pytest.raises(ValueError, match="do not fit.*size >= 40"):
        buffer.load_dataset(path, env, gamma=0.99)


def test_discrete_datasets_keep_integer_actions(tmp_path):
    env = make_gym_env("CartPole-v1", 10)
    episodes, obs_space, act_space = ds.record_episodes(env, ds.random_policy(env, 0), 30, seed=0)
    path = ds.save_npz(tmp_path / "c.npz", episodes, act_space)
    data, _ = ds.load_transitions(path, env)
    assert data.action.dtype.kind == "i" and set(data.action.tolist()) <= {0, 1}
    ds.save_minari("test/cartpole-v0", episodes, obs_space, act_space, tmp_path)
    same, _ = ds.load_transitions("test/cartpole-v0", env, tmp_path)
    assert np.array_equal(same.action, data.action)
    arrays = dict(np.load(path))
    arrays["action"] = np.full_like(arrays["action"], 2)
    with pytest.raises(ds.DatasetError, match=r"indices span \[2, 2\], outside \[0, 2\)"):
        ds.load_transitions(_write(tmp_path / "bad.npz", **arrays), env)


class _ConstantAgent:
    """An agent that always samples action 2 (discrete) or 0.5 in every dimension."""

    def __init__(self, discrete):
        self.discrete = discrete

    def sample_action(self, obs):
        return 2 if self.discrete else np.full(3, 0.5, np.float32)

    forward = sample_action


def test_agent_policy_epsilon_replaces_the_agents_actions_by_uniform_ones():
    obs = {"obs": np.zeros(2, np.float32)}
    # discrete: the same generator decides each step, so the steps it picks are the random ones
    act = ds.agent_policy(_ConstantAgent(True), seed=3, epsilon=0.25, num_actions=5)
    actions = np.array([int(act(obs)) for _ in range(4000)])
    rng = np.random.default_rng(3)
    expected = []
    for _ in range(4000):
        expected.append(int(rng.integers(5)) if rng.random() < 0.25 else 2)
    assert np.array_equal(actions, expected)
    replaced = actions != 2  # a random pick of 2 looks like the agent's: 0.25 * 4 / 5 = 0.2
    assert abs(replaced.mean() - 0.2) < 0.02 and set(actions[replaced]) == {0, 1, 3, 4}
    assert int(ds.agent_policy(_ConstantAgent(True))(obs)) == 2  # epsilon 0: the agent's
    # continuous: uniform on [-1, 1]^A in place of the agent's (noise_std not added to them)
    act = ds.agent_policy(_ConstantAgent(False), noise_std=0.0, seed=0, epsilon=1.0)
    samples = np.stack([act(obs) for _ in range(2000)])
    assert samples.shape == (2000, 3) and samples.dtype == np.float32
    assert samples.min() >= -1 and samples.max() <= 1 and abs(samples.mean()) < 0.05
    with pytest.raises(ValueError, match="num_actions"):
        ds.agent_policy(_ConstantAgent(True), epsilon=0.1)
    with pytest.raises(ValueError, match=r"epsilon = 1.5"):
        ds.agent_policy(_ConstantAgent(False), epsilon=1.5)


def test_n_step_with_a_dataset_warns_that_the_dataset_stays_one_step(env, tmp_path):
    from super_sac import Agent, nets
    from super_sac.config import TrainConfig
    from super_sac.validation import ConfigWarning, validate_config

    episodes, _, act_space = _episodes(env, 40)
    path = ds.save_npz(tmp_path / "p.npz", episodes, act_space)
    buffer = ReplayBuffer(100, verbose=False).load_dataset(path, env, gamma=0.99)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)

    def validate(n_step):
        cfg = TrainConfig(n_step=n_step, num_steps_offline=10, num_steps_online=0,
                          random_warmup_steps=0, batch_size=8)  # fmt: skip
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            validate_config(cfg, agent, buffer, env, make_gym_env("Pendulum-v1", 20))
        return [str(w.message) for w in caught if issubclass(w.category, ConfigWarning)]

    assert any("n_step = 3: n-step returns are built from the online transitions only; the 40 "
               "dataset transitions" in m for m in validate(3))  # fmt: skip
    assert not any("n_step" in m for m in validate(1))
