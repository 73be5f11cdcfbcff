"""Learning DeepMind Control's cartpole_swingup from pixels (issue 15, benchmark 6a).

Each seed trains one run of ``experiments/dmc/train_dmc_from_pixels.py`` (default config
``drqv2.gin``) for ``--frames`` env frames (agent steps x ``--action_repeat``) and is scored by
the mean return of ``--eval_episodes`` deterministic evaluation episodes at the end. The
reference row is the untrained policy: the same agent with its random initial weights (not a
uniform-random policy), evaluated the same way on every seed.

Published references at this budget: DrQ 360 after 50k frames at action repeat 8 (Kostrikov et
al. 2020), DrQ-v2 203.3 after 40k frames at action repeat 2 (Yarats et al. 2022: the mean of
the 10 seeds in its repository's ``curves/dmc_cartpole_swingup.csv``; 101.8 at 20k frames), an
untrained policy 16.7 (the same file at frame 0). Target of the issue: mean final return
>= 250, every seed at least 5x the untrained return.

    python experiments/benchmarks/dmc_pixels.py --seeds 0,1,2 --frames 50000 \
        --action_repeat 8 --fast_render --name dmc_cartpole_swingup
    python experiments/benchmarks/dmc_pixels.py --seeds 0 --frames 2000 --image_size 64 \
        --batch 64 --name dmc_smoke  # a quick check, not a result
    python experiments/benchmarks/dmc_pixels.py --untrained_only --seeds 0,1,2,3,4,5,6,7,8,9 \
        --config drqv1.gin --image_size 64 --name dmc_cartpole_pixels_trunk  # untrained only

Each seed runs in its own process (spawn, ``--workers``, one torch thread each) and writes
``results/<name>_seed<k>.json``; the table and every run go to ``results/<name>.md`` and
``results/<name>.json``. For many seeds or configs on a cluster, ``experiments/sweep.py
--script experiments/dmc/train_dmc_from_pixels.py`` runs the same script as a sweep.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import time
from typing import Any

import bench_utils
import numpy as np

DOMAIN, TASK = "cartpole", "swingup"
DMC_CONFIGS = bench_utils.REPO_ROOT / "experiments" / "dmc"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", default="drqv2.gin", help="gin file of experiments/dmc")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--frames", type=int, default=50_000, help="env frames per run")
    p.add_argument("--action_repeat", type=int, default=8)
    p.add_argument("--image_size", type=int, default=84)
    p.add_argument("--frame_stack", type=int, default=3)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--eval_episodes", type=int, default=10)
    p.add_argument("--fast_render", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch threads per run")
    p.add_argument("--gin_bindings", action="append", default=[])
    p.add_argument("--name", default="dmc_pixels")
    p.add_argument(
        "--untrained_only",
        action="store_true",
        help="train nothing: evaluate each seed's untrained agent and write {seed: return} to "
        "results/<name>_untrained.json (the reference of a sweep's pixel runs)",
    )
    return p.parse_args(argv)


def env_flags(args: argparse.Namespace) -> list[str]:
    flags = ["--domain", DOMAIN, "--task", TASK, "--action_repeat", str(args.action_repeat)]
    flags += ["--image_size", str(args.image_size), "--frame_stack", str(args.frame_stack)]
    return flags + (["--fast_render"] if args.fast_render else [])


def transitions(args: argparse.Namespace) -> int:
    """Env transitions (agent steps) of a run: ``frames / action_repeat``."""
    return args.frames // args.action_repeat


def train_one(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """Train one seed; ``num_steps_online`` is set so the run collects ``transitions(args)``
    transitions whatever the config's ``transitions_per_online_step``."""
    import gin
    import torch

    from super_sac import cli

    torch.set_num_threads(args.threads)
    gin.clear_config()
    cli.parse_gin_args([args.config], args.gin_bindings, [DMC_CONFIGS])
    per_step = cli.loop_setting("transitions_per_online_step")
    gin.clear_config()
    bindings = [
        *bench_utils.QUIET_BINDINGS,
        f"super_sac.batch_size = {args.batch}",
        f"super_sac.eval_episodes = {args.eval_episodes}",
        f"super_sac.eval_interval = {10**9}",  # one evaluation, at the end
        *args.gin_bindings,
    ]
    argv = env_flags(args) + [
        "--config",
        args.config,
        "--seed",
        str(seed),
        "--device",
        args.device,
        "--steps",
        str(transitions(args) // per_step),
        "--logging",
        "none",
    ]
    argv += [x for b in bindings for x in ("--gin_bindings", b)]
    start = time.perf_counter()
    summary = cli.train_dmc(argv, search_dirs=[DMC_CONFIGS])
    result = {
        "seed": seed,
        "final_return": float(summary["final_eval_return"]),
        "env_steps": int(summary["env_steps"]),
        "frames": int(summary["env_steps"]) * args.action_repeat,
        "wall_s": time.perf_counter() - start,
        "untrained_return": untrained_return(args, seed),
    }
    out = bench_utils.RESULTS_DIR / f"{args.name}_seed{seed}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


def untrained_return(args: argparse.Namespace, seed: int) -> float:
    """Mean return of the config's agent with its initial (random) weights, acting
    deterministically for ``eval_episodes`` episodes (the reference row). The agent is built
    under the config and ``--gin_bindings`` of the trained runs (an encoder's init and pixel
    scaling are bindings too)."""
    import gin
    import torch

    import super_sac
    from super_sac import cli

    gin.clear_config()
    cli.parse_gin_args([args.config], args.gin_bindings, [DMC_CONFIGS])
    super_sac.set_seed(seed)
    env = cli.make_dmc(
        DOMAIN,
        TASK,
        from_pixels=True,
        image_size=args.image_size,
        action_repeat=args.action_repeat,
        frame_stack=args.frame_stack,
        fast_render=args.fast_render,
    )
    agent = cli.pixel_agent(env, torch.device("cpu")).eval()
    returns = []
    for episode in range(args.eval_episodes):
        obs, _ = env.reset(seed=10_000 * seed + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(agent.forward(obs))
            total, done = total + reward, terminated or truncated
        returns.append(total)
    env.close()
    gin.clear_config()
    return float(np.mean(returns))


def _worker(job: tuple[argparse.Namespace, int]) -> dict[str, Any]:
    os.environ.setdefault("MUJOCO_GL", "egl")
    return train_one(*job)


def report(args: argparse.Namespace, runs: list[dict[str, Any]]) -> str:
    finals = [r["final_return"] for r in runs]
    untrained = [r["untrained_return"] for r in runs]
    rows = [
        [
            r["seed"],
            f"{r['final_return']:.1f}",
            f"{r['untrained_return']:.1f}",
            f"{r['final_return'] / max(r['untrained_return'], 1e-8):.1f}x",
            r["frames"],
            f"{r['wall_s'] / 60:.1f}",
        ]
        for r in runs
    ]
    rows.append(
        ["mean", f"{statistics.mean(finals):.1f}", f"{statistics.mean(untrained):.1f}", "", "", ""]
    )
    table = bench_utils.markdown_table(
        ["seed", "final return", "untrained return", "ratio", "frames", "minutes"], rows
    )
    setting = (
        f"{args.config}, {DOMAIN}_{TASK} from {args.image_size}x{args.image_size} pixels, "
        f"action repeat {args.action_repeat}, frame stack {args.frame_stack}, batch {args.batch}, "
        f"{args.frames} frames, fast_render={args.fast_render}"
    )
    return f"# {args.name}\n\n{setting}\n\n{table}\n"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.untrained_only:
        import torch

        os.environ.setdefault("MUJOCO_GL", "egl")
        torch.set_num_threads(args.threads)
        returns = {str(seed): untrained_return(args, seed) for seed in seeds}
        out = bench_utils.RESULTS_DIR / f"{args.name}_untrained.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(returns) + "\n")
        print(json.dumps(returns))
        print(f"wrote {out}")
        return
    jobs = [(args, seed) for seed in seeds]
    if args.workers > 1:
        with mp.get_context("spawn").Pool(args.workers) as pool:
            runs = pool.map(_worker, jobs)
    else:
        runs = [_worker(job) for job in jobs]
    markdown = report(args, runs)
    print(markdown)
    payload = {"args": vars(args), "runs": runs, "versions": bench_utils.versions()}
    bench_utils.write_results(args.name, markdown, payload)


if __name__ == "__main__":
    main()
