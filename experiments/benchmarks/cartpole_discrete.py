"""Benchmark: SAC-Discrete on CartPole-v1 against stable-baselines3's DQN at equal env steps.

Ours runs ``experiments/gym/sac_discrete.gin`` through ``train_gym.main`` (nothing written to
disk). SB3's DQN uses the rl-baselines3-zoo hyperparameters for CartPole-v1 (lr 2.3e-3, batch
64, buffer 100,000, 1,000 learning starts, gamma 0.99, hard target updates every 10 steps, 128
gradient steps every 256 env steps, epsilon 1 -> 0.04 over the first 16% of training, 256x256
MLP). Both are evaluated every ``--eval_every`` env steps with 10 deterministic (greedy)
episodes on a separate env. The issue's target: an evaluation return of at least 400 within
50,000 steps in at least 2 of 3 seeds.

Runs are sequential in one process with one torch thread.

    python experiments/benchmarks/cartpole_discrete.py
    python experiments/benchmarks/cartpole_discrete.py --seeds 0 --algos ours --steps 20000 \\
        --name cartpole_probe --gin_bindings "super_sac.n_step = 1"
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from typing import Any

import bench_utils
import numpy as np

ENV_ID = "CartPole-v1"
TARGET = 400.0
EVAL_EPISODES = 10
EVAL_SEED_OFFSET = 10_000
DQN_ZOO = {
    "learning_rate": 2.3e-3,
    "batch_size": 64,
    "buffer_size": 100_000,
    "learning_starts": 1_000,
    "gamma": 0.99,
    "target_update_interval": 10,
    "train_freq": 256,
    "gradient_steps": 128,
    "exploration_fraction": 0.16,
    "exploration_final_eps": 0.04,
    "policy_kwargs": {"net_arch": [256, 256]},
}


def run_ours(seed: int, steps: int, eval_every: int, extra: list[str]) -> dict[str, Any]:
    bindings = [
        f"super_sac.eval_interval = {eval_every}",
        f"super_sac.eval_episodes = {EVAL_EPISODES}",
        *extra,
    ]
    start = time.perf_counter()
    summary = bench_utils.run_ours("sac_discrete.gin", ENV_ID, seed, steps, bindings, threads=1)
    curve = [(int(e["env_steps"]), float(e["return_mean"])) for e in summary["eval_history"]]
    return {"curve": curve, "wall_seconds": time.perf_counter() - start}


def run_dqn(seed: int, steps: int, eval_every: int) -> dict[str, Any]:
    import gymnasium as gym
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import EvalCallback
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    eval_env = DummyVecEnv([lambda: Monitor(gym.make(ENV_ID))])
    eval_env.seed(seed + EVAL_SEED_OFFSET)
    # EvalCallback keeps its evaluation history only when it has a log_path
    log_dir = tempfile.mkdtemp(prefix="sb3_dqn_eval_")
    callback = EvalCallback(eval_env, n_eval_episodes=EVAL_EPISODES, eval_freq=eval_every,
                            deterministic=True, verbose=0, log_path=log_dir)
    model = DQN("MlpPolicy", gym.make(ENV_ID), seed=seed, device="cpu", verbose=0, **DQN_ZOO)
    start = time.perf_counter()
    model.learn(total_timesteps=steps, callback=callback)
    curve = [(int(t), float(np.mean(r)))
             for t, r in zip(callback.evaluations_timesteps, callback.evaluations_results)]
    return {"curve": curve, "wall_seconds": time.perf_counter() - start}


def score(curve: list[tuple[int, float]], steps: int) -> dict[str, Any]:
    """First step with a return >= TARGET, best and final returns within ``steps``."""
    within = [(t, r) for t, r in curve if t <= steps]
    first = next((t for t, r in within if r >= TARGET), None)
    return {
        "first_step_at_target": first,
        "reached_target": first is not None,
        "best_return": max(r for _, r in within),
        "final_return": within[-1][1],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=50_000)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--algos", default="ours,sb3_dqn")
    p.add_argument("--eval_every", type=int, default=2_500)
    p.add_argument("--gin_bindings", action="append", default=[],
                   help="extra bindings for ours (tuning attempts)")
    p.add_argument("--name", default="cartpole_discrete")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    seeds = [int(s) for s in args.seeds.split(",")]
    algos = args.algos.split(",")
    runs = []
    for algo in algos:
        for seed in seeds:
            if algo == "ours":
                out = run_ours(seed, args.steps, args.eval_every, args.gin_bindings)
            else:
                out = run_dqn(seed, args.steps, args.eval_every)
            run = {"algo": algo, "seed": seed, **out, **score(out["curve"], args.steps)}
            runs.append(run)
            partial = bench_utils.RESULTS_DIR / f"{args.name}.partial.json"
            partial.write_text(json.dumps(runs, indent=2) + "\n")  # nothing lost on a crash
            print(f"{algo} seed {seed}: first >= {TARGET:.0f} at {run['first_step_at_target']}, "
                  f"best {run['best_return']:.1f}, final {run['final_return']:.1f} "
                  f"({run['wall_seconds']:.0f} s)", flush=True)
    rows = []
    for algo in algos:
        mine = [r for r in runs if r["algo"] == algo]
        rows.append([
            algo, f"{sum(r['reached_target'] for r in mine)}/{len(mine)}",
            ", ".join(str(r["first_step_at_target"]) for r in mine),
            ", ".join(f"{r['best_return']:.1f}" for r in mine),
            ", ".join(f"{r['final_return']:.1f}" for r in mine),
            f"{np.mean([r['wall_seconds'] for r in mine]):.0f}",
        ])
    table = bench_utils.markdown_table(
        ["algorithm", f"seeds >= {TARGET:.0f}", "first step >= target", "best eval",
         "final eval", "wall s / run"], rows)
    header = (
        f"# SAC-Discrete vs SB3 DQN on {ENV_ID}\n\n{args.steps} env steps, seeds {seeds}, "
        f"evaluation every {args.eval_every} steps ({EVAL_EPISODES} greedy episodes). "
        f"Extra bindings for ours: {args.gin_bindings or 'none'}.\n\n"
    )
    print("\n" + table, flush=True)
    payload = {
        "benchmark": "cartpole_discrete", "env": ENV_ID,
        "settings": {"steps": args.steps, "seeds": seeds, "eval_every": args.eval_every,
                     "eval_episodes": EVAL_EPISODES, "ours_config": "sac_discrete.gin",
                     "ours_extra_bindings": args.gin_bindings, "sb3_dqn": DQN_ZOO,
                     "torch_threads": 1},
        "versions": bench_utils.versions(),
        "runs": runs,
    }
    bench_utils.write_results(args.name, header + table, payload)
    (bench_utils.RESULTS_DIR / f"{args.name}.partial.json").unlink(missing_ok=True)
    return payload


if __name__ == "__main__":
    main()
