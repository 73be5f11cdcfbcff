"""Two configs of a committed report, paired by seed, with the time and share of the run solved.

``sweep.py report --paired`` pairs the final score, the last-k mean and the area under the curve;
this adds, for a return threshold (CartPole's solved level by default), each seed's first
evaluation at or above it, how many of its evaluations are at or above it, and the evaluations
where it fell back below after first reaching it, then the mean difference ``NEW - BASE`` of
each with a 95% bootstrap interval over the seeds. It reads the ``evaluations/`` folder that
``sweep.py report --evaluations`` copies beside a report.

Usage::

    python experiments/benchmarks/solved_paired.py \\
        experiments/benchmarks/results/cartpole_awacd_tau02 --base awac_discrete --new awacd_tau02
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from super_sac.sweep.archive import archived_runs
from super_sac.sweep.runs import read_curve
from super_sac.sweep.stats import first_reach, run_scores, stratified_bootstrap_ci

RunFiles = dict[tuple[str, str, int], Path]


def run_files(folder: str | Path) -> RunFiles:
    """The report folder's archived evaluations (:func:`archived_runs`), by config, env and
    seed."""
    return {(run.config, run.env, run.seed): run.source for run in archived_runs(folder)}


def curve(runs: RunFiles, config: str, env: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One run's ``(env_steps, return_mean)`` (:func:`read_curve` of its archived file)."""
    path = runs.get((config, env, seed))
    if path is None:
        raise SystemExit(
            f"no evaluations of {config!r} on {env} at seed {seed}: is {config!r} a config of "
            "this report?"
        )
    return read_curve(path)


def seed_stats(steps: np.ndarray, returns: np.ndarray, solved: float) -> dict[str, Any]:
    """First step at or above ``solved`` (nan if never), evaluations at or above it, final,
    last-3 mean, area under the curve (:func:`run_scores`), and the ``(step, return)`` dips after
    the first hit."""
    reached = first_reach(steps, returns, solved)
    first = np.nan if reached is None else reached
    dips = [
        (int(t), round(float(y), 1)) for t, y in zip(steps, returns) if t > first and y < solved
    ]
    scores = run_scores(steps, returns, last=3)
    return dict(
        first=first,
        solved=int((returns >= solved).sum()),
        evaluations=len(returns),
        final=scores["final"],
        last3=scores["last"],
        auc=scores["auc"],
        dips=dips,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folder",
        type=Path,
        help="a report folder with evaluations/ (sweep.py report --evaluations)",
    )
    parser.add_argument("--base", required=True, help="the config to compare with (gin stem)")
    parser.add_argument("--new", required=True, help="the config compared (gin stem)")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    parser.add_argument("--solved", type=float, default=475.0, help="the return threshold")
    args = parser.parse_args(argv)
    runs = run_files(args.folder)
    stats = {
        config: [
            seed_stats(*curve(runs, config, args.env, seed), args.solved)
            for seed in range(args.seeds)
        ]
        for config in (args.base, args.new)
    }
    for config, rows in stats.items():
        print(config)
        for seed, r in enumerate(rows):
            print(
                f"  seed {seed}: first >= {args.solved:g} at {r['first']:.0f}, {r['solved']} of "
                f"{r['evaluations']} solved, final {r['final']:.1f}, last-3 {r['last3']:.1f}, "
                f"AUC {r['auc']:.1f}, dips {r['dips']}"
            )
    for key in ("first", "solved", "final", "last3", "auc"):
        diffs = [b[key] - a[key] for a, b in zip(stats[args.base], stats[args.new])]
        if np.isnan(diffs).any():
            print(f"{key}: a seed never reached {args.solved:g}, no paired difference")
            continue
        mean, low, high = stratified_bootstrap_ci([diffs], np.mean)
        shown = np.round(diffs, 1).tolist()
        print(f"{key}: {args.new} - {args.base} {shown} mean {mean:.1f} [{low:.1f}, {high:.1f}]")


if __name__ == "__main__":
    main()
