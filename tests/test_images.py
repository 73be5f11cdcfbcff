"""Image observations: CNN encoders and conv arithmetic, image wrappers, the MinAtar adapter,
uint8 replay storage, and short runs of the MinAtar and Atari gin files."""

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from super_sac import Agent, ReplayBuffer, cli, learning, optim
from super_sac.nets.cnns import (
    ImageAndStateEncoder,
    MinAtarEncoder,
    NatureEncoder,
    compute_conv_output,
)
from super_sac.wrappers import (
    ChannelsFirstWrapper,
    DictObsWrapper,
    ImageAndStateWrapper,
    KeepKeysWrapper,
    MinAtarEnv,
    Uint8Wrapper,
    make_atari_env,
    make_minatar_env,
)

ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ----------------------------------------------------------------------------- conv arithmetic


def test_compute_conv_output_by_hand():
    # (10 - 3) / 1 + 1 = 8, then (8 - 2) / 1 + 1 = 7 (the MinAtar encoder)
    assert compute_conv_output((10, 10), kernel_size=(3, 3), stride=(1, 1)) == (8, 8)
    assert compute_conv_output((8, 8), kernel_size=2) == (7, 7)
    # Nature DQN: 84 -> floor((84 - 8) / 4) + 1 = 20 -> floor((20 - 4) / 2) + 1 = 9 -> 7
    assert compute_conv_output((84, 84), 8, 4) == (20, 20)
    assert compute_conv_output((20, 20), 4, 2) == (9, 9)
    assert compute_conv_output((9, 9), 3, 1) == (7, 7)
    # padding and dilation: (11 + 2 - 2 * (3 - 1) - 1) / 2 + 1 = 5;
    # width (6 + 2 - 4 - 1) / 2 + 1 = 2
    assert compute_conv_output((11, 6), 3, 2, padding=1, dilation=2) == (5, 2)
    layers = [nn.Conv2d(3, 8, 5, stride=2, padding=2), nn.ReLU(), nn.MaxPool2d(2)]
    # 32 -> (32 + 4 - 4 - 1) / 2 + 1 = 16 -> pool 2: 8
    assert compute_conv_output((32, 32), layers=layers) == (8, 8)
    with pytest.raises(ValueError, match="leaves no output"):
        compute_conv_output((2, 2), kernel_size=3)
    with pytest.raises(ValueError, match="either kernel_size"):
        compute_conv_output((2, 2))


@pytest.mark.parametrize(
    "encoder, obs",
    [
        (MinAtarEncoder(4, emb_dim=20), {"obs": torch.ones(3, 4, 10, 10, dtype=torch.uint8)}),
        (NatureEncoder(4, emb_dim=32), {"obs": torch.zeros(2, 4, 84, 84, dtype=torch.uint8)}),
        (
            ImageAndStateEncoder((3, 16, 16), 5, emb_dim=12),
            {"image": torch.zeros(2, 3, 16, 16, dtype=torch.uint8), "state": torch.ones(2, 5)},
        ),
    ],
    ids=["minatar", "nature", "image_and_state"],
)
def test_encoders_output_their_embedding_dim(encoder, obs):
    out = encoder(obs)
    assert out.shape == (next(iter(obs.values())).shape[0], encoder.embedding_dim)
    assert out.dtype == torch.float32


def test_nature_encoder_flattens_a_7x7x64_map_and_scales_pixels():
    enc = NatureEncoder(4)
    assert enc.fc.in_features == 7 * 7 * 64
    assert torch.equal(
        enc.to_float(torch.tensor([0, 255], dtype=torch.uint8)), torch.tensor([0.0, 1.0])
    )
    assert MinAtarEncoder(4).fc.in_features == 7 * 7 * 16
    with pytest.raises(KeyError, match="image_key"):
        enc({"pixels": torch.zeros(1, 4, 84, 84, dtype=torch.uint8)})
    with pytest.raises(ValueError, match="ChannelsFirstWrapper"):
        enc({"obs": torch.zeros(4, 84, 84, dtype=torch.uint8)})


def test_encoder_learns_from_the_critic_loss_only():
    agent = Agent(3, MinAtarEncoder(4, emb_dim=8), discrete=True, hidden_size=8)
    target = learning.make_target_agent(agent)
    obs = {"obs": torch.randint(0, 2, (4, 4, 10, 10), dtype=torch.uint8)}
    batch = learning.Batch(
        obs=obs,
        action=torch.tensor([0, 1, 2, 0]),
        reward=torch.ones(4, 1),
        next_obs=obs,
        done=torch.zeros(4, 1),
        discount=torch.full((4, 1), 0.99),
        weights=torch.ones(4, 1),
        idxs=None,
    )
    actor_opt = optim.build_optimizer(optim.ParamGroup(list(agent.actor.parameters()), 1e-3))
    learning.online_actor_update(agent, batch, actor_opt, alpha=torch.tensor(0.1))
    assert all(p.grad is None for p in agent.encoder.parameters())
    params = list(agent.critic.parameters()) + list(agent.encoder.parameters())
    critic_opt = optim.build_optimizer(optim.ParamGroup(params, 1e-3))
    learning.critic_update(agent, target, batch, critic_opt, alpha=torch.tensor(0.1),
                           target_critic_ensemble_n=2)  # fmt: skip
    assert all(p.grad is not None for p in agent.encoder.parameters())


# ----------------------------------------------------------------------------- wrappers


class ImageEnv(gym.Env):
    """Float (H, W, C) images in [0, 1] whose pixel (0, 0, c) counts steps."""

    def __init__(self):
        self.observation_space = spaces.Box(0.0, 1.0, (6, 5, 3), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def _obs(self):
        img = np.zeros((6, 5, 3), np.float32)
        img[0, 0, :] = self.t / 4
        img[1, 2, 1] = 1.0
        return img

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, self.t >= 4, False, {}


def test_uint8_channels_first_keep_keys_chain():
    env = ChannelsFirstWrapper(Uint8Wrapper(DictObsWrapper(ImageEnv(), "image")))
    space = env.observation_space["image"]
    assert space.shape == (3, 6, 5) and space.dtype == np.uint8
    obs, _ = env.reset()
    obs, *_ = env.step(0)
    assert obs["image"].shape == (3, 6, 5) and obs["image"].dtype == np.uint8
    # 1/4 * 255 = 63.75 -> 64; the marked pixel (1, 2) of channel 1 is 255
    assert obs["image"][:, 0, 0].tolist() == [64, 64, 64]
    assert obs["image"][1, 1, 2] == 255 and obs["image"][0, 1, 2] == 0
    assert space.contains(obs["image"])
    both = ImageAndStateWrapper(gym.wrappers.TimeLimit(env, 10), image_key="image")
    obs, _ = both.reset()
    obs, *_ = both.step(1)
    assert set(obs) == {"image", "state"}
    assert np.allclose(obs["state"], [0.1])  # one step of a 10-step limit
    kept = KeepKeysWrapper(both, ("image",))
    assert list(kept.observation_space.spaces) == ["image"]
    assert list(kept.reset()[0]) == ["image"]
    with pytest.raises(KeyError, match="missing"):
        KeepKeysWrapper(both, ("missing",))
    with pytest.raises(TypeError, match="Dict observation space"):
        Uint8Wrapper(ImageEnv())


class _DictImageEnv(gym.Env):
    """One float image key of the given bounds and a 2-d vector key."""

    def __init__(self, high=255.0):
        self.observation_space = spaces.Dict(
            {
                "image": spaces.Box(0.0, high, (4, 4, 3), np.float32),
                "vel": spaces.Box(-1.0, 1.0, (2,), np.float32),
            }
        )
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        image = np.full((4, 4, 3), 0.4, np.float32) * self.observation_space["image"].high
        return {"image": image, "vel": np.zeros(2, np.float32)}, {}


def test_uint8_wrapper_reads_float_images_by_their_declared_bounds():
    # pixel values held as floats in [0, 255]: rounded, not multiplied by 255 (102.0 stays 102)
    obs, _ = Uint8Wrapper(_DictImageEnv(255.0), keys=("image",)).reset()
    assert obs["image"].dtype == np.uint8 and int(obs["image"][0, 0, 0]) == 102
    # within [0, 1]: 0.4 * 255 = 102
    obs, _ = Uint8Wrapper(_DictImageEnv(1.0), keys=("image",)).reset()
    assert int(obs["image"][0, 0, 0]) == 102
    with pytest.raises(ValueError, match=r"key 'image' holds floats in \[0.0, inf\].*Fix"):
        Uint8Wrapper(_DictImageEnv(np.inf), keys=("image",))
    with pytest.raises(ValueError, match=r"key 'vel' holds floats in \[-1.0, 1.0\]"):
        Uint8Wrapper(_DictImageEnv(255.0))  # every key, the vector too


def test_channels_first_wrapper_names_a_key_that_is_no_image():
    with pytest.raises(ValueError, match=r"key 'vel': expects \(H, W, C\).*keys=\('image',\)"):
        ChannelsFirstWrapper(_DictImageEnv())
    env = ChannelsFirstWrapper(_DictImageEnv(), keys=("image",))
    assert env.observation_space["image"].shape == (3, 4, 4)


def test_minatar_adapter_spaces_and_a_seeded_episode():
    env = make_minatar_env("breakout", max_episode_steps=200)
    assert env.observation_space["obs"].shape == (4, 10, 10)
    assert env.observation_space["obs"].dtype == np.uint8
    assert env.action_space == spaces.Discrete(3)  # breakout's minimal set: no-op, left, right
    assert MinAtarEnv("breakout", minimal_action_set=False).action_space.n == 6

    def episode(seed):
        obs, _ = env.reset(seed=seed)
        frames, total, rng = [obs["obs"]], 0.0, np.random.default_rng(0)
        while True:
            obs, r, terminated, truncated, _ = env.step(int(rng.integers(3)))
            frames.append(obs["obs"])
            total += r
            assert env.observation_space.contains(obs)
            if terminated or truncated:
                return np.stack(frames), total, terminated, truncated

    a, ret_a, term, trunc = episode(3)
    b, ret_b, *_ = episode(3)
    assert np.array_equal(a, b) and ret_a == ret_b  # reset(seed) makes episodes reproducible
    assert term != trunc
    # breakout at the start: one paddle cell, the ball, its trail cell, 3 rows of 10 bricks
    assert a[0].sum(axis=(1, 2)).tolist() == [1, 1, 1, 30]
    with pytest.raises(ValueError, match="unknown MinAtar game"):
        MinAtarEnv("pacman")


def test_a_seeded_minatar_episode_does_not_depend_on_the_previous_episodes_last_action():
    """MinAtar's sticky actions repeat the last action taken; a new episode must not repeat the
    previous episode's (or a resumed run would not rebuild it from its seed and actions)."""
    env = make_minatar_env("breakout")

    def episode(seed, previous_action=None):
        if previous_action is not None:
            env.reset(seed=999)
            env.step(previous_action)
        frames = [env.reset(seed=seed)[0]["obs"]]
        frames += [env.step(0)[0]["obs"] for _ in range(40)]  # no-ops
        return np.stack(frames)

    # seeds 11 and 27 draw a sticky repeat on the first step: "right" then moved the paddle
    for seed in (11, 27):
        assert np.array_equal(episode(seed), episode(seed, previous_action=2))


def test_atari_env_is_stacked_uint8_frames():
    env = make_atari_env("Breakout", max_episode_steps=20)
    obs, _ = env.reset(seed=0)
    assert obs["obs"].shape == (4, 84, 84) and obs["obs"].dtype == np.uint8
    assert isinstance(env.action_space, spaces.Discrete)
    for _ in range(20):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            break
    assert truncated or terminated
    env.close()


def test_atari_limit_above_ales_own_raises_ales_frame_cap():
    def cap(**kwargs):
        env = make_atari_env("Breakout", **kwargs)
        frames = env.unwrapped.ale.getInt("max_num_frames_per_episode")
        env.close()
        return frames

    assert cap() == cap(max_episode_steps=20) == 108_000  # ALE's own limit
    assert cap(max_episode_steps=26_992) == 108_000  # 4 frames a step and 30 no-ops fit
    assert cap(max_episode_steps=27_000) == 108_030  # ALE counts the reset's no-ops too
    assert cap(max_episode_steps=30_000) == 120_030  # 4 emulator frames per agent step
    assert cap(max_episode_steps=30_000, max_num_frames_per_episode=5_000) == 5_000


# ----------------------------------------------------------------------------- replay storage


def test_uint8_images_round_trip_through_the_buffer(tmp_path):
    env = make_minatar_env("breakout")
    buffer = ReplayBuffer(64, verbose=False, seed=0)
    buffer.allocate(env.observation_space, env.action_space)
    # 2 * 400 B of grids + 8 B int64 action + 12 B reward/done/discount
    assert buffer.bytes_per_transition == 2 * 400 + 8 + 12
    rng = np.random.default_rng(0)
    obs = {"obs": rng.integers(0, 2, (8, 4, 10, 10), dtype=np.uint8)}
    nxt = {"obs": rng.integers(0, 2, (8, 4, 10, 10), dtype=np.uint8)}
    buffer.push(obs, np.arange(8) % 3, np.ones(8), nxt, np.zeros(8), np.full(8, 0.99))
    batch = buffer.sample(16)
    assert batch.obs["obs"].dtype == torch.uint8 and batch.next_obs["obs"].dtype == torch.uint8
    assert torch.equal(batch.obs["obs"], torch.from_numpy(obs["obs"][batch.idxs]))
    path = buffer.save(tmp_path / "buf")
    loaded = ReplayBuffer(64, verbose=False).load(path)
    assert loaded._obs["obs"].dtype == np.uint8
    assert np.array_equal(loaded._obs["obs"][:8], obs["obs"])


def test_replay_memory_for_100k_minatar_and_atari_transitions():
    minatar = make_minatar_env("breakout")
    small = ReplayBuffer(100_000, verbose=False)
    small.allocate(minatar.observation_space, minatar.action_space)
    assert small.memory_bytes == 100_000 * 820  # allocated: about 78 MiB
    atari_obs = spaces.Dict({"obs": spaces.Box(0, 255, (4, 84, 84), np.uint8)})
    # computed from a small buffer, not allocated: 2 * 4 * 84 * 84 + 8 + 12 = 56,468 B
    atari = ReplayBuffer(10, verbose=False)
    atari.allocate(atari_obs, spaces.Discrete(4))
    assert atari.bytes_per_transition == 2 * 4 * 84 * 84 + 8 + 12
    assert 100_000 * atari.bytes_per_transition < 6 * 2**30  # 5.26 GiB of a 24 GiB budget


# ----------------------------------------------------------------------------- training scripts

TINY = [
    "Agent.hidden_size = 16",
    "ReplayBuffer.size = 1000",
    "super_sac.batch_size = 8",
    "super_sac.random_warmup_steps = 50",
    "super_sac.eval_interval = 100",
    "super_sac.eval_episodes = 1",
    "super_sac.log_interval = 50",
    "super_sac.save_interval = 100",
    "super_sac.checkpoint_interval = 100",
    "super_sac.verbosity = 0",
]


def train_minatar(argv):
    return cli.train_minatar(argv, search_dirs=[ROOT / "experiments" / "minatar"])


def train_atari(argv):
    return cli.train_atari(argv, search_dirs=[ROOT / "experiments" / "atari"])


def test_minatar_script_runs_basic_online_gin():
    bindings = [*TINY, "MinAtarEncoder.emb_dim = 8"]
    argv = ["--game", "breakout", "--config", "basic_online.gin", "--steps", "200", "--seed", "0",
            "--max_episode_steps", "100"]  # fmt: skip
    summary = train_minatar(argv + [x for b in bindings for x in ("--gin_bindings", b)])
    assert summary["env_steps"] == 200 and summary["critic_updates"] == 150
    assert np.isfinite(summary["final_eval_return"])
    assert Path(summary["run_dir"]).name.startswith("basic_online_breakout")


def test_atari_script_runs_basic_online_gin():
    bindings = [*TINY, "NatureEncoder.emb_dim = 16", "super_sac.target_delay = 10",
                "super_sac.save_to_disk = False", "super_sac.log_to_disk = False"]  # fmt: skip
    argv = ["--game", "Breakout", "--config", "basic_online.gin", "--steps", "60", "--seed", "0",
            "--max_episode_steps", "30"]  # fmt: skip
    summary = train_atari(argv + [x for b in bindings for x in ("--gin_bindings", b)])
    # 60 steps x 4 transitions; updates start after the 50 warm-up transitions (step 13)
    assert summary["env_steps"] == 240 and summary["critic_updates"] == 48
    assert np.isfinite(summary["final_eval_return"])


@pytest.mark.parametrize(
    "config, steps, phase",
    [
        ("basic_offline.gin", ["--offline_steps", "60"], "offline"),
        ("behavioral_cloning.gin", ["--bc_steps", "60"], "bc"),
    ],
)
def test_minatar_script_learns_offline_from_a_recorded_dataset(tmp_path, config, steps, phase):
    from super_sac import datasets

    env = make_minatar_env("breakout", max_episode_steps=100)
    episodes, _, act_space = datasets.record_episodes(env, datasets.random_policy(env, 0), 300)
    path = datasets.save_npz(tmp_path / "breakout-random.npz", episodes, act_space)
    bindings = [*TINY, "MinAtarEncoder.emb_dim = 8", "super_sac.num_steps_online = 0",
                "super_sac.eval_interval = 60"]  # fmt: skip
    argv = ["--game", "breakout", "--config", config, "--dataset", str(path), "--seed", "0",
            "--max_episode_steps", "100", *steps]  # fmt: skip
    summary = train_minatar(argv + [x for b in bindings for x in ("--gin_bindings", b)])
    assert summary["env_steps"] == 0
    assert [e["phase"] for e in summary["eval_history"]] == [phase]
    assert summary["critic_updates"] == (60 if phase == "offline" else 0)
    assert np.isfinite(summary["final_eval_return"])
