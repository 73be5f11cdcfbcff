"""The episodes of a saved replay buffer (D4RL's "replay" datasets).

A replay buffer file (:meth:`super_sac.replay.ReplayBuffer.save`, the ``buffer.npz`` of a
checkpoint) holds every transition an online run pushed, oldest first while the ring has not
wrapped. :func:`replay_episodes` turns it back into the episodes the agent collected, so the
whole replay of a training run can be written as a dataset (D4RL's "medium-replay": every
transition seen while training up to the medium policy; Fu et al. 2020, "D4RL: Datasets for Deep
Data-Driven Reinforcement Learning", arXiv:2004.07219).

The buffer stores no episode boundaries of its own: ``done`` is 1 only where the loop learned a
termination, and a time-limit truncation bootstraps like any other step. Boundaries are therefore
read from the observations: transition ``i`` ends its episode when it terminated or when its
``next_obs`` is not the next transition's ``obs`` (the env was reset in between). Where an
episode ended without a termination it is marked truncated; the run's last, unfinished episode is
marked truncated too (cut, as :func:`super_sac.datasets.record_episodes` marks its last one).
This reading needs each env's transitions in push order (``n_step = 1``): the loop's collector
records which env each transition came from, so the interleaved rows of parallel envs are
grouped by env first (buffers of earlier versions, without that record, are read as one env);
:func:`super_sac.checkpoint.checkpoint_episodes` reads a checkpoint's buffer this way and checks
the episodes found against the run's own counters.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from gymnasium import spaces

from super_sac.datasets import DatasetError, Episode
from super_sac.datasets.core import _denormalize_actions
from super_sac.replay.layout import _Layout, _layout_from_spaces
from super_sac.replay.persistence import _npz_path, _saved_stacks


def replay_episodes(
    buffer_file: str | os.PathLike,
    action_space: spaces.Space,
    flat_key: str | None = "obs",
    observation_space: spaces.Space | None = None,
) -> list[Episode]:
    """Read a saved replay buffer as the episodes that filled it, oldest first.

    :param buffer_file: a file written by :meth:`super_sac.replay.ReplayBuffer.save`.
    :param action_space: the raw env's action space; Box actions are stored in ``[-1, 1]`` and
        come back in the env's units, ``a_env = low + (a + 1) (high - low) / 2``.
    :param flat_key: when the buffer's only observation key is this one (a ``Box`` env wrapped
        by :class:`super_sac.wrappers.SimpleGymWrapper`), episodes hold the bare array, as the
        raw env returns it; ``None`` keeps the dict.
    :param observation_space: the (wrapped, dict) observation space of the env the dataset is
        meant for; when given, the buffer's observation keys, shapes and dtypes and its action
        shape must be those this space and ``action_space`` give a new buffer.
    :return: the episodes; ``terminations`` where the buffer's ``done`` is set, ``truncations``
        at every other episode end and on the last transition when it ends no episode.
    :raises DatasetError: when the file cannot give the run's transitions in order: it protects
        offline data, its ring has wrapped (the oldest transitions are gone), or it holds n-step
        transitions (their rewards are sums over several steps), or its layout is not the
        env's (``observation_space`` given).
    """
    return read_replay(buffer_file, action_space, flat_key, observation_space)[0]


def read_replay(
    buffer_file: str | os.PathLike,
    action_space: spaces.Space,
    flat_key: str | None = "obs",
    observation_space: spaces.Space | None = None,
) -> tuple[list[Episode], int]:
    """:func:`replay_episodes` and the number of envs whose rows the buffer holds (what
    :func:`super_sac.checkpoint.checkpoint_episodes` checks the run's counters with)."""
    path = _npz_path(buffer_file)
    with np.load(path, allow_pickle=False) as data:
        layout = _Layout.from_json(str(data["layout"]))
        if observation_space is not None:
            _check_env_layout(path, layout, observation_space, action_space)
        length, size = int(data["length"]), int(data["size"])
        _check_plain_replay(path, data, length, size)
        keys = list(layout.obs)
        obs = {k: _saved_stacks(data, i, "obs", layout.obs[k]) for i, k in enumerate(keys)}
        nxt = {k: _saved_stacks(data, i, "next_obs", layout.obs[k]) for i, k in enumerate(keys)}
        action = np.asarray(data["action"])
        reward = np.asarray(data["reward"], np.float64)
        terminated = np.asarray(data["done"]) > 0.5
        env_index = np.asarray(data["env_index"]) if "env_index" in data else None
    envs = _env_count(env_index)
    order = _env_order(path, env_index, envs)
    if order is not None:  # parallel envs: each env's rows together, in push order
        obs, nxt = ({k: v[order] for k, v in d.items()} for d in (obs, nxt))
        action, reward, terminated = action[order], reward[order], terminated[order]
        env_index = env_index[order]
    ends = terminated | _resets(obs, nxt)
    ends[-1] = True
    if order is not None:
        ends[:-1] |= env_index[:-1] != env_index[1:]  # each env's last row ends its episode
    if isinstance(action_space, spaces.Box):
        action = _denormalize_actions(action, action_space.low, action_space.high)
        action = action.astype(action_space.dtype)
    bare = flat_key is not None and keys == [flat_key]
    episodes = []
    start = 0
    firsts = []  # each episode's first row in push order, to sort the episodes by
    for end in np.flatnonzero(ends).tolist():
        rows = slice(start, end + 1)
        firsts.append(int(order[start]) if order is not None else start)
        observations = {k: np.concatenate([obs[k][rows], nxt[k][end : end + 1]]) for k in keys}
        episodes.append(
            Episode(
                observations=observations[flat_key] if bare else observations,
                actions=action[rows],
                rewards=reward[rows],
                terminations=terminated[rows],
                truncations=ends[rows] & ~terminated[rows],
            )
        )
        start = end + 1
    return [episodes[i] for i in np.argsort(firsts, kind="stable")], envs


def _env_count(env_index: np.ndarray | None) -> int:
    """The envs whose rows the buffer holds: its distinct recorded env indices, at least 1
    (rows of a file written before the env was recorded, -1, belong to the one env of such a
    run, also when a resumed run added recorded rows)."""
    if env_index is None:
        return 1
    return max(1, len(np.unique(env_index[env_index >= 0])))


def _env_order(path: str, env_index: np.ndarray | None, envs: int) -> np.ndarray | None:
    """The rows grouped by env (stable, so each env's rows keep their push order), or ``None``
    when the buffer holds one env's rows (files of earlier versions, which did not record the
    env, count as one env, also when a resumed run added recorded rows)."""
    if envs <= 1:
        return None
    if (env_index < 0).any():
        raise DatasetError(
            f"{path}: some transitions record the env they came from and some do not (the "
            "buffer mixes pushes of the loop's collector with others, or n-step transitions), "
            "so its episodes cannot be told apart. Fix: export the replay of a run whose "
            "buffer only the loop filled, with super_sac.n_step = 1"
        )
    return np.argsort(env_index, kind="stable")


def _check_env_layout(
    path: str, layout: _Layout, observation_space: spaces.Space, action_space: spaces.Space
) -> None:
    """Refuse a buffer whose transitions do not fit the env the dataset is recorded for."""
    diffs = layout.differences(_layout_from_spaces(observation_space, action_space))
    if diffs:
        raise DatasetError(
            f"{path}: the buffer's transitions do not fit this env (buffer != env: "
            f"{'; '.join(diffs)}). Fix: give the recorder the env options of the training run "
            "(the same env or task, image size, frame stack, action repeat, states or pixels)"
        )


def _resets(obs: dict[str, np.ndarray], nxt: dict[str, np.ndarray]) -> np.ndarray:
    """``(N,)`` bool: transition ``i`` is followed by a reset (its ``next_obs`` differs from
    transition ``i + 1``'s ``obs`` in some key); the last entry is False."""
    n = len(next(iter(obs.values())))
    out = np.zeros(n, dtype=bool)
    if n < 2:
        return out
    for key in obs:
        a, b = nxt[key][:-1].reshape(n - 1, -1), obs[key][1:].reshape(n - 1, -1)
        out[:-1] |= (a != b).any(axis=1)
    return out


def _check_plain_replay(path: str, data: np.lib.npyio.NpzFile, length: int, size: int) -> None:
    """Refuse buffers whose rows are not the run's one-step transitions in push order."""
    name = Path(path).name
    if length == 0:
        raise DatasetError(f"{path}: the replay buffer is empty")
    if int(data["protected"]) > 0:
        raise DatasetError(
            f"{path}: the buffer protects {int(data['protected'])} offline transitions, so it "
            "is not the replay of an online run. Fix: export the replay of a run that started "
            "without a dataset"
        )
    if length == size:
        raise DatasetError(
            f"{path}: the buffer is full ({size} transitions), so its ring may have overwritten "
            "the run's oldest transitions. Fix: train with ReplayBuffer.size larger than the "
            f"run's env steps, then export {name} again"
        )
    discounts = np.unique(np.asarray(data["discount"]))
    if len(discounts) > 1:
        raise DatasetError(
            f"{path}: the stored discounts take {len(discounts)} values "
            f"({discounts[:4].tolist()} ...), so the buffer holds n-step transitions whose "
            "rewards sum several steps. Fix: train with super_sac.n_step = 1"
        )
