"""Checks of the train and test envs against the agent: spaces, observation keys, video."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from super_sac.agent import Agent
from super_sac.config import TrainConfig
from super_sac.validation.common import ConfigError, _err, _warn
from super_sac.validation.probes import (
    _looks_channels_last,
    _observation_space,
    _validate_encoder_probe,
)
from super_sac.video import VIDEO_EXTRA_HINT, VideoDependencyError, require_encoder
from super_sac.wrappers import has_finite_bounds


def _validate_discrete_space(label: str, act_space: spaces.Space, agent: Agent) -> None:
    if not agent.discrete:
        raise ConfigError(
            f"{label} has a Discrete action space ({act_space}) but the Agent is continuous. "
            "Fix: build the Agent with discrete=True (Agent.discrete = True in gin), "
            f"act_space_size={getattr(act_space, 'n', '?')}."
        )
    if not isinstance(act_space, spaces.Discrete):
        raise ConfigError(
            f"Agent.discrete = True but {label} has the action space {act_space}. Fix: use an "
            "env with a gymnasium.spaces.Discrete action space, or Agent.discrete = False."
        )
    if int(act_space.start) != 0:
        raise ConfigError(
            f"{label} has Discrete actions starting at {act_space.start}; the agent outputs "
            "indices from 0. Fix: wrap the env so that its actions start at 0."
        )
    if int(act_space.n) != agent.act_space_size:
        raise ConfigError(
            f"{label} has {int(act_space.n)} discrete actions but Agent.act_space_size = "
            f"{agent.act_space_size}. Fix: build the Agent with act_space_size={int(act_space.n)}."
        )


def _validate_envs(cfg: TrainConfig, agent: Agent, train_env: Any, test_env: gym.Env) -> None:
    for label, env in (("train_env", train_env), ("test_env", test_env)):
        obs_space = _observation_space(env)
        act_space = getattr(env, "single_action_space", env.action_space)
        if not isinstance(obs_space, spaces.Dict):
            raise ConfigError(
                f"{label} returns {type(obs_space).__name__} observations, but super_sac needs "
                f"dict observations. Fix: {_dict_wrapper_fix(obs_space)}"
            )
        if isinstance(act_space, spaces.Discrete) or agent.discrete:
            _validate_discrete_space(label, act_space, agent)
            continue
        if not isinstance(act_space, spaces.Box):
            raise ConfigError(f"{label} action space {act_space} is not a Box")
        if not has_finite_bounds(act_space):
            raise ConfigError(
                f"{label} has an unbounded action space {act_space}. Fix: give the env finite "
                "action bounds, then wrap it with super_sac.wrappers.NormActionSpace."
            )
        if not (np.allclose(act_space.low, -1.0) and np.allclose(act_space.high, 1.0)):
            raise ConfigError(
                f"{label} action bounds are [{act_space.low}, {act_space.high}], but the library "
                "acts in [-1, 1]. Fix: wrap the env with super_sac.wrappers.NormActionSpace."
            )
        if int(np.prod(act_space.shape)) != agent.act_space_size:
            raise ConfigError(
                f"{label} has {int(np.prod(act_space.shape))} action dimensions but "
                f"Agent.act_space_size = {agent.act_space_size}. Fix: build the Agent with "
                f"act_space_size={int(np.prod(act_space.shape))}."
            )
    if cfg.num_steps_online > 0 and _same_env(train_env, test_env):
        raise ConfigError(
            "train_env and test_env are the same env object: every evaluation would reset the "
            "training episode in progress, so stored transitions would cross resets and time "
            "limits would never fire. Fix: make two envs (the test env with its own "
            "gymnasium.make call); an offline-only run (num_steps_online = 0) may share one"
        )
    num_envs = getattr(train_env, "num_envs", 1)
    if cfg.transitions_per_online_step % num_envs:
        raise _err(
            f"transitions_per_online_step = {cfg.transitions_per_online_step}",
            f"is not a multiple of the {num_envs} parallel envs",
            f"use a multiple of {num_envs}",
        )
    if isinstance(train_env, gym.vector.VectorEnv):
        mode = train_env.metadata.get("autoreset_mode")
        accepted = (AutoresetMode.DISABLED, AutoresetMode.SAME_STEP)
        if mode not in accepted and mode not in [m.value for m in accepted]:
            raise ConfigError(
                f"train_env is a vector env with autoreset mode {mode}; super_sac needs the true "
                "final observation of every episode. Fix: build it with autoreset_mode="
                "gymnasium.vector.AutoresetMode.DISABLED (the loop resets episodes itself, and "
                "resumed runs replay them exactly) or AutoresetMode.SAME_STEP."
            )
        disabled = mode in (AutoresetMode.DISABLED, AutoresetMode.DISABLED.value)
        if cfg.max_episode_steps is not None and not disabled:
            raise _err(
                f"max_episode_steps = {cfg.max_episode_steps}",
                f"training episodes are cut at this step, but the vector train_env resets its "
                f"envs itself (autoreset mode {mode})",
                "build the vector env with autoreset_mode=gymnasium.vector.AutoresetMode.DISABLED "
                "(the loop then resets the envs), or leave max_episode_steps = None and give each "
                "env its own limit (gymnasium.wrappers.TimeLimit, or gymnasium.make(..., "
                "max_episode_steps=N))",
            )


def _dict_wrapper_fix(obs_space: spaces.Space) -> str:
    """The wrapper that makes dict observations of ``obs_space``."""
    shape = getattr(obs_space, "shape", None) or ()
    if isinstance(obs_space, spaces.Box) and obs_space.dtype == np.uint8 and len(shape) == 3:
        fix = (
            "wrap the env with super_sac.wrappers.DictObsWrapper(env) (the frames under 'obs', "
            "the key the built-in image encoders read; it keeps the uint8 pixels, where "
            "SimpleGymWrapper would store them as float32, 4x the memory)"
        )
        if _looks_channels_last(tuple(shape)):
            fix += ", then ChannelsFirstWrapper, since these look (H, W, C)"
        return fix
    return (
        "wrap the env with super_sac.wrappers.SimpleGymWrapper (Box -> {'obs': ...}), "
        "DictObsWrapper for images, or your own ObservationWrapper returning a dict"
    )


def _observation_layout(env: Any) -> dict[str, tuple[tuple[int, ...], str]]:
    """``{key: (shape, dtype)}`` of an env's dict observations as the agent reads them
    (float64 is acted on as float32)."""
    space = _observation_space(env)
    layout = {}
    for key, sub in space.spaces.items():
        if sub.dtype is None:  # a Dict, Tuple or other space without one dtype
            layout[key] = (tuple(sub.shape or ()), type(sub).__name__)
            continue
        dtype = np.dtype(np.float32 if sub.dtype == np.float64 else sub.dtype)
        layout[key] = (tuple(sub.shape or ()), dtype.name)
    return layout


def _validate_same_observations(agent: Agent, train_env: Any, test_env: gym.Env) -> None:
    """The test env is evaluated by the agent built for the train env's observations: a key
    both give must have the same shape (other frames would crash an evaluation, or be read
    silently, e.g. as a centre crop of larger frames), and the encoder must read the test
    env's observations (a key the train env has and the encoder ignores may be missing).
    Dtypes may differ (uint8 frames against float32 0..255 read the same)."""
    train, test = _observation_layout(train_env), _observation_layout(test_env)
    diffs = [
        f"{k!r} is {test[k][0]} {test[k][1]} (train_env: {train[k][0]} {train[k][1]})"
        for k in train
        if k in test and test[k][0] != train[k][0]
    ]
    problem = "; ".join(diffs)
    if not problem and set(test) != set(train):
        try:  # the train env's probe has passed: the keys the test env lacks may be unused
            _validate_encoder_probe(agent, test_env)
        except ConfigError:
            missing = [k for k in train if k not in test]
            problem = (
                f"it lacks the key(s) {missing}, and the encoder {type(agent.encoder).__name__} "
                "cannot read its observations without them"
            )
    if problem:
        raise ConfigError(
            f"test_env's observations differ from train_env's: {problem}. The agent evaluates "
            "on test_env with the encoder built for train_env's observations. Fix: build both "
            "envs with the same options and wrappers (image size, keys, layout)"
        )


def _same_env(train_env: Any, test_env: gym.Env) -> bool:
    """Whether ``test_env`` is ``train_env`` or one of its sub-envs (compared unwrapped)."""
    core = getattr(test_env, "unwrapped", test_env)
    sb3 = getattr(train_env, "venv", None)  # an SB3 VecEnv behind the library's adapter
    candidates = [train_env, *getattr(train_env, "envs", ()), *getattr(sb3, "envs", ())]
    return any(getattr(env, "unwrapped", env) is core for env in candidates)


def _validate_video(cfg: TrainConfig, test_env: gym.Env) -> None:
    """Evaluation videos need an encoder and a test env that renders RGB frames."""
    if cfg.video_interval < 0:
        raise _err(
            f"video_interval = {cfg.video_interval}",
            "must be >= 0",
            "use 0 (no videos) or k to record every k-th evaluation",
        )
    if cfg.video_interval == 0:
        return
    if not (cfg.save_to_disk or cfg.log_to_disk):
        _warn(
            f"video_interval = {cfg.video_interval}",
            "has no effect: the run writes nothing (save_to_disk and log_to_disk are False)",
            "set save_to_disk or log_to_disk to True, or video_interval = 0",
        )
        return
    if cfg.eval_episodes == 0:
        _warn(
            f"video_interval = {cfg.video_interval}",
            "has no effect: eval_episodes = 0, so there is no evaluation to record",
            "set eval_episodes > 0, or video_interval = 0",
        )
        return
    try:
        require_encoder()
    except VideoDependencyError as err:
        raise _err(f"video_interval = {cfg.video_interval}", str(err), VIDEO_EXTRA_HINT) from None
    mode = getattr(test_env, "render_mode", None)
    if mode != "rgb_array":
        raise _err(
            f"video_interval = {cfg.video_interval}",
            f"the test env renders no RGB frames (render_mode={mode!r})",
            'make the test env with render_mode="rgb_array" (the training scripts do so when '
            'video_interval > 0), e.g. gymnasium.make(env_id, render_mode="rgb_array")',
        )
