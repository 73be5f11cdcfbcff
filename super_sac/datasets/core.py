"""Offline data in the library's conventions: episodes, transitions and their checks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from super_sac.wrappers import ActionScaler

_NPZ_KEYS = ("action", "reward", "terminated", "truncated")


class DatasetError(ValueError):
    """A dataset that cannot be found, read or used with the env; the message says the fix."""


@dataclass
class Episode:
    """One recorded episode of the raw env.

    :param observations: ``T + 1`` observations (the final one included), an array or a dict of
        arrays for Dict spaces.
    :param actions: ``T`` actions in the env's own units (or integer indices).
    :param rewards: ``T`` rewards.
    :param terminations: ``T`` flags, true where the MDP ended (no bootstrap).
    :param truncations: ``T`` flags, true where a time limit cut the episode.
    """

    observations: np.ndarray | dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray


@dataclass
class Transitions:
    """Transitions in the library's conventions (dict observations, actions in ``[-1, 1]`` or
    integer indices), ready for :meth:`super_sac.replay.ReplayBuffer.push`.

    :param obs: ``{key: (N, ...)}``.
    :param action: ``(N, A)`` float32 or ``(N,)`` int64.
    :param reward: ``(N,)`` float32.
    :param next_obs: ``{key: (N, ...)}``.
    :param terminated: ``(N,)`` bool.
    :param truncated: ``(N,)`` bool.
    """

    obs: dict[str, np.ndarray]
    action: np.ndarray
    reward: np.ndarray
    next_obs: dict[str, np.ndarray]
    terminated: np.ndarray
    truncated: np.ndarray

    def __len__(self) -> int:
        return int(self.action.shape[0])

    @property
    def episode_returns(self) -> np.ndarray:
        """Undiscounted return of every complete episode (ended by termination or truncation)."""
        ends = np.flatnonzero(self.terminated | self.truncated)
        sums = np.cumsum(self.reward, dtype=np.float64)
        totals = sums[ends]
        return np.diff(np.concatenate([[0.0], totals]))


# ------------------------------------------------------------------------------ conversions
def _obs_dict(obs: np.ndarray | dict[str, np.ndarray], key: str = "obs") -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in obs.items()} if isinstance(obs, dict) else {key: obs}


def _scaler(low: np.ndarray, high: np.ndarray) -> ActionScaler:
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    return ActionScaler(spaces.Box(low, high, dtype=np.float64))


def _normalize_actions(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Env units -> ``[-1, 1]`` with the library's one rescaler, unclipped (out-of-bounds dataset
    actions stay visible to :func:`validate_transitions`)."""
    return _scaler(low, high).to_unit(action, clip=False)


def _denormalize_actions(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``[-1, 1]`` -> env units (float64, unclipped)."""
    return _scaler(low, high).to_env(action, clip=False)


def episodes_to_transitions(episodes: Sequence[Episode], action_space: spaces.Space) -> Transitions:
    """Flatten episodes into transitions in the library's conventions.

    :param episodes: recorded episodes of the raw env.
    :param action_space: the raw env's action space (Box bounds rescale actions to ``[-1, 1]``).
    """
    if not episodes:
        raise DatasetError("the dataset holds no episodes")
    obs_parts: dict[str, list[np.ndarray]] = {}
    next_parts: dict[str, list[np.ndarray]] = {}
    for ep in episodes:
        for key, value in _obs_dict(ep.observations).items():
            obs_parts.setdefault(key, []).append(value[:-1])
            next_parts.setdefault(key, []).append(value[1:])
    action = np.concatenate([np.asarray(ep.actions) for ep in episodes])
    if isinstance(action_space, spaces.Box):
        check_float_actions(action, "dataset")
        action = _normalize_actions(action, action_space.low, action_space.high)
    return Transitions(
        obs={k: np.concatenate(v) for k, v in obs_parts.items()},
        action=action,
        reward=np.concatenate([np.asarray(ep.rewards, np.float64) for ep in episodes]).astype(
            np.float32
        ),
        next_obs={k: np.concatenate(v) for k, v in next_parts.items()},
        terminated=np.concatenate([np.asarray(ep.terminations) for ep in episodes]).astype(bool),
        truncated=np.concatenate([np.asarray(ep.truncations) for ep in episodes]).astype(bool),
    )


# ------------------------------------------------------------------------------ npz


def validate_transitions(
    data: Transitions, env: gym.Env, source: str = "dataset", atol: float = 1e-4
) -> None:
    """Check that ``data`` fits the env the agent trains in.

    Checks: observation keys, shapes and dtypes against ``env.observation_space``; action shape,
    bounds (the rescaled actions must lie in ``[-1, 1]``) or indices in ``[0, n)``; equal lengths
    of every array; finite observations, actions and rewards; boolean terminations and
    truncations; an episode end (termination or truncation) on the last transition.

    :param data: transitions in the library's conventions.
    :param env: the (wrapped) env with a Dict observation space.
    :param source: the dataset's name, for messages.
    :param atol: tolerance of the ``[-1, 1]`` bound check.
    :raises DatasetError: naming the problem and the fix.
    """

    def fail(problem: str, fix: str) -> DatasetError:
        return DatasetError(f"{source}: {problem}. Fix: {fix}")

    obs_space = env.observation_space
    if not isinstance(obs_space, spaces.Dict):
        raise fail(
            "the env's observations are not a dict",
            "wrap it with super_sac.wrappers.SimpleGymWrapper (make_gym_env does)",
        )
    n = len(data)
    if n == 0:
        raise fail("the dataset holds no transitions", "record at least one episode into it")
    for label, obs in (("obs", data.obs), ("next_obs", data.next_obs)):
        missing = sorted(set(obs_space.spaces) - set(obs))
        extra = sorted(set(obs) - set(obs_space.spaces))
        if missing or extra:
            raise fail(
                f"{label} keys {sorted(obs)} differ from the env's {sorted(obs_space.spaces)} "
                f"(missing {missing}, unexpected {extra})",
                "record the dataset in the same env (same observation wrappers)",
            )
        for key, space in obs_space.spaces.items():
            arr = obs[key]
            if arr.shape != (n, *space.shape):
                raise fail(
                    f"{label}[{key!r}] has shape {arr.shape}, expected {(n, *space.shape)} "
                    f"({n} transitions of the env's shape {space.shape})",
                    "record the dataset in the same env",
                )
            if not np.can_cast(arr.dtype, space.dtype, casting="same_kind"):
                raise fail(
                    f"{label}[{key!r}] has dtype {arr.dtype}, which cannot be stored as the "
                    f"env's {space.dtype}",
                    "store observations with the env's dtype",
                )
            if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
                raise fail(
                    f"{label}[{key!r}] holds NaN or inf at transitions "
                    f"{np.flatnonzero(~np.isfinite(arr.reshape(n, -1)).all(1))[:5].tolist()}",
                    "drop those transitions or re-record the dataset",
                )
            _check_storable(arr, space.dtype, f"{label}[{key!r}]", n, fail)
    _validate_actions(data.action, env.action_space, n, atol, fail)
    for name in ("reward", "terminated", "truncated"):
        arr = getattr(data, name)
        if arr.shape != (n,):
            raise fail(
                f"{name} has shape {arr.shape}, expected ({n},)",
                f"store one {name} value per transition, a flat array of {n}",
            )
    if not np.isfinite(data.reward).all():
        bad = np.flatnonzero(~np.isfinite(data.reward))[:5].tolist()
        raise fail(f"reward holds NaN or inf at transitions {bad}", "drop or fix them")
    for name in ("terminated", "truncated"):
        arr = getattr(data, name)
        if arr.dtype != bool and not np.isin(arr, (0, 1)).all():
            raise fail(
                f"{name} holds values other than 0/1", f"store {name} as booleans per transition"
            )
    if not (bool(data.terminated[-1]) or bool(data.truncated[-1])):
        raise fail(
            "the last transition is neither terminated nor truncated, so its episode has no end",
            "mark the final transition of a cut-off episode as truncated",
        )
    _check_continuity(data, fail)


_CHUNK = 4096  # transitions compared at once (pixel datasets: bounded temporary memory)


def _check_continuity(data: Transitions, fail: Any) -> None:
    """Refuse a transition that ends no episode (neither flag set) although its ``next_obs`` is
    not the next transition's ``obs``: an episode end without a flag (which would bootstrap a
    terminal state, or across a reset), or ``next_obs`` shifted from ``obs``."""
    n = len(data)
    ended = np.asarray(data.terminated, bool) | np.asarray(data.truncated, bool)
    broken: list[int] = []
    for start in range(0, n - 1, _CHUNK):
        stop = min(start + _CHUNK, n - 1)
        same = ~ended[start:stop]
        for key, nxt in data.next_obs.items():
            a = nxt[start:stop].reshape(stop - start, -1)
            b = data.obs[key][start + 1 : stop + 1].reshape(stop - start, -1)
            if np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating):
                equal = np.isclose(a, b, rtol=1e-6, atol=1e-6).all(axis=1)
            else:
                equal = (a == b).all(axis=1)
            same &= ~equal
        broken += (start + np.flatnonzero(same)).tolist()
        if len(broken) >= 5:
            break
    if broken:
        raise fail(
            f"transitions {broken[:5]} end no episode (neither terminated nor truncated), but "
            "their next_obs is not the next transition's obs: an episode ends there without a "
            "flag (its last state would bootstrap across the reset), or next_obs is shifted",
            "set terminated (a real end) or truncated (a cut) on the last transition of every "
            "episode, and store each transition's own next observation",
        )


def _check_storable(arr: np.ndarray, dtype: np.dtype, label: str, n: int, fail: Any) -> None:
    """Refuse float values that overflow to inf when stored as the env's (narrower) float
    dtype, as the replay buffer stores them."""
    target = np.dtype(dtype)
    if not (np.issubdtype(arr.dtype, np.floating) and np.issubdtype(target, np.floating)):
        return
    if arr.dtype.itemsize <= target.itemsize or not arr.size:
        return
    limit = np.finfo(target).max
    too_big = np.abs(arr.reshape(n, -1)).max(axis=1) > limit
    if too_big.any():
        raise fail(
            f"{label} holds values beyond {target}'s range (they would be stored as inf) at "
            f"transitions {np.flatnonzero(too_big)[:5].tolist()}",
            "drop or rescale those transitions",
        )


def check_float_actions(action: np.ndarray, source: str) -> None:
    """Refuse integer actions for a ``Box`` env before they are rescaled (the rescaling would
    turn them into floats and hide their type).

    :raises DatasetError: naming the dtype and the fix.
    """
    if not np.issubdtype(np.asarray(action).dtype, np.floating):
        raise DatasetError(
            f"{source}: the env's actions are continuous, but the dataset's have dtype "
            f"{np.asarray(action).dtype}. Fix: store the float actions the env took, in its "
            "units (integer actions belong to a Discrete env: record num_actions)"
        )


def _validate_actions(
    action: np.ndarray, space: spaces.Space, n: int, atol: float, fail: Any
) -> None:
    if isinstance(space, spaces.Discrete):
        if action.shape != (n,) or not np.issubdtype(action.dtype, np.integer):
            raise fail(
                f"actions have shape {action.shape} and dtype {action.dtype}, but the env has "
                f"{space.n} discrete actions",
                "store integer action indices, shape (N,)",
            )
        if action.size and (action.min() < 0 or action.max() >= space.n):
            raise fail(
                f"action indices span [{action.min()}, {action.max()}], outside [0, {space.n})",
                "record the dataset in the same env",
            )
        return
    if action.shape != (n, *space.shape):
        fix = (
            f"reshape the actions to {(n, *space.shape)}"
            if action.size == n * int(np.prod(space.shape))
            else "record the dataset in the same env"
        )
        raise fail(f"actions have shape {action.shape}, expected {(n, *space.shape)}", fix)
    if not np.issubdtype(action.dtype, np.floating):
        raise fail(f"continuous actions have dtype {action.dtype}", "store float actions")
    if not np.isfinite(action).all():
        bad = np.flatnonzero(~np.isfinite(action.reshape(n, -1)).all(1))[:5].tolist()
        raise fail(f"actions hold NaN or inf at transitions {bad}", "drop or fix them")
    if action.size and np.abs(action).max() > 1.0 + atol:
        raise fail(
            f"actions reach {np.abs(action).max():.4g} after rescaling to [-1, 1] with the "
            "dataset's action bounds",
            "store the env's true action bounds with the dataset (or clip the actions)",
        )
