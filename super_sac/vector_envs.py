"""Vector envs for the training loop: env worker processes, stable-baselines3 ``VecEnv``\\ s, and
the replay that rebuilds the envs' running episodes when a run resumes.

* :func:`make_vector_env` builds ``n`` envs as a gymnasium ``SyncVectorEnv`` (all in the training
  process) or ``AsyncVectorEnv`` (one worker process per env, observations through shared
  memory), both in ``DISABLED`` autoreset mode so that the collector makes every reset itself,
  with the seeds it derives for each episode.
* :class:`SB3VecEnvAdapter` presents a stable-baselines3 ``VecEnv`` (``DummyVecEnv``,
  ``SubprocVecEnv``, ...) through the gymnasium vector API the collector uses, in ``SAME_STEP``
  autoreset mode (SB3 resets ended envs inside ``step``): ``terminated`` and ``truncated`` come
  apart again through SB3's ``TimeLimit.truncated`` info, and the true final observation is its
  ``terminal_observation``.
* :func:`replay_in_lockstep` rebuilds the state of every env of a ``DISABLED`` vector env
  through the vector API alone (no access to the sub-envs), see its docstring.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

VECTOR_KINDS = ("sync", "async")


def make_vector_env(
    make: Callable[[], gym.Env], n: int, kind: str = "sync", context: str | None = None
) -> gym.vector.VectorEnv:
    """``n`` envs built by ``make`` as one vector env whose resets the training loop makes.

    :param make: builds one env (with an ``"async"`` kind it runs in a worker process, so it is
        pickled with cloudpickle: a lambda or closure is fine).
    :param n: number of envs.
    :param kind: ``"sync"`` (``SyncVectorEnv``: every env steps in this process) or ``"async"``
        (``AsyncVectorEnv`` with shared memory: one process per env, stepped in parallel).
    :param context: the ``multiprocessing`` start method of the async workers (None: the
        platform's default, ``fork`` on Linux). Use ``"spawn"`` or ``"forkserver"`` when this
        process already holds a rendering (EGL/OpenGL) context, which forked workers inherit
        and can hang on.
    """
    if kind not in VECTOR_KINDS:
        raise ValueError(f"vector kind must be one of {VECTOR_KINDS}, got {kind!r}")
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"a vector env needs n >= 1 envs (a whole number), got {n!r}")
    fns = [make for _ in range(n)]
    if kind == "async":
        return gym.vector.AsyncVectorEnv(
            fns, shared_memory=True, autoreset_mode=AutoresetMode.DISABLED, context=context
        )
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED)


# ---------------------------------------------------------------------------- replay


def replay_in_lockstep(
    env: gym.vector.VectorEnv,
    seeds: Sequence[int],
    actions: Sequence[Sequence[np.ndarray]],
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Bring env ``i`` of ``env`` (``DISABLED`` autoreset) to the state it reaches when reset
    with ``seeds[i]`` and stepped with ``actions[i]``, using only batched ``reset``/``step``.

    A vector env steps all its envs together, so the episodes are aligned at their ends: with
    ``L`` the longest action list, env ``i`` is reset with its seed at round ``L - len(actions[i])``
    and gets its recorded actions in the rounds after, so that every env takes its last recorded
    action in round ``L - 1``. Before its reset round an env only fills in (it is stepped with
    another env's action of that round, and reset again whenever such a step ends its episode,
    so that an ended env is never stepped); whatever that does to it is wiped by its seeded reset.
    From its seeded reset on, each env sees exactly its own reset and actions, as it did in the
    original run, so the replay is exact for envs that are deterministic given seed and actions.

    :param env: a vector env in ``DISABLED`` autoreset mode (``reset`` accepts
        ``options={"reset_mask": ...}``).
    :param seeds: each env's episode seed.
    :param actions: each env's recorded actions of its running episode.
    :return: the observations after the replay, and a mask of the envs whose replayed episode
        ended (the original's running episodes had not: those envs are not deterministic given
        seed and actions; the caller warns).
    """
    n = env.num_envs
    lengths = np.array([len(a) for a in actions], dtype=np.int64)
    longest = int(lengths.max(initial=0))
    start = longest - lengths
    obs, _ = env.reset(seed=[int(s) for s in seeds])  # every env seeded once, for determinism
    if longest == 0:
        return obs, np.zeros(n, dtype=bool)
    filler_env = int(np.argmax(lengths))
    diverged = np.zeros(n, dtype=bool)
    pending = np.zeros(n, dtype=bool)  # filling envs whose episode ended: reset before the step
    for t in range(longest):
        reset = ((start == t) & (t > 0)) | pending
        if reset.any():
            obs = _masked_reset(env, seeds, reset, obs)
            pending[:] = False
        batch = [
            actions[i][t - start[i]] if t >= start[i] else actions[filler_env][t] for i in range(n)
        ]
        obs, _, terminated, truncated, _ = env.step(np.stack([np.asarray(a) for a in batch]))
        ended = np.asarray(terminated) | np.asarray(truncated)
        replaying = t >= start
        # a running episode never ended in the original run (the loop would have reset it),
        # so any end while replaying, the last recorded action included, is a divergence
        diverged |= ended & replaying
        pending = ended & ~replaying
    reset = (lengths == 0) & (longest > 0)
    if reset.any():
        obs = _masked_reset(env, seeds, reset, obs)
    return obs, diverged


def _masked_reset(
    env: gym.vector.VectorEnv,
    seeds: Sequence[int],
    mask: np.ndarray,
    obs: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Reset the envs of ``mask`` with their seeds; the others keep their observation."""
    new_obs, _ = env.reset(
        seed=[int(s) if m else None for s, m in zip(seeds, mask)],
        options={"reset_mask": mask.copy()},
    )
    return new_obs


# ---------------------------------------------------------------------------- SB3


def is_sb3_vec_env(env: Any) -> bool:
    """Whether ``env`` is a stable-baselines3 ``VecEnv`` (SB3 is not imported for the check: an
    env can only be one if SB3's vec_env module is loaded already)."""
    module = sys.modules.get("stable_baselines3.common.vec_env")
    return module is not None and isinstance(env, module.VecEnv)


class SB3VecEnvAdapter(gym.vector.VectorEnv):
    """A stable-baselines3 ``VecEnv`` seen as a gymnasium vector env in ``SAME_STEP`` autoreset
    mode, with dict observations.

    SB3 resets an ended env inside ``step`` and reports ``dones``; this adapter splits them into
    ``terminated`` and ``truncated`` with the ``TimeLimit.truncated`` info SB3 sets for time
    limits, and gives the ended envs' true final observations (SB3's ``terminal_observation``)
    as ``info["final_obs"]``, as gymnasium's ``SAME_STEP`` vector envs do. ``Box`` observations
    become ``{key: array}`` (float32 for float spaces, integer dtypes kept); ``Dict``
    observations pass through; other observation spaces are refused. :func:`super_sac.super_sac`
    and :class:`~super_sac.collector.Collector` wrap an SB3 ``VecEnv`` given as the training env
    automatically.

    Seeding: SB3 seeds env ``i`` with ``seed + i`` at the next reset (``VecEnv.seed``); a list of
    seeds uses its first entry. Later episodes continue the envs' own generators, so the
    collector's per-episode seeds and the exact replay of running episodes on resume need a
    gymnasium vector env in ``DISABLED`` mode (:func:`make_vector_env`).

    :param venv: the SB3 ``VecEnv``.
    :param key: the dict key of ``Box`` observations.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, venv: Any, key: str = "obs") -> None:
        self.venv, self.key = venv, key
        self.num_envs = int(venv.num_envs)
        space = venv.observation_space
        if isinstance(space, spaces.Box):
            self._wrap = True
            # float observations become float32 (the library's vectors); integer ones (uint8
            # images, e.g. SB3's VecFrameStack over Atari) keep their dtype and size in replay
            self._dtype = np.float32 if np.issubdtype(space.dtype, np.floating) else space.dtype
            single_obs = spaces.Dict(
                {
                    key: spaces.Box(
                        space.low.astype(self._dtype),
                        space.high.astype(self._dtype),
                        space.shape,
                        self._dtype,
                    )
                }
            )
        elif isinstance(space, spaces.Dict) and all(
            isinstance(s, spaces.Box) for s in space.spaces.values()
        ):
            self._wrap, single_obs = False, space
        else:
            raise TypeError(
                f"SB3VecEnvAdapter needs a Box or a Dict of Box observations, got {space}. Fix: "
                "wrap each env of the VecEnv in an observation wrapper that returns a dict of "
                "arrays."
            )
        self.single_observation_space = single_obs
        self.single_action_space = venv.action_space
        self.observation_space = gym.vector.utils.batch_space(single_obs, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(venv.action_space, self.num_envs)
        self.metadata = {**type(self).metadata}

    def _obs(self, obs: Any) -> dict[str, np.ndarray]:
        if self._wrap:
            return {self.key: np.asarray(obs, dtype=self._dtype)}
        return {k: np.asarray(v) for k, v in obs.items()}

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if options and "reset_mask" in options:
            raise NotImplementedError(
                "an SB3 VecEnv resets ended envs itself: partial resets are not supported"
            )
        if isinstance(seed, Sequence):
            seed = seed[0] if len(seed) else None
        if seed is not None:
            self.venv.seed(int(seed))
        return self._obs(self.venv.reset()), {}

    def step(self, actions: Any) -> tuple[Any, ...]:
        obs, reward, dones, infos = self.venv.step(np.asarray(actions))
        dones = np.asarray(dones, dtype=bool)
        truncated = np.array(
            [bool(d and info.get("TimeLimit.truncated", False)) for d, info in zip(dones, infos)]
        )
        terminated = dones & ~truncated
        info: dict[str, Any] = {}
        if dones.any():
            final = np.empty(self.num_envs, dtype=object)
            for i in np.flatnonzero(dones):
                single = infos[i]["terminal_observation"]
                final[i] = (
                    {self.key: np.asarray(single, dtype=self._dtype)}
                    if self._wrap
                    else {k: np.asarray(v) for k, v in single.items()}
                )
            info = {"final_obs": final, "_final_obs": dones.copy()}
        return self._obs(obs), np.asarray(reward, dtype=np.float64), terminated, truncated, info

    def close(self, **kwargs: Any) -> None:
        self.venv.close()


def as_gym_vector_env(env: Any) -> Any:
    """An SB3 ``VecEnv`` wrapped in :class:`SB3VecEnvAdapter`; any other env unchanged."""
    return SB3VecEnvAdapter(env) if is_sb3_vec_env(env) else env
