"""The AFBC actor-sampling index: a priority per replay slot, drawn from proportionally.

:class:`AdvantageIndex` sits beside a :class:`~super_sac.replay.ReplayBuffer` and samples its
slots by their latest advantage-filter weight, while the critics keep sampling the buffer
uniformly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from super_sac.replay.buffer import Batch, ReplayBuffer
from super_sac.replay.segment_tree import SumTree

__all__ = ["AdvantageIndex"]


class AdvantageIndex:
    """A second, advantage-based sampling index over a :class:`ReplayBuffer`'s slots.

    The AFBC trick (Grigsby & Qi 2021, arXiv:2110.04698; ``super_sac.afbc_per``): actor
    batches are drawn with probability ``P(i) = p_i / sum_j p_j`` where ``p_i`` is slot ``i``'s
    latest advantage priority ``(max(A, 0) + 1e-4)^0.6``
    (:func:`super_sac.adv_estimator.advantage_priorities`), so actor batches fill with the
    transitions the filter keeps; the critics keep sampling the buffer itself. Slots not yet
    scored (new data) get the largest priority seen. :meth:`sample` also returns each sample's
    importance weight ``1 / (N P(i))`` (``N`` stored transitions), which would restore the
    uniform objective, ``E_P[x_i / (N P(i))] = (1/N) sum_i x_i``; the training loop does not
    apply it, following the paper and the original super_sac.

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
