"""experiments/offline/build_datasets.py: a rebuild with the same seeds writes the same bytes,
--verify names a changed file, --medium_checkpoint forces the medium agent, medium-replay is the
training run's replay up to the medium checkpoint (super_sac.checkpoint.checkpoint_episodes),
and --numerics portable fixes MKL's code branch and torch's kernel level (or says why it cannot)."""

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from script_loader import load_script

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
    return load_script(ROOT / "experiments/offline/build_datasets.py")


@pytest.fixture(scope="module")
def script():
    module = _load_script()
    module.ENVS = {ENV: TINY}
    return module


@pytest.fixture(scope="module")
def builds(script, tmp_path_factory):
    """The tiny build twice, into two folders, with the same seeds."""
    outs = [tmp_path_factory.mktemp(f"build{i}") for i in range(2)]
    # native numerics: the test process has computed with MKL already (see the portable test)
    argv = ["--envs", ENV, "--numerics", "native"]
    refs = [script.main(["--out", str(out), *argv])[ENV] for out in outs]
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
    assert build["numerics"]["mode"] == "native" and build["processor"]
    assert build["train"]["numerics"]["mode"] == "native"  # written beside the agents


def test_medium_only_rebuild_stops_at_the_medium_checkpoint_and_matches(script, builds, tmp_path):
    """The run stopped at the recorded medium step has the full run's checkpoints up to there:
    medium and medium-replay come out byte-identical, random and expert are not built."""
    (out_a, _), (ref_a, _) = builds
    record = out_a / "reference_returns.json"
    argv = ["--out", str(tmp_path), "--envs", ENV, "--numerics", "native"]
    refs = script.main([*argv, "--medium_only_from", str(record)])
    step = ref_a["medium_checkpoint"]["env_steps"]
    checkpoints = sorted(p.name for p in (tmp_path / f"agents/sac_{ENV}_0/checkpoints").iterdir())
    assert checkpoints[-1] == f"ckpt_{step}" and step < TINY["train_steps"]
    for quality in ("medium", "medium-replay"):
        assert refs[ENV]["datasets"][quality]["sha256"] == ref_a["datasets"][quality]["sha256"]
    assert not (tmp_path / "npz/pendulum-random.npz").exists()
    rebuilt = refs[ENV]["datasets"]["medium"]  # statistics of the rebuilt files themselves
    assert rebuilt["return_mean"] == pytest.approx(ref_a["datasets"]["medium"]["return_mean"])
    assert refs[ENV]["build"]["train"]["stopped_at"] == step
    assert len(script.verify(tmp_path)) == 6  # its own record: the two datasets' files
    lines = script.verify(tmp_path, expect=record)  # the full record: random and expert skipped
    assert sum(line.startswith("ok ") for line in lines) == 6
    assert f"skipped {ENV} random (not rebuilt: --medium_only_from)" in lines
    # the stopped run's agent is not an expert: recording the full set from it is refused
    with pytest.raises(SystemExit, match="trained .* steps \\(a --medium_only_from rebuild\\)"):
        script.main([*argv, "--stage", "record", "--overwrite"])
    # an existing run is not trained over
    with pytest.raises(SystemExit, match="exists \\(an earlier build or rebuild\\)"):
        script.main([*argv, "--medium_only_from", str(record)])
    # a record made with other settings cannot be matched: refused before building
    with pytest.raises(SystemExit, match="--seed 1 \\(the record: 0\\)"):
        script.main([*argv, "--medium_only_from", str(record), "--seed", "1"])
    # a differing file is named
    changed = json.loads(record.read_text())
    changed[ENV]["datasets"]["medium"]["sha256"]["npz/pendulum-medium.npz"] = "f" * 64
    (tmp_path / "changed.json").write_text(json.dumps(changed))
    with pytest.raises(script.ChecksumError, match="(?s)1 rebuilt file.*pendulum-medium.npz"):
        script.main(
            ["--out", str(tmp_path / "second"), "--envs", ENV, "--numerics", "native"]
            + ["--medium_only_from", str(tmp_path / "changed.json")]
        )
    assert not (tmp_path / "second" / "reference_returns.json").exists()  # nothing recorded
    with pytest.raises(SystemExit, match="no such file"):
        script.main([*argv, "--medium_only_from", str(tmp_path / "missing.json")])


def test_recording_refuses_agents_trained_with_other_numerics(script, builds):
    folder = builds[0][0] / "agents" / f"sac_{ENV}_0"
    assert script.check_numerics(folder, {"mode": "native"})["mode"] == "native"
    with pytest.raises(SystemExit, match="trained with --numerics native.*record with"):
        script.check_numerics(folder, {"mode": "portable"})


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


def test_verify_against_another_machines_record_names_the_numerics(script, builds, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(builds[0][0], out)
    other = builds[0][1] / "reference_returns.json"  # the second build's record: same bytes
    assert len(script.verify(out, expect=other)) == 12
    assert script.main(["--verify", "--out", str(out), "--expect", str(other)]) == {}
    record = json.loads(other.read_text())
    del record[ENV]["build"]["numerics"]  # as the first issue-18 build, which had no such entry
    record[ENV]["build"]["processor"] = "Some Older CPU"
    record[ENV]["datasets"]["expert"]["sha256"]["npz/pendulum-expert.npz"] = "0" * 64
    (tmp_path / "old.json").write_text(json.dumps(record))
    with pytest.raises(script.ChecksumError) as err:
        script.verify(out, expect=tmp_path / "old.json")
    message = str(err.value)
    assert message.startswith("1 dataset file(s) do not match") and "pendulum-expert.npz" in message
    assert "the record was built with native (not recorded) numerics on Some Older CPU" in message
    assert "the files here with native numerics on " in message
    assert "a --numerics portable build does not" in message
    with pytest.raises(SystemExit, match="--expect goes with --verify"):
        script.main(["--out", str(out), "--expect", str(other)])


PORTABLE_BUILD = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("b", sys.argv[1])
b = importlib.util.module_from_spec(spec)
spec.loader.exec_module(b)
b.ENVS = {"Pendulum-v1": json.loads(sys.argv[3])}
b.main(["--out", sys.argv[2], "--envs", "Pendulum-v1"])  # --numerics portable by default
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="MKL runs on x86-64")
def test_a_portable_build_fixes_the_numerics_and_changes_only_what_networks_made(builds, tmp_path):
    """In a fresh process (MKL's branch can only be fixed before it computes) the default build
    runs MKL's COMPATIBLE branch and torch's AVX2 kernels: the random dataset is the native
    build's byte for byte, while every dataset a network produced differs in its floats."""
    path = ROOT / "experiments/offline/build_datasets.py"
    cmd = [sys.executable, "-c", PORTABLE_BUILD, str(path), str(tmp_path), json.dumps(TINY)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    portable = json.loads((tmp_path / "reference_returns.json").read_text())[ENV]
    assert portable["build"]["numerics"] == {
        "mode": "portable",
        "MKL_CBWR": "COMPATIBLE,STRICT",
        "ATEN_CPU_CAPABILITY": "avx2",
        "mkl_branch": 3,
        "torch_cpu_capability": "AVX2",
    }
    native = builds[0][1]
    sums = {q: d["sha256"] for q, d in portable["datasets"].items()}
    native_sums = {q: d["sha256"] for q, d in builds[1][1]["datasets"].items()}
    assert sums["random"] == native_sums["random"]
    # the pins take effect: what the networks produced is not the native build's (the floats
    # of a few hundred updates differ in their last bits, enough to change the recorded actions)
    assert any(
        sums[q][f"npz/pendulum-{q}.npz"] != native_sums[q][f"npz/pendulum-{q}.npz"]
        for q in ("medium", "medium-replay", "expert")
    )
    assert portable["build"]["train"]["numerics"]["mode"] == "portable"
    assert (native / "npz/pendulum-random.npz").read_bytes() == (
        tmp_path / "npz/pendulum-random.npz"
    ).read_bytes()


def test_portable_numerics_refuse_what_would_not_be_portable(script, monkeypatch, tmp_path):
    import torch

    for name in script.PORTABLE_NUMERICS:  # restored after the test, whatever it sets
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setenv("MKL_CBWR", "AUTO")
    with pytest.raises(SystemExit, match="already has {'MKL_CBWR': 'AUTO'}"):
        script.set_numerics("portable")
    monkeypatch.delenv("MKL_CBWR")
    if script._mkl_service() is None:
        pytest.skip("this torch has no MKL")
    torch.ones(32, 32) @ torch.ones(32, 32)  # MKL has computed in this process
    with pytest.raises(SystemExit, match="computed with MKL before.*fresh process"):
        script.main(["--out", str(tmp_path), "--envs", ENV])
    assert not (tmp_path / "agents").exists()  # refused before building anything
    assert all(name not in os.environ for name in script.PORTABLE_NUMERICS)  # left as it was


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
    argv += ["--numerics", "native"]
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


def test_replay_episodes_groups_interleaved_envs_and_refuses_unknown_rows(tmp_path):
    # two envs pushed together: env 0's episode runs 0 -> 1 -> 2, env 1's 10 -> 11 (cut)
    buffer = ReplayBuffer(20, seed=0, verbose=False)

    def push(o, n, env_index=None, done=0.0):
        buffer.push({"obs": np.array(o, np.float32).reshape(-1, 1).repeat(3, 1)},
                    np.zeros((len(o), 1)), np.array(o, float), {"obs": np.array(n, np.float32)
                    .reshape(-1, 1).repeat(3, 1)}, np.full(len(o), done), np.full(len(o), 0.99),
                    env_index=env_index)  # fmt: skip

    push([0, 10], [1, 11], np.array([0, 1]))
    push([1, 11], [2, 12], np.array([0, 1]))
    push([2], [3], np.array([0]), done=1.0)  # env 0 terminates; env 1 is resetting
    path = buffer.save(tmp_path / "two.npz")
    episodes = replay_episodes(path, _box())
    assert [ep.rewards.tolist() for ep in episodes] == [[0.0, 1.0, 2.0], [10.0, 11.0]]
    assert episodes[0].terminations[-1] and episodes[1].truncations[-1]
    push([3], [4])  # a row without its env, among two recorded envs
    with pytest.raises(ds.DatasetError, match="some transitions record the env"):
        replay_episodes(buffer.save(tmp_path / "mixed.npz"), _box())
    # a run of one env resumed from a file of an earlier version (-1 rows, then env 0): one env
    old = ReplayBuffer(20, seed=0, verbose=False)
    old.push({"obs": np.zeros((2, 3), np.float32)}, np.zeros((2, 1)), np.zeros(2),
             {"obs": np.zeros((2, 3), np.float32)}, np.zeros(2), np.full(2, 0.99))  # fmt: skip
    old.push({"obs": np.zeros((1, 3), np.float32)}, np.zeros((1, 1)), np.zeros(1),
             {"obs": np.ones((1, 3), np.float32)}, np.zeros(1), np.full(1, 0.99),
             env_index=np.zeros(1, np.int16))  # fmt: skip
    (episode,) = replay_episodes(old.save(tmp_path / "resumed.npz"), _box())
    assert len(episode.rewards) == 3


def test_compare_checksums_names_missing_and_differing_files(script, tmp_path):
    """The one check behind --verify and --medium_only_from: a missing file, a file whose
    SHA-256 differs (hashed here or taken from checksums already computed), and the matches."""
    (tmp_path / "a.npz").write_bytes(b"a")
    (tmp_path / "b.npz").write_bytes(b"b")
    expected = {
        "a.npz": sha256_file(tmp_path / "a.npz"),
        "b.npz": "0" * 64,
        "c.npz": "1" * 64,
    }
    problems, good, differing = script.compare_checksums(tmp_path, expected, "Env medium")
    assert good == ["a.npz"] and differing == ["b.npz"]
    assert problems == [
        f"{tmp_path / 'b.npz'}: sha256 {sha256_file(tmp_path / 'b.npz')} differs from the "
        f"recorded {'0' * 64} (Env medium)",
        f"{tmp_path / 'c.npz'}: missing (Env medium)",
    ]
    # checksums passed in are used as they are: the file is not read again
    problems, good, differing = script.compare_checksums(
        tmp_path, expected, "E q", {"b.npz": "0" * 64}
    )
    assert good == ["a.npz", "b.npz"] and not differing
    assert problems == [f"{tmp_path / 'c.npz'}: missing (E q)"]
