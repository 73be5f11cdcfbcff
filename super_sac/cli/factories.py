"""Env and agent factories of the training scripts, with one-line errors for unknown ids."""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Callable, Sequence
from typing import Any

import gin
import gymnasium as gym
import torch

import super_sac
from super_sac.nets.cnns import DrQPixelEncoder, MinAtarEncoder, NatureEncoder
from super_sac.vector_envs import make_vector_env
from super_sac.wrappers import make_atari_env, make_gym_env, make_minatar_env

DMC_PREFIX = "dmc:"
PathLike = str | os.PathLike
SearchDirs = Sequence[PathLike]


MINATAR_GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")


class UnknownEnvError(ValueError):
    """An env id (or game name) that gymnasium does not know; the message suggests close ids
    and the package that may register it."""


# ------------------------------------------------------------------------------ options


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


def make_env(env_id: str, max_episode_steps: int | None = None, **kwargs: Any) -> gym.Env:
    """:func:`super_sac.wrappers.make_gym_env`, with an unknown id reported as
    :class:`UnknownEnvError` instead of gymnasium's traceback.

    An id ``dmc:<domain>-<task>`` (``dmc:cartpole-swingup``) gives that DeepMind Control task
    from states (:func:`make_dmc`).

    :param env_id: gymnasium env id.
    :param max_episode_steps: episode time limit (None: the env's own).
    :param kwargs: passed to ``gymnasium.make`` (e.g. ``render_mode="rgb_array"``).
    """
    if env_id.startswith(DMC_PREFIX):  # a DeepMind Control task from states
        domain, task = _dmc_pair(env_id)
        env = make_dmc(domain, task, **kwargs)
        return env if max_episode_steps is None else gym.wrappers.TimeLimit(env, max_episode_steps)
    try:
        return make_gym_env(env_id, max_episode_steps, **kwargs)
    except gym.error.UnregisteredEnv as err:
        raise UnknownEnvError(unknown_env_message(env_id)) from err
    except gym.error.DeprecatedEnv as err:  # an old version: gymnasium names the current one
        raise UnknownEnvError(f"gymnasium env id {env_id!r}: {err}") from err


def make_envs(
    env_id: str,
    parallel_envs: int,
    max_episode_steps: int | None,
    test_render_mode: str | None = None,
    vector: str = "sync",
) -> tuple[Any, Any]:
    """The training env (a vector env when ``parallel_envs > 1`` or ``vector="async"``) and a
    single test env.

    :param env_id: gymnasium env id.
    :param parallel_envs: number of training envs.
    :param max_episode_steps: episode time limit (None: the env's own).
    :param test_render_mode: the test env's render mode ("rgb_array" for evaluation videos).
    :param vector: ``"sync"`` or ``"async"`` (see :func:`train_and_test_envs`).
    """
    return train_and_test_envs(
        lambda **kw: make_env(env_id, max_episode_steps, **kw),
        parallel_envs,
        test_render_mode,
        vector=vector,
    )


def train_and_test_envs(
    make: Callable[..., gym.Env],
    parallel_envs: int,
    test_render_mode: str | None = None,
    vector: str = "sync",
) -> tuple[Any, gym.Env]:
    """``make()`` as the training env and once more as the test env. With ``vector="sync"``,
    ``parallel_envs > 1`` envs form a ``SyncVectorEnv`` (one env stays a plain env); with
    ``"async"``, the training envs (even a single one) run in worker processes of an
    ``AsyncVectorEnv`` with shared memory. Both vector envs leave the resets to the loop
    (``DISABLED`` autoreset), so episodes get the loop's seeds and resumes replay them exactly.

    :param make: builds one env; takes ``render_mode=...`` when ``test_render_mode`` is given.
    :param parallel_envs: number of training envs.
    :param test_render_mode: the test env's render mode, or ``None`` (no rendering, no cost).
    :param vector: ``"sync"`` or ``"async"`` (:func:`super_sac.vector_envs.make_vector_env`).
    """
    if parallel_envs > 1 or vector != "sync":
        train_env = make_vector_env(make, parallel_envs, vector)
    else:
        train_env = make()
    test_env = make() if test_render_mode is None else make(render_mode=test_render_mode)
    return train_env, test_env


def gym_envs(args: argparse.Namespace) -> tuple[Any, gym.Env]:
    """Training and test envs of ``--env`` (see :func:`build_parser`).

    :param args: the parsed command line.
    """
    return make_envs(
        args.env,
        args.parallel_envs,
        args.max_episode_steps,
        test_render_mode(args),
        vector=_vector(args),
    )


def test_render_mode(args: argparse.Namespace) -> str | None:
    """ "rgb_array" when the run records evaluation videos (``args.record_video``, set by
    :func:`super_sac.cli.runner.run` from ``super_sac.video_interval``), else ``None``."""
    return "rgb_array" if getattr(args, "record_video", False) else None


def _vector(args: argparse.Namespace) -> str:
    return getattr(args, "vector", "sync")


def minatar_envs(args: argparse.Namespace) -> tuple[Any, gym.Env]:
    """Training and test envs of ``--game`` (see :func:`minatar_parser`).

    :param args: the parsed command line.
    """
    return train_and_test_envs(
        lambda: make_minatar_env(args.game, max_episode_steps=args.max_episode_steps),
        args.parallel_envs,
        vector=_vector(args),
    )


def make_atari(game: str, max_episode_steps: int | None = None, **kwargs: Any) -> gym.Env:
    """:func:`super_sac.wrappers.make_atari_env`, with an unknown game reported as
    :class:`UnknownEnvError` naming the closest ALE games.

    :param game: ALE game name, e.g. "Breakout".
    :param max_episode_steps: time limit in agent steps (None: ALE's own).
    """
    try:
        return make_atari_env(game, max_episode_steps=max_episode_steps, **kwargs)
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
        lambda **kw: make_atari(args.game, max_episode_steps=args.max_episode_steps, **kw),
        args.parallel_envs,
        test_render_mode(args),
        vector=_vector(args),
    )


def _dmc_pair(env_id: str) -> tuple[str, str]:
    from super_sac.envs.dmc import UnknownDMCTaskError, parse_dmc_id

    try:
        return parse_dmc_id(env_id)
    except UnknownDMCTaskError as err:
        raise UnknownEnvError(str(err)) from err


def make_dmc(domain: str, task: str, **kwargs: Any) -> gym.Env:
    """:func:`super_sac.envs.dmc.make_dmc_env`, with an unknown task reported as
    :class:`UnknownEnvError` naming close ones.

    :param domain: suite domain.
    :param task: suite task.
    :param kwargs: :func:`~super_sac.envs.dmc.make_dmc_env`'s options.
    """
    from super_sac.envs.dmc import UnknownDMCTaskError, make_dmc_env

    try:
        return make_dmc_env(domain, task, **kwargs)
    except UnknownDMCTaskError as err:
        raise UnknownEnvError(str(err)) from err


def dmc_env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`make_dmc`'s options from :func:`super_sac.cli.parsers.dmc_parser`'s command line
    (the seed is left to the loop's ``reset(seed=...)``)."""
    return {
        "from_pixels": not args.from_states,
        "image_size": args.image_size,
        "camera_id": args.camera_id,
        "action_repeat": args.action_repeat,
        "frame_stack": args.frame_stack,
        "fast_render": args.fast_render,
    }


def dmc_envs(args: argparse.Namespace) -> tuple[Any, gym.Env]:
    """Training and test envs of ``--domain --task`` (see :func:`dmc_parser`); the suite's
    time limit ends episodes (``--max_episode_steps`` cuts them earlier, in the loop).

    :param args: the parsed command line.
    """
    kwargs = dmc_env_kwargs(args)

    def make(**kw: Any) -> gym.Env:
        return make_dmc(args.domain, args.task, **kwargs, **kw)

    return train_and_test_envs(make, args.parallel_envs, test_render_mode(args), _vector(args))


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


def pixel_agent(test_env: gym.Env, device: torch.device) -> super_sac.Agent:
    """A continuous-control Agent with the DrQ / DrQ-v2 encoder
    (:class:`~super_sac.nets.cnns.DrQPixelEncoder`) over the ``"obs"`` stacks of ``test_env``.
    The encoder reads the observations' size unless gin binds ``DrQPixelEncoder.image_size``
    (RAD: trained on crops, acting on centre crops of the larger frames).

    :param test_env: a pixel env from :func:`make_dmc`.
    :param device: where the agent lives.
    """
    channels, height, width = test_env.observation_space["obs"].shape
    kwargs: dict[str, Any] = {}
    if not _gin_binds("DrQPixelEncoder.image_size"):
        kwargs["image_size"] = (height, width)
    act_space_size, discrete = action_spec(test_env.action_space)
    encoder = DrQPixelEncoder(channels, **kwargs)
    return super_sac.Agent(act_space_size=act_space_size, encoder=encoder, discrete=discrete).to(
        device
    )


def dmc_agent(test_env: gym.Env, device: torch.device) -> super_sac.Agent:
    """:func:`pixel_agent` for image observations (``(C, H, W)`` uint8), else
    :func:`build_agent` (a ``FlatEncoder`` over the state vector).

    :param test_env: an env from :func:`make_dmc`.
    :param device: where the agent lives.
    """
    space = test_env.observation_space["obs"]
    if space.dtype == "uint8" and len(space.shape) == 3:
        return pixel_agent(test_env, device)
    return build_agent(test_env, device)


def _gin_binds(parameter: str) -> bool:
    try:
        gin.query_parameter(parameter)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------ running
