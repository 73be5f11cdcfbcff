"""Putting an offline dataset (a Minari id or a ``.npz`` file) into a replay buffer.

:class:`_OfflineDataMixin` gives :class:`~super_sac.replay.ReplayBuffer` its ``load_dataset``
method. Reading, converting and validating the dataset is :mod:`super_sac.datasets`' job; this
module only stores the result, through the buffer's public methods. The dependency runs one
way: :mod:`super_sac.datasets` never imports the replay package.
"""

from __future__ import annotations

import os
from typing import TypeVar

import gymnasium
import numpy as np

from super_sac.datasets import load_transitions

_Buffer = TypeVar("_Buffer", bound="_OfflineDataMixin")


class _OfflineDataMixin:
    """``load_dataset`` for :class:`~super_sac.replay.ReplayBuffer`; it uses only the buffer's
    public ``__len__``, ``size``, ``allocate``, ``push`` and ``protect``."""

    def load_dataset(
        self: _Buffer,
        source: str | os.PathLike,
        env: gymnasium.Env,
        *,
        gamma: float,
        datasets_path: str | os.PathLike | None = None,
        protect: bool = True,
    ) -> _Buffer:
        """Append an offline dataset (a Minari id or a ``.npz`` path), validated against ``env``.

        Observations become the env's dict observations and Box actions are rescaled to
        ``[-1, 1]`` (see :mod:`super_sac.datasets`); every transition is a one-step transition
        with ``discount = gamma`` and ``done = terminated`` (truncated transitions keep
        bootstrapping from their true final observation).

        Mixed offline + online buffers: with ``protect=True`` (the default) the dataset's slots
        are protected (:meth:`~super_sac.replay.ReplayBuffer.protect`), so online fine-tuning
        fills the remaining ``size - len`` slots as a ring and never overwrites the offline
        data. With
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
        data, _ = load_transitions(source, env, datasets_path)
        if len(self) + len(data) > self.size:
            raise ValueError(
                f"the dataset's {len(data)} transitions do not fit in the ReplayBuffer "
                f"(size {self.size}, {len(self)} stored). Fix: ReplayBuffer.size >= "
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
