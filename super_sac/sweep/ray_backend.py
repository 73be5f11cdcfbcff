"""The Ray backend: run a sweep's trials as Ray Tune trials, on one machine (a local Ray started
here) or on a cluster (``address="auto"``). Needs ``pip install "super_sac[sweep]"``.

Each Tune trial runs the same subprocess as the local backend (:func:`run_trial` with no retries
of its own) inside the trial folder of the sweep, so the folders stay the source of truth:
finished trials are never handed to Tune, an attempt that Tune retries (``FailureConfig``)
continues from the trial's newest checkpoint through ``--resume``, and a sweep stopped part-way
restores its Tune experiment (``Tuner.restore``) on the next run. On a cluster the sweep folder
must be on storage that every node sees at the same path. GPUs: Tune reserves
``gpus_per_trial`` (fractions share a GPU) and sets ``CUDA_VISIBLE_DEVICES`` in the trial's
worker, which the training subprocess inherits.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path

from super_sac.sweep.grid import FINISHED, MANIFEST, Grid, Trial, write_manifest
from super_sac.sweep.local import (
    TRIAL_LOG,
    Progress,
    TrialResult,
    preflight,
    run_trial,
    sweep_lock,
)

TUNE_FOLDER = ".ray"  # the Tune experiment's state, inside the sweep folder
EXPERIMENT = "tune"


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
        from ray import tune  # noqa: F401
    except ImportError:
        return False
    return True


def _trainable(grid: Grid, sweep_dir: str, script: str, threads: int | None, python: str):
    """A function trainable that runs the trial named by ``config["key"]`` once and raises when
    it fails, so Tune's ``max_failures`` retries it."""

    def train_trial(config):
        from ray import tune

        trials = {t.key: t for t in grid.trials(sweep_dir)}
        trial = trials[config["key"]]
        result = run_trial(grid, trial, script, 0, threads, python)
        if result.status != "finished":
            raise RuntimeError(f"trial {trial.key} failed: {result.error}")
        tune.report({"finished": 1, "resumed": int(result.resumed), "seconds": result.seconds})

    return train_trial


def run_ray(
    grid: Grid,
    sweep_dir: str | os.PathLike,
    script: str | os.PathLike,
    address: str | None = None,
    num_cpus: int | None = None,
    cpus_per_trial: float = 1,
    gpus_per_trial: float = 0,
    max_failures: int = 0,
    threads: int | None = 1,
    python: str = sys.executable,
    out=None,
    progress_interval: float = 60,
) -> list[TrialResult]:
    """Run every unfinished trial of ``grid`` under ``sweep_dir`` with Ray Tune.

    Progress is read from the trial folders while Tune runs (a line per finished trial, a
    status line every ``progress_interval`` seconds), as with the local backend.

    :param address: a running Ray cluster (``"auto"``, ``"ray://host:10001"``), or None to start
        a local Ray with ``num_cpus`` CPUs (None: all of this machine's).
    :param cpus_per_trial, gpus_per_trial: the resources Tune reserves for each trial.
    :param max_failures: Tune retries of a failed trial; each retry resumes from its checkpoint.
    :return: one result per trial, in grid order (``attempts`` is not tracked here).
    """
    try:
        import ray
        from ray import tune
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            'the ray backend needs Ray Tune: pip install "super_sac[sweep]"'
        ) from err
    sweep_dir = Path(sweep_dir).resolve()
    with sweep_lock(sweep_dir):
        if not (sweep_dir / MANIFEST).is_file():
            preflight(grid, sweep_dir, script, sys.executable)
        write_manifest(sweep_dir, grid, script)
        trials = grid.trials(sweep_dir)
        todo = [t.key for t in trials if t.state() != FINISHED]
        progress = Progress(
            len(trials), len(trials) - len(todo), out, grid.steps, interval=progress_interval
        )
        reported: set[str] = set()
        errored: set[str] = set()  # trials Tune gave up on (out of retries)
        storage = sweep_dir / TUNE_FOLDER
        if todo:
            started_here = not ray.is_initialized()
            if started_here:
                if address is None:
                    ray.init(num_cpus=num_cpus, include_dashboard=False)
                else:
                    ray.init(address=address)
            try:
                trainable = tune.with_resources(
                    _trainable(grid, str(sweep_dir), str(Path(script).resolve()), threads, python),
                    {"cpu": cpus_per_trial, "gpu": gpus_per_trial},
                )
                path = storage / EXPERIMENT
                if tune.Tuner.can_restore(str(path)):
                    # a sweep stopped part-way: its unfinished and errored trials run again
                    tuner = tune.Tuner.restore(str(path), trainable, resume_errored=True)
                else:
                    tuner = tune.Tuner(
                        trainable,
                        param_space={"key": tune.grid_search(todo)},
                        run_config=tune.RunConfig(
                            name=EXPERIMENT,
                            storage_path=str(storage),
                            failure_config=tune.FailureConfig(max_failures=max_failures),
                            verbose=0,
                        ),
                    )
                with progress, _FolderWatch(trials, todo, progress, reported, max_failures):
                    result_grid = tuner.fit()
                errored = {r.config["key"] for r in result_grid if r.error is not None}
            finally:
                if started_here:
                    ray.shutdown()
            if all(t.state() == FINISHED for t in trials if t.key in todo):
                # the next run starts a new Tune experiment from the trial folders, which hold
                # everything; a sweep stopped part-way (Ctrl-C: Tune saves its state and returns)
                # or with trials out of retries keeps it, to be restored by the next run
                shutil.rmtree(storage, ignore_errors=True)
        results = []
        for trial in trials:
            if trial.key not in todo:
                results.append(TrialResult(trial, "skipped"))
                continue
            result = _result_from_folder(trial, max_failures)
            if result.status == "failed" and trial.key not in errored:
                result.status = "stopped"
                result.error = "stopped before it finished; run the same sweep again to resume it"
            if trial.key not in reported:
                progress.finished(result)
            results.append(result)
        return results


def _result_from_folder(trial: Trial, max_failures: int) -> TrialResult:
    """A Tune-run trial's result, read from its folder (state and ``sweep.log``)."""
    done = trial.state() == FINISHED
    result = TrialResult(trial, "finished" if done else "failed")
    log = trial.folder / TRIAL_LOG
    text = log.read_text() if log.exists() else ""
    result.attempts = text.count("# attempt ")
    result.resumed = "--resume" in text
    if not done:
        result.error = f"not finished after {max_failures + 1} attempt(s), see {log}"
    return result


class _FolderWatch:
    """While Tune runs, poll the trial folders every ``period`` seconds: a trial with a
    ``sweep.log`` counts as running, and one that finishes gets its line at once."""

    def __init__(self, trials, todo, progress: Progress, reported: set[str], max_failures: int):
        self.trials = [t for t in trials if t.key in todo]
        self.progress, self.reported, self.max_failures = progress, reported, max_failures
        self.period = min(10.0, progress.interval or 10.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _FolderWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.poll()

    def poll(self) -> None:
        for trial in self.trials:
            if trial.key in self.reported:
                continue
            if trial.state() == FINISHED:
                self.reported.add(trial.key)
                self.progress.finished(_result_from_folder(trial, self.max_failures))
            elif (trial.folder / TRIAL_LOG).exists():
                self.progress.started(trial)
