"""experiments/offline/build_datasets.py: a rebuild with the same seeds writes the same bytes,
--verify names a changed file, --medium_checkpoint forces the medium agent, and medium-replay is
the training run's replay up to the medium checkpoint (super_sac.replay.replay_episodes)."""

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from super_sac import ReplayBuffer
from super_sac import datasets as ds
from super_sac.replay import replay_episodes
from super_sac.utils import sha256_file

ROOT = Path(__file__).resolve().parents[1]
ENV = "Pendulum-v1"
# 400 SAC steps (100 random), a checkpoint and a one-episode evaluation every 100 steps,
# datasets of 400 transitions (two 200-step episodes)
TINY = {"train_steps": 400, "interval": 100, "transitions": 400, "warmup_steps": 100}
TINY["eval_episodes"] = 1


def _load_script():
    spec = importlib.util.spec_from_file_location(
        "build_datasets", ROOT / "experiments/offline/build_datasets.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def script():
    module = _load_script()
    module.ENVS = {ENV: TINY}
    return module


@pytest.fixture(scope="module")
def builds(script, tmp_path_factory):
    """The tiny build twice, into two folders, with the same seeds."""
    outs = [tmp_path_factory.mktemp(f"build{i}") for i in range(2)]
    refs = [script.main(["--out", str(out), "--envs", ENV])[ENV] for out in outs]
    return outs, refs


def test_the_same_seeds_write_byte_identical_files(builds):
    (out_a, out_b), (ref_a, ref_b) = builds
    sums_a = {q: d["sha256"] for q, d in ref_a["datasets"].items()}
    sums_b = {q: d["sha256"] for q, d in ref_b["datasets"].items()}
    assert sums_a == sums_b
    assert set(sums_a) == {"random", "medium", "medium-replay", "expert"}
    for quality, sums in sums_a.items():  # an .npz and the Minari files of every dataset
        npz = f"npz/pendulum-{quality}.npz"
        assert npz in sums and any(k.endswith("main_data.hdf5") for k in sums)
        assert script_sha(out_a / npz) == sums[npz]
    assert ref_a["medium_checkpoint"] == ref_b["medium_checkpoint"]
    build = ref_a["build"]
    assert build["train"]["seed"] == 0 and build["train"]["threads"] == 1
    assert build["record_seed"] == 0 and build["record_threads"] == 1
    assert build["train"]["device"] == "cpu"


def script_sha(path):
    return sha256_file(path)


def test_verify_passes_then_names_the_changed_file(script, builds, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(builds[0][0], out)
    lines = script.verify(out)
    assert len(lines) == 12 and all(line.startswith("ok ") for line in lines)
    assert script.main(["--verify", "--out", str(out)]) == {}
    target = out / "npz" / "pendulum-medium-replay.npz"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 1
    target.write_bytes(bytes(data))
    with pytest.raises(script.ChecksumError) as err:
        script.main(["--verify", "--out", str(out)])
    message = str(err.value)
    assert message.startswith("1 dataset file(s) do not match")
    assert f"{target}: sha256 " in message and "(Pendulum-v1 medium-replay)" in message
    assert "pendulum-medium.npz" not in message and "Fix: restore the files" in message
    target.unlink()
    with pytest.raises(script.ChecksumError, match=f"{target}: missing"):
        script.verify(out)


def test_medium_replay_is_the_run_up_to_the_medium_checkpoint(builds):
    (out, _), (ref, _) = builds
    medium = ref["medium_checkpoint"]
    steps = medium["env_steps"]
    assert medium["path"] == f"agents/sac_{ENV}_0/checkpoints/ckpt_{steps}"
    assert ref["medium_agent"] == medium["path"] and steps < TINY["train_steps"]
    history = json.loads((out / f"agents/sac_{ENV}_0/summary.json").read_text())["eval_history"]
    assert (
        medium["eval_return"] == [e for e in history if e["env_steps"] == steps][0]["return_mean"]
    )
    data, _ = ds.load_npz(out / "npz/pendulum-medium-replay.npz")
    buffer = ReplayBuffer.from_file(out / medium["path"] / "buffer.npz", verbose=False, seed=0)
    batch = buffer.gather(np.arange(len(buffer)))
    assert len(data) == len(buffer) == steps  # one transition per env step of the run
    np.testing.assert_array_equal(data.obs["obs"], batch.obs["obs"].numpy())
    np.testing.assert_array_equal(data.next_obs["obs"], batch.next_obs["obs"].numpy())
    np.testing.assert_array_equal(data.reward, batch.reward.numpy()[:, 0])
    np.testing.assert_allclose(data.action, batch.action.numpy(), atol=1e-6)
    # Pendulum never terminates; its 200-step time limit truncates every episode
    assert not data.terminated.any()
    assert np.flatnonzero(data.truncated).tolist() == list(range(199, steps, 200))
    entry = ref["datasets"]["medium-replay"]
    assert entry["transitions"] == steps and entry["episodes"] == steps // 200
    assert entry["return_mean"] == pytest.approx(data.episode_returns.mean())
    assert entry["normalized_score"] == pytest.approx(
        100
        * (entry["return_mean"] - ref["random_return"])
        / (ref["expert_return"] - ref["random_return"])
    )


def test_medium_checkpoint_option_forces_the_choice(script, builds, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(builds[0][0], out)
    argv = ["--out", str(out), "--envs", ENV, "--stage", "record", "--overwrite"]
    ref = script.main(argv + ["--medium_checkpoint", f"{ENV}=300"])[ENV]
    assert ref["medium_checkpoint"]["env_steps"] == 300
    assert ref["medium_checkpoint"]["chosen_by"] == "--medium_checkpoint"
    assert ref["datasets"]["medium-replay"]["transitions"] == 300
    assert script.verify(out)  # the new checksums were recorded
    with pytest.raises(FileNotFoundError, match=r"--medium_checkpoint 250: no checkpoint"):
        script.main(argv + ["--medium_checkpoint", "250"])


# ------------------------------------------------------------------------------ replay_episodes
def _pendulum_buffer(tmp_path, steps, episode_len, n_step_discounts=False, size=100):
    """A buffer filled like the loop fills it: one env, resets every ``episode_len`` steps."""
    rng = np.random.default_rng(0)
    buffer = ReplayBuffer(size, seed=0, verbose=False)
    obs = rng.normal(size=3).astype(np.float32)
    for t in range(steps):
        reset = (t + 1) % episode_len == 0
        nxt = rng.normal(size=3).astype(np.float32)
        discount = 0.99**2 if n_step_discounts and t % 2 else 0.99
        buffer.push(
            {"obs": obs[None]}, np.array([[t / steps]]), np.array([float(t)]),
            {"obs": nxt[None]}, np.array([float(t == 6)]), np.array([discount]),
        )  # fmt: skip
        obs = rng.normal(size=3).astype(np.float32) if reset or t == 6 else nxt
    return buffer.save(tmp_path / "buffer.npz")


def test_replay_episodes_splits_at_resets_and_keeps_terminations_apart(tmp_path):
    path = _pendulum_buffer(tmp_path, steps=12, episode_len=5)  # t = 6 terminates
    episodes = replay_episodes(path, _box())
    assert [len(ep.rewards) for ep in episodes] == [5, 2, 3, 2]
    assert [ep.terminations.tolist() for ep in episodes][1] == [False, True]
    assert [bool(ep.truncations[-1]) for ep in episodes] == [True, False, True, True]
    assert sum(int(ep.terminations.sum() + ep.truncations.sum()) for ep in episodes) == 4
    assert episodes[0].observations.shape == (6, 3)  # T + 1 observations, the bare array
    np.testing.assert_array_equal(episodes[2].rewards, [7.0, 8.0, 9.0])
    # actions come back in the env's units: [-1, 1] -> [-2, 2]
    np.testing.assert_allclose(episodes[0].actions[:, 0], 2 * np.arange(5) / 12, atol=1e-6)


def _box():
    from gymnasium import spaces

    return spaces.Box(-2.0, 2.0, (1,), np.float32)


def test_replay_episodes_refuses_what_is_not_one_run_in_order(tmp_path):
    with pytest.raises(ds.DatasetError, match="n-step transitions"):
        replay_episodes(_pendulum_buffer(tmp_path, 6, 3, n_step_discounts=True), _box())
    with pytest.raises(ds.DatasetError, match="the buffer is full"):
        replay_episodes(_pendulum_buffer(tmp_path, 12, 5, size=10), _box())
