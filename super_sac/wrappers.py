"""Gymnasium wrappers that put an environment into the form the library expects: dict
observations and actions normalised to ``[-1, 1]``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
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

    def reset(self, **kwargs: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        result = self.env.reset(**kwargs)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(_OLD_API.format(what="reset() returned a bare observation", got=""))
        return self.observation(result[0]), result[1]

    def step(self, action: Any) -> tuple[Any, ...]:
        result = self.env.step(action)
        if len(result) != 5:
            what = f"step() returned {len(result)} values"
            raise TypeError(_OLD_API.format(what=what, got=" (obs, reward, done, info)"))
        obs, reward, terminated, truncated, info = result
        return self.observation(obs), reward, terminated, truncated, info


_OLD_API = (
    "the env's {what}{got}: super_sac steps envs with gymnasium's API, reset() -> (obs, info) "
    "and step() -> (obs, reward, terminated, truncated, info). Fix: port the env to gymnasium "
    "(terminated for a real end, truncated for a time limit), or wrap an old gym env with "
    "shimmy's GymV21CompatibilityV0"
)


class VectorSimpleGymWrapper(gym.vector.VectorWrapper):
    """:class:`SimpleGymWrapper` for a vector env, in every autoreset mode: batched ``Box``
    observations (and the ``info["final_obs"]`` entries of ``SAME_STEP`` autoreset) become
    ``{"obs": float32 array}``. (gymnasium's vectorized observation wrappers refuse
    ``SAME_STEP`` envs.)

    :param env: a vector env with a ``Box`` single observation space.
    :param key: the dict key to use.
    """

    def __init__(self, env: gym.vector.VectorEnv, key: str = "obs") -> None:
        super().__init__(env)
        single = SimpleGymWrapper(_SpacesOnly(env.single_observation_space), key)
        self.key, self._single = key, single
        self.single_observation_space = single.observation_space
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, env.num_envs
        )

    def reset(self, **kwargs: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return {self.key: np.asarray(obs, dtype=np.float32)}, info

    def step(self, actions: Any) -> tuple[Any, ...]:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        if "final_obs" in info:
            final = np.array(info["final_obs"], dtype=object)
            for i in np.flatnonzero(info.get("_final_obs", np.ones(len(final), dtype=bool))):
                final[i] = self._single.observation(final[i])
            info = {**info, "final_obs": final}
        return {self.key: np.asarray(obs, dtype=np.float32)}, reward, terminated, truncated, info


class _SpacesOnly(gym.Env):
    """A stand-in env that only has an observation space (to build a single-env wrapper)."""

    def __init__(self, observation_space: spaces.Space) -> None:
        self.observation_space = observation_space
        self.action_space = spaces.Discrete(1)


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


class ActionScaler:
    """Maps actions between the agent's ``[-1, 1]`` and a bounded ``Box``'s ``[low, high]``: the
    library's one action rescaler (:class:`NormActionSpace`, datasets, the quick-start memory).

    ``to_env(a) = low + (a + 1) (high - low) / 2`` and ``to_unit`` is its inverse; both clip to
    the target range, so env-scale actions beyond the bounds map to the bounds.

    :param space: a ``Box`` with finite bounds.
    """

    def __init__(self, space: spaces.Box) -> None:
        self.space = space
        self.low = np.asarray(space.low, dtype=np.float64)
        self.high = np.asarray(space.high, dtype=np.float64)
        self.dtype = space.dtype
        self._tensors: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    def to_env(self, action: np.ndarray, clip: bool = True) -> np.ndarray:
        """``[-1, 1]`` -> env bounds, in the action space's dtype (``clip=False``: float64,
        values outside ``[-1, 1]`` map linearly outside the bounds)."""
        unit = np.asarray(action, dtype=np.float64)
        if not clip:
            return self.low + (unit + 1.0) * 0.5 * (self.high - self.low)
        scaled = self.low + (np.clip(unit, -1.0, 1.0) + 1.0) * 0.5 * (self.high - self.low)
        return np.clip(scaled, self.low, self.high).astype(self.dtype, copy=False)

    def to_unit(self, action: np.ndarray, clip: bool = True) -> np.ndarray:
        """Env bounds -> ``[-1, 1]`` (float32; ``clip=False`` keeps values outside the bounds
        outside ``[-1, 1]``, so that dataset checks can see them)."""
        scaled = np.asarray(action, dtype=np.float64)
        unit = 2.0 * (scaled - self.low) / (self.high - self.low) - 1.0
        return (np.clip(unit, -1.0, 1.0) if clip else unit).astype(np.float32)

    def to_env_tensor(self, action: torch.Tensor) -> torch.Tensor:
        """:meth:`to_env` for float32 tensors, on the tensor's device."""
        if action.device not in self._tensors:
            low = torch.as_tensor(self.low, dtype=torch.float32, device=action.device)
            high = torch.as_tensor(self.high, dtype=torch.float32, device=action.device)
            self._tensors[action.device] = (low, high)
        low, high = self._tensors[action.device]
        scaled = low + (action.clamp(-1.0, 1.0) + 1.0) * 0.5 * (high - low)
        return torch.minimum(torch.maximum(scaled, low), high)

    def same_bounds(self, other: ActionScaler) -> bool:
        """Whether ``other`` rescales to the same bounds."""
        return (
            self.low.shape == other.low.shape
            and np.array_equal(self.low, other.low)
            and np.array_equal(self.high, other.high)
        )


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
        self.scaler = ActionScaler(space)

    def action(self, action: np.ndarray) -> np.ndarray:
        return self.scaler.to_env(action)


def make_gym_env(env_id: str, max_episode_steps: int | None = None, **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` + :class:`SimpleGymWrapper` (for Box observations) +
    :class:`NormActionSpace` (for Box actions)."""
    env = gym.make(env_id, max_episode_steps=max_episode_steps, **kwargs)
    if isinstance(env.observation_space, spaces.Box):
        env = SimpleGymWrapper(env)
    if isinstance(env.action_space, spaces.Box):
        env = NormActionSpace(env)
    return env


# ------------------------------------------------------------------------------ image observations


class DictObsWrapper(gym.ObservationWrapper):
    """Put any array observation under one key, keeping its dtype (``uint8`` images stay
    ``uint8``; use :class:`SimpleGymWrapper` for float vectors).

    :param env: an environment with a ``Box`` observation space.
    :param key: the dict key.
    """

    def __init__(self, env: gym.Env, key: str = "obs") -> None:
        super().__init__(env)
        if not isinstance(env.observation_space, spaces.Box):
            raise TypeError(
                f"DictObsWrapper expects a Box observation space, got {env.observation_space}"
            )
        self.key = key
        self.observation_space = spaces.Dict({key: env.observation_space})

    def observation(self, observation: Any) -> dict[str, np.ndarray]:
        return {self.key: np.asarray(observation)}


class _DictKeysWrapper(gym.ObservationWrapper):
    """Base of wrappers that transform some keys of a ``Dict`` observation space."""

    def __init__(self, env: gym.Env, keys: tuple[str, ...] | None = None) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, spaces.Dict):
            raise TypeError(
                f"{type(self).__name__} expects a Dict observation space, got {space}; wrap the "
                "env with DictObsWrapper or SimpleGymWrapper first."
            )
        self.keys = tuple(keys) if keys is not None else tuple(space.spaces)
        missing = [k for k in self.keys if k not in space.spaces]
        if missing:
            raise KeyError(f"{type(self).__name__}: keys {missing} not in {sorted(space.spaces)}")
        self.observation_space = spaces.Dict(
            {k: self._key_space(k, s) if k in self.keys else s for k, s in space.spaces.items()}
        )

    def _key_space(self, key: str, space: spaces.Space) -> spaces.Space:
        """:meth:`transform_space` of one key, its refusal naming the key and the fix."""
        try:
            return self.transform_space(space)
        except ValueError as err:
            images = [k for k, s in self.env.observation_space.spaces.items()
                      if len(getattr(s, "shape", None) or ()) == 3]  # fmt: skip
            raise ValueError(
                f"{type(self).__name__}: key {key!r}: {err}. Fix: pass keys= naming the image "
                f"keys only (here perhaps keys={tuple(images)!r})"
            ) from None

    def transform_space(self, space: spaces.Space) -> spaces.Space:
        raise NotImplementedError

    def transform(self, value: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def observation(self, observation: dict[str, Any]) -> dict[str, np.ndarray]:
        return {
            k: self.transform(np.asarray(v)) if k in self.keys else v
            for k, v in observation.items()
        }


class Uint8Wrapper(_DictKeysWrapper):
    """Store image keys as ``uint8`` (a quarter of float32's replay memory).

    Float images are read by their space's bounds: declared within ``[0, 1]`` they are
    multiplied by 255 and rounded; declared within ``[0, 255]`` (pixel values held as floats)
    they are rounded; other float bounds (negative, above 255, infinite) are refused, since no
    rule maps them to bytes. Bool and integer images are cast as they are (MinAtar's 0/1 grids
    stay 0/1). Encoders convert back to float on the device
    (:class:`super_sac.nets.cnns.ImageEncoder`).

    :param env: an environment with a ``Dict`` observation space.
    :param keys: the keys to convert (default: all).
    """

    def __init__(self, env: gym.Env, keys: tuple[str, ...] | None = None) -> None:
        self._factors: dict[str, float] = {}
        super().__init__(env, keys)

    def _key_space(self, key: str, space: spaces.Space) -> spaces.Space:
        if np.issubdtype(space.dtype, np.floating):
            low, high = float(np.min(space.low)), float(np.max(space.high))
            if low < 0 or not high <= 255:
                raise ValueError(
                    f"Uint8Wrapper: key {key!r} holds floats in [{low}, {high}], but only images "
                    "declared within [0, 1] (scaled by 255) or [0, 255] (rounded) map to bytes. "
                    "Fix: declare the image's true bounds in its Box, or pass keys= naming only "
                    "image keys"
                )
            self._factors[key] = 255.0 if high <= 1.0 else 1.0
        return super()._key_space(key, space)

    def transform_space(self, space: spaces.Space) -> spaces.Box:
        high = 255 if np.issubdtype(space.dtype, np.floating) else int(min(np.max(space.high), 255))
        return spaces.Box(0, max(high, 1), shape=space.shape, dtype=np.uint8)

    def transform(self, value: np.ndarray, factor: float = 255.0) -> np.ndarray:
        if np.issubdtype(value.dtype, np.floating):
            return np.clip(np.rint(value * factor), 0, 255).astype(np.uint8)
        return value.astype(np.uint8)

    def observation(self, observation: dict[str, Any]) -> dict[str, np.ndarray]:
        return {
            k: self.transform(np.asarray(v), self._factors.get(k, 255.0)) if k in self.keys else v
            for k, v in observation.items()
        }


class ChannelsFirstWrapper(_DictKeysWrapper):
    """Turn ``(H, W, C)`` image keys into PyTorch's ``(C, H, W)`` layout.

    :param env: an environment with a ``Dict`` observation space.
    :param keys: the image keys (default: all).
    """

    def transform_space(self, space: spaces.Space) -> spaces.Box:
        if len(space.shape) != 3:
            raise ValueError(f"expects (H, W, C) images, got shape {space.shape}")
        low = np.moveaxis(np.broadcast_to(space.low, space.shape), -1, 0)
        high = np.moveaxis(np.broadcast_to(space.high, space.shape), -1, 0)
        return spaces.Box(low, high, dtype=space.dtype)

    def transform(self, value: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(value, -1, 0))


class KeepKeysWrapper(gym.ObservationWrapper):
    """Keep only some keys of a ``Dict`` observation (e.g. drop a goal the agent should not see,
    or keep the image of an env that also returns a state vector).

    :param env: an environment with a ``Dict`` observation space.
    :param keys: the keys to keep.
    """

    def __init__(self, env: gym.Env, keys: tuple[str, ...]) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, spaces.Dict):
            raise TypeError(f"KeepKeysWrapper expects a Dict observation space, got {space}")
        missing = [k for k in keys if k not in space.spaces]
        if missing:
            raise KeyError(f"KeepKeysWrapper: keys {missing} not in {sorted(space.spaces)}")
        self.keys = tuple(keys)
        self.observation_space = spaces.Dict({k: space.spaces[k] for k in self.keys})

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        return {k: observation[k] for k in self.keys}


class ImageAndStateWrapper(gym.ObservationWrapper):
    """Example multimodal observation: ``{"image": (C, H, W) uint8, "state": float32 vector}``.

    The image is the wrapped env's image observation (channels-first uint8, e.g. a MinAtar grid
    or Atari frames) and the state is a vector computed from the env after every step by
    ``state_fn(env) -> array``; the default is the fraction of the episode's time limit used so
    far (``TimeLimit``-wrapped envs), a signal the image alone does not show. Pair it with
    :class:`super_sac.nets.cnns.ImageAndStateEncoder`.

    :param env: an environment with a ``Dict`` observation holding ``image_key``.
    :param state_fn: computes the state vector from the (unwrapped chain of the) env.
    :param state_dim: width of that vector.
    :param image_key: the image key of the wrapped env's observation.
    """

    def __init__(
        self,
        env: gym.Env,
        state_fn: Any = None,
        state_dim: int = 1,
        image_key: str = "obs",
    ) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, spaces.Dict) or image_key not in space.spaces:
            raise TypeError(f"ImageAndStateWrapper expects a Dict space with {image_key!r}")
        self.image_key = image_key
        self.state_fn = state_fn if state_fn is not None else _time_fraction
        self.observation_space = spaces.Dict(
            {
                "image": space.spaces[image_key],
                "state": spaces.Box(-np.inf, np.inf, (state_dim,), np.float32),
            }
        )

    def observation(self, observation: dict[str, Any]) -> dict[str, np.ndarray]:
        state = np.asarray(self.state_fn(self.env), dtype=np.float32).reshape(-1)
        return {"image": observation[self.image_key], "state": state}


def _time_fraction(env: gym.Env) -> np.ndarray:
    """Elapsed steps over the time limit of the nearest ``TimeLimit`` wrapper (0 without one)."""
    while env is not None:
        if isinstance(env, gym.wrappers.TimeLimit):
            return np.array([env._elapsed_steps / env._max_episode_steps], np.float32)
        env = getattr(env, "env", None)
    return np.zeros(1, np.float32)


# ------------------------------------------------------------------------------ MinAtar and Atari


class MinAtarEnv(gym.Env):
    """MinAtar (Young & Tian 2019, arXiv:1903.03176) behind the gymnasium API.

    Wraps ``minatar.Environment``: observations are the game's ``(10, 10, C)`` grid as ``uint8``
    0/1 (``C`` channels, one per object kind), actions are ``Discrete`` indices into the game's
    minimal action set (or all 6 actions). A game over is ``terminated``; MinAtar has no time
    limit of its own (add ``TimeLimit``, which reports ``truncated``). ``reset(seed=...)`` seeds
    the game's random state (spawns and sticky actions); an unseeded first reset draws a seed
    from gymnasium's ``np_random``. Every reset also clears the sticky-action memory (the action
    a sticky step repeats), so an episode depends only on its seed and its actions, as
    checkpoint resumes need: ``minatar.Environment`` carries the previous episode's last action
    into the next episode's first steps (a departure only while the agent has not acted yet).

    :param game: "asterix", "breakout", "freeway", "seaquest" or "space_invaders".
    :param sticky_action_prob: probability of repeating the previous action (MinAtar: 0.1).
    :param difficulty_ramping: games speed up as they go on (MinAtar's default).
    :param minimal_action_set: expose only the game's meaningful actions.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        game: str,
        sticky_action_prob: float = 0.1,
        difficulty_ramping: bool = True,
        minimal_action_set: bool = True,
    ) -> None:
        try:
            from minatar import Environment
        except ImportError as err:  # pragma: no cover - depends on the install
            raise ImportError("MinAtarEnv needs the minatar package: pip install minatar") from err
        try:
            self.game = Environment(
                game, sticky_action_prob=sticky_action_prob, difficulty_ramping=difficulty_ramping
            )
        except ModuleNotFoundError as err:
            raise ValueError(
                f"unknown MinAtar game {game!r}; choose asterix, breakout, freeway, seaquest or "
                "space_invaders"
            ) from err
        self.game_name = game
        self.action_set = (
            list(self.game.minimal_action_set())
            if minimal_action_set
            else list(range(self.game.num_actions()))
        )
        self.action_space = spaces.Discrete(len(self.action_set))
        self.observation_space = spaces.Box(0, 1, self.game.state_shape(), dtype=np.uint8)
        self._seeded = False

    def _obs(self) -> np.ndarray:
        return self.game.state().astype(np.uint8)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None or not self._seeded:
            self.game.seed(int(self.np_random.integers(2**31 - 1)))
            self._seeded = True
        self.game.last_action = 0  # no-op: nothing of the previous episode is repeated
        self.game.reset()
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        reward, terminal = self.game.act(self.action_set[int(action)])
        return self._obs(), float(reward), bool(terminal), False, {}


def make_minatar_env(
    game: str, max_episode_steps: int | None = None, key: str = "obs", **kwargs: Any
) -> gym.Env:
    """A MinAtar game as ``{key: (C, 10, 10) uint8}`` observations with Discrete actions.

    :param game: MinAtar game name.
    :param max_episode_steps: add a ``TimeLimit`` (truncation) of this many steps.
    :param key: observation key.
    :param kwargs: passed to :class:`MinAtarEnv`.
    """
    env: gym.Env = MinAtarEnv(game, **kwargs)
    if max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, max_episode_steps)
    return ChannelsFirstWrapper(DictObsWrapper(env, key))


def frame_stack_of(env: gym.Env) -> dict[str, int]:
    """The observation keys of ``env`` that gymnasium's ``FrameStackObservation`` stacks, with
    their stack depths (``{"obs": 4}`` for :func:`make_atari_env`): what
    :class:`~super_sac.replay.ReplayBuffer`'s ``frame_stack`` needs to store each frame once.

    It looks through the wrappers for a :class:`DictObsWrapper` over a ``FrameStackObservation``
    (with only wrappers that keep the stack's shape between them, or a ``ReshapeObservation``
    that merges the stack axis into the channels); other envs give ``{}``.
    """
    key = None
    while isinstance(env, gym.Wrapper):
        if isinstance(env, DictObsWrapper):
            key = env.key
        elif isinstance(env, gym.wrappers.FrameStackObservation):
            return {key: int(env.stack_size)} if key is not None else {}
        elif key is not None and _merges_stack_axis(env):
            pass  # (k, C, H, W) stacks of colour frames as (k * C, H, W): frames stay whole
        elif key is not None and env.observation_space.shape != env.env.observation_space.shape:
            return {}  # something reshapes the stack: let the user declare it
        env = env.env
    return {}


def _merges_stack_axis(env: gym.Wrapper) -> bool:
    """Whether ``env`` reshapes ``(k, C, ...)`` observations into ``(k * C, ...)`` (how
    :func:`super_sac.envs.dmc.make_dmc_env` puts a stack of RGB frames channels first)."""
    if not isinstance(env, gym.wrappers.ReshapeObservation):
        return False
    inner, outer = env.env.observation_space.shape, env.observation_space.shape
    return (
        inner is not None
        and outer is not None
        and len(inner) == len(outer) + 1
        and outer == (inner[0] * inner[1], *inner[2:])
    )


ALE_FRAMES_PER_EPISODE = 108_000
"""ALE v5's episode cap in emulator frames (30 minutes at 60 Hz; Machado et al. 2018)."""


def make_atari_env(
    game: str,
    max_episode_steps: int | None = None,
    frame_stack: int = 4,
    key: str = "obs",
    **kwargs: Any,
) -> gym.Env:
    """An Atari game (ale-py's bundled ROMs) with the DQN preprocessing as
    ``{key: (frame_stack, 84, 84) uint8}`` observations and Discrete actions.

    ``ALE/<game>-v5`` with the emulator's frame skip off, then gymnasium's ``AtariPreprocessing``
    (up to 30 no-op starts, 4-frame skip with max-pooling of the last two frames, 84x84
    grayscale; life loss does not end the episode) and ``FrameStackObservation``; v5's sticky
    actions (0.25) stay on (Machado et al. 2018).

    :param game: ALE game name, e.g. "Breakout" or "Pong".
    :param max_episode_steps: ``TimeLimit`` in agent steps (None: ALE's own limit of 108,000
        emulator frames, 27,000 agent steps less the reset's no-ops). A limit that needs more
        frames (its steps and up to 30 no-ops) raises ALE's frame cap to match, so the episodes
        it asks for are not cut at ALE's limit instead.
    :param frame_stack: frames per observation.
    :param key: observation key.
    :param kwargs: passed to ``gymnasium.make``.
    """
    import ale_py

    gym.register_envs(ale_py)
    frame_skip, noop_max = 4, 30
    if max_episode_steps is not None and "max_num_frames_per_episode" not in kwargs:
        # ALE counts the reset's no-op frames too: leave room for them, so that the TimeLimit
        # (not ALE) ends an episode of max_episode_steps agent steps
        frames = max_episode_steps * frame_skip + noop_max
        if frames > ALE_FRAMES_PER_EPISODE:
            kwargs["max_num_frames_per_episode"] = frames
    env = gym.make(f"ALE/{game}-v5", frameskip=1, **kwargs)
    env = gym.wrappers.AtariPreprocessing(
        env, noop_max=noop_max, frame_skip=frame_skip, screen_size=84
    )
    env = gym.wrappers.FrameStackObservation(env, frame_stack)
    if max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, max_episode_steps)
    return DictObsWrapper(env, key)
