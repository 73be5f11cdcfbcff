"""Replay storage for off-policy agents.

This module holds four pieces:

* :class:`SumTree` / :class:`MinTree`: array-backed segment trees used for proportional
  prioritized sampling.
* :class:`Batch`: the tensors handed to the learner.
* :class:`ReplayBuffer`: a ring buffer of dict-observation transitions with optional
  proportional prioritization (Schaul et al., 2016, "Prioritized Experience Replay",
  https://arxiv.org/abs/1511.05952).
* :class:`NStepQueue`: folds per-step transitions of vectorized envs into n-step transitions.

All hot paths (push, sample, priority updates) are vectorized numpy; the trees only loop over
their depth.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gin
import gymnasium
import numpy as np
import torch

__all__ = ["AdvantageIndex", "Batch", "MinTree", "NStepQueue", "ReplayBuffer", "SumTree"]

_FORMAT_VERSION = 1
_Field = tuple[tuple[int, ...], str]  # (shape without batch dim, numpy dtype name)


# --------------------------------------------------------------------------------------------
# Segment trees
# --------------------------------------------------------------------------------------------


class _SegmentTree:
    """Complete binary tree over ``capacity`` leaves stored in a flat float64 array.

    Node ``1`` is the root, node ``i`` has children ``2i`` and ``2i + 1``, and the leaves live
    at ``[offset, offset + capacity)`` where ``offset`` is ``capacity`` rounded up to a power
    of two. Padding leaves hold the neutral element of the reduction.

    :param capacity: number of leaves.
    :param op: binary numpy ufunc combining two children (``np.add``, ``np.minimum``).
    :param neutral: value of an empty leaf for ``op``.
    """

    def __init__(self, capacity: int, op: Callable[..., np.ndarray], neutral: float) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self._capacity = int(capacity)
        self._offset = 1 << (self._capacity - 1).bit_length()
        self._depth = self._offset.bit_length() - 1
        self._op = op
        self._neutral = float(neutral)
        self._tree = np.full(2 * self._offset, self._neutral, dtype=np.float64)

    @property
    def capacity(self) -> int:
        """Number of usable leaves."""
        return self._capacity

    @property
    def nbytes(self) -> int:
        """Bytes used by the node array."""
        return self._tree.nbytes

    @property
    def root(self) -> float:
        """Reduction over all leaves."""
        return float(self._tree[1])

    def values(self, idxs: np.ndarray) -> np.ndarray:
        """Leaf values at ``idxs``.

        :param idxs: integer leaf indices in ``[0, capacity)``.
        :return: float64 array shaped like ``idxs``.
        """
        return self._tree[self._offset + self._check_idxs(idxs)]

    def update(self, idxs: np.ndarray, values: np.ndarray) -> None:
        """Set leaves and refresh their ancestors.

        Parents are recomputed from their two children level by level, so sums stay exact
        and never accumulate rounding drift. When an index repeats, its last value wins.

        :param idxs: integer leaf indices in ``[0, capacity)``.
        :param values: new leaf values, broadcastable to ``idxs``.
        """
        idxs = self._check_idxs(idxs).ravel()
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), idxs.shape)
        if idxs.size == 0:
            return
        idxs, values = _last_occurrence(idxs, values)
        nodes = idxs + self._offset
        self._tree[nodes] = values
        for _ in range(self._depth):
            nodes = np.unique(nodes >> 1)
            self._tree[nodes] = self._op(self._tree[2 * nodes], self._tree[2 * nodes + 1])

    def _check_idxs(self, idxs: np.ndarray) -> np.ndarray:
        idxs = np.asarray(idxs, dtype=np.int64)
        if idxs.size and (idxs.min() < 0 or idxs.max() >= self._capacity):
            raise IndexError(f"leaf index out of range [0, {self._capacity})")
        return idxs


class SumTree(_SegmentTree):
    """Sum tree for proportional sampling: ``total`` is the sum of all leaves.

    :param capacity: number of leaves.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.add, 0.0)

    @property
    def total(self) -> float:
        """Sum of all leaves."""
        return self.root

    def find_prefix_sum(self, prefixes: np.ndarray) -> np.ndarray:
        """For each prefix ``s`` find the leaf ``i`` with ``sum(leaf[:i]) <= s < sum(leaf[:i+1])``.

        The descent never enters a subtree whose sum is zero, so with ``total > 0`` the result is
        always a leaf with positive mass, even if float rounding pushes ``s`` to ``total``.

        :param prefixes: values in ``[0, total)``.
        :return: int64 leaf indices shaped like ``prefixes``.
        """
        prefixes = np.array(prefixes, dtype=np.float64)  # copy: modified below
        nodes = np.ones(prefixes.shape, dtype=np.int64)
        for _ in range(self._depth):
            left = 2 * nodes
            left_sum = self._tree[left]
            go_right = (prefixes >= left_sum) & (self._tree[left + 1] > 0.0)
            prefixes = np.where(go_right, prefixes - left_sum, prefixes)
            nodes = left + go_right
        return nodes - self._offset


class MinTree(_SegmentTree):
    """Min tree: ``min`` is the smallest leaf (``inf`` when empty).

    :param capacity: number of leaves.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.minimum, np.inf)

    @property
    def min(self) -> float:
        """Smallest leaf value."""
        return self.root


def _last_occurrence(idxs: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop repeated indices, keeping the value of the last occurrence of each.

    :param idxs: 1-D integer array.
    :param values: 1-D array aligned with ``idxs``.
    :return: unique indices and their values.
    """
    _, first_in_reversed = np.unique(idxs[::-1], return_index=True)
    keep = idxs.size - 1 - first_in_reversed
    return idxs[keep], values[keep]


# --------------------------------------------------------------------------------------------
# Batch
# --------------------------------------------------------------------------------------------


@dataclass
class Batch:
    """A sampled minibatch of transitions.

    :param obs: observation tensors keyed like the env's Dict space, stored dtype kept.
    :param action: ``(B, *shape)`` float32 for Box actions, ``(B,)`` int64 for Discrete.
    :param reward: ``(B, 1)`` float32 (n-step discounted sum when fed by :class:`NStepQueue`).
    :param next_obs: observations to bootstrap from, same layout as ``obs``.
    :param done: ``(B, 1)`` float32, 1.0 when the episode terminated (no bootstrap).
    :param discount: ``(B, 1)`` float32 bootstrap factor ``gamma ** k``.
    :param weights: ``(B, 1)`` float32 importance weights (ones for uniform sampling).
    :param idxs: ``(B,)`` int64 buffer slots, for :meth:`ReplayBuffer.update_priorities`.
    """

    obs: dict[str, torch.Tensor]
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: dict[str, torch.Tensor]
    done: torch.Tensor
    discount: torch.Tensor
    weights: torch.Tensor
    idxs: np.ndarray


# --------------------------------------------------------------------------------------------
# Layout helpers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """Per-transition shapes and dtypes of the observation keys and the action."""

    obs: dict[str, _Field]
    action: _Field

    def bytes_per_transition(self) -> int:
        """Bytes of one transition: obs + next_obs + action + reward, done, discount."""
        obs_bytes = sum(_field_bytes(f) for f in self.obs.values())
        return 2 * obs_bytes + _field_bytes(self.action) + 3 * np.dtype(np.float32).itemsize

    def differences(self, other: _Layout) -> list[str]:
        """Human-readable list of differences between ``self`` (have) and ``other`` (new)."""
        diffs = [f"missing obs key {k!r}" for k in self.obs if k not in other.obs]
        diffs += [f"unexpected obs key {k!r}" for k in other.obs if k not in self.obs]
        for key in (k for k in self.obs if k in other.obs):
            diffs += _field_differences(f"obs[{key!r}]", self.obs[key], other.obs[key])
        diffs += _field_differences("action", self.action, other.action)
        return diffs

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


def _npz_path(path: str | os.PathLike) -> str:
    path = os.fspath(path)
    return path if path.endswith(".npz") else path + ".npz"


# --------------------------------------------------------------------------------------------
# Replay buffer
# --------------------------------------------------------------------------------------------


@gin.configurable
class ReplayBuffer:
    """Ring buffer of batched dict-observation transitions, uniform or prioritized.

    Storage is allocated lazily, either by :meth:`allocate` from gymnasium spaces or from the
    first :meth:`push`. float64 arrays (observations or actions) are stored as float32;
    integer actions are stored as int64.

    Prioritized mode implements proportional prioritization (Schaul et al., 2016): a sum tree
    holds ``(p + priority_eps) ** alpha`` for every stored slot and a min tree holds the same
    values, so the minimum probability used to normalize importance weights costs O(1) per
    sample. Items whose stored priority is exactly zero (only possible with
    ``priority_eps=0``) are never sampled and are left out of that minimum.

    :param size: capacity in transitions.
    :param prioritized: sample proportionally to priorities instead of uniformly.
    :param alpha: priority exponent (0 = uniform).
    :param beta: importance-sampling exponent in ``[0, 1]``; may be changed between samples.
    :param priority_eps: added to raw priorities so no item starves.
    :param seed: RNG seed; ``None`` draws one from numpy's global RNG.
    :param verbose: print the memory footprint on allocation.
    """

    def __init__(
        self,
        size: int = 1_000_000,
        *,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        priority_eps: float = 1e-6,
        seed: int | None = None,
        verbose: bool = True,
    ) -> None:
        if int(size) < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        if not alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        if not priority_eps >= 0:
            raise ValueError(f"priority_eps must be >= 0, got {priority_eps}")
        self._size = int(size)
        self._prioritized = bool(prioritized)
        self._alpha = float(alpha)
        self.beta = beta
        self._priority_eps = float(priority_eps)
        if seed is None:
            seed = np.random.randint(2**31 - 1)
        self._rng = np.random.default_rng(seed)
        self._verbose = verbose

        self._layout: _Layout | None = None
        self._obs: dict[str, np.ndarray] = {}
        self._next_obs: dict[str, np.ndarray] = {}
        self._action = np.empty(0)
        self._reward = np.empty(0, dtype=np.float32)
        self._done = np.empty(0, dtype=np.float32)
        self._discount = np.empty(0, dtype=np.float32)
        self._ptr = 0
        self._len = 0
        self._protected = 0
        self._max_priority = 1.0
        self._sum_tree: SumTree | None = None
        self._min_tree: MinTree | None = None
        if self._prioritized:
            self._sum_tree = SumTree(self._size)
            self._min_tree = MinTree(self._size)

    @property
    def rng(self) -> np.random.Generator:
        """The sampling random number generator (its state goes into checkpoints)."""
        return self._rng

    def seed(self, seed: int) -> None:
        """Restart the sampling RNG from ``seed`` (the training loop calls this when seeded)."""
        self._rng = np.random.default_rng(seed)

    # ---------------------------------------------------------------- properties

    def __len__(self) -> int:
        return self._len

    @property
    def size(self) -> int:
        """Capacity in transitions."""
        return self._size

    @property
    def protected(self) -> int:
        """Number of leading slots (offline data) that new transitions never overwrite."""
        return self._protected

    def protect(self) -> None:
        """Keep everything stored now (e.g. an offline dataset) for the rest of training.

        Later pushes wrap around over the remaining ``size - len`` slots only, so fine-tuning on
        a mixed buffer never loses the offline data. Call it right after loading the data.

        :raises ValueError: if the ring has already wrapped (stored data are not the first
            ``len`` slots).
        """
        if self._ptr != self._len % self._size or self._len < self._protected:
            raise ValueError(
                "protect() must be called before the ring buffer wraps around (right after "
                "loading the offline data)"
            )
        self._protected = self._len

    def stored_discounts(self) -> np.ndarray:
        """The distinct bootstrap discounts ``gamma ** k`` stored (a check that a dataset was
        loaded with the training run's ``gamma``)."""
        return np.unique(self._discount[: self._len])

    def gather(self, idxs: np.ndarray, device: str | torch.device = "cpu") -> Batch:
        """The transitions in slots ``idxs`` as a :class:`Batch` with unit weights (for samplers
        kept beside the buffer, such as :class:`AdvantageIndex`)."""
        idxs = np.asarray(idxs, dtype=np.int64)
        return self._gather(idxs, np.ones(idxs.shape[0], dtype=np.float32), device)

    @property
    def prioritized(self) -> bool:
        """Whether sampling is proportional to priorities."""
        return self._prioritized

    @property
    def alpha(self) -> float:
        """Priority exponent (fixed: stored priorities are already raised to it)."""
        return self._alpha

    @property
    def beta(self) -> float:
        """Importance-sampling exponent; assign to anneal it."""
        return self._beta

    @beta.setter
    def beta(self, value: float) -> None:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {value}")
        self._beta = float(value)

    @property
    def keys(self) -> tuple[str, ...]:
        """Observation keys (empty before allocation)."""
        return tuple(self._layout.obs) if self._layout else ()

    @property
    def allocated(self) -> bool:
        """Whether storage exists."""
        return self._layout is not None

    @property
    def bytes_per_transition(self) -> int:
        """Bytes of storage per transition (0 before allocation)."""
        return self._layout.bytes_per_transition() if self._layout else 0

    @property
    def memory_bytes(self) -> int:
        """Bytes of transition storage plus priority trees (trees exist from construction)."""
        trees = 0
        if self._sum_tree is not None:
            trees = self._sum_tree.nbytes + self._min_tree.nbytes
        return self._size * self.bytes_per_transition + trees

    # ---------------------------------------------------------------- allocation

    def allocate(
        self,
        observation_space: gymnasium.spaces.Dict,
        action_space: gymnasium.spaces.Box | gymnasium.spaces.Discrete,
    ) -> None:
        """Preallocate storage for the given spaces; a no-op if already allocated the same way.

        :param observation_space: Dict observation space (see ``SimpleGymWrapper``).
        :param action_space: Box (stored float32) or Discrete (stored int64) action space.
        :raises ValueError: on a non-Dict observation space or a layout change.
        """
        self._allocate_layout(_layout_from_spaces(observation_space, action_space))

    def _allocate_layout(self, layout: _Layout) -> None:
        if self._layout is not None:
            diffs = self._layout.differences(layout)
            if diffs:
                raise ValueError("ReplayBuffer already allocated differently: " + "; ".join(diffs))
            return
        self._layout = layout
        self._obs = {k: self._zeros(field) for k, field in layout.obs.items()}
        self._next_obs = {k: self._zeros(field) for k, field in layout.obs.items()}
        self._action = self._zeros(layout.action)
        self._reward = np.zeros(self._size, dtype=np.float32)
        self._done = np.zeros(self._size, dtype=np.float32)
        self._discount = np.zeros(self._size, dtype=np.float32)
        if self._verbose:
            print(self._memory_message())

    def _zeros(self, field: _Field) -> np.ndarray:
        return np.zeros((self._size, *field[0]), dtype=field[1])

    def _memory_message(self) -> str:
        mib = self._size * self.bytes_per_transition / 2**20
        msg = f"ReplayBuffer: {self._size:,} transitions x {self.bytes_per_transition:,} B"
        msg += f" = {mib:.1f} MiB"
        if self._sum_tree is not None:
            tree_mib = (self._sum_tree.nbytes + self._min_tree.nbytes) / 2**20
            msg += f" (+ {tree_mib:.1f} MiB priority trees)"
        return msg

    # ---------------------------------------------------------------- push

    def push(
        self,
        obs: dict[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: dict[str, np.ndarray],
        done: np.ndarray,
        discount: np.ndarray,
    ) -> np.ndarray:
        """Store a batch of ``B`` transitions (leading dim ``B`` everywhere).

        A batch crossing the end of the ring wraps; a batch longer than ``size`` keeps its last
        ``size`` transitions. Protected slots (:meth:`protect`) are never overwritten: the ring
        wraps around over the slots after them. ``reward``/``done``/``discount`` may be
        ``(B,)``, ``(B, 1)`` or a scalar. New items get the current maximum priority.

        :param obs: observation arrays keyed like the allocated layout.
        :param action: actions, ``(B, *shape)`` or ``(B,)`` for discrete.
        :param reward: rewards (already n-step summed if applicable).
        :param next_obs: observations to bootstrap from.
        :param done: 1 where the episode terminated (no bootstrap).
        :param discount: bootstrap discount ``gamma ** k``.
        :return: the slots written (for indices kept beside the buffer, such as
            :class:`AdvantageIndex`).
        """
        action = np.asarray(action)
        obs = {k: np.asarray(v) for k, v in obs.items()}
        next_obs = {k: np.asarray(v) for k, v in next_obs.items()}
        if action.ndim == 0:
            raise ValueError("action must have a leading batch dimension")
        if self._layout is None:
            self._allocate_layout(_layout_from_arrays(obs, action))
        batch = action.shape[0]
        self._check_obs("obs", obs, batch)
        self._check_obs("next_obs", next_obs, batch)
        self._check_array("action", action, self._layout.action, batch)
        columns = [_as_column(n, v, batch) for n, v in (("reward", reward), ("done", done))]
        columns.append(_as_column("discount", discount, batch))
        if batch == 0:
            return np.zeros(0, dtype=np.int64)
        ring = self._size - self._protected  # slots the ring may overwrite
        if ring == 0:
            raise ValueError(
                f"the ReplayBuffer is full of protected offline data ({self._protected} "
                "transitions) and has no room for new ones; build it with a larger size "
                "(ReplayBuffer.size) or load the dataset with protect=False"
            )
        keep = slice(max(0, batch - ring), batch)
        slots = self._protected + (self._ptr - self._protected + np.arange(batch)[keep]) % ring
        for key in self._obs:
            self._obs[key][slots] = obs[key][keep]
            self._next_obs[key][slots] = next_obs[key][keep]
        self._action[slots] = action[keep]
        for store, column in zip((self._reward, self._done, self._discount), columns):
            store[slots] = column[keep]
        if self._prioritized:
            self._set_tree_values(slots, np.full(slots.shape, self._max_priority**self._alpha))
        self._ptr = self._protected + (self._ptr - self._protected + batch) % ring
        self._len = min(self._len + batch, self._size)
        return slots

    def _check_obs(self, name: str, obs: dict[str, np.ndarray], batch: int) -> None:
        missing = [k for k in self._layout.obs if k not in obs]
        unexpected = [k for k in obs if k not in self._layout.obs]
        if missing or unexpected:
            raise ValueError(f"{name} keys differ: missing {missing}, unexpected {unexpected}")
        for key, field in self._layout.obs.items():
            self._check_array(f"{name}[{key!r}]", obs[key], field, batch)

    @staticmethod
    def _check_array(name: str, arr: np.ndarray, field: _Field, batch: int) -> None:
        expected = (batch, *field[0])
        if arr.shape != expected:
            raise ValueError(f"{name}: expected shape {expected}, got {arr.shape}")
        if not np.can_cast(arr.dtype, field[1], casting="same_kind"):
            raise ValueError(f"{name}: cannot store dtype {arr.dtype} as {field[1]}")

    # ---------------------------------------------------------------- sampling

    def sample(self, batch_size: int, device: str | torch.device = "cpu") -> Batch:
        """Draw ``batch_size`` transitions (with replacement).

        Uniform mode draws slots uniformly. Prioritized mode splits ``[0, total)`` into
        ``batch_size`` equal segments and draws one prefix sum per segment, so slot ``i`` is
        picked with ``P(i) = p_i^alpha / sum_j p_j^alpha``; its weight is
        ``(N P(i))^-beta / max_j (N P(j))^-beta`` with the max over all stored items.

        :param batch_size: number of transitions.
        :param device: torch device for the returned tensors.
        :return: a :class:`Batch`.
        :raises ValueError: if the buffer is empty or ``batch_size < 1``.
        """
        if self._len == 0:
            raise ValueError("cannot sample from an empty ReplayBuffer")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if self._prioritized:
            idxs, weights = self._sample_prioritized(batch_size)
        else:
            idxs = self._rng.integers(0, self._len, size=batch_size, dtype=np.int64)
            weights = np.ones(batch_size, dtype=np.float32)
        return self._gather(idxs, weights, device)

    def _sample_prioritized(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        total = self._sum_tree.total
        if not total > 0.0:
            raise ValueError("all stored priorities are zero; cannot sample")
        segment = total / batch_size
        # A prefix rounded up to ``total`` is safe: the descent avoids empty subtrees.
        prefixes = (np.arange(batch_size) + self._rng.random(batch_size)) * segment
        idxs = self._sum_tree.find_prefix_sum(prefixes)
        # (N P_i)^-beta / (N P_min)^-beta == (p_i / p_min)^-beta, with p already ^alpha.
        ratio = self._sum_tree.values(idxs) / self._min_tree.min
        weights = (ratio ** (-self._beta)).astype(np.float32)
        return idxs, weights

    def _gather(self, idxs: np.ndarray, weights: np.ndarray, device: str | torch.device) -> Batch:
        def to_torch(arr: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(arr).to(device, non_blocking=True)

        return Batch(
            obs={k: to_torch(v[idxs]) for k, v in self._obs.items()},
            action=to_torch(self._action[idxs]),
            reward=to_torch(self._reward[idxs][:, None]),
            next_obs={k: to_torch(v[idxs]) for k, v in self._next_obs.items()},
            done=to_torch(self._done[idxs][:, None]),
            discount=to_torch(self._discount[idxs][:, None]),
            weights=to_torch(weights[:, None]),
            idxs=idxs,
        )

    # ---------------------------------------------------------------- priorities

    def update_priorities(self, idxs: np.ndarray, priorities: np.ndarray | torch.Tensor) -> None:
        """Set raw priorities (e.g. ``|TD error|``) of sampled slots.

        Stores ``(p + priority_eps) ** alpha``; the largest ``p + priority_eps`` seen becomes the
        priority of future pushes. If a slot was overwritten since it was sampled, the new
        occupant receives the priority. Repeated slots: the last value wins.

        :param idxs: slots, usually ``Batch.idxs``.
        :param priorities: non-negative finite raw priorities aligned with ``idxs``.
        :raises RuntimeError: if the buffer was built with ``prioritized=False``.
        :raises ValueError: on negative/non-finite priorities, size mismatch or bad slots.
        """
        if not self._prioritized:
            raise RuntimeError(
                "update_priorities called on a ReplayBuffer built with prioritized=False"
            )
        if isinstance(priorities, torch.Tensor):
            priorities = priorities.detach().cpu().numpy()
        raw = np.asarray(priorities, dtype=np.float64).ravel()
        idxs = np.asarray(idxs, dtype=np.int64).ravel()
        if raw.shape != idxs.shape:
            raise ValueError(f"got {idxs.size} idxs but {raw.size} priorities")
        if not np.all(np.isfinite(raw)) or np.any(raw < 0):
            raise ValueError("priorities must be finite and >= 0")
        if idxs.size and (idxs.min() < 0 or idxs.max() >= self._len):
            raise ValueError(f"idxs must be in [0, {self._len})")
        if idxs.size == 0:
            return
        raw = raw + self._priority_eps
        self._max_priority = max(self._max_priority, float(raw.max()))
        self._set_tree_values(idxs, raw**self._alpha)

    def _set_tree_values(self, idxs: np.ndarray, values: np.ndarray) -> None:
        self._sum_tree.update(idxs, values)
        self._min_tree.update(idxs, np.where(values > 0.0, values, np.inf))

    # ---------------------------------------------------------------- persistence

    def save(self, path: str | os.PathLike) -> str:
        """Write the filled part of the buffer to one uncompressed ``.npz`` (no pickles).

        The file is written to ``path + ".tmp"``, fsynced, then renamed over ``path``.

        :param path: destination; ``.npz`` is appended if missing.
        :return: the path written.
        :raises ValueError: if the buffer has never been allocated.
        """
        if self._layout is None:
            raise ValueError("cannot save a ReplayBuffer that was never allocated")
        path = _npz_path(path)
        tmp = path + ".tmp"
        try:
            with open(tmp, "wb") as f:
                np.savez(f, **self._arrays_to_save())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return path

    def _arrays_to_save(self) -> dict[str, np.ndarray]:
        n = self._len
        arrays = {
            "layout": np.array(self._layout.to_json()),
            "size": np.array(self._size, dtype=np.int64),
            "length": np.array(n, dtype=np.int64),
            "ptr": np.array(self._ptr, dtype=np.int64),
            "protected": np.array(self._protected, dtype=np.int64),
            "alpha": np.array(self._alpha, dtype=np.float64),
            "max_priority": np.array(self._max_priority, dtype=np.float64),
            "action": self._action[:n],
            "reward": self._reward[:n],
            "done": self._done[:n],
            "discount": self._discount[:n],
        }
        for i, key in enumerate(self._layout.obs):
            arrays[f"obs_{i}"] = self._obs[key][:n]
            arrays[f"next_obs_{i}"] = self._next_obs[key][:n]
        if self._prioritized:
            arrays["priorities"] = self._sum_tree.values(np.arange(n))
        return arrays

    def load(self, path: str | os.PathLike) -> ReplayBuffer:
        """Replace this buffer's contents with a file written by :meth:`save`.

        With the same ``size`` as the saved buffer, slots and the ring pointer are restored
        exactly; with a different ``size`` the transitions are stored oldest-first from slot 0.
        Saved priorities are converted if ``alpha`` differs; a file from a non-prioritized
        buffer gives every item priority 1.

        :param path: file written by :meth:`save` (``.npz`` appended if missing).
        :return: ``self``.
        :raises ValueError: if the saved length exceeds ``size`` or the layout differs.
        """
        with np.load(_npz_path(path), allow_pickle=False) as data:
            layout = _Layout.from_json(str(data["layout"]))
            length, saved_size = int(data["length"]), int(data["size"])
            if length > self._size:
                raise ValueError(f"file holds {length} transitions but size is {self._size}")
            self._allocate_layout(layout)
            protected = int(data["protected"]) if "protected" in data else 0
            if protected and saved_size != self._size:
                raise ValueError(
                    f"the file's buffer (size {saved_size}) protects {protected} offline "
                    f"transitions; load it into a buffer of the same size, not {self._size}"
                )
            self._protected = protected
            if saved_size == self._size:
                slots, ptr = np.arange(length), int(data["ptr"])
            else:  # oldest first from slot 0
                slots = (int(data["ptr"]) - length + np.arange(length)) % saved_size
                slots, ptr = np.argsort(slots), length % self._size
            self._fill_from(data, slots)
            self._ptr, self._len = ptr, length
            if self._prioritized:
                self._restore_priorities(data, slots, length)
        return self

    def _fill_from(self, data: Any, slots: np.ndarray) -> None:
        """Copy saved rows into ``slots`` (row ``i`` -> slot ``slots[i]``); later slots are stale
        but unreachable because sampling is bounded by ``len``."""
        for i, key in enumerate(self._layout.obs):
            self._obs[key][slots] = data[f"obs_{i}"]
            self._next_obs[key][slots] = data[f"next_obs_{i}"]
        for name in ("action", "reward", "done", "discount"):
            getattr(self, f"_{name}")[slots] = data[name]

    def _restore_priorities(self, data: Any, slots: np.ndarray, length: int) -> None:
        self._sum_tree = SumTree(self._size)
        self._min_tree = MinTree(self._size)
        self._max_priority = float(data["max_priority"])
        saved_alpha = float(data["alpha"])
        if "priorities" in data and saved_alpha > 0:
            values = data["priorities"] ** (self._alpha / saved_alpha)
        else:
            values = np.full(length, self._max_priority**self._alpha)
        self._set_tree_values(slots, values)

    def load_dataset(
        self,
        source: str | os.PathLike,
        env: gymnasium.Env,
        *,
        gamma: float,
        datasets_path: str | os.PathLike | None = None,
        protect: bool = True,
    ) -> ReplayBuffer:
        """Append an offline dataset (a Minari id or a ``.npz`` path), validated against ``env``.

        Observations become the env's dict observations and Box actions are rescaled to
        ``[-1, 1]`` (see :mod:`super_sac.datasets`); every transition is a one-step transition
        with ``discount = gamma`` and ``done = terminated`` (truncated transitions keep
        bootstrapping from their true final observation).

        Mixed offline + online buffers: with ``protect=True`` (the default) the dataset's slots
        are protected (:meth:`protect`), so online fine-tuning fills the remaining
        ``size - len`` slots as a ring and never overwrites the offline data. With
        ``protect=False`` the dataset is ordinary ring content that new transitions replace
        oldest-first once the buffer is full.

        :param source: a ``.npz`` file or a Minari dataset id (resolved under
            ``datasets_path``, default ``$MINARI_DATASETS_PATH``).
        :param env: the (wrapped) env the agent trains in.
        :param gamma: the training run's discount (``super_sac.gamma``).
        :param datasets_path: local Minari datasets folder.
        :param protect: keep the dataset for the whole run (see above).
        :return: ``self``.
        :raises super_sac.datasets.DatasetError: when the dataset is missing, malformed or does
            not fit ``env``; ``ValueError`` when it does not fit in the buffer.
        """
        from super_sac.datasets import load_transitions  # noqa: PLC0415 (avoids a cycle)

        data, _ = load_transitions(source, env, datasets_path)
        if len(self) + len(data) > self._size:
            raise ValueError(
                f"the dataset's {len(data)} transitions do not fit in the ReplayBuffer "
                f"(size {self._size}, {len(self)} stored). Fix: ReplayBuffer.size >= "
                f"{len(self) + len(data)} (more for online fine-tuning)"
            )
        self.allocate(env.observation_space, env.action_space)
        self.push(
            obs=data.obs,
            action=data.action,
            reward=data.reward,
            next_obs=data.next_obs,
            done=data.terminated.astype(np.float32),
            discount=np.float32(gamma),
        )
        if protect:
            self.protect()
        return self

    @classmethod
    def from_file(cls, path: str | os.PathLike, **kwargs: Any) -> ReplayBuffer:
        """Build a buffer sized like the saved one (unless ``size`` is given) and load it.

        :param path: file written by :meth:`save`.
        :param kwargs: other constructor arguments.
        """
        if "size" not in kwargs:
            with np.load(_npz_path(path), allow_pickle=False) as data:
                kwargs["size"] = int(data["size"])
        return cls(**kwargs).load(path)


class AdvantageIndex:
    """A second, advantage-based sampling index over a :class:`ReplayBuffer`'s slots.

    The AFBC trick (Grigsby & Qi 2021, arXiv:2110.04698; ``super_sac.afbc_per``): actor
    batches are drawn with probability ``P(i) = p_i / sum_j p_j`` where ``p_i`` is the latest
    filter weight of slot ``i`` plus a floor (:func:`super_sac.adv_estimator.advantage_priorities`),
    so few samples of a batch are masked out by the filter; the critics keep sampling
    uniformly from the buffer itself. Slots not yet estimated (new data) get the largest
    priority seen. Each sample carries the importance weight ``1 / (N P(i))`` (``N`` stored
    transitions), which keeps the actor's objective that of uniform sampling,
    ``E_P[w_i / (N P(i))] = (1/N) sum_i w_i``, while the batch is spent on kept samples.

    It reuses the buffer's :class:`SumTree` and stratified prefix-sum sampling.

    :param capacity: the buffer's size.
    :param seed: sampling RNG seed.
    """

    def __init__(self, capacity: int, seed: int | None = None) -> None:
        self._tree = SumTree(capacity)
        self._len = 0
        self._max_priority = 1.0
        self._rng = np.random.default_rng(seed)

    @property
    def rng(self) -> np.random.Generator:
        """The sampling generator (its state goes into checkpoints)."""
        return self._rng

    def __len__(self) -> int:
        return self._len

    def add(self, slots: np.ndarray) -> None:
        """Give freshly written slots the largest priority seen so far."""
        slots = np.asarray(slots, dtype=np.int64)
        if slots.size:
            self._tree.update(slots, np.full(slots.shape, self._max_priority))
            self._len = max(self._len, int(slots.max()) + 1)

    def update(self, idxs: np.ndarray, priorities: np.ndarray | torch.Tensor) -> None:
        """Set the priorities of sampled slots (repeated slots: the last value wins)."""
        if isinstance(priorities, torch.Tensor):
            priorities = priorities.detach().cpu().numpy()
        values = np.asarray(priorities, dtype=np.float64).ravel()
        idxs = np.asarray(idxs, dtype=np.int64).ravel()
        if values.shape != idxs.shape or not np.all(np.isfinite(values)) or np.any(values <= 0):
            raise ValueError("AdvantageIndex priorities must be positive, finite and one per idx")
        if idxs.size:
            self._max_priority = max(self._max_priority, float(values.max()))
            self._tree.update(idxs, values)

    def priorities(self, idxs: np.ndarray) -> np.ndarray:
        """Current priorities of ``idxs``."""
        return self._tree.values(np.asarray(idxs, dtype=np.int64))

    def sample(
        self, buffer: ReplayBuffer, batch_size: int, device: str | torch.device = "cpu"
    ) -> tuple[Batch, torch.Tensor]:
        """A prioritized batch from ``buffer`` and its ``(B, 1)`` importance weights."""
        if self._len == 0:
            raise ValueError("the AdvantageIndex holds no slots; add the buffer's slots first")
        total = self._tree.total
        prefixes = (np.arange(batch_size) + self._rng.random(batch_size)) * (total / batch_size)
        idxs = self._tree.find_prefix_sum(prefixes)
        importance = (total / self._len) / self._tree.values(idxs)
        batch = buffer.gather(idxs, device)
        return batch, torch.from_numpy(importance.astype(np.float32)[:, None]).to(device)

    def state_dict(self) -> dict[str, Any]:
        """Priorities of the first ``len`` slots, the running maximum and the length."""
        return {
            "priorities": torch.from_numpy(self._tree.values(np.arange(self._len))),
            "max_priority": self._max_priority,
            "len": self._len,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        self._len = int(state["len"])
        self._max_priority = float(state["max_priority"])
        if self._len:
            self._tree.update(np.arange(self._len), state["priorities"].numpy())


# --------------------------------------------------------------------------------------------
# N-step returns
# --------------------------------------------------------------------------------------------


class NStepQueue:
    """Turn per-step transitions of ``num_envs`` parallel envs into n-step transitions.

    A window of ``n_step`` pending steps of one env is emitted as
    ``(obs_0, a_0, sum_i gamma^i r_i, next_obs_newest, terminated_newest, gamma^n)``. When an
    env's episode ends, every pending start is flushed with the rewards up to the end and
    ``discount = gamma ** k`` (``k`` rewards summed); ``done`` is 1 only for termination,
    so truncated windows still bootstrap from the final observation.

    Output rows are ordered by env index, then by start step.

    :param num_envs: number of parallel envs.
    :param n_step: window length (1 = plain one-step transitions).
    :param gamma: discount factor.
    """

    def __init__(self, num_envs: int, n_step: int, gamma: float) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if n_step < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.num_envs = int(num_envs)
        self.n_step = int(n_step)
        self.gamma = float(gamma)
        self._pending: list[deque] = [deque() for _ in range(self.num_envs)]

    def reset(self) -> None:
        """Drop all pending steps (e.g. after a hard reset of the envs)."""
        for queue in self._pending:
            queue.clear()

    def state_dict(self) -> dict[str, Any]:
        """The pending steps of every env, as tensors (for checkpoints)."""
        return {
            "pending": [
                [
                    {
                        "obs": {k: torch.from_numpy(np.array(v)) for k, v in step_obs.items()},
                        "action": torch.from_numpy(np.array(action)),
                        "reward": reward,
                    }
                    for step_obs, action, reward in queue
                ]
                for queue in self._pending
            ]
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        pending = state["pending"]
        if len(pending) != self.num_envs:
            raise ValueError(f"state holds {len(pending)} envs, this queue has {self.num_envs}")
        self._pending = [
            deque(
                (
                    {k: v.cpu().numpy() for k, v in step["obs"].items()},
                    step["action"].cpu().numpy(),
                    float(step["reward"]),
                )
                for step in queue
            )
            for queue in pending
        ]

    def push(
        self,
        obs: dict[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: dict[str, np.ndarray],
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> dict[str, Any] | None:
        """Add one step of every env and return the transitions completed by it.

        ``next_obs`` must hold the true final observation for envs whose episode just ended
        (not the autoreset observation). With ``n_step == 1`` the returned arrays may alias
        the inputs.

        :param obs: observations, leading dim ``num_envs``.
        :param action: actions, leading dim ``num_envs``.
        :param reward: ``(num_envs,)`` rewards.
        :param next_obs: observations after the step.
        :param terminated: ``(num_envs,)`` bool, episode reached a terminal state.
        :param truncated: ``(num_envs,)`` bool, episode was cut off (time limit).
        :return: ``dict(obs, action, reward, next_obs, done, discount)`` for
            ``ReplayBuffer.push(**out)``, or ``None`` if nothing completed.
        """
        reward = np.asarray(reward, dtype=np.float64).reshape(self.num_envs)
        terminated = np.asarray(terminated, dtype=bool).reshape(self.num_envs)
        truncated = np.asarray(truncated, dtype=bool).reshape(self.num_envs)
        if self.n_step == 1:
            return {
                "obs": obs,
                "action": np.asarray(action),
                "reward": reward.astype(np.float32),
                "next_obs": next_obs,
                "done": terminated.astype(np.float32),
                "discount": np.full(self.num_envs, self.gamma, dtype=np.float32),
            }
        rows: list[tuple] = []
        for env in range(self.num_envs):
            rows += self._push_env(env, obs, action, reward[env], next_obs, terminated, truncated)
        return self._stack(rows) if rows else None

    def _push_env(
        self,
        env: int,
        obs: dict[str, np.ndarray],
        action: np.ndarray,
        reward: float,
        next_obs: dict[str, np.ndarray],
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> list[tuple]:
        """Queue env ``env``'s step; return finished rows ``(obs, a, R, next_obs, done, disc)``."""
        queue = self._pending[env]
        step_obs = {k: np.array(v[env]) for k, v in obs.items()}  # copy: callers reuse buffers
        queue.append((step_obs, np.array(action[env]), float(reward)))
        ended = bool(terminated[env] or truncated[env])
        if not ended and len(queue) < self.n_step:
            return []
        final_obs = {k: np.array(v[env]) for k, v in next_obs.items()}
        done = float(terminated[env])
        returns = self._suffix_returns([r for _, _, r in queue])
        starts = range(len(queue)) if ended else range(1)
        rows = [
            (queue[j][0], queue[j][1], returns[j], final_obs, done, self.gamma ** (len(queue) - j))
            for j in starts
        ]
        if ended:
            queue.clear()
        else:
            queue.popleft()
        return rows

    def _suffix_returns(self, rewards: list[float]) -> list[float]:
        """``out[j] = sum_{i >= j} gamma^(i-j) r_i``."""
        out = [0.0] * len(rewards)
        running = 0.0
        for i in range(len(rewards) - 1, -1, -1):
            running = rewards[i] + self.gamma * running
            out[i] = running
        return out

    @staticmethod
    def _stack(rows: list[tuple]) -> dict[str, Any]:
        obs_rows, actions, rewards, next_rows, dones, discounts = zip(*rows)
        return {
            "obs": {k: np.stack([o[k] for o in obs_rows]) for k in obs_rows[0]},
            "action": np.stack(actions),
            "reward": np.asarray(rewards, dtype=np.float32),
            "next_obs": {k: np.stack([o[k] for o in next_rows]) for k in next_rows[0]},
            "done": np.asarray(dones, dtype=np.float32),
            "discount": np.asarray(discounts, dtype=np.float32),
        }
