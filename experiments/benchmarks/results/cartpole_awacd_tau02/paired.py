"""AWAC-discrete on CartPole-v1: ``mlp_tau`` 0.02 against the default 0.005, paired by seed.

Run from the repository root:
``python experiments/benchmarks/results/cartpole_awacd_tau02/paired.py``.
"""

import csv

import numpy as np

from super_sac.sweep.stats import area_under_curve, stratified_bootstrap_ci

EVALUATIONS = "experiments/benchmarks/results/cartpole_awacd_tau02/evaluations"
SOLVED = 475.0


def curve(config: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    with open(f"{EVALUATIONS}/{config}_CartPole-v1_seed{seed}.csv") as f:
        rows = list(csv.DictReader(f))
    steps = np.array([float(r["env_steps"]) for r in rows])
    returns = np.array([float(r["return_mean"]) for r in rows])
    return steps, returns


def seed_stats(config: str, seed: int) -> dict:
    steps, returns = curve(config, seed)
    hit = returns >= SOLVED
    first = steps[np.argmax(hit)] if hit.any() else np.nan
    dips = [
        (int(t), round(float(y), 1)) for t, y in zip(steps, returns) if t > first and y < SOLVED
    ]
    return dict(
        first=first,
        solved=int(hit.sum()),
        final=returns[-1],
        last3=returns[-3:].mean(),
        auc=area_under_curve(steps, returns),
        dips=dips,
    )


stats = {c: [seed_stats(c, s) for s in range(5)] for c in ("awac_discrete", "awacd_tau02")}
for config, rows in stats.items():
    print(config)
    for seed, r in enumerate(rows):
        print(
            f"  seed {seed}: first >= 475 at {r['first']:.0f}, {r['solved']} of 20 solved, "
            f"final {r['final']:.1f}, last-3 {r['last3']:.1f}, AUC {r['auc']:.1f}, "
            f"dips {r['dips']}"
        )
for key in ("first", "solved", "final", "last3", "auc"):
    diffs = [b[key] - a[key] for a, b in zip(stats["awac_discrete"], stats["awacd_tau02"])]
    mean, low, high = stratified_bootstrap_ci([diffs], np.mean)
    shown = np.round(diffs, 1).tolist()
    print(f"{key}: tau 0.02 - default {shown} mean {mean:.1f} [{low:.1f}, {high:.1f}]")
