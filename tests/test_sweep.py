"""Sweeps: the per-run evaluation history (evaluations.csv), the statistics of the reports,
the grid of trials and its manifest."""

import csv
import functools
import os
import re
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from script_loader import load_script

from super_sac.reporting import EVAL_CSV_COLUMNS

HERE = Path(__file__).resolve().parent
STEPS = 300


def _crash_run(save_dir, name, *extra):
    return subprocess.run(
        [sys.executable, str(HERE / "crash_run.py"), str(save_dir), name, str(STEPS), *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _read_csv(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == EVAL_CSV_COLUMNS
        return list(reader)


# ----------------------------------------------------------------------------- evaluations.csv
def test_evaluations_csv_is_written_as_it_happens_and_not_duplicated_on_resume(tmp_path):
    ref = _crash_run(tmp_path / "ref", "ref")
    assert ref.returncode == 0, ref.stderr
    reference = _read_csv(tmp_path / "ref" / "ref_0" / "evaluations.csv")
    assert [int(r["env_steps"]) for r in reference] == [100, 200, 300]
    assert all(r["phase"] == "online" for r in reference)
    walls = [float(r["wall_seconds"]) for r in reference]
    assert walls == sorted(walls) and walls[0] > 0

    # killed while writing the step-200 checkpoint: the step-200 evaluation is already in the
    # CSV, but the run resumes from ckpt_100 and evaluates at step 200 again
    proc = _crash_run(tmp_path, "crash", "--kill", "state_write:2")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    run_dir = tmp_path / "crash_0"
    assert [int(r["env_steps"]) for r in _read_csv(run_dir / "evaluations.csv")] == [100, 200]
    proc = _crash_run(tmp_path, "crash", "--resume", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    resumed = _read_csv(run_dir / "evaluations.csv")
    same = [c for c in EVAL_CSV_COLUMNS if c != "wall_seconds"]
    assert [[r[c] for c in same] for r in resumed] == [[r[c] for c in same] for r in reference]
    walls = [float(r["wall_seconds"]) for r in resumed]
    assert walls == sorted(walls)


# ----------------------------------------------------------------------------- statistics
def test_iqm_against_hand_computed_values():
    from super_sac.sweep.stats import iqm

    assert iqm(range(1, 9)) == pytest.approx(4.5)  # (3 + 4 + 5 + 6) / 4
    assert iqm([8, 1, 7, 2, 6, 3, 5, 4]) == pytest.approx(4.5)  # order does not matter
    assert iqm([1, 2, 3, 4, 100]) == pytest.approx(3.0)  # the outlier is cut
    # n = 5: the window [1.25, 3.75] keeps 3/4 of the 2nd and 4th values
    assert iqm([0, 1, 2, 6, 7]) == pytest.approx((0.75 * 1 + 2 + 0.75 * 6) / 2.5)
    assert iqm([0, 1, 2, 6, 7], fractional=False) == pytest.approx(3.0)  # scipy's trim_mean
    # n = 6: the window [1.5, 4.5]
    assert iqm([1, 2, 3, 4, 5, 60]) == pytest.approx((0.5 * 2 + 3 + 4 + 0.5 * 5) / 3)
    assert iqm([7.0]) == 7.0
    with pytest.raises(ValueError):
        iqm([])


def test_stratified_bootstrap_interval_of_a_known_distribution():
    import numpy as np

    from super_sac.sweep.stats import stratified_bootstrap_ci

    n = 400
    x = np.random.default_rng(1).standard_normal(n)
    point, low, high = stratified_bootstrap_ci({"task": x}, np.mean, reps=2000, seed=0)
    assert point == pytest.approx(x.mean())
    assert low < 0 < high and low < point < high
    assert high - low == pytest.approx(2 * 1.96 / np.sqrt(n), rel=0.15)
    # seeded: the same interval again
    assert stratified_bootstrap_ci({"task": x}, np.mean, reps=2000, seed=0) == (point, low, high)


def test_bootstrap_resamples_within_each_task():
    import numpy as np

    from super_sac.sweep.stats import stratified_bootstrap_ci

    # every run of a task has the same score: resampling within tasks cannot move the mean,
    # while a pooled bootstrap would
    scores = {"a": [0.0] * 3, "b": [10.0] * 5}
    point, low, high = stratified_bootstrap_ci(scores, np.mean, reps=200)
    assert point == low == high == pytest.approx(50 / 8)
    with pytest.raises(ValueError):
        stratified_bootstrap_ci({"a": []}, np.mean)


def test_vectorised_bootstrap_statistics_match_one_call_per_resample():
    import numpy as np

    from super_sac.sweep.stats import iqm, iqm_of_rows, stratified_bootstrap_ci

    rng = np.random.default_rng(3)
    for n in range(1, 10):  # every quartile cut: n = 1 .. 9
        rows = rng.normal(size=(50, n))
        looped = np.array([iqm(row) for row in rows])
        np.testing.assert_allclose(iqm_of_rows(rows), looped, rtol=1e-12, atol=1e-12)
    # the same intervals whether the statistic is vectorised (np.mean) or called per resample
    # (a lambda the table of vectorised statistics does not know)
    scores = {"a": rng.normal(size=5), "b": rng.normal(size=7)}
    for fn in (np.mean, np.median, iqm):
        fast = stratified_bootstrap_ci(scores, fn, reps=300, seed=4)
        slow = stratified_bootstrap_ci(scores, lambda x, fn=fn: fn(x), reps=300, seed=4)
        assert fast == pytest.approx(slow, rel=1e-12, abs=1e-12)


def test_area_under_curve_is_the_average_height():
    from super_sac.sweep.stats import area_under_curve

    assert area_under_curve([0, 10], [0, 1]) == pytest.approx(0.5)
    assert area_under_curve([0, 1, 3], [2, 2, 2]) == pytest.approx(2.0)
    # (1+3)/2*1 + (3+3)/2*2 = 2 + 6 = 8 over a span of 3
    assert area_under_curve([0, 1, 3], [1, 3, 3]) == pytest.approx(8 / 3)
    assert area_under_curve([5], [4.0]) == 4.0
    with pytest.raises(ValueError):
        area_under_curve([2, 1], [0, 0])


# ----------------------------------------------------------------------------- grid, manifest
def test_seeds_parse_ranges_and_lists():
    from super_sac.sweep.grid import parse_seeds

    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("0,2,5") == [0, 2, 5]
    assert parse_seeds("0-2, 7") == [0, 1, 2, 7]
    assert parse_seeds("3") == [3] and parse_seeds(3) == [3] and parse_seeds([1, 4]) == [1, 4]
    for bad in ("", "4-0", "a", "0,,1", "0-2,1", "-1"):
        with pytest.raises(ValueError):
            parse_seeds(bad)


def test_grid_expands_into_trial_folders(tmp_path):
    from super_sac.sweep.grid import FRESH, Grid

    grid = Grid.make(["sac.gin", "configs/td3.gin"], ["Pendulum-v1", "ALE/Pong-v5"], "0-1")
    trials = grid.trials(tmp_path / "study")
    assert len(trials) == 8
    assert [t.key for t in trials[:4]] == [
        "sac/Pendulum-v1/seed_0",
        "sac/Pendulum-v1/seed_1",
        "sac/ALE_Pong-v5/seed_0",
        "sac/ALE_Pong-v5/seed_1",
    ]
    last = trials[-1]
    assert (last.config, last.env, last.seed) == ("configs/td3.gin", "ALE/Pong-v5", 1)
    assert last.folder == tmp_path / "study" / "td3" / "ALE_Pong-v5" / "seed_1"
    assert all(t.state() == FRESH for t in trials)
    assert Grid.from_json(grid.to_json()) == grid
    with pytest.raises(ValueError, match="share the folder 'sac'"):
        Grid.make(["a/sac.gin", "b/sac.gin"], ["Pendulum-v1"], "0")


def test_trial_state_follows_its_files(tmp_path):
    from super_sac.sweep.grid import FINISHED, FRESH, INTERRUPTED, trial_state

    folder = tmp_path / "seed_0"
    assert trial_state(folder) == FRESH
    (folder / "checkpoints" / ".tmp_ckpt_100").mkdir(parents=True)  # a half-written one
    (folder / "config.gin").write_text("")
    assert trial_state(folder) == FRESH
    (folder / "checkpoints" / "ckpt_100").mkdir()
    assert trial_state(folder) == INTERRUPTED
    (folder / "summary.json").write_text("{}")
    assert trial_state(folder) == FINISHED


def test_manifest_refuses_a_different_grid(tmp_path):
    import json

    from super_sac.sweep.grid import Grid, GridMismatchError, write_manifest
    from super_sac.utils import machine_info

    grid = Grid.make(["sac.gin"], ["Pendulum-v1"], "0-2", steps=300)
    manifest = write_manifest(tmp_path, grid)
    assert manifest["grid"]["seeds"] == [0, 1, 2]
    assert "git_commit" in manifest["code"] and manifest["packages"]["torch"]
    # the machine: this one's, less the driver's thread count (each trial sets its own)
    here = {k: v for k, v in machine_info().items() if k != "torch_threads"}
    assert manifest["machine"] == here and here["cpu_count"] == os.cpu_count()
    again = write_manifest(tmp_path, grid)  # the same grid: accepted, recorded as a rerun
    assert len(again["reruns"]) == 1 and again["reruns"][0]["machine"] == here
    assert json.loads((tmp_path / "manifest.json").read_text()) == again
    other = Grid.make(["sac.gin", "td3.gin"], ["Pendulum-v1"], "0-4", steps=300)
    with pytest.raises(GridMismatchError) as err:
        write_manifest(tmp_path, other)
    message = str(err.value)
    assert "configs: added ['td3.gin']" in message and "seeds: added [3, 4]" in message
    with pytest.raises(GridMismatchError, match="steps: was 300, now 500"):
        write_manifest(tmp_path, Grid.make(["sac.gin"], ["Pendulum-v1"], "0-2", steps=500))


# ----------------------------------------------------------------------------- local backend
SMALL = [
    "Agent.hidden_size = 32",
    "ReplayBuffer.size = 5000",
    "super_sac.batch_size = 32",
    "super_sac.random_warmup_steps = 50",
    "super_sac.eval_interval = 50",
    "super_sac.eval_episodes = 1",
    "super_sac.log_interval = 50",
    "super_sac.checkpoint_interval = 50",
    "super_sac.verbosity = 0",
    "super_sac.max_episode_steps = 50",
    "super_sac.logging_method = 'none'",
]


def test_local_sweep_skips_finished_trials_and_resumes_interrupted_ones(tmp_path):
    import io
    import json

    from super_sac.sweep.grid import FINISHED, INTERRUPTED, Grid
    from super_sac.sweep.local import run_local

    root = Path(__file__).resolve().parents[1]
    script = root / "experiments" / "gym" / "train_gym.py"
    configs = ["sac.gin", "td3.gin"]
    grid = Grid.make(configs, ["Pendulum-v1"], "0-1", steps=150, gin_bindings=SMALL)
    out = io.StringIO()
    results = run_local(grid, tmp_path / "study", workers=2, script=script, out=out)
    assert [r.status for r in results] == ["finished"] * 4, out.getvalue()
    for trial in grid.trials(tmp_path / "study"):
        assert trial.state() == FINISHED
        rows = _read_csv(trial.folder / "evaluations.csv")
        assert [int(r["env_steps"]) for r in rows] == [50, 100, 150]
        assert json.loads((trial.folder / "hparams.json").read_text())["seed"] == trial.seed
    assert "[####################] 4/4 done, 0 running, 0 failed\n" in out.getvalue()

    # the first trial lost its summary (killed after its last checkpoint): it resumes
    first = grid.trials(tmp_path / "study")[0]
    (first.folder / "summary.json").unlink()
    assert first.state() == INTERRUPTED
    results = run_local(grid, tmp_path / "study", workers=2, script=script, out=io.StringIO())
    assert [(r.status, r.resumed) for r in results] == [("finished", True)] + [
        ("skipped", False)
    ] * 3
    assert "--resume" in (first.folder / "sweep.log").read_text()
    assert first.state() == FINISHED

    # the report: tables and curves from the evaluations.csv files
    from super_sac.sweep.report import write_report

    files = write_report(tmp_path / "study")
    table = files["markdown"].read_text()
    assert "| sac | Pendulum-v1 | 2 |" in table and "| td3 | Pendulum-v1 | 2 |" in table
    report = json.loads(files["json"].read_text())
    row, _ = report["rows"]
    assert row["final"]["n"] == 2 and row["auc"]["iqm"]["ci_low"] <= row["auc"]["iqm"]["ci_high"]
    assert files["png"].read_bytes()[:4] == b"\x89PNG"


def test_a_killed_sweep_resumes_its_interrupted_trial_when_run_again(tmp_path):
    import os
    import time

    from super_sac.checkpoint import list_checkpoints
    from super_sac.sweep.grid import FINISHED, INTERRUPTED, Grid

    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, str(root / "experiments" / "sweep.py"), "run", "--root", str(tmp_path)]
    cmd += ["--name", "s", "--configs", "sac.gin", "--envs", "Pendulum-v1", "--seeds", "0-1"]
    cmd += ["--steps", "600", "--workers", "1", "--no_report"]
    for binding in SMALL:
        cmd += ["--gin_bindings", binding]
    first, second = Grid.make(["sac.gin"], ["Pendulum-v1"], "0-1").trials(tmp_path / "s")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    # stop the sweep once the first trial has checkpointed at least twice, before it ends
    while time.monotonic() < deadline and proc.poll() is None:
        done = first.state() == FINISHED
        if done or len(list_checkpoints(first.folder)) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None and first.state() == INTERRUPTED, proc.communicate()[0]
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)
    assert first.state() == INTERRUPTED and second.state() != FINISHED
    # the evaluations up to the newest checkpoint, with their wall times: a resumed run keeps
    # them as they are (from the checkpoint), a restarted one would write new ones
    newest = int(list_checkpoints(first.folder)[0].name.removeprefix("ckpt_"))
    before = [
        r for r in _read_csv(first.folder / "evaluations.csv") if int(r["env_steps"]) <= newest
    ]
    assert before
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert first.state() == second.state() == FINISHED
    log = (first.folder / "sweep.log").read_text()
    assert "# attempt 1:" in log and "--resume" in log.split("# attempt 1:")[-1], log
    after = _read_csv(first.folder / "evaluations.csv")
    assert after[: len(before)] == before
    steps = [int(r["env_steps"]) for r in after]
    assert steps == list(range(50, 601, 50))  # every evaluation once, none duplicated
    assert "sac/Pendulum-v1/seed_0: finished (resumed, 1 attempt(s)" in rerun.stdout


FAKE_SCRIPT = """
import json, sys
from pathlib import Path
argv = sys.argv[1:]
folder = Path(argv[argv.index("--run_dir") + 1])
seed = int(argv[argv.index("--seed") + 1])
marker = folder.parent / f"failed_once_{seed}"
if seed == 1 and not marker.exists():  # the first attempt of seed 1 crashes
    marker.write_text("")
    sys.exit("injected failure")
rows = ["env_steps,phase,phase_step,return_mean,return_std,return_min,return_max,length_mean,"
        "wall_seconds"]
rows += [f"{s},online,{s},{s * (seed + 1)},0,0,0,1,0" for s in (10, 20, 30)]
(folder / "evaluations.csv").write_text("\\n".join(rows) + "\\n")
(folder / "summary.json").write_text(json.dumps({"env_steps": 30}))
"""


def test_failed_trials_are_retried_up_to_max_failures(tmp_path):
    import io

    from super_sac.sweep.grid import Grid
    from super_sac.sweep.local import run_local

    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_SCRIPT)
    grid = Grid.make(["sac.gin"], ["Pendulum-v1"], "0-1")
    out = io.StringIO()
    results = run_local(grid, tmp_path / "a", workers=2, script=script, out=out)
    assert [r.status for r in results] == ["finished", "failed"]
    assert "injected failure" in (results[1].trial.folder / "sweep.log").read_text()
    assert "seed_1: failed: exit code 1" in out.getvalue()
    assert results[1].error.startswith("exit code 1 (injected failure), see ")  # the log's cause
    (tmp_path / "a" / "sac" / "Pendulum-v1" / "failed_once_1").unlink()
    results = run_local(grid, tmp_path / "a", script=script, max_failures=1, out=io.StringIO())
    assert [(r.status, r.attempts) for r in results] == [("skipped", 0), ("finished", 2)]

    # a second sweep on a folder that one is running in stops at once
    from super_sac.sweep.local import sweep_lock

    with sweep_lock(tmp_path / "a"):
        with pytest.raises(RuntimeError, match="another sweep is running"):
            run_local(grid, tmp_path / "a", script=script, out=io.StringIO())


def test_report_of_hand_made_curves(tmp_path, capsys):
    import json

    from super_sac.sweep.grid import Grid, write_manifest
    from super_sac.sweep.report import build_report, markdown_table, write_report

    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_SCRIPT.replace("seed == 1 and", "False and"))
    grid = Grid.make(["sac.gin", "td3.gin"], ["Pendulum-v1", "MountainCarContinuous-v0"], "0-3")
    write_manifest(tmp_path / "s", grid)
    for trial in grid.trials(tmp_path / "s")[:-1]:  # the last trial never ran
        trial.folder.mkdir(parents=True)
        argv = ["--run_dir", str(trial.folder), "--seed", str(trial.seed)]
        subprocess.run([sys.executable, str(script), *argv], check=True)
    report = build_report(tmp_path / "s")
    assert report["unfinished_trials"] == ["td3/MountainCarContinuous-v0/seed_3"]
    rows = {(r["config"], r["env"]): r for r in report["rows"]}
    sac = rows[("sac", "Pendulum-v1")]
    # final returns 30 * (seed + 1) = 30, 60, 90, 120; AUC = mean height = 20 * (seed + 1)
    assert sac["final"]["n"] == 4
    assert sac["final"]["mean"]["value"] == pytest.approx(75.0)
    assert sac["final"]["iqm"]["value"] == pytest.approx(75.0)  # (60 + 90) / 2
    assert sac["auc"]["median"]["value"] == pytest.approx(50.0)
    ci = sac["final"]["mean"]
    assert 30 <= ci["ci_low"] < 75 < ci["ci_high"] <= 120
    assert rows[("td3", "MountainCarContinuous-v0")]["final"]["n"] == 3
    # each seed keeps its own score when a trial is missing: 30 * (seed + 1)
    assert rows[("td3", "MountainCarContinuous-v0")]["final_per_seed"] == {
        "0": 30.0,
        "1": 60.0,
        "2": 90.0,
    }
    files = write_report(tmp_path / "s")
    assert "td3/MountainCarContinuous-v0/seed_3" in files["markdown"].read_text()
    assert json.loads(files["json"].read_text()) == json.loads(json.dumps(report))
    assert files["png"].stat().st_size > 1000
    # normalised aggregate over envs: Pendulum with low 0, high 120 -> finals 0.25 .. 1.0
    report = build_report(tmp_path / "s", references={"Pendulum-v1": (0.0, 120.0)})
    agg_sac, _ = report["normalised_aggregate"]
    assert agg_sac["envs"] == ["Pendulum-v1"]
    assert agg_sac["final"]["mean"]["value"] == pytest.approx(75 / 120)
    # the mean of the last 3 evaluations (10, 20, 30 x (seed + 1)), normalised alike
    assert agg_sac["last"]["mean"]["value"] == pytest.approx(50 / 120)
    two = build_report(tmp_path / "s", references={"Pendulum-v1": (0.0, 120.0)}, last=2)
    assert two["normalised_aggregate"][0]["last"]["mean"]["value"] == pytest.approx(62.5 / 120)
    assert "| last-2 mean |" in markdown_table(two).split("Aggregate over envs")[1]
    # td3 ran 4 seeds on Pendulum and 3 on MountainCar: the pooled aggregate says so
    both = {"Pendulum-v1": (0.0, 120.0), "MountainCarContinuous-v0": (0.0, 60.0)}
    pooled = build_report(tmp_path / "s", references=both)
    (note,) = [w for w in pooled["warnings"] if "normalised aggregate" in w]
    assert note.startswith("the normalised aggregate of td3 pools envs with different numbers")
    assert note in markdown_table(pooled)  # the report itself says so
    argv = ["report", str(tmp_path / "s"), "--no_plot"]
    argv += ["--reference", "Pendulum-v1=0:120", "--reference", "MountainCarContinuous-v0=0:60"]
    status, out, err = _sweep_cli(argv, capsys)
    assert status == 0, err
    assert "| sac | MountainCarContinuous-v0, Pendulum-v1 | " in out
    # experiments/plot.py draws a few runs
    runs = [str(t.folder) for t in grid.trials(tmp_path / "s")[:2]]
    png = tmp_path / "two.png"
    assert load_script("experiments/plot.py").main([*runs, "--out", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def _fake_sweep(tmp_path, name, configs, seeds="0-2"):
    """A finished sweep folder made by FAKE_SCRIPT: final returns 30 * (seed + 1)."""
    from super_sac.sweep.grid import Grid, write_manifest

    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_SCRIPT.replace("seed == 1 and", "False and"))
    grid = Grid.make(configs, ["Pendulum-v1"], seeds)
    write_manifest(tmp_path / name, grid)
    for trial in grid.trials(tmp_path / name):
        trial.folder.mkdir(parents=True)
        argv = ["--run_dir", str(trial.folder), "--seed", str(trial.seed)]
        subprocess.run([sys.executable, str(script), *argv], check=True)
    return tmp_path / name


@functools.cache
def _sweep_script():
    return load_script("experiments/sweep.py", name="sweep_cli")


def _sweep_cli(argv, capsys):
    """``experiments/sweep.py ARGV`` run in this process by the script's ``cli`` (what its
    command line runs, less a second interpreter's start-up of about 2 s): ``(exit status,
    stdout, stderr)``, a message returned for ``sys.exit`` counted as status 1 on stderr."""
    capsys.readouterr()
    status = _sweep_script().cli(argv)
    out, err = capsys.readouterr()
    return (1, out, err + status + "\n") if isinstance(status, str) else (status, out, err)


def test_a_report_warns_when_its_sweeps_ran_on_different_machines(tmp_path):
    import json

    from super_sac.sweep.grid import MANIFEST
    from super_sac.sweep.report import processor_mix, write_report

    a = _fake_sweep(tmp_path, "a", ["sac.gin"], seeds="0-1")
    b = _fake_sweep(tmp_path, "b", ["td3.gin"], seeds="0-1")
    assert processor_mix([a, b]) is None  # both manifests hold this machine
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning for one machine
        write_report([a, b], out=tmp_path / "r1", plot=False)
    # b was started on another processor model
    manifest = json.loads((b / MANIFEST).read_text())
    other = {"cpu": "AMD EPYC 9B14", "cpu_family": "25", "cpu_model": "17",
             "cpu_count": 2, "torch_cpu_capability": "AVX512", "gpu": None}  # fmt: skip
    manifest["machine"] = other
    (b / MANIFEST).write_text(json.dumps(manifest))
    message = processor_mix([a, b])
    assert message.startswith("these sweeps ran on 2 processors (")
    assert "AMD EPYC 9B14 (family 25, model 17), AVX512: b" in message
    with pytest.warns(UserWarning, match="a difference between runs of two machines mixes"):
        write_report([a, b], out=tmp_path / "r2", plot=False)
    # a trial that ran (or was resumed) elsewhere counts too, with its sweep's name
    here = json.loads((a / MANIFEST).read_text())["machine"]
    manifest["machine"] = here
    (b / MANIFEST).write_text(json.dumps(manifest))
    assert processor_mix([a, b]) is None
    trial = b / "td3" / "Pendulum-v1" / "seed_1" / "hparams.json"
    trial.write_text(json.dumps({"machine": None, "resume_machines": [None, other]}))
    assert "AMD EPYC 9B14 (family 25, model 17), AVX512: b" in processor_mix([a, b])
    assert processor_mix([a]) is None and processor_mix([b]) is None  # one processor each
    # where trials record their machines, the driver's (a Ray client elsewhere) does not count
    trial.write_text(json.dumps({"machine": {**here, "gpu": "NVIDIA H100", "torch_threads": 1}}))
    manifest["machine"] = other
    (b / MANIFEST).write_text(json.dumps(manifest))
    assert processor_mix([a, b]) is None
    # malformed records are skipped, not fatal (the report ends every sweep run)
    manifest.update(reruns=None, machine={"cpu": 7})
    (b / MANIFEST).write_text(json.dumps(manifest))
    trial.write_text(json.dumps({"machine": 3, "resume_machines": 3}))
    assert "7: b" in processor_mix([a, b])
    assert "7: b" in processor_mix([a, b / "td3" / ".."])  # named by the folder it resolves to


def test_a_kept_hparams_json_lists_where_each_resumed_session_ran(tmp_path):
    import json

    from super_sac.loggers import record_resumed_machine

    path = tmp_path / "hparams.json"
    record_resumed_machine(path, {"cpu": "A"})  # no file: nothing written
    assert not path.exists()
    path.write_text(json.dumps({"seed": 3, "machine": {"cpu": "A"}}))
    record_resumed_machine(path, {"cpu": "B"})
    record_resumed_machine(path, {"cpu": "C"})
    recorded = json.loads(path.read_text())
    assert recorded == {
        "seed": 3,
        "machine": {"cpu": "A"},
        "resume_machines": [{"cpu": "B"}, {"cpu": "C"}],
    }


def test_representation_losses_reports_finished_trials_only(tmp_path, monkeypatch):

    from super_sac.sweep.grid import SUMMARY

    sweep = _fake_sweep(tmp_path, "dr3", ["awac.gin"], seeds="0-1")
    (sweep / "awac" / "Pendulum-v1" / "seed_1" / SUMMARY).unlink()  # still running: a partial curve
    script = _representation_script(monkeypatch)
    rows = script.run_rows(sweep, [], last=2)
    assert [(r["config"], r["seed"]) for r in rows] == [("awac", 0)]
    assert rows[0]["final"] == pytest.approx(30.0)  # FAKE_SCRIPT's curve: 10, 20, 30 x (seed + 1)
    # the report it writes records its settings and checks against the files beside it
    monkeypatch.setattr(script.bench_utils, "RESULTS_DIR", tmp_path / "results")
    result = script.main(["--sweep", str(sweep), "--name", "r", "--last", "2"])
    assert result["last"] == 2 and result["tags"] == []
    assert script.check_folder(tmp_path / "results" / "r") == []
    assert result["rows"][0]["last_mean"] == pytest.approx(25.0)  # (20 + 30) / 2


def _representation_script(monkeypatch):
    return load_script(_RESULTS.parent / "representation_losses.py", monkeypatch=monkeypatch)


def test_every_committed_representation_report_is_what_its_csv_files_say(monkeypatch, capsys):
    """The DR3 and Markov tables quote these reports (representation_losses.py's own form,
    without an evaluations/ folder): each must follow from the series committed beside it."""
    script = _representation_script(monkeypatch)
    reports = sorted(
        p.parent.name
        for p in _RESULTS.glob("*/report.json")
        if any(p.parent.glob("evaluations_*.csv"))
    )
    assert len(reports) >= 5
    for name in reports:
        assert script.check_folder(_RESULTS / name) == [], name
    with pytest.raises(SystemExit) as stop:
        script.main(["--check", *(str(_RESULTS / n) for n in reports)])
    assert stop.value.code == 0 and capsys.readouterr().out.count(": holds") == len(reports)


def test_a_representation_report_check_names_each_number_its_files_do_not_hold(
    tmp_path, monkeypatch
):
    import shutil

    from super_sac.sweep.check import check_report

    script = _representation_script(monkeypatch)
    folder = tmp_path / "dr3"
    shutil.copytree(_RESULTS / "dr3_minatar_breakout", folder)
    # sweep.py check points at the check of this form
    with pytest.raises(FileNotFoundError, match="representation_losses.py --check"):
        check_report(folder)
    # one value of a tag series: the row's series, its end mean and the summary all move
    series = folder / "critic_feature_dot_basic_offline_dr3_seed0.csv"
    lines = series.read_text().splitlines()
    step, value = lines[-1].split(",")
    lines[-1] = f"{step},{float(value) + 1.0}"
    series.write_text("\n".join(lines) + "\n")
    differences = script.check_folder(folder)
    last = len(lines) - 2
    assert any(
        d.startswith(f"rows[basic_offline_dr3 seed 0].tags.critic/feature_dot.values[{last}]: ")
        for d in differences
    ), differences
    assert any(d.startswith("rows[basic_offline_dr3 seed 0].tags.critic/feature_dot.end: ")
               for d in differences)  # fmt: skip
    assert any(d.startswith("summary[1].critic/feature_dot:end.mean: ") for d in differences)
    assert differences[-1] == "report.md does not start with the rendering of report.json"
    # a run the report left out, and a run's evaluations without rows: named
    extra = folder / "evaluations_basic_offline_seed7.csv"
    extra.write_text((folder / "evaluations_basic_offline_seed0.csv").read_text())
    header_only = folder / "evaluations_basic_offline_dr3_seed2.csv"
    header = header_only.read_text().splitlines()[0]
    header_only.write_text(header + "\n")
    differences = script.check_folder(folder)
    assert (
        "evaluations_basic_offline_seed7.csv: in the folder, not in report.json (a run or tag "
        "the report left out)" in differences
    )
    assert (
        "evaluations_basic_offline_dr3_seed2.csv: no evaluations (the rows of basic_offline_dr3 "
        "seed 2 need them)" in differences
    )
    extra.unlink()
    # a run's evaluations gone: named, and nothing rebuilt from a partial set of runs
    (folder / "evaluations_basic_offline_seed1.csv").unlink()
    differences = script.check_folder(folder)
    assert (
        "evaluations_basic_offline_seed1.csv: missing (the rows of basic_offline seed 1 need it)"
        in differences
    )
    assert not any(d.startswith("summary") for d in differences)
    assert not any("not in report.json" in d for d in differences)  # its tag series are its own
    with pytest.raises(SystemExit) as stop:
        script.main(["--check", str(folder)])
    assert stop.value.code == 1
    with pytest.raises(SystemExit):
        script.parse_args(["--check", str(folder), "--sweep", "x"])  # the two modes do not mix
    with pytest.raises(SystemExit):
        script.parse_args(["--check", str(folder), "--last", "5"])  # the report's own is used


def test_a_report_of_two_sweeps_puts_their_configs_side_by_side(tmp_path, capsys):
    import json

    from super_sac.sweep.report import build_report, write_report

    ours = _fake_sweep(tmp_path, "ours", ["sac.gin", "td3.gin"])
    peer = _fake_sweep(tmp_path, "peer", ["peers/sb3_sac.gin"], seeds="0,1,2,3")
    report = build_report([ours, peer], last=2)
    assert [(r["config"], r["final"]["n"]) for r in report["rows"]] == [
        ("sac", 3),
        ("td3", 3),
        ("sb3_sac", 4),
    ]
    sb3 = report["rows"][2]
    # curves 10, 20, 30 times (seed + 1): the last two average to 25 * (seed + 1)
    assert sb3["last"]["mean"]["value"] == pytest.approx(25 * (1 + 2 + 3 + 4) / 4)
    assert sb3["final_per_seed"] == {"0": 30.0, "1": 60.0, "2": 90.0, "3": 120.0}
    with pytest.raises(ValueError, match="needs an output folder"):
        write_report([ours, peer])
    files = write_report([ours, peer], out=tmp_path / "side_by_side", last=2)
    table = files["markdown"].read_text()
    assert "| sb3_sac | Pendulum-v1 | 4 |" in table and "last-2 mean" in table
    assert "| sb3_sac | Pendulum-v1 | 0: 30.0, 1: 60.0, 2: 90.0, 3: 120.0 |" in table
    assert json.loads(files["json"].read_text())["sweeps"] == [str(ours), str(peer)]
    assert files["png"].read_bytes()[:4] == b"\x89PNG"
    # steps to a threshold: curves 10, 20, 30 x (seed + 1) reach 60 at 20 (seed 2), 10 (seed 3)
    firsts = build_report([ours, peer], threshold=60)["rows"][2]
    assert firsts["first_reach"] == {"0": None, "1": 30.0, "2": 20.0, "3": 20.0}
    assert firsts["reached"] == 3
    assert build_report([ours, peer])["warnings"] == []
    # a sweep named twice (by another path too) is read once
    twice = build_report([ours, peer, tmp_path / "." / "peer"])
    assert [r["final"]["n"] for r in twice["rows"]] == [3, 3, 4]
    # sweeps of different step budgets are not comparable: the report says so
    from super_sac.sweep.grid import Grid, write_manifest

    longer = tmp_path / "longer"
    write_manifest(longer, Grid.make(["long.gin"], ["Pendulum-v1"], "0", 60))
    write_manifest(tmp_path / "shorter", Grid.make(["short.gin"], ["Pendulum-v1"], "0", 30))
    (warning,) = build_report([longer, tmp_path / "shorter"])["warnings"]
    assert "different step budgets" in warning and ": 60" in warning and ": 30" in warning
    # the same config name in two sweeps would merge two different things: refused
    with pytest.raises(ValueError, match="'sac' on Pendulum-v1 is in both"):
        build_report([ours, _fake_sweep(tmp_path, "again", ["other/sac.gin"])])
    argv = ["report", str(ours), str(peer), "--out", str(tmp_path / "cli"), "--no_plot"]
    status, out, err = _sweep_cli([*argv, "--threshold", "60"], capsys)
    assert status == 0, err
    assert "| sb3_sac | Pendulum-v1 | 3/4 | 0: -, 1: 30, 2: 20, 3: 20 |" in out
    assert "| sac | Pendulum-v1 | 3 |" in out and (tmp_path / "cli" / "report.md").exists()


def test_a_paired_report_subtracts_the_base_config_seed_by_seed(tmp_path, capsys):
    import shutil

    from super_sac.sweep.report import build_report, markdown_table

    sweep = _fake_sweep(tmp_path, "s", ["sac.gin", "td3.gin"])
    for k, returns in ((0, (10, 20, 20)), (1, (20, 40, 80))):
        rows = [",".join(EVAL_CSV_COLUMNS)]
        rows += [f"{s},online,{s},{r},0,0,0,1,0" for s, r in zip((10, 20, 30), returns)]
        (sweep / "td3" / "Pendulum-v1" / f"seed_{k}" / "evaluations.csv").write_text(
            "\n".join(rows) + "\n"
        )
    shutil.rmtree(sweep / "td3" / "Pendulum-v1" / "seed_2")  # td3 never ran seed 2
    report = build_report(sweep, last=2, threshold=25, paired="sac")
    (row,) = report["paired"]
    assert (row["config"], row["base"], row["env"], row["seeds"]) == (
        "td3",
        "sac",
        "Pendulum-v1",
        ["0", "1"],
    )
    # sac at seed k: 10, 20, 30 x (k + 1); final 30 (k + 1), last-2 mean 25 (k + 1), AUC (the
    # trapezoid's mean height) 20 (k + 1). td3 seed 0 (10, 20, 20): final -10, last-2 20 - 25,
    # AUC (150 + 200) / 20 - 20; seed 1 (20, 40, 80): final +20, last-2 60 - 50, AUC 45 - 40
    assert row["final"]["per_seed"] == {"0": -10.0, "1": 20.0}
    assert row["last"]["per_seed"] == {"0": -5.0, "1": 10.0}
    assert row["auc"]["per_seed"] == pytest.approx({"0": -2.5, "1": 5.0})
    final = row["final"]
    assert final["mean"] == pytest.approx({"value": 5.0, "ci_low": -10.0, "ci_high": 20.0})
    assert (final["n"], final["higher"], final["lower"]) == (2, 1, 1)
    assert row["auc"]["mean"]["value"] == pytest.approx(1.25)
    # first at or above 25: sac at 30 (seed 0) and 20 (seed 1); td3 seed 0 never gets there,
    # so only seed 1 counts (20 - 20)
    assert row["first_reach"]["per_seed"] == {"1": 0.0}
    assert row["first_reach_left_out"] == 1  # and the report says a seed was left out
    table = markdown_table(report)
    assert "Paired by seed against sac" in table
    assert "| td3 | Pendulum-v1 | 0, 1 | +5.0 [-10.0, 20.0] (1 up, 1 down of 2) |" in table
    assert "(0 up, 0 down of 1); 1 left out: only one got there |" in table
    # nowhere near the threshold: no seed to pair, and none left out (neither got there)
    (far,) = build_report(sweep, threshold=1000, paired="sac")["paired"]
    assert far["first_reach"] is None and "first_reach_left_out" not in far
    assert "paired" not in build_report(sweep)
    with pytest.raises(ValueError, match="no finished run of config 'ddpg'.*'sac', 'td3'"):
        build_report(sweep, paired="ddpg")
    argv = ["report", str(sweep), "--no_plot", "--last", "2", "--paired", "td3"]
    status, out, err = _sweep_cli(argv, capsys)
    assert status == 0, err
    assert "| sac | Pendulum-v1 | 0, 1 | -5.0 [-20.0, 10.0] (1 up, 1 down of 2) |" in out
    status, out, err = _sweep_cli([*argv[:-1], "ddpg"], capsys)
    assert status != 0 and "no finished run of config 'ddpg'" in err


def test_a_report_can_carry_every_trials_evaluations(tmp_path, capsys):
    from super_sac.sweep.report import write_report

    ours = _fake_sweep(tmp_path, "ours", ["sac.gin"], seeds="0,1")
    peer = _fake_sweep(tmp_path, "peer", ["peers/sb3_sac.gin"], seeds="2")
    out = tmp_path / "table"
    (out / "evaluations").mkdir(parents=True)
    (out / "evaluations" / "stale_seed9.csv").write_text("from an earlier report\n")
    with pytest.raises(ValueError, match="files this report does not include \\(stale_seed9.csv"):
        write_report([ours, peer], out=out, plot=False, evaluations=True)
    files = write_report(
        [ours, peer], out=out, plot=False, evaluations=True, replace_evaluations=True
    )
    copied = sorted(p.name for p in files["evaluations"].glob("*.csv"))
    assert copied == [
        "sac_Pendulum-v1_seed0.csv",
        "sac_Pendulum-v1_seed1.csv",
        "sb3_sac_Pendulum-v1_seed2.csv",
    ]
    assert sorted(p.name for p in files["evaluations"].iterdir()) == ["index.json", *copied]
    trial = next(p for p in (tmp_path / "ours").rglob("evaluations.csv") if "seed_1" in str(p))
    assert (files["evaluations"] / "sac_Pendulum-v1_seed1.csv").read_bytes() == trial.read_bytes()
    with pytest.raises(ValueError, match="outside the sweep"):
        write_report(ours, plot=False, evaluations=True)
    argv = ["report", str(ours), "--out", str(tmp_path / "cli"), "--no_plot", "--evaluations"]
    status, _, err = _sweep_cli(argv, capsys)
    assert status == 0, err
    assert sorted(p.name for p in (tmp_path / "cli" / "evaluations").glob("*.csv")) == copied[:2]


def test_a_report_is_rebuilt_from_its_copied_evaluations_alone(tmp_path, capsys):
    import json

    from super_sac.sweep.report import write_report

    ours = _fake_sweep(tmp_path, "ours", ["sac.gin", "td3.gin"])
    table = tmp_path / "table"
    write_report(ours, out=table, plot=False, last=2, threshold=60, evaluations=True, paired="sac")
    committed = json.loads((table / "report.json").read_text())
    again = tmp_path / "again"
    argv = ["--archive", str(table), "--no_plot", "--last", "2", "--threshold", "60"]
    status, _, err = _sweep_cli(["report", *argv, "--paired", "sac", "--out", str(again)], capsys)
    assert status == 0, err
    rebuilt = json.loads((again / "report.json").read_text())
    for part in ("rows", "paired"):
        assert rebuilt[part] == committed[part]
    assert rebuilt["sweeps"] == [] and rebuilt["archives"] == [str(table)]
    status, _, err = _sweep_cli(["report", *argv], capsys)
    assert status != 0 and "archives alone, needs an output folder" in err
    status, _, err = _sweep_cli(["report", "--out", str(again)], capsys)
    assert status != 0 and "give a sweep folder or an archive" in err


def test_options_the_chosen_path_would_ignore_are_refused(tmp_path):
    from super_sac.sweep.report import write_report

    sweep_cli = _sweep_script()
    ours = _fake_sweep(tmp_path, "ours", ["sac.gin"], seeds="0")
    with pytest.raises(ValueError, match="--replace_evaluations replaces .* Fix: add --evaluat"):
        sweep_cli.main(["report", str(ours), "--no_plot", "--replace_evaluations"])
    with pytest.raises(ValueError, match="--reference Hopper-v5: no run .*its envs: Pendulum-v1"):
        write_report(ours, plot=False, references={"Hopper-v5": (0.0, 1.0)})
    run = ["run", "--root", str(tmp_path), "--name", "x", "--configs", "sac.gin", "--envs",
           "Pendulum-v1"]  # fmt: skip
    with pytest.raises(ValueError, match="--workers, --gpus apply to the local backend, not"):
        sweep_cli.main([*run, "--backend", "ray", "--workers", "2", "--gpus", "0"])
    with pytest.raises(ValueError, match="--cpus, --gpus_per_trial apply to the ray backend"):
        sweep_cli.main([*run, "--cpus", "2", "--gpus_per_trial", "1"])
    with pytest.raises(ValueError, match="script_args '--seed': the sweep sets --seed"):
        sweep_cli.main([*run, "--script_args", "--seed 3"])
    assert not (tmp_path / "x").exists()


def test_check_names_every_number_a_report_holds_that_its_data_does_not(tmp_path, capsys):
    import json

    from super_sac.sweep.check import check_report
    from super_sac.sweep.report import write_report

    ours = _fake_sweep(tmp_path, "ours", ["sac.gin", "td3.gin"])
    table = tmp_path / "table"
    settings = {"out": table, "plot": False, "last": 2, "threshold": 60, "paired": "sac"}
    write_report(ours, **settings, evaluations=True)
    assert check_report(table) == [
        f"{table / 'curves.png'} is missing: rerun the report without --no_plot"
    ]
    write_report(ours, **{**settings, "plot": True}, evaluations=True)
    assert check_report(table) == []
    cmd = [sys.executable, str(Path(__file__).resolve().parents[1] / "experiments" / "sweep.py")]
    proc = subprocess.run([*cmd, "check", str(table)], capture_output=True, text=True)
    assert proc.returncode == 0 and f"{table}: holds" in proc.stdout
    # td3's seed-1 curve (10, 20, 30 x 2) ends at 61 instead of 60: every score drawn from
    # its final evaluation moves, and the check names each with both values
    csv_path = table / "evaluations" / "td3_Pendulum-v1_seed1.csv"
    rows = csv_path.read_text().splitlines()
    fields = rows[-1].split(",")
    assert fields[3] == "60"
    csv_path.write_text("\n".join([*rows[:-1], ",".join([*fields[:3], "61", *fields[4:]])]))
    differences = check_report(table)
    td3 = "rows[td3 on Pendulum-v1]"
    assert f"{td3}.final_per_seed.1: 60.0 committed, 61.0 rebuilt" in differences
    assert f"{td3}.final.mean.value: 60.0 committed, 60.333333333333336 rebuilt" in differences
    paired = "paired[td3 on Pendulum-v1].final.per_seed.1: 0.0 committed, 1.0 rebuilt"
    assert paired in differences
    assert not any(d.startswith("rows[sac") for d in differences)  # sac's data is unchanged
    # a run the committed report lacks, or a field dropped from it, is named
    extra = table / "evaluations" / "ddpg_Pendulum-v1_seed0.csv"
    extra.write_bytes(csv_path.read_bytes())
    differences = check_report(table)
    assert "rows[ddpg on Pendulum-v1]: in the evaluations, missing from the committed report" in (
        differences
    )
    extra.unlink()
    # in-process from here (the command line's exit status is cli's return value)
    status, out, err = _sweep_cli(["check", str(table)], capsys)
    assert status == 1 and f"{table}: DIFFERS" in out
    assert "1 of 1 reports differ from their data" in err
    # one folder that cannot be checked does not stop the others
    status, out, err = _sweep_cli(["check", str(tmp_path / "ours"), str(table)], capsys)
    assert status == 1
    assert f"{tmp_path / 'ours'}: cannot check: " in out and "has no report.json" in out
    assert f"{table}: DIFFERS" in out and "2 of 2 reports differ" in err
    # the markdown must be the rendering of the json it sits beside
    write_report(ours, **settings, evaluations=True, replace_evaluations=True)
    markdown = table / "report.md"
    markdown.write_text(
        markdown.read_text().replace("| sac | Pendulum-v1 | 3 |", "| sac | x | 3 |")
    )
    assert check_report(table) == [
        f"{markdown} is not the rendering of report.json: regenerate both together"
    ]
    # the recorded settings drive the rebuild: a threshold edited to 25 without rebuilding the
    # rows leaves first_reach computed at 60 (sac's seed 0, 10/20/30, reaches 25 at 30 steps)
    write_report(ours, **settings, evaluations=True, replace_evaluations=True)
    report = json.loads((table / "report.json").read_text())
    report["threshold"] = 25.0
    (table / "report.json").write_text(json.dumps(report))
    differences = check_report(table)
    assert "rows[sac on Pendulum-v1].first_reach.0: None committed, 30.0 rebuilt" in differences
    assert "rows[sac on Pendulum-v1].reached: 2 committed, 3 rebuilt" in differences
    del report["rows"][1]["auc"]
    (table / "report.json").write_text(json.dumps(report))
    differences = check_report(table)
    assert "rows[td3 on Pendulum-v1].auc: missing from the committed report" in differences
    assert "report.json lacks a field its rendering needs (KeyError('auc'))" in differences
    with pytest.raises(FileNotFoundError, match="has no report.json"):
        check_report(tmp_path / "ours" / "sac")


_RESULTS = Path(__file__).resolve().parents[1] / "experiments" / "benchmarks" / "results"


@pytest.mark.parametrize(
    "folder",
    sorted(
        str(p.parent.relative_to(_RESULTS))
        for p in _RESULTS.rglob("report.json")
        if (p.parent / "evaluations").is_dir()
    ),
)
def test_every_committed_report_is_what_its_evaluations_say(folder):
    """The benchmark tables quote these reports; each must follow from the data beside it."""
    from super_sac.sweep.check import check_report

    assert check_report(_RESULTS / folder) == []


def test_solved_paired_counts_first_hits_and_solved_evaluations_by_seed(tmp_path, capsys):
    script = load_script(_RESULTS.parent / "solved_paired.py")
    evaluations = tmp_path / "evaluations"
    evaluations.mkdir()
    curves = {  # evaluations at 1k, 2k, 3k, 4k steps
        ("base", 0): [100, 480, 300, 490],  # first hit 2k, 2 solved, a dip at 3k
        ("base", 1): [100, 200, 300, 475],  # first hit 4k, 1 solved
        ("new", 0): [480, 490, 500, 500],  # first hit 1k, 4 solved
        ("new", 1): [100, 476, 480, 470],  # first hit 2k, 2 solved, a dip at 4k
    }
    for (config, seed), returns in curves.items():
        rows = [f"{1000 * (i + 1)},online,{1000 * (i + 1)},{r}" for i, r in enumerate(returns)]
        lines = ["env_steps,phase,phase_step,return_mean", *rows]
        (evaluations / f"{config}_CartPole-v1_seed{seed}.csv").write_text("\n".join(lines) + "\n")
    runs = script.run_files(tmp_path)
    stats = script.seed_stats(*script.curve(runs, "base", "CartPole-v1", 0), 475.0)
    assert (stats["first"], stats["solved"], stats["final"]) == (2000, 2, 490.0)
    assert stats["dips"] == [(3000, 300.0)]
    assert stats["last3"] == pytest.approx((480 + 300 + 490) / 3)
    assert stats["auc"] == pytest.approx((290 + 390 + 395) / 3)  # trapezoids over 3k steps
    script.main([str(tmp_path), "--base", "base", "--new", "new", "--seeds", "2"])
    out = capsys.readouterr().out
    # first hit: -1000 and -2000; solved: +2 and +1; paired over the two seeds
    assert "first: new - base [-1000.0, -2000.0] mean -1500.0" in out
    assert "solved: new - base [2, 1] mean 1.5" in out
    with pytest.raises(SystemExit, match="is 'nope' a config of this report"):
        script.main([str(tmp_path), "--base", "base", "--new", "nope", "--seeds", "2"])


def test_pooled_paired_pairs_within_each_folder_and_pools_by_folder(tmp_path, capsys):
    from super_sac.sweep.stats import paired_entry, pooled_paired_entry

    script = load_script(_RESULTS.parent / "pooled_paired.py")
    finals = {  # (machine, config, seed): curve 0 -> final over evaluations at 1k and 2k steps
        ("a", "base", 0): 4.0,
        ("a", "new", 0): 6.0,  # +2
        ("a", "base", 1): 8.0,
        ("a", "new", 1): 7.0,  # -1
        ("a", "new", 2): 9.0,  # no base at seed 2: not paired
        ("b", "base", 0): 5.0,
        ("b", "new", 0): 9.0,  # +4
    }
    for (machine, config, seed), final in finals.items():
        folder = tmp_path / machine / "evaluations"
        folder.mkdir(parents=True, exist_ok=True)
        rows = [
            "env_steps,phase,phase_step,return_mean",
            "1000,online,1000,0",
            f"2000,online,2000,{final}",
        ]
        (folder / f"{config}_breakout_seed{seed}.csv").write_text("\n".join(rows) + "\n")
    diffs = script.paired_scores(tmp_path / "a", "base", "new", last=1)
    assert diffs["final"] == {0: 2.0, 1: -1.0} and diffs["last"] == {0: 2.0, 1: -1.0}
    assert diffs["auc"] == {0: pytest.approx(1.0), 1: pytest.approx(-0.5)}  # one trapezoid: final/2
    # one group pooled is paired_entry; several pool every pair and count them all
    one = pooled_paired_entry([{0: 2.0, 1: -1.0}])
    assert one["mean"] == paired_entry({0: 2.0, 1: -1.0})["mean"]
    both = pooled_paired_entry([{0: 2.0, 1: -1.0}, {0: 4.0}])
    assert (both["n"], both["higher"], both["lower"]) == (3, 2, 1)
    assert both["mean"]["value"] == pytest.approx(5.0 / 3)
    # b's one pair is in every resample (resampled within its own group), so the interval runs
    # from a's worst resample (-1, -1) to its best (2, 2), each drawn with probability 1/4
    assert both["mean"]["ci_low"] == pytest.approx((-1.0 - 1.0 + 4.0) / 3)
    assert both["mean"]["ci_high"] == pytest.approx((2.0 + 2.0 + 4.0) / 3)
    script.main([str(tmp_path / "a"), str(tmp_path / "b"), "--base", "base", "--new", "new"])
    out = capsys.readouterr().out
    assert f"| {tmp_path / 'a'} | 0, 1 | +0.5 [" in out
    assert "| pooled, by folder | 3 pairs | +1.7 [0.7, 2.7] (2 up, 1 down of 3) |" in out
    with pytest.raises(SystemExit, match="has no run of 'nope' on breakout"):
        script.main([str(tmp_path / "a"), "--base", "base", "--new", "nope"])
    # --base_folder: the base runs come from another folder, so equal config names pair (a's
    # "new" against b's "new" at their one shared seed: 6 - 9), and the base folder's runs do
    # not leak into the new side (b has no seed 1, so a's seed 1 is not paired)
    across = script.paired_scores(tmp_path / "a", "new", "new", last=1, base_folder=tmp_path / "b")
    assert across["final"] == {0: -3.0} and across["last"] == {0: -3.0}
    assert script.paired_scores(tmp_path / "a", "base", "new", base_folder=tmp_path / "b")[
        "final"
    ] == {0: 1.0}
    script.main(
        [str(tmp_path / "a"), "--base_folder", str(tmp_path / "b"), "--base", "new", "--new", "new"]
    )
    out = capsys.readouterr().out
    assert out.startswith(f"new minus new of {tmp_path / 'b'}, paired by seed")
    assert f"| {tmp_path / 'a'} | 0 | -3.0 [-3.0, -3.0] (0 up, 1 down of 1) |" in out
    with pytest.raises(SystemExit, match=r"b has no run of 'nope' \(it has base, new\)"):
        script.main(
            [
                str(tmp_path / "a"),
                "--base_folder",
                str(tmp_path / "b"),
                "--base",
                "nope",
                "--new",
                "new",
            ]
        )


def _config(tmp_path, name="sac.gin", text="super_sac.batch_size = 256\n"):
    """A real config file (its SHA-256 goes into the manifest: pooling sweeps needs it)."""
    path = tmp_path / "cfg" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return str(path)


def test_more_seeds_join_a_committed_report_whose_sweep_is_gone(tmp_path, capsys):
    import json
    import shutil

    from super_sac.sweep.report import build_report, write_report

    table = tmp_path / "table"
    write_report(
        _fake_sweep(tmp_path, "ours", [_config(tmp_path)], seeds="0,1"),
        out=table,
        plot=False,
        evaluations=True,
    )
    seed0 = (table / "evaluations" / "sac_Pendulum-v1_seed0.csv").read_bytes()
    shutil.rmtree(tmp_path / "ours")  # the sweep folder is gone; the committed report is not
    more = _fake_sweep(tmp_path, "more", [_config(tmp_path)], seeds="2")
    # the report folder is its own archive: read before its evaluations are replaced
    files = write_report(more, out=table, archives=[table], evaluations=True)
    (row,) = build_report(more, archives=[table])["rows"]
    # curves 10, 20, 30 x (seed + 1): finals 30, 60, 90
    assert row["final_per_seed"] == {"0": 30.0, "1": 60.0, "2": 90.0}
    assert row["final"]["mean"]["value"] == pytest.approx(60.0)
    assert files["png"].read_bytes()[:4] == b"\x89PNG"
    assert "| sac | Pendulum-v1 | 3 |" in files["markdown"].read_text()
    assert (table / "evaluations" / "sac_Pendulum-v1_seed0.csv").read_bytes() == seed0
    index = json.loads((table / "evaluations" / "index.json").read_text())["files"]
    assert {k: v for k, v in index["sac_Pendulum-v1_seed2.csv"].items() if k != "identity"} == {
        "config": "sac",
        "env": "Pendulum-v1",
        "seed": 2,
        "from": str(more),
    }
    identity = index["sac_Pendulum-v1_seed2.csv"]["identity"]
    assert identity["script"] == "train_gym.py" and identity["gin_bindings"] == []
    # an archived run keeps the sweep it ran in
    assert index["sac_Pendulum-v1_seed0.csv"]["from"] == str(tmp_path / "ours")
    assert not (table / "evaluations.new").exists() and not (table / "evaluations.old").exists()
    # again: seed 2 is now in the archive and the sweep with the same evaluations, kept once
    (row,) = build_report(more, archives=[table])["rows"]
    assert row["final"]["n"] == 3
    # an archive without index.json (copied before it existed): names are parsed, and the
    # report warns that the runs' settings are unknown
    legacy = tmp_path / "legacy" / "evaluations"
    shutil.copytree(table / "evaluations", legacy)
    (legacy / "index.json").unlink()
    (legacy / "sac_Pendulum-v1_seed2.csv").rename(legacy / "peer_sac_Pendulum-v1_seed2.csv")
    report = build_report(more, archives=[legacy.parent])
    assert [(r["config"], r["final"]["n"]) for r in report["rows"]] == [("sac", 3), ("peer_sac", 1)]
    (warning,) = report["warnings"]
    assert "records no settings for peer_sac, sac" in warning
    # the same run with different evaluations is refused, naming both files
    changed = (legacy / "sac_Pendulum-v1_seed1.csv").read_text().replace(",60,", ",61,")
    (legacy / "sac_Pendulum-v1_seed1.csv").write_text(changed)
    with pytest.raises(ValueError, match="seed 1 has different evaluations in .*table.*legacy"):
        build_report(more, archives=[table, legacy])
    (legacy / "notes.csv").write_text("x\n")
    with pytest.raises(ValueError, match="must be named <config>_<env>_seed<k>.csv"):
        build_report(more, archives=[legacy])
    with pytest.raises(FileNotFoundError, match="has no evaluations/ folder"):
        build_report(more, archives=[tmp_path / "nowhere"])
    # a trial that did not finish but that an archive supplies is not listed as left out
    unfinished = _fake_sweep(tmp_path, "unfinished", [_config(tmp_path)], seeds="0,2")
    (unfinished / "sac" / "Pendulum-v1" / "seed_0" / "summary.json").unlink()
    assert build_report(unfinished)["unfinished_trials"] == ["sac/Pendulum-v1/seed_0"]
    assert build_report(unfinished, archives=[table])["unfinished_trials"] == []
    # the same trial unfinished in two sweeps is listed once
    again = _fake_sweep(tmp_path, "again", [_config(tmp_path)], seeds="0")
    (again / "sac" / "Pendulum-v1" / "seed_0" / "summary.json").unlink()
    assert build_report([unfinished, again])["unfinished_trials"] == ["sac/Pendulum-v1/seed_0"]
    argv = ["report", str(more), "--archive", str(table), "--out", str(tmp_path / "cli")]
    status, out, err = _sweep_cli([*argv, "--no_plot"], capsys)
    assert status == 0, err
    assert "| sac | Pendulum-v1 | 0: 30.0, 1: 60.0, 2: 90.0 |" in out


def test_runs_of_one_sweep_pool_even_without_a_recorded_config_sha(tmp_path):
    from super_sac.sweep.report import build_report, write_report

    ours = _fake_sweep(tmp_path, "ours", ["sac.gin"], seeds="0,1")  # no file: no SHA-256
    write_report(ours, out=tmp_path / "table", plot=False, evaluations=True)
    (row,) = build_report([], archives=[tmp_path / "table"])["rows"]
    assert row["final"]["n"] == 2
    (row,) = build_report(ours, archives=[tmp_path / "table"])["rows"]
    assert row["final"]["n"] == 2
    # but another sweep's file of the same name with no SHA-256 is not vouched for
    with pytest.raises(ValueError, match="no recorded SHA-256 of the config file"):
        build_report(
            _fake_sweep(tmp_path, "again", ["sac.gin"], "2"), archives=[tmp_path / "table"]
        )


def test_an_old_evaluations_folder_is_indexed_from_its_manifests(tmp_path, capsys):
    import json
    import shutil

    from super_sac.sweep.report import build_report, write_report

    config = _config(tmp_path)
    ours = _fake_sweep(tmp_path, "ours", [config], seeds="0,1")
    write_report(ours, out=tmp_path / "table", plot=False, evaluations=True)
    index_file = tmp_path / "table" / "evaluations" / "index.json"
    written = json.loads(index_file.read_text())["files"]
    index_file.unlink()  # as a folder copied before indexes existed
    shutil.copy(ours / "manifest.json", tmp_path / "table" / "manifest_ours.json")
    other = _fake_sweep(tmp_path, "other", ["peer.gin"], seeds="0")
    cmd = ["index", str(tmp_path / "table")]
    cmd += ["--manifest", str(tmp_path / "table" / "manifest_ours.json")]
    status, out, err = _sweep_cli([*cmd, "--manifest", str(other / "manifest.json")], capsys)
    assert status == 0 and "indexed 2 runs" in out, err
    indexed = json.loads(index_file.read_text())["files"]
    assert indexed.keys() == written.keys()
    for name, entry in indexed.items():  # the same settings the copy itself recorded
        assert entry["identity"] == written[name]["identity"]
        assert entry["from"] == "the sweep of manifest_ours.json (indexed afterwards)"
    assert (
        build_report(
            _fake_sweep(tmp_path, "more", [config], seeds="2"), archives=[tmp_path / "table"]
        )["warnings"]
        == []
    )
    status, _, err = _sweep_cli(cmd, capsys)
    assert status != 0 and "index.json exists already" in err
    index_file.unlink()
    status, _, err = _sweep_cli([*cmd[:-2], "--manifest", str(other / "manifest.json")], capsys)
    assert status != 0 and "is in 0 of the manifests" in err


def test_copied_evaluations_are_never_dropped_or_lost(tmp_path):
    import shutil

    from super_sac.sweep.archive import archived_runs
    from super_sac.sweep.report import write_report

    table = tmp_path / "table"
    ours = _fake_sweep(tmp_path, "ours", [_config(tmp_path)], seeds="0,1")
    write_report(ours, out=table, plot=False, evaluations=True)
    report_md = (table / "report.md").read_text()
    more = _fake_sweep(tmp_path, "more", [_config(tmp_path)], seeds="2")
    # a report of the new sweep alone would drop seeds 0 and 1 from the folder: refused, and
    # the old report is left as it was
    with pytest.raises(ValueError, match="sac_Pendulum-v1_seed0.csv, sac_Pendulum-v1_seed1.csv"):
        write_report(more, out=table, plot=False, evaluations=True)
    assert (table / "report.md").read_text() == report_md
    assert len(archived_runs(table)) == 2
    # a copy that died between moving the old folder aside and moving the new one in
    (table / "evaluations").rename(table / "evaluations.old")
    (table / "evaluations.new").mkdir()
    (table / "evaluations.new" / "sac_Pendulum-v1_seed0.csv").write_text("partial\n")
    assert [r.seed for r in archived_runs(table)] == [0, 1]  # moved back, then read
    (table / "evaluations").rename(table / "evaluations.old")
    files = write_report(more, out=table, plot=False, evaluations=True, archives=[table])
    assert sorted(p.name for p in files["evaluations"].glob("*.csv")) == [
        f"sac_Pendulum-v1_seed{k}.csv" for k in range(3)
    ]
    assert not (table / "evaluations.new").exists() and not (table / "evaluations.old").exists()
    # a run of the same name with other evaluations would replace the copy: refused too
    other = _fake_sweep(tmp_path, "other", ["sac.gin"], seeds="0")
    (other / "sac" / "Pendulum-v1" / "seed_0" / "evaluations.csv").write_text(
        (table / "evaluations" / "sac_Pendulum-v1_seed1.csv").read_text()
    )
    with pytest.raises(ValueError, match="other evaluations of runs it does \\(sac_Pendulum"):
        write_report(other, out=table, plot=False, evaluations=True)
    # dropping on purpose
    files = write_report(more, out=table, plot=False, evaluations=True, replace_evaluations=True)
    assert [p.name for p in files["evaluations"].glob("*.csv")] == ["sac_Pendulum-v1_seed2.csv"]
    # two runs whose file names would collide are refused before anything is copied
    shutil.rmtree(table)
    a = _fake_sweep(tmp_path, "a", ["x_y.gin"], seeds="0")
    b = _fake_sweep(tmp_path, "b", ["x.gin"], seeds="0")
    (b / "x" / "Pendulum-v1").rename(b / "x" / "y_Pendulum-v1")
    manifest = (b / "manifest.json").read_text().replace('"Pendulum-v1"', '"y_Pendulum-v1"')
    (b / "manifest.json").write_text(manifest)
    with pytest.raises(ValueError, match="would both be copied to x_y_Pendulum-v1_seed0.csv"):
        write_report([a, b], out=table, plot=False, evaluations=True)
    assert not (table / "evaluations").exists()


def test_a_new_sweep_skips_the_trials_an_archive_holds(tmp_path, capsys):
    import io

    from super_sac.sweep.grid import Grid
    from super_sac.sweep.local import archived_trials, run_local
    from super_sac.sweep.report import write_report

    config = _config(tmp_path)
    first = _fake_sweep(tmp_path, "first", [config], seeds="0,1")
    write_report(first, out=tmp_path / "table", plot=False, evaluations=True)
    script = tmp_path / "fake_train.py"  # written by _fake_sweep
    grid = Grid.make([config], ["Pendulum-v1"], "0-2")
    done = archived_trials(grid, None, [tmp_path / "table"])
    assert done == {("sac", "Pendulum-v1", 0), ("sac", "Pendulum-v1", 1)}
    results = run_local(
        grid, tmp_path / "again", script=script, out=io.StringIO(), done_elsewhere=done
    )
    assert [(r.trial.seed, r.status) for r in results] == [
        (0, "archived"),
        (1, "archived"),
        (2, "finished"),
    ]
    assert not (tmp_path / "again" / "sac" / "Pendulum-v1" / "seed_0").exists()
    # the same config with other gin bindings is another experiment: its archive is refused
    bound = Grid.make([config], ["Pendulum-v1"], "0-2", None, ["Agent.x = 1"])
    with pytest.raises(ValueError, match="other settings than this sweep \\(gin_bindings"):
        archived_trials(bound, None, [tmp_path / "table"])
    cmd = ["run", "--root", str(tmp_path), "--name", "cli", "--configs", config]
    cmd += ["--envs", "Pendulum-v1", "--seeds", "0-2", "--script", str(script), "--no_report"]
    # the archive's runs came from train_gym.py (the default script), this sweep runs another
    status, _, err = _sweep_cli([*cmd, "--archive", str(tmp_path / "table")], capsys)
    assert status != 0 and "script: 'fake_train.py' against 'train_gym.py'" in err
    scripted = Grid.make([config], ["Pendulum-v1"], "0", script=str(script))
    run_local(scripted, tmp_path / "scripted", script=script, out=io.StringIO())
    write_report(tmp_path / "scripted", out=tmp_path / "table2", plot=False, evaluations=True)
    status, _, err = _sweep_cli([*cmd, "--archive", str(tmp_path / "table2")], capsys)
    assert status == 0, err
    assert sorted(p.name for p in (tmp_path / "cli" / "sac" / "Pendulum-v1").iterdir()) == [
        "seed_1",
        "seed_2",
    ]


def test_more_seeds_of_one_config_can_come_from_a_second_sweep(tmp_path):
    from super_sac.sweep.report import build_report

    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "sac.gin").write_text("super_sac.batch_size = 256\n")
    first = _fake_sweep(tmp_path, "first", [str(tmp_path / "cfg" / "sac.gin")], seeds="0,1")
    second = _fake_sweep(tmp_path, "second", [str(tmp_path / "cfg" / "sac.gin")], seeds="2")
    (row,) = build_report([first, second])["rows"]
    assert row["final_per_seed"] == {"0": 30.0, "1": 60.0, "2": 90.0}
    # a file of the same name with other contents is another experiment: refused
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "sac.gin").write_text("super_sac.batch_size = 512\n")
    other = _fake_sweep(tmp_path, "other_sweep", [str(tmp_path / "other" / "sac.gin")], "3")
    with pytest.raises(ValueError, match="'sac' on Pendulum-v1 is in both .*other .*settings_sha"):
        build_report([first, other])
    # one whose file differs in comments only is the same experiment: its seeds pool
    (tmp_path / "commented").mkdir()
    (tmp_path / "commented" / "sac.gin").write_text(
        "# Haarnoja et al. 2018, with a smaller batch\nsuper_sac.batch_size = 256  # halved\n"
    )
    commented = _fake_sweep(
        tmp_path, "commented_sweep", [str(tmp_path / "commented" / "sac.gin")], "3"
    )
    (row,) = build_report([first, commented])["rows"]
    assert row["final_per_seed"] == {"0": 30.0, "1": 60.0, "3": 120.0}
    # so is the same file run with other gin bindings (or script arguments, or steps)
    from super_sac.sweep.grid import Grid, write_manifest

    bound = tmp_path / "bound"
    config = str(tmp_path / "cfg" / "sac.gin")
    write_manifest(bound, Grid.make([config], ["Pendulum-v1"], "5", None, ["Agent.x = 1"]))
    with pytest.raises(ValueError, match=r"other settings \(gin_bindings: \[\] against"):
        build_report([first, bound])
    # an archived run carries its settings, and is held to them too
    from super_sac.sweep.report import write_report

    write_report([first, second], out=tmp_path / "table", plot=False, evaluations=True)
    with pytest.raises(ValueError, match="'sac' on Pendulum-v1 is in both .*bound.* and .*table"):
        build_report(bound, archives=[tmp_path / "table"])
    (row,) = build_report(second, archives=[tmp_path / "table"])["rows"]
    assert row["final"]["n"] == 3


def test_run_dir_is_the_exact_run_folder_and_is_never_reused(tmp_path):
    from super_sac.loggers import claim_run_dir

    folder = tmp_path / "study" / "sac" / "Pendulum-v1" / "seed_0"
    assert claim_run_dir(folder) == folder and folder.is_dir()
    (folder / "sweep.log").write_text("an earlier attempt\n")  # files of no run are fine
    assert claim_run_dir(folder) == folder
    (folder / "checkpoints").mkdir()
    with pytest.raises(FileExistsError, match="already holds a run.*no checkpoint to resume"):
        claim_run_dir(folder)  # an empty checkpoints folder: nothing to resume
    (folder / "checkpoints" / "ckpt_10").mkdir()
    with pytest.raises(FileExistsError, match=r"already holds a run.*resume it \(--resume"):
        claim_run_dir(folder)


def test_curves_keep_the_online_evaluations_of_runs_with_offline_phases(tmp_path):
    from super_sac.sweep.runs import read_curve

    header = ",".join(EVAL_CSV_COLUMNS)
    rows = ["0,bc,100,1,0,0,0,1,0", "0,offline,200,2,0,0,0,1,0", "50,online,50,3,0,0,0,1,0"]
    (tmp_path / "evaluations.csv").write_text("\n".join([header, *rows]) + "\n")
    steps, values = read_curve(tmp_path)
    assert steps.tolist() == [50.0] and values.tolist() == [3.0]
    assert read_curve(tmp_path / "nowhere")[0].size == 0
    # offline-only runs: against gradient steps, the offline phase after the BC phase's 200
    rows = ["0,bc,100,1,0,0,0,1,0", "0,bc,200,2,0,0,0,1,0", "0,offline,150,3,0,0,0,1,0",
            "0,offline,300,4,0,0,0,1,0"]  # fmt: skip
    (tmp_path / "evaluations.csv").write_text("\n".join([header, *rows]) + "\n")
    steps, values = read_curve(tmp_path)
    assert steps.tolist() == [100.0, 200.0, 350.0, 500.0] and values.tolist() == [1, 2, 3, 4]


# ----------------------------------------------------------------------------- ray backend
FLAKY_SCRIPT = """
import runpy, sys
from pathlib import Path
argv = sys.argv[1:]
if "--seed" in argv and argv[argv.index("--seed") + 1] == "1":
    marker = Path(argv[argv.index("--run_dir") + 1]).parent / "failed_once"
    if not marker.exists():  # the first attempt of seed 1 crashes
        marker.write_text("")
        sys.exit("injected failure")
sys.argv = [{train!r}, *argv]
runpy.run_path({train!r}, run_name="__main__")
"""


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("ray") is None,
    reason='Ray is not installed (pip install "super_sac[sweep]")',
)
def test_ray_sweep_recovers_an_injected_trial_failure(tmp_path):
    import io

    from super_sac.sweep.grid import FINISHED, Grid
    from super_sac.sweep.ray_backend import run_ray

    root = Path(__file__).resolve().parents[1]
    train = str(root / "experiments" / "gym" / "train_gym.py")
    script = tmp_path / "flaky_train.py"
    script.write_text(FLAKY_SCRIPT.format(train=train))
    grid = Grid.make(["sac.gin"], ["Pendulum-v1"], "0-1", steps=150, gin_bindings=SMALL)
    out = io.StringIO()
    results = run_ray(grid, tmp_path / "study", script, num_cpus=2, max_failures=1, out=out)
    assert [r.status for r in results] == ["finished", "finished"], out.getvalue()
    first, second = grid.trials(tmp_path / "study")
    assert "injected failure" in (second.folder / "sweep.log").read_text()
    assert [r.attempts for r in results] == [1, 2]
    for trial in (first, second):
        assert trial.state() == FINISHED
        rows = _read_csv(trial.folder / "evaluations.csv")
        assert [int(r["env_steps"]) for r in rows] == [50, 100, 150]
    assert not (tmp_path / "study" / ".ray").exists()
    # run again: both trials are finished, nothing is handed to Ray
    again = run_ray(grid, tmp_path / "study", script, num_cpus=2, out=io.StringIO())
    assert [r.status for r in again] == ["skipped", "skipped"]


def test_manifest_refuses_a_config_file_whose_contents_changed(tmp_path):
    from super_sac.sweep.grid import Grid, GridMismatchError, config_digests, write_manifest

    config = tmp_path / "mine.gin"
    config.write_text("super_sac.batch_size = 64\n")
    grid = Grid.make([str(config)], ["Pendulum-v1"], "0")
    manifest = write_manifest(tmp_path / "s", grid)
    import hashlib

    assert manifest["config_sha256"] == {
        str(config): hashlib.sha256(config.read_bytes()).hexdigest()
    }
    write_manifest(tmp_path / "s", grid)  # unchanged: a rerun
    config.write_text("super_sac.batch_size = 128\n")
    with pytest.raises(GridMismatchError, match="mine.gin: its contents changed"):
        write_manifest(tmp_path / "s", grid)
    # a bare name is the file next to the training script, as the scripts look it up
    script = Path(__file__).resolve().parents[1] / "experiments" / "gym" / "train_gym.py"
    bare = Grid.make(["sac.gin", "no_such.gin"], ["Pendulum-v1"], "0")
    digests = config_digests(bare, script)
    expected = hashlib.sha256((script.parent / "sac.gin").read_bytes()).hexdigest()
    assert digests == {"sac.gin": expected, "no_such.gin": None}


def test_manifest_names_the_files_its_commit_does_not_pin_and_the_scripts_digest(tmp_path):
    import hashlib
    import shutil

    from super_sac.sweep.grid import Grid, code_version, grid_files, write_manifest

    root = Path(__file__).resolve().parents[1]
    if code_version()["git_commit"] is None:
        pytest.skip("needs the repository's git checkout")
    script = root / "experiments" / "gym" / "train_gym.py"
    mine = tmp_path / "mine.gin"  # outside the repository: the commit does not hold it
    mine.write_text("include 'sac.gin'\nsuper_sac.batch_size = 64\n")
    grid = Grid.make(["sac.gin", str(mine)], ["Pendulum-v1"], "0", script=str(script))
    base = root / "experiments" / "gym" / "base.gin"
    assert grid_files(grid) == [script, script.parent / "sac.gin", base, mine]
    manifest = write_manifest(tmp_path / "s", grid)
    assert manifest["code"]["not_in_commit"] == [str(mine)]
    assert manifest["script_sha256"] == hashlib.sha256(script.read_bytes()).hexdigest()
    # an untracked script inside the checkout is named too, and a rerun records its own list
    copy = root / "experiments" / "gym" / f"_untracked_{tmp_path.name}.py"
    shutil.copyfile(script, copy)
    try:
        rerun = write_manifest(tmp_path / "t", Grid.make(["sac.gin"], ["Pendulum-v1"], "0"), copy)
        assert rerun["code"]["not_in_commit"] == [str(copy)]
    finally:
        copy.unlink()
    rerun = write_manifest(tmp_path / "s", grid)["reruns"][-1]
    assert rerun["code"]["not_in_commit"] == [str(mine)] and "script_sha256" in rerun
    assert rerun["code"]["changed_since_commit"] == []
    # a tracked file edited since the commit is named as changed (the edit is undone at once)
    original = base.read_bytes()
    try:
        base.write_bytes(original + b"\n# an edit\n")
        code = write_manifest(tmp_path / "s", grid)["reruns"][-1]["code"]
    finally:
        base.write_bytes(original)
    assert code["changed_since_commit"] == [str(base)] and code["git_dirty"] is True


def test_manifest_refuses_a_changed_include_and_names_it(tmp_path):
    import hashlib
    import json

    from super_sac.sweep.grid import Grid, GridMismatchError, included_files, write_manifest

    (tmp_path / "base").mkdir()
    base = tmp_path / "base" / "base.gin"
    base.write_text("super_sac.gamma = 0.99\n")
    mid = tmp_path / "mid.gin"
    mid.write_text("include 'base/base.gin'  # the shared settings\nsuper_sac.n_step = 3\n")
    top = tmp_path / "top.gin"
    top.write_text('include "mid.gin"\n# include "not_read.gin"\nsuper_sac.batch_size = 64\n')
    # transitive, in gin's reading order; a commented-out include is not one
    assert included_files(top) == {"mid.gin": mid.resolve(), "base/base.gin": base.resolve()}
    grid = Grid.make([str(top)], ["Pendulum-v1"], "0")
    manifest = write_manifest(tmp_path / "s", grid)
    assert manifest["include_sha256"] == {
        str(top): {
            "mid.gin": hashlib.sha256(mid.read_bytes()).hexdigest(),
            "base/base.gin": hashlib.sha256(base.read_bytes()).hexdigest(),
        }
    }
    write_manifest(tmp_path / "s", grid)  # unchanged: a rerun
    base.write_text("super_sac.gamma = 0.9\n")  # top.gin itself is unchanged
    with pytest.raises(GridMismatchError, match="top.gin: its include base/base.gin changed"):
        write_manifest(tmp_path / "s", grid)
    # gin looks includes up under the config's folder first, not next to the including file
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "mid.gin").write_text("include 'shared.gin'\n")
    (tmp_path / "sub" / "shared.gin").write_text("super_sac.gamma = 0.5\n")
    (tmp_path / "shared.gin").write_text("super_sac.gamma = 0.9\n")
    other = tmp_path / "other.gin"
    other.write_text("include r'sub/mid.gin'\ninclude 'gone.gin'\n")
    assert included_files(other) == {
        "sub/mid.gin": (tmp_path / "sub" / "mid.gin").resolve(),
        "shared.gin": (tmp_path / "shared.gin").resolve(),
        "gone.gin (not found)": None,
    }
    # a manifest from before includes were recorded checks only the top-level files
    path = tmp_path / "s" / "manifest.json"
    old = json.loads(path.read_text())
    del old["include_sha256"], old["settings_sha256"]
    path.write_text(json.dumps(old))
    again = write_manifest(tmp_path / "s", grid)
    assert "include_sha256" not in again and "settings_sha256" not in again


def test_manifest_lets_comments_change_between_sessions_but_not_settings(tmp_path):
    import json

    from super_sac.sweep.grid import Grid, GridMismatchError, settings_digests, write_manifest
    from super_sac.utils import sha256_file

    base = tmp_path / "base.gin"
    base.write_text("super_sac.gamma = 0.99\n")
    top = tmp_path / "top.gin"
    top.write_text("include 'base.gin'\nsuper_sac.batch_size = 64\n")
    grid = Grid.make([str(top)], ["Pendulum-v1"], "0")
    first = write_manifest(tmp_path / "s", grid)
    assert first["settings_sha256"] == settings_digests(grid)
    # the same bytes are the same sweep, even where the digest was computed otherwise (a
    # manifest written under another Python): it is kept as recorded
    path = tmp_path / "s" / "manifest.json"
    path.write_text(json.dumps(dict(first, settings_sha256={str(top): "0" * 64})))
    assert write_manifest(tmp_path / "s", grid)["settings_sha256"] == {str(top): "0" * 64}
    path.write_text(json.dumps(first))
    # the README's reading, added as comments to both files, is no change of settings
    top.write_text("# seeds 0-2: 68.9\ninclude 'base.gin'\nsuper_sac.batch_size = 64  # small\n")
    base.write_text("super_sac.gamma = 0.99  # the usual\n")
    rerun = write_manifest(tmp_path / "s", grid)
    assert rerun["config_sha256"] == first["config_sha256"]  # what the sweep started with
    assert rerun["reruns"][-1]["config_sha256"] == {str(top): sha256_file(top)}  # what this read
    assert rerun["reruns"][-1]["include_sha256"] == {str(top): {"base.gin": sha256_file(base)}}
    base.write_text("super_sac.gamma = 0.9  # the usual\n")
    with pytest.raises(GridMismatchError, match="top.gin: its settings or its includes' changed"):
        write_manifest(tmp_path / "s", grid)
    # a manifest from before settings digests holds a rerun to the files' bytes ...
    base.write_text("super_sac.gamma = 0.99\n")
    top.write_text("include 'base.gin'\nsuper_sac.batch_size = 64\n")
    old = json.loads(path.read_text())
    del old["settings_sha256"]
    path.write_text(json.dumps(old))
    top.write_text("include 'base.gin'\nsuper_sac.batch_size = 64  # small\n")
    with pytest.raises(GridMismatchError, match="top.gin: its contents changed"):
        write_manifest(tmp_path / "s", grid)
    assert "settings_sha256" not in json.loads(path.read_text())
    # ... and gains the digests on a rerun with the very same bytes
    top.write_text("include 'base.gin'\nsuper_sac.batch_size = 64\n")
    assert write_manifest(tmp_path / "s", grid)["settings_sha256"] == first["settings_sha256"]


def test_progress_counts_running_trials_by_their_newest_evaluation(tmp_path):
    import io

    from super_sac.sweep.grid import Grid
    from super_sac.sweep.local import Progress, TrialResult, trial_fraction

    grid = Grid.make(["sac.gin"], ["Pendulum-v1"], "0-3", steps=200)
    trials = grid.trials(tmp_path)
    running = trials[1]
    running.folder.mkdir(parents=True)
    header = "env_steps,phase,phase_step,return_mean\n"
    (running.folder / "evaluations.csv").write_text(header + "50,online,50,-1\n100,online,100,-1\n")
    assert trial_fraction(running, 200) == 0.5
    assert trial_fraction(running, None) == 0.0
    assert trial_fraction(trials[2], 200) == 0.0  # no evaluation yet
    out = io.StringIO()
    progress = Progress(4, already=1, out=out, steps=200, interval=0)
    progress.started(running)
    # 1 done + half of one running = 1.5 of 4 trials: 7 of 20 bar cells, no ETA from this run
    # until it has made progress of its own (0.5 trials here, so an ETA appears)
    line = progress.line()
    assert line.startswith("[" + "#" * 7 + "." * 13 + "] 1/4 done, 1 running, 0 failed, ETA ")
    # a trial that has evaluated its last step still writes its summary: the bar is not full
    last = Progress(1, already=0, out=out, steps=100, interval=0)
    last.started(running)
    assert last.line().startswith("[" + "#" * 19 + "." + "] 0/1 done, 1 running")
    progress.finished(TrialResult(trials[1], "failed", attempts=1, error="exit code 1"))
    assert "seed_1: failed: exit code 1 (1 attempt(s), 0s) [" in out.getvalue()
    assert "1/4 done, 0 running, 1 failed" in out.getvalue()


DEVICE_SCRIPT = """
import json, os, sys
from pathlib import Path
argv = sys.argv[1:]
folder = Path(argv[argv.index("--run_dir") + 1])
(folder / "device.txt").write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))
(folder / "summary.json").write_text("{}")
"""


def test_local_sweep_places_trials_on_devices_round_robin(tmp_path):
    import io

    from super_sac.sweep.grid import Grid
    from super_sac.sweep.local import run_local

    script = tmp_path / "device_train.py"
    script.write_text(DEVICE_SCRIPT)
    grid = Grid.make(["sac.gin"], ["Pendulum-v1"], "0-3")
    results = run_local(
        grid, tmp_path / "s", workers=2, script=script, out=io.StringIO(), devices=["3", "5"]
    )
    devices = [(r.trial.folder / "device.txt").read_text() for r in results]
    assert set(devices) == {"3", "5"} and devices[:2] == ["3", "5"]
    results = run_local(grid, tmp_path / "t", script=script, out=io.StringIO())
    import os

    expected = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
    assert {(r.trial.folder / "device.txt").read_text() for r in results} == {expected}


SLEEP_SCRIPT = """
import os, sys, time
from pathlib import Path
argv = sys.argv[1:]
folder = Path(argv[argv.index("--run_dir") + 1])
(folder / "pid").write_text(str(os.getpid()))
time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_trials_die_with_a_killed_sweep(tmp_path):
    import os
    import time

    script = tmp_path / "sleep_train.py"
    script.write_text(SLEEP_SCRIPT)
    code = (
        "import sys; from super_sac.sweep.grid import Grid; "
        "from super_sac.sweep.local import run_local; "
        f"run_local(Grid.make(['sac.gin'], ['Pendulum-v1'], '0'), {str(tmp_path / 's')!r}, "
        f"script={str(script)!r})"
    )
    sweep = subprocess.Popen([sys.executable, "-c", code])
    pid_file = tmp_path / "s" / "sac" / "Pendulum-v1" / "seed_0" / "pid"
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.2)
    child = int(pid_file.read_text())
    sweep.send_signal(signal.SIGKILL)  # no handler runs: only the kernel can stop the trial
    sweep.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the trial outlived its killed sweep")


STOPPABLE_SCRIPT = """
import json, sys, time
from pathlib import Path
argv = sys.argv[1:]
folder = Path(argv[argv.index("--run_dir") + 1])
seed = int(argv[argv.index("--seed") + 1])
marker = folder.parent / "started_once"
if seed == 1 and not marker.exists():  # the sweep is stopped while this attempt runs
    marker.write_text("")
    time.sleep(600)  # far beyond the wait below, so only the stop ends it
    sys.exit("should have been stopped")
(folder / "summary.json").write_text(json.dumps({"env_steps": 30}))
"""


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("ray") is None,
    reason='Ray is not installed (pip install "super_sac[sweep]")',
)
def test_ray_sweep_stopped_part_way_restores_its_tune_experiment(tmp_path):
    import time

    script = tmp_path / "stoppable_train.py"
    script.write_text(STOPPABLE_SCRIPT)
    code = (
        "from super_sac.sweep.grid import Grid; from super_sac.sweep.ray_backend import run_ray; "
        f"r = run_ray(Grid.make(['sac.gin'], ['Pendulum-v1'], '0-1'), {str(tmp_path / 's')!r}, "
        f"{str(script)!r}, num_cpus=2); print([x.status for x in r])"
    )
    sweep = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    folder = tmp_path / "s" / "sac" / "Pendulum-v1"
    deadline = time.monotonic() + 300  # Ray's workers start slowly on a loaded machine
    while time.monotonic() < deadline and not (
        (folder / "started_once").exists() and (folder / "seed_0" / "summary.json").exists()
    ):
        time.sleep(0.2)
    seed_0_finished = (folder / "seed_0" / "summary.json").exists()
    time.sleep(2)  # let Tune record the finished trial in its experiment state
    sweep.send_signal(signal.SIGINT)  # Tune stops the experiment and keeps its state
    out, _ = sweep.communicate(timeout=120)
    # the premise, apart from what is tested: a machine too busy for Ray to finish one tiny
    # trial in 300 s says so here rather than as a wrong status list below
    assert seed_0_finished, (
        f"seed 0 did not finish within 300 s, so nothing was stopped part way:\n{out}"
    )
    assert "['finished', 'stopped']" in out
    assert (tmp_path / "s" / ".ray" / "tune").is_dir()
    assert not (folder / "seed_1" / "summary.json").exists()
    rerun = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert "['skipped', 'finished']" in rerun.stdout, rerun.stdout + rerun.stderr
    # the restored Tune experiment holds both trials (a new one would hold only seed 1)
    assert "Number of trials                 2" in rerun.stdout
    assert (folder / "seed_0" / "sweep.log").read_text().count("# attempt") == 1  # not rerun
    assert (folder / "seed_1" / "sweep.log").read_text().count("# attempt") == 2
    assert not (tmp_path / "s" / ".ray").exists()


def test_script_args_reach_every_trial_and_the_manifest(tmp_path):
    from super_sac.sweep.grid import Grid, GridMismatchError, write_manifest
    from super_sac.sweep.local import trial_argv

    extra = ["--action_repeat", "8", "--fast_render"]
    grid = Grid.make(["drqv2.gin"], ["cartpole-swingup"], "0", steps=10, script_args=extra)
    trial = grid.trials(tmp_path)[0]
    argv = trial_argv(grid, trial, threads=1)
    assert argv[-2:] == ["--threads", "1"] and argv[-5:-2] == extra
    assert argv[:4] == ["--config", "drqv2.gin", "--env", "cartpole-swingup"]
    assert Grid.from_json(grid.to_json()) == grid
    write_manifest(tmp_path, grid)
    with pytest.raises(GridMismatchError, match="script_args"):
        write_manifest(tmp_path, Grid.make(["drqv2.gin"], ["cartpole-swingup"], "0", steps=10))
    # options the sweep sets per trial would override it (the script keeps the last value):
    # refused when a sweep is created; an existing manifest holding one still loads
    from super_sac.sweep.grid import check_script_args

    for arg, fix in [("--seed", "--seeds"), ("--run_dir=/x", "--root and --name"),
                     ("--threads", "--cpus_per_trial"), ("--game", "--envs")]:  # fmt: skip
        with pytest.raises(ValueError, match=f"sweep sets {arg.split('=')[0]} .*Fix: use {fix}"):
            check_script_args([arg, "3"])
    # argparse takes a unique prefix of an option as the option itself
    with pytest.raises(ValueError, match=r"--see \(argparse reads it as --seed\).*--seeds"):
        check_script_args(["--fast_render", "--see", "3"])
    with pytest.raises(ValueError, match=r"'--run_d=x'.*--run_d \(argparse reads it as --run_dir"):
        check_script_args(["--run_d=x"])
    check_script_args(["--fast_render", "--action_repeat", "8", "-v"])  # options it does not set
    old = Grid.make(["drqv2.gin"], ["cartpole-swingup"], "0-1", script_args=["--threads", "2"])
    assert Grid.from_json(old.to_json()) == old


ORDER_SCRIPT = """
import json, sys
from pathlib import Path
argv = sys.argv[1:]
folder = Path(argv[argv.index("--run_dir") + 1])
with open(folder.parents[2] / "started.txt", "a") as f:  # <sweep>/<config>/<env>/seed_<n>
    f.write(f"{folder.parents[1].name}/{folder.name}\\n")
(folder / "summary.json").write_text(json.dumps({"env_steps": 1}))
"""


def test_seed_order_starts_every_config_at_a_seed_before_the_next_seed(tmp_path):
    import io

    from super_sac.sweep.grid import Grid
    from super_sac.sweep.local import run_local

    script = tmp_path / "order_train.py"
    script.write_text(ORDER_SCRIPT)
    grid = Grid.make(["sac.gin", "td3.gin"], ["Pendulum-v1"], "0-2")
    sweep = tmp_path / "s"
    done = sweep / "sac" / "Pendulum-v1" / "seed_0"
    done.mkdir(parents=True)
    (done / "summary.json").write_text("{}")  # finished before: skipped, not restarted
    results = run_local(grid, sweep, script=script, out=io.StringIO(), order="seed")
    started = (sweep / "started.txt").read_text().split()
    assert started == ["td3/seed_0", "sac/seed_1", "td3/seed_1", "sac/seed_2", "td3/seed_2"]
    # results stay in grid order (config-major), whatever order the trials ran in
    assert [(r.trial.config, r.trial.seed) for r in results] == [
        (c, s) for c in ("sac.gin", "td3.gin") for s in (0, 1, 2)
    ]
    assert [r.status for r in results][:1] == ["skipped"]

    (sweep / "started.txt").unlink()
    run_local(grid, tmp_path / "c", script=script, out=io.StringIO())  # default: config-major
    assert (tmp_path / "c" / "started.txt").read_text().split() == [
        f"{c}/seed_{s}" for c in ("sac", "td3") for s in (0, 1, 2)
    ]
    with pytest.raises(ValueError, match="order must be one of"):
        run_local(grid, tmp_path / "d", script=script, out=io.StringIO(), order="env")

    # a time-boxed slice: two trials in seed order, then the next two, then the rest
    for k, expected in enumerate((["sac/seed_0", "td3/seed_0"], ["sac/seed_1", "td3/seed_1"])):
        out = io.StringIO()
        results = run_local(
            grid, tmp_path / "e", script=script, out=out, order="seed", max_trials=2
        )
        started = (tmp_path / "e" / "started.txt").read_text().split()
        assert started[-2:] == expected and len(started) == 2 * (k + 1)
        # the status counts the grid: the trials left for later are not "done"
        assert f"{2 * (k + 1)}/6 done" in out.getvalue() and "6/6 done" not in out.getvalue()
    assert [r.status for r in results] == ["skipped", "finished", "skipped", "finished"]
    results = run_local(grid, tmp_path / "e", script=script, out=io.StringIO(), max_trials=9)
    assert [r.status for r in results].count("finished") == 2 and len(results) == 6
    with pytest.raises(ValueError, match="max_trials must be at least 1"):
        run_local(grid, tmp_path / "e", script=script, out=io.StringIO(), max_trials=0)


def test_seed_order_with_the_ray_backend_is_refused_with_the_reason(tmp_path):
    script = Path(__file__).resolve().parents[1] / "experiments" / "sweep.py"
    run = ["run", "--root", str(tmp_path), "--name", "r", "--configs", "sac.gin"]
    run += ["--envs", "Pendulum-v1", "--backend", "ray"]
    reason = "--order seed and --max_trials apply to the local backend"
    # from the command line: exit status 1 and the reason on stderr
    cmd = [sys.executable, str(script), *run, "--order", "seed"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and reason in proc.stderr
    assert not (tmp_path / "r").exists()  # refused before anything was written
    # the other option, in-process (the same check, without a second interpreter's start-up)
    with pytest.raises(ValueError, match=reason):
        _sweep_script().main([*run, "--max_trials", "2"])
    assert not (tmp_path / "r").exists()


def test_a_sliced_sweep_says_how_many_trials_are_left(tmp_path, capsys):
    script = tmp_path / "order_train.py"
    script.write_text(ORDER_SCRIPT)
    cmd = ["run", "--root", str(tmp_path), "--name", "s", "--configs", "sac.gin", "td3.gin"]
    cmd += ["--envs", "Pendulum-v1", "--seeds", "0-1", "--script", str(script), "--no_report"]
    status, out, err = _sweep_cli([*cmd, "--max_trials", "3"], capsys)
    assert status == 0, err
    assert "1 trial(s) not started (--max_trials)" in out
    status, out, err = _sweep_cli([*cmd, "--max_trials", "3"], capsys)
    assert status == 0 and "not started" not in out
    assert len((tmp_path / "s" / "started.txt").read_text().split()) == 4


def test_offline_table_scores_the_last_evaluations_of_every_seed(tmp_path, capsys):
    """experiments/benchmarks/offline_table.py: each seed's mean of its last k evaluations,
    normalised, and the mean over seeds with a bootstrap interval inside the seeds' range (none
    for a single seed)."""
    folder = tmp_path / "report" / "evaluations"
    folder.mkdir(parents=True)
    header = "env_steps,phase,phase_step,return_mean,return_std,return_min,return_max,"
    header += "length_mean,wall_seconds"
    for config, seed, returns in (
        ("crr", 0, [10, 20, 30, 40, 50, 60]),  # last 5: 40 -> normalised (40 + 100) / 200 = 70
        ("crr", 1, [0, 0, 0, 100, 100, 100]),  # last 5: 60 -> 80
        ("d3rlpy_iql", 1, [-100, -100]),  # 0
    ):
        rows = [header] + [f"0,offline,{5 * k},{r},0,0,0,1,0" for k, r in enumerate(returns)]
        (folder / f"{config}_HalfCheetah-v5_seed{seed}.csv").write_text("\n".join(rows) + "\n")
    extra = tmp_path / "extra" / "evaluations"
    extra.mkdir(parents=True)
    for config in ("crr", "d3rlpy_iql"):
        (extra / f"{config}_HalfCheetah-v5_seed0.csv").write_text(
            f"{header}\n0,offline,0,0,0,0,0,1,0\n"
        )
    script = load_script(_RESULTS.parent / "offline_table.py")  # in-process: no torch start-up
    argv = [str(tmp_path / "report"), "--title", "toy"]
    script.main([*argv, "--reference=-100:100", "--extra", f"unscaled={tmp_path / 'extra'}"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| toy | seed 0 | seed 1 | mean [95% CI] | unscaled |"
    crr = lines[2].split(" | ")
    assert crr[:3] == ["| ours CRR-style AFBC", "70.0", "80.0"]
    low_high = crr[3].split(" [")[1].rstrip("]").split(", ")
    assert crr[3].startswith("75.0 [") and 70.0 <= float(low_high[0]) <= float(low_high[1]) <= 80
    assert crr[4] == "50.0 |"  # seed 0 of the extra folder: return 0 -> 50
    # the peer has no seed 0 here, so its one seed gets no interval; the extra column is left
    # blank for peers
    assert lines[3] == "| d3rlpy IQL | - | 0.0 | 0.0 |  |"
    # --from_step: the mean of the evaluations at that phase step or later (here 10, 15, 20, 25)
    argv = [str(tmp_path / "report"), "--reference=-100:100"]
    with pytest.raises(SystemExit, match="d3rlpy_iql seed 1 has no evaluation at that phase step"):
        script.main([*argv, "--from_step", "10"])  # the peer's run ends at step 5
    (folder / "d3rlpy_iql_HalfCheetah-v5_seed1.csv").unlink()
    capsys.readouterr()
    script.main([*argv, "--from_step", "10"])
    crr = capsys.readouterr().out.splitlines()[2].split(" | ")
    assert crr[1:3] == ["72.5", "87.5"]  # (45 + 100) / 2 and (75 + 100) / 2
    # --paired: crr minus the extra folder's crr at the seeds both have (seed 0: 70 - 50), and
    # minus another config named after a colon
    extra = tmp_path / "extra"
    script.main([*argv, "--paired", str(extra), "--paired", f"{extra}:d3rlpy_iql"])
    rows = capsys.readouterr().out.split("| config | minus the same in |")[1].splitlines()[2:]
    assert rows[0] == f"| ours CRR-style AFBC | {extra} | 0: +20.0 | +20.0 | 1 up, 0 down |"
    assert rows[1].endswith(":d3rlpy_iql | 0: +20.0 | +20.0 | 1 up, 0 down |")  # iql seed 0: 50
    no_awac = re.escape("has no config 'awac' (it has crr, d3rlpy_iql)")
    with pytest.raises(SystemExit, match=no_awac):
        script.main([*argv, "--paired", f"{extra}:awac"])
    no_folder = re.escape("no such report folder (give FOLDER or FOLDER:CONFIG)")
    with pytest.raises(SystemExit, match=no_folder):
        script.main([*argv, "--paired", f"{tmp_path / 'nowhere'}:crr"])


def test_a_run_reads_its_evaluations_once_and_a_missing_file_has_none(tmp_path):
    """report.read_evaluations: the rows of a CSV, none for a file that is not there; a run's
    ``rows`` are read on first use and kept (a report reads each file once)."""
    from super_sac.sweep.archive import archived_runs, read_evaluations

    assert read_evaluations(tmp_path / "nowhere.csv") == []
    folder = tmp_path / "evaluations"
    folder.mkdir()
    path = folder / "crr_HalfCheetah-v5_seed0.csv"
    path.write_text("env_steps,phase,return_mean\n0,offline,1.5\n0,offline,2.5\n")
    assert [r["return_mean"] for r in read_evaluations(path)] == ["1.5", "2.5"]
    (run,) = archived_runs(tmp_path)
    assert [r["return_mean"] for r in run.rows] == ["1.5", "2.5"]
    path.write_text("env_steps,phase,return_mean\n")
    assert len(run.rows) == 2  # kept from the first read


def test_identity_differences_name_each_setting_and_skip_unrecorded_includes():
    from super_sac.sweep.archive import identity_differences

    a = {"script": "train_gym.py", "steps": 100, "include_sha256": {"base.gin": "x"}}
    b = {"script": "train_gym.py", "steps": 200, "include_sha256": None}
    assert identity_differences(a, b) == ["steps: 100 against 200"]
    assert identity_differences(a, dict(a)) == []


def test_identity_differences_compare_settings_digests_where_both_record_them():
    from super_sac.sweep.archive import identity_differences

    new = {"config_sha256": "c1", "include_sha256": {"b.gin": "i1"}, "settings_sha256": "s"}
    # other bytes (a comment edited), same settings: the same experiment
    edited = {"config_sha256": "c2", "include_sha256": {"b.gin": "i2"}, "settings_sha256": "s"}
    assert identity_differences(new, edited) == []
    changed = dict(edited, settings_sha256="t")
    assert identity_differences(new, changed) == ["settings_sha256: 's' against 't'"]
    # the same bytes agree whatever digest each side computed (e.g. under another Python)
    assert identity_differences(new, dict(new, settings_sha256="t")) == []
    # an older record has no settings digest: the bytes decide, whichever side it is on
    old = {"config_sha256": "c2", "include_sha256": {"b.gin": "i1"}}
    assert identity_differences(new, old) == ["config_sha256: 'c1' against 'c2'"]
    assert identity_differences(old, new) == ["config_sha256: 'c2' against 'c1'"]
    assert identity_differences(dict(old, config_sha256="c1"), new) == []


def test_settings_pool_through_a_record_with_both_digests_in_any_order():
    import itertools

    from super_sac.sweep.runs import _check_identities

    def ident(config, settings=None):
        out = {"script": "train_gym.py", "config_sha256": config, "include_sha256": {}}
        return out if settings is None else dict(out, settings_sha256=settings)

    old = (ident("X"), "archive (from old)", "old")  # bytes only: before settings digests
    new = (ident("X", "S"), "sweep new", "new")  # the same bytes, with their settings digest
    edited = (ident("Y", "S"), "sweep edited", "edited")  # a comment edited since
    for order in itertools.permutations([old, new, edited]):
        _check_identities("sac", list(order))  # linked through ``new``, whatever comes first
    # without the record that links them, bytes decide: named with what differs
    with pytest.raises(
        ValueError, match="'sac' is in both sweep edited and archive .*'Y' against 'X'"
    ):
        _check_identities("sac", [edited, old])
    other = (ident("Z", "T"), "sweep other", "other")  # other settings: refused in any order
    for order in itertools.permutations([old, new, other]):
        with pytest.raises(ValueError, match="other settings"):
            _check_identities("sac", list(order))


def test_gin_settings_digest_ignores_comments_and_layout_only(tmp_path):
    from super_sac.sweep.grid import gin_settings_sha256
    from super_sac.utils import sha256_file

    def digest(text: str) -> str:
        path = tmp_path / "x.gin"
        path.write_text(text)
        return gin_settings_sha256(path)

    base = "include 'base.gin'\nsuper_sac.tau = 0.005\nsuper_sac.actor_lr = %LR\n"
    ref = digest(base)
    same = [
        "# SAC, Haarnoja et al. 2018\n" + base,  # a comment line
        base.replace("0.005\n", "0.005  # 'soft' update\n"),  # a trailing comment
        base.replace("\nsuper", "\n\n\nsuper"),  # blank lines
        base.rstrip("\n"),  # no final newline
        base.replace("tau = 0.005", "tau=0.005"),  # spacing within a line
    ]
    assert [digest(t) == ref for t in same] == [True] * len(same)
    different = [
        base.replace("0.005", "0.01"),  # a value
        base.replace("'base.gin'", "'base2.gin'"),  # an include
        base.replace("%LR", "%LR2"),  # a macro
        base.replace("super_sac.tau = 0.005\n", "# super_sac.tau = 0.005\n"),  # commented out
        base.replace("\nsuper_sac.actor_lr", " super_sac.actor_lr"),  # two bindings on a line
    ]
    assert [digest(t) == ref for t in different] == [False] * len(different)
    # gin's binding blocks: indentation says which lines belong to the block, not its width
    block = "Foo:\n  a = 1\n  b = 2\n"
    assert digest(block) == digest(block.replace("  ", "    "))
    assert digest(block) != digest("Foo:\n  a = 1\nb = 2\n")
    # a "#" inside a string is part of the value, not a comment
    assert digest("x.name = 'a#b'\n") != digest("x.name = 'a#c'\n")
    # brackets may wrap over lines as the writer likes
    assert digest("x.sizes = [256, 256]\n") == digest(
        "x.sizes = [\n    256,\n    256,\n]\n".replace(",\n]", "\n]")
    )
    # what Python's tokenizer cannot read is identified by its bytes
    path = tmp_path / "x.gin"
    path.write_text("x.name = 'unterminated\n")
    assert gin_settings_sha256(path) == sha256_file(path)


def test_a_new_sweep_dry_runs_each_config_and_env_before_writing_its_manifest(tmp_path):
    """A typo in a config, an env or a script option stops the sweep before any trial runs,
    with the training script's own message, and leaves no manifest behind to lock the grid."""
    import io

    from super_sac.sweep.grid import Grid
    from super_sac.sweep.local import run_local

    script = Path(__file__).resolve().parents[1] / "experiments" / "gym" / "train_gym.py"
    cases = [
        (Grid.make(["sacc.gin"], ["Pendulum-v1"], "0"), r"sacc.gin on Pendulum-v1 would fail.*"
         r"gin config sacc.gin not found"),
        (Grid.make(["sac.gin"], ["Pendulm-v1"], "0"), r"unknown gymnasium env id 'Pendulm-v1'"),
        (Grid.make(["sac.gin"], ["Pendulum-v1"], "0", script_args=["--action_repeat", "8"]),
         r"unrecognized arguments: --action_repeat 8"),
    ]  # fmt: skip
    for i, (grid, message) in enumerate(cases):
        sweep = tmp_path / f"s{i}"
        with pytest.raises(ValueError, match=f"(?s){message}.*no manifest was written"):
            run_local(grid, sweep, script=script, out=io.StringIO())
        assert not (sweep / "manifest.json").exists()


def test_reports_refuse_a_misspelt_metric_and_an_empty_sweep_without_leaving_a_folder(tmp_path):
    from super_sac.sweep.grid import Grid, write_manifest
    from super_sac.sweep.report import write_report

    ours = _fake_sweep(tmp_path, "ours", ["sac.gin"], "0")
    with pytest.raises(ValueError, match=r"metric 'eval_retrun'.*no column 'eval_retrun'.*Fix"):
        write_report(ours, "eval_retrun", out=tmp_path / "typo")
    empty = tmp_path / "empty"
    write_manifest(empty, Grid.make(["sac.gin"], ["Pendulum-v1"], "0", 30))
    with pytest.raises(ValueError, match="no finished trial to report yet"):
        write_report(empty, out=tmp_path / "empty_report")
    assert not (tmp_path / "typo").exists() and not (tmp_path / "empty_report").exists()
    # --last beyond the runs' evaluations is said, not hidden
    from super_sac.sweep.report import build_report

    assert build_report(ours, last=3)["warnings"] == []  # FAKE_SCRIPT writes 3 evaluations
    (warning,) = build_report(ours, last=100)["warnings"]
    assert warning.startswith("some runs have only 3 evaluations, fewer than --last 100")


def test_one_config_may_run_other_budgets_on_other_envs_in_one_report(tmp_path):
    """Settings are held per (config, env): a table of several envs may give each its own step
    budget; a run found twice is reported after the settings, which explain it first."""
    from super_sac.sweep.grid import Grid, write_manifest
    from super_sac.sweep.report import build_report

    write_manifest(tmp_path / "pendulum", Grid.make(["sac.gin"], ["Pendulum-v1"], "0", 600))
    write_manifest(tmp_path / "car", Grid.make(["sac.gin"], ["MountainCarContinuous-v0"], "0",
                                               400))  # fmt: skip
    report = build_report([tmp_path / "pendulum", tmp_path / "car"])
    assert report["warnings"] == []  # no env ran two budgets
    write_manifest(tmp_path / "long", Grid.make(["sac.gin"], ["Pendulum-v1"], "0", 8000))
    with pytest.raises(ValueError, match="'sac' on Pendulum-v1 is in both .*steps"):
        build_report([tmp_path / "pendulum", tmp_path / "long"])


def test_plot_runs_labels_its_axis_by_what_the_runs_evaluated(tmp_path, monkeypatch):
    import matplotlib.axes

    from super_sac.sweep.plots import plot_runs

    def run(name, phases):
        folder = tmp_path / name
        folder.mkdir()
        rows = [",".join(EVAL_CSV_COLUMNS)]
        rows += [f"{env},{phase},{step},1,0,0,0,1,0" for env, phase, step in phases]
        (folder / "evaluations.csv").write_text("\n".join(rows) + "\n")
        return folder

    online = run("online", [(100, "online", 100), (200, "online", 200)])
    offline = run("offline", [(0, "offline", 100), (0, "offline", 200)])
    labels = []
    original = matplotlib.axes.Axes.set_xlabel
    monkeypatch.setattr(
        matplotlib.axes.Axes,
        "set_xlabel",
        lambda self, label, *a, **kw: labels.append(label) or original(self, label, *a, **kw),
    )
    assert plot_runs([online], tmp_path / "a.png") == tmp_path / "a.png"
    plot_runs([offline], tmp_path / "b.png")
    assert labels == ["env steps", "gradient steps (offline)"]
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="offline only .*plot them separately"):
        plot_runs([online, offline], tmp_path / "c.png")


def test_the_report_module_still_serves_the_names_it_had_before_the_split():
    """``sweep.report`` was split into runs, archive, plots, check and stats; notebooks and
    scripts that imported from it keep working (check_report through a module __getattr__)."""
    import super_sac.sweep.report as report
    from super_sac.sweep import archive, check, plots, runs, stats

    assert report.check_report is check.check_report
    assert report.read_evaluations is archive.read_evaluations
    assert report.identity_differences is archive.identity_differences
    assert report.is_offline_only is runs.is_offline_only
    assert report.read_curve is runs.read_curve
    assert report.pooled_paired_entry is stats.pooled_paired_entry
    assert report.plot_runs is plots.plot_runs
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        report.no_such_name  # noqa: B018


def test_factorial_effects_and_interaction_computed_by_hand(tmp_path, capsys, monkeypatch):
    # it imports its sibling pooled_paired
    script = load_script(_RESULTS.parent / "factorial.py", monkeypatch=monkeypatch)
    finals = {  # corner -> seed -> final of a curve 0 (at 1k steps) -> final (at 2k)
        "base": {0: 1.0, 1: 2.0},
        "a": {0: 3.0, 1: 2.0},
        "b": {0: 4.0, 1: 6.0},
        "ab": {0: 10.0, 1: 5.0, 2: 7.0},  # seed 2 is in no other corner: left out
    }
    for corner, by_seed in finals.items():
        folder = tmp_path / corner / "evaluations"
        folder.mkdir(parents=True)
        for seed, final in by_seed.items():
            rows = ["env_steps,phase,phase_step,return_mean", "1000,online,1000,0"]
            rows.append(f"2000,online,2000,{final}")
            (folder / f"c_cartpole_seed{seed}.csv").write_text("\n".join(rows) + "\n")
    folders = [tmp_path / c for c in ("base", "a", "b", "ab")]
    rows = script.effects(*folders, config="c", last=1)
    expected = {
        "A, B off": {0: 2.0, 1: 0.0},  # a - base
        "A, B on": {0: 6.0, 1: -1.0},  # ab - b
        "A, main": {0: 4.0, 1: -0.5},
        "B, A off": {0: 3.0, 1: 4.0},  # b - base
        "B, A on": {0: 7.0, 1: 3.0},  # ab - a
        "B, main": {0: 5.0, 1: 3.5},
        "interaction": {0: 4.0, 1: -1.0},  # ab - a - b + base
    }
    for row, by_seed in expected.items():
        assert rows[row]["final"] == pytest.approx(by_seed), row
        assert rows[row]["last"] == pytest.approx(by_seed), row
        # one trapezoid from 0 at 1k steps: the area is half the final, and so are its effects
        assert rows[row]["auc"] == pytest.approx({s: v / 2 for s, v in by_seed.items()}), row
    script.main([*map(str, folders), "--config", "c", "--a_name", "init", "--b_name", "shift"])
    out = capsys.readouterr().out
    assert out.startswith("c: init and shift crossed, paired by seed (seeds 0, 1)")
    assert f"- AB: {tmp_path / 'ab'}" in out
    # two seeds: the bootstrap interval runs from both at the lower value to both at the upper
    row = "| interaction (what init adds with shift on, minus with shift off) | +1.5 [-1.0, 4.0]"
    assert row + " (1 up, 1 down of 2) |" in out
    assert "| shift, main effect (mean of the two) | +4.2 [3.5, 5.0] (2 up, 0 down of 2) |" in out
    with pytest.raises(SystemExit, match="give four report folders"):
        script.table(folders[:3], "c")
    with pytest.raises(SystemExit, match="has no run of 'd'"):
        script.effects(*folders, config="d")
    lone = tmp_path / "lone" / "evaluations"
    lone.mkdir(parents=True)
    (lone / "c_cartpole_seed5.csv").write_text(
        "env_steps,phase,phase_step,return_mean\n1000,online,1000,0\n2000,online,2000,1\n"
    )
    with pytest.raises(SystemExit, match="share no seed"):
        script.effects(folders[0], folders[1], folders[2], tmp_path / "lone", config="c")
