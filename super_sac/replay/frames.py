"""Frame-deduplicated storage of stacked observations.

A frame-stacked observation (``FrameStackObservation`` output such as ``(4, 84, 84)``, or a
``(9, 84, 84)`` stack of three RGB frames) repeats every frame in ``k`` consecutive stacks, and
a transition holds two stacks, so plain storage keeps each frame ``2 k`` times.
:class:`FrameStore` keeps every distinct recent frame once and gives each transition slot the
frame slots of its ``obs`` and ``next_obs`` stacks; stacks are rebuilt at sample time with one
fancy-indexing gather.

How frames are matched. A pushed stack is cut along axis 0 into ``k`` frames of
``shape[0] // k`` channels each. Every frame is looked up by content (a 64-bit multiply-add
fingerprint computed for all frames of a row at once, confirmed by an exact comparison with the
stored frame, so a fingerprint collision can only cost a duplicate, never a wrong stack)
among the frames written in the last
``window`` frame writes; a hit reuses that slot, a miss writes the frame into the next slot of
the frame ring. Matching by content rather than by env or episode makes the stored stacks equal
the pushed ones bit for bit whatever produced them: the repeated reset frame or zero padding
of an episode's first stacks, n-step transitions whose ``next_obs`` is several steps later,
several envs writing interleaved, datasets and users calling ``push`` directly. For a stream
of ``L``-step episodes it stores ``1 + 1/L`` frames per transition (the reset frame is the only
frame that is never some transition's newest ``next_obs`` frame).

Invariants and the frame-ring bound. Frames get serial numbers ``0, 1, 2, ...`` in write order;
serial ``s`` lives in slot ``s`` while ``s < protected`` (frames of protected offline data, kept
forever) and otherwise in ``protected + (s - protected) % ring`` with
``ring = capacity - protected``. A transition pushed when ``count`` frames had been written
references only frames of serial ``>= count - window`` (older matches are not reused; the frame
is written again). Hence a frame of serial ``s`` is referenced only by transitions whose
``push_count <= s + window``, and overwriting it is safe once the oldest live transition of the
transition ring has ``push_count > s + window``. :meth:`FrameStore.write_row` checks exactly this
before every frame write and raises instead of letting an overwritten frame leak into a stack.
The store holds ``capacity = ceil(frame_ratio * size) + window + 2 k`` frames, so the check can only
fail when the data need more than ``frame_ratio`` new frames per transition over a whole
buffer's worth of transitions (episodes shorter than about ``1 / (frame_ratio - 1)`` steps on
average); the error says to raise ``ReplayBuffer.frame_ratio``.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

__all__ = ["FrameStore", "default_window"]


def default_window(size: int) -> int:
    """Frames back that a match may reach: ``size / 32`` clipped to ``[256, 2048]``.

    With ``E`` envs writing interleaved, a frame comes back about ``E (k + n - 2)`` frame writes
    later (stack ``k``, n-step ``n``), so the lower bound keeps matches for about 50 envs with
    ``k = 4, n = 3``; the window's frames are extra slots of the ring (at most 2,048 frames)."""
    return int(min(2048, max(256, size // 32)))


class FrameStore:
    """Deduplicated frames of one stacked observation key (see the module docstring).

    :param key: observation key (for messages).
    :param stack: frames per stack ``k``; the stack's first axis must be a multiple of it.
    :param shape: per-transition observation shape, the stack axis first.
    :param dtype: stored numpy dtype.
    :param size: transition capacity of the buffer.
    :param frame_ratio: frame slots per transition slot (besides ``window``).
    :param window: see the module docstring (default :func:`default_window`).
    """

    def __init__(
        self,
        key: str,
        stack: int,
        shape: tuple[int, ...],
        dtype: str,
        size: int,
        frame_ratio: float,
        window: int | None = None,
    ) -> None:
        stack = int(stack)
        if stack < 1:
            raise ValueError(f"frame_stack[{key!r}] must be >= 1, got {stack}")
        if len(shape) < 1 or shape[0] % stack:
            raise ValueError(
                f"frame_stack[{key!r}] = {stack}: the observation's first axis ({shape}) is not "
                "a multiple of the stack depth (frames are stacked along axis 0)"
            )
        if not frame_ratio >= 1.0:
            raise ValueError(f"frame_ratio must be >= 1, got {frame_ratio}")
        self.key, self.stack, self.size = key, stack, int(size)
        self.channels = shape[0] // stack
        self.shape = tuple(shape)
        self.frame_shape = (self.channels, *shape[1:])
        self.window = default_window(self.size) if window is None else int(window)
        self.capacity = math.ceil(frame_ratio * self.size) + self.window + 2 * stack
        self.frames = np.zeros((self.capacity, *self.frame_shape), dtype=dtype)
        self.obs_idx = np.zeros((self.size, stack), dtype=np.int32)
        self.next_idx = np.zeros((self.size, stack), dtype=np.int32)
        self.push_count = np.zeros(self.size, dtype=np.int64)
        self.count = 0  # frames written so far (the next frame's serial)
        self.protected = 0  # leading frames never overwritten
        self._lookup: dict[int, int] = {}  # fingerprint -> serial, frames of the last `window`
        self._recent: deque[tuple[int, int]] = deque()
        words = -(-self.frames[0].nbytes // 8)
        # fixed odd multipliers: fingerprints are the same in every process (files, resume)
        mult = np.random.default_rng(20_140_614).integers(0, 2**63, words, dtype=np.uint64)
        self._mult = mult * np.uint64(2) + np.uint64(1)

    # ------------------------------------------------------------------ sizes
    @property
    def nbytes(self) -> int:
        """Bytes of the frame ring and the per-transition index arrays."""
        return (
            self.frames.nbytes
            + self.obs_idx.nbytes
            + self.next_idx.nbytes
            + (self.push_count.nbytes)
        )

    @property
    def frame_bytes(self) -> int:
        return self.frames[0].nbytes

    # ------------------------------------------------------------------ serials and slots
    def slot_of(self, serial: int) -> int:
        if serial < self.protected:
            return serial
        return self.protected + (serial - self.protected) % (self.capacity - self.protected)

    def protect(self) -> None:
        """Keep every frame written so far (the frames of protected offline transitions)."""
        if self.count > self.capacity:
            raise ValueError("protect() must be called before the frame ring wraps around")
        if self.capacity - self.count <= self.window + 2 * self.stack:
            raise ValueError(
                f"the protected data fill the frame store of {self.key!r} ({self.count} of "
                f"{self.capacity} frames); raise ReplayBuffer.size or frame_ratio"
            )
        self.protected = self.count

    # ------------------------------------------------------------------ writing
    def _fingerprints(self, frames: np.ndarray) -> list[int]:
        """64-bit fingerprints of ``frames`` (``(m, *frame_shape)``), wrapping arithmetic."""
        raw = np.ascontiguousarray(frames).reshape(len(frames), -1).view(np.uint8)
        pad = len(self._mult) * 8 - raw.shape[1]
        if pad:
            raw = np.concatenate([raw, np.zeros((len(raw), pad), np.uint8)], axis=1)
        return (raw.view(np.uint64) * self._mult).sum(axis=1, dtype=np.uint64).tolist()

    def _forget_old(self) -> None:
        oldest = self.count - self.window
        while self._recent and self._recent[0][0] < oldest:
            serial, digest = self._recent.popleft()
            if self._lookup.get(digest) == serial:
                del self._lookup[digest]

    def _frame_slot(self, frame: np.ndarray, digest: int, oldest_live_push: int) -> int:
        """The slot of ``frame`` (fingerprint ``digest``): a recent equal frame's, or a newly
        written one's."""
        self._forget_old()
        serial = self._lookup.get(digest)
        if serial is not None:
            slot = self.slot_of(serial)
            if self.frames[slot].tobytes() == frame.tobytes():
                return slot
        ring = self.capacity - self.protected
        old = self.count - ring  # serial of the frame this write replaces (if any)
        if old >= self.protected and old + self.window >= oldest_live_push:
            raise RuntimeError(
                f"ReplayBuffer frame store of {self.key!r} is full: its {self.capacity:,} frames "
                f"are all still used by stored transitions (more than about frame_ratio new "
                "frames per transition: very short episodes, or so many parallel envs that a "
                f"frame comes back more than {self.window} frame writes later). Fix: raise "
                "ReplayBuffer.frame_ratio (frame slots per transition slot), use fewer envs, "
                "check that the declared stack axis is the first one (channels-first), or leave "
                f"{self.key!r} out of frame_stack if consecutive observations do not share "
                "k - 1 frames (it is not a frame stack)"
            )
        slot = self.slot_of(self.count)
        self.frames[slot] = frame
        self._lookup[digest] = self.count
        self._recent.append((self.count, digest))
        self.count += 1
        return slot

    def write_row(
        self, slot: int, obs: np.ndarray, next_obs: np.ndarray, oldest_live: int | None
    ) -> None:
        """Store one transition's two stacks in transition slot ``slot``.

        :param oldest_live: the transition slot that will be the oldest live one of the ring
            once ``slot`` holds this transition (``slot`` itself is allowed); ``None`` when
            only protected transitions remain.
        """
        self.push_count[slot] = self.count
        live_push = self.push_count[oldest_live] if oldest_live is not None else self.count
        both = np.stack([obs, next_obs]).reshape(2 * self.stack, *self.frame_shape)
        digests = self._fingerprints(both)
        for i in range(self.stack):
            self.obs_idx[slot, i] = self._frame_slot(both[i], digests[i], live_push)
        for i in range(self.stack):
            j = self.stack + i
            self.next_idx[slot, i] = self._frame_slot(both[j], digests[j], live_push)

    # ------------------------------------------------------------------ reading
    def gather(self, idx: np.ndarray, which: str) -> np.ndarray:
        """Stacks of transition slots ``idx``: ``which`` is ``"obs"`` or ``"next_obs"``."""
        table = self.obs_idx if which == "obs" else self.next_idx
        out = self.frames[table[idx]]  # (B, k, c, ...)
        return out.reshape(len(idx), *self.shape)

    # ------------------------------------------------------------------ files
    def state_arrays(self, length: int) -> dict[str, np.ndarray]:
        """What :mod:`~super_sac.replay.persistence` writes (frames in use and the first
        ``length`` index rows)."""
        used = min(self.count, self.capacity)
        return {
            "frames": self.frames[:used],
            "obs_idx": self.obs_idx[:length],
            "next_idx": self.next_idx[:length],
            "push_count": self.push_count[:length],
            "meta": np.array(
                [self.stack, self.capacity, self.window, self.count, self.protected],
                dtype=np.int64,
            ),
        }

    def matches(self, meta: np.ndarray) -> bool:
        """Whether a saved store of this ``meta`` can be restored slot for slot."""
        stack, capacity, window = (int(v) for v in meta[:3])
        return (stack, capacity, window) == (self.stack, self.capacity, self.window)

    def restore(self, arrays: dict[str, np.ndarray]) -> None:
        """Inverse of :meth:`state_arrays` for a store that :meth:`matches`."""
        frames = arrays["frames"]
        self.frames[: len(frames)] = frames
        n = len(arrays["obs_idx"])
        self.obs_idx[:n] = arrays["obs_idx"]
        self.next_idx[:n] = arrays["next_idx"]
        self.push_count[:n] = arrays["push_count"]
        self.count, self.protected = (int(v) for v in arrays["meta"][3:5])
        self._rebuild_lookup()

    def _rebuild_lookup(self) -> None:
        """The lookup of the last ``window`` frames, as writing them built it."""
        self._lookup, self._recent = {}, deque()
        serials = list(range(max(0, self.count - self.window), self.count))
        if not serials:
            return
        digests = self._fingerprints(self.frames[[self.slot_of(s) for s in serials]])
        for serial, digest in zip(serials, digests):
            self._lookup[digest] = serial
            self._recent.append((serial, digest))

    def reset(self) -> None:
        """Forget every frame (before refilling from a file)."""
        self.count = self.protected = 0
        self._lookup, self._recent = {}, deque()
