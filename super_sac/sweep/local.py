"""The local backend: run a sweep's trials as subprocesses of the training script, a few at a
time, on this machine. Finished trials are skipped, interrupted ones resume from their newest
checkpoint (``--resume <trial folder>``), failed ones are retried up to ``max_failures`` times."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from super_sac.sweep.grid import FINISHED, INTERRUPTED, Grid, Trial, write_manifest

DEFAULT_SCRIPT = "experiments/gym/train_gym.py"
TRIAL_LOG = "sweep.log"  # each attempt's output, appended, inside the trial folder


_LIVE: set[subprocess.Popen] = set()  # the trial processes running now
_LIVE_LOCK = threading.Lock()


def stop_trials(grace: float = 10.0) -> None:
    """Terminate the running trial processes (SIGTERM, then SIGKILL after ``grace`` seconds);
    they resume from their checkpoints on the next run of the sweep."""
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclasses.dataclass
class TrialResult:
    trial: Trial
    status: str  # "skipped" (already finished), "finished" or "failed"
    attempts: int = 0
    resumed: bool = False  # whether an attempt continued from a checkpoint
    seconds: float = 0.0
    error: str | None = None


def trial_argv(grid: Grid, trial: Trial, threads: int | None = None) -> list[str]:
    """The training script's arguments for ``trial`` in its current state: ``--resume <folder>``
    when it has a checkpoint, else a new run in the folder itself (``--run_dir``)."""
    if trial.state() == INTERRUPTED:
        argv = ["--resume", str(trial.folder)]
    else:
        argv = [
            "--config",
            trial.config,
            "--env",
            trial.env,
            "--seed",
            str(trial.seed),
            "--run_dir",
            str(trial.folder),
        ]
    if grid.steps is not None:
        argv += ["--steps", str(grid.steps)]
    for binding in grid.gin_bindings:
        argv += ["--gin_bindings", binding]
    if threads:
        argv += ["--threads", str(threads)]
    return argv


def _prepare_fresh(trial: Trial) -> None:
    """Clear what a run that died before its first checkpoint left (it has nothing to resume
    from), keeping the sweep's log of earlier attempts."""
    if not trial.folder.is_dir():
        return
    for entry in trial.folder.iterdir():
        if entry.name == TRIAL_LOG:
            continue
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


class Progress:
    """One line per finished trial, and the counts (done, running, failed) with an ETA."""

    def __init__(self, total: int, already: int, out=None) -> None:
        self.total, self.done, self.running, self.failed = total, already, 0, 0
        self.ran, self.start, self.lock = 0, time.monotonic(), threading.Lock()
        self.out = out or sys.stdout

    def _line(self) -> str:
        left = self.total - self.done - self.failed
        eta = ""
        if self.ran:
            per = (time.monotonic() - self.start) / self.ran
            eta = f", ETA {per * left:.0f}s" if left else ""  # wall time per trial so far
        return f"[{self.done}/{self.total} done, {self.running} running, {self.failed} failed{eta}]"

    def started(self) -> None:
        with self.lock:
            self.running += 1

    def finished(self, result: TrialResult) -> None:
        with self.lock:
            self.running -= 1
            self.ran += 1
            if result.status == "failed":
                self.failed += 1
            else:
                self.done += 1
            how = "resumed, " if result.resumed else ""
            what = f"failed: {result.error}" if result.error else "finished"
            print(
                f"{result.trial.key}: {what} ({how}{result.attempts} attempt(s), "
                f"{result.seconds:.0f}s) {self._line()}",
                file=self.out,
                flush=True,
            )


def run_trial(
    grid: Grid,
    trial: Trial,
    script: str | os.PathLike,
    max_failures: int = 0,
    threads: int | None = 1,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
) -> TrialResult:
    """Run (or resume) one trial to its end, retrying a failure up to ``max_failures`` times;
    every attempt continues from the newest checkpoint when there is one."""
    result = TrialResult(trial, "failed")
    start = time.monotonic()
    while result.attempts <= max_failures:
        state = trial.state()
        if state == FINISHED:
            result.status = "finished"
            break
        if state == INTERRUPTED:
            result.resumed = True
        else:
            _prepare_fresh(trial)
        trial.folder.mkdir(parents=True, exist_ok=True)
        argv = [python, str(script), *trial_argv(grid, trial, threads)]
        result.attempts += 1
        with open(trial.folder / TRIAL_LOG, "a") as log:
            log.write(f"# attempt {result.attempts}: {shlex.join(argv)}\n")
            log.flush()
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
            with _LIVE_LOCK:
                _LIVE.add(proc)
            try:
                proc.wait()
            finally:
                with _LIVE_LOCK:
                    _LIVE.discard(proc)
        if proc.returncode == 0 and trial.state() == FINISHED:
            result.status, result.error = "finished", None
            break
        result.error = f"exit code {proc.returncode}, see {trial.folder / TRIAL_LOG}"
    result.seconds = time.monotonic() - start
    return result


@contextlib.contextmanager
def sweep_lock(sweep_dir: str | os.PathLike):
    """Hold ``<sweep_dir>/.sweep.lock`` (an advisory ``flock``) while a sweep runs there, so a
    second sweep started on the same folder stops at once instead of running the same trials.
    Where ``fcntl`` does not exist (Windows) nothing is locked.

    :raises RuntimeError: when another process holds the lock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    Path(sweep_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(sweep_dir) / ".sweep.lock", "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(
                f"another sweep is running in {sweep_dir}; wait for it or stop it first"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def run_local(
    grid: Grid,
    sweep_dir: str | os.PathLike,
    workers: int = 1,
    script: str | os.PathLike = DEFAULT_SCRIPT,
    max_failures: int = 0,
    threads: int | None = 1,
    python: str = sys.executable,
    out=None,
) -> list[TrialResult]:
    """Run every unfinished trial of ``grid`` under ``sweep_dir``, ``workers`` at a time.

    Checks (or writes) the sweep's manifest first, so a different grid in the same folder is
    refused before anything runs. :return: one result per trial, in grid order.
    """
    with sweep_lock(sweep_dir):
        return _run_local(grid, sweep_dir, workers, script, max_failures, threads, python, out)


def _run_local(
    grid: Grid,
    sweep_dir: str | os.PathLike,
    workers: int,
    script: str | os.PathLike,
    max_failures: int,
    threads: int | None,
    python: str,
    out,
) -> list[TrialResult]:
    write_manifest(sweep_dir, grid)
    trials = grid.trials(sweep_dir)
    results: list[TrialResult | None] = [None] * len(trials)
    todo = []
    for i, trial in enumerate(trials):
        if trial.state() == FINISHED:
            results[i] = TrialResult(trial, "skipped")
        else:
            todo.append(i)
    progress = Progress(len(trials), len(trials) - len(todo), out)

    def work(i: int) -> None:
        progress.started()
        results[i] = run_trial(grid, trials[i], script, max_failures, threads, python)
        progress.finished(results[i])

    stopping = threading.Event()

    def guarded(i: int) -> None:
        if not stopping.is_set():
            work(i)

    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        list(pool.map(guarded, todo))
    except BaseException:  # Ctrl-C, SIGTERM (as SystemExit): stop the trials, don't orphan them
        stopping.set()
        stop_trials()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [r for r in results if r is not None]
