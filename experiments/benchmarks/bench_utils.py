"""Helpers shared by the benchmark scripts in this folder.

The scripts are run as files (``python experiments/benchmarks/<name>.py``), so this module is
imported as a sibling (Python puts the script's folder first on its path). It runs our library
through :func:`super_sac.cli.train_gym` (the command line of ``experiments/gym/train_gym.py``)
with nothing written to disk, and writes result tables.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
RESULTS_DIR = HERE / "results"
GYM_CONFIGS = REPO_ROOT / "experiments" / "gym"

# Bindings that keep a run of ours entirely in memory: no run directory, no logger, no tqdm bar.
QUIET_BINDINGS: tuple[str, ...] = (
    "super_sac.save_to_disk = False",
    "super_sac.log_to_disk = False",
    "super_sac.verbosity = 0",
)


def run_ours(
    config: str,
    env_id: str,
    seed: int,
    steps: int,
    bindings: Sequence[str],
    threads: int,
) -> dict[str, Any]:
    """Train our agent through :func:`super_sac.cli.train_gym` and return its summary dict.

    ``train_gym`` finalises (locks) the global gin config when it parses the gin files, so
    a second call in the same process would fail with "Attempted to modify locked Gin config";
    the config is therefore cleared before every call.

    :param config: gin file name in ``experiments/gym`` (``sac.gin``, ``td3.gin``, ...).
    :param env_id: gymnasium env id.
    :param seed: run seed.
    :param steps: ``super_sac.num_steps_online``.
    :param bindings: extra gin bindings, applied after :data:`QUIET_BINDINGS`.
    :param threads: torch CPU threads.
    """
    import gin

    from super_sac import cli

    gin.clear_config()
    argv = [
        "--env", env_id, "--config", config, "--seed", str(seed), "--steps", str(steps),
        "--threads", str(threads), "--logging", "none", "--device", "cpu",
    ]
    for binding in (*QUIET_BINDINGS, *bindings):
        argv += ["--gin_bindings", binding]
    return cli.train_gym(argv, search_dirs=[GYM_CONFIGS])


def lr_bindings(lr: float, with_alpha: bool) -> list[str]:
    """Gin bindings that give every optimizer of ours (and alpha's, for SAC) the rate ``lr``."""
    out = [f"super_sac.{key} = {lr!r}" for key in ("actor_lr", "critic_lr", "encoder_lr")]
    if with_alpha:
        out.append(f"super_sac.alpha_lr = {lr!r}")
    return out


def versions() -> dict[str, Any]:
    """Versions of the interpreter and the libraries the benchmarks depend on, and the
    processor they ran on (:func:`super_sac.utils.machine_info`: model, family and model
    numbers, torch's kernel instruction set), since speeds and ratios differ between processors.
    """
    import gymnasium
    import numpy
    import stable_baselines3
    import torch

    from super_sac.utils import machine_info

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gymnasium": gymnasium.__version__,
        "stable_baselines3": stable_baselines3.__version__,
        "numpy": numpy.__version__,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "processor": machine_info(),
    }


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def ratio_interval(ratios: Sequence[float], seed: int = 0) -> dict[str, float]:
    """The per-round speed ratios summarised: their mean with a 95% percentile bootstrap
    interval over rounds, and their range (with 3 rounds the interval is close to the range;
    more rounds narrow it)."""
    import numpy as np

    from super_sac.sweep.stats import stratified_bootstrap_ci

    values = [float(r) for r in ratios]
    if not values:
        raise ValueError("ratio_interval needs at least one round")
    mean, low, high = stratified_bootstrap_ci({"rounds": values}, np.mean, seed=seed)
    return {"mean": mean, "ci_low": low, "ci_high": high, "min": min(values), "max": max(values)}


def format_ratio_interval(ratios: Sequence[float]) -> str:
    """``"mean [low, high]"`` of :func:`ratio_interval`, two decimals (a table cell)."""
    out = ratio_interval(ratios)
    return f"{out['mean']:.2f} [{out['ci_low']:.2f}, {out['ci_high']:.2f}]"


def write_results(
    name: str, markdown: str, payload: dict[str, Any], results_dir: Path | None = None
) -> tuple[Path, Path]:
    """Write ``<results_dir>/<name>.md`` and ``<results_dir>/<name>.json`` (default folder:
    ``results/`` beside this file); return both paths."""
    folder = RESULTS_DIR if results_dir is None else Path(results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    md_path = folder / f"{name}.md"
    json_path = folder / f"{name}.json"
    md_path.write_text(markdown.rstrip() + "\n")
    json_path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return md_path, json_path
