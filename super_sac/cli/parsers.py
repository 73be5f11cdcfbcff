"""The command lines of the training scripts."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from super_sac.cli.factories import MINATAR_GAMES

PathLike = str | os.PathLike
SearchDirs = Sequence[PathLike]


def _at_least_one(text: str) -> int:
    """An argparse type: a whole number of 1 or more (a count of envs)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``experiments/gym/train_gym.py``: ``--env`` plus the common options
    (default config ``sac.gin``).

    :param description: the help text (the scripts pass their docstring).
    """
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--env", default="Pendulum-v1", help="gymnasium env id")
    add_common_args(p, default_config="sac.gin")
    return p


def offline_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``experiments/offline/train_offline.py``: :func:`build_parser` with
    the dataset options (default config ``awac.gin``).

    :param description: the help text.
    """
    p = build_parser(description)
    p.set_defaults(config="awac.gin")
    add_dataset_args(p, required=False)
    return p


def minatar_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``experiments/minatar/train_minatar.py``: ``--game``, the common and
    the dataset options (default config ``basic_online.gin``, 10,000-step episodes).

    :param description: the help text.
    """
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument(
        "--game",
        "--env",
        dest="game",
        default="breakout",
        choices=MINATAR_GAMES,
        help="MinAtar game (--env is an alias, so sweeps can pass their env names)",
    )
    add_common_args(p, default_config="basic_online.gin")
    add_dataset_args(p, required=False)
    p.set_defaults(max_episode_steps=10_000)
    return p


def atari_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``experiments/atari/train_atari.py``: ``--game`` and the common
    options (default config ``basic_online.gin``).

    :param description: the help text.
    """
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument(
        "--game",
        "--env",
        dest="game",
        default="Breakout",
        help="ALE game name (Breakout, Pong, ...); --env is an alias, for sweeps",
    )
    add_common_args(p, default_config="basic_online.gin")
    return p


def dmc_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``experiments/dmc/train_dmc_from_pixels.py``: ``--domain --task``,
    the pixel options, the common and the dataset options (default config ``drqv2.gin``).

    :param description: the help text.
    """
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--domain", default="cartpole", help="dm_control suite domain")
    p.add_argument("--task", default="swingup", help="task of the domain")
    p.add_argument(
        "--env",
        default=None,
        help="domain and task in one id, 'cartpole-swingup' or 'dmc:cartpole-swingup' (overrides "
        "--domain/--task; what experiments/sweep.py --envs passes)",
    )
    add_common_args(p, default_config="drqv2.gin")
    add_dmc_args(p)
    add_dataset_args(p, required=False)
    return p


def add_dmc_args(p: argparse.ArgumentParser) -> None:
    """Add the DeepMind Control env options (see :func:`super_sac.envs.dmc.make_dmc_env`).

    :param p: the parser to extend.
    """
    p.add_argument(
        "--action_repeat", type=int, default=2, help="control steps per agent step (DrQ-v2: 2)"
    )
    p.add_argument("--frame_stack", type=int, default=3, help="frames per pixel observation")
    p.add_argument("--image_size", type=int, default=84, help="pixel observation height/width")
    p.add_argument(
        "--camera_id",
        type=int,
        default=None,
        help="camera of the frames and of evaluation videos (default: 2 for quadruped, else 0); "
        "with --from_states it picks the videos' camera only",
    )
    p.add_argument(
        "--fast_render",
        action="store_true",
        help="shadows and multisampling off: about 5x faster CPU rendering, frames unlike the "
        "published setups",
    )
    p.add_argument(
        "--from_states",
        action="store_true",
        help="observe the flat state vector (FlatEncoder) instead of pixels, e.g. sac_state.gin",
    )


# add_dmc_args' options: together they decide what the env's transitions are
DMC_ENV_OPTIONS = ("action_repeat", "frame_stack", "image_size", "camera_id", "fast_render",
                   "from_states")  # fmt: skip
# those that shape pixel observations only (camera_id and fast_render also shape the evaluation
# videos, so a state run may set them)
PIXEL_ONLY_OPTIONS = ("frame_stack", "image_size")


def check_dmc_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse the pixel options given with ``--from_states``, which would ignore them.

    :param p: the parser of ``args`` (its defaults tell what was given).
    :param args: a command line with :func:`add_dmc_args`'s options.
    """
    if not args.from_states:
        return
    given = [f"--{key}" for key in PIXEL_ONLY_OPTIONS if getattr(args, key) != p.get_default(key)]
    if given:
        p.error(
            f"{', '.join(given)} shape pixel observations, and --from_states observes the state "
            "vector instead. Fix: leave them out, or drop --from_states"
        )


def add_common_args(p: argparse.ArgumentParser, default_config: str) -> None:
    """Add the options every training script shares.

    :param p: the parser to extend.
    :param default_config: the ``--config`` default (a gin file name).
    """
    p.add_argument("--config", default=default_config, help="gin file (bare names resolve here)")
    p.add_argument(
        "--name",
        default=None,
        help="run name (default: <config>_<env or game>, with --dataset <config>_<dataset>)",
    )
    p.add_argument(
        "--run_dir",
        default=None,
        help="the exact run directory (default: <SSAC_SAVE>/<name>_<i>); it must not hold a "
        "run yet (a sweep gives each trial its folder this way)",
    )
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help="override super_sac.num_steps_online")
    p.add_argument(
        "--dry_run",
        action="store_true",
        help="check the options, the gin files, the loop's settings, the envs, the agent and a "
        "--dataset as a run would, then exit without training or writing anything (the sweep "
        "runner checks every config and env so)",
    )
    p.add_argument(
        "--parallel_envs",
        type=_at_least_one,
        default=1,
        help="parallel training envs (without a transitions_per_online_step setting of your "
        "own, each online step then steps every env once)",
    )
    p.add_argument(
        "--vector",
        choices=["sync", "async"],
        default="sync",
        help="sync: the training envs step in this process (SyncVectorEnv); async: one worker "
        "process per env (AsyncVectorEnv, shared memory), for envs whose step or render is slow",
    )
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
    """Add the options of the scripts that can learn from a recorded dataset (offline, MinAtar).

    :param p: the parser to extend.
    :param required: whether ``--dataset`` must be given.
    """
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


# ------------------------------------------------------------------------------ envs
