"""Benchmark (b): training throughput, our SAC against stable-baselines3's SAC on Pendulum-v1.

Both sides run SAC with hidden layers 256x256, batch 256, two critics, automatic entropy tuning
and one gradient step (critic, actor, alpha, target update) per env step, on the CPU with
``--threads`` torch threads (default 2). What is measured is env steps per second in the phase
where updates happen, excluding the random warm-up and anything after the last update:

* ours: ``train_gym.main`` (logging and saving off, ``eval_interval`` larger than the run and
  ``eval_episodes = 1``: the loop always evaluates once at the end, and 0 episodes is rejected
  at that point) is run twice with ``random_warmup_steps = W``: once for ``W + N`` steps and once
  for ``W`` steps only (no updates). Both summaries' ``wall_seconds`` cover the warm-up, the
  same single evaluation episode and the loop's bookkeeping, so the difference is the time of
  the N update steps, and the throughput is ``N / (wall(W + N) - wall(W))``.
* SB3: ``SAC(learning_starts=W, train_freq=1, gradient_steps=1)``; ``learn(W)`` collects the
  warm-up (SB3 trains only once ``num_timesteps > learning_starts``, so no update runs), then a
  second ``learn(N, reset_num_timesteps=False)`` is timed: N env steps with one update each.

So both sides time N env steps with N updates, starting from a buffer of W random transitions
(updates start at env step W + 1 on both sides). Each round builds fresh agents. Rounds
alternate which side goes first, to spread slow drifts of a shared machine over both; the
report gives each side's median over ``--repeats`` rounds, the ratio of the medians and, less
sensitive to load that changes between rounds, the median of the per-round ratios.

    python experiments/benchmarks/throughput.py
    python experiments/benchmarks/throughput.py --steps 3000 --repeats 3 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Any

import bench_utils

ENV_ID = "Pendulum-v1"
HIDDEN = 256
BATCH_SIZE = 256
LR = 3e-4


def ours_steps_per_s(
    steps: int, warmup: int, seed: int, threads: int, precision: str = "highest"
) -> dict[str, float]:
    """Throughput of our SAC over ``steps`` update steps (see the module docstring)."""
    bindings = [
        f"super_sac.matmul_precision = {precision!r}",
        f"Agent.hidden_size = {HIDDEN}",
        f"super_sac.batch_size = {BATCH_SIZE}",
        f"super_sac.random_warmup_steps = {warmup}",
        "super_sac.eval_episodes = 1",
        f"super_sac.eval_interval = {warmup + steps + 1}",
        "super_sac.critic_updates_per_step = 1",
        "super_sac.pg_actor_updates_per_step = 1",
        *bench_utils.lr_bindings(LR, with_alpha=True),
    ]
    full = bench_utils.run_ours("sac.gin", ENV_ID, seed, warmup + steps, bindings, threads)
    base = bench_utils.run_ours("sac.gin", ENV_ID, seed, warmup, bindings, threads)
    if full["critic_updates"] != steps or base["critic_updates"] != 0:
        raise RuntimeError(
            f"expected {steps} and 0 updates, got {full['critic_updates']} and "
            f"{base['critic_updates']}"
        )
    update_wall = full["wall_seconds"] - base["wall_seconds"]
    return {
        "steps_per_s": steps / update_wall,
        "update_phase_seconds": update_wall,
        "full_run_seconds": full["wall_seconds"],
        "warmup_run_seconds": base["wall_seconds"],
    }


def sb3_steps_per_s(
    steps: int, warmup: int, seed: int, precision: str = "highest"
) -> dict[str, float]:
    """Throughput of SB3's SAC over ``steps`` update steps (see the module docstring)."""
    import gymnasium as gym
    from stable_baselines3 import SAC

    from super_sac.utils import matmul_precision

    model = SAC(
        "MlpPolicy", gym.make(ENV_ID), learning_rate=LR, learning_starts=warmup,
        batch_size=BATCH_SIZE, train_freq=1, gradient_steps=1,
        policy_kwargs={"net_arch": [HIDDEN, HIDDEN]}, seed=seed, device="cpu", verbose=0,
    )
    model.learn(total_timesteps=warmup)
    updates_before = model._n_updates
    with matmul_precision(precision):
        start = time.perf_counter()
        model.learn(total_timesteps=steps, reset_num_timesteps=False)
        wall = time.perf_counter() - start
    updates = model._n_updates - updates_before
    if updates_before != 0 or updates != steps:
        raise RuntimeError(f"expected 0 and {steps} SB3 updates, got {updates_before}, {updates}")
    model.get_env().close()
    return {"steps_per_s": steps / wall, "update_phase_seconds": wall}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=3000, help="timed env steps (one update each)")
    p.add_argument("--warmup", type=int, default=500, help="random steps before the timed part")
    p.add_argument("--repeats", type=int, default=3, help="rounds of ours + SB3")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--precision", default="highest", choices=["highest", "high", "medium"],
                   help="our float32 matmul precision (super_sac.matmul_precision); 'medium' "
                   "uses bfloat16 products on AMX/AVX512-BF16 CPUs")
    p.add_argument("--sb3_precision", default="highest", choices=["highest", "high", "medium"],
                   help="the same process-wide torch setting while SB3 trains")
    p.add_argument("--name", default="throughput",
                   help="basename of the result files in experiments/benchmarks/results/")
    args = p.parse_args(argv)
    if args.warmup < BATCH_SIZE:
        p.error(f"--warmup must be at least the batch size ({BATCH_SIZE})")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import torch

    args = parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    rounds: list[dict[str, Any]] = []
    for r in range(args.repeats):
        order = ("ours", "sb3") if r % 2 == 0 else ("sb3", "ours")
        result: dict[str, Any] = {"round": r, "order": list(order)}
        for side in order:
            if side == "ours":
                result["ours"] = ours_steps_per_s(args.steps, args.warmup, args.seed,
                                                  args.threads, args.precision)
            else:
                torch.set_num_threads(args.threads)
                result["sb3"] = sb3_steps_per_s(args.steps, args.warmup, args.seed,
                                                args.sb3_precision)
        result["ratio"] = result["ours"]["steps_per_s"] / result["sb3"]["steps_per_s"]
        rounds.append(result)
        print(f"round {r}: ours {result['ours']['steps_per_s']:.1f} steps/s, "
              f"SB3 {result['sb3']['steps_per_s']:.1f} steps/s, ratio {result['ratio']:.2f}",
              flush=True)
    ours_med = statistics.median(r["ours"]["steps_per_s"] for r in rounds)
    sb3_med = statistics.median(r["sb3"]["steps_per_s"] for r in rounds)
    ratio = ours_med / sb3_med
    paired = statistics.median(r["ratio"] for r in rounds)
    table = bench_utils.markdown_table(
        ["implementation", "median steps/s", *[f"round {r['round']}" for r in rounds]],
        [
            ["super_sac SAC", f"{ours_med:.1f}",
             *[f"{r['ours']['steps_per_s']:.1f}" for r in rounds]],
            ["SB3 SAC", f"{sb3_med:.1f}", *[f"{r['sb3']['steps_per_s']:.1f}" for r in rounds]],
        ],
    )
    round_ratios = ", ".join(f"{r['ratio']:.2f}" for r in rounds)
    interval = bench_utils.ratio_interval([r["ratio"] for r in rounds])
    table += (f"\n\nRatio of medians ours / SB3: **{ratio:.2f}**; median of the per-round "
              f"ratios: {paired:.2f} (rounds: {round_ratios}); mean of the per-round ratios "
              f"{interval['mean']:.2f}, 95% bootstrap interval over rounds "
              f"[{interval['ci_low']:.2f}, {interval['ci_high']:.2f}]")
    print("\n" + table, flush=True)
    header = (
        "# SAC training throughput on Pendulum-v1\n\n"
        f"Env steps per second with one gradient update per env step, measured over {args.steps} "
        f"steps after {args.warmup} random warm-up steps; hidden {HIDDEN}x{HIDDEN}, batch "
        f"{BATCH_SIZE}, {args.threads} torch threads, CPU, {args.repeats} alternating rounds "
        f"in one process; float32 matmul precision: ours {args.precision!r}, SB3 "
        f"{args.sb3_precision!r}. See throughput.py for how each side is timed.\n\n"
    )
    payload = {
        "benchmark": "throughput",
        "env": ENV_ID,
        "settings": {"steps": args.steps, "warmup": args.warmup, "repeats": args.repeats,
                     "threads": args.threads, "seed": args.seed, "hidden": HIDDEN,
                     "precision": args.precision, "sb3_precision": args.sb3_precision,
                     "batch_size": BATCH_SIZE, "lr": LR},
        "versions": bench_utils.versions(),
        "ours_median_steps_per_s": ours_med,
        "sb3_median_steps_per_s": sb3_med,
        "ratio_ours_over_sb3": ratio,
        "median_round_ratio": paired,
        "round_ratio_interval": interval,
        "rounds": rounds,
    }
    md, js = bench_utils.write_results(args.name, header + table, payload)
    print(f"\nwrote {md} and {js}", flush=True)
    return payload


if __name__ == "__main__":
    main()
