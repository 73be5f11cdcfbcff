"""Learning on Pendulum-v1: our SAC/TD3/DDPG/REDQ/SUNRISE against stable-baselines3 SAC/TD3.

Every run trains for ``--steps`` env steps (default 10,000 = 50 episodes) and is scored by the
mean return of 10 deterministic evaluation episodes on a separate env after training. Ours
runs through ``experiments/gym/train_gym.py`` with its gin files (sac.gin, td3.gin, ddpg.gin,
redq.gin, sunrise.gin),
nothing written to disk and ``eval_interval`` larger than the run, so the loop evaluates exactly
once, at the end (``final_eval_return`` of the summary). SB3 is scored with
``evaluate_policy(model, env, n_eval_episodes=10, deterministic=True)``.

Settings shared by all algorithms: hidden layers 256x256 (``--hidden``), batch 256, one learning
rate for every optimizer (actor, critics, and SAC's entropy coefficient), gamma 0.99, tau 0.005,
replay of 1,000,000 transitions, 1,000 uniformly random warm-up steps before the first update
(SB3: ``learning_starts=1000``), then one gradient step per env step. TD3 on both sides uses the
paper's settings: policy delay 2, target noise 0.2 clipped to 0.5, Gaussian exploration noise
of std 0.1 in the normalised action space (SB3: ``NormalActionNoise``). SAC on both sides tunes
alpha from 1.0 towards an entropy of -|A|. REDQ (N = 10, M = 2, G = 20 critic updates per env
step) and SUNRISE (5 members, T = 20, UCB lambda = 1) keep their gin files' settings except the
warm-up: redq.gin's 5,000 random steps would leave no learning at all in a 5,000-step run, so
every algorithm gets the same 1,000.

Issue 4's comparison (REDQ and SUNRISE against SAC at equal env steps):

    python experiments/benchmarks/pendulum_learning.py --algos ours_sac,ours_redq,ours_sunrise \
        --steps 5000 --name pendulum_ensembles

Learning rate: the default is 3e-4 for everyone. 3e-4 was tried first, with seed 0
of our SAC and SB3's SAC at 10,000 steps; both solved Pendulum (final returns -123.2 and -97.9,
results/pendulum_lr_probe_3e-4.md), so the fallback to rl-zoo's Pendulum setting of 1e-3 was not
needed. ``--lr`` changes it for every algorithm and library at once.

Runs go through a ``multiprocessing`` pool (spawn context, ``--workers`` processes, default 2),
each worker limited to one torch thread. Results: a markdown table printed and written, with
a JSON file of every run, to ``experiments/benchmarks/results/``.

    python experiments/benchmarks/pendulum_learning.py
    python experiments/benchmarks/pendulum_learning.py --algos ours_sac,sb3_sac --seeds 0 \\
        --lr 1e-3 --name pendulum_lr1e-3
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import bench_utils
import numpy as np

ENV_ID = "Pendulum-v1"
ALGOS: tuple[str, ...] = (
    "ours_sac", "ours_td3", "ours_ddpg", "ours_redq", "ours_sunrise", "sb3_sac", "sb3_td3"
)
DEFAULT_ALGOS = ("ours_sac", "ours_td3", "ours_ddpg", "sb3_sac", "sb3_td3")
DEFAULT_LR = 3e-4
HIDDEN = 256
BATCH_SIZE = 256
GAMMA = 0.99
TAU = 0.005
BUFFER_SIZE = 1_000_000
WARMUP_STEPS = 1_000
EVAL_EPISODES = 10
EVAL_SEED_OFFSET = 10_000  # the evaluation env's seed is the run's seed plus this
TD3_POLICY_DELAY = 2
TD3_TARGET_NOISE = 0.2
TD3_TARGET_NOISE_CLIP = 0.5
EXPLORATION_STD = 0.1

OUR_CONFIGS = {
    "ours_sac": "sac.gin",
    "ours_td3": "td3.gin",
    "ours_ddpg": "ddpg.gin",
    "ours_redq": "redq.gin",
    "ours_sunrise": "sunrise.gin",
}
STOCHASTIC = ("ours_sac", "ours_redq", "ours_sunrise")


@dataclass(frozen=True)
class Job:
    """One training run."""

    algo: str
    seed: int
    steps: int
    lr: float
    hidden: int = HIDDEN


def _init_worker() -> None:
    """Pool initializer: one torch thread per worker, quiet warnings."""
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")


def _run_ours(job: Job) -> dict[str, Any]:
    bindings = [
        f"Agent.hidden_size = {job.hidden}",
        f"ReplayBuffer.size = {BUFFER_SIZE}",
        f"super_sac.batch_size = {BATCH_SIZE}",
        f"super_sac.gamma = {GAMMA}",
        f"super_sac.mlp_tau = {TAU}",
        f"super_sac.random_warmup_steps = {WARMUP_STEPS}",
        f"super_sac.eval_episodes = {EVAL_EPISODES}",
        f"super_sac.eval_interval = {job.steps + 1}",
        *bench_utils.lr_bindings(job.lr, with_alpha=job.algo in STOCHASTIC),
    ]
    summary = bench_utils.run_ours(OUR_CONFIGS[job.algo], ENV_ID, job.seed, job.steps, bindings,
                                   threads=1)
    evals = summary["eval_history"]
    return {
        "score": float(summary["final_eval_return"]),
        "eval_return_std": float(evals[-1]["return_std"]) if evals else float("nan"),
        "env_steps": int(summary["env_steps"]),
        "train_env_steps_per_s": float(summary["env_steps_per_s"]),
    }


def _run_sb3(job: Job) -> dict[str, Any]:
    import gymnasium as gym
    from stable_baselines3 import SAC, TD3
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.noise import NormalActionNoise
    from stable_baselines3.common.vec_env import DummyVecEnv

    common: dict[str, Any] = {
        "learning_rate": job.lr,
        "buffer_size": BUFFER_SIZE,
        "learning_starts": WARMUP_STEPS,
        "batch_size": BATCH_SIZE,
        "tau": TAU,
        "gamma": GAMMA,
        "train_freq": 1,
        "gradient_steps": 1,
        "policy_kwargs": {"net_arch": [job.hidden, job.hidden]},
        "seed": job.seed,
        "device": "cpu",
        "verbose": 0,
    }
    env = gym.make(ENV_ID)
    if job.algo == "sb3_sac":
        model = SAC("MlpPolicy", env, ent_coef="auto_1.0", target_entropy="auto", **common)
    else:
        act_dim = env.action_space.shape[0]
        noise = NormalActionNoise(mean=np.zeros(act_dim), sigma=EXPLORATION_STD * np.ones(act_dim))
        model = TD3("MlpPolicy", env, action_noise=noise, policy_delay=TD3_POLICY_DELAY,
                    target_policy_noise=TD3_TARGET_NOISE, target_noise_clip=TD3_TARGET_NOISE_CLIP,
                    **common)
    start = time.perf_counter()
    model.learn(total_timesteps=job.steps)
    train_wall = time.perf_counter() - start
    eval_env = DummyVecEnv([lambda: Monitor(gym.make(ENV_ID))])
    eval_env.seed(job.seed + EVAL_SEED_OFFSET)
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=EVAL_EPISODES,
                                deterministic=True)
    eval_env.close()
    env.close()
    return {
        "score": float(mean),
        "eval_return_std": float(std),
        "env_steps": int(model.num_timesteps),
        "train_env_steps_per_s": model.num_timesteps / train_wall,
    }


def run_job(job: Job) -> dict[str, Any]:
    """Train and evaluate one (algorithm, seed) pair; runs inside a pool worker."""
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    result = _run_ours(job) if job.algo.startswith("ours_") else _run_sb3(job)
    return {**asdict(job), **result, "wall_seconds": time.perf_counter() - start}


def summarise(runs: list[dict[str, Any]], algos: list[str], seeds: list[int]) -> list[dict]:
    """Per-algorithm mean and population std (ddof=0) of the final scores over seeds."""
    rows = []
    for algo in algos:
        by_seed = {r["seed"]: r for r in runs if r["algo"] == algo}
        scores = [by_seed[s]["score"] for s in seeds if s in by_seed]
        walls = [by_seed[s]["wall_seconds"] for s in seeds if s in by_seed]
        rows.append({
            "algo": algo,
            "mean": float(np.mean(scores)),
            "std": float(np.std(scores)),
            "scores": {str(s): by_seed[s]["score"] for s in seeds if s in by_seed},
            "median_wall_seconds": float(statistics.median(walls)),
        })
    return rows


def render_table(rows: list[dict], seeds: list[int]) -> str:
    headers = ["algorithm", "mean", "std", *[f"seed {s}" for s in seeds], "wall s / run"]
    body = [
        [r["algo"], f"{r['mean']:.1f}", f"{r['std']:.1f}",
         *[f"{r['scores'][str(s)]:.1f}" for s in seeds], f"{r['median_wall_seconds']:.0f}"]
        for r in rows
    ]
    return bench_utils.markdown_table(headers, body)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=10_000, help="env steps per run")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    p.add_argument("--algos", default=",".join(DEFAULT_ALGOS),
                   help=f"comma-separated, from {ALGOS}")
    p.add_argument("--hidden", type=int, default=HIDDEN, help="hidden width for everyone")
    p.add_argument("--lr", type=float, default=DEFAULT_LR, help="learning rate for everyone")
    p.add_argument("--workers", type=int, default=2, help="pool processes")
    p.add_argument("--name", default="pendulum_learning",
                   help="basename of the result files in experiments/benchmarks/results/")
    args = p.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    args.algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    unknown = sorted(set(args.algos) - set(ALGOS))
    if unknown:
        p.error(f"unknown algorithms {unknown}; choose from {ALGOS}")
    if args.steps <= WARMUP_STEPS:
        p.error(f"--steps must exceed the {WARMUP_STEPS} warm-up steps")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    jobs = [Job(a, s, args.steps, args.lr, args.hidden) for s in args.seeds for a in args.algos]
    print(f"{len(jobs)} runs of {args.steps} steps on {ENV_ID}, lr {args.lr:g}, "
          f"{args.workers} workers", flush=True)
    # Workers inherit this; it keeps BLAS/OpenMP from oversubscribing the cores before torch's
    # own thread setting applies.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    start = time.perf_counter()
    runs: list[dict[str, Any]] = []
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.workers, initializer=_init_worker) as pool:
        for result in pool.imap_unordered(run_job, jobs):
            runs.append(result)
            print(f"[{len(runs)}/{len(jobs)}] {result['algo']} seed {result['seed']}: "
                  f"{result['score']:.1f} ({result['wall_seconds']:.0f} s)", flush=True)
    total = time.perf_counter() - start
    rows = summarise(runs, args.algos, args.seeds)
    table = render_table(rows, args.seeds)
    print("\n" + table, flush=True)
    header = (
        f"# Pendulum-v1 learning benchmark\n\n"
        f"{args.steps} env steps per run, lr {args.lr:g} for every optimizer, hidden "
        f"{args.hidden}x{args.hidden}, batch {BATCH_SIZE}, gamma {GAMMA}, tau {TAU}, "
        f"{WARMUP_STEPS} random warm-up steps. Score: mean return of {EVAL_EPISODES} "
        f"deterministic evaluation episodes after training; mean and std (ddof=0) over seeds. "
        f"{args.workers} worker processes with one torch thread each; total wall time "
        f"{total / 60:.1f} min.\n\n"
    )
    payload = {
        "benchmark": "pendulum_learning",
        "env": ENV_ID,
        "settings": {
            "steps": args.steps, "seeds": args.seeds, "lr": args.lr, "hidden": args.hidden,
            "batch_size": BATCH_SIZE, "gamma": GAMMA, "tau": TAU, "buffer_size": BUFFER_SIZE,
            "warmup_steps": WARMUP_STEPS, "eval_episodes": EVAL_EPISODES,
            "td3": {"policy_delay": TD3_POLICY_DELAY, "target_noise": TD3_TARGET_NOISE,
                    "target_noise_clip": TD3_TARGET_NOISE_CLIP,
                    "exploration_std": EXPLORATION_STD},
            "workers": args.workers, "torch_threads_per_worker": 1,
        },
        "versions": bench_utils.versions(),
        "total_wall_seconds": total,
        "summary": rows,
        "runs": sorted(runs, key=lambda r: (r["algo"], r["seed"])),
    }
    md, js = bench_utils.write_results(args.name, header + table, payload)
    print(f"\nwrote {md} and {js}", flush=True)
    return payload


if __name__ == "__main__":
    main()
