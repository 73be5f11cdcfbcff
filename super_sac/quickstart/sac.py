"""The quick-start :class:`SAC`: ``SAC(env).train(num_episodes=100)``, no gin file needed."""

from __future__ import annotations

import math
import numbers
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from super_sac import learning_utils as lu
from super_sac.agent import Agent
from super_sac.collector import Collector
from super_sac.config import TrainConfig
from super_sac.learner import Learner
from super_sac.loggers import TensorboardLogger, WandbLogger
from super_sac.nets import FlatEncoder
from super_sac.nets.mlps import ContinuousDeterministicActor, ContinuousStochasticActor
from super_sac.quickstart.memory import OBS_KEY, ReplayMemory, check_spaces, single_spaces
from super_sac.quickstart.networks import DeterministicPolicy, GaussianPolicy, QNetwork
from super_sac.quickstart.persistence import (
    SavingMixin,
)
from super_sac.quickstart.training import TrainingMixin, check_count, is_int
from super_sac.replay import Batch, ReplayBuffer
from super_sac.utils import flush_denormals, get_device, set_seed
from super_sac.wrappers import ActionScaler

POLICY_TYPES = ("Gaussian", "Deterministic")
#: the x-axis of each group of logged metrics: losses, alpha and weights against updates,
#: training returns against env steps (``SAC.total_steps``)
QUICKSTART_AXES = {"loss/": "updates", "alpha/": "updates", "train/": "env_steps"}


# the settings checked by check_arguments: counts (ints >= 1), real ranges, flags
COUNT_SETTINGS = ("updates_per_step", "batch_size", "memory_capacity", "target_update_interval",
                  "hidden_size", "log_every_updates")  # fmt: skip
_REAL_RANGES = {  # name: (low, low included, high, what a usual value is)
    "lr": (0.0, False, math.inf, "e.g. 3e-4"),
    "policy_lr": (0.0, False, math.inf, "e.g. 3e-4"),
    "gamma": (0.0, True, 1.0, "e.g. 0.99"),
    "tau": (0.0, False, 1.0, "e.g. 0.005; 1 copies the networks"),
    "alpha": (0.0, True, math.inf, "e.g. 0.2"),
    "exploration_noise": (0.0, True, math.inf, "e.g. 0.1"),
}
_BOOLS = ("automatic_entropy_tuning", "verbose_histogram")


def check_arguments(config: dict[str, Any]) -> None:
    """Refuse a :class:`SAC` setting of the wrong type or out of range before anything is built
    (a negative learning rate would train by gradient ascent, ``tau = 0`` freezes the targets),
    naming the setting and a usual value.

    :param config: the constructor's arguments by name.
    :raises TypeError: for a value of the wrong type (a float count, a string rate, ...).
    :raises ValueError: for a value out of its range, or a batch larger than the memory.
    """
    if config["policy_type"] not in POLICY_TYPES:
        raise ValueError(
            f"SAC: policy_type must be one of {POLICY_TYPES}, got {config['policy_type']!r}"
        )
    for name in COUNT_SETTINGS:
        check_count("SAC", name, config[name], 1)
    for name, (low, closed, high, usual) in _REAL_RANGES.items():
        value = config[name]
        if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
            raise TypeError(
                f"SAC: {name} must be a number, got {value!r} ({type(value).__name__}). "
                f"Fix: pass a float, {usual}"
            )
        inside = (value >= low if closed else value > low) and value <= high
        if not (math.isfinite(value) and inside):
            bounds = f"{'[' if closed else '('}{low:g}, {high:g}]"
            raise ValueError(f"SAC: {name} must be in {bounds}, got {value}. Fix: {usual}")
    for name in _BOOLS:
        if not isinstance(config[name], (bool, np.bool_)):
            raise TypeError(f"SAC: {name} must be True or False, got {config[name]!r}")
    if not is_int(config["seed"]):
        raise TypeError(f"SAC: seed must be an int, got {config['seed']!r}")
    if config["batch_size"] > config["memory_capacity"]:
        raise ValueError(
            f"SAC: batch_size {config['batch_size']} is larger than memory_capacity "
            f"{config['memory_capacity']}, so the memory never holds a batch and no update "
            "would ever run. Fix: raise memory_capacity or lower batch_size"
        )


@torch.no_grad()
def soft_update(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    """The seed interface's ``soft_update``: Polyak averaging of every parameter,
    ``theta_target <- (1 - tau) theta_target + tau theta_source`` (one fused ``lerp_``, as the
    loop's own target updates; :func:`super_sac.learning_utils.soft_update`).

    :param target: the module that follows.
    :param source: the module it follows (same architecture).
    :param tau: the rate in ``[0, 1]``; 1 copies ``source``.
    """
    targets, sources = list(target.parameters()), list(source.parameters())
    if len(targets) != len(sources) or any(t.shape != s.shape for t, s in zip(targets, sources)):
        raise ValueError("soft_update needs two modules of the same architecture")
    lu.soft_update(targets, sources, float(tau))


def _plain_values(config: dict[str, Any]) -> dict[str, Any]:
    """The checked settings as Python ints, floats and bools (numpy scalars would not go into
    ``config.json``)."""
    plain: dict[str, Any] = {name: int(config[name]) for name in (*COUNT_SETTINGS, "seed")}
    plain.update({name: float(config[name]) for name in _REAL_RANGES})
    plain.update({name: bool(config[name]) for name in _BOOLS})
    return plain


class SAC(TrainingMixin, SavingMixin):
    """Soft Actor-Critic in one object: build it on an env, train, save, reload.

    The agent is :class:`super_sac.Agent` with a :class:`~super_sac.nets.FlatEncoder`, two
    critics whose minimum forms the targets (clipped double-Q), a target agent that follows by
    Polyak averaging (``tau``, every ``target_update_interval`` updates), and Adam optimizers
    (critics: ``lr``; policy: ``policy_lr``; log-alpha: ``lr``).

    It is a facade over the pieces of the gin loop (:func:`super_sac.super_sac`): the settings
    below become a :class:`~super_sac.config.TrainConfig` (:attr:`settings`), the networks are
    updated by the same :class:`~super_sac.learner.Learner` and the env is stepped by the same
    :class:`~super_sac.collector.Collector` (behind the same :class:`~super_sac.wrappers.
    NormActionSpace` rescaling), so both follow one set of rules.

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
    :param verbose_histogram: also log histograms of every weight to tensorboard (at the same
        updates as the losses; needs ``log_dir``).
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
        batch_size: int = 32,
        memory_capacity: int = 10_000_000,
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
        verbose_histogram: bool = False,
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
        check_arguments(self._config)
        c = self._config
        c.update(_plain_values(c))  # numpy scalars as Python numbers from here on
        observation_space, action_space = single_spaces(env)
        check_spaces(observation_space, action_space)
        self.env = env
        self.observation_space, self.action_space = observation_space, action_space
        self.scaler = ActionScaler(action_space)
        self.updates_per_step, self.batch_size = c["updates_per_step"], c["batch_size"]
        self.gamma, self.tau = c["gamma"], c["tau"]
        self.policy_type = policy_type
        self.target_update_interval = c["target_update_interval"]
        self.exploration_noise = c["exploration_noise"]
        self.seed = seed = c["seed"]
        self.device = get_device(device)
        if self.device.type == "cpu":
            flush_denormals()
        self.obs_dim = int(np.prod(observation_space.shape))
        self.act_dim = int(np.prod(action_space.shape))
        set_seed(seed)
        alpha, tuning = self._entropy_settings(c["alpha"], c["automatic_entropy_tuning"])
        self.automatic_entropy_tuning = tuning
        actor_cls = (
            ContinuousDeterministicActor if self.deterministic else ContinuousStochasticActor
        )
        self.agent = Agent(
            self.act_dim,
            FlatEncoder(self.obs_dim, standardize=False),  # whatever gin files were parsed
            actor_network_cls=actor_cls,
            num_critics=2,
            hidden_size=c["hidden_size"],
        ).to(self.device)
        self.settings = self._loop_settings(c["lr"], c["policy_lr"], alpha, tuning)
        self.learner = Learner(self.agent, self.settings, seed)
        self.memory = ReplayMemory(c["memory_capacity"], seed, action_space=action_space)
        self._total_steps = 0
        self._rng = np.random.default_rng(seed)
        self._collector: Collector | None = None
        self._seed_views: dict[str, tuple[torch.nn.Module, torch.nn.Module]] = {}
        self.log_every_updates = c["log_every_updates"]
        self.verbose_histogram = c["verbose_histogram"]
        if self.verbose_histogram and log_dir is None:
            warnings.warn(
                "verbose_histogram=True writes tensorboard histograms, which need log_dir: "
                "none are written. Fix: pass log_dir",
                stacklevel=2,
            )
        self._loggers = self._open_loggers(log_dir, wandb_project)

    # ------------------------------------------------------------------ construction
    @property
    def deterministic(self) -> bool:
        """Whether the policy is deterministic (``policy_type="Deterministic"``)."""
        return self.policy_type == "Deterministic"

    def _entropy_settings(self, alpha: float, tuning: bool) -> tuple[float, bool]:
        if self.deterministic:
            if tuning:
                warnings.warn(
                    "automatic_entropy_tuning is ignored for the deterministic policy (alpha = 0)",
                    stacklevel=3,
                )
            return 0.0, False
        if tuning and alpha <= 0:
            raise ValueError(
                f"SAC: alpha must be > 0 with automatic_entropy_tuning (it starts the tuning of "
                f"log alpha), got {alpha}. Fix: pass e.g. alpha=0.2, or turn the tuning off"
            )
        return float(alpha), bool(tuning)

    def _loop_settings(
        self, lr: float, policy_lr: float, alpha: float, tuning: bool
    ) -> TrainConfig:
        """This SAC as settings of the gin loop (what the learner and collector follow)."""
        return TrainConfig(
            critic_lr=lr,
            encoder_lr=lr,
            actor_lr=policy_lr,
            alpha_lr=lr if tuning else 0.0,
            init_alpha=alpha,
            gamma=self.gamma,
            mlp_tau=self.tau,
            encoder_tau=self.tau,
            target_delay=self.target_update_interval,
            use_target_actor=self.deterministic,
            target_noise_std=0.0,
            target_critic_ensemble_n=2,
            actor_q_reduction="min",
            batch_size=self.batch_size,
            use_exploration_process=self.deterministic,
            exploration_param_init=self.exploration_noise,
            exploration_param_final=self.exploration_noise,
            seed=self.seed,
        )

    def _open_loggers(self, log_dir: str | Path | None, wandb_project: str | None) -> list[Any]:
        loggers: list[Any] = []
        if log_dir is not None:
            loggers.append(TensorboardLogger(Path(log_dir)))
        if wandb_project is not None:
            cfg = self._config
            config = {k: v for k, v in cfg.items() if not k.startswith("wandb")}
            config.update(cfg["wandb_config"] or {})
            loggers.append(
                WandbLogger(
                    None,
                    cfg["wandb_entity"],
                    wandb_project,
                    cfg["wandb_run_name"],
                    config,
                    tags=cfg["wandb_tags"],
                    step_metrics=QUICKSTART_AXES,
                )
            )
        return loggers

    # ------------------------------------------------------------------ names of the seed API
    def _seed_view(self, name: str, network: torch.nn.Module) -> torch.nn.Module:
        """The interface's module over ``network`` (built once, rebuilt if the agent's network
        object was replaced)."""
        cached = self._seed_views.get(name)
        if cached is not None and cached[0] is network:
            if isinstance(cached[1], DeterministicPolicy):
                cached[1].noise_std = self.exploration_noise  # the agent's current setting
            return cached[1]
        dims = (self.obs_dim, self.act_dim, self.agent.hidden_size, self.action_space)
        if name == "policy" and self.deterministic:
            view: torch.nn.Module = DeterministicPolicy(
                *dims, actor=network, noise_std=self.exploration_noise, noise_clip=None
            )
        elif name == "policy":
            view = GaussianPolicy(*dims, actor=network)
        else:
            view = QNetwork(*dims, critic=network)
        view.to(self.device)
        self._seed_views[name] = (network, view)
        return view

    @property
    def policy(self) -> GaussianPolicy | DeterministicPolicy:
        """The policy as the interface's :class:`GaussianPolicy` (or
        :class:`DeterministicPolicy`): the agent's actor (``agent.actor``, parameters shared)
        with env-unit actions. ``policy.sample(state)`` gives ``(action, log_prob, mean)``; a
        deterministic policy's ``sample`` adds this agent's exploration noise."""
        return self._seed_view("policy", self.agent.actor)  # type: ignore[return-value]

    @property
    def critic(self) -> QNetwork:
        """The two critics as a :class:`QNetwork`, ``critic(state, action) -> (Q1, Q2)`` with
        env-unit actions; the library's ensemble (output ``(2, B, 1)``, ``[-1, 1]`` actions) is
        ``agent.critic``."""
        return self._seed_view("critic", self.agent.critic)  # type: ignore[return-value]

    @property
    def target_agent(self) -> Agent:
        """The target networks (critics, encoder and, for the deterministic policy, actor)."""
        return self.learner.target_agent

    @property
    def critic_target(self) -> QNetwork:
        """The target critics as a :class:`QNetwork` (``target_agent.critic``, shared)."""
        return self._seed_view("critic_target", self.learner.target_agent.critic)  # type: ignore[return-value]

    @property
    def log_alpha(self) -> torch.Tensor:
        """Log of the entropy coefficient (``-inf`` for the deterministic policy)."""
        return self.learner.log_alpha

    @property
    def alpha(self) -> float:
        """The current entropy coefficient."""
        return float(self.learner.alpha)

    @property
    def target_entropy(self) -> float:
        """The entropy target of alpha's tuning, ``-act_dim``."""
        return self.learner.target_entropy

    @property
    def critic_optim(self) -> torch.optim.Optimizer:
        """Adam over the critics (and the encoder)."""
        return self.learner.critic_optimizer

    @property
    def policy_optim(self) -> torch.optim.Optimizer:
        """Adam over the policy."""
        return self.learner.actor_optimizer

    @property
    def alpha_optim(self) -> torch.optim.Optimizer | None:
        """Adam over log-alpha (``None`` unless ``automatic_entropy_tuning``)."""
        return self.learner.alpha_optimizer

    @property
    def updates(self) -> int:
        """Updates done so far (the learner's counters: one critic and one policy update each)."""
        return self.learner.critic_updates

    @updates.setter
    def updates(self, value: int) -> None:
        self.learner.critic_updates = self.learner.actor_updates = int(value)

    @property
    def total_steps(self) -> int:
        """Env transitions collected by :meth:`train` and :meth:`train_vector` so far."""
        return self._collector.env_steps if self._collector is not None else self._total_steps

    @total_steps.setter
    def total_steps(self, value: int) -> None:
        self._total_steps = int(value)
        if self._collector is not None:
            self._collector.env_steps = int(value)

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
        obs_dict = {OBS_KEY: obs}
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
        check_count("update_parameters", "batch_size", batch_size, 1)
        if isinstance(memory, (ReplayMemory, ReplayBuffer)) and batch_size > len(memory):
            raise ValueError(
                f"update_parameters: batch_size {batch_size} is larger than the "
                f"{len(memory)} transitions in the memory (the batch would repeat them). Fix: "
                "update once len(memory) >= batch_size"
            )
        if isinstance(memory, ReplayMemory):
            if memory.scaler is not None and not memory.scaler.same_bounds(self.scaler):
                raise ValueError(
                    "this ReplayMemory normalises actions to other bounds than this agent's env"
                )
            return memory.sample_batch(batch_size, self.gamma, self.device)
        if isinstance(memory, ReplayBuffer):
            if memory.keys != (OBS_KEY,):
                raise ValueError(
                    f"a ReplayBuffer for SAC must hold {{'{OBS_KEY}': ...}} observations, "
                    f"got keys {memory.keys}"
                )
            return memory.sample(batch_size, device=self.device)
        raise TypeError(
            f"memory must be a super_sac.ReplayMemory or ReplayBuffer, got {type(memory).__name__}"
        )

    def update_parameters(
        self, memory: ReplayMemory | ReplayBuffer, batch_size: int, updates: int
    ) -> tuple[float, float, float, float, float]:
        """One update of the critics, the policy and alpha (when tuned), through the gin loop's
        :class:`~super_sac.learner.Learner` and its target rule: the target critics move when
        ``(updates + 1) % target_update_interval == 0`` (the ``target_delay`` of the gin loop),
        a deterministic policy's target after every policy update. Afterwards the agent's update
        counter is ``updates + 1``. A :class:`ReplayMemory`'s one-step transitions are
        discounted by ``gamma``; a :class:`~super_sac.replay.ReplayBuffer` keeps its stored
        discounts (n-step transitions of the gin loop).

        :param memory: where to sample from.
        :param batch_size: transitions in the batch.
        :param updates: the number of updates done before this one.
        :return: ``(qf1_loss, qf2_loss, policy_loss, alpha_loss, alpha)``: each critic's mean
            squared TD error, the policy loss, the entropy-coefficient loss (0 when alpha is
            fixed) and alpha after the update.
        """
        learner = self.learner
        batch = self._sample(memory, batch_size)
        alpha = learner.alpha
        self.updates = updates
        critic_logs = learner.critic_step(batch, alpha, target_noise_std=0.0)
        actor_logs = learner.pg_actor_step(batch, alpha)
        alpha_loss = actor_logs.get("alpha/loss", torch.zeros((), device=self.device))
        alpha = actor_logs.get("alpha/value", alpha)
        member_mse = critic_logs["critic/member_mse"]
        values = torch.stack(
            [member_mse[0], member_mse[1], actor_logs["actor/loss"], alpha_loss, alpha]
        ).tolist()  # the one host sync of an update
        if self._loggers and updates % self.log_every_updates == 0:
            names = ("loss/qf1", "loss/qf2", "loss/policy", "loss/alpha", "alpha/value")
            self._log(dict(zip(names, values)), self.updates)
            if self.verbose_histogram:
                weights = {f"weights/{k}": v for k, v in self.agent.named_parameters()}
                for logger in self._loggers:
                    logger.log_histograms(weights, self.updates)
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
