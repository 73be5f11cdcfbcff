"""DeepMind Control Suite tasks (Tassa et al. 2018, ``dm_control``) as gymnasium envs.

:func:`make_dmc_env` gives ``{"obs": ...}`` observations the library's loop reads:

- from states: dm_control's observation dict flattened into one float32 vector, its keys in the
  order of the task's ``observation_spec()`` (fixed per task);
- from pixels: channels-first uint8 stacks ``(3 * frame_stack, H, W)`` of RGB renders, newest
  frame last (gymnasium's ``FrameStackObservation`` merged along the channel axis), the layout
  ``ReplayBuffer(frame_stack={"obs": frame_stack})`` stores each frame of once. Frames are
  rendered headless through EGL (``MUJOCO_GL=egl`` unless set otherwise before import).

Actions are rescaled from ``[-1, 1]`` to the task's bounds by
:class:`super_sac.wrappers.NormActionSpace`. An agent step repeats its action ``action_repeat``
times and sums the rewards (the convention of PlaNet, DrQ and DrQ-v2). The suite's own time
limit (1,000 control steps for the standard tasks, i.e. ``1000 / action_repeat`` agent steps)
ends an episode with ``truncated=True``; a task that terminates (dm_control's ``discount == 0``)
ends it with ``terminated=True``.
"""

from __future__ import annotations

import difflib
import math
import os
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from super_sac.wrappers import DictObsWrapper, NormActionSpace, SimpleGymWrapper

__all__ = [
    "DMCEnv",
    "UnknownDMCTaskError",
    "default_camera",
    "dmc_task_names",
    "make_dmc_env",
    "parse_dmc_id",
    "resolve_camera",
]

DMC_PREFIX = "dmc:"


class UnknownDMCTaskError(ValueError):
    """A (domain, task) pair the suite does not have; the message lists close names."""


def _suite() -> Any:
    """dm_control's suite, imported with headless rendering (EGL) unless ``MUJOCO_GL`` is set."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        from dm_control import suite
    except ImportError as err:
        raise gym.error.DependencyNotInstalled(
            "DeepMind Control envs need dm_control. Fix: pip install 'super_sac[dmc]' "
            "(dm-control==1.0.50 with mujoco==3.17.0)."
        ) from err
    return suite


def dmc_task_names() -> list[tuple[str, str]]:
    """Every ``(domain, task)`` pair of the suite (``suite.ALL_TASKS``)."""
    return [tuple(pair) for pair in _suite().ALL_TASKS]


def _check_task(domain: str, task: str) -> None:
    names = dmc_task_names()
    if (domain, task) in names:
        return
    joined = [f"{d}-{t}" for d, t in names]
    close = difflib.get_close_matches(f"{domain}-{task}", joined, n=4, cutoff=0.5)
    domains = sorted({d for d, _ in names})
    if domain in domains:
        tasks = [t for d, t in names if d == domain]
        hint = f"domain {domain!r} has the tasks {', '.join(tasks)}"
    else:
        close_domains = difflib.get_close_matches(domain, domains, n=3, cutoff=0.5)
        hint = f"the domains are {', '.join(domains)}"
        if close_domains:
            hint = f"did you mean the domain {', '.join(close_domains)}? ({hint})"
    suggestion = f" Close names: {', '.join(close)}." if close else ""
    raise UnknownDMCTaskError(
        f"unknown DeepMind Control task {domain!r}-{task!r}: {hint}.{suggestion} Fix: pass a "
        "--domain/--task pair of dm_control.suite.ALL_TASKS, e.g. cartpole swingup."
    )


def parse_dmc_id(env_id: str) -> tuple[str, str]:
    """``"dmc:cartpole-swingup"`` -> ``("cartpole", "swingup")`` (the task is the text after the
    first ``-``; ``ball_in_cup-catch`` and ``point_mass-easy`` keep their underscores).

    :param env_id: an id starting with ``dmc:``.
    :raises UnknownDMCTaskError: for an id without a ``-``.
    """
    body = env_id[len(DMC_PREFIX) :] if env_id.startswith(DMC_PREFIX) else env_id
    domain, sep, task = body.partition("-")
    if not sep or not domain or not task:
        raise UnknownDMCTaskError(
            f"DeepMind Control id {env_id!r} is not 'dmc:<domain>-<task>'. Fix: write e.g. "
            "'dmc:cartpole-swingup' or 'dmc:walker-walk'."
        )
    return domain, task


def default_camera(domain: str) -> int:
    """The camera of pixel observations: 2 for quadruped (a camera that follows it, as in DrQ
    and DrQ-v2), else 0."""
    return 2 if domain == "quadruped" else 0


def resolve_camera(domain: str, camera_id: int | None) -> int:
    """The camera a ``camera_id`` option means: itself, or :func:`default_camera` when None."""
    return default_camera(domain) if camera_id is None else int(camera_id)


def _flat_dim(spec: Any) -> int:
    return int(np.prod(spec.shape, dtype=np.int64)) if spec.shape else 1


class DMCEnv(gym.Env):
    """One dm_control suite task as a gymnasium env with single-frame observations (a flat
    float32 state vector, or one ``(3, H, W)`` uint8 render); :func:`make_dmc_env` adds the
    frame stack, the observation dict and the action rescaling.

    :param domain: suite domain, e.g. "cartpole".
    :param task: suite task, e.g. "swingup".
    :param from_pixels: observe renders instead of the state vector.
    :param image_size: height and width of pixel observations.
    :param camera_id: camera of pixel observations and of ``render()`` (None:
        :func:`default_camera`).
    :param action_repeat: physics control steps per agent step, rewards summed.
    :param seed: seed of the task's random state (None: fresh entropy); ``reset(seed=...)``
        reseeds it.
    :param fast_render: turn shadows and multisample anti-aliasing off (faster CPU rendering;
        off by default so frames match the published setups).
    :param render_mode: None or "rgb_array" (``render()`` then gives the observation camera's
        view at ``render_size``, also for state observations).
    :param render_size: height and width of ``render()``'s frames.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(
        self,
        domain: str,
        task: str,
        *,
        from_pixels: bool = False,
        image_size: int = 84,
        camera_id: int | None = None,
        action_repeat: int = 1,
        seed: int | None = None,
        fast_render: bool = False,
        render_mode: str | None = None,
        render_size: int = 256,
    ) -> None:
        if action_repeat < 1:
            raise ValueError(f"action_repeat = {action_repeat}: it must be at least 1")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(
                f"render_mode = {render_mode!r}: DeepMind Control envs render 'rgb_array' only"
            )
        _check_task(domain, task)
        self.domain, self.task = domain, task
        self.from_pixels, self.image_size = bool(from_pixels), int(image_size)
        self.camera_id = resolve_camera(domain, camera_id)
        self.action_repeat, self.fast_render = int(action_repeat), bool(fast_render)
        self.render_mode, self.render_size = render_mode, int(render_size)
        self._env = _suite().load(domain, task, task_kwargs={"random": seed})
        if self.fast_render:
            self._turn_off_costly_rendering()
        self._obs_keys = list(self._env.observation_spec())
        self.observation_space = self._make_observation_space()
        act = self._env.action_spec()
        self.action_space = spaces.Box(
            act.minimum.astype(np.float32), act.maximum.astype(np.float32), dtype=np.float32
        )
        control_dt = float(self._env.control_timestep())
        self.metadata = {**self.metadata, "render_fps": round(1.0 / (control_dt * action_repeat))}

    @property
    def time_limit_steps(self) -> int | None:
        """The suite's time limit in agent steps (``ceil(control steps / action_repeat)``: 125
        for the standard 1,000-step tasks at action repeat 8), or None without one."""
        limit = float(self._env._step_limit)
        return None if math.isinf(limit) else math.ceil(limit / self.action_repeat)

    # ------------------------------------------------------------------ gymnasium API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:  # the task draws its initial state from this random state
            self._env.task._random = np.random.RandomState(seed)
        time_step = self._env.reset()
        return self._observe(time_step), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        reward, terminated, truncated = 0.0, False, False
        for _ in range(self.action_repeat):
            time_step = self._env.step(action)
            reward += float(time_step.reward or 0.0)
            if time_step.last():
                # dm_control ends an episode with discount 0 at a real termination and with
                # discount 1 at its time limit
                terminated = float(time_step.discount) == 0.0
                truncated = not terminated
                break
        return self._observe(time_step), reward, terminated, truncated, {}

    def render(self) -> np.ndarray | None:
        """``(render_size, render_size, 3)`` uint8 frame of ``camera_id``, the camera the pixel
        observations come from (with ``render_mode="rgb_array"``; None otherwise, as gymnasium's
        envs do): evaluation videos show what the agent sees, e.g. quadruped's following
        camera."""
        if self.render_mode is None:
            gym.logger.warn("render() of a DMCEnv made without render_mode='rgb_array'")
            return None
        size = self.render_size
        return self._env.physics.render(size, size, camera_id=self.camera_id)

    def close(self) -> None:
        self._env.close()

    # ------------------------------------------------------------------ observations

    def _make_observation_space(self) -> spaces.Box:
        if self.from_pixels:
            shape = (3, self.image_size, self.image_size)
            return spaces.Box(0, 255, shape=shape, dtype=np.uint8)
        dim = sum(_flat_dim(spec) for spec in self._env.observation_spec().values())
        return spaces.Box(-np.inf, np.inf, shape=(dim,), dtype=np.float32)

    def _observe(self, time_step: Any) -> np.ndarray:
        if self.from_pixels:
            size = self.image_size
            frame = self._env.physics.render(size, size, camera_id=self.camera_id)
            return np.ascontiguousarray(frame.transpose(2, 0, 1))
        parts = [np.asarray(time_step.observation[k], np.float32).ravel() for k in self._obs_keys]
        return np.concatenate(parts)

    def _turn_off_costly_rendering(self) -> None:
        """No shadow map and no multisampling: the offscreen buffer is made at the first render,
        so this must run before it."""
        quality = self._env.physics.model.vis.quality
        quality.shadowsize = 0
        quality.offsamples = 0


def make_dmc_env(
    domain: str,
    task: str,
    *,
    from_pixels: bool = False,
    image_size: int = 84,
    camera_id: int | None = None,
    action_repeat: int = 1,
    frame_stack: int = 3,
    seed: int | None = None,
    fast_render: bool = False,
    render_mode: str | None = None,
    render_size: int = 256,
    key: str = "obs",
) -> gym.Env:
    """A suite task with ``{key: ...}`` observations and ``[-1, 1]`` actions (see the module
    docstring).

    :param domain: suite domain ("cartpole", "walker", "quadruped", ...).
    :param task: suite task ("swingup", "walk", ...).
    :param from_pixels: ``(3 * frame_stack, image_size, image_size)`` uint8 stacks of renders
        instead of the flat float32 state.
    :param image_size: pixel observation height and width (84 in DrQ / DrQ-v2).
    :param camera_id: camera of the pixel observations (None: 2 for quadruped, else 0).
    :param action_repeat: control steps per agent step, rewards summed (DrQ-v2: 2; DrQ,
        PlaNet: 8 for cartpole, 4 or 2 elsewhere).
    :param frame_stack: renders per observation (pixels only), newest last.
    :param seed: seed of the task's random state; ``reset(seed=...)`` reseeds it.
    :param fast_render: shadows and multisampling off (faster; frames differ from published
        setups).
    :param render_mode: None or "rgb_array" (``render()`` for evaluation videos).
    :param render_size: height and width of ``render()``'s frames.
    :param key: the observation dict's key.
    :raises UnknownDMCTaskError: for a pair the suite does not have (naming close ones).
    """
    if frame_stack < 1:
        raise ValueError(f"frame_stack = {frame_stack}: it must be at least 1")
    env: gym.Env = DMCEnv(
        domain,
        task,
        from_pixels=from_pixels,
        image_size=image_size,
        camera_id=camera_id,
        action_repeat=action_repeat,
        seed=seed,
        fast_render=fast_render,
        render_mode=render_mode,
        render_size=render_size,
    )
    if from_pixels:
        if frame_stack > 1:
            env = gym.wrappers.FrameStackObservation(env, frame_stack)
            env = gym.wrappers.ReshapeObservation(env, (3 * frame_stack, image_size, image_size))
        env = DictObsWrapper(env, key)
    else:
        env = SimpleGymWrapper(env, key)
    return NormActionSpace(env)
