"""Benchmark: SAC-Discrete on MinAtar breakout (or ``--game``) against a uniform random policy.

Ours runs ``experiments/minatar/basic_online.gin`` through ``super_sac.cli.train_minatar`` for
``--steps`` env steps (default 100,000) with nothing written to disk, evaluated every
``--eval_every`` steps with 10 greedy episodes. The random policy plays ``--random_episodes``
episodes of the same env (minimal action set, sticky actions 0.1, the same 10,000-step limit).
The issue's target: ours at 100,000 steps scores at least 5x the random policy's mean return.
``--random_only`` prints the random policy's mean and writes nothing (the random reference of
the MinAtar tables against DQN).

    python experiments/benchmarks/minatar_breakout.py
    python experiments/benchmarks/minatar_breakout.py --steps 20000 --name minatar_probe
    python experiments/benchmarks/minatar_breakout.py --game space_invaders --random_only
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import bench_utils
import numpy as np

from super_sac import cli

GAME = "breakout"  # the default --game
GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")
MAX_EPISODE_STEPS = 10_000
EVAL_EPISODES = 10
MINATAR_CONFIGS = bench_utils.REPO_ROOT / "experiments" / "minatar"


def run_ours(
    seed: int, steps: int, eval_every: int, extra: list[str], game: str = GAME
) -> dict[str, Any]:
    import gin

    gin.clear_config()
    argv = ["--game", game, "--config", "basic_online.gin", "--seed", str(seed),
            "--steps", str(steps), "--threads", "1", "--logging", "none", "--device", "cpu",
            "--max_episode_steps", str(MAX_EPISODE_STEPS)]
    bindings = [*bench_utils.QUIET_BINDINGS, f"super_sac.eval_interval = {eval_every}",
                f"super_sac.eval_episodes = {EVAL_EPISODES}", *extra]
    for b in bindings:
        argv += ["--gin_bindings", b]
    start = time.perf_counter()
    summary = cli.train_minatar(argv, search_dirs=[MINATAR_CONFIGS])
    curve = [(int(e["env_steps"]), float(e["return_mean"])) for e in summary["eval_history"]]
    return {"curve": curve, "final_return": curve[-1][1], "best_return": max(r for _, r in curve),
            "env_steps_per_s": summary["env_steps_per_s"],
            "wall_seconds": time.perf_counter() - start}


def run_random(seed: int, episodes: int, game: str = GAME) -> dict[str, Any]:
    from super_sac.wrappers import make_minatar_env

    env = make_minatar_env(game, max_episode_steps=MAX_EPISODE_STEPS)
    rng = np.random.default_rng(seed)
    returns = []
    for i in range(episodes):
        env.reset(seed=seed * 100_000 + i)
        total, done = 0.0, False
        while not done:
            _, r, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
            total += r
            done = terminated or truncated
        returns.append(total)
    return {"mean_return": float(np.mean(returns)), "std_return": float(np.std(returns)),
            "episodes": episodes}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--game", choices=GAMES, default=GAME)
    p.add_argument("--random_only", action="store_true",
                   help="print the random policy's mean return and stop (nothing is written)")
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval_every", type=int, default=10_000)
    p.add_argument("--random_episodes", type=int, default=200)
    p.add_argument("--gin_bindings", action="append", default=[])
    p.add_argument("--name", default=None, help="results name (default minatar_<game>)")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    random = run_random(args.seed, args.random_episodes, args.game)
    print(f"random policy on {args.game}: {random['mean_return']:.3f} over "
          f"{args.random_episodes} episodes", flush=True)
    if args.random_only:
        return {"random": random}
    ours = run_ours(args.seed, args.steps, args.eval_every, args.gin_bindings, args.game)
    ratio = ours["final_return"] / random["mean_return"] if random["mean_return"] else np.inf
    table = bench_utils.markdown_table(
        ["policy", "return at the end", "best evaluation", "ratio to random"],
        [["SAC-Discrete (basic_online.gin)", f"{ours['final_return']:.2f}",
          f"{ours['best_return']:.2f}", f"{ratio:.1f}x"],
         ["uniform random", f"{random['mean_return']:.2f}", "", "1.0x"]])
    curve = ", ".join(f"{t}: {r:.2f}" for t, r in ours["curve"])
    header = (
        f"# SAC-Discrete on MinAtar {args.game}\n\n{args.steps} env steps, seed {args.seed}, "
        f"{EVAL_EPISODES} greedy evaluation episodes every {args.eval_every} steps; random "
        f"policy over {args.random_episodes} episodes. Extra bindings: "
        f"{args.gin_bindings or 'none'}. {ours['env_steps_per_s']:.0f} env steps/s, "
        f"{ours['wall_seconds'] / 60:.1f} min.\n\nEvaluation curve: {curve}\n\n"
    )
    print("\n" + table, flush=True)
    payload = {
        "benchmark": "minatar_breakout",
        "game": args.game,
        "settings": {"steps": args.steps, "seed": args.seed, "eval_every": args.eval_every,
                     "eval_episodes": EVAL_EPISODES, "max_episode_steps": MAX_EPISODE_STEPS,
                     "config": "experiments/minatar/basic_online.gin",
                     "extra_bindings": args.gin_bindings, "torch_threads": 1},
        "versions": bench_utils.versions(),
        "ours": ours, "random": random, "ratio_final_to_random": ratio,
        "target_met": ratio >= 5.0,
    }
    bench_utils.write_results(args.name or f"minatar_{args.game}", header + table, payload)
    return payload


if __name__ == "__main__":
    main()
