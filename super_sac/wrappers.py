"""Gymnasium wrappers that put an environment into the form the library expects: dict
observations and actions normalised to ``[-1, 1]``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class SimpleGymWrapper(gym.ObservationWrapper):
    """Turn a ``Box`` observation into ``{"obs": float32 array}``.

    :param env: an environment with a ``Box`` observation space.
    :param key: the dict key to use.
    """

    def __init__(self, env: gym.Env, key: str = "obs") -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, spaces.Box):
            raise TypeError(
                f"SimpleGymWrapper expects a Box observation space, got {space}; write a "
                "gymnasium.ObservationWrapper that returns a dict of arrays for this env."
            )
        self.key = key
        box = spaces.Box(
            low=space.low.astype(np.float32),
            high=space.high.astype(np.float32),
            shape=space.shape,
            dtype=np.float32,
        )
        self.observation_space = spaces.Dict({key: box})

    def observation(self, observation: Any) -> dict[str, np.ndarray]:
        return {self.key: np.asarray(observation, dtype=np.float32)}


def has_finite_bounds(space: spaces.Box) -> bool:
    """Whether every lower and upper bound of a ``Box`` is finite."""
    return bool(np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)))


def check_bounded_box(space: spaces.Space, what: str = "action space") -> spaces.Box:
    """Return ``space`` if it is a ``Box`` with finite bounds, else raise a ``ValueError``."""
    if not isinstance(space, spaces.Box):
        raise ValueError(f"expected a Box {what}, got {space}")
    if not has_finite_bounds(space):
        raise ValueError(
            f"the {what} {space} is unbounded; super_sac's actors output bounded actions. Give "
            "the env finite action bounds (for example gymnasium.wrappers.ClipAction on a copy "
            "of the space with the physical limits) before wrapping it."
        )
    return space


class NormActionSpace(gym.wrappers.RescaleAction):
    """Expose a bounded ``Box`` action space as ``[-1, 1]^A`` (float32) and rescale actions to
    the env's own bounds on the way in.

    :param env: an environment with a bounded ``Box`` action space.
    """

    def __init__(self, env: gym.Env) -> None:
        space = check_bounded_box(env.action_space)
        shape, dtype = space.shape, space.dtype
        super().__init__(
            env, min_action=np.full(shape, -1.0, dtype), max_action=np.full(shape, 1.0, dtype)
        )
        self.action_space = spaces.Box(-1.0, 1.0, shape=shape, dtype=np.float32)

    def action(self, action: np.ndarray) -> np.ndarray:
        scaled = super().action(np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0))
        return scaled.astype(self.env.action_space.dtype, copy=False)


def make_gym_env(env_id: str, max_episode_steps: int | None = None, **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` + :class:`SimpleGymWrapper` (for Box observations) +
    :class:`NormActionSpace` (for Box actions)."""
    env = gym.make(env_id, max_episode_steps=max_episode_steps, **kwargs)
    if isinstance(env.observation_space, spaces.Box):
        env = SimpleGymWrapper(env)
    if isinstance(env.action_space, spaces.Box):
        env = NormActionSpace(env)
    return env
