"""Record a dataset by running a saved agent (optionally with Gaussian action noise) or a
uniform random policy, in Minari's format (local, never downloaded) or as a plain ``.npz``.

    # random policy, 100k transitions, Minari dataset in offline_data/minari
    python experiments/offline/record_replay.py --env HalfCheetah-v5 --policy random \
        --transitions 100000 --dataset_id super_sac/halfcheetah-random-v0 \
        --datasets_path offline_data/minari
    # a saved agent (a run directory, its agent.pt, or a checkpoint folder), plus a .npz copy
    python experiments/offline/record_replay.py --env HalfCheetah-v5 \
        --policy saves/sac_HalfCheetah-v5_0 --config sac.gin --noise_std 0.1 \
        --dataset_id super_sac/halfcheetah-expert-v0 --npz offline_data/npz/expert.npz

The agent is rebuilt from ``--config`` (the gin file it was trained with) before its weights
are loaded. Actions are stored in the env's own units with its action space, observations as
the env returns them; terminations and truncations stay distinct.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "gym"))

import train_gym  # noqa: E402

import super_sac  # noqa: E402
from super_sac import datasets  # noqa: E402
from super_sac.config import parse_gin  # noqa: E402
from super_sac.wrappers import make_gym_env  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--env", default="Pendulum-v1")
    p.add_argument(
        "--policy",
        default="random",
        help="'random', or a saved agent: a run directory / agent.pt / checkpoint folder",
    )
    p.add_argument("--config", default="sac.gin", help="gin file the agent was trained with")
    p.add_argument("--transitions", type=int, default=100_000)
    p.add_argument("--noise_std", type=float, default=0.0, help="Gaussian action noise std")
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="act with the policy's mean instead of sampling it",
    )
    p.add_argument("--max_episode_steps", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--dataset_id", default=None, help="Minari id, e.g. super_sac/pendulum-expert-v0"
    )
    p.add_argument("--datasets_path", default=None, help="local Minari folder")
    p.add_argument("--npz", default=None, help="also (or only) write this .npz file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing Minari dataset")
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def load_agent(policy: str, config: str, env: Any) -> super_sac.Agent:
    """Rebuild the agent from its gin file and load saved weights (``agent.pt``, a run directory
    or a checkpoint folder's ``state.pt``)."""
    parse_gin([config], [], search_dirs=[HERE, HERE.parent / "gym"])
    agent = train_gym.build_agent(env, torch.device("cpu"))
    path = Path(policy)
    if (path / "state.pt").exists():  # a checkpoint folder
        state = torch.load(path / "state.pt", map_location="cpu", weights_only=True)
        agent.load_state_dict(state["agent"])
    else:
        agent.load(path)
    agent.eval()
    return agent


def record(args: argparse.Namespace) -> dict[str, Any]:
    """Record the dataset and write it; :return: a summary with the episode returns."""
    if args.dataset_id is None and args.npz is None:
        raise SystemExit("error: give --dataset_id (Minari) and/or --npz")
    torch.set_num_threads(args.threads)
    super_sac.set_seed(args.seed)
    env = make_gym_env(args.env, args.max_episode_steps)
    if args.policy == "random":
        policy = datasets.random_policy(env, args.seed)
    else:
        agent = load_agent(args.policy, args.config, env)
        policy = datasets.agent_policy(
            agent, args.noise_std, stochastic=not args.deterministic, seed=args.seed
        )
    episodes, obs_space, act_space = datasets.record_episodes(
        env, policy, args.transitions, seed=args.seed
    )
    complete = [ep for ep in episodes if ep.terminations[-1] or len(ep.rewards) == _limit(env)]
    returns = [float(np.sum(ep.rewards)) for ep in complete]
    summary = {
        "env": args.env,
        "policy": args.policy,
        "noise_std": args.noise_std,
        "transitions": int(sum(len(ep.rewards) for ep in episodes)),
        "episodes": len(episodes),
        "complete_episode_returns": returns,
        "return_mean": float(np.mean(returns)) if returns else float("nan"),
    }
    if args.dataset_id:
        folder = datasets.save_minari(
            args.dataset_id,
            episodes,
            obs_space,
            act_space,
            datasets_path=args.datasets_path,
            overwrite=args.overwrite,
            algorithm_name=f"super_sac {args.policy} (noise {args.noise_std})",
            description=f"{args.env}, recorded by experiments/offline/record_replay.py",
        )
        summary["minari_folder"] = str(folder)
    if args.npz:
        summary["npz"] = str(datasets.save_npz(args.npz, episodes, act_space))
    env.close()
    return summary


def _limit(env: Any) -> int | None:
    spec = getattr(env, "spec", None)
    return getattr(spec, "max_episode_steps", None)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    summary = record(parse_args(argv))
    shown = {k: v for k, v in summary.items() if k != "complete_episode_returns"}
    print(json.dumps(shown, indent=1), flush=True)
    return summary


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    main()
