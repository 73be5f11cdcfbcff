"""Train on any gymnasium env with Box observations and a bounded Box action space.

    python experiments/gym/train_gym.py --env Pendulum-v1 --config sac.gin
    python experiments/gym/train_gym.py --env HalfCheetah-v5 --config td3.gin --seed 1
    python experiments/gym/train_gym.py --env Pendulum-v1 --config ddpg.gin \
        --gin_bindings "super_sac.batch_size = 512" --steps 20000

A bare ``--config`` name resolves next to this script.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

import super_sac
from super_sac.config import parse_gin
from super_sac.wrappers import make_gym_env

HERE = Path(__file__).resolve().parent


def build_parser(description: str | None = __doc__) -> argparse.ArgumentParser:
    """The command line shared by the training scripts (experiments/offline adds --dataset)."""
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--env", default="Pendulum-v1", help="gymnasium env id")
    p.add_argument("--config", default="sac.gin", help="gin file (bare names resolve here)")
    p.add_argument("--name", default=None, help="run name (default: <config>_<env>)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help="override super_sac.num_steps_online")
    p.add_argument("--parallel_envs", type=int, default=1, help="parallel training envs")
    p.add_argument(
        "--max_episode_steps",
        type=int,
        default=None,
        help="episode time limit (default: the env's own)",
    )
    p.add_argument("--logging", choices=["tensorboard", "wandb", "none"], default=None)
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument(
        "--resume",
        default=None,
        metavar="RUN_DIR",
        help="continue RUN_DIR from its newest checkpoint, with the env and settings it was "
        "started with (its config.gin); --steps and --gin_bindings still apply",
    )
    p.add_argument(
        "--gin_bindings",
        action="append",
        default=[],
        help='extra gin bindings, e.g. "super_sac.batch_size = 512" (repeatable)',
    )
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def make_envs(env_id: str, parallel_envs: int, max_episode_steps: int | None) -> tuple[Any, Any]:
    """Training env (a vector env when ``parallel_envs > 1``) and a single test env."""
    if parallel_envs > 1:
        train_env = gym.vector.SyncVectorEnv(
            [lambda: make_gym_env(env_id, max_episode_steps) for _ in range(parallel_envs)],
            autoreset_mode=AutoresetMode.DISABLED,
        )
    else:
        train_env = make_gym_env(env_id, max_episode_steps)
    return train_env, make_gym_env(env_id, max_episode_steps)


def build_agent(test_env: gym.Env, device: torch.device) -> super_sac.Agent:
    """A gin-configured Agent whose encoder concatenates the observation dict's keys."""
    dim = sum(gym.spaces.flatdim(space) for space in test_env.observation_space.spaces.values())
    act_dim = int(test_env.action_space.shape[0])
    return super_sac.Agent(act_space_size=act_dim, encoder=super_sac.nets.FlatEncoder(dim)).to(
        device
    )


def _resumed_args(
    args: argparse.Namespace, saved_args: tuple[str, ...]
) -> tuple[argparse.Namespace, list[str]]:
    """The original command line of the run being resumed, and its operative config file."""
    run_dir = Path(args.resume)
    hparams = run_dir / "hparams.json"
    if not hparams.exists():
        raise FileNotFoundError(
            f"--resume {run_dir}: no hparams.json there; is it a run directory?"
        )
    saved = (json.loads(hparams.read_text()).get("run_info") or {}).get("args") or {}
    merged = argparse.Namespace(
        **{
            **vars(args),
            **{k: v for k, v in saved.items() if k in saved_args},
        }
    )
    return merged, [str(run_dir / "config.gin")]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return train(parse_args(argv))


def train(
    args: argparse.Namespace,
    script: str = "experiments/gym/train_gym.py",
    search_dirs: tuple[Path, ...] = (HERE,),
    prepare_buffer: Callable[[super_sac.ReplayBuffer, gym.Env], None] | None = None,
    saved_args: tuple[str, ...] = ("env", "parallel_envs", "seed", "max_episode_steps", "name"),
) -> dict[str, Any]:
    """Build the envs, agent and buffer from ``args`` and the gin files, then train.

    :param args: parsed command line (see :func:`build_parser`).
    :param script: the script's path, stored in the run's ``hparams.json``.
    :param search_dirs: folders where bare ``--config`` names resolve.
    :param prepare_buffer: fills the replay buffer before training (the offline script loads
        its dataset here); skipped when resuming (the checkpoint holds the buffer).
    :param saved_args: arguments a resumed run takes from its original command line.
    """
    if args.threads:
        torch.set_num_threads(args.threads)
    config_files = [args.config]
    if args.resume:
        args, config_files = _resumed_args(args, saved_args)
    bindings = list(args.gin_bindings)
    if args.steps is not None:
        bindings.append(f"super_sac.num_steps_online = {args.steps}")
    parse_gin(config_files, bindings, search_dirs=list(search_dirs))
    device = super_sac.get_device(args.device)
    if args.seed is not None:
        super_sac.set_seed(args.seed)
    train_env, test_env = make_envs(args.env, args.parallel_envs, args.max_episode_steps)
    agent = build_agent(test_env, device)
    buffer = super_sac.ReplayBuffer(seed=args.seed)
    if prepare_buffer is not None and not args.resume:
        prepare_buffer(buffer, test_env)
    overrides: dict[str, Any] = {
        "name": args.name or f"{Path(args.config).stem}_{args.env}",
        "seed": args.seed,
        "resume": args.resume or False,
        "run_info": {
            "script": script,
            "args": {k: v for k, v in vars(args).items() if k != "resume"},
        },
    }
    if args.logging is not None:
        overrides["logging_method"] = args.logging
    if args.max_episode_steps is not None:
        overrides["max_episode_steps"] = args.max_episode_steps
    try:
        return super_sac.super_sac(agent, buffer, train_env, test_env, **overrides)
    finally:
        train_env.close()
        test_env.close()


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        main()
    except (
        super_sac.main.ConfigError,
        super_sac.checkpoint.CheckpointError,
        super_sac.config.GinConfigError,
        FileNotFoundError,
        NotImplementedError,
    ) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
