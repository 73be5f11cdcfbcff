"""Env stepping: exploration actions, episodes and their seeds, autoreset modes, n-step push.

:class:`Collector` steps a (vector) env with the agent's exploration actions and pushes the
finished n-step transitions into a :class:`~super_sac.replay.ReplayBuffer`. It is the only place
where the library steps a training env: the gin loop (:func:`super_sac.super_sac`) and the
quick-start :class:`super_sac.SAC` both collect through it.

Gymnasium semantics are exact: only ``terminated`` stops bootstrapping; a truncated (or cut)
episode bootstraps from its true final observation. All three vector autoreset modes work:
``DISABLED`` (the collector resets ended envs itself, with seeds it chooses), ``SAME_STEP`` (the
final observation is read from ``info["final_obs"]``) and ``NEXT_STEP`` (the step that only resets
an env is not a transition and is not stored; one-step transitions only).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from super_sac import learning_utils as lu
from super_sac.agent import Agent
from super_sac.replay import NStepQueue, ReplayBuffer
from super_sac.vector_envs import as_gym_vector_env, replay_in_lockstep

if TYPE_CHECKING:
    from super_sac.config import TrainConfig

ObsDict = dict[str, np.ndarray]
EPISODE_SEEDING = ("derived", "first")


def as_vector_env(env: gym.Env | gym.vector.VectorEnv) -> gym.vector.VectorEnv:
    """A single env becomes a one-env ``SyncVectorEnv`` whose episodes the collector resets; a
    stable-baselines3 ``VecEnv`` is wrapped in :class:`~super_sac.vector_envs.SB3VecEnvAdapter`."""
    env = as_gym_vector_env(env)
    if isinstance(env, gym.vector.VectorEnv):
        return env
    return gym.vector.SyncVectorEnv([lambda: env], autoreset_mode=AutoresetMode.DISABLED)


def autoreset_mode(env: gym.vector.VectorEnv) -> AutoresetMode:
    """The vector env's autoreset mode (gymnasium's default, ``NEXT_STEP``, when unstated)."""
    return AutoresetMode(env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))


def final_observations(next_obs: ObsDict, info: dict[str, Any], ended: np.ndarray) -> ObsDict:
    """``SAME_STEP`` autoreset: the reset observations of ended envs replaced by their final
    ones (a copy; ``next_obs`` is not modified)."""
    if not ended.any():
        return next_obs
    out = {k: v.copy() for k, v in next_obs.items()}
    for i in np.flatnonzero(ended):
        final = info["final_obs"][i]
        for k in out:
            out[k][i] = final[k]
    return out


def episode_seed(base: int, env_index: int, episode_index: int) -> int:
    """A well-mixed seed for episode ``episode_index`` of env ``env_index`` of a run seeded
    ``base``."""
    return int(np.random.SeedSequence([base, env_index, episode_index]).generate_state(1)[0])


class Collector:
    """Collect transitions from ``env`` into ``buffer`` with the agent's exploration actions.

    Exploration: uniform random actions for the first ``random_warmup_steps`` transitions; then
    the policy's action: a sample of stochastic and discrete actors (:meth:`Agent.sample_action`,
    so a SUNRISE ensemble picks its member as usual), a deterministic actor's action. With
    ``use_exploration_process`` that action is perturbed as the original super_sac did: Gaussian
    noise of std ``noise.std``, clipped to ``[-1, 1]`` (continuous), or epsilon-greedy with
    epsilon ``noise.std`` (discrete). Noise and random actions come from ``rng`` (policy samples
    from torch's generator); the noise schedule advances by the number of transitions.

    Episode seeds (``seeding``): ``"derived"`` resets every episode with
    :func:`episode_seed` of ``(seed, env index, episode index)``, so a checkpointed run can rebuild
    each env's state by replaying the recorded actions of its running episode; ``"first"`` seeds
    only the first reset (a vector env's env ``i`` with ``seed + i``) and lets later resets
    continue the envs' own generators (the quick-start :class:`super_sac.SAC`).

    :param env: a gymnasium env or vector env with dict observations and actions in the agent's
        space (``[-1, 1]`` or indices).
    :param agent: the acting agent.
    :param buffer: where finished transitions go.
    :param rng: the generator of warm-up actions and exploration noise.
    :param noise: the exploration noise schedule.
    :param seed: the run's seed (see ``seeding``).
    :param n_step: transitions span this many steps (:class:`~super_sac.replay.NStepQueue`).
    :param gamma: discount of the n-step returns.
    :param random_warmup_steps: transitions with uniform random actions.
    :param use_exploration_process: perturb the policy's actions with the noise process.
    :param ignore_all_dones: never stop bootstrapping (store ``done = 0`` everywhere).
    :param reward_clip: store each reward clipped to ``[-reward_clip, reward_clip]`` (the
        returns reported for the episodes stay the env's); ``None``: as the env gives them.
    :param infinite_bootstrap: with ``max_episode_steps``, a termination at that step is
        treated as a time limit (bootstrapped).
    :param max_episode_steps: the episode length used by ``infinite_bootstrap``.
    :param cut_episodes_at: end (truncate) training episodes after this many steps; ``None``:
        the env's own ends.
    :param seeding: ``"derived"`` or ``"first"`` (above).
    :param on_push: called with the buffer slots of every pushed batch of transitions.
    """

    def __init__(
        self,
        env: gym.Env | gym.vector.VectorEnv,
        agent: Agent,
        buffer: ReplayBuffer,
        *,
        rng: np.random.Generator,
        noise: lu.GaussianExplorationNoise,
        seed: int,
        n_step: int = 1,
        gamma: float = 0.99,
        random_warmup_steps: int = 0,
        use_exploration_process: bool = False,
        ignore_all_dones: bool = False,
        reward_clip: float | None = None,
        infinite_bootstrap: bool = False,
        max_episode_steps: int | None = None,
        cut_episodes_at: int | None = None,
        seeding: str = "derived",
        on_push: Callable[[np.ndarray], None] | None = None,
    ) -> None:
        if seeding not in EPISODE_SEEDING:
            raise ValueError(f"seeding must be one of {EPISODE_SEEDING}, got {seeding!r}")
        self.env = as_vector_env(env)
        self.autoreset = autoreset_mode(self.env)
        if self.autoreset is AutoresetMode.NEXT_STEP and n_step > 1:
            raise ValueError(
                "n-step transitions need the final observation of every episode: build the "
                "vector env with autoreset_mode=AutoresetMode.SAME_STEP or DISABLED"
            )
        if cut_episodes_at is not None and self.autoreset is not AutoresetMode.DISABLED:
            raise ValueError(
                "cutting episodes needs an env whose resets the collector makes: build the "
                "vector env with autoreset_mode=AutoresetMode.DISABLED"
            )
        self.agent, self.buffer = agent, buffer
        self.num_envs = self.env.num_envs
        self._env_ids = np.arange(self.num_envs, dtype=np.int16)
        self.rng, self.noise, self.seed, self.seeding = rng, noise, int(seed), seeding
        self.random_warmup_steps = int(random_warmup_steps)
        self.use_exploration_process = use_exploration_process
        self.ignore_all_dones, self.infinite_bootstrap = ignore_all_dones, infinite_bootstrap
        self.reward_clip = reward_clip
        self.max_episode_steps, self.cut_episodes_at = max_episode_steps, cut_episodes_at
        self.on_push = on_push
        self.nstep = NStepQueue(self.num_envs, n_step, gamma)
        self.env_steps = 0  # transitions stepped, summed over the envs (reset steps included)
        self.episodes = 0  # episodes finished
        self.obs: ObsDict | None = None
        self._seeded = False
        self._start_bookkeeping()

    @classmethod
    def from_config(
        cls,
        env: gym.Env | gym.vector.VectorEnv,
        agent: Agent,
        buffer: ReplayBuffer,
        cfg: TrainConfig,
        **kwargs: Any,
    ) -> Collector:
        """The collector of the gin loop: exploration, n-step and done settings from ``cfg``;
        training episodes are cut at ``cfg.max_episode_steps`` (``kwargs``: ``rng``, ``seed``,
        ``on_push``, ..., and ``cut_episodes_at`` to cut elsewhere)."""
        noise = lu.GaussianExplorationNoise(
            cfg.exploration_param_init, cfg.exploration_param_final, cfg.exploration_param_anneal
        )
        kwargs.setdefault("cut_episodes_at", cfg.max_episode_steps)
        return cls(
            env,
            agent,
            buffer,
            noise=noise,
            n_step=cfg.n_step,
            gamma=cfg.gamma,
            random_warmup_steps=cfg.random_warmup_steps,
            use_exploration_process=cfg.use_exploration_process,
            ignore_all_dones=cfg.ignore_all_dones,
            reward_clip=cfg.reward_clip,
            infinite_bootstrap=cfg.infinite_bootstrap,
            max_episode_steps=cfg.max_episode_steps,
            **kwargs,
        )

    def _start_bookkeeping(self) -> None:
        n = self.num_envs
        self.episode_return = np.zeros(n, dtype=np.float64)
        self.episode_len = np.zeros(n, dtype=np.int64)
        self.episode_index = np.zeros(n, dtype=np.int64)
        self.episode_actions: list[list[np.ndarray]] = [[] for _ in range(n)]
        self.resetting = np.zeros(n, dtype=bool)  # NEXT_STEP: the env's next step only resets

    # ------------------------------------------------------------------ episodes
    @property
    def started(self) -> bool:
        """Whether the envs have been reset at least once."""
        return self.obs is not None

    def seed_of(self, env_index: int) -> int:
        """The ``"derived"`` seed of env ``env_index``'s current episode."""
        return episode_seed(self.seed, env_index, int(self.episode_index[env_index]))

    def _reset_seeds(self, which: np.ndarray) -> list[int | None] | int | None:
        if self.seeding == "derived":
            return [self.seed_of(i) if which[i] else None for i in range(self.num_envs)]
        first = not self._seeded
        self._seeded = True
        return self.seed if first else None

    def reset_envs(self) -> None:
        """Start a new episode in every env (pending n-step windows are dropped)."""
        if self.started:  # episodes in progress are abandoned; they count as new ones
            self.episode_index += 1
        self.nstep.reset()
        self.episode_return[:] = 0.0
        self.episode_len[:] = 0
        self.resetting[:] = False
        self.episode_actions = [[] for _ in range(self.num_envs)]
        self.obs, _ = self.env.reset(seed=self._reset_seeds(np.ones(self.num_envs, dtype=bool)))

    def _end_episodes(self, ended: np.ndarray, next_obs: ObsDict) -> tuple[ObsDict, list[float]]:
        returns = [float(self.episode_return[i]) for i in np.flatnonzero(ended)]
        self.episodes += len(returns)
        self.episode_index[ended] += 1
        for i in np.flatnonzero(ended):
            self.episode_actions[i] = []
        self.episode_return[ended] = 0.0
        self.episode_len[ended] = 0
        if self.autoreset is AutoresetMode.NEXT_STEP:
            self.resetting = ended.copy()
        elif self.autoreset is AutoresetMode.DISABLED:
            seeds = self._reset_seeds(ended)
            next_obs, _ = self.env.reset(seed=seeds, options={"reset_mask": ended.copy()})
        return next_obs, returns

    # ------------------------------------------------------------------ acting
    def choose_actions(self, obs: ObsDict) -> np.ndarray:
        """Exploration actions for the batched observations ``obs`` (see the class docstring)."""
        if self.agent.discrete:
            return self._choose_discrete_actions(obs)
        shape = (self.num_envs, self.agent.act_space_size)
        if self.env_steps < self.random_warmup_steps:
            return self.rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
        action = self._policy_actions(obs).astype(np.float32, copy=False)
        if not self.use_exploration_process:
            return action
        noise = self.rng.normal(0.0, self.noise.std, size=shape).astype(np.float32)
        return np.clip(action + noise, -1.0, 1.0).astype(np.float32, copy=False)

    def _policy_actions(self, obs: ObsDict) -> np.ndarray:
        """The policy's own exploration actions: samples of a stochastic actor (an ensemble's
        member chosen by :meth:`Agent.sample_action`), a deterministic actor's actions."""
        if self.agent.stochastic:
            return self.agent.sample_action(obs, batched=True)
        return self.agent.forward(obs, batched=True)

    def _choose_discrete_actions(self, obs: ObsDict) -> np.ndarray:
        num_actions = self.agent.act_space_size
        if self.env_steps < self.random_warmup_steps:
            return self.rng.integers(0, num_actions, size=self.num_envs, dtype=np.int64)
        action = self._policy_actions(obs).astype(np.int64, copy=False)
        if not self.use_exploration_process:
            return action
        return lu.epsilon_greedy(action, self.noise.std, num_actions, self.rng)

    # ------------------------------------------------------------------ stepping
    def collect(self, num_transitions: int) -> list[float]:
        """Step every env ``num_transitions // num_envs`` times; push the finished transitions.

        :return: the returns of the episodes that ended during these steps.
        """
        if not self.started:
            self.reset_envs()
        finished: list[float] = []
        for _ in range(num_transitions // self.num_envs):
            finished += self.step()
        return finished

    def step(self) -> list[float]:
        """One step of every env; returns the returns of the episodes that ended."""
        action = self.choose_actions(self.obs)
        next_obs, reward, terminated, truncated, info = self.env.step(action)
        valid = ~self.resetting
        for i in np.flatnonzero(valid):
            self.episode_actions[i].append(action[i])
        self.episode_len[valid] += 1
        self.episode_return[valid] += np.asarray(reward)[valid]
        ended = (np.asarray(terminated) | np.asarray(truncated)) & valid
        if self.cut_episodes_at is not None:
            ended |= valid & (self.episode_len >= self.cut_episodes_at)
        learn_terminated = np.asarray(terminated) & valid
        if self.ignore_all_dones:
            learn_terminated[:] = False
        elif self.infinite_bootstrap and self.max_episode_steps is not None:
            learn_terminated &= self.episode_len < self.max_episode_steps
        if self.autoreset is AutoresetMode.SAME_STEP:
            true_next = final_observations(next_obs, info, np.asarray(terminated | truncated))
        else:
            true_next = next_obs
        if self.reward_clip is not None:  # what is learned from; the returns stay the env's
            reward = np.clip(reward, -self.reward_clip, self.reward_clip)
        self._push(self.obs, action, reward, true_next, learn_terminated, ended, valid)
        returns: list[float] = []
        self.resetting[:] = False  # this step's resets are done
        if ended.any():
            next_obs, returns = self._end_episodes(ended, next_obs)
        self.obs = next_obs
        self.env_steps += self.num_envs
        self.noise.advance(self.num_envs)
        return returns

    def _push(
        self,
        obs: ObsDict,
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: ObsDict,
        terminated: np.ndarray,
        ended: np.ndarray,
        valid: np.ndarray,
    ) -> None:
        out = self.nstep.push(obs, action, reward, next_obs, terminated, ended)
        if out is None:
            return
        if self.nstep.n_step == 1:  # a row per env: record which (the replay's episodes)
            out["env_index"] = self._env_ids
        if not valid.all():  # NEXT_STEP reset steps (one-step transitions: a row per env)
            out = {k: _rows(v, valid) for k, v in out.items()}
            if not valid.any():
                return
        self._store(out)

    def _store(self, out: dict[str, Any]) -> None:
        """Push finished transitions to the buffer and tell ``on_push`` their slots."""
        slots = self.buffer.push(**out)
        if self.on_push is not None:
            self.on_push(slots)

    def store_pending_windows(self) -> None:
        """Push the n-step windows in progress as truncated ones, bootstrapping from each env's
        current observation (:meth:`~super_sac.replay.NStepQueue.flush`), before the episodes
        are abandoned (nothing is pending before the envs' first reset)."""
        out = self.nstep.flush(self.obs)
        if out is not None:
            self._store(out)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The running episodes, the n-step windows and the counters (the env's internal state
        is rebuilt by :meth:`replay_episodes`)."""
        return {
            "obs": {k: torch.from_numpy(v.copy()) for k, v in self.obs.items()},
            "return": torch.from_numpy(self.episode_return.copy()),
            "len": torch.from_numpy(self.episode_len.copy()),
            "index": torch.from_numpy(self.episode_index.copy()),
            "actions": [self._actions_tensor(a) for a in self.episode_actions],
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "noise": self.noise.state_dict(),
            "nstep": self.nstep.state_dict(),
        }

    def _actions_tensor(self, actions: list[np.ndarray]) -> torch.Tensor:
        """One running episode's actions: ``(T, act_space_size)`` float32, or ``(T,)`` int64."""
        if self.agent.discrete:
            return torch.from_numpy(np.array(actions, dtype=np.int64).reshape(len(actions)))
        shape = (len(actions), self.agent.act_space_size)
        return torch.from_numpy(np.array(actions, dtype=np.float32).reshape(shape))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output (call :meth:`replay_episodes` afterwards)."""
        self.obs = {k: v.numpy().copy() for k, v in state["obs"].items()}
        self.episode_return = state["return"].numpy().copy()
        self.episode_len = state["len"].numpy().copy()
        self.episode_index = state["index"].numpy().copy()
        self.episode_actions = [list(a.numpy()) for a in state["actions"]]
        self.env_steps, self.episodes = int(state["env_steps"]), int(state["episodes"])
        self.noise.load_state_dict(state["noise"])
        self.nstep.load_state_dict(state["nstep"])

    def replay_episodes(self) -> bool:
        """Bring every env back to the checkpointed point of its running episode: reset it with
        the episode's seed and replay its actions. Exact for envs that are deterministic given
        their seed and actions (a warning names an env that does not return to its state).

        A ``SyncVectorEnv`` replays each sub-env on its own; any other vector env in
        ``DISABLED`` mode (an ``AsyncVectorEnv``, whose envs live in worker processes, or a
        vector wrapper, whose sub-envs lack its wrapping) replays all envs together through the
        batched API (:func:`~super_sac.vector_envs.replay_in_lockstep`).

        :return: ``False`` if the env cannot be replayed (not a vector env with ``DISABLED``
            autoreset and derived seeds); fresh episodes were started instead, after the n-step
            windows in progress were stored as truncated ones.
        """
        if not (self.autoreset is AutoresetMode.DISABLED and self.seeding == "derived"):
            self.store_pending_windows()
            self.reset_envs()
            return False
        seeds = [self.seed_of(i) for i in range(self.num_envs)]
        diverged = np.zeros(self.num_envs, dtype=bool)
        if isinstance(self.env, gym.vector.SyncVectorEnv):  # unwrapped: its sub-envs are ours
            replayed = []
            for i, sub in enumerate(self.env.envs):
                obs, _ = sub.reset(seed=seeds[i])
                for action in self.episode_actions[i]:
                    obs, *_ = sub.step(action)
                replayed.append(obs)
            batched = {k: np.stack([np.asarray(o[k]) for o in replayed]) for k in self.obs}
        else:
            batched, diverged = replay_in_lockstep(self.env, seeds, self.episode_actions)
        for i in range(self.num_envs):
            same = all(np.array_equal(np.asarray(batched[k][i]), self.obs[k][i]) for k in self.obs)
            if diverged[i] or not same:
                warnings.warn(
                    f"env {i} did not return to its checkpointed state when its episode was "
                    "replayed (the env is not deterministic given its seed and actions); the "
                    "resumed run continues from the replayed state.",
                    stacklevel=2,
                )
        for k in self.obs:
            self.obs[k][:] = batched[k]
        return True


def _rows(value: Any, keep: np.ndarray) -> Any:
    if isinstance(value, dict):
        return {k: v[keep] for k, v in value.items()}
    return np.asarray(value)[keep]
