"""Metric loggers: tensorboard, wandb or none."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

LOGGING_METHODS = ("tensorboard", "wandb", "none")


class NullLogger:
    """Discards every metric."""

    where = "nowhere (logging_method='none')"

    def log(self, metrics: dict[str, float], step: int) -> None:
        pass

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

    def close(self) -> None:
        self.writer.close()


class WandbLogger(NullLogger):
    """Scalars to a wandb run (works offline with ``WANDB_MODE=offline``)."""

    def __init__(
        self, run_dir: Path, entity: str, project: str, name: str, config: dict[str, Any]
    ) -> None:
        import wandb

        self.run = wandb.init(
            entity=entity, project=project, name=name, dir=str(run_dir), config=config, reinit=True
        )
        self.where = f"wandb {entity}/{project} ({getattr(self.run, 'url', None) or run_dir})"

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


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
        raise ImportError(
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
        discarded.
    """
    if method == "none" or run_dir is None:
        return NullLogger()
    if method == "tensorboard":
        return TensorboardLogger(run_dir, purge_step)
    if method == "wandb":
        entity, project = resolve_wandb_target(wandb_entity, wandb_project)
        return WandbLogger(run_dir, entity, project, name, config)
    raise ValueError(f"logging_method must be one of {LOGGING_METHODS}, got {method!r}")
