"""Replay storage for off-policy agents.

The package is split by job; everything public is importable from ``super_sac.replay``:

* :mod:`~super_sac.replay.segment_tree`: :class:`SumTree` / :class:`MinTree`, array-backed
  segment trees for proportional prioritized sampling.
* :mod:`~super_sac.replay.buffer`: :class:`Batch`, the tensors handed to the learner, and
  :class:`ReplayBuffer`, a ring buffer of dict-observation transitions with optional
  proportional prioritization (Schaul et al., 2016, https://arxiv.org/abs/1511.05952).
* :mod:`~super_sac.replay.layout`: the buffer's per-transition shapes and dtypes and the
  checks that pushed batches fit them.
* :mod:`~super_sac.replay.frames`: :class:`~super_sac.replay.frames.FrameStore`, the
  frame-deduplicated storage of frame-stacked observation keys (``ReplayBuffer(frame_stack=...)``):
  each frame stored once, stacks rebuilt at sample time.
* :mod:`~super_sac.replay.persistence`: the buffer's ``.npz`` file (``save`` / ``load``).
* :mod:`~super_sac.replay.offline`: filling the buffer from an offline dataset
  (``load_dataset``).
* :mod:`~super_sac.replay.episodes`: :func:`replay_episodes`, a saved buffer read back as the
  episodes of the run that filled it (a "replay" dataset such as D4RL's medium-replay; for a
  checkpoint folder, checked against the run's counters, see
  :func:`super_sac.checkpoint.checkpoint_episodes`).
* :mod:`~super_sac.replay.advantage_index`: :class:`AdvantageIndex`, the AFBC actor-sampling
  index kept beside a buffer.
* :mod:`~super_sac.replay.nstep`: :class:`NStepQueue`, which folds per-step transitions of
  vectorized envs into n-step transitions.

``ReplayBuffer`` is registered with gin as ``super_sac.replay.ReplayBuffer``, so bindings such
as ``ReplayBuffer.size = ...`` and ``replay.ReplayBuffer.size = ...`` both work.
"""

from super_sac.replay.advantage_index import AdvantageIndex
from super_sac.replay.buffer import Batch, ReplayBuffer
from super_sac.replay.episodes import replay_episodes
from super_sac.replay.nstep import NStepQueue
from super_sac.replay.segment_tree import MinTree, SumTree

__all__ = [
    "AdvantageIndex",
    "Batch",
    "MinTree",
    "NStepQueue",
    "ReplayBuffer",
    "SumTree",
    "replay_episodes",
]
