"""Storage layout of a replay buffer and the checks that incoming batches fit it.

A layout is the per-transition shape and numpy dtype of every observation key and of the
action. It comes either from gymnasium spaces (:func:`_layout_from_spaces`) or from the first
pushed arrays (:func:`_layout_from_arrays`), and it is written into buffer files as JSON
(:meth:`_Layout.to_json`), so it fixes what a saved buffer can be loaded into.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

_FORMAT_VERSION = 1
_Field = tuple[tuple[int, ...], str]  # (shape without batch dim, numpy dtype name)


@dataclass(frozen=True)
class _Layout:
    """Per-transition shapes and dtypes of the observation keys and the action."""

    obs: dict[str, _Field]
    action: _Field

    def bytes_per_transition(self, skip: tuple[str, ...] = ()) -> int:
        """Bytes of one transition: obs + next_obs + action + reward, done, discount (without
        the observation keys in ``skip``). The buffer's 2-byte env index per slot is not
        counted (2 MB per million slots), so the figures stay those of the benchmarks."""
        obs_bytes = sum(_field_bytes(f) for k, f in self.obs.items() if k not in skip)
        return 2 * obs_bytes + _field_bytes(self.action) + 3 * np.dtype(np.float32).itemsize

    def differences(self, other: _Layout) -> list[str]:
        """Human-readable list of differences between ``self`` (have) and ``other`` (new)."""
        diffs = [f"missing obs key {k!r}" for k in self.obs if k not in other.obs]
        diffs += [f"unexpected obs key {k!r}" for k in other.obs if k not in self.obs]
        for key in (k for k in self.obs if k in other.obs):
            diffs += _field_differences(f"obs[{key!r}]", self.obs[key], other.obs[key])
        diffs += _field_differences("action", self.action, other.action)
        return diffs

    def check_obs(self, name: str, obs: dict[str, np.ndarray], batch: int) -> None:
        """Check that ``obs`` holds exactly this layout's keys, each a batch of ``batch`` rows.

        :param name: argument name for error messages (``"obs"`` or ``"next_obs"``).
        :param obs: observation arrays keyed like the env's Dict space.
        :param batch: expected batch size.
        :raises ValueError: on missing or extra keys, a wrong shape or an unstorable dtype.
        """
        missing = [k for k in self.obs if k not in obs]
        unexpected = [k for k in obs if k not in self.obs]
        if missing or unexpected:
            raise ValueError(f"{name} keys differ: missing {missing}, unexpected {unexpected}")
        for key, field in self.obs.items():
            _check_array(f"{name}[{key!r}]", obs[key], field, batch)

    def check_action(self, action: np.ndarray, batch: int) -> None:
        """Check that ``action`` is a batch of ``batch`` actions of this layout.

        :raises ValueError: on a wrong shape or an unstorable dtype.
        """
        _check_array("action", action, self.action, batch)

    def to_json(self) -> str:
        """Serialize to a JSON string (keys keep their order)."""
        obs = [[k, list(shape), dtype] for k, (shape, dtype) in self.obs.items()]
        action = [list(self.action[0]), self.action[1]]
        return json.dumps({"version": _FORMAT_VERSION, "obs": obs, "action": action})

    @classmethod
    def from_json(cls, text: str) -> _Layout:
        """Inverse of :meth:`to_json`."""
        data = json.loads(text)
        obs = {k: (tuple(shape), dtype) for k, shape, dtype in data["obs"]}
        return cls(obs=obs, action=(tuple(data["action"][0]), data["action"][1]))


def _field_bytes(field: _Field) -> int:
    shape, dtype = field
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def _field_differences(name: str, have: _Field, new: _Field) -> list[str]:
    diffs = []
    if have[0] != new[0]:
        diffs.append(f"{name}: shape {have[0]} != {new[0]}")
    if have[1] != new[1]:
        diffs.append(f"{name}: dtype {have[1]} != {new[1]}")
    return diffs


def _check_array(name: str, arr: np.ndarray, field: _Field, batch: int) -> None:
    """Raise ``ValueError`` unless ``arr`` is shaped ``(batch, *shape)`` and its dtype casts to
    the stored one within the same kind (for example int32 into int64, not float into int)."""
    expected = (batch, *field[0])
    if arr.shape != expected:
        raise ValueError(f"{name}: expected shape {expected}, got {arr.shape}")
    if not np.can_cast(arr.dtype, field[1], casting="same_kind"):
        raise ValueError(f"{name}: cannot store dtype {arr.dtype} as {field[1]}")


def _storage_dtype(dtype: np.dtype) -> str:
    """float64 is narrowed to float32 (networks are float32); other dtypes are kept."""
    dtype = np.dtype(dtype)
    return "float32" if dtype == np.float64 else dtype.name


def _layout_from_spaces(
    observation_space: gymnasium.Space, action_space: gymnasium.Space
) -> _Layout:
    if not isinstance(observation_space, gymnasium.spaces.Dict):
        raise ValueError(
            "ReplayBuffer needs a gymnasium.spaces.Dict observation space, got "
            f"{type(observation_space).__name__}; wrap the env with "
            "super_sac.wrappers.SimpleGymWrapper"
        )
    obs = {}
    for key, space in observation_space.spaces.items():
        if space.shape is None or space.dtype is None or isinstance(space, gymnasium.spaces.Dict):
            raise ValueError(f"observation key {key!r}: unsupported space {space}")
        obs[key] = (tuple(int(d) for d in space.shape), _storage_dtype(space.dtype))
    if isinstance(action_space, gymnasium.spaces.Box):
        action = (tuple(int(d) for d in action_space.shape), "float32")
    elif isinstance(action_space, gymnasium.spaces.Discrete):
        action = ((), "int64")
    else:
        raise ValueError(f"action space must be Box or Discrete, got {type(action_space).__name__}")
    return _Layout(obs=obs, action=action)


def _layout_from_arrays(obs: dict[str, np.ndarray], action: np.ndarray) -> _Layout:
    fields = {k: (tuple(v.shape[1:]), _storage_dtype(v.dtype)) for k, v in obs.items()}
    if np.issubdtype(action.dtype, np.integer):
        action_field = (tuple(action.shape[1:]), "int64")
    else:
        action_field = (tuple(action.shape[1:]), _storage_dtype(action.dtype))
    return _Layout(obs=fields, action=action_field)


def _as_column(name: str, value: Any, batch: int) -> np.ndarray:
    """Turn a scalar, ``(B,)`` or ``(B, 1)`` value into a ``(B,)`` float32 array.

    :param name: argument name for error messages.
    :param value: array-like value.
    :param batch: expected batch size ``B``.
    """
    arr = np.asarray(value, dtype=np.float32)
    if arr.ndim == 0:
        return np.broadcast_to(arr, (batch,))
    if arr.shape == (batch, 1):
        return arr[:, 0]
    if arr.shape != (batch,):
        raise ValueError(f"{name}: expected shape ({batch},) or ({batch}, 1), got {arr.shape}")
    return arr
