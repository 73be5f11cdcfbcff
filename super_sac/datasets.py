"""Offline datasets: Minari (the maintained successor of D4RL's format) and a plain ``.npz``.

Both formats store whole episodes of the *raw* environment: observations as the env returns
them (a ``Box`` becomes the ``{"obs": ...}`` dict of :class:`super_sac.wrappers.SimpleGymWrapper`
on load), actions in the env's own units together with the action space's bounds (they are
rescaled to the library's ``[-1, 1]`` on load, as :class:`super_sac.wrappers.NormActionSpace`
does), rewards, and ``terminations`` and ``truncations`` kept apart: only a termination stops
bootstrapping, a truncated transition bootstraps from its true final observation.

* Minari: ``<datasets_path>/<dataset id>/`` written by :func:`save_minari` with
  ``minari.create_dataset_from_buffers`` and read by :func:`load_minari` with
  ``minari.load_dataset``; ``datasets_path`` defaults to ``$MINARI_DATASETS_PATH`` (then Minari's
  own default, ``~/.minari/datasets``). Nothing is downloaded.
* ``.npz`` (:func:`save_npz` / :func:`load_npz`): per-transition arrays ``obs/<key>``,
  ``next_obs/<key>``, ``action``, ``reward``, ``terminated``, ``truncated`` plus
  ``action_low`` / ``action_high`` (Box actions) or ``num_actions`` (Discrete), no pickles.

:func:`load_transitions` resolves a source (a ``.npz`` path, a Minari dataset folder or a Minari
id), converts it to the library's conventions and validates it against the env the agent
trains in (:func:`validate_transitions`), raising :class:`DatasetError` with the problem and the
fix. :meth:`super_sac.replay.ReplayBuffer.load_dataset` puts the result in a replay buffer.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from super_sac.wrappers import NormActionSpace, SimpleGymWrapper

__all__ = [
    "DatasetError",
    "Episode",
    "Transitions",
    "load_minari",
    "load_npz",
    "agent_policy",
    "load_transitions",
    "random_policy",
    "raw_action_space",
    "record_episodes",
    "save_minari",
    "save_npz",
    "validate_transitions",
]

_NPZ_KEYS = ("action", "reward", "terminated", "truncated")


class DatasetError(ValueError):
    """A dataset that cannot be found, read or used with the env; the message says the fix."""


@dataclass
class Episode:
    """One recorded episode of the raw env.

    :param observations: ``T + 1`` observations (the final one included), an array or a dict of
        arrays for Dict spaces.
    :param actions: ``T`` actions in the env's own units (or integer indices).
    :param rewards: ``T`` rewards.
    :param terminations: ``T`` flags, true where the MDP ended (no bootstrap).
    :param truncations: ``T`` flags, true where a time limit cut the episode.
    """

    observations: np.ndarray | dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray


@dataclass
class Transitions:
    """Transitions in the library's conventions (dict observations, actions in ``[-1, 1]`` or
    integer indices), ready for :meth:`super_sac.replay.ReplayBuffer.push`.

    :param obs: ``{key: (N, ...)}``.
    :param action: ``(N, A)`` float32 or ``(N,)`` int64.
    :param reward: ``(N,)`` float32.
    :param next_obs: ``{key: (N, ...)}``.
    :param terminated: ``(N,)`` bool.
    :param truncated: ``(N,)`` bool.
    """

    obs: dict[str, np.ndarray]
    action: np.ndarray
    reward: np.ndarray
    next_obs: dict[str, np.ndarray]
    terminated: np.ndarray
    truncated: np.ndarray

    def __len__(self) -> int:
        return int(self.action.shape[0])

    @property
    def episode_returns(self) -> np.ndarray:
        """Undiscounted return of every complete episode (ended by termination or truncation)."""
        ends = np.flatnonzero(self.terminated | self.truncated)
        sums = np.cumsum(self.reward, dtype=np.float64)
        totals = sums[ends]
        return np.diff(np.concatenate([[0.0], totals]))


# ------------------------------------------------------------------------------ conversions
def _obs_dict(obs: np.ndarray | dict[str, np.ndarray], key: str = "obs") -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in obs.items()} if isinstance(obs, dict) else {key: obs}


def _normalize_actions(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Env units -> ``[-1, 1]`` (the inverse of NormActionSpace's rescaling)."""
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    return (2.0 * (np.asarray(action, np.float64) - low) / (high - low) - 1.0).astype(np.float32)


def _denormalize_actions(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``[-1, 1]`` -> env units."""
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    return low + (np.asarray(action, np.float64) + 1.0) * 0.5 * (high - low)


def episodes_to_transitions(episodes: Sequence[Episode], action_space: spaces.Space) -> Transitions:
    """Flatten episodes into transitions in the library's conventions.

    :param episodes: recorded episodes of the raw env.
    :param action_space: the raw env's action space (Box bounds rescale actions to ``[-1, 1]``).
    """
    if not episodes:
        raise DatasetError("the dataset holds no episodes")
    obs_parts: dict[str, list[np.ndarray]] = {}
    next_parts: dict[str, list[np.ndarray]] = {}
    for ep in episodes:
        for key, value in _obs_dict(ep.observations).items():
            obs_parts.setdefault(key, []).append(value[:-1])
            next_parts.setdefault(key, []).append(value[1:])
    action = np.concatenate([np.asarray(ep.actions) for ep in episodes])
    if isinstance(action_space, spaces.Box):
        action = _normalize_actions(action, action_space.low, action_space.high)
    return Transitions(
        obs={k: np.concatenate(v) for k, v in obs_parts.items()},
        action=action,
        reward=np.concatenate([np.asarray(ep.rewards, np.float64) for ep in episodes]).astype(
            np.float32
        ),
        next_obs={k: np.concatenate(v) for k, v in next_parts.items()},
        terminated=np.concatenate([np.asarray(ep.terminations) for ep in episodes]).astype(bool),
        truncated=np.concatenate([np.asarray(ep.truncations) for ep in episodes]).astype(bool),
    )


# ------------------------------------------------------------------------------ npz
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
            reward=np.asarray(data["reward"], dtype=np.float32),
            next_obs={k[9:]: np.asarray(data[k]) for k in data.files if k.startswith("next_obs/")},
            terminated=np.asarray(data["terminated"]),
            truncated=np.asarray(data["truncated"]),
        )
        return transitions, action_space


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
Policy = Any  # Callable[[dict[str, np.ndarray]], np.ndarray]: wrapped obs -> action in [-1, 1]


def random_policy(env: gym.Env, seed: int | None = None) -> Policy:
    """Uniform random actions in the (wrapped) env's action space (D4RL's "random" policy)."""
    space = env.action_space
    space.seed(seed)
    return lambda obs: space.sample()


def agent_policy(
    agent: Any, noise_std: float = 0.0, stochastic: bool = True, seed: int | None = None
) -> Policy:
    """Actions of a trained agent: policy samples (``stochastic``, as D4RL recorded its SAC
    policies) or its mean action, plus optional Gaussian noise ``N(0, noise_std^2)``, clipped
    to ``[-1, 1]`` (continuous actions; discrete agents' indices are used as they are)."""
    rng = np.random.default_rng(seed)

    def act(obs: dict[str, np.ndarray]) -> np.ndarray:
        action = agent.sample_action(obs) if stochastic else agent.forward(obs)
        if getattr(agent, "discrete", False):  # an action index: no noise, no clipping
            return np.asarray(action)
        action = np.asarray(action, dtype=np.float32)
        if noise_std > 0:
            action = action + rng.normal(0.0, noise_std, size=action.shape)
        return np.clip(action, -1.0, 1.0).astype(np.float32)

    return act


def record_episodes(
    env: gym.Env, policy: Policy, num_transitions: int, seed: int = 0
) -> tuple[list[Episode], spaces.Space, spaces.Space]:
    """Run ``policy`` in ``env`` (a library-wrapped env) for ``num_transitions`` transitions.

    Episode ``i`` is reset with seed ``seed + i``. The last episode is cut at
    ``num_transitions`` and marked truncated (it bootstraps, as a time limit would).

    :return: the episodes (observations as the raw env gives them, in float32; actions in the
        env's units), the raw observation space and the raw action space (what Minari stores).
    """
    raw_actions = raw_action_space(env)
    obs_space = env.observation_space
    flat_key = None
    current = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, SimpleGymWrapper):
            flat_key = current.key
            break
        current = current.env
    raw_obs_space = obs_space.spaces[flat_key] if flat_key is not None else obs_space

    def unwrap(obs: dict[str, np.ndarray]) -> Any:
        return np.asarray(obs[flat_key]) if flat_key is not None else obs

    episodes: list[Episode] = []
    total = 0
    while total < num_transitions:
        obs, _ = env.reset(seed=seed + len(episodes))
        observations, actions, rewards, terms, truncs = [unwrap(obs)], [], [], [], []
        while True:
            action = policy(obs)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += 1
            truncated = truncated or (total >= num_transitions and not terminated)
            observations.append(unwrap(obs))
            actions.append(action)
            rewards.append(float(reward))
            terms.append(bool(terminated))
            truncs.append(bool(truncated))
            if terminated or truncated:
                break
        stacked: Any
        if flat_key is not None:
            stacked = np.stack(observations)
        else:
            stacked = {k: np.stack([o[k] for o in observations]) for k in observations[0]}
        act = np.stack(actions)
        if isinstance(raw_actions, spaces.Box):
            act = _denormalize_actions(act, raw_actions.low, raw_actions.high).astype(
                raw_actions.dtype
            )
        episodes.append(Episode(stacked, act, np.array(rewards), np.array(terms), np.array(truncs)))
    return episodes, raw_obs_space, raw_actions


# ------------------------------------------------------------------------------ validation
def raw_action_space(env: gym.Env) -> spaces.Space:
    """The action space in the env's own units: the space under a ``NormActionSpace`` wrapper
    (or the env's action space when it has none)."""
    current = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, NormActionSpace):
            return current.env.action_space
        current = current.env
    return env.action_space


def validate_transitions(
    data: Transitions, env: gym.Env, source: str = "dataset", atol: float = 1e-4
) -> None:
    """Check that ``data`` fits the env the agent trains in.

    Checks: observation keys, shapes and dtypes against ``env.observation_space``; action shape,
    bounds (the rescaled actions must lie in ``[-1, 1]``) or indices in ``[0, n)``; equal lengths
    of every array; finite observations, actions and rewards; boolean terminations and
    truncations; an episode end (termination or truncation) on the last transition.

    :param data: transitions in the library's conventions.
    :param env: the (wrapped) env with a Dict observation space.
    :param source: the dataset's name, for messages.
    :param atol: tolerance of the ``[-1, 1]`` bound check.
    :raises DatasetError: naming the problem and the fix.
    """

    def fail(problem: str, fix: str) -> DatasetError:
        return DatasetError(f"{source}: {problem}. Fix: {fix}")

    obs_space = env.observation_space
    if not isinstance(obs_space, spaces.Dict):
        raise fail(
            "the env's observations are not a dict",
            "wrap it with super_sac.wrappers.SimpleGymWrapper (make_gym_env does)",
        )
    n = len(data)
    for label, obs in (("obs", data.obs), ("next_obs", data.next_obs)):
        missing = sorted(set(obs_space.spaces) - set(obs))
        extra = sorted(set(obs) - set(obs_space.spaces))
        if missing or extra:
            raise fail(
                f"{label} keys {sorted(obs)} differ from the env's {sorted(obs_space.spaces)} "
                f"(missing {missing}, unexpected {extra})",
                "record the dataset in the same env (same observation wrappers)",
            )
        for key, space in obs_space.spaces.items():
            arr = obs[key]
            if arr.shape != (n, *space.shape):
                raise fail(
                    f"{label}[{key!r}] has shape {arr.shape}, expected {(n, *space.shape)} "
                    f"({n} transitions of the env's shape {space.shape})",
                    "record the dataset in the same env",
                )
            if not np.can_cast(arr.dtype, space.dtype, casting="same_kind"):
                raise fail(
                    f"{label}[{key!r}] has dtype {arr.dtype}, which cannot be stored as the "
                    f"env's {space.dtype}",
                    "store observations with the env's dtype",
                )
            if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
                raise fail(
                    f"{label}[{key!r}] holds NaN or inf at transitions "
                    f"{np.flatnonzero(~np.isfinite(arr.reshape(n, -1)).all(1))[:5].tolist()}",
                    "drop those transitions or re-record the dataset",
                )
    _validate_actions(data.action, env.action_space, n, atol, fail)
    for name in ("reward", "terminated", "truncated"):
        arr = getattr(data, name)
        if arr.shape != (n,):
            raise fail(f"{name} has shape {arr.shape}, expected ({n},)", "one value per action")
    if not np.isfinite(data.reward).all():
        bad = np.flatnonzero(~np.isfinite(data.reward))[:5].tolist()
        raise fail(f"reward holds NaN or inf at transitions {bad}", "drop or fix them")
    for name in ("terminated", "truncated"):
        arr = getattr(data, name)
        if arr.dtype != bool and not np.isin(arr, (0, 1)).all():
            raise fail(
                f"{name} holds values other than 0/1", f"store {name} as booleans per transition"
            )
    if n and not (bool(data.terminated[-1]) or bool(data.truncated[-1])):
        raise fail(
            "the last transition is neither terminated nor truncated, so its episode has no end",
            "mark the final transition of a cut-off episode as truncated",
        )


def _validate_actions(
    action: np.ndarray, space: spaces.Space, n: int, atol: float, fail: Any
) -> None:
    if isinstance(space, spaces.Discrete):
        if action.shape != (n,) or not np.issubdtype(action.dtype, np.integer):
            raise fail(
                f"actions have shape {action.shape} and dtype {action.dtype}, but the env has "
                f"{space.n} discrete actions",
                "store integer action indices, shape (N,)",
            )
        if action.size and (action.min() < 0 or action.max() >= space.n):
            raise fail(
                f"action indices span [{action.min()}, {action.max()}], outside [0, {space.n})",
                "record the dataset in the same env",
            )
        return
    if action.shape != (n, *space.shape):
        raise fail(
            f"actions have shape {action.shape}, expected {(n, *space.shape)}",
            "record the dataset in the same env",
        )
    if not np.issubdtype(action.dtype, np.floating):
        raise fail(f"continuous actions have dtype {action.dtype}", "store float actions")
    if not np.isfinite(action).all():
        bad = np.flatnonzero(~np.isfinite(action.reshape(n, -1)).all(1))[:5].tolist()
        raise fail(f"actions hold NaN or inf at transitions {bad}", "drop or fix them")
    if action.size and np.abs(action).max() > 1.0 + atol:
        raise fail(
            f"actions reach {np.abs(action).max():.4g} after rescaling to [-1, 1] with the "
            "dataset's action bounds",
            "store the env's true action bounds with the dataset (or clip the actions)",
        )


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
                f"no dataset file {source_str}. Fix: record one with "
                "experiments/offline/record_replay.py --format npz"
            )
        data, action_space = load_npz(source_str)
        if action_space is not None:
            _check_space_match(source_str, action_space, env)
        meta: dict[str, Any] = {}
    else:
        episodes, action_space, meta = load_minari(source_str, datasets_path)
        _check_space_match(source_str, action_space, env)
        data = episodes_to_transitions(episodes, action_space)
    validate_transitions(data, env, source_str)
    return data, meta


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
            f"{source}: the dataset's action space {action_space} does not match the env's {raw}"
        )
