"""Build envs, agent and buffer from the parsed settings and train, resuming where asked; the
scripts' entry points and their one-line error report (the command line and gin reading are in
:mod:`super_sac.cli.options`)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import gin
import gymnasium as gym
import numpy as np
import torch

import super_sac
from super_sac.checkpoint import CheckpointError
from super_sac.cli.factories import (
    UnknownEnvError,
    atari_agent,
    atari_envs,
    build_agent,
    dmc_agent,
    dmc_envs,
    gym_envs,
    minatar_agent,
    minatar_envs,
)
from super_sac.cli.options import (  # noqa: F401  (given_options, gin_syntax_message: re-exported)
    _bound,
    _bound_value,
    bound_setting,
    gin_syntax_message,
    given_options,
    loop_setting,
    parse_command_line,
    parse_gin_args,
    resumed_args,
    warn_beyond_time_limit,
)
from super_sac.cli.parsers import (
    DMC_ENV_OPTIONS,
    atari_parser,
    build_parser,
    check_dmc_args,
    dmc_parser,
    minatar_parser,
    offline_parser,
)
from super_sac.config import GinConfigError
from super_sac.datasets import DatasetError
from super_sac.loggers import MissingExtraError, RunDirInUseError
from super_sac.main import validation_only
from super_sac.validation import ConfigError

PathLike = str | os.PathLike
SearchDirs = Sequence[PathLike]


def dataset_loader(
    args: argparse.Namespace,
) -> Callable[[super_sac.ReplayBuffer, gym.Env, super_sac.Agent], None] | None:
    """Apply ``--offline_steps``/``--bc_steps`` to the bindings and return the function that
    loads ``--dataset`` into the replay buffer (protected from online overwrites unless
    ``--no_protect``), or ``None`` without a dataset. When the agent's encoder standardises
    observations (``FlatEncoder.standardize = True``), it also fits the encoder's statistics to
    the dataset's observations.

    :param args: a command line with the options of :func:`add_dataset_args`; its
        ``gin_bindings`` list is extended in place.
    """
    for flag, setting in (("offline_steps", "num_steps_offline"), ("bc_steps", "bc_warmup_steps")):
        if getattr(args, flag) is not None:
            args.gin_bindings.append(f"super_sac.{setting} = {getattr(args, flag)}")
    if args.dataset is None:
        unused = [f"--{k}" for k in ("no_protect", "datasets_path") if getattr(args, k)]
        if unused and not args.resume:  # a resumed run keeps its dataset (and its own options)
            raise ConfigError(
                f"{', '.join(unused)} {'apply' if len(unused) > 1 else 'applies'} to the dataset "
                "a run loads, and no --dataset is given. Fix: add --dataset, or leave them out"
            )
        return None

    def load(buffer: super_sac.ReplayBuffer, env: gym.Env, agent: super_sac.Agent) -> None:
        buffer.load_dataset(
            args.dataset,
            env,
            gamma=loop_setting("gamma"),
            datasets_path=args.datasets_path,
            protect=not args.no_protect,
        )
        print(f"loaded {len(buffer)} transitions from {args.dataset}", flush=True)
        if getattr(agent.encoder, "standardize", False):
            agent.encoder.fit_statistics(buffer.gather(np.arange(len(buffer))).obs)
            print("observations standardised with the dataset's mean and std", flush=True)

    return load


def run(
    args: argparse.Namespace,
    make_envs: Callable[[argparse.Namespace], tuple[Any, Any]],
    build_agent: Callable[[gym.Env, torch.device], super_sac.Agent],
    script: str,
    task_key: str,
    search_dirs: SearchDirs,
    prepare_buffer: Callable[[super_sac.ReplayBuffer, gym.Env, super_sac.Agent], None]
    | None = None,
    extra_saved_args: tuple[str, ...] = (),
    loop_defaults: Callable[[argparse.Namespace], dict[str, Any]] | None = None,
    given: set[str] | None = None,
    default_name: Callable[[argparse.Namespace], str] | None = None,
) -> dict[str, Any]:
    """Parse the gin files, build the envs, the agent and the buffer, and train.

    :param args: the parsed command line (:func:`add_common_args` plus the task option).
    :param make_envs: ``args -> (train_env, test_env)``.
    :param build_agent: ``(test_env, device) -> Agent``.
    :param script: the script's path, recorded in ``hparams.json``.
    :param task_key: the option naming the task ("env", "game"); part of the default run name
        and restored by ``--resume``.
    :param search_dirs: where bare ``--config`` names are looked up.
    :param prepare_buffer: ``(buffer, test_env, agent)``: fills the replay buffer before
        training (the offline script loads its dataset here, and fits a standardising encoder's
        statistics); skipped when resuming (the checkpoint holds the buffer and the agent).
    :param extra_saved_args: further options a resumed run takes from its original command
        line (besides the task, ``parallel_envs``, ``seed``, ``max_episode_steps``, ``name``).
    :param loop_defaults: ``args -> {setting: value}``, called once the gin files are parsed:
        the script's values of loop settings that no gin file or binding sets (the DeepMind
        Control pixel script's default augmenter).
    :param given: the options the command line gave
        (:func:`~super_sac.cli.options.given_options`): with them, a resumed run refuses
        options that change the run's (see :func:`~super_sac.cli.options.resumed_args`).
    :param default_name: ``args -> name`` without ``--name`` or a gin ``super_sac.name``
        (default ``<config>_<task>``).
    :return: the summary dict of :func:`super_sac.super_sac`.
    """
    if args.threads:
        torch.set_num_threads(args.threads)
    config_files = [args.config]
    if args.resume:
        args, config_files = resumed_args(args, task_key, extra_saved_args, given)
    bindings = list(args.gin_bindings)
    if args.steps is not None:
        bindings.append(f"super_sac.num_steps_online = {args.steps}")
    parse_gin_args(config_files, bindings, search_dirs)
    for option in ("seed", "name"):  # the flag wins; without it, a gin binding is the value
        if getattr(args, option) is None and _bound(option) and not args.resume:
            setattr(args, option, _bound_value(option))
    try:
        device = super_sac.get_device(args.device)
    except ValueError as err:  # a device this machine lacks: the user's to fix, in one line
        raise ConfigError(f"--device {args.device}: {err}") from err
    if args.seed is not None:
        super_sac.set_seed(args.seed)
    args.record_video = bound_setting("video_interval", 0) > 0  # the test env then renders
    if args.record_video:
        # MuJoCo renders headless only through EGL (or OSMesa); its default, GLFW, needs a display
        os.environ.setdefault("MUJOCO_GL", "egl")
    train_env, test_env = make_envs(args)
    try:  # from here on, the envs (async workers too) are closed whatever happens
        warn_beyond_time_limit(test_env, args.max_episode_steps)
        agent = build_agent(test_env, device)
        buffer = super_sac.ReplayBuffer(seed=args.seed, **frame_stack_default(test_env))
        if prepare_buffer is not None and not args.resume:
            prepare_buffer(buffer, test_env, agent)
        overrides: dict[str, Any] = {
            "name": args.name
            or (
                default_name(args)
                if default_name
                else f"{Path(args.config).stem}_{getattr(args, task_key)}"
            ),
            "seed": args.seed,
            "resume": args.resume or False,
            "run_info": {
                "script": script,
                "args": {k: v for k, v in vars(args).items() if k != "resume"},
            },
        }
        if getattr(args, "run_dir", None) and not args.resume:
            overrides["run_dir"] = args.run_dir
        if args.logging is not None:
            overrides["logging_method"] = args.logging
        if args.max_episode_steps is not None:
            overrides["max_episode_steps"] = args.max_episode_steps
        if args.parallel_envs > 1 and not _bound("transitions_per_online_step"):
            overrides["transitions_per_online_step"] = args.parallel_envs  # every env steps once
        if loop_defaults is not None:
            defaults = loop_defaults(args)
            overrides.update({k: v for k, v in defaults.items() if not _bound(k)})
        if getattr(args, "dry_run", False):
            with validation_only():
                super_sac.super_sac(agent, buffer, train_env, test_env, **overrides)
            print(
                "dry run: the options, gin files, settings, envs, agent (and dataset) are valid; "
                "nothing was trained or written"
            )
            return {"dry_run": True}
        return super_sac.super_sac(agent, buffer, train_env, test_env, **overrides)
    finally:
        train_env.close()
        test_env.close()


def frame_stack_default(env: gym.Env) -> dict[str, Any]:
    """``ReplayBuffer`` arguments that store the frame-stacked keys of ``env`` (Atari's
    ``FrameStackObservation``) once per frame, unless a gin binding of
    ``ReplayBuffer.frame_stack`` says otherwise (``ReplayBuffer.frame_stack = {}`` turns it off).
    """
    try:
        gin.query_parameter("super_sac.replay.ReplayBuffer.frame_stack")
    except ValueError:
        stacked = super_sac.wrappers.frame_stack_of(env)
        return {"frame_stack": stacked} if stacked else {}
    return {}


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
    _, args, given = parse_command_line(build_parser, description, argv)
    return run(
        args,
        gym_envs,
        build_agent,
        script=script,
        task_key="env",
        search_dirs=search_dirs,
        given=given,
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
    parser, args, given = parse_command_line(offline_parser, description, argv)
    if args.dataset is None and not args.resume:
        parser.error("--dataset is required (a resumed run takes it from its run directory)")
    return run(
        args,
        gym_envs,
        build_agent,
        script=script,
        task_key="env",
        search_dirs=search_dirs,
        prepare_buffer=dataset_loader(args),
        extra_saved_args=("dataset", "datasets_path"),
        given=given,
        default_name=lambda a: f"{Path(a.config).stem}_{Path(a.dataset).stem.replace('/', '_')}",
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
    _, args, given = parse_command_line(minatar_parser, description, argv)
    return run(
        args,
        minatar_envs,
        minatar_agent,
        script=script,
        task_key="game",
        search_dirs=search_dirs,
        prepare_buffer=dataset_loader(args),
        extra_saved_args=("dataset", "datasets_path"),
        given=given,
    )


def train_atari(
    argv: Sequence[str] | None = None,
    *,
    search_dirs: SearchDirs = (),
    description: str | None = None,
    script: str = "experiments/atari/train_atari.py",
) -> dict[str, Any]:
    """Train SAC-Discrete on an Atari game (frames shifted by DrQ-v2's random shift unless gin
    binds ``super_sac.augmenter``): the command line of ``experiments/atari/train_atari.py``.

    :param argv: the command line (None: ``sys.argv[1:]``).
    :param search_dirs: where bare ``--config`` names are looked up (``experiments/atari``).
    :param description: the ``--help`` text.
    :param script: recorded in ``hparams.json``.
    :return: the summary dict of :func:`super_sac.super_sac`.
    """
    _, args, given = parse_command_line(atari_parser, description, argv)
    return run(
        args,
        atari_envs,
        atari_agent,
        script=script,
        task_key="game",
        search_dirs=search_dirs,
        loop_defaults=atari_loop_defaults,
        given=given,
    )


def default_pixel_augmenter() -> Any:
    """DrQ-v2's random shift (Yarats et al. 2021: replicate-pad 4, bilinear resampling), as
    ``AugmentationSequence([Drqv2Aug()], shared_draw=False)``: the augmentation the original's
    DeepMind Control pixel script passed to the loop, with ``obs`` and ``next_obs`` shifted by
    independent draws as DrQ-v2's code does (it augments each of them with its own call)."""
    from super_sac.augmentations import AugmentationSequence, Drqv2Aug

    return AugmentationSequence([Drqv2Aug()], shared_draw=False)


def dmc_loop_defaults(args: argparse.Namespace) -> dict[str, Any]:
    """The pixel script's loop settings where gin sets none: :func:`default_pixel_augmenter`
    from pixels (nothing from states).

    :param args: the command line of :func:`super_sac.cli.parsers.dmc_parser`.
    """
    if args.from_states or _bound("augmenter"):
        return {}
    return {"augmenter": default_pixel_augmenter()}


def atari_loop_defaults(args: argparse.Namespace) -> dict[str, Any]:
    """The Atari script's loop settings where gin sets none: :func:`default_pixel_augmenter`,
    as the original's Atari script passed DrQ-v2's random shift to the loop (and DrQ,
    Kostrikov et al. 2020, shifts Atari frames by up to 4 pixels).

    :param args: the command line of :func:`super_sac.cli.parsers.atari_parser` (unused).
    """
    return {} if _bound("augmenter") else {"augmenter": default_pixel_augmenter()}


DMC_SAVED_ARGS = ("task", *DMC_ENV_OPTIONS, "dataset", "datasets_path")


def train_dmc(
    argv: Sequence[str] | None = None,
    *,
    search_dirs: SearchDirs = (),
    description: str | None = None,
    script: str = "experiments/dmc/train_dmc_from_pixels.py",
) -> dict[str, Any]:
    """Train on a DeepMind Control task from pixels (the DrQ encoder, DrQ-v2's random shift
    unless gin binds ``super_sac.augmenter``) or, with ``--from_states``, from its state vector
    (``FlatEncoder``); online, or from ``--dataset`` first: the command line of
    ``experiments/dmc/train_dmc_from_pixels.py``. The default run name is
    ``<config>_<domain>_<task>``.

    :param argv: the command line (None: ``sys.argv[1:]``).
    :param search_dirs: where bare ``--config`` names are looked up (``experiments/dmc``).
    :param description: the ``--help`` text.
    :param script: recorded in ``hparams.json``.
    :return: the summary dict of :func:`super_sac.super_sac`.
    """
    parser, args, given = parse_command_line(dmc_parser, description, argv)
    check_dmc_args(parser, args)
    if args.env is not None:
        from super_sac.envs.dmc import UnknownDMCTaskError, parse_dmc_id

        try:
            args.domain, args.task = parse_dmc_id(args.env)
        except UnknownDMCTaskError as err:
            raise UnknownEnvError(str(err)) from None
    return run(
        args,
        dmc_envs,
        dmc_agent,
        script=script,
        task_key="domain",
        search_dirs=search_dirs,
        prepare_buffer=dataset_loader(args),
        extra_saved_args=DMC_SAVED_ARGS,
        loop_defaults=dmc_loop_defaults,
        given=given,
        default_name=lambda a: f"{Path(a.config).stem}_{a.domain}_{a.task}",
    )


CLI_ERRORS: tuple[type[Exception], ...] = (
    ConfigError,
    CheckpointError,
    GinConfigError,
    DatasetError,
    UnknownEnvError,
    gym.error.DependencyNotInstalled,
    FileNotFoundError,
    FileExistsError,
    RunDirInUseError,
    MissingExtraError,
    NotImplementedError,
)


def cli(main: Callable[[], Any], extra_errors: tuple[type[Exception], ...] = ()) -> None:
    """Run ``main()``; an error of the user's making (:data:`CLI_ERRORS`, ``extra_errors``) is
    printed as ``error: <message>`` on stderr and exits with status 2 instead of a traceback.
    Ctrl-C and SIGTERM stop the run without a traceback (exit status 130), after the loop has
    printed its newest checkpoint and the ``--resume`` command.

    :param main: the script's entry point, called without arguments.
    :param extra_errors: further exception types to report that way.
    """
    previous = _sigterm_as_interrupt()
    try:
        main()
    except (*CLI_ERRORS, *extra_errors) as err:
        fail(str(err))
    except KeyboardInterrupt:
        # the loop has said where its last checkpoint is and how to resume
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _sigterm_as_interrupt() -> Any:
    """Make SIGTERM (a cluster's preemption, ``kill``) stop the run as Ctrl-C does, so it
    ends with the same message instead of silently. :return: the previous handler, or ``None``
    outside the main thread (where handlers cannot be set)."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, interrupt)


def fail(message: str) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with status 2 (argparse's usage status).

    :param message: what went wrong and how to fix it.
    """
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


# ------------------------------------------------------------------------------ recording
