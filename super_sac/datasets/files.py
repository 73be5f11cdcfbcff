"""Dataset files: ``.npz`` and Minari folders, and :func:`load_transitions` which resolves a
source, converts it and validates it against the env."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from super_sac.datasets.core import (
    _NPZ_KEYS,
    DatasetError,
    Episode,
    Transitions,
    _denormalize_actions,
    _normalize_actions,
    _obs_dict,
    check_float_actions,
    episodes_to_transitions,
    validate_transitions,
)
from super_sac.datasets.recording import raw_action_space


def save_npz(
    path: str | os.PathLike, episodes: Sequence[Episode], action_space: spaces.Space
) -> Path:
    """Write episodes as one uncompressed ``.npz`` of transitions (see the module docstring).

    Actions are stored in the env's units with the bounds of ``action_space``.
    :return: the file written.
    """
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(".npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    for ep_key in ("obs", "next_obs"):
        for key in _obs_dict(episodes[0].observations):
            part = [_obs_dict(ep.observations)[key] for ep in episodes]
            arrays[f"{ep_key}/{key}"] = np.concatenate(
                [p[:-1] if ep_key == "obs" else p[1:] for p in part]
            )
    arrays["action"] = np.concatenate([np.asarray(ep.actions) for ep in episodes])
    arrays["reward"] = np.concatenate([np.asarray(ep.rewards, np.float64) for ep in episodes])
    for name, field in (("terminated", "terminations"), ("truncated", "truncations")):
        arrays[name] = np.concatenate([np.asarray(getattr(ep, field), bool) for ep in episodes])
    if isinstance(action_space, spaces.Box):
        arrays["action_low"] = np.asarray(action_space.low)
        arrays["action_high"] = np.asarray(action_space.high)
    elif isinstance(action_space, spaces.Discrete):
        arrays["num_actions"] = np.array(int(action_space.n))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)
    return path


def load_npz(path: str | os.PathLike) -> tuple[Transitions, spaces.Space | None]:
    """Read a ``.npz`` written by :func:`save_npz` (or by hand with the same keys).

    :return: the transitions (actions rescaled to ``[-1, 1]``) and the action space the file
        records (a Box from its bounds, a Discrete from ``num_actions``, else ``None``).

    :raises DatasetError: on missing keys (a single ``done`` array is refused: terminations and
        truncations must be told apart).
    """
    path = Path(path)
    with np.load(path, allow_pickle=False) as data:
        keys = set(data.files)
        missing = [k for k in _NPZ_KEYS if k not in keys]
        if not any(k.startswith("obs/") for k in keys):
            missing.append("obs/<key>")
        if not any(k.startswith("next_obs/") for k in keys):
            missing.append("next_obs/<key>")
        if missing:
            hint = (
                " It has a single 'done' array: store 'terminated' (the MDP ended, no "
                "bootstrap) and 'truncated' (a time limit, bootstrap) separately."
                if "done" in keys
                else ""
            )
            raise DatasetError(
                f"{path}: missing keys {missing} (found {sorted(keys)}).{hint} Fix: write the "
                "file with super_sac.datasets.save_npz or experiments/offline/record_replay.py."
            )
        action = np.asarray(data["action"])
        action_space: spaces.Space | None = None
        if "action_low" in keys and "action_high" in keys:
            low, high = np.asarray(data["action_low"]), np.asarray(data["action_high"])
            if not (np.isfinite(low).all() and np.isfinite(high).all() and (low < high).all()):
                raise DatasetError(
                    f"{path}: action_low {low.tolist()} and action_high {high.tolist()} are not "
                    "finite bounds with low < high. Fix: store the env's action_space.low and "
                    ".high"
                )
            check_float_actions(action, str(path))
            action_space = spaces.Box(low, high, dtype=low.dtype)
            action = _normalize_actions(action, low, high)
        elif "num_actions" in keys:
            action_space = spaces.Discrete(int(data["num_actions"]))
        elif np.issubdtype(action.dtype, np.floating):
            raise DatasetError(
                f"{path}: float actions without 'action_low'/'action_high' bounds, so they "
                "cannot be rescaled to [-1, 1]. Fix: store the env's action bounds too."
            )
        transitions = Transitions(
            obs={k[4:]: np.asarray(data[k]) for k in data.files if k.startswith("obs/")},
            action=action,
            reward=_column(data["reward"]).astype(np.float32),
            next_obs={k[9:]: np.asarray(data[k]) for k in data.files if k.startswith("next_obs/")},
            terminated=_column(data["terminated"]),
            truncated=_column(data["truncated"]),
        )
        return transitions, action_space


def _column(values: Any) -> np.ndarray:
    """A per-transition array as ``(N,)``: an ``(N, 1)`` column (as some tools write rewards
    and flags) is flattened; other shapes are left for the validation to report."""
    arr = np.asarray(values)
    return arr[:, 0] if arr.ndim == 2 and arr.shape[1] == 1 else arr


# ------------------------------------------------------------------------------ minari
@contextlib.contextmanager
def _minari_root(datasets_path: str | os.PathLike | None) -> Iterator[None]:
    """Point Minari at ``datasets_path`` for the duration of the block."""
    if datasets_path is None:
        yield
        return
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = os.fspath(Path(datasets_path).resolve())
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


def save_minari(
    dataset_id: str,
    episodes: Sequence[Episode],
    observation_space: spaces.Space,
    action_space: spaces.Space,
    datasets_path: str | os.PathLike | None = None,
    overwrite: bool = False,
    **metadata: Any,
) -> Path:
    """Create a local Minari dataset from recorded episodes (no network access).

    :param dataset_id: Minari id, ``"<namespace>/<name>-v<version>"``, e.g.
        ``"super_sac/halfcheetah-medium-v0"``.
    :param episodes: the episodes (observations in ``observation_space``, actions in the env's
        units).
    :param observation_space: the raw env's observation space.
    :param action_space: the raw env's action space.
    :param datasets_path: root folder of local datasets (default ``$MINARI_DATASETS_PATH``).
    :param overwrite: replace an existing dataset of the same id.
    :param metadata: more ``minari.create_dataset_from_buffers`` arguments (``env``,
        ``algorithm_name``, ``ref_min_score``, ``ref_max_score``, ``description`` ...).
    :return: the dataset's folder.
    """
    # minari is optional (the ``offline`` extra), so it is imported only when used.
    import minari
    from minari.data_collector import EpisodeBuffer

    buffers = [
        EpisodeBuffer(
            id=i,
            observations=ep.observations,
            actions=np.asarray(ep.actions),
            rewards=np.asarray(ep.rewards, np.float64),
            terminations=np.asarray(ep.terminations, bool),
            truncations=np.asarray(ep.truncations, bool),
            infos={},
        )
        for i, ep in enumerate(episodes)
    ]
    with _minari_root(datasets_path):
        if dataset_id in minari.list_local_datasets():
            if not overwrite:
                raise DatasetError(
                    f"a Minari dataset {dataset_id!r} exists already. Fix: pass overwrite=True "
                    "(--overwrite) or choose another id or version"
                )
            minari.delete_dataset(dataset_id)
        dataset = minari.create_dataset_from_buffers(
            dataset_id,
            buffers,
            observation_space=observation_space,
            action_space=action_space,
            **metadata,
        )
        return Path(dataset.spec.data_path).parent


def load_minari(
    dataset_id: str, datasets_path: str | os.PathLike | None = None
) -> tuple[list[Episode], spaces.Space, dict[str, Any]]:
    """Read a local Minari dataset (never downloads).

    :return: the episodes, the dataset's action space and its metadata (``env_spec``,
        ``ref_min_score``, ``ref_max_score`` ...).
    :raises DatasetError: when the id is not found under the datasets folder.
    """
    import minari  # optional (the ``offline`` extra): imported only when used

    with _minari_root(datasets_path):
        local = sorted(minari.list_local_datasets())
        if dataset_id not in local:
            where = datasets_path or os.environ.get("MINARI_DATASETS_PATH", "~/.minari/datasets")
            raise DatasetError(
                f"no Minari dataset {dataset_id!r} under {where} (local datasets: "
                f"{local or 'none'}). Fix: build it with experiments/offline/record_replay.py "
                "(or build_datasets.py), pass --datasets_path / set MINARI_DATASETS_PATH to the "
                "folder holding it, or give a .npz path."
            )
        dataset = minari.load_dataset(dataset_id, download=False)
        episodes = [
            Episode(
                observations=ep.observations,
                actions=ep.actions,
                rewards=ep.rewards,
                terminations=ep.terminations,
                truncations=ep.truncations,
            )
            for ep in dataset.iterate_episodes()
        ]
        meta = dict(dataset.storage.metadata)
        return episodes, dataset.action_space, meta


# ------------------------------------------------------------------------------ recording


def load_transitions(
    source: str | os.PathLike, env: gym.Env, datasets_path: str | os.PathLike | None = None
) -> tuple[Transitions, dict[str, Any]]:
    """Read and validate a dataset for ``env``.

    :param source: a ``.npz`` file, or a Minari dataset id resolved under ``datasets_path``.
    :param env: the (wrapped) env the agent trains in.
    :param datasets_path: local Minari datasets folder (default ``$MINARI_DATASETS_PATH``).
    :return: the transitions and the dataset's metadata (Minari's, or ``{}`` for ``.npz``).
    :raises DatasetError: when the source is missing, malformed or does not fit ``env``.
    """
    source_str = os.fspath(source)
    if source_str.endswith(".npz") or Path(source_str).is_file():
        if not Path(source_str).is_file():
            raise DatasetError(
                f"no dataset file {source_str}. Fix: check the path, or record one with "
                "experiments/offline/record_replay.py --npz PATH"
            )
        data, action_space = load_npz(source_str)
        if action_space is not None:
            _check_space_match(source_str, action_space, env)
        meta: dict[str, Any] = {}
    else:
        episodes, action_space, meta = load_minari(source_str, datasets_path)
        if not episodes:
            raise DatasetError(
                f"{source_str}: the Minari dataset holds no episodes. Fix: record episodes into "
                "it, or pass another dataset id"
            )
        _check_space_match(source_str, action_space, env)
        data = episodes_to_transitions(episodes, action_space)
    validate_transitions(data, env, source_str)
    _warn_if_prenormalised(data, env, source_str)
    return data, meta


def _warn_if_prenormalised(data: Transitions, env: gym.Env, source: str) -> None:
    """Warn when a Box dataset's actions, read in env units, never leave ``[-1, 1]`` on the
    dimensions whose bounds are wider yet reach 0.9 there: the signature of actions that were
    already normalised (they would be halved again on a ``[-2, 2]`` env, silently)."""
    raw = raw_action_space(env)
    if not isinstance(raw, spaces.Box) or len(data) < 100:
        return
    wide = ((raw.low < -1.5) | (raw.high > 1.5)).reshape(-1)
    if not wide.any():
        return
    env_units = _denormalize_actions(data.action, raw.low, raw.high).reshape(len(data), -1)
    reach = np.abs(env_units[:, wide]).max(axis=0)
    if (reach <= 1.0 + 1e-6).all() and (reach >= 0.9).any():
        warnings.warn(
            f"{source}: the actions never leave [-1, 1] in env units, though the env's bounds "
            f"are {raw.low.tolist()}..{raw.high.tolist()}: if they were normalised to [-1, 1] "
            "already, store them in the env's units (the loader normalises them itself)",
            stacklevel=3,
        )


def _check_space_match(source: str, action_space: spaces.Space, env: gym.Env) -> None:
    raw = raw_action_space(env)
    if isinstance(raw, spaces.Box) and isinstance(action_space, spaces.Box):
        same = (
            raw.shape == action_space.shape
            and np.allclose(raw.low, action_space.low)
            and np.allclose(raw.high, action_space.high)
        )
        if not same:
            raise DatasetError(
                f"{source}: the dataset's action space {action_space} differs from the env's "
                f"{raw}. Fix: train in the env the dataset was recorded in."
            )
    elif type(raw) is not type(action_space):
        raise DatasetError(
            f"{source}: the dataset's action space {action_space} does not match the env's "
            f"{raw}. Fix: train in the env the dataset was recorded in (a Discrete dataset needs "
            "a discrete env and agent, e.g. sac_discrete.gin's settings)"
        )
