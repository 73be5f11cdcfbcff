"""PNG learning curves: a sweep's mean per config with a bootstrap band, and single runs."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from super_sac.reporting import EVAL_CSV
from super_sac.sweep.archive import SweepDirs
from super_sac.sweep.runs import _curve, _has_online, _rows_of_run, collect


def _mean_band(runs: list[tuple[np.ndarray, np.ndarray]], seed: int, reps: int = 1000):
    """Mean curve and a 95% bootstrap band over runs, on the union of their steps (each run
    interpolated inside its own range)."""
    steps = np.unique(np.concatenate([s for s, _ in runs]))
    table = np.full((len(runs), steps.size), np.nan)
    for i, (s, v) in enumerate(runs):
        inside = (steps >= s[0]) & (steps <= s[-1])
        table[i, inside] = np.interp(steps[inside], s, v)
    rng = np.random.default_rng(seed)
    mean, low, high = (np.full(steps.size, np.nan) for _ in range(3))
    for j in range(steps.size):
        col = table[:, j][~np.isnan(table[:, j])]
        if col.size == 0:
            continue
        boot = col[rng.integers(0, col.size, size=(reps, col.size))].mean(axis=1)
        mean[j] = col.mean()
        low[j], high[j] = np.percentile(boot, [2.5, 97.5])
    return steps, mean, low, high


def plot_curves(
    sweep_dirs: SweepDirs,
    path: str | os.PathLike,
    metric: str = "eval_return",
    archives: Sequence[str | os.PathLike] = (),
) -> Path:
    """PNG learning curves of one sweep folder or several (and ``archives``, see
    :func:`collect`): one panel per env, per config the mean over seeds with its 95% bootstrap
    band. :return: the file written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = collect(sweep_dirs, metric, archives)
    envs = data["envs"]
    cols = min(len(envs), 3)
    rows = math.ceil(len(envs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for k, env in enumerate(envs):
        ax = axes[k // cols][k % cols]
        for stem in data["configs"]:
            runs = data["curves"].get((stem, env))
            if not runs:
                continue
            steps, mean, low, high = _mean_band(runs, seed=0)
            (line,) = ax.plot(steps, mean, label=f"{stem} ({len(runs)} seeds)")
            ax.fill_between(steps, low, high, alpha=0.25, color=line.get_color())
        ax.set_title(env)
        ax.set_xlabel("gradient steps (offline)" if data["offline_only"] else "env steps")
        ax.set_ylabel(metric)
        ax.legend(fontsize="small")
    for k in range(len(envs), rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def plot_runs(
    run_dirs: list[str | os.PathLike], path: str | os.PathLike, column: str = "return_mean"
) -> Path:
    """One panel with the ``column`` curve of each run in ``run_dirs`` (their
    ``evaluations.csv``), against env steps, or against gradient steps when no run has an
    online evaluation (:func:`read_curve`).

    :raises FileNotFoundError: for a run without evaluations.
    :raises ValueError: when online and offline-only runs are mixed (two different x-axes).
    """
    rows_of = {}
    for run_dir in run_dirs:
        run = Path(run_dir)
        rows_of[run] = _rows_of_run(run)
        if not rows_of[run]:
            raise FileNotFoundError(f"{run_dir} has no {EVAL_CSV} (or no evaluation yet)")
    online = {run: _has_online(rows) for run, rows in rows_of.items()}
    if len(set(online.values())) > 1:
        offline = [str(run) for run, has in online.items() if not has]
        raise ValueError(
            f"{', '.join(offline)} evaluated offline only (x-axis: gradient steps) while the "
            "other runs evaluated online (x-axis: env steps); plot them separately"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for run, rows in rows_of.items():
        steps, values = _curve(rows, column)
        ax.plot(steps, values, marker="." if steps.size < 30 else None, label=run.name)
    ax.set_xlabel("env steps" if all(online.values()) else "gradient steps (offline)")
    ax.set_ylabel(column)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
