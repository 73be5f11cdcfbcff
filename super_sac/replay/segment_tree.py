"""Array-backed segment trees for proportional prioritized sampling.

:class:`SumTree` answers "which leaf holds prefix sum ``s``" in ``O(log n)`` and
:class:`MinTree` keeps the smallest leaf; both update many leaves at once with vectorized
numpy, looping only over the tree's depth.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["MinTree", "SumTree"]


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
