"""Train on any gymnasium env with Box observations and a bounded Box action space, or (with
SAC-Discrete) a Discrete action space.

    python experiments/gym/train_gym.py --env Pendulum-v1 --config sac.gin
    python experiments/gym/train_gym.py --env CartPole-v1 --config sac_discrete.gin
    python experiments/gym/train_gym.py --env HalfCheetah-v5 --config td3.gin --seed 1
    python experiments/gym/train_gym.py --env Pendulum-v1 --config ddpg.gin \
        --gin_bindings "super_sac.batch_size = 512" --steps 20000

A bare ``--config`` name resolves next to this script.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gin
import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

import super_sac
from super_sac.config import parse_gin
from super_sac.wrappers import make_gym_env

HERE = Path(__file__).resolve().parent


def build_parser(description: str | None = __doc__) -> argparse.ArgumentParser:
    """This script's command line (experiments/offline/train_offline.py adds ``--dataset``)."""
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--env", default="Pendulum-v1", help="gymnasium env id")
    add_common_args(p, default_config="sac.gin")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def add_common_args(p: argparse.ArgumentParser, default_config: str) -> None:
    """The options every training script shares (train_minatar.py and train_atari.py too)."""
    p.add_argument("--config", default=default_config, help="gin file (bare names resolve here)")
    p.add_argument("--name", default=None, help="run name (default: <config>_<env or game>)")
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


def add_dataset_args(p: argparse.ArgumentParser, required: bool) -> None:
    """Options of the scripts that can learn from a recorded dataset (offline, MinAtar)."""
    p.add_argument(
        "--dataset",
        required=required,
        default=None,
        help="Minari dataset id or .npz path (see experiments/offline/record_replay.py)",
    )
    p.add_argument(
        "--datasets_path",
        default=None,
        help="local Minari datasets folder (default: $MINARI_DATASETS_PATH)",
    )
    p.add_argument("--offline_steps", type=int, default=None, help="super_sac.num_steps_offline")
    p.add_argument("--bc_steps", type=int, default=None, help="super_sac.bc_warmup_steps")
    p.add_argument(
        "--no_protect",
        action="store_true",
        help="let online transitions overwrite the dataset once the buffer is full",
    )


def loop_setting(name: str) -> Any:
    """The value gin binds for ``super_sac.<name>`` (or the function's default)."""
    try:
        return gin.query_parameter(f"super_sac.{name}")
    except ValueError:
        return inspect.signature(super_sac.super_sac).parameters[name].default


def dataset_loader(
    args: argparse.Namespace,
) -> Callable[[super_sac.ReplayBuffer, gym.Env], None] | None:
    """Apply ``--offline_steps``/``--bc_steps`` to the bindings and return the function that
    loads ``--dataset`` into the replay buffer (protected from online overwrites unless
    ``--no_protect``), or ``None`` without a dataset."""
    for flag, setting in (("offline_steps", "num_steps_offline"), ("bc_steps", "bc_warmup_steps")):
        if getattr(args, flag) is not None:
            args.gin_bindings.append(f"super_sac.{setting} = {getattr(args, flag)}")
    if args.dataset is None:
        return None

    def load(buffer: super_sac.ReplayBuffer, env: gym.Env) -> None:
        buffer.load_dataset(
            args.dataset,
            env,
            gamma=loop_setting("gamma"),
            datasets_path=args.datasets_path,
            protect=not args.no_protect,
        )
        print(f"loaded {len(buffer)} transitions from {args.dataset}", flush=True)

    return load


def make_envs(env_id: str, parallel_envs: int, max_episode_steps: int | None) -> tuple[Any, Any]:
    """Training env (a vector env when ``parallel_envs > 1``) and a single test env."""
    return train_and_test_envs(lambda: make_gym_env(env_id, max_episode_steps), parallel_envs)


def train_and_test_envs(make: Callable[[], gym.Env], parallel_envs: int) -> tuple[Any, gym.Env]:
    """``make()`` as the training env (``parallel_envs`` of them in a ``SyncVectorEnv`` whose
    episodes the loop resets itself) and once more as the test env."""
    if parallel_envs > 1:
        train_env = gym.vector.SyncVectorEnv(
            [make for _ in range(parallel_envs)], autoreset_mode=AutoresetMode.DISABLED
        )
    else:
        train_env = make()
    return train_env, make()


def build_agent(test_env: gym.Env, device: torch.device) -> super_sac.Agent:
    """A gin-configured Agent whose encoder concatenates the observation dict's keys; a Discrete
    action space makes it a SAC-Discrete agent (``discrete=True``, one output per action)."""
    dim = sum(gym.spaces.flatdim(space) for space in test_env.observation_space.spaces.values())
    act_space_size, discrete = action_spec(test_env.action_space)
    encoder = super_sac.nets.FlatEncoder(dim)
    return super_sac.Agent(act_space_size=act_space_size, encoder=encoder, discrete=discrete).to(
        device
    )


def action_spec(space: gym.Space) -> tuple[int, bool]:
    """``(act_space_size, discrete)`` for the Agent: the number of actions of a Discrete space,
    or the dimension of a Box."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n), True
    return int(space.shape[0]), False


def _resumed_args(
    args: argparse.Namespace, task_key: str = "env", extra_saved_args: tuple[str, ...] = ()
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
            **{
                k: v
                for k, v in saved.items()
                if k
                in (task_key, "parallel_envs", "seed", "max_episode_steps", "name")
                + extra_saved_args
            },
        }
    )
    return merged, [str(run_dir / "config.gin")]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return run(
        parse_args(argv),
        lambda a: make_envs(a.env, a.parallel_envs, a.max_episode_steps),
        build_agent,
        script="experiments/gym/train_gym.py",
        task_key="env",
        search_dirs=[HERE],
    )


def run(
    args: argparse.Namespace,
    make_envs: Callable[[argparse.Namespace], tuple[Any, Any]],
    build_agent: Callable[[gym.Env, torch.device], super_sac.Agent],
    script: str,
    task_key: str,
    search_dirs: list[Path],
    prepare_buffer: Callable[[super_sac.ReplayBuffer, gym.Env], None] | None = None,
    extra_saved_args: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Parse the gin files, build the envs, the agent and the buffer, and train.

    :param args: the parsed command line (:func:`add_common_args` plus the task option).
    :param make_envs: ``args -> (train_env, test_env)``.
    :param build_agent: ``(test_env, device) -> Agent``.
    :param script: the script's path, recorded in ``hparams.json``.
    :param task_key: the option naming the task ("env", "game"); part of the default run name
        and restored by ``--resume``.
    :param search_dirs: where bare ``--config`` names are looked up.
    :param prepare_buffer: fills the replay buffer before training (the offline script loads
        its dataset here); skipped when resuming (the checkpoint holds the buffer).
    :param extra_saved_args: further options a resumed run takes from its original command
        line (besides the task, ``parallel_envs``, ``seed``, ``max_episode_steps``, ``name``).
    """
    if args.threads:
        torch.set_num_threads(args.threads)
    config_files = [args.config]
    if args.resume:
        args, config_files = _resumed_args(args, task_key, extra_saved_args)
    bindings = list(args.gin_bindings)
    if args.steps is not None:
        bindings.append(f"super_sac.num_steps_online = {args.steps}")
    parse_gin(config_files, bindings, search_dirs=search_dirs)
    device = super_sac.get_device(args.device)
    if args.seed is not None:
        super_sac.set_seed(args.seed)
    train_env, test_env = make_envs(args)
    agent = build_agent(test_env, device)
    buffer = super_sac.ReplayBuffer(seed=args.seed)
    if prepare_buffer is not None and not args.resume:
        prepare_buffer(buffer, test_env)
    overrides: dict[str, Any] = {
        "name": args.name or f"{Path(args.config).stem}_{getattr(args, task_key)}",
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


def cli(main: Callable[[], Any], extra_errors: tuple[type[Exception], ...] = ()) -> None:
    """Run ``main()``, printing configuration errors (and ``extra_errors``) as one line and
    exiting with status 2."""
    try:
        main()
    except (
        super_sac.main.ConfigError,
        super_sac.checkpoint.CheckpointError,
        super_sac.config.GinConfigError,
        FileNotFoundError,
        NotImplementedError,
        *extra_errors,
    ) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    cli(main)
