"""Offline benchmark: our behavioral cloning (bc.gin) and AWAC-style AFBC (awac.gin, then online
fine-tuning) against d3rlpy's BC and AWAC on the same locally built D4RL-style datasets.

The datasets and their reference returns come from experiments/offline/build_datasets.py
(``offline_data/minari`` and ``offline_data/reference_returns.json``). Every run takes the same
number of gradient steps (``--steps``) with batch 256 on both sides; scores are D4RL normalized
scores ``100 * (return - random) / (expert - random)`` of the final deterministic policy over
``--eval_episodes`` episodes. Our AWAC runs then fine-tune online for ``--online_steps`` env steps
(the dataset stays in the buffer) and report the first evaluation after the switch and the last.
d3rlpy gets our dataset converted to its ``MDPDataset`` (same observations, actions in [-1, 1],
terminations and truncations as terminals and timeouts) and keeps its other defaults (BC: a
deterministic policy, MSE, lr 1e-3; AWAC: lambda 1, 1 action sample, lr 3e-4, 2 critics).

    python experiments/benchmarks/offline_d3rlpy.py --env HalfCheetah-v5 --steps 10000 \
        --online_steps 5000 --seeds 0,1,2
    python experiments/benchmarks/offline_d3rlpy.py --env Pendulum-v1 --steps 500 \
        --online_steps 200 --seeds 0 --eval_episodes 2 --name offline_smoke   # quick check

One torch thread; runs are sequential and the result files are rewritten after every run.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import bench_utils
import numpy as np
import torch

from super_sac import cli
from super_sac.cli import dataset_id, normalized_score
from super_sac.datasets import load_transitions
from super_sac.wrappers import make_gym_env

# algorithm -> dataset quality it is scored on
RUNS = {"ours_bc": "expert", "d3rlpy_bc": "expert", "ours_awac": "medium", "d3rlpy_awac": "medium"}
BATCH = 256


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--env", default="HalfCheetah-v5")
    p.add_argument(
        "--data",
        default=str(bench_utils.REPO_ROOT / "offline_data"),
        help="folder made by build_datasets.py",
    )
    p.add_argument("--steps", type=int, default=10_000, help="gradient steps per run")
    p.add_argument(
        "--online_steps",
        type=int,
        default=5_000,
        help="env steps of online fine-tuning after our AWAC (0: none)",
    )
    p.add_argument("--eval_interval", type=int, default=2_500)
    p.add_argument("--eval_episodes", type=int, default=5)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--algos", default=",".join(RUNS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--d3rlpy_batch",
        type=int,
        default=BATCH,
        help="d3rlpy's batch size (default: ours, 256; d3rlpy's AWAC default is 1024)",
    )
    p.add_argument("--name", default="offline_d3rlpy", help="basename of the result files")
    return p.parse_args(argv)


def run_ours(args: argparse.Namespace, algo: str, seed: int) -> dict[str, Any]:
    """Our BC (bc.gin) or AWAC (awac.gin) with the command line of
    experiments/offline/train_offline.py."""
    import gin

    gin.clear_config()
    quality = RUNS[algo]
    argv = [
        "--env", args.env, "--seed", str(seed), "--threads", str(args.threads),
        "--logging", "none", "--device", "cpu",
        "--dataset", dataset_id(args.env, quality),
        "--datasets_path", str(Path(args.data) / "minari"),
    ]  # fmt: skip
    if algo == "ours_bc":
        argv += ["--config", "bc.gin", "--bc_steps", str(args.steps), "--steps", "0"]
    else:
        argv += ["--config", "awac.gin", "--offline_steps", str(args.steps),
                 "--steps", str(args.online_steps)]  # fmt: skip
    bindings = [
        *bench_utils.QUIET_BINDINGS,
        f"super_sac.batch_size = {BATCH}",
        f"super_sac.eval_interval = {args.eval_interval}",
        f"super_sac.eval_episodes = {args.eval_episodes}",
    ]
    for binding in bindings:
        argv += ["--gin_bindings", binding]
    experiments = bench_utils.REPO_ROOT / "experiments"
    summary = cli.train_offline(argv, search_dirs=[experiments / "offline", experiments / "gym"])
    history = summary["eval_history"]
    offline = [e for e in history if e["phase"] in ("bc", "offline")]
    online = [e for e in history if e["phase"] == "online"]
    out = {
        "offline_return": offline[-1]["return_mean"],
        "offline_curve": [(e["phase_step"], e["return_mean"]) for e in offline],
    }
    if online:
        out.update(
            online_first_return=online[0]["return_mean"],
            online_first_step=online[0]["phase_step"],
            online_final_return=online[-1]["return_mean"],
            online_curve=[(e["phase_step"], e["return_mean"]) for e in online],
        )
    return out


def to_mdp_dataset(data: Any) -> Any:
    """Our transitions as a d3rlpy MDPDataset (episodes are consecutive in our datasets)."""
    import d3rlpy

    (key,) = data.obs
    return d3rlpy.dataset.MDPDataset(
        observations=data.obs[key].astype(np.float32),
        actions=data.action.astype(np.float32),
        rewards=data.reward.astype(np.float32),
        terminals=data.terminated.astype(np.float32),
        timeouts=data.truncated.astype(np.float32),
    )


def evaluate_policy(predict: Any, env_id: str, episodes: int, seed: int) -> float:
    """Mean return of ``predict`` (observation batch -> actions in [-1, 1]) over ``episodes``."""
    env = make_gym_env(env_id)
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=10_000 * seed + i)
        total, done = 0.0, False
        while not done:
            action = predict(obs["obs"][None])[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def run_d3rlpy(args: argparse.Namespace, algo: str, seed: int) -> dict[str, Any]:
    """d3rlpy's BC or AWAC on our dataset, ``--steps`` gradient steps of ``--d3rlpy_batch``."""
    import d3rlpy

    d3rlpy.seed(seed)
    env = make_gym_env(args.env)
    data, _ = load_transitions(dataset_id(args.env, RUNS[algo]), env, Path(args.data) / "minari")
    env.close()
    config = (
        d3rlpy.algos.BCConfig(batch_size=args.d3rlpy_batch)
        if algo == "d3rlpy_bc"
        else d3rlpy.algos.AWACConfig(batch_size=args.d3rlpy_batch)
    )
    model = config.create(device="cpu:0")
    curve = []
    done = 0
    while done < args.steps:
        chunk = min(args.eval_interval, args.steps - done)
        model.fit(
            to_mdp_dataset(data),
            n_steps=chunk,
            n_steps_per_epoch=chunk,
            show_progress=False,
            with_timestamp=False,
            save_interval=10**9,
            logger_adapter=d3rlpy.logging.NoopAdapterFactory(),
        )
        done += chunk
        curve.append((done, evaluate_policy(model.predict, args.env, args.eval_episodes, seed)))
    return {"offline_return": curve[-1][1], "offline_curve": curve}


def summarise(runs: list[dict[str, Any]], refs: dict[str, float]) -> dict[str, Any]:
    """Mean and population std of the normalized scores per algorithm."""

    def norm(ret: float) -> float:
        return normalized_score(ret, refs["random_return"], refs["expert_return"])

    table: dict[str, Any] = {}
    for algo in dict.fromkeys(r["algo"] for r in runs):
        mine = [r for r in runs if r["algo"] == algo]
        scores = [norm(r["offline_return"]) for r in mine]
        entry = {
            "dataset": RUNS[algo],
            "seeds": [r["seed"] for r in mine],
            "normalized": scores,
            "mean": float(np.mean(scores)),
            "std": float(np.std(scores)),
            "wall_s": [r["wall_s"] for r in mine],
        }
        if all("online_first_return" in r for r in mine):
            entry["online_first_normalized"] = [norm(r["online_first_return"]) for r in mine]
            entry["online_final_normalized"] = [norm(r["online_final_return"]) for r in mine]
            entry["online_first_over_offline"] = [
                r["online_first_return"] / r["offline_return"]
                if r["offline_return"] > 0
                else float("nan")
                for r in mine
            ]
        table[algo] = entry
    return table


def markdown(args: argparse.Namespace, table: dict[str, Any], refs: dict[str, float]) -> str:
    rows = []
    for algo, e in table.items():
        per_seed = ", ".join(f"{s:.1f}" for s in e["normalized"])
        online = ""
        if "online_first_normalized" in e:
            online = (
                f"first {np.mean(e['online_first_normalized']):.1f}, final "
                f"{np.mean(e['online_final_normalized']):.1f}"
            )
        rows.append([algo, e["dataset"], f"{e['mean']:.1f} +- {e['std']:.1f}", per_seed, online])
    return "\n".join(
        [
            f"# Offline RL on locally built {args.env} datasets: super_sac vs d3rlpy",
            "",
            f"{args.steps} gradient steps per run (batch {BATCH}; d3rlpy {args.d3rlpy_batch}), "
            f"seeds {args.seeds}, "
            f"{args.eval_episodes} evaluation episodes; our AWAC then fine-tunes online for "
            f"{args.online_steps} env steps. D4RL normalized scores with random return "
            f"{refs['random_return']:.1f} and expert return {refs['expert_return']:.1f}.",
            "",
            bench_utils.markdown_table(
                [
                    "algorithm",
                    "dataset",
                    "normalized score (mean +- std)",
                    "per seed",
                    "online fine-tuning (normalized)",
                ],
                rows,
            ),
        ]
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    refs = json.loads((Path(args.data) / "reference_returns.json").read_text())[args.env]
    runs: list[dict[str, Any]] = []
    payload: dict[str, Any] = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        for algo in args.algos.split(","):
            start = time.perf_counter()
            result = (run_ours if algo.startswith("ours") else run_d3rlpy)(args, algo, seed)
            result.update(algo=algo, seed=seed, wall_s=time.perf_counter() - start)
            runs.append(result)
            print(json.dumps({k: v for k, v in result.items() if "curve" not in k}), flush=True)
            table = summarise(runs, refs)
            payload = {
                "settings": vars(args),
                "reference_returns": refs,
                "summary": table,
                "runs": runs,
                "versions": {**bench_utils.versions(), "d3rlpy": _d3rlpy_version()},
            }
            bench_utils.write_results(args.name, markdown(args, table, refs), payload)
    print(markdown(args, summarise(runs, refs), refs))
    return payload


def _d3rlpy_version() -> str:
    import d3rlpy

    return d3rlpy.__version__


if __name__ == "__main__":
    main()
