"""Metric loggers: tensorboard, wandb or none."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import gin

from super_sac.checkpoint import CheckpointError
from super_sac.utils import (
    atomic_write_json,
    atomic_write_text,
    json_list,
    make_run_dir,
    try_lock,
)

if TYPE_CHECKING:
    from super_sac.config import TrainConfig

LOGGING_METHODS = ("tensorboard", "wandb", "none")


class NullLogger:
    """Discards every metric."""

    where = "nowhere (logging_method='none')"

    def log(self, metrics: dict[str, float], step: int) -> None:
        pass

    def log_histograms(self, tensors: dict[str, Any], step: int) -> None:
        """Histograms of the values of ``tensors`` (only tensorboard keeps them)."""

    def log_video(
        self, tag: str, frames: list[Any], step: int, fps: float, path: Path | None = None
    ) -> None:
        """An evaluation video: its ``(H, W, 3)`` uint8 ``frames`` and, when written, its file."""

    def close(self) -> None:
        pass


class TensorboardLogger(NullLogger):
    """Scalars to ``torch.utils.tensorboard`` event files in the run directory."""

    def __init__(self, run_dir: Path, purge_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # purge_step: a resumed run drops the events its crashed predecessor logged after the
        # checkpoint, so the curves continue without a doubled stretch.
        self.writer = SummaryWriter(log_dir=str(run_dir), purge_step=purge_step)
        self.where = f"{run_dir} (tensorboard --logdir {run_dir.parent})"

    def log(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, global_step=step)

    def log_histograms(self, tensors: dict[str, Any], step: int) -> None:
        for key, value in tensors.items():
            self.writer.add_histogram(key, value.detach().float().cpu(), global_step=step)

    def log_video(
        self, tag: str, frames: list[Any], step: int, fps: float, path: Path | None = None
    ) -> None:
        """The video as an animated GIF image summary (TensorBoard's Images tab plays it)."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        from super_sac.video import gif_bytes

        height, width = frames[0].shape[:2]
        image = Summary.Image(
            height=height, width=width, colorspace=3, encoded_image_string=gif_bytes(frames, fps)
        )
        summary = Summary(value=[Summary.Value(tag=tag, image=image)])
        self.writer._get_file_writer().add_summary(summary, step)

    def close(self) -> None:
        self.writer.close()


class MissingExtraError(ImportError):
    """An optional dependency that the chosen setting needs is not installed."""


WANDB_ID_FILE = "wandb_run_id.txt"


class WandbLogger(NullLogger):
    """Scalars to a wandb run (works offline with ``WANDB_MODE=offline``).

    In a run directory the wandb run's id is kept in :data:`WANDB_ID_FILE`, so a resumed run
    (``resume=True``) logs to the same wandb run (``resume="allow"``); the steps that the
    interrupted run had already logged after its checkpoint keep their first values (wandb
    steps only grow; a resumed run repeats them exactly on the same machine), where tensorboard
    drops them. A new run starts a new wandb run and writes its own id.

    :param resume: continue the wandb run whose id the run directory holds (a resumed run).
    :param step_metrics: ``{key prefix: x-axis name}`` for metrics that are not all logged
        against one growing step (the quick-start's losses against updates and returns against
        env steps): each metric is then plotted against its own axis, logged beside it
        (wandb's ``define_metric``), instead of being dropped when its step is smaller than
        another metric's.
    """

    def __init__(
        self,
        run_dir: Path | None,
        entity: str | None,
        project: str,
        name: str | None,
        config: dict[str, Any],
        tags: list[str] | None = None,
        step_metrics: dict[str, str] | None = None,
        resume: bool = False,
    ) -> None:
        try:
            import wandb
        except ImportError as err:
            raise MissingExtraError(
                "logging to wandb needs the wandb package: pip install 'super_sac[wandb]'"
            ) from err
        id_file = None if run_dir is None else Path(run_dir) / WANDB_ID_FILE
        resumable = resume and id_file is not None and id_file.is_file()
        run_id = id_file.read_text().strip() if resumable else None
        self.run = wandb.init(
            entity=entity,
            project=project,
            name=name,
            dir=None if run_dir is None else str(run_dir),
            config=config,
            tags=tags,
            id=run_id,
            resume="allow" if run_id else None,
            reinit=_reinit_setting(wandb.__version__),
        )
        if id_file is not None and run_id is None:
            atomic_write_text(id_file, self.run.id)
        # a resumed wandb run continues after the last step it holds (0 when offline)
        self._first_step = int(getattr(self.run, "step", 0) or 0) if run_id else 0
        self.step_metrics = dict(step_metrics or {})
        for prefix, axis in self.step_metrics.items():
            self.run.define_metric(axis)
            self.run.define_metric(f"{prefix}*", step_metric=axis)
        self.where = f"wandb {entity}/{project} ({getattr(self.run, 'url', None) or run_dir})"

    def log(self, metrics: dict[str, float], step: int) -> None:
        if step < self._first_step:
            return  # logged before the resume
        if not self.step_metrics:
            self.run.log(metrics, step=step)
            return
        axes = {
            axis
            for key in metrics
            for prefix, axis in self.step_metrics.items()
            if key.startswith(prefix)
        }
        self.run.log({**metrics, **dict.fromkeys(axes, step)})

    def log_video(
        self, tag: str, frames: list[Any], step: int, fps: float, path: Path | None = None
    ) -> None:
        """The written video file (wandb encodes arrays only with moviepy; a file needs nothing)."""
        if path is not None and step >= self._first_step:
            import wandb

            self.run.log({tag: wandb.Video(str(path), fps=int(round(fps)))}, step=step)

    def close(self) -> None:
        self.run.finish()


def _reinit_setting(version: str) -> bool | str:
    """``wandb.init``'s ``reinit`` that finishes a run still open in the process: the string
    from wandb 0.19.10 on (where a bool is deprecated), ``True`` before."""
    numbers = tuple(int(x) for x in re.findall(r"\d+", version)[:3])
    return "finish_previous" if numbers >= (0, 19, 10) else True


def resolve_wandb_target(entity: str | None, project: str | None) -> tuple[str, str]:
    """Fill the wandb entity/project from ``SSAC_WANDB_ACCOUNT``/``SSAC_WANDB_PROJECT``."""
    entity = entity or os.environ.get("SSAC_WANDB_ACCOUNT")
    project = project or os.environ.get("SSAC_WANDB_PROJECT")
    missing = [
        n
        for n, v in (
            ("wandb_entity / SSAC_WANDB_ACCOUNT", entity),
            ("wandb_project / SSAC_WANDB_PROJECT", project),
        )
        if not v
    ]
    if missing:
        raise ValueError(
            "logging_method='wandb' needs " + " and ".join(missing) + ": set the environment "
            "variables (export SSAC_WANDB_ACCOUNT=me SSAC_WANDB_PROJECT=myproj) or bind "
            "super_sac.wandb_entity / super_sac.wandb_project."
        )
    try:
        import wandb  # noqa: F401
    except ImportError as err:
        raise MissingExtraError(
            "logging_method='wandb' needs the wandb package: pip install 'super_sac[wandb]'"
        ) from err
    return entity, project  # type: ignore[return-value]


def make_logger(
    method: str,
    run_dir: Path | None,
    *,
    name: str,
    config: dict[str, Any],
    wandb_entity: str | None = None,
    wandb_project: str | None = None,
    purge_step: int | None = None,
) -> NullLogger:
    """Build the logger named by ``method`` (one of :data:`LOGGING_METHODS`).

    :param purge_step: for a resumed run, the step from which earlier tensorboard events are
        discarded (its wandb logger continues the run directory's wandb run); ``None`` for a
        new run.
    """
    if method == "none" or run_dir is None:
        return NullLogger()
    if method == "tensorboard":
        return TensorboardLogger(run_dir, purge_step)
    if method == "wandb":
        entity, project = resolve_wandb_target(wandb_entity, wandb_project)
        return WandbLogger(run_dir, entity, project, name, config, resume=purge_step is not None)
    raise ValueError(f"logging_method must be one of {LOGGING_METHODS}, got {method!r}")


# ------------------------------------------------------------------------------ run directories
def resolve_resume_dir(
    resume: bool | str | os.PathLike, base_save_path: str | None, name: str
) -> Path:
    """The run directory to resume: ``resume`` itself when it is a path, else (``True``) the
    newest ``<name>_<i>`` under ``base_save_path`` (default ``$SSAC_SAVE`` or ``./saves``)."""
    if isinstance(resume, (str, os.PathLike)):
        run_dir = Path(resume)
        if not run_dir.is_dir():
            raise CheckpointError(f"resume: run directory {run_dir} does not exist")
        return run_dir
    base = Path(base_save_path or os.environ.get("SSAC_SAVE", "./saves"))
    runs = [p for p in base.glob(f"{name}_*") if p.name[len(name) + 1 :].isdigit()]
    if not runs:
        raise CheckpointError(
            f"resume=True but {base} holds no run named {name}_<i>; pass the run "
            "directory itself as resume='saves/<name>_<i>'"
        )
    return max(runs, key=lambda p: int(p.name[len(name) + 1 :]))


def claim_run_dir(path: str | os.PathLike) -> Path:
    """Create the exact run directory ``path`` (a sweep's trial folder) for a new run.

    :raises FileExistsError: when it already holds a run (a ``summary.json``, a checkpoint or an
        event file): resume that run with ``resume=path`` or choose another folder.
    """
    run_dir = Path(path)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PermissionError(f"cannot create the run directory {run_dir} ({err})") from err
    taken = [
        p.name
        for p in (run_dir / "summary.json", run_dir / "checkpoints", run_dir / "agent.pt")
        if p.exists()
    ] + [p.name for p in run_dir.glob("events.out.tfevents.*")]
    if taken:
        resumable = (run_dir / "checkpoints").is_dir() and any((run_dir / "checkpoints").iterdir())
        fix = (
            "resume it (--resume / resume=...) or remove it first"
            if resumable
            else "it has no checkpoint to resume from (it stopped before its first one): "
            "remove it first"
        )
        raise FileExistsError(
            f"run_dir {run_dir} already holds a run ({', '.join(sorted(taken))}); {fix}"
        )
    return run_dir


class RunDirInUseError(RuntimeError):
    """Another process (or another run in this one) is writing the run directory."""


RUN_LOCK = ".run.lock"


def lock_run_dir(run_dir: Path) -> IO[str] | None:
    """Hold ``<run_dir>/.run.lock`` (an advisory ``flock``) while a run writes there, so that a
    second run into the same folder, or ``--resume`` of a run that is still going, stops before
    it writes anything. Close the returned file to release it (a killed run releases it too).

    :raises RunDirInUseError: when another run holds it.
    """
    try:
        return try_lock(run_dir / RUN_LOCK)
    except BlockingIOError:
        raise RunDirInUseError(
            f"{run_dir} is being written by another run (its {RUN_LOCK} is held), so this one "
            "would mix its checkpoints, evaluations and logs with that run's. Fix: wait for the "
            "other run to finish (or stop it), then resume; or choose another run directory"
        ) from None


def open_run_dir(
    cfg: TrainConfig, hparams: dict[str, Any], needed_bytes: int
) -> tuple[Path | None, IO[str] | None]:
    """The run's directory: reopened when ``cfg.resume``, else ``cfg.run_dir`` when set
    (:func:`claim_run_dir`), else a new ``<name>_<i>`` under ``base_save_path`` (when anything is
    saved or logged). Checks that it can hold
    ``needed_bytes`` of checkpoints and writes ``config.gin`` (the operative gin config) and
    ``hparams.json``, holding the directory's lock first (:func:`lock_run_dir`).

    :return: the directory (``None`` when the run writes nothing) and the lock's open file
        (close it when the run ends)."""
    if cfg.resume:
        run_dir = resolve_resume_dir(cfg.resume, cfg.base_save_path, cfg.name)
    elif cfg.run_dir is not None and (cfg.save_to_disk or cfg.log_to_disk):
        run_dir = claim_run_dir(cfg.run_dir)
    elif cfg.save_to_disk or cfg.log_to_disk:
        run_dir = make_run_dir(
            cfg.base_save_path or os.environ.get("SSAC_SAVE", "./saves"), cfg.name
        )
    else:
        return None, None
    lock = lock_run_dir(run_dir)
    try:
        check_writable(run_dir, needed_bytes)
        config_text = gin.operative_config_str() or "# no gin bindings were used for this run\n"
        atomic_write_text(run_dir / "config.gin", config_text)
        if cfg.resume:
            hparams = with_first_run_info(run_dir / "hparams.json", hparams)
        atomic_write_json(run_dir / "hparams.json", hparams)
    except BaseException:
        if lock is not None:
            lock.close()
        raise
    return run_dir, lock


def with_first_run_info(path: Path, hparams: dict[str, Any]) -> dict[str, Any]:
    """A resumed run's ``hparams``, whose settings are this session's, with the ``run_info``
    (script and command-line options) and the ``machine`` of the run's first session kept from
    the ``hparams.json`` at ``path``, and this session's appended to its ``resumes`` and
    ``resume_machines`` lists (a run resumed on another processor model no longer repeats an
    uninterrupted one to the digit; the lists show where it went on)."""
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError):
        return hparams
    if not isinstance(earlier, dict) or "run_info" not in earlier:
        return hparams  # (a first session from Python has a run_info of None, kept as such)
    resumes = json_list(earlier, "resumes")
    # one per resume, None for sessions from before machines were recorded
    machines = json_list(earlier, "resume_machines")[: len(resumes)]
    machines += [None] * (len(resumes) - len(machines))
    return {
        **hparams,
        "run_info": earlier["run_info"],
        "machine": earlier.get("machine"),
        "resumes": [*resumes, hparams.get("run_info")],
        "resume_machines": [*machines, hparams.get("machine")],
    }


def record_resumed_machine(path: Path, machine: dict[str, Any]) -> None:
    """Append ``machine`` (:func:`~super_sac.utils.machine_info`) to the ``resume_machines`` of
    the ``hparams.json`` at ``path``, for scripts that keep a run's first ``hparams.json`` on
    resume (the d3rlpy peer's trials); a missing or unreadable file is left as it is."""
    try:
        hparams = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if isinstance(hparams, dict):
        hparams["resume_machines"] = [*json_list(hparams, "resume_machines"), machine]
        atomic_write_json(path, hparams)


def check_writable(run_dir: Path, needed_bytes: int) -> None:
    """Fail before training if the run directory cannot hold files or the checkpoints."""
    probe = run_dir / ".write_probe"
    try:
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as err:
        raise PermissionError(
            f"cannot write to the run directory {run_dir} ({err}); set SSAC_SAVE or "
            "base_save_path to a writable folder"
        ) from err
    free = shutil.disk_usage(run_dir).free
    if needed_bytes > free:
        raise OSError(
            f"{run_dir} has {free / 2**20:.0f} MiB free but the checkpoints need about "
            f"{needed_bytes / 2**20:.0f} MiB (replay buffer included); free space, use "
            "another SSAC_SAVE, lower keep_checkpoints or the buffer size"
        )
