"""Build D4RL-style datasets locally (D4RL's servers cannot be reached here): for each env, a
"random" (uniform random policy), "medium" (a partially trained SAC agent) and "expert" (the
final SAC agent) dataset, in Minari's format and as ``.npz``, plus the reference returns of the
D4RL normalized score ``100 * (return - random) / (expert - random)``.

    # 1. train the SAC agents (checkpoints every few thousand steps become "medium" candidates)
    python experiments/offline/build_datasets.py --stage train --out offline_data
    # 2. record the datasets and measure the reference returns
    python experiments/offline/build_datasets.py --stage record --out offline_data

As in D4RL (Fu et al. 2020, "D4RL: Datasets for Deep Data-Driven Reinforcement Learning",
arXiv:2004.07219): the expert and medium datasets sample the SAC policy; "medium" is the saved
agent whose evaluation return is closest to 40% of the way from random to expert (D4RL's
medium agents reach about a third to a half of the expert's); the reference returns are the mean
returns of complete episodes of our own random and expert datasets. Our datasets are smaller
than D4RL's (1M transitions) and come from shorter SAC runs: see ``ENVS``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from super_sac import cli
from super_sac.cli import dataset_id, normalized_score

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GYM = HERE.parent / "gym"

# env id -> SAC training steps, checkpoint interval, transitions per dataset
ENVS: dict[str, dict[str, int]] = {
    "Pendulum-v1": {"train_steps": 10_000, "interval": 1_000, "transitions": 50_000},
    "HalfCheetah-v5": {"train_steps": 100_000, "interval": 5_000, "transitions": 100_000},
}
QUALITIES = ("random", "medium", "expert")
MEDIUM_FRACTION = 0.4


def npz_path(out: Path, env_id: str, quality: str) -> Path:
    return out / "npz" / f"{env_id.split('-')[0].lower()}-{quality}.npz"


def run_dir(out: Path, env_id: str) -> Path:
    return out / "agents" / f"sac_{env_id}_0"


def train_agents(out: Path, envs: list[str]) -> None:
    """Train SAC on each env with checkpoints kept at every interval (one torch thread)."""
    os.environ["SSAC_SAVE"] = str(out / "agents")
    for env_id in envs:
        spec = ENVS[env_id]
        cli.train_gym(
            [
                "--env", env_id, "--config", "sac.gin", "--seed", "0",
                "--steps", str(spec["train_steps"]), "--threads", "1",
                "--name", f"sac_{env_id}", "--logging", "none",
                "--gin_bindings", "ReplayBuffer.size = 200000",
                "--gin_bindings", f"super_sac.checkpoint_interval = {spec['interval']}",
                "--gin_bindings", "super_sac.keep_checkpoints = 100",
                "--gin_bindings", f"super_sac.eval_interval = {spec['interval']}",
                "--gin_bindings", "super_sac.eval_episodes = 3",
            ],
            search_dirs=[GYM],
        )  # fmt: skip


def pick_medium(folder: Path, random_return: float) -> tuple[Path, float]:
    """The checkpoint whose evaluation return is closest to ``MEDIUM_FRACTION`` of the way from
    the random return to the final agent's."""
    history = json.loads((folder / "summary.json").read_text())["eval_history"]
    expert = history[-1]["return_mean"]
    target = random_return + MEDIUM_FRACTION * (expert - random_return)
    candidates = [
        (abs(e["return_mean"] - target), e)
        for e in history[:-1]
        if (folder / "checkpoints" / f"ckpt_{e['env_steps']}").exists()
    ]
    _, best = min(candidates, key=lambda c: c[0])
    return folder / "checkpoints" / f"ckpt_{best['env_steps']}", best["return_mean"]


def record_all(out: Path, envs: list[str], overwrite: bool) -> dict[str, Any]:
    """Record the three datasets of each env; :return: the reference returns and details."""
    refs: dict[str, Any] = {}
    for env_id in envs:
        n = ENVS[env_id]["transitions"]
        folder = run_dir(out, env_id)
        summaries = {}
        for quality in ("random", "medium", "expert"):
            if quality == "random":
                policy = "random"
            elif quality == "medium":  # needs the random return to place "40% of the way"
                medium, medium_eval = pick_medium(folder, summaries["random"]["return_mean"])
                policy = str(medium)
            else:
                policy = str(folder / "agent.pt")
            argv = [
                "--env", env_id, "--policy", policy, "--transitions", str(n),
                "--dataset_id", dataset_id(env_id, quality),
                "--datasets_path", str(out / "minari"),
                "--npz", str(npz_path(out, env_id, quality)), "--seed", "0",
            ] + (["--overwrite"] if overwrite else [])  # fmt: skip
            summaries[quality] = cli.record_dataset(argv, search_dirs=[HERE, GYM])
        random_ret = summaries["random"]["return_mean"]
        expert_ret = summaries["expert"]["return_mean"]
        refs[env_id] = {
            "random_return": random_ret,
            "expert_return": expert_ret,
            "medium_agent": str(Path(summaries["medium"]["policy"]).relative_to(out)),
            "medium_agent_eval_return": medium_eval,
            "datasets": {
                q: {
                    "minari_id": dataset_id(env_id, q),
                    "npz": str(npz_path(out, env_id, q).relative_to(out)),
                    "transitions": summaries[q]["transitions"],
                    "episodes": summaries[q]["episodes"],
                    "return_mean": summaries[q]["return_mean"],
                    "normalized_score": normalized_score(
                        summaries[q]["return_mean"], random_ret, expert_ret
                    ),
                }
                for q in QUALITIES
            },
        }
    return refs


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--stage", choices=["train", "record", "all"], default="all")
    p.add_argument("--out", default=str(ROOT / "offline_data"))
    p.add_argument("--envs", nargs="+", default=list(ENVS))
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    out = Path(args.out).resolve()
    if args.stage in ("train", "all"):
        train_agents(out, args.envs)
    if args.stage in ("record", "all"):
        refs = record_all(out, args.envs, args.overwrite)
        ref_file = out / "reference_returns.json"
        existing = json.loads(ref_file.read_text()) if ref_file.exists() else {}
        existing.update(refs)
        ref_file.write_text(json.dumps(existing, indent=1))
        for env_id, ref in refs.items():
            print(
                f"{env_id}: random {ref['random_return']:.1f}, expert {ref['expert_return']:.1f}; "
                + ", ".join(
                    f"{q} {d['return_mean']:.1f} ({d['normalized_score']:.1f})"
                    for q, d in ref["datasets"].items()
                )
            )
        print(f"reference returns written to {ref_file}")


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    main()
