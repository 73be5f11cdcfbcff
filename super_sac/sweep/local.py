"""The local backend: run a sweep's trials as subprocesses of the training script, a few at a
time, on this machine. Finished trials are skipped, interrupted ones resume from their newest
checkpoint (``--resume <trial folder>``), failed ones are retried up to ``max_failures`` times."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import os
import queue
import shlex
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from super_sac.reporting import EVAL_CSV
from super_sac.sweep.grid import (
    FINISHED,
    INTERRUPTED,
    MANIFEST,
    Grid,
    Trial,
    write_manifest,
)
from super_sac.utils import try_lock

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
    # "skipped" (already finished), "archived" (finished in another folder, see done_elsewhere),
    # "finished", "failed" or "stopped" (interrupted)
    status: str
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
    argv += list(grid.script_args)
    if threads:
        argv += ["--threads", str(threads)]
    return argv


def preflight(
    grid: Grid, sweep_dir: str | os.PathLike, script: str | os.PathLike, python: str
) -> None:
    """Before a new sweep writes its manifest, for a script with ``--dry_run`` (the library's
    training scripts and the SB3 and d3rlpy peer trials): dry-run each config on each env once,
    so a missing config file, an unknown option, a misspelt env or a gin error stops the sweep
    here, with the script's own message, instead of failing every trial and fixing the grid in
    the manifest.

    :raises ValueError: naming the (config, env) pair and the script's error.
    """
    if not _has_dry_run(script, python):
        return  # another script: its trials report their own errors
    probe = Path(sweep_dir) / ".preflight"  # never created: a dry run writes nothing
    for config in grid.configs:
        for env in grid.envs:
            trial = Trial(config, env, grid.seeds[0], probe)
            argv = [python, str(script), *trial_argv(grid, trial), "--dry_run"]
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            except subprocess.TimeoutExpired as err:
                raise ValueError(
                    f"a dry run of {config} on {env} took over 10 minutes ({shlex.join(argv)}); "
                    "Fix: check that the script starts, then run the sweep again"
                ) from err
            if proc.returncode != 0:
                lines = (proc.stderr or proc.stdout).strip().splitlines()
                raise ValueError(
                    f"the trials of {config} on {env} would fail; a dry run of the script "
                    f"says:\n  " + "\n  ".join(lines[-3:]) + "\nNothing was started and no "
                    "manifest was written. Fix: correct the sweep's options and run it again"
                )


def _last_line(log: Path, limit: int = 200) -> str:
    """The last non-empty line of a trial's log (its error, for a failed trial), shortened."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines()]
    except OSError:
        return "no log"
    last = next((ln for ln in reversed(lines) if ln), "empty log")
    return last if len(last) <= limit else last[: limit - 3] + "..."


def _has_dry_run(script: str | os.PathLike, python: str) -> bool:
    """Whether the script's ``--help`` lists ``--dry_run``."""
    try:
        proc = subprocess.run(
            [python, str(script), "--help"], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and "--dry_run" in proc.stdout


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


def trial_fraction(trial: Trial, steps: int | None) -> float:
    """How far a running trial is, from its newest evaluation: ``env_steps / steps`` in
    ``[0, 1]`` (0 when ``steps`` is unknown or nothing was evaluated yet)."""
    if not steps:
        return 0.0
    try:
        with open(trial.folder / EVAL_CSV, newline="") as f:
            rows = list(csv.DictReader(f))
        return min(1.0, max(0.0, float(rows[-1]["env_steps"]) / steps)) if rows else 0.0
    except (OSError, KeyError, ValueError):
        return 0.0


class Progress:
    """What the sweep tells its user: one line per finished trial, and a status line (a bar of
    the trials done, counting the running ones by their newest evaluation, the running and
    failed counts, and an ETA) after each of them and every ``interval`` seconds meanwhile.

    :param total: trials in the grid.
    :param already: trials finished before this run (skipped).
    :param steps: env steps per trial when the sweep sets them (``--steps``), for the fraction
        of the running trials; ``None``: running trials count 0 until they finish.
    :param out: where the lines go (default stdout).
    """

    WIDTH = 20

    def __init__(
        self, total: int, already: int, out=None, steps: int | None = None, interval: float = 60
    ) -> None:
        self.total, self.done, self.failed, self.already = total, already, 0, already
        self.running: set[Trial] = set()
        self.steps, self.interval = steps, interval
        self.start, self.lock = time.monotonic(), threading.Lock()
        self.out = out or sys.stdout
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # a running trial counts at most this much: after its last evaluation it still writes its
    # summary (and a slow final checkpoint), so a bar of only running trials never reads full
    RUNNING_CAP = 0.95

    def line(self) -> str:
        """``[#######.............] 3/10 done, 2 running, 0 failed, ETA 12m30s``."""
        fraction = sum(
            min(trial_fraction(t, self.steps), self.RUNNING_CAP) for t in list(self.running)
        )
        units = self.done + self.failed + fraction  # trials' worth of work behind us
        bar = int(self.WIDTH * units / self.total) if self.total else self.WIDTH
        text = (
            f"[{'#' * bar}{'.' * (self.WIDTH - bar)}] {self.done}/{self.total} done, "
            f"{len(self.running)} running, {self.failed} failed"
        )
        ran = units - self.already  # progress made by this run, in trials
        left = self.total - units
        if ran > 0 and left > 0:
            text += f", ETA {_duration((time.monotonic() - self.start) / ran * left)}"
        return text

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def started(self, trial: Trial) -> None:
        with self.lock:
            self.running.add(trial)

    def finished(self, result: TrialResult) -> None:
        with self.lock:
            self.running.discard(result.trial)
            if result.status in ("failed", "stopped"):
                self.failed += 1
            else:
                self.done += 1
            how = "resumed, " if result.resumed else ""
            what = f"failed: {result.error}" if result.error else "finished"
            self._print(
                f"{result.trial.key}: {what} ({how}{result.attempts} attempt(s), "
                f"{result.seconds:.0f}s) {self.line()}"
            )

    def __enter__(self) -> Progress:
        if self.interval and self.interval > 0:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            with self.lock:
                if self.running:
                    self._print(self.line())


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Ask Linux to send the trial SIGTERM when the sweep that started it dies, even by
    SIGKILL (``prctl(PR_SET_PDEATHSIG)``), so no trial keeps training (and writing into its
    folder) behind a dead sweep; it resumes from its checkpoint when the sweep runs again."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def trial_env(device: str | None, base: dict[str, str] | None = None) -> dict[str, str] | None:
    """The environment of a trial process: ``CUDA_VISIBLE_DEVICES=<device>`` when the sweep
    places trials on devices (``None``: the sweep's own environment, unchanged)."""
    if device is None:
        return base
    env = dict(os.environ if base is None else base)
    env["CUDA_VISIBLE_DEVICES"] = str(device)
    return env


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
            proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
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
        cause = _last_line(trial.folder / TRIAL_LOG)
        result.error = f"exit code {proc.returncode} ({cause}), see {trial.folder / TRIAL_LOG}"
    result.seconds = time.monotonic() - start
    return result


@contextlib.contextmanager
def sweep_lock(sweep_dir: str | os.PathLike):
    """Hold ``<sweep_dir>/.sweep.lock`` (an advisory ``flock``) while a sweep runs there, so a
    second sweep started on the same folder stops at once instead of running the same trials.
    Where ``fcntl`` does not exist (Windows) nothing is locked.

    :raises RuntimeError: when another process holds the lock."""
    Path(sweep_dir).mkdir(parents=True, exist_ok=True)
    try:
        lock = try_lock(Path(sweep_dir) / ".sweep.lock")
    except BlockingIOError:
        raise RuntimeError(
            f"another sweep is running in {sweep_dir}; wait for it or stop it first"
        ) from None
    try:
        yield
    finally:
        if lock is not None:
            lock.close()


TRIAL_ORDERS = ("config", "seed")


def archived_trials(
    grid: Grid, script: str | os.PathLike | None, archives: list[str | os.PathLike]
) -> set[tuple[str, str, int]]:
    """The trials of ``grid`` that the report folders ``archives`` already hold (their copied
    evaluations, see :func:`super_sac.sweep.archive.archived_runs`), for ``done_elsewhere``.

    :raises ValueError: when an archived run of one of the grid's configs ran with other
        settings (:func:`super_sac.sweep.archive.experiment_identity`), or carries none (an
        archive copied before they were recorded: index it with ``sweep.py index``).
    """
    from super_sac.sweep.archive import archived_runs, experiment_identity, identity_differences
    from super_sac.sweep.grid import config_digests, included_digests, settings_digests

    manifest = {
        "grid": grid.to_json(),
        "config_sha256": config_digests(grid, script),
        "include_sha256": included_digests(grid, script),
        "settings_sha256": settings_digests(grid, script),
    }
    identities = {Path(c).stem: experiment_identity(manifest, c) for c in grid.configs}
    done = set()
    for archive in archives:
        for run in archived_runs(archive):
            if run.config not in identities or run.env not in grid.envs:
                continue
            if run.identity is None:
                raise ValueError(
                    f"{run.source}: no recorded settings to hold it to this sweep's. Fix: "
                    "sweep.py index the archive from its manifests"
                )
            diffs = identity_differences(identities[run.config], run.identity)
            if diffs:
                raise ValueError(
                    f"{run.source} ran {run.config} with other settings than this sweep ("
                    + "; ".join(diffs)
                    + "): leave that archive out, or run the sweep with its settings"
                )
            done.add((run.config, run.env, run.seed))
    return done


def run_local(
    grid: Grid,
    sweep_dir: str | os.PathLike,
    workers: int = 1,
    script: str | os.PathLike = DEFAULT_SCRIPT,
    max_failures: int = 0,
    threads: int | None = 1,
    python: str = sys.executable,
    out=None,
    devices: list[str] | None = None,
    progress_interval: float = 60,
    order: str = "config",
    max_trials: int | None = None,
    done_elsewhere: set[tuple[str, str, int]] | None = None,
) -> list[TrialResult]:
    """Run every unfinished trial of ``grid`` under ``sweep_dir``, ``workers`` at a time.

    Checks (or writes) the sweep's manifest first, so a different grid in the same folder is
    refused before anything runs.

    :param devices: GPU ids (e.g. ``["0", "1"]``); worker slot ``k`` runs its trials with
        ``CUDA_VISIBLE_DEVICES=devices[k % len(devices)]``, so ``workers=4`` on two GPUs puts
        two trials on each. ``None``: trials see what the sweep sees.
    :param progress_interval: seconds between status lines while trials run (0: only when a
        trial finishes).
    :param order: ``"config"`` starts the trials in grid order (every seed of the first config,
        then the next config); ``"seed"`` starts every config and env at the first seed before
        any at the second, so a sweep stopped early holds the same seeds of every config (the
        grid and the manifest are the same either way).
    :param max_trials: start at most this many unfinished trials (in ``order``), then stop:
        a time-boxed job runs the sweep in slices (``None``: all).
    :param done_elsewhere: ``(config stem, env, seed)`` of trials finished in an earlier sweep
        folder whose evaluations a report archives (:func:`archived_trials`): skipped as done.
    :return: one result per trial started or skipped, in grid order.
    """
    if order not in TRIAL_ORDERS:
        raise ValueError(f"order must be one of {TRIAL_ORDERS}, got {order!r}")
    if max_trials is not None and max_trials < 1:
        raise ValueError(f"max_trials must be at least 1, got {max_trials}")
    with sweep_lock(sweep_dir):
        return _run_local(
            grid,
            sweep_dir,
            workers,
            script,
            max_failures,
            threads,
            python,
            out,
            devices,
            progress_interval,
            order,
            max_trials,
            done_elsewhere or set(),
        )


def _run_local(
    grid: Grid,
    sweep_dir: str | os.PathLike,
    workers: int,
    script: str | os.PathLike,
    max_failures: int,
    threads: int | None,
    python: str,
    out,
    devices: list[str] | None,
    progress_interval: float,
    order: str,
    max_trials: int | None,
    done_elsewhere: set[tuple[str, str, int]],
) -> list[TrialResult]:
    if not (Path(sweep_dir) / MANIFEST).is_file():
        preflight(grid, sweep_dir, script, python)
    write_manifest(sweep_dir, grid, script)
    trials = grid.trials(sweep_dir)
    results: list[TrialResult | None] = [None] * len(trials)
    todo = []
    for i, trial in enumerate(trials):
        if trial.state() == FINISHED:
            results[i] = TrialResult(trial, "skipped")
        elif (Path(trial.config).stem, trial.env, trial.seed) in done_elsewhere:
            results[i] = TrialResult(trial, "archived")
        else:
            todo.append(i)
    if order == "seed":
        todo.sort(key=lambda i: (grid.seeds.index(trials[i].seed), i))
    finished = len(trials) - len(todo)
    todo = todo[:max_trials]  # a slice: the trials after it stay for the next run
    workers = max(1, workers)
    progress = Progress(len(trials), finished, out, grid.steps, interval=progress_interval)
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(workers):
        slots.put(slot)

    def work(i: int) -> None:
        slot = slots.get()
        try:
            device = devices[slot % len(devices)] if devices else None
            progress.started(trials[i])
            results[i] = run_trial(
                grid, trials[i], script, max_failures, threads, python, trial_env(device)
            )
            progress.finished(results[i])
        finally:
            slots.put(slot)

    stopping = threading.Event()

    def guarded(i: int) -> None:
        if not stopping.is_set():
            work(i)

    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        with progress:
            list(pool.map(guarded, todo))
    except BaseException:  # Ctrl-C, SIGTERM (as SystemExit): stop the trials, don't orphan them
        stopping.set()
        stop_trials()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [r for r in results if r is not None]
