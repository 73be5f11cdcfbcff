"""A quick-start SAC for users who do not want gin files: ``SAC(env).train(num_episodes=100)``.

:class:`SAC` is a thin front door to the library's engine. It builds the same
:class:`super_sac.Agent` (a :class:`super_sac.nets.FlatEncoder`, a tanh-Gaussian or deterministic
actor and a two-critic ensemble), its target copy and optimizers, and updates them only through
:func:`super_sac.learning.critic_update`, :func:`super_sac.learning.online_actor_update`,
:func:`super_sac.learning.alpha_update` and :func:`super_sac.learning_utils.soft_update`.
:class:`ReplayMemory` stores transitions in a :class:`super_sac.replay.ReplayBuffer`.

Users see raw ``Box`` observations and actions in the env's own bounds; inside, observations are
``{"obs": float32}`` dicts and actions live in the agent's normalised space ``[-1, 1]``, which is
also what the replay buffer holds.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode, VectorEnv
from tqdm.auto import tqdm

from super_sac import learning
from super_sac import learning_utils as lu
from super_sac.agent import Agent
from super_sac.loggers import TensorboardLogger
from super_sac.nets import FlatEncoder
from super_sac.nets.mlps import ContinuousDeterministicActor, ContinuousStochasticActor
from super_sac.replay import Batch, ReplayBuffer
from super_sac.utils import atomic_write_json, flush_denormals, get_device, set_seed
from super_sac.wrappers import has_finite_bounds

__all__ = [
    "POLICY_TYPES",
    "ActionScaler",
    "ReplayMemory",
    "SAC",
    "check_action_space",
    "check_spaces",
]

POLICY_TYPES = ("Gaussian", "Deterministic")
FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
TARGET_FILE = "target_agent.pt"
ALPHA_FILE = "log_alpha.pt"
OPTIMIZERS_FILE = "optimizers.pt"
_OBS_KEY = "obs"
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_VECTOR_SPEC_KWARGS = ("num_envs", "vectorization_mode", "vector_kwargs", "wrappers")


# --------------------------------------------------------------------------------------------
# Spaces and action scaling
# --------------------------------------------------------------------------------------------


def _single_spaces(env: Any) -> tuple[spaces.Space, spaces.Space]:
    """The per-env observation and action spaces of a single or a vector env."""
    if isinstance(env, VectorEnv):
        return env.single_observation_space, env.single_action_space
    return env.observation_space, env.action_space


def check_spaces(observation_space: spaces.Space, action_space: spaces.Space) -> None:
    """Raise a ``ValueError`` naming the fix unless the spaces suit :class:`SAC`.

    :param observation_space: must be a ``Box``.
    :param action_space: must be a ``Box`` with finite bounds.
    """
    if not isinstance(observation_space, spaces.Box):
        raise ValueError(
            f"SAC needs a Box observation space, got {observation_space}. Flatten the "
            "observation first (gymnasium.wrappers.FlattenObservation(env)), or use the gin "
            "loop super_sac.super_sac with an Encoder for dict or image observations."
        )
    check_action_space(action_space)


def check_action_space(action_space: spaces.Space) -> None:
    """Raise a ``ValueError`` naming the fix unless ``action_space`` is a bounded ``Box``."""
    if not isinstance(action_space, spaces.Box):
        raise ValueError(
            f"SAC needs a continuous (Box) action space, got {action_space}; discrete actions "
            "are not supported yet."
        )
    if not has_finite_bounds(action_space):
        raise ValueError(
            f"the action space {action_space} is unbounded, but SAC's actors output bounded "
            "actions that are rescaled to the env's bounds. Give the env its physical limits, "
            "e.g. env.action_space = gymnasium.spaces.Box(low, high) inside a "
            "gymnasium.ActionWrapper that clips to them."
        )


class ActionScaler:
    """Maps actions between the agent's ``[-1, 1]`` and a bounded ``Box``'s ``[low, high]``.

    ``to_env(a) = low + (a + 1) (high - low) / 2`` and ``to_unit`` is its inverse; both clip to
    the target range, so env-scale actions beyond the bounds map to the bounds.

    :param space: a ``Box`` with finite bounds.
    """

    def __init__(self, space: spaces.Box) -> None:
        self.space = space
        self.low = np.asarray(space.low, dtype=np.float64)
        self.high = np.asarray(space.high, dtype=np.float64)
        self.dtype = space.dtype
        self._tensors: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    def to_env(self, action: np.ndarray) -> np.ndarray:
        """``[-1, 1]`` -> env bounds, in the action space's dtype."""
        unit = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        scaled = self.low + (unit + 1.0) * 0.5 * (self.high - self.low)
        return np.clip(scaled, self.low, self.high).astype(self.dtype, copy=False)

    def to_unit(self, action: np.ndarray) -> np.ndarray:
        """Env bounds -> ``[-1, 1]`` (float32)."""
        scaled = np.asarray(action, dtype=np.float64)
        unit = 2.0 * (scaled - self.low) / (self.high - self.low) - 1.0
        return np.clip(unit, -1.0, 1.0).astype(np.float32)

    def to_env_tensor(self, action: torch.Tensor) -> torch.Tensor:
        """:meth:`to_env` for float32 tensors, on the tensor's device."""
        if action.device not in self._tensors:
            low = torch.as_tensor(self.low, dtype=torch.float32, device=action.device)
            high = torch.as_tensor(self.high, dtype=torch.float32, device=action.device)
            self._tensors[action.device] = (low, high)
        low, high = self._tensors[action.device]
        scaled = low + (action.clamp(-1.0, 1.0) + 1.0) * 0.5 * (high - low)
        return torch.minimum(torch.maximum(scaled, low), high)

    def same_bounds(self, other: ActionScaler) -> bool:
        """Whether ``other`` rescales to the same bounds."""
        return (
            self.low.shape == other.low.shape
            and np.array_equal(self.low, other.low)
            and np.array_equal(self.high, other.high)
        )


# --------------------------------------------------------------------------------------------
# Replay memory
# --------------------------------------------------------------------------------------------


class ReplayMemory:
    """A replay memory of single transitions, stored in a :class:`super_sac.replay.ReplayBuffer`.

    ``done`` is the *termination* flag: 1 means the episode reached a terminal state and the
    learner must not bootstrap from ``next_state``; a time-limit truncation is pushed with
    ``done = 0``. Transitions are one-step: the learner discounts them by its own ``gamma``.

    Actions: with ``action_space`` given, :meth:`push` takes env-scale actions and stores them
    normalised to ``[-1, 1]`` (clipped to the bounds), and :meth:`sample` returns env-scale
    actions again. Without it, actions are stored as pushed, and :class:`SAC` refuses to learn
    from actions outside ``[-1, 1]``. A :class:`SAC`'s own ``memory`` is built with its env's
    action space.

    :param capacity: maximum number of transitions (the oldest are overwritten).
    :param seed: seed of the sampling random number generator.
    :param action_space: the env's bounded ``Box`` action space (optional, see above).
    """

    def __init__(self, capacity: int, seed: int, action_space: spaces.Box | None = None) -> None:
        self.capacity = int(capacity)
        self.seed = seed
        self.buffer = ReplayBuffer(size=self.capacity, seed=seed, verbose=False)
        self.scaler = None
        if action_space is not None:
            check_action_space(action_space)
            self.scaler = ActionScaler(action_space)

    def __len__(self) -> int:
        return len(self.buffer)

    def push(
        self,
        state: np.ndarray,
        action: np.ndarray,
        reward: float,
        next_state: np.ndarray,
        done: bool | float,
    ) -> None:
        """Add one transition.

        :param state: observation before the action.
        :param action: the action taken (env scale when the memory has an ``action_space``).
        :param reward: the reward received.
        :param next_state: observation after the action (the true final one at an episode end).
        :param done: 1/True when the episode terminated (no bootstrap), 0/False otherwise.
        """
        self.push_batch(
            np.asarray(state)[None],
            np.atleast_1d(np.asarray(action, dtype=np.float32))[None],
            [reward],
            np.asarray(next_state)[None],
            [float(done)],
        )

    def push_batch(
        self,
        states: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_states: np.ndarray,
        dones: np.ndarray,
        *,
        normalized: bool = False,
    ) -> None:
        """Add ``B`` transitions at once (leading dimension ``B`` everywhere).

        :param states: ``(B, *obs_shape)``.
        :param actions: ``(B, act_dim)``.
        :param rewards: ``(B,)``.
        :param next_states: ``(B, *obs_shape)``.
        :param dones: ``(B,)`` termination flags.
        :param normalized: the actions are already in ``[-1, 1]`` (skip the rescaling).
        """
        actions = np.asarray(actions, dtype=np.float32)
        if self.scaler is not None and not normalized:
            actions = self.scaler.to_unit(actions)
        self.buffer.push(
            {_OBS_KEY: np.asarray(states, dtype=np.float32)},
            actions,
            np.asarray(rewards, dtype=np.float32),
            {_OBS_KEY: np.asarray(next_states, dtype=np.float32)},
            np.asarray(dones, dtype=np.float32),
            1.0,  # one-step transitions; the learner applies its gamma
        )

    def sample(
        self, batch_size: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Draw ``batch_size`` transitions uniformly, with replacement.

        :return: ``(state, action, reward, next_state, done)`` numpy arrays; ``reward`` and
            ``done`` have shape ``(batch_size,)``, actions are env scale when the memory has an
            ``action_space``.
        """
        batch = self.buffer.sample(batch_size)
        action = batch.action.numpy()
        if self.scaler is not None:
            action = self.scaler.to_env(action)
        return (
            batch.obs[_OBS_KEY].numpy(),
            action,
            batch.reward.numpy()[:, 0],
            batch.next_obs[_OBS_KEY].numpy(),
            batch.done.numpy()[:, 0],
        )

    def sample_batch(
        self, batch_size: int, gamma: float, device: str | torch.device = "cpu"
    ) -> Batch:
        """A learner's batch: normalised actions, ``discount = gamma``, tensors on ``device``.

        :raises ValueError: if the memory has no ``action_space`` and holds actions outside
            ``[-1, 1]``.
        """
        batch = self.buffer.sample(batch_size, device="cpu")
        if self.scaler is None and not bool((batch.action.abs() <= 1.0 + 1e-6).all()):
            raise ValueError(
                "this ReplayMemory holds actions outside [-1, 1], but SAC learns from normalised "
                "actions. Build it as ReplayMemory(capacity, seed, action_space=env.action_space) "
                "so that env-scale actions are normalised on push, or push actions in [-1, 1]."
            )

        def move(t: torch.Tensor) -> torch.Tensor:
            return t.to(device, non_blocking=True)

        return dataclasses.replace(
            batch,
            obs={k: move(v) for k, v in batch.obs.items()},
            action=move(batch.action),
            reward=move(batch.reward),
            next_obs={k: move(v) for k, v in batch.next_obs.items()},
            done=move(batch.done),
            discount=torch.full_like(batch.reward, gamma, device=device),
            weights=move(batch.weights),
        )

    def save_buffer(
        self, env_name: str, suffix: str = "", save_path: str | Path | None = None
    ) -> str:
        """Write the memory to one ``.npz`` file (no pickles).

        :param env_name: used in the default file name.
        :param suffix: appended to the default file name.
        :param save_path: the file; default ``checkpoints/sac_buffer_<env_name>_<suffix>.npz``.
        :return: the path written.
        """
        if save_path is None:
            save_path = Path("checkpoints") / f"sac_buffer_{env_name}_{suffix}.npz"
        Path(save_path).parent.mkdir(parents=True, exist_ok=True)
        return self.buffer.save(save_path)

    def load_buffer(self, save_path: str | Path) -> None:
        """Replace the contents with a file written by :meth:`save_buffer`.

        :param save_path: the ``.npz`` file.
        """
        self.buffer.load(save_path)


# --------------------------------------------------------------------------------------------
# Logging
# --------------------------------------------------------------------------------------------


class _WandbRun:
    """Scalars to a wandb run."""

    def __init__(self, project: str, entity: str | None, name: str | None, tags: Any, config: Any):
        try:
            import wandb
        except ImportError as err:
            raise ImportError(
                'wandb_project needs the wandb package: pip install "super_sac[wandb]" '
                "(or leave wandb_project=None)"
            ) from err
        self.run = wandb.init(project=project, entity=entity, name=name, tags=tags, config=config)

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


# --------------------------------------------------------------------------------------------
# Loading helpers
# --------------------------------------------------------------------------------------------


def _env_spec(env: Any) -> EnvSpec | None:
    """The spec that rebuilds one (non-vector) copy of ``env``, if gymnasium knows it."""
    if not isinstance(env, VectorEnv):
        return env.spec
    sub_envs = getattr(env, "envs", None)
    if sub_envs:
        return sub_envs[0].spec
    if env.spec is None:
        return None
    kwargs = {k: v for k, v in env.spec.kwargs.items() if k not in _VECTOR_SPEC_KWARGS}
    return dataclasses.replace(env.spec, kwargs=kwargs)


def _spec_json(spec: EnvSpec | None) -> str | None:
    if spec is None:
        return None
    try:
        return spec.to_json()
    except (ValueError, TypeError):  # kwargs that JSON cannot hold
        return None


def _space_description(space: spaces.Box) -> dict[str, Any]:
    return {
        "shape": list(space.shape),
        "dtype": str(space.dtype),
        "low": np.asarray(space.low, dtype=np.float64).ravel().tolist(),
        "high": np.asarray(space.high, dtype=np.float64).ravel().tolist(),
    }


def _resolve_pretrained(repo_or_path: str | Path, token: str | None, version: str | None) -> Path:
    """A local folder, or the snapshot of a Hugging Face Hub repository ``namespace/name``."""
    path = Path(repo_or_path).expanduser()
    if path.is_dir():
        return path
    name = str(repo_or_path)
    if not _HUB_ID.fullmatch(name):
        raise FileNotFoundError(
            f"{name!r} is neither a local folder nor a Hugging Face Hub id (namespace/name)"
        )
    try:
        from huggingface_hub import snapshot_download
    except ImportError as err:
        raise ImportError(
            f"there is no local folder {name!r}, and loading it from the Hugging Face Hub needs "
            'the huggingface_hub package: pip install "super_sac[hub]"'
        ) from err
    try:
        return Path(snapshot_download(repo_id=name, revision=version, token=token))
    except Exception as err:  # network, authentication, missing repository or revision
        raise RuntimeError(
            f"could not download {name!r} (revision {version or 'main'}) from the Hugging Face "
            f"Hub: {type(err).__name__}: {err}. Check the id, the revision, the access token and "
            "the network; offline, copy the folder to this machine and pass its path."
        ) from err


def _rebuild_env(env_config: dict[str, Any]) -> gym.Env:
    spec_json = env_config.get("spec")
    if spec_json is None:
        raise ValueError(
            "this checkpoint does not record how to build its env (it was not made with "
            "gymnasium.make, or its arguments are not JSON); pass it: "
            "SAC.from_pretrained(path, env=my_env)"
        )
    try:
        return gym.make(EnvSpec.from_json(spec_json))
    except Exception as err:
        raise RuntimeError(
            f"could not rebuild the env {env_config.get('id')!r} with gymnasium.make "
            f"({type(err).__name__}: {err}); import the package that registers it, or pass the "
            "env: SAC.from_pretrained(path, env=my_env)"
        ) from err


def _check_env_matches(env: Any, env_config: dict[str, Any]) -> None:
    obs_space, act_space = _single_spaces(env)
    saved_obs, saved_act = env_config["observation_space"], env_config["action_space"]
    diffs = []
    if list(obs_space.shape or ()) != saved_obs["shape"]:
        diffs.append(f"observation shape {obs_space.shape} != saved {tuple(saved_obs['shape'])}")
    if not isinstance(act_space, spaces.Box) or list(act_space.shape) != saved_act["shape"]:
        diffs.append(f"action space {act_space} != saved shape {tuple(saved_act['shape'])}")
    else:
        bounds = _space_description(act_space)
        if not (
            np.allclose(bounds["low"], saved_act["low"])
            and np.allclose(bounds["high"], saved_act["high"])
        ):
            diffs.append(
                f"action bounds {bounds['low']}..{bounds['high']} != saved "
                f"{saved_act['low']}..{saved_act['high']}"
            )
    if diffs:
        raise ValueError(
            "the env does not match the one the agent was saved with: " + "; ".join(diffs)
        )


def _default_run_path(prefix: str) -> Path:
    return Path("runs") / f"{prefix}_{datetime.now():%Y%m%d-%H%M%S}"


# --------------------------------------------------------------------------------------------
# SAC
# --------------------------------------------------------------------------------------------


class SAC:
    """Soft Actor-Critic in one object: build it on an env, train, save, reload.

    The agent is :class:`super_sac.Agent` with a :class:`~super_sac.nets.FlatEncoder`, two
    critics whose minimum forms the targets (clipped double-Q), a target agent that follows by
    Polyak averaging (``tau``, every ``target_update_interval`` updates), and Adam optimizers
    (critics: ``lr``; policy: ``policy_lr``; log-alpha: ``lr``).

    * ``policy_type="Gaussian"``: SAC's tanh-Gaussian policy with entropy coefficient ``alpha``,
      tuned toward the target entropy ``-act_dim`` when ``automatic_entropy_tuning`` (starting
      from ``alpha``). Next actions in the targets come from the online policy.
    * ``policy_type="Deterministic"``: a tanh-deterministic policy, ``alpha = 0`` and no tuning;
      it explores with Gaussian noise of std ``exploration_noise`` (in ``[-1, 1]`` units,
      clipped), and its targets use a target policy without smoothing noise (as DDPG does).

    ``seed`` seeds Python's, numpy's and torch's global generators (the initial weights and the
    policy's samples come from them), the replay memory and the exploration noise.

    :param env: a gymnasium env (or, for :meth:`train_vector`, a vector env) with a ``Box``
        observation space and a bounded ``Box`` action space.
    :param updates_per_step: gradient updates per env step (per vector step in
        :meth:`train_vector`).
    :param batch_size: transitions per update.
    :param memory_capacity: replay memory capacity in transitions.
    :param lr: learning rate of the critics and of log-alpha.
    :param policy_lr: learning rate of the policy.
    :param gamma: discount factor.
    :param tau: Polyak rate of the target networks.
    :param alpha: entropy coefficient (initial value when tuned).
    :param policy_type: ``"Gaussian"`` or ``"Deterministic"``.
    :param target_update_interval: updates between target-network updates.
    :param automatic_entropy_tuning: tune alpha toward the target entropy ``-act_dim``.
    :param hidden_size: width of the hidden layers of the policy and the critics.
    :param device: ``"cpu"``, ``"cuda"`` or ``"auto"``.
    :param seed: random seed.
    :param log_dir: write tensorboard scalars here (``None``: no tensorboard).
    :param log_every_updates: log the losses every this many updates.
    :param wandb_project: log to this wandb project too (needs ``pip install wandb``).
    :param wandb_entity: wandb entity (user or team).
    :param wandb_run_name: wandb run name.
    :param wandb_tags: wandb run tags.
    :param wandb_config: extra entries for the wandb run's config.
    :param exploration_noise: exploration noise std of the deterministic policy.
    """

    def __init__(
        self,
        env: Any,
        updates_per_step: int = 1,
        batch_size: int = 256,
        memory_capacity: int = 1_000_000,
        lr: float = 3e-4,
        policy_lr: float = 3e-4,
        gamma: float = 0.99,
        tau: float = 0.005,
        alpha: float = 0.2,
        policy_type: str = "Gaussian",
        target_update_interval: int = 1,
        automatic_entropy_tuning: bool = False,
        hidden_size: int = 256,
        device: str | torch.device = "cpu",
        seed: int = 42,
        log_dir: str | Path | None = None,
        log_every_updates: int = 1,
        wandb_project: str | None = None,
        wandb_entity: str | None = None,
        wandb_run_name: str | None = None,
        wandb_tags: list[str] | None = None,
        wandb_config: dict[str, Any] | None = None,
        exploration_noise: float = 0.1,
    ) -> None:
        self._config = {k: v for k, v in locals().items() if k not in ("self", "env")}
        self._config.update(device=str(device), log_dir=None if log_dir is None else str(log_dir))
        self._check_arguments(policy_type, updates_per_step, batch_size, target_update_interval)
        observation_space, action_space = _single_spaces(env)
        check_spaces(observation_space, action_space)
        self.env = env
        self.observation_space, self.action_space = observation_space, action_space
        self.scaler = ActionScaler(action_space)
        self.updates_per_step, self.batch_size = int(updates_per_step), int(batch_size)
        self.gamma, self.tau = float(gamma), float(tau)
        self.policy_type = policy_type
        self.target_update_interval = int(target_update_interval)
        self.exploration_noise = float(exploration_noise)
        self.seed = seed
        self.device = get_device(device)
        if self.device.type == "cpu":
            flush_denormals()
        self.obs_dim = int(np.prod(observation_space.shape))
        self.act_dim = int(np.prod(action_space.shape))
        set_seed(seed)
        self._build_networks(hidden_size, lr, policy_lr)
        self._build_alpha(alpha, automatic_entropy_tuning, lr)
        self.memory = ReplayMemory(memory_capacity, seed, action_space=action_space)
        self.updates = 0
        self.total_steps = 0
        self._rng = np.random.default_rng(seed)
        self._resets = 0
        self.log_every_updates = max(1, int(log_every_updates))
        self._loggers = self._open_loggers(log_dir, wandb_project)

    # ------------------------------------------------------------------ construction
    @staticmethod
    def _check_arguments(
        policy_type: str, updates_per_step: int, batch_size: int, target_update_interval: int
    ) -> None:
        if policy_type not in POLICY_TYPES:
            raise ValueError(f"policy_type must be one of {POLICY_TYPES}, got {policy_type!r}")
        for name, value in (
            ("updates_per_step", updates_per_step),
            ("batch_size", batch_size),
            ("target_update_interval", target_update_interval),
        ):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")

    @property
    def deterministic(self) -> bool:
        """Whether the policy is deterministic (``policy_type="Deterministic"``)."""
        return self.policy_type == "Deterministic"

    def _build_networks(self, hidden_size: int, lr: float, policy_lr: float) -> None:
        actor_cls = (
            ContinuousDeterministicActor if self.deterministic else ContinuousStochasticActor
        )
        self.agent = Agent(
            self.act_dim,
            FlatEncoder(self.obs_dim),
            actor_network_cls=actor_cls,
            num_critics=2,
            hidden_size=hidden_size,
        ).to(self.device)
        self.target_agent = learning.make_target_agent(self.agent)
        self.critic_optim = learning.build_optimizer(
            learning.ParamGroup(list(self.agent.critic.parameters()), lr),
            learning.ParamGroup(list(self.agent.encoder.parameters()), lr),
        )
        self.policy_optim = learning.build_optimizer(
            learning.ParamGroup(list(self.agent.actor.parameters()), policy_lr)
        )
        target, online = self.target_agent, self.agent
        modules = ("critic", "encoder", "actor") if self.deterministic else ("critic", "encoder")
        self._target_pairs = (
            lu.params_of(*(getattr(target, m) for m in modules)),
            lu.params_of(*(getattr(online, m) for m in modules)),
        )

    def _build_alpha(self, alpha: float, tuning: bool, lr: float) -> None:
        if self.deterministic:
            if tuning:
                warnings.warn(
                    "automatic_entropy_tuning is ignored for the deterministic policy (alpha = 0)",
                    stacklevel=3,
                )
            alpha, tuning = 0.0, False
        if alpha < 0 or (tuning and alpha <= 0):
            raise ValueError(f"alpha must be >= 0 (> 0 with automatic_entropy_tuning), got {alpha}")
        self.automatic_entropy_tuning = bool(tuning)
        self.log_alpha = torch.tensor(
            math.log(alpha) if alpha > 0 else -math.inf, device=self.device, requires_grad=tuning
        )
        self.alpha_optim = torch.optim.Adam([self.log_alpha], lr=lr) if tuning else None
        self.target_entropy = lu.continuous_target_entropy(self.act_dim, 1.0)

    def _open_loggers(self, log_dir: str | Path | None, wandb_project: str | None) -> list[Any]:
        loggers: list[Any] = []
        if log_dir is not None:
            loggers.append(TensorboardLogger(Path(log_dir)))
        if wandb_project is not None:
            cfg = self._config
            config = {**{k: v for k, v in cfg.items() if not k.startswith("wandb")}}
            config.update(cfg["wandb_config"] or {})
            loggers.append(
                _WandbRun(
                    wandb_project,
                    cfg["wandb_entity"],
                    cfg["wandb_run_name"],
                    cfg["wandb_tags"],
                    config,
                )
            )
        return loggers

    # ------------------------------------------------------------------ names of the seed API
    @property
    def policy(self) -> torch.nn.Module:
        """The policy network (the agent's actor)."""
        return self.agent.actor

    @property
    def critic(self) -> torch.nn.Module:
        """The critic ensemble, output ``(2, B, 1)``."""
        return self.agent.critic

    @property
    def critic_target(self) -> torch.nn.Module:
        """The target critic ensemble."""
        return self.target_agent.critic

    @property
    def alpha(self) -> float:
        """The current entropy coefficient."""
        return float(self.log_alpha.detach().exp())

    # ------------------------------------------------------------------ acting
    def _obs_tensor(self, states: Any) -> torch.Tensor:
        """``(N, *obs_shape)`` float32 on the agent's device."""
        obs = torch.as_tensor(states, dtype=torch.float32).to(self.device)
        if tuple(obs.shape[1:]) != tuple(self.observation_space.shape):
            raise ValueError(
                f"expected states of shape (N, {', '.join(map(str, self.observation_space.shape))})"
                f", got {tuple(obs.shape)}"
            )
        return obs

    def _unit_actions(self, obs: torch.Tensor, evaluate: bool) -> torch.Tensor:
        """Actions in ``[-1, 1]`` for a batch of observation tensors."""
        obs_dict = {_OBS_KEY: obs}
        if evaluate:
            return self.agent.forward(obs_dict, batched=True)
        if not self.deterministic:
            return self.agent.sample_action(obs_dict, batched=True)
        mean = self.agent.forward(obs_dict, batched=True)
        noise = self._rng.normal(0.0, self.exploration_noise, size=tuple(mean.shape))
        return (mean + torch.as_tensor(noise, dtype=mean.dtype, device=mean.device)).clamp(-1, 1)

    def _random_unit_actions(self, n: int) -> np.ndarray:
        return self._rng.uniform(-1.0, 1.0, size=(n, self.act_dim)).astype(np.float32)

    def select_action(self, state: np.ndarray, evaluate: bool = False) -> np.ndarray:
        """The action for one observation, in the env's bounds.

        :param state: a raw observation of the env's observation space.
        :param evaluate: the deterministic action (the policy's mean) instead of an
            exploration action.
        :return: ``(act_dim,)`` numpy array in the action space's dtype.
        """
        unit = self._unit_actions(self._obs_tensor(np.asarray(state)[None]), evaluate)
        return self.scaler.to_env(unit[0].cpu().numpy()).reshape(self.action_space.shape)

    def select_action_batch(
        self, states: np.ndarray | torch.Tensor, evaluate: bool = False, return_tensor: bool = False
    ) -> np.ndarray | torch.Tensor:
        """Actions for a batch of observations (e.g. a vector env's), in the env's bounds.

        :param states: ``(N, *obs_shape)`` numpy array or tensor.
        :param evaluate: deterministic actions instead of exploration actions.
        :param return_tensor: return a float32 tensor on the agent's device instead of numpy.
        :return: ``(N, act_dim)`` actions.
        """
        unit = self._unit_actions(self._obs_tensor(states), evaluate)
        if return_tensor:
            return self.scaler.to_env_tensor(unit)
        return self.scaler.to_env(unit.cpu().numpy())

    # ------------------------------------------------------------------ learning
    def _sample(self, memory: ReplayMemory | ReplayBuffer, batch_size: int) -> Batch:
        if isinstance(memory, ReplayMemory):
            if memory.scaler is not None and not memory.scaler.same_bounds(self.scaler):
                raise ValueError(
                    "this ReplayMemory normalises actions to other bounds than this agent's env"
                )
            return memory.sample_batch(batch_size, self.gamma, self.device)
        if isinstance(memory, ReplayBuffer):
            if memory.keys != (_OBS_KEY,):
                raise ValueError(
                    f"a ReplayBuffer for SAC must hold {{'{_OBS_KEY}': ...}} observations, "
                    f"got keys {memory.keys}"
                )
            return memory.sample(batch_size, device=self.device)
        raise TypeError(
            f"memory must be a super_sac.ReplayMemory or ReplayBuffer, got {type(memory).__name__}"
        )

    def update_parameters(
        self, memory: ReplayMemory | ReplayBuffer, batch_size: int, updates: int
    ) -> tuple[float, float, float, float, float]:
        """One update of the critics, the policy, alpha (when tuned) and the targets.

        The targets move when ``updates % target_update_interval == 0``; afterwards the agent's
        update counter is ``updates + 1``. A :class:`ReplayMemory`'s one-step transitions are
        discounted by ``gamma``; a :class:`~super_sac.replay.ReplayBuffer` keeps its stored
        discounts (n-step transitions of the gin loop).

        :param memory: where to sample from.
        :param batch_size: transitions in the batch.
        :param updates: the number of updates done before this one.
        :return: ``(qf1_loss, qf2_loss, policy_loss, alpha_loss, alpha)``: each critic's mean
            squared TD error, the policy loss, the entropy-coefficient loss (0 when alpha is
            fixed) and alpha after the update.
        """
        batch = self._sample(memory, batch_size)
        alpha = self.log_alpha.detach().exp()
        critic_logs = learning.critic_update(
            self.agent,
            self.target_agent,
            batch,
            self.critic_optim,
            alpha=alpha,
            target_critic_ensemble_n=2,
            use_target_actor=self.deterministic,
            target_noise_std=0.0,
        )
        actor_logs = learning.online_actor_update(
            self.agent, batch, self.policy_optim, alpha=alpha, actor_q_reduction="min"
        )
        alpha_loss = torch.zeros((), device=self.device)
        if self.alpha_optim is not None:
            alpha_logs = learning.alpha_update(
                self.log_alpha, self.alpha_optim, actor_logs["actor/log_prob"], self.target_entropy
            )
            alpha_loss, alpha = alpha_logs["alpha/loss"], alpha_logs["alpha/value"]
        if updates % self.target_update_interval == 0:
            lu.soft_update(*self._target_pairs, self.tau)
        self.updates = updates + 1
        member_mse = critic_logs["critic/member_mse"]
        values = torch.stack(
            [member_mse[0], member_mse[1], actor_logs["actor/loss"], alpha_loss, alpha]
        ).tolist()  # the one host sync of an update
        if self._loggers and updates % self.log_every_updates == 0:
            names = ("loss/qf1", "loss/qf2", "loss/policy", "loss/alpha", "alpha/value")
            self._log(dict(zip(names, values)), self.updates)
        return tuple(values)  # type: ignore[return-value]

    def _maybe_update(self, warmup_steps: int) -> None:
        """``updates_per_step`` updates, once warm-up is over and a batch is available."""
        if self.total_steps < warmup_steps or len(self.memory) < self.batch_size:
            return
        for _ in range(self.updates_per_step):
            self.update_parameters(self.memory, self.batch_size, self.updates)

    def _log(self, metrics: dict[str, float], step: int) -> None:
        for logger in self._loggers:
            logger.log(metrics, step)

    def _reset_seed(self) -> int | None:
        """The agent's seed for its first reset of the env, ``None`` (continue) afterwards."""
        self._resets += 1
        return self.seed if self._resets == 1 else None

    # ------------------------------------------------------------------ train (single env)
    def train(
        self,
        num_episodes: int = 1,
        *,
        max_steps: int | None = None,
        save_best: bool = False,
        save_path: str | Path | None = None,
        verbose: bool = True,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Train for ``num_episodes`` episodes of the (single) env, with a tqdm progress bar.

        Every env step stores one transition (``done`` = terminated: a truncated episode still
        bootstraps) and then runs ``updates_per_step`` updates once the memory holds a batch.

        :param num_episodes: episodes to run.
        :param max_steps: cut episodes at this many steps (a truncation); ``None``: the env's own
            end.
        :param save_best: save the agent whenever an episode beats the best return so far.
        :param save_path: the folder for those saves (default ``runs/sac_best_<date-time>``).
        :param verbose: show the progress bar.
        :param kwargs: ``save_best_with_gradients`` (bool, default False: include the optimizer
            states in the best saves) and ``warmup_steps`` (int, default 0: act uniformly at
            random, and do not update, for the agent's first this many env steps).
        :return: ``{"episode_rewards": [...], "best_reward": float, "updates": int}``
            (``updates``: the agent's total update count).
        """
        options = {"save_best_with_gradients": False, "warmup_steps": 0}
        unknown = sorted(set(kwargs) - set(options))
        if unknown:
            raise TypeError(f"unknown train() options {unknown}; recognised: {sorted(options)}")
        options.update(kwargs)
        if isinstance(self.env, VectorEnv):
            raise TypeError("this SAC was built on a vector env: use train_vector(total_steps=...)")
        if save_best and save_path is None:
            save_path = _default_run_path("sac_best")
        rewards: list[float] = []
        best = -math.inf
        bar = tqdm(range(num_episodes), desc="SAC", unit="episode", disable=not verbose)
        for _ in bar:
            reward = self._run_episode(max_steps, int(options["warmup_steps"]))
            rewards.append(reward)
            self._log({"train/episode_reward": reward}, self.total_steps)
            if reward > best:
                best = reward
                if save_best:
                    self.save(save_path, save_gradients=bool(options["save_best_with_gradients"]))
            bar.set_postfix(reward=f"{reward:.2f}", best=f"{best:.2f}", updates=self.updates)
        return {"episode_rewards": rewards, "best_reward": best, "updates": self.updates}

    def _run_episode(self, max_steps: int | None, warmup_steps: int) -> float:
        """One training episode; returns its undiscounted return."""
        state, _ = self.env.reset(seed=self._reset_seed())
        total, steps = 0.0, 0
        while True:
            if self.total_steps < warmup_steps:
                unit = self._random_unit_actions(1)
            else:
                unit = self._unit_actions(self._obs_tensor(np.asarray(state)[None]), False)
                unit = unit.cpu().numpy()
            action = self.scaler.to_env(unit[0]).reshape(self.action_space.shape)
            next_state, reward, terminated, truncated, _ = self.env.step(action)
            self.memory.push_batch(
                np.asarray(state)[None],
                unit,
                [reward],
                np.asarray(next_state)[None],
                [float(terminated)],
                normalized=True,
            )
            self.total_steps += 1
            steps += 1
            total += float(reward)
            self._maybe_update(warmup_steps)
            state = next_state
            if terminated or truncated or (max_steps is not None and steps >= max_steps):
                return total

    # ------------------------------------------------------------------ train (vector env)
    def train_vector(
        self,
        *,
        total_steps: int,
        warmup_steps: int = 10_000,
        log_every: int = 2_000,
        reward_window: int = 200,
        save_best: bool = False,
        save_path: str | Path | None = None,
        save_best_with_gradients: bool = False,
        verbose: bool = True,
    ) -> dict[str, Any]:
        """Train on a gymnasium vector env (the ``env`` this SAC was built on).

        Autoreset modes: ``SAME_STEP`` (the final observation of an ended episode is read from
        ``info["final_obs"]``), ``NEXT_STEP`` (the step that resets an env crosses episodes and
        is not stored) and ``DISABLED`` (ended envs are reset here). Only ``terminated`` stops
        bootstrapping. Each vector step stores ``num_envs`` transitions and then runs
        ``updates_per_step`` updates.

        :param total_steps: env transitions to collect (summed over the envs; rounded up to a
            multiple of ``num_envs``).
        :param warmup_steps: transitions with uniformly random actions before the policy acts
            and updates start.
        :param log_every: every this many transitions, print (``verbose``) and log the mean
            return of the last ``reward_window`` episodes, and save when it is the best yet
            (``save_best``).
        :param reward_window: episodes in that mean.
        :param save_best: save the agent when the windowed mean return improves.
        :param save_path: the folder for those saves (default ``runs/sac_best_<date-time>``).
        :param save_best_with_gradients: include the optimizer states in those saves.
        :param verbose: print the progress lines.
        :return: ``{"episode_rewards": [...], "best_reward": float, "updates": int,
            "env_steps": int}``; ``best_reward`` is the best windowed mean seen at a log point.
        """
        env = self.env
        if not isinstance(env, VectorEnv):
            raise TypeError(
                "train_vector needs a gymnasium.vector.VectorEnv, e.g. gymnasium.make_vec(id, "
                "num_envs=8, vector_kwargs={'autoreset_mode': AutoresetMode.SAME_STEP}); "
                "use train() for a single env"
            )
        if save_best and save_path is None:
            save_path = _default_run_path("sac_best")
        mode = AutoresetMode(env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
        state = _VectorProgress(env.num_envs)
        obs, _ = env.reset(seed=self._reset_seed())
        next_log, best = log_every, -math.inf
        while state.steps < total_steps:
            obs = self._vector_step(env, mode, obs, state, warmup_steps)
            if state.steps >= next_log or state.steps >= total_steps:
                next_log += log_every
                mean = state.windowed_mean(reward_window)
                self._report_vector(state, mean, reward_window, verbose)
                if mean is not None and mean > best:
                    best = mean
                    if save_best:
                        self.save(save_path, save_gradients=save_best_with_gradients)
        return {
            "episode_rewards": state.returns,
            "best_reward": best,
            "updates": self.updates,
            "env_steps": state.steps,
        }

    def _vector_step(
        self,
        env: VectorEnv,
        mode: AutoresetMode,
        obs: np.ndarray,
        state: _VectorProgress,
        warmup_steps: int,
    ) -> np.ndarray:
        """Act in every env, store the valid transitions, update; return the next observations."""
        n = env.num_envs
        if self.total_steps < warmup_steps:
            unit = self._random_unit_actions(n)
        else:
            unit = self._unit_actions(self._obs_tensor(obs), False).cpu().numpy()
        next_obs, reward, terminated, truncated, info = env.step(self.scaler.to_env(unit))
        ended = np.asarray(terminated) | np.asarray(truncated)
        true_next = np.array(next_obs, copy=True)
        if mode is AutoresetMode.SAME_STEP:
            for i in np.flatnonzero(ended):
                true_next[i] = info["final_obs"][i]
        keep = ~state.resetting
        self.memory.push_batch(
            np.asarray(obs)[keep],
            unit[keep],
            np.asarray(reward)[keep],
            true_next[keep],
            np.asarray(terminated, dtype=np.float32)[keep],
            normalized=True,
        )
        state.record(np.asarray(reward, dtype=np.float64), ended, keep)
        state.resetting = ended & (mode is AutoresetMode.NEXT_STEP)
        if mode is AutoresetMode.DISABLED and ended.any():
            next_obs, _ = env.reset(options={"reset_mask": ended})
        state.steps += n
        self.total_steps += n
        self._maybe_update(warmup_steps)
        return next_obs

    def _report_vector(
        self, state: _VectorProgress, mean: float | None, window: int, verbose: bool
    ) -> None:
        if mean is not None:
            self._log({"train/episode_reward_mean": mean}, self.total_steps)
        if verbose:
            shown = "n/a" if mean is None else f"{mean:.2f}"
            print(
                f"steps {state.steps:>9,d} | episodes {len(state.returns):>6,d} | mean return "
                f"(last {window}) {shown} | updates {self.updates:,d}",
                flush=True,
            )

    # ------------------------------------------------------------------ persistence
    def get_param_env(self) -> dict[str, Any]:
        """A JSON-friendly description of the env and the policy (stored in ``config.json``).

        :return: ``{"env": {"id", "spec", "vector", "num_envs", "observation_space",
            "action_space"}, "policy": {"type", "actor", "hidden_size", "obs_dim", "act_dim",
            "num_critics", "automatic_entropy_tuning", "alpha", "target_entropy"}}``.
        """
        spec = _env_spec(self.env)
        vector = isinstance(self.env, VectorEnv)
        return {
            "env": {
                "id": None if spec is None else spec.id,
                "spec": _spec_json(spec),
                "vector": vector,
                "num_envs": self.env.num_envs if vector else 1,
                "observation_space": {
                    "shape": list(self.observation_space.shape),
                    "dtype": str(self.observation_space.dtype),
                },
                "action_space": _space_description(self.action_space),
            },
            "policy": {
                "type": self.policy_type,
                "actor": type(self.agent.actor).__name__,
                "hidden_size": self.agent.hidden_size,
                "obs_dim": self.obs_dim,
                "act_dim": self.act_dim,
                "num_critics": self.agent.num_critics,
                "automatic_entropy_tuning": self.automatic_entropy_tuning,
                "alpha": self.alpha,
                "target_entropy": self.target_entropy,
            },
        }

    def save(self, path: str | Path | None = None, save_gradients: bool = False) -> Path:
        """Save the agent to a folder.

        The folder holds ``config.json`` (the constructor arguments, :meth:`get_param_env`, the
        counters), ``agent.pt`` (:meth:`super_sac.Agent.save`), ``target_agent.pt``,
        ``log_alpha.pt`` and, with ``save_gradients``, ``optimizers.pt`` (the Adam states of the
        critics, the policy and alpha, and the update counter) so that training can continue
        exactly where it stopped.

        :param path: the folder (created if needed); default ``runs/sac_<date-time>``.
        :param save_gradients: include the optimizer states.
        :return: the folder.
        """
        folder = Path(path) if path is not None else _default_run_path("sac")
        folder.mkdir(parents=True, exist_ok=True)
        self.agent.save(folder)
        self.target_agent.save(folder / TARGET_FILE)
        torch.save({"log_alpha": self.log_alpha.detach().cpu()}, folder / ALPHA_FILE)
        optimizers = folder / OPTIMIZERS_FILE
        if save_gradients:
            torch.save(self._optimizer_states(), optimizers)
        elif optimizers.exists():
            optimizers.unlink()  # stale states of an earlier save must not be resumed
        atomic_write_json(folder / CONFIG_FILE, self._saved_config(save_gradients))
        return folder

    def _optimizer_states(self) -> dict[str, Any]:
        return {
            "critic": self.critic_optim.state_dict(),
            "policy": self.policy_optim.state_dict(),
            "alpha": None if self.alpha_optim is None else self.alpha_optim.state_dict(),
            "updates": self.updates,
        }

    def _saved_config(self, with_optimizers: bool) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "algorithm": "SAC",
            "init_args": self._config,
            **self.get_param_env(),
            "updates": self.updates,
            "total_steps": self.total_steps,
            "optimizer_states": with_optimizers,
        }

    @classmethod
    def from_pretrained(
        cls,
        repo_or_path: str | Path,
        access_token: str | None = None,
        version: str | None = None,
        load_gradients: bool = False,
        env: Any = None,
        device: str | torch.device | None = None,
    ) -> SAC:
        """Load an agent written by :meth:`save`.

        :param repo_or_path: a local folder, or a Hugging Face Hub repository
            ``namespace/name`` (downloaded with ``huggingface_hub``, ``pip install
            "super_sac[hub]"``).
        :param access_token: Hub token for a private repository.
        :param version: Hub revision (branch, tag or commit).
        :param load_gradients: restore the optimizer states and the update counter (the folder
            must have been saved with ``save_gradients=True``), to continue training exactly.
        :param env: the env to act in; default: rebuilt with ``gymnasium.make`` from the saved
            env spec.
        :param device: override the saved device.
        :return: the agent (without loggers: pass ``log_dir`` by building a new SAC to log).
        """
        folder = _resolve_pretrained(repo_or_path, access_token, version)
        config_file = folder / CONFIG_FILE
        if not config_file.exists():
            raise FileNotFoundError(f"{folder} holds no {CONFIG_FILE}; it was not made by SAC.save")
        config = json.loads(config_file.read_text())
        if config.get("algorithm") != "SAC" or config.get("format") != FORMAT_VERSION:
            raise ValueError(f"{config_file} is not a SAC checkpoint of format {FORMAT_VERSION}")
        env = _rebuild_env(config["env"]) if env is None else env
        _check_env_matches(env, config["env"])
        init = dict(config["init_args"])
        init.update(log_dir=None, wandb_project=None)
        if device is not None:
            init["device"] = str(device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # settings were already warned about when saved
            sac = cls(env, **init)
        sac._load_weights(folder, load_gradients)
        sac.total_steps = int(config.get("total_steps", 0))
        return sac

    def _load_weights(self, folder: Path, load_gradients: bool) -> None:
        self.agent.load(folder)
        self.target_agent.load(folder / TARGET_FILE)
        saved = torch.load(folder / ALPHA_FILE, map_location=self.device, weights_only=True)
        with torch.no_grad():
            self.log_alpha.copy_(saved["log_alpha"])
        if not load_gradients:
            return
        file = folder / OPTIMIZERS_FILE
        if not file.exists():
            raise FileNotFoundError(
                f"{folder} holds no optimizer states; save with save_gradients=True to resume "
                "training, or load with load_gradients=False"
            )
        states = torch.load(file, map_location=self.device, weights_only=True)
        self.critic_optim.load_state_dict(states["critic"])
        self.policy_optim.load_state_dict(states["policy"])
        if self.alpha_optim is not None and states["alpha"] is not None:
            self.alpha_optim.load_state_dict(states["alpha"])
        self.updates = int(states["updates"])

    def close(self) -> None:
        """Flush and close the loggers (tensorboard, wandb). The env is left open."""
        for logger in self._loggers:
            logger.close()
        self._loggers = []


class _VectorProgress:
    """Episode bookkeeping of :meth:`SAC.train_vector`."""

    def __init__(self, num_envs: int) -> None:
        self.episode_return = np.zeros(num_envs, dtype=np.float64)
        self.resetting = np.zeros(num_envs, dtype=bool)  # NEXT_STEP: the next step is a reset
        self.returns: list[float] = []
        self.steps = 0

    def record(self, reward: np.ndarray, ended: np.ndarray, keep: np.ndarray) -> None:
        """Add the stored steps' rewards; close the episodes that ``ended``."""
        self.episode_return[keep] += reward[keep]
        for i in np.flatnonzero(ended & keep):
            self.returns.append(float(self.episode_return[i]))
            self.episode_return[i] = 0.0

    def windowed_mean(self, window: int) -> float | None:
        """The mean return of the last ``window`` episodes (``None`` before the first ends)."""
        if not self.returns:
            return None
        return float(np.mean(self.returns[-window:]))
