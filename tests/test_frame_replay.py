"""Frame-deduplicated replay storage: stacks rebuilt at sample time equal the stacks the env's own
``FrameStackObservation`` produced, across episode starts, ring wrap-around, n-step windows,
interleaved parallel envs, files and datasets; and its bytes per transition."""

import gymnasium as gym
import numpy as np
import pytest

from super_sac import ReplayBuffer
from super_sac import datasets as ds
from super_sac.replay import NStepQueue
from super_sac.wrappers import DictObsWrapper


class _Frames(gym.Env):
    """Small random uint8 frames, one in five from a palette of three images (so equal frames
    recur at other times, inside and outside a stack), and episodes of random length in
    ``[1, max_len]``; ``channels`` > 1 gives RGB-like frames."""

    def __init__(self, max_len=6, channels=1, palette=3):
        shape = (channels, 4, 5) if channels > 1 else (4, 5)
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)
        self.action_space = gym.spaces.Discrete(3)
        self.max_len, self.palette = max_len, palette
        self._images = np.random.default_rng(123).integers(0, 256, (palette, *shape), np.uint8)

    def _frame(self):
        if self.np_random.random() < 0.2:
            return self._images[self.np_random.integers(self.palette)].copy()
        return self.np_random.integers(0, 256, self.observation_space.shape, np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(1, self.max_len + 1))
        return self._frame(), {}

    def step(self, action):
        self.t += 1
        ended = self.t >= self.length
        terminated = ended and bool(self.np_random.integers(2))
        return self._frame(), float(action), terminated, ended and not terminated, {}


class _Flatten(gym.ObservationWrapper):
    """``(k, c, H, W)`` stacks of RGB frames as ``(k * c, H, W)`` (the DMC-style layout)."""

    def __init__(self, env):
        super().__init__(env)
        shape = env.observation_space.shape
        self.observation_space = gym.spaces.Box(0, 255, (shape[0] * shape[1], *shape[2:]), np.uint8)

    def observation(self, obs):
        return obs.reshape(self.observation_space.shape)


def _env(stack=4, padding="reset", channels=1, max_len=6):
    env = gym.wrappers.FrameStackObservation(
        _Frames(max_len, channels), stack, padding_type=padding
    )
    if channels > 1:
        env = _Flatten(env)
    return DictObsWrapper(env)


def _collect(buffers, num_envs, steps, n_step=1, seed=0, **env_kwargs):
    """Step ``num_envs`` envs (resetting ended ones) and push the (n-step) transitions into
    every buffer; returns the pushed rows in push order."""
    envs = [_env(**env_kwargs) for _ in range(num_envs)]
    queue = NStepQueue(num_envs, n_step, 0.9)
    obs = [e.reset(seed=seed + i)[0] for i, e in enumerate(envs)]
    rng, episode, rows = np.random.default_rng(seed), num_envs, []
    for _ in range(steps):
        action = rng.integers(0, 3, num_envs)
        results = [e.step(a) for e, a in zip(envs, action)]
        next_obs = {"obs": np.stack([r[0]["obs"] for r in results])}
        term = np.array([r[2] for r in results])
        trunc = np.array([r[3] for r in results])
        out = queue.push(
            {"obs": np.stack([o["obs"] for o in obs])},
            action,
            np.array([r[1] for r in results]),
            next_obs,
            term,
            trunc,
        )
        if out is not None:
            for buffer in buffers:
                buffer.push(**out)
            rows += [
                (out["obs"]["obs"][j], out["next_obs"]["obs"][j]) for j in range(len(out["action"]))
            ]
        for i, r in enumerate(results):
            if r[2] or r[3]:
                obs[i] = envs[i].reset(seed=seed + 1000 * episode)[0]
                episode += 1
            else:
                obs[i] = r[0]
    return rows


def _assert_same(dedup, plain):
    """Every stored slot of ``dedup`` rebuilds exactly ``plain``'s (whole) observations."""
    assert len(dedup) == len(plain)
    idx = np.arange(len(plain))
    got, want = dedup.gather(idx), plain.gather(idx)
    for name in ("obs", "next_obs"):
        a, b = getattr(got, name)["obs"].numpy(), getattr(want, name)["obs"].numpy()
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b), name
    for name in ("action", "reward", "done", "discount"):
        assert np.array_equal(getattr(got, name).numpy(), getattr(want, name).numpy())


def _pair(size, stack=4, **kwargs):
    dedup = ReplayBuffer(size, seed=0, verbose=False, frame_stack={"obs": stack}, **kwargs)
    return dedup, ReplayBuffer(size, seed=0, verbose=False)


@pytest.mark.parametrize("padding", ["reset", "zero"])
def test_stacks_equal_the_envs_across_episode_starts(padding):
    dedup, plain = _pair(500, frame_ratio=2.0)
    rows = _collect([dedup, plain], 1, 300, padding=padding, max_len=6)  # episodes of 1..6 < 4?
    assert len(rows) == 300
    _assert_same(dedup, plain)
    for j, (o, n) in enumerate(rows):  # against the env's own stacks, pushed in order
        assert np.array_equal(dedup.gather(np.array([j])).obs["obs"][0].numpy(), o)
        assert np.array_equal(dedup.gather(np.array([j])).next_obs["obs"][0].numpy(), n)
    store = dedup._frames["obs"]
    assert store.count < 2 * 300  # each distinct recent frame once (at most 2k = 8 without)


def test_wrap_around_never_leaks_overwritten_frames():
    dedup, plain = _pair(40, frame_ratio=2.0)
    _collect([dedup, plain], 1, 700, max_len=8)
    assert dedup._frames["obs"].count > dedup._frames["obs"].capacity  # the frame ring wrapped
    _assert_same(dedup, plain)
    batch = dedup.sample(64)
    slots = batch.idxs
    want = plain.gather(slots)
    assert np.array_equal(batch.obs["obs"].numpy(), want.obs["obs"].numpy())
    assert np.array_equal(batch.next_obs["obs"].numpy(), want.next_obs["obs"].numpy())


def test_nstep_3_with_4_parallel_envs_interleaved():
    dedup, plain = _pair(120, frame_ratio=2.0)
    _collect([dedup, plain], 4, 250, n_step=3, max_len=9)
    assert dedup._frames["obs"].count > dedup._frames["obs"].capacity
    _assert_same(dedup, plain)
    assert np.isclose(plain.gather(np.arange(120)).discount.numpy(), 0.9**3).any()  # 3-step


def test_rgb_frames_of_three_channels():
    dedup, plain = _pair(60, stack=3, frame_ratio=2.0)
    _collect([dedup, plain], 2, 200, n_step=2, stack=3, channels=3, max_len=5)
    assert dedup._frames["obs"].frame_shape == (3, 4, 5)
    _assert_same(dedup, plain)


def test_fingerprint_collisions_cost_memory_never_correctness(monkeypatch):
    from super_sac.replay.frames import FrameStore

    monkeypatch.setattr(FrameStore, "_fingerprints", lambda self, frames: [7] * len(frames))
    dedup, plain = _pair(60, frame_ratio=10.0)  # every frame misses: up to 2k per transition
    _collect([dedup, plain], 2, 150, n_step=2, max_len=6)
    _assert_same(dedup, plain)


def test_a_frame_store_too_small_raises_instead_of_corrupting():
    dedup = ReplayBuffer(30, verbose=False, frame_stack={"obs": 4}, frame_ratio=1.0)
    with pytest.raises(RuntimeError, match="frame_ratio.*leave 'obs' out of frame_stack if"):
        _collect([dedup], 1, 2000, max_len=1)  # two new frames per transition


def test_save_load_round_trip_and_continuing(tmp_path):
    dedup, plain = _pair(50, frame_ratio=2.0)
    _collect([dedup, plain], 2, 90, n_step=3, max_len=7)
    path = dedup.save(tmp_path / "b")
    same = ReplayBuffer(50, verbose=False, frame_stack={"obs": 4}, frame_ratio=2.0).load(path)
    _assert_same(same, plain)
    # exact: pushing on after the load writes the same frames into the same slots
    _collect([dedup, same, plain], 2, 40, n_step=3, seed=7, max_len=7)
    _assert_same(same, plain)
    a, b = dedup._frames["obs"], same._frames["obs"]
    assert a.count == b.count and np.array_equal(a.frames, b.frames)
    assert np.array_equal(a.obs_idx, b.obs_idx) and np.array_equal(a.next_idx, b.next_idx)
    path = dedup.save(tmp_path / "c")
    _assert_same(ReplayBuffer(50, verbose=False).load(path), plain)  # into whole storage
    bigger = ReplayBuffer(80, verbose=False, frame_stack={"obs": 4}).load(path)  # re-stored
    order = ReplayBuffer(80, verbose=False).load(plain.save(tmp_path / "p"))
    _assert_same(bigger, order)
    restored = ReplayBuffer(50, verbose=False, frame_stack={"obs": 4}, frame_ratio=2.0)
    _assert_same(restored.load(tmp_path / "p"), plain)  # a whole-storage file, deduplicated


def test_loaded_dataset_then_protected_while_the_ring_wraps(tmp_path):
    env = _env(max_len=8)
    episodes, _, act_space = ds.record_episodes(env, ds.random_policy(env, 0), 60, seed=0)
    path = ds.save_npz(tmp_path / "d.npz", episodes, act_space)
    data, _ = ds.load_transitions(path, env)
    dedup = ReplayBuffer(100, verbose=False, frame_stack={"obs": 4}, frame_ratio=2.0)
    dedup.load_dataset(path, env, gamma=0.9)
    got = dedup.gather(np.arange(60))
    assert np.array_equal(got.obs["obs"].numpy(), data.obs["obs"])
    assert np.array_equal(got.next_obs["obs"].numpy(), data.next_obs["obs"])
    plain = ReplayBuffer(100, verbose=False)
    plain.load_dataset(path, env, gamma=0.9)
    _collect([dedup, plain], 1, 300, max_len=8)  # online data wrap over the 40 free slots
    _assert_same(dedup, plain)


def test_atari_bytes_per_transition():
    def space(shape):
        return gym.spaces.Dict({"obs": gym.spaces.Box(0, 255, shape, np.uint8)})

    actions = gym.spaces.Discrete(6)
    whole = ReplayBuffer(100_000, verbose=False)
    whole.allocate(space((4, 84, 84)), actions)
    assert whole.bytes_per_transition == 56_468
    atari = ReplayBuffer(100_000, verbose=False, frame_stack={"obs": 4})
    atari.allocate(space((4, 84, 84)), actions)
    assert atari.frames_per_transition["obs"] <= 1.2
    assert atari.bytes_per_transition <= 8_500
    dmc = ReplayBuffer(100_000, verbose=False, frame_stack={"obs": 3})
    dmc.allocate(space((9, 84, 84)), gym.spaces.Box(-1, 1, (6,)))
    assert dmc.bytes_per_transition <= 1.2 * 3 * 84 * 84 + 100
    with pytest.raises(ValueError, match="multiple of the stack depth"):
        ReplayBuffer(10, verbose=False, frame_stack={"obs": 4}).allocate(space((6, 8, 8)), actions)
    with pytest.raises(ValueError, match="do not have"):
        ReplayBuffer(10, verbose=False, frame_stack={"x": 4}).allocate(space((4, 8, 8)), actions)


class _FlattenDict(gym.ObservationWrapper):
    """A ``FrameStackObservation`` of dict observations, ``(k, C, H, W)`` per key, as
    ``(k * C, H, W)``."""

    def __init__(self, env):
        super().__init__(env)
        self.observation_space = gym.spaces.Dict(
            {
                k: gym.spaces.Box(0, 1, (s.shape[0] * s.shape[1], *s.shape[2:]), s.dtype)
                for k, s in env.observation_space.spaces.items()
            }
        )

    def observation(self, obs):
        return {k: v.reshape(self.observation_space[k].shape) for k, v in obs.items()}


def _minatar_trainer(tmp_path, steps, resume=False):
    import torch

    from super_sac import Agent
    from super_sac.main import TrainConfig, Trainer
    from super_sac.nets.cnns import MinAtarEncoder
    from super_sac.wrappers import make_minatar_env

    def make():
        env = make_minatar_env("breakout", max_episode_steps=12)
        return _FlattenDict(gym.wrappers.FrameStackObservation(env, 2))

    venv = gym.vector.SyncVectorEnv([make] * 2, autoreset_mode=gym.vector.AutoresetMode.DISABLED)
    test_env = make()
    torch.manual_seed(0)
    channels = test_env.observation_space["obs"].shape[0]
    agent = Agent(3, MinAtarEncoder(channels), hidden_size=16, discrete=True)
    cfg = TrainConfig(
        random_warmup_steps=20,
        batch_size=16,
        verbosity=0,
        eval_episodes=0,
        base_save_path=str(tmp_path),
        name="fs",
        logging_method="none",
        seed=4,
        checkpoint_interval=10,
        num_steps_online=steps,
        transitions_per_online_step=2,
        n_step=3,
        resume=resume,
    )
    buffer = ReplayBuffer(50, verbose=False, frame_stack={"obs": 2}, frame_ratio=1.5)
    return Trainer(agent, buffer, venv, test_env, cfg)


def test_minatar_run_with_deduplicated_storage_resumes_exactly(tmp_path):
    import torch

    full = _minatar_trainer(tmp_path / "a", 34)
    full.run()
    part = _minatar_trainer(tmp_path / "b", 24)  # checkpoint at 20, mid-episode, n-step pending
    part.run()
    resumed = _minatar_trainer(tmp_path / "b", 34, resume=True)
    resumed.run()
    assert resumed.env_steps == full.env_steps == 68 and len(full.buffer) == 50  # wrapped
    for (k, a), b in zip(full.agent.state_dict().items(), resumed.agent.state_dict().values()):
        assert torch.equal(a, b), k
    a, b = full.buffer._frames["obs"], resumed.buffer._frames["obs"]
    assert a.count == b.count and np.array_equal(a.frames, b.frames)
    assert np.array_equal(a.obs_idx, b.obs_idx) and np.array_equal(a.next_idx, b.next_idx)


def test_the_atari_script_stores_frames_once_by_default():
    import gin

    from super_sac.cli.runner import frame_stack_default
    from super_sac.wrappers import frame_stack_of, make_atari_env, make_minatar_env

    atari = make_atari_env("Pong")
    assert frame_stack_of(atari) == {"obs": 4}
    assert frame_stack_of(make_minatar_env("breakout")) == {}  # not a stack: stored whole
    assert frame_stack_of(_env(stack=3, channels=3)) == {}  # reshaped: declare it yourself
    assert frame_stack_default(atari) == {"frame_stack": {"obs": 4}}
    with gin.unlock_config():
        gin.bind_parameter("super_sac.replay.ReplayBuffer.frame_stack", {})
    try:
        assert frame_stack_default(atari) == {}  # a gin binding decides
    finally:
        gin.clear_config()
