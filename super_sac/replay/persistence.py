"""Saving a replay buffer to one ``.npz`` file and loading it back.

The file is an uncompressed numpy archive without pickles. It holds:

* ``layout``: the storage layout as JSON (:meth:`super_sac.replay.layout._Layout.to_json`);
* ``size``, ``length``, ``ptr``, ``protected``: capacity, number stored, ring pointer and
  number of protected leading slots (int64 scalars);
* ``alpha``, ``max_priority``: the priority exponent and the largest raw priority seen
  (float64 scalars);
* ``action``, ``reward``, ``done``, ``discount``, ``env_index`` (the env each transition came
  from, -1 if unknown; absent from files of earlier versions): the first ``length`` slots;
* ``obs_<i>``, ``next_obs_<i>``: the first ``length`` slots of the ``i``-th observation key,
  in layout order, for keys stored whole;
* for frame-deduplicated keys (:mod:`super_sac.replay.frames`) instead: ``frames_<i>`` (the
  frame slots in use), ``obs_idx_<i>``, ``next_idx_<i>`` (frame slots of the stacks of the
  first ``length`` slots), ``push_count_<i>`` and ``frame_meta_<i>`` (stack depth, frame
  capacity, match window, frames written, protected frames);
* ``priorities``: stored tree values ``(p + priority_eps) ** alpha`` of the first ``length``
  slots (prioritized buffers only).

:class:`_PersistenceMixin` gives :class:`~super_sac.replay.ReplayBuffer` its ``save``,
``load`` and ``from_file`` methods.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

import numpy as np

from super_sac.replay.layout import _Layout
from super_sac.replay.segment_tree import MinTree, SumTree

_Buffer = TypeVar("_Buffer", bound="_PersistenceMixin")


def _npz_path(path: str | os.PathLike) -> str:
    path = os.fspath(path)
    return path if path.endswith(".npz") else path + ".npz"


class _PersistenceMixin:
    """``save`` / ``load`` / ``from_file`` for :class:`~super_sac.replay.ReplayBuffer`.

    The methods read and write the buffer's storage directly: the layout and its arrays
    (``_layout``, ``_obs``, ``_next_obs``, ``_action``, ``_reward``, ``_done``, ``_discount``,
    ``_env_index``),
    the ring state (``_size``, ``_ptr``, ``_len``, ``_protected``) and the priority state
    (``_prioritized``, ``_alpha``, ``_max_priority``, ``_sum_tree``, ``_min_tree``), and they
    call the buffer's ``_allocate_layout`` and ``_set_tree_values``.
    """

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
            "env_index": self._env_index[:n],
        }
        for i, key in enumerate(self._layout.obs):
            if key in self._frames:
                for name, value in self._frames[key].state_arrays(n).items():
                    name = "frame_meta" if name == "meta" else name
                    arrays[f"{name}_{i}"] = value
            else:
                arrays[f"obs_{i}"] = self._obs[key][:n]
                arrays[f"next_obs_{i}"] = self._next_obs[key][:n]
        if self._prioritized:
            arrays["priorities"] = self._sum_tree.values(np.arange(n))
        return arrays

    def load(self: _Buffer, path: str | os.PathLike) -> _Buffer:
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
            self._fill_frames(data, slots, saved_size)
            self._ptr, self._len = ptr, length
            if self._prioritized:
                self._restore_priorities(data, slots, length)
        return self

    def _fill_from(self, data: Any, slots: np.ndarray) -> None:
        """Copy saved rows into ``slots`` (row ``i`` -> slot ``slots[i]``); later slots are stale
        but unreachable because sampling is bounded by ``len``."""
        for i, key in enumerate(self._layout.obs):
            if key in self._obs:
                self._obs[key][slots] = _saved_stacks(data, i, "obs", self._layout.obs[key])
                self._next_obs[key][slots] = _saved_stacks(
                    data, i, "next_obs", self._layout.obs[key]
                )
        for name in ("action", "reward", "done", "discount"):
            getattr(self, f"_{name}")[slots] = data[name]
        # files written before the env index was stored: unknown (-1)
        self._env_index[slots] = data["env_index"] if "env_index" in data else -1

    def _fill_frames(self, data: Any, slots: np.ndarray, saved_size: int) -> None:
        """Fill the frame stores of deduplicated keys: slot for slot from a file of the same
        size and frame store, otherwise by storing the saved stacks again, oldest first."""
        length, keys = len(slots), list(self._layout.obs)
        protected = self._protected
        for key, store in self._frames.items():
            i = keys.index(key)
            same = saved_size == self._size and f"frame_meta_{i}" in data
            if same and store.matches(data[f"frame_meta_{i}"]):
                names = ("frames", "obs_idx", "next_idx", "push_count")
                arrays = {name: data[f"{name}_{i}"] for name in names}
                store.restore({**arrays, "meta": data[f"frame_meta_{i}"]})
                continue
            store.reset()
            obs = _SavedRows(data, i, "obs", self._layout.obs[key])
            next_obs = _SavedRows(data, i, "next_obs", self._layout.obs[key])
            if length == saved_size and saved_size > protected:  # the ring had wrapped
                ring = saved_size - protected
                start = int(data["ptr"]) - protected
                ring_rows = protected + (start + np.arange(ring)) % ring
            else:
                ring_rows = np.arange(protected, length)
            for row in range(protected):
                store.write_row(int(slots[row]), obs[row], next_obs[row], None)
            if protected:
                store.protect()
            if len(ring_rows):
                first = int(slots[ring_rows[0]])
            for row in ring_rows.tolist():
                store.write_row(int(slots[row]), obs[row], next_obs[row], first)

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

    @classmethod
    def from_file(cls: type[_Buffer], path: str | os.PathLike, **kwargs: Any) -> _Buffer:
        """Build a buffer sized like the saved one (unless ``size`` is given) and load it.

        :param path: file written by :meth:`save`.
        :param kwargs: other constructor arguments.
        """
        if "size" not in kwargs:
            with np.load(_npz_path(path), allow_pickle=False) as data:
                kwargs["size"] = int(data["size"])
        return cls(**kwargs).load(path)


def _saved_stacks(data: Any, i: int, which: str, field: Any) -> np.ndarray:
    """All saved rows of observation key ``i`` (``which``: ``"obs"`` or ``"next_obs"``),
    rebuilt from the frames if the file stored the key deduplicated."""
    if f"{which}_{i}" in data:
        return data[f"{which}_{i}"]
    table = data[f"{'obs_idx' if which == 'obs' else 'next_idx'}_{i}"]
    return data[f"frames_{i}"][table].reshape(len(table), *field[0])


class _SavedRows:
    """Row access to one saved observation key, whole or rebuilt from its frames."""

    def __init__(self, data: Any, i: int, which: str, field: Any) -> None:
        self.shape = tuple(field[0])
        if f"{which}_{i}" in data:
            self.whole, self.frames, self.table = data[f"{which}_{i}"], None, None
        else:
            self.whole = None
            self.frames = data[f"frames_{i}"]
            self.table = data[f"{'obs_idx' if which == 'obs' else 'next_idx'}_{i}"]

    def __getitem__(self, row: int) -> np.ndarray:
        if self.whole is not None:
            return self.whole[row]
        return self.frames[self.table[row]].reshape(self.shape)
