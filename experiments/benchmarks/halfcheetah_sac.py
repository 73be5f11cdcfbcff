"""Benchmark (c), optional: our SAC on HalfCheetah-v5 for 100,000 env steps, one seed.

Runs ``experiments/gym/train_gym.py`` with ``sac.gin`` (hidden 256x256, batch 256, lr 3e-4,
1,000 random warm-up steps, one update per env step), nothing written to disk, and prints the
return of the final evaluation (10 deterministic episodes after the last step) and the wall
time. Intermediate evaluations every ``--eval_interval`` steps are printed too. For reference,
published SAC learning curves are at a few thousand (very roughly 3,000-5,000) on HalfCheetah
after 100k steps.

At the ~100 updates per second measured on 2 quiet CPU cores (2 torch threads) the run takes
roughly 20-40 minutes, more on a busy machine; ``--steps 2000`` checks that everything starts.

    python experiments/benchmarks/halfcheetah_sac.py
    python experiments/benchmarks/halfcheetah_sac.py --steps 2000 --eval_episodes 1
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import bench_utils

ENV_ID = "HalfCheetah-v5"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=100_000, help="env steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    p.add_argument("--eval_interval", type=int, default=10_000,
                   help="steps between evaluations (one more always runs at the end)")
    p.add_argument("--eval_episodes", type=int, default=10)
    p.add_argument("--write", action="store_true",
                   help="write results/halfcheetah_sac.{md,json}")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    warnings.filterwarnings("ignore")
    bindings = [
        f"super_sac.eval_interval = {args.eval_interval}",
        f"super_sac.eval_episodes = {args.eval_episodes}",
        "super_sac.verbosity = 1",  # keep the progress bar for a run this long
    ]
    start = time.perf_counter()
    summary = bench_utils.run_ours("sac.gin", ENV_ID, args.seed, args.steps, bindings,
                                   args.threads)
    wall = time.perf_counter() - start
    for ev in summary["eval_history"]:
        print(f"  eval at {ev['env_steps']:>7} steps: {ev['return_mean']:.1f} "
              f"+- {ev['return_std']:.1f}")
    print(f"final evaluation return: {summary['final_eval_return']:.1f} "
          f"({args.eval_episodes} episodes, seed {args.seed})")
    print(f"wall time: {wall / 60:.1f} min ({summary['env_steps_per_s']:.1f} env steps/s)")
    result = {
        "benchmark": "halfcheetah_sac",
        "env": ENV_ID,
        "settings": vars(args),
        "versions": bench_utils.versions(),
        "final_eval_return": summary["final_eval_return"],
        "wall_seconds": wall,
        "env_steps_per_s": summary["env_steps_per_s"],
        "eval_history": summary["eval_history"],
    }
    if args.write:
        table = bench_utils.markdown_table(
            ["env steps", "eval return (mean)", "std"],
            [[ev["env_steps"], f"{ev['return_mean']:.1f}", f"{ev['return_std']:.1f}"]
             for ev in summary["eval_history"]],
        )
        md = (f"# SAC on {ENV_ID}\n\n{args.steps} steps, seed {args.seed}, {args.threads} "
              f"threads; wall time {wall / 60:.1f} min.\n\n{table}")
        bench_utils.write_results("halfcheetah_sac", md, result)
    return result


if __name__ == "__main__":
    main()
