"""The command line of the training scripts in ``experiments/``: their options, env and agent
builders, the run itself, and the one-line error report.

Each script is a thin file that calls one entry point here with the folder its gin files live in
(a bare ``--config`` name resolves there)::

    from super_sac import cli

    HERE = Path(__file__).resolve().parent

    def main(argv=None):
        return cli.train_gym(argv, search_dirs=[HERE], description=__doc__)

    if __name__ == "__main__":
        cli.cli(main)

Entry points: :func:`train_gym` (gymnasium envs), :func:`train_offline` (a recorded dataset,
then optional online fine-tuning), :func:`train_minatar`, :func:`train_atari` and
:func:`record_dataset` (run a policy and save what it does as a dataset). Each takes ``argv``
as a list of strings (``None``: ``sys.argv[1:]``), so tests and benchmarks call them in-process;
the training ones return the summary dict of :func:`super_sac.super_sac`. To build a script of
your own, combine :func:`add_common_args`, :func:`train_and_test_envs` and :func:`run`.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import json
import os
import sys
import tokenize
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import gin
import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

import super_sac
from super_sac import datasets
from super_sac.checkpoint import CheckpointError
from super_sac.config import GinConfigError, parse_gin
from super_sac.datasets import DatasetError
from super_sac.nets.cnns import MinAtarEncoder, NatureEncoder
from super_sac.validation import ConfigError
from super_sac.wrappers import make_atari_env, make_gym_env, make_minatar_env

PathLike = str | os.PathLike
SearchDirs = Sequence[PathLike]

MINATAR_GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")


class UnknownEnvError(ValueError):
    """An env id (or game name) that gymnasium does not know; the message suggests close ids
    and the package that may register it."""


# ------------------------------------------------------------------------------ options


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
    p.add_argument("--game", default="breakout", choices=MINATAR_GAMES, help="MinAtar game")
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
    p.add_argument("--game", default="Breakout", help="ALE game name (Breakout, Pong, ...)")
    add_common_args(p, default_config="basic_online.gin")
    return p


def add_common_args(p: argparse.ArgumentParser, default_config: str) -> None:
    """Add the options every training script shares.

    :param p: the parser to extend.
    :param default_config: the ``--config`` default (a gin file name).
    """
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


def unknown_env_message(env_id: str) -> str:
    """What to say about an env id gymnasium's registry lacks: the closest registered ids and
    how to get the env registered.

    :param env_id: the id that was asked for.
    """
    by_lower = {key.lower(): key for key in gym.registry}
    close = difflib.get_close_matches(env_id.lower(), list(by_lower), n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(by_lower[c] for c in close)}?" if close else ""
    return (
        f"unknown gymnasium env id {env_id!r}.{hint} Fix: check the id, or install the package "
        "that registers it: pip install 'gymnasium[mujoco]' for MuJoCo envs (HalfCheetah-v5, "
        "...), 'gymnasium[box2d]' for Box2D envs (LunarLander-v3, ...)."
    )


def make_env(env_id: str, max_episode_steps: int | None = None) -> gym.Env:
    """:func:`super_sac.wrappers.make_gym_env`, with an unknown id reported as
    :class:`UnknownEnvError` instead of gymnasium's traceback.

    :param env_id: gymnasium env id.
    :param max_episode_steps: episode time limit (None: the env's own).
    """
    try:
        return make_gym_env(env_id, max_episode_steps)
    except gym.error.UnregisteredEnv as err:
        raise UnknownEnvError(unknown_env_message(env_id)) from err
    except gym.error.DeprecatedEnv as err:  # an old version: gymnasium names the current one
        raise UnknownEnvError(f"gymnasium env id {env_id!r}: {err}") from err


def make_envs(env_id: str, parallel_envs: int, max_episode_steps: int | None) -> tuple[Any, Any]:
    """The training env (a vector env when ``parallel_envs > 1``) and a single test env.

    :param env_id: gymnasium env id.
    :param parallel_envs: number of training envs.
    :param max_episode_steps: episode time limit (None: the env's own).
    """
    return train_and_test_envs(lambda: make_env(env_id, max_episode_steps), parallel_envs)


def train_and_test_envs(make: Callable[[], gym.Env], parallel_envs: int) -> tuple[Any, gym.Env]:
    """``make()`` as the training env (``parallel_envs`` of them in a ``SyncVectorEnv`` whose
    episodes the loop resets itself) and once more as the test env.

    :param make: builds one env.
    :param parallel_envs: number of training envs.
    """
    if parallel_envs > 1:
        train_env = gym.vector.SyncVectorEnv(
            [make for _ in range(parallel_envs)], autoreset_mode=AutoresetMode.DISABLED
        )
    else:
        train_env = make()
    return train_env, make()


def minatar_envs(args: argparse.Namespace) -> tuple[Any, gym.Env]:
    """Training and test envs of ``--game`` (see :func:`minatar_parser`).

    :param args: the parsed command line.
    """
    return train_and_test_envs(
        lambda: make_minatar_env(args.game, max_episode_steps=args.max_episode_steps),
        args.parallel_envs,
    )


def make_atari(game: str, max_episode_steps: int | None = None) -> gym.Env:
    """:func:`super_sac.wrappers.make_atari_env`, with an unknown game reported as
    :class:`UnknownEnvError` naming the closest ALE games.

    :param game: ALE game name, e.g. "Breakout".
    :param max_episode_steps: time limit in agent steps (None: ALE's own).
    """
    try:
        return make_atari_env(game, max_episode_steps=max_episode_steps)
    except gym.error.UnregisteredEnv as err:
        games = sorted(
            {key[4:].rsplit("-v", 1)[0] for key in gym.registry if key.startswith("ALE/")}
        )
        close = difflib.get_close_matches(game, games, n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UnknownEnvError(
            f"unknown Atari game {game!r} (no env ALE/{game}-v5).{hint} Fix: give --game one of "
            f"ale-py's game names: {', '.join(games[:5])}, ... ({len(games)} in all)."
        ) from err


def atari_envs(args: argparse.Namespace) -> tuple[Any, gym.Env]:
    """Training and test envs of ``--game`` (see :func:`atari_parser`).

    :param args: the parsed command line.
    """
    return train_and_test_envs(
        lambda: make_atari(args.game, max_episode_steps=args.max_episode_steps),
        args.parallel_envs,
    )


# ------------------------------------------------------------------------------ agents


def build_agent(test_env: gym.Env, device: torch.device) -> super_sac.Agent:
    """A gin-configured Agent whose encoder concatenates the observation dict's keys; a Discrete
    action space makes it a SAC-Discrete agent (``discrete=True``, one output per action).

    :param test_env: an env of the task (its spaces size the networks).
    :param device: where the agent lives.
    """
    dim = sum(gym.spaces.flatdim(space) for space in test_env.observation_space.spaces.values())
    act_space_size, discrete = action_spec(test_env.action_space)
    encoder = super_sac.nets.FlatEncoder(dim)
    return super_sac.Agent(act_space_size=act_space_size, encoder=encoder, discrete=discrete).to(
        device
    )


def action_spec(space: gym.Space) -> tuple[int, bool]:
    """``(act_space_size, discrete)`` for the Agent: the number of actions of a Discrete space,
    or the dimension of a Box.

    :param space: the env's action space.
    """
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n), True
    return int(space.shape[0]), False


def minatar_agent(test_env: gym.Env, device: torch.device) -> super_sac.Agent:
    """A discrete Agent with a MinAtar CNN encoder sized for the game's channels.

    :param test_env: a MinAtar env from :func:`super_sac.wrappers.make_minatar_env`.
    :param device: where the agent lives.
    """
    channels = test_env.observation_space["obs"].shape[0]
    return super_sac.Agent(
        act_space_size=int(test_env.action_space.n),
        encoder=MinAtarEncoder(channels),
        discrete=True,
    ).to(device)


def atari_agent(test_env: gym.Env, device: torch.device) -> super_sac.Agent:
    """A discrete Agent with the Nature-DQN encoder over the stacked frames.

    :param test_env: an Atari env from :func:`super_sac.wrappers.make_atari_env`.
    :param device: where the agent lives.
    """
    channels, height, width = test_env.observation_space["obs"].shape
    return super_sac.Agent(
        act_space_size=int(test_env.action_space.n),
        encoder=NatureEncoder(channels, image_size=(height, width)),
        discrete=True,
    ).to(device)


# ------------------------------------------------------------------------------ running


def loop_setting(name: str) -> Any:
    """The value gin binds for ``super_sac.<name>`` (or the function's default).

    :param name: a parameter of :func:`super_sac.super_sac`.
    """
    try:
        return gin.query_parameter(f"super_sac.{name}")
    except ValueError:
        return inspect.signature(super_sac.super_sac).parameters[name].default


def dataset_loader(
    args: argparse.Namespace,
) -> Callable[[super_sac.ReplayBuffer, gym.Env], None] | None:
    """Apply ``--offline_steps``/``--bc_steps`` to the bindings and return the function that
    loads ``--dataset`` into the replay buffer (protected from online overwrites unless
    ``--no_protect``), or ``None`` without a dataset.

    :param args: a command line with the options of :func:`add_dataset_args`; its
        ``gin_bindings`` list is extended in place.
    """
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


def resumed_args(
    args: argparse.Namespace, task_key: str = "env", extra_saved_args: tuple[str, ...] = ()
) -> tuple[argparse.Namespace, list[str]]:
    """The command line of a run continued with ``--resume RUN_DIR``, and its config files.

    The task, ``parallel_envs``, ``seed``, ``max_episode_steps``, ``name`` and
    ``extra_saved_args`` come from the run's ``hparams.json`` (what it was started with); the
    other options are this command line's. The only config file is the run's ``config.gin``
    (the settings it ran with).

    :param args: this command line (``args.resume`` names the run directory).
    :param task_key: the option naming the task ("env", "game").
    :param extra_saved_args: further options to take from the original command line.
    :raises FileNotFoundError: when ``args.resume`` has no ``hparams.json``.
    """
    run_dir = Path(args.resume)
    hparams = run_dir / "hparams.json"
    if not hparams.exists():
        raise FileNotFoundError(
            f"--resume {run_dir}: no hparams.json there; is it a run directory?"
        )
    saved = (json.loads(hparams.read_text()).get("run_info") or {}).get("args") or {}
    kept = (task_key, "parallel_envs", "seed", "max_episode_steps", "name") + extra_saved_args
    merged = argparse.Namespace(**{**vars(args), **{k: v for k, v in saved.items() if k in kept}})
    return merged, [str(run_dir / "config.gin")]


def parse_gin_args(
    config_files: Sequence[PathLike], bindings: Sequence[str], search_dirs: SearchDirs
) -> None:
    """:func:`super_sac.config.parse_gin`, with gin's syntax errors (a malformed binding or
    config line) reported as :class:`super_sac.config.GinConfigError` naming the binding or line.

    :param config_files: gin files; bare names are looked up in ``search_dirs``.
    :param bindings: the ``--gin_bindings`` (and the settings other options make).
    :param search_dirs: folders searched for config files and their includes.
    """
    try:
        parse_gin(config_files, bindings, search_dirs=search_dirs)
    except (SyntaxError, tokenize.TokenError) as err:
        raise GinConfigError(gin_syntax_message(err, config_files, bindings)) from err


def gin_syntax_message(
    err: SyntaxError | tokenize.TokenError,
    config_files: Sequence[PathLike],
    bindings: Sequence[str],
) -> str:
    """One line about a gin syntax error: which binding or config line, what is wrong, the fix.

    Gin parses all bindings as one text, so the line it reports may be the binding after the
    broken one (an unclosed bracket); each binding is therefore parsed on its own to find it.

    :param err: what gin raised.
    :param config_files: the config files that were parsed.
    :param bindings: the bindings that were parsed.
    """
    cause: SyntaxError | tokenize.TokenError = err
    if isinstance(err, SyntaxError) and err.filename:  # a line of a config file
        where = f"gin file {err.filename}, line {err.lineno} ({(err.text or '').strip()!r})"
    else:
        where = f"the gin files {', '.join(str(f) for f in config_files)}"
        for binding in bindings:
            parser = gin.config_parser.ConfigParser(
                binding, gin.config.ParserDelegate(skip_unknown=True)
            )
            try:
                for _ in parser:
                    pass
            except (SyntaxError, tokenize.TokenError) as binding_err:
                where, cause = f"gin binding {binding.strip()!r}", binding_err
                break
            except Exception:  # not a syntax problem (parse_gin reports those)
                continue
    if isinstance(cause, SyntaxError):
        problem = (cause.msg or "invalid syntax").rstrip(".")
    else:
        problem = f"{cause.args[0]} (an unclosed bracket or quote?)"
    return (
        f"cannot parse {where}: {problem}. Fix: write settings as "
        "'<configurable>.<parameter> = <python literal>', e.g. 'super_sac.batch_size = 512'."
    )


def run(
    args: argparse.Namespace,
    make_envs: Callable[[argparse.Namespace], tuple[Any, Any]],
    build_agent: Callable[[gym.Env, torch.device], super_sac.Agent],
    script: str,
    task_key: str,
    search_dirs: SearchDirs,
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
    :return: the summary dict of :func:`super_sac.super_sac`.
    """
    if args.threads:
        torch.set_num_threads(args.threads)
    config_files = [args.config]
    if args.resume:
        args, config_files = resumed_args(args, task_key, extra_saved_args)
    bindings = list(args.gin_bindings)
    if args.steps is not None:
        bindings.append(f"super_sac.num_steps_online = {args.steps}")
    parse_gin_args(config_files, bindings, search_dirs)
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


# ------------------------------------------------------------------------------ entry points


def train_gym(
    argv: Sequence[str] | None = None,
    *,
    search_dirs: SearchDirs = (),
    description: str | None = None,
    script: str = "experiments/gym/train_gym.py",
) -> dict[str, Any]:
    """Train on a gymnasium env: the command line of ``experiments/gym/train_gym.py``.

    :param argv: the command line (None: ``sys.argv[1:]``).
    :param search_dirs: where bare ``--config`` names are looked up (the script passes its
        folder, ``experiments/gym``).
    :param description: the ``--help`` text.
    :param script: recorded in ``hparams.json``.
    :return: the summary dict of :func:`super_sac.super_sac`.
    """
    return run(
        build_parser(description).parse_args(argv),
        lambda a: make_envs(a.env, a.parallel_envs, a.max_episode_steps),
        build_agent,
        script=script,
        task_key="env",
        search_dirs=search_dirs,
    )


def train_offline(
    argv: Sequence[str] | None = None,
    *,
    search_dirs: SearchDirs = (),
    description: str | None = None,
    script: str = "experiments/offline/train_offline.py",
) -> dict[str, Any]:
    """Learn from a dataset (``--dataset``), then optionally fine-tune online: the command line
    of ``experiments/offline/train_offline.py``. The default run name is
    ``<config>_<dataset name>``.

    :param argv: the command line (None: ``sys.argv[1:]``).
    :param search_dirs: where bare ``--config`` names are looked up (the script passes
        ``experiments/offline`` and ``experiments/gym``).
    :param description: the ``--help`` text.
    :param script: recorded in ``hparams.json``.
    :return: the summary dict of :func:`super_sac.super_sac`.
    """
    parser = offline_parser(description)
    args = parser.parse_args(argv)
    if args.dataset is None and not args.resume:
        parser.error("--dataset is required (a resumed run takes it from its run directory)")
    if args.name is None and not args.resume:
        args.name = f"{Path(args.config).stem}_{Path(args.dataset).stem.replace('/', '_')}"
    return run(
        args,
        lambda a: make_envs(a.env, a.parallel_envs, a.max_episode_steps),
        build_agent,
        script=script,
        task_key="env",
        search_dirs=search_dirs,
        prepare_buffer=dataset_loader(args),
        extra_saved_args=("dataset", "datasets_path"),
    )


def train_minatar(
    argv: Sequence[str] | None = None,
    *,
    search_dirs: SearchDirs = (),
    description: str | None = None,
    script: str = "experiments/minatar/train_minatar.py",
) -> dict[str, Any]:
    """Train SAC-Discrete on a MinAtar game, online or from ``--dataset``: the command line of
    ``experiments/minatar/train_minatar.py``.

    :param argv: the command line (None: ``sys.argv[1:]``).
    :param search_dirs: where bare ``--config`` names are looked up (``experiments/minatar``).
    :param description: the ``--help`` text.
    :param script: recorded in ``hparams.json``.
    :return: the summary dict of :func:`super_sac.super_sac`.
    """
    args = minatar_parser(description).parse_args(argv)
    return run(
        args,
        minatar_envs,
        minatar_agent,
        script=script,
        task_key="game",
        search_dirs=search_dirs,
        prepare_buffer=dataset_loader(args),
        extra_saved_args=("dataset", "datasets_path"),
    )


def train_atari(
    argv: Sequence[str] | None = None,
    *,
    search_dirs: SearchDirs = (),
    description: str | None = None,
    script: str = "experiments/atari/train_atari.py",
) -> dict[str, Any]:
    """Train SAC-Discrete on an Atari game: the command line of
    ``experiments/atari/train_atari.py``.

    :param argv: the command line (None: ``sys.argv[1:]``).
    :param search_dirs: where bare ``--config`` names are looked up (``experiments/atari``).
    :param description: the ``--help`` text.
    :param script: recorded in ``hparams.json``.
    :return: the summary dict of :func:`super_sac.super_sac`.
    """
    return run(
        atari_parser(description).parse_args(argv),
        atari_envs,
        atari_agent,
        script=script,
        task_key="game",
        search_dirs=search_dirs,
    )


CLI_ERRORS: tuple[type[Exception], ...] = (
    ConfigError,
    CheckpointError,
    GinConfigError,
    DatasetError,
    UnknownEnvError,
    gym.error.DependencyNotInstalled,
    FileNotFoundError,
    NotImplementedError,
)


def cli(main: Callable[[], Any], extra_errors: tuple[type[Exception], ...] = ()) -> None:
    """Run ``main()``; an error of the user's making (:data:`CLI_ERRORS`, ``extra_errors``) is
    printed as ``error: <message>`` on stderr and exits with status 2 instead of a traceback.

    :param main: the script's entry point, called without arguments.
    :param extra_errors: further exception types to report that way.
    """
    try:
        main()
    except (*CLI_ERRORS, *extra_errors) as err:
        fail(str(err))


def fail(message: str) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with status 2 (argparse's usage status).

    :param message: what went wrong and how to fix it.
    """
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


# ------------------------------------------------------------------------------ recording


def record_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``experiments/offline/record_replay.py``.

    :param description: the help text.
    """
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
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
    return p


def load_agent(
    policy: PathLike, config: PathLike, env: gym.Env, search_dirs: SearchDirs = ()
) -> super_sac.Agent:
    """Rebuild an agent (:func:`build_agent`) from the gin file it was trained with and load
    its saved weights, on the CPU and in eval mode.

    :param policy: ``agent.pt``, a run directory, or a checkpoint folder (its ``state.pt``).
    :param config: the gin file; a bare name is looked up in ``search_dirs``.
    :param env: an env of the task.
    :param search_dirs: folders searched for ``config``.
    """
    parse_gin_args([config], [], search_dirs)
    agent = build_agent(env, torch.device("cpu"))
    path = Path(policy)
    if (path / "state.pt").exists():  # a checkpoint folder
        state = torch.load(path / "state.pt", map_location="cpu", weights_only=True)
        agent.load_state_dict(state["agent"])
    else:
        agent.load(path)
    agent.eval()
    return agent


def record(args: argparse.Namespace, search_dirs: SearchDirs = ()) -> dict[str, Any]:
    """Record the dataset :func:`record_parser`'s options describe and write it.

    :param args: the parsed command line.
    :param search_dirs: folders searched for ``--config``.
    :return: a summary with the returns of the complete episodes.
    """
    if args.dataset_id is None and args.npz is None:
        raise SystemExit("error: give --dataset_id (Minari) and/or --npz")
    torch.set_num_threads(args.threads)
    super_sac.set_seed(args.seed)
    env = make_env(args.env, args.max_episode_steps)
    if args.policy == "random":
        policy = datasets.random_policy(env, args.seed)
    else:
        agent = load_agent(args.policy, args.config, env, search_dirs)
        policy = datasets.agent_policy(
            agent, args.noise_std, stochastic=not args.deterministic, seed=args.seed
        )
    episodes, obs_space, act_space = datasets.record_episodes(
        env, policy, args.transitions, seed=args.seed
    )
    limit = getattr(getattr(env, "spec", None), "max_episode_steps", None)
    complete = [ep for ep in episodes if ep.terminations[-1] or len(ep.rewards) == limit]
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


def record_dataset(
    argv: Sequence[str] | None = None,
    *,
    search_dirs: SearchDirs = (),
    description: str | None = None,
) -> dict[str, Any]:
    """Record a dataset and print its summary: the command line of
    ``experiments/offline/record_replay.py``.

    :param argv: the command line (None: ``sys.argv[1:]``).
    :param search_dirs: folders searched for ``--config`` (``experiments/offline`` and
        ``experiments/gym``).
    :param description: the ``--help`` text.
    :return: the summary of :func:`record`.
    """
    summary = record(record_parser(description).parse_args(argv), search_dirs)
    shown = {k: v for k, v in summary.items() if k != "complete_episode_returns"}
    print(json.dumps(shown, indent=1), flush=True)
    return summary


def dataset_id(env_id: str, quality: str) -> str:
    """Minari id of a dataset that ``experiments/offline/build_datasets.py`` builds, e.g.
    ``super_sac/halfcheetah-medium-v0``.

    :param env_id: gymnasium env id.
    :param quality: "random", "medium" or "expert".
    """
    return f"super_sac/{env_id.split('-')[0].lower()}-{quality}-v0"


def normalized_score(ret: float, random_return: float, expert_return: float) -> float:
    """D4RL's normalized score: 0 = random policy, 100 = expert policy.

    :param ret: the return to score.
    :param random_return: the random policy's return.
    :param expert_return: the expert policy's return.
    """
    return 100.0 * (ret - random_return) / (expert_return - random_return)
