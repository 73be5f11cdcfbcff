"""The replay buffer: :class:`Batch` and :class:`ReplayBuffer`.

:class:`ReplayBuffer` is a ring buffer of dict-observation transitions, sampled uniformly or
with proportional prioritization (Schaul et al., 2016, "Prioritized Experience Replay",
https://arxiv.org/abs/1511.05952). Its hot paths (push, sample, priority updates) are
vectorized numpy. Saving and loading (:mod:`super_sac.replay.persistence`) and offline datasets
(:mod:`super_sac.replay.offline`) are added by base classes kept in their own modules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gin
import gymnasium
import numpy as np
import torch

from super_sac.replay.frames import FrameStore
from super_sac.replay.layout import (
    _as_column,
    _Field,
    _Layout,
    _layout_from_arrays,
    _layout_from_spaces,
)
from super_sac.replay.offline import _OfflineDataMixin
from super_sac.replay.persistence import _PersistenceMixin
from super_sac.replay.segment_tree import MinTree, SumTree

if TYPE_CHECKING:
    from super_sac.augmented_batch import AugmentedViews

__all__ = ["Batch", "ReplayBuffer"]


@dataclass
class Batch:
    """A sampled minibatch of transitions.

    :param obs: observation tensors keyed like the env's Dict space, stored dtype kept.
    :param action: ``(B, *shape)`` float32 for Box actions, ``(B,)`` int64 for Discrete.
    :param reward: ``(B, 1)`` float32 (n-step discounted sum when fed by
        :class:`~super_sac.replay.NStepQueue`).
    :param next_obs: observations to bootstrap from, same layout as ``obs``.
    :param done: ``(B, 1)`` float32, 1.0 when the episode terminated (no bootstrap).
    :param discount: ``(B, 1)`` float32 bootstrap factor ``gamma ** k``.
    :param weights: ``(B, 1)`` float32 importance weights (ones for uniform sampling).
    :param idxs: ``(B,)`` int64 buffer slots, for :meth:`ReplayBuffer.update_priorities`.
    :param views: with an augmenter, the clean and augmented views of the batch
        (:func:`super_sac.augmented_batch.augment_batch`); ``None`` for a batch as sampled.
    """

    obs: dict[str, torch.Tensor]
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: dict[str, torch.Tensor]
    done: torch.Tensor
    discount: torch.Tensor
    weights: torch.Tensor
    idxs: np.ndarray
    views: AugmentedViews | None = None

    def map_tensors(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
        """A new batch with ``fn`` applied to every tensor of the transitions (observation keys
        included); ``idxs`` and ``views`` are kept as they are."""
        return dataclasses.replace(
            self,
            obs={k: fn(v) for k, v in self.obs.items()},
            action=fn(self.action),
            reward=fn(self.reward),
            next_obs={k: fn(v) for k, v in self.next_obs.items()},
            done=fn(self.done),
            discount=fn(self.discount),
            weights=fn(self.weights),
        )


@gin.configurable(module="super_sac.replay")  # gin name kept from the single-module days
class ReplayBuffer(_PersistenceMixin, _OfflineDataMixin):
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
    :param frame_stack: observation keys that are frame stacks, mapped to their stack depth
        ``k`` (e.g. ``{"obs": 4}`` for Atari, ``{"pixels": 3}`` for a ``(9, 84, 84)`` stack of
        three RGB frames: each frame is ``shape[0] // k`` channels of axis 0). These keys are
        stored frame-deduplicated (:mod:`super_sac.replay.frames`): each distinct frame once,
        stacks rebuilt at sample time, exactly equal to the pushed ones. Other keys are stored
        whole.
    :param frame_ratio: frame slots per transition slot of deduplicated keys (besides a small
        window); a stream of ``L``-step episodes needs ``1 + 1/L``, as long as each frame comes
        back within the match window (:func:`~super_sac.replay.frames.default_window`:
        ``size / 32`` frame writes clipped to [256, 2048], about ``E (k + n - 2)`` with ``E``
        parallel envs: some 50 envs at ``k = 4, n = 3`` in a buffer under 8,192 slots). Beyond
        it every frame is stored again and the store fills, with an error that says so.
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
        frame_stack: dict[str, int] | None = None,
        frame_ratio: float = 1.15,
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
        self._frame_stack = {str(k): int(v) for k, v in dict(frame_stack or {}).items()}
        if not frame_ratio >= 1.0:
            raise ValueError(f"frame_ratio must be >= 1, got {frame_ratio}")
        self._frame_ratio = float(frame_ratio)
        self._frames: dict[str, FrameStore] = {}  # deduplicated keys

        self._layout: _Layout | None = None
        self._obs: dict[str, np.ndarray] = {}
        self._next_obs: dict[str, np.ndarray] = {}
        self._action = np.empty(0)
        self._reward = np.empty(0, dtype=np.float32)
        self._done = np.empty(0, dtype=np.float32)
        self._discount = np.empty(0, dtype=np.float32)
        self._env_index = np.empty(0, dtype=np.int16)
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
        for store in self._frames.values():
            store.protect()
        self._protected = self._len

    def stored_discounts(self) -> np.ndarray:
        """The distinct bootstrap discounts ``gamma ** k`` stored (a check that a dataset was
        loaded with the training run's ``gamma``)."""
        return np.unique(self._discount[: self._len])

    def gather(self, idxs: np.ndarray, device: str | torch.device = "cpu") -> Batch:
        """The transitions in slots ``idxs`` as a :class:`Batch` with unit weights (for samplers
        kept beside the buffer, such as :class:`~super_sac.replay.AdvantageIndex`)."""
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
    def frame_stack(self) -> dict[str, int]:
        """The frame-deduplicated keys and their stack depths."""
        return dict(self._frame_stack)

    @property
    def storage_bytes(self) -> int:
        """Bytes of transition storage (frames and index arrays of deduplicated keys
        included; 0 before allocation)."""
        if self._layout is None:
            return 0
        plain = self._layout.bytes_per_transition(skip=tuple(self._frames))
        return self._size * plain + sum(store.nbytes for store in self._frames.values())

    @property
    def bytes_per_transition(self) -> int:
        """Bytes of storage per transition slot, rounded up (0 before allocation): frames of
        deduplicated keys count as their whole frame store divided by ``size``."""
        return -(-self.storage_bytes // self._size)

    @property
    def frames_per_transition(self) -> dict[str, float]:
        """Frame slots per transition slot of every deduplicated key."""
        return {k: store.capacity / self._size for k, store in self._frames.items()}

    @property
    def memory_bytes(self) -> int:
        """Bytes of transition storage plus priority trees (trees exist from construction)."""
        trees = 0
        if self._sum_tree is not None:
            trees = self._sum_tree.nbytes + self._min_tree.nbytes
        return self.storage_bytes + trees

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
        unknown = [k for k in self._frame_stack if k not in layout.obs]
        if unknown:
            raise ValueError(
                f"frame_stack names keys {unknown} that the observations do not have "
                f"(keys: {list(layout.obs)})"
            )
        frames = {
            k: FrameStore(k, depth, *layout.obs[k], self._size, self._frame_ratio)
            for k, depth in self._frame_stack.items()
        }
        self._layout, self._frames = layout, frames
        plain = {k: field for k, field in layout.obs.items() if k not in frames}
        self._obs = {k: self._zeros(field) for k, field in plain.items()}
        self._next_obs = {k: self._zeros(field) for k, field in plain.items()}
        self._action = self._zeros(layout.action)
        self._reward = np.zeros(self._size, dtype=np.float32)
        self._done = np.zeros(self._size, dtype=np.float32)
        self._discount = np.zeros(self._size, dtype=np.float32)
        self._env_index = np.full(self._size, -1, dtype=np.int16)
        if self._verbose:
            print(self._memory_message())

    @property
    def verbose(self) -> bool:
        """Whether allocation prints the memory footprint (the loop turns it off when its
        ``verbosity`` is 0)."""
        return self._verbose

    @verbose.setter
    def verbose(self, value: bool) -> None:
        self._verbose = bool(value)

    def _zeros(self, field: _Field) -> np.ndarray:
        return np.zeros((self._size, *field[0]), dtype=field[1])

    def _memory_message(self) -> str:
        mib = self.storage_bytes / 2**20
        msg = f"ReplayBuffer: {self._size:,} transitions x {self.bytes_per_transition:,} B"
        msg += f" = {mib:.1f} MiB"
        if self._frames:
            full = self._size * self._layout.bytes_per_transition()
            per = ", ".join(
                f"{k!r} {r:.2f} frames/transition" for k, r in self.frames_per_transition.items()
            )
            msg += f" (frame-deduplicated: {per}; {full / 2**20:.1f} MiB without)"
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
        env_index: np.ndarray | None = None,
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
        :param env_index: ``(B,)`` index of the env each transition came from (the loop's
            collector records it for one-step transitions, so the replay of a run with parallel
            envs can be read back as episodes); ``None``: unknown (-1).
        :return: the slots written (for indices kept beside the buffer, such as
            :class:`~super_sac.replay.AdvantageIndex`).
        """
        action = np.asarray(action)
        obs = {k: np.asarray(v) for k, v in obs.items()}
        next_obs = {k: np.asarray(v) for k, v in next_obs.items()}
        if action.ndim == 0:
            raise ValueError("action must have a leading batch dimension")
        if self._layout is None:
            self._allocate_layout(_layout_from_arrays(obs, action))
        batch = action.shape[0]
        self._layout.check_obs("obs", obs, batch)
        self._layout.check_obs("next_obs", next_obs, batch)
        self._layout.check_action(action, batch)
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
        if self._frames:
            self._write_frames(
                slots,
                {k: obs[k][keep] for k in self._frames},
                {k: next_obs[k][keep] for k in self._frames},
                ring,
            )
        self._action[slots] = action[keep]
        for store, column in zip((self._reward, self._done, self._discount), columns):
            store[slots] = column[keep]
        if env_index is None:
            self._env_index[slots] = -1
        else:
            self._env_index[slots] = np.broadcast_to(np.asarray(env_index), (batch,))[keep]
        if self._prioritized:
            self._set_tree_values(slots, np.full(slots.shape, self._max_priority**self._alpha))
        self._ptr = self._protected + (self._ptr - self._protected + batch) % ring
        self._len = min(self._len + batch, self._size)
        return slots

    def _write_frames(
        self,
        slots: np.ndarray,
        obs: dict[str, np.ndarray],
        next_obs: dict[str, np.ndarray],
        ring: int,
    ) -> None:
        """Store the stacks of deduplicated keys row by row, oldest row first."""
        # frames are matched in the stored dtype (a float64 push of float32 frames still matches)
        obs = {k: np.asarray(v, dtype=self._frames[k].frames.dtype) for k, v in obs.items()}
        next_obs = {
            k: np.asarray(v, dtype=self._frames[k].frames.dtype) for k, v in next_obs.items()
        }
        live = self._len - self._protected  # ring transitions stored before this push
        for row, slot in enumerate(slots.tolist()):
            live = min(live + 1, ring)
            if live == ring:  # full: the slot after this one holds the oldest transition
                oldest = self._protected + (slot - self._protected + 1) % ring
            else:
                oldest = self._protected
            for key, store in self._frames.items():
                store.write_row(slot, obs[key][row], next_obs[key][row], oldest)

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
            obs={k: to_torch(self._obs_rows(k, idxs, "obs")) for k in self._layout.obs},
            action=to_torch(self._action[idxs]),
            reward=to_torch(self._reward[idxs][:, None]),
            next_obs={k: to_torch(self._obs_rows(k, idxs, "next_obs")) for k in self._layout.obs},
            done=to_torch(self._done[idxs][:, None]),
            discount=to_torch(self._discount[idxs][:, None]),
            weights=to_torch(weights[:, None]),
            idxs=idxs,
        )

    def _obs_rows(self, key: str, idxs: np.ndarray, which: str) -> np.ndarray:
        """Observation rows of slots ``idxs``; ``which`` is ``"obs"`` or ``"next_obs"``."""
        store = self._frames.get(key)
        if store is not None:
            return store.gather(idxs, which)
        return (self._obs if which == "obs" else self._next_obs)[key][idxs]

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
