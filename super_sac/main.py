"""``super_sac()``: the gin-configurable training loop.

The loop is split into small named parts (:class:`Trainer`): ``collect`` (env steps into the
n-step queue and the replay buffer), ``update`` (critic, actor and alpha updates, target
networks), ``evaluate``, ``log`` and ``save``. A run goes through phases; this version has the
online phase, and the behavioral-cloning and offline phases plug in beside it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gin
import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from tqdm.auto import tqdm

from super_sac import learning
from super_sac import learning_utils as lu
from super_sac.agent import Agent
from super_sac.evaluation import evaluate_agent
from super_sac.loggers import LOGGING_METHODS, NullLogger, make_logger, resolve_wandb_target
from super_sac.replay import NStepQueue, ReplayBuffer
from super_sac.utils import atomic_write_json, atomic_write_text, make_run_dir, set_seed


@dataclass
class TrainConfig:
    """Every setting of :func:`super_sac` (see its docstring for their meaning)."""

    num_steps_offline: int = 0
    num_steps_online: int = 1_000_000
    random_warmup_steps: int = 1_000
    bc_warmup_steps: int = 0
    afbc_actor_updates_per_step: int = 1
    pg_actor_updates_per_step: int = 1
    critic_updates_per_step: int = 1
    use_afbc_update_online: bool = False
    use_pg_update_online: bool = True
    transitions_per_online_step: int = 1
    actor_delay: int = 1
    infinite_bootstrap: bool = False
    ignore_all_dones: bool = False
    max_episode_steps: int | None = None
    batch_size: int = 256
    reuse_replay_dicts: bool = True
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    encoder_lr: float = 3e-4
    actor_clip: float | None = None
    critic_clip: float | None = None
    encoder_clip: float | None = None
    actor_l2: float = 0.0
    critic_l2: float = 0.0
    encoder_l2: float = 0.0
    pop: bool = False
    dr3_coeff: float = 0.0
    inverse_markov_coeff: float = 0.0
    contrastive_markov_coeff: float = 0.0
    smoothness_markov_coeff: float = 0.0
    smoothness_markov_max_dist: float = 0.1
    init_alpha: float = 1.0
    alpha_lr: float = 3e-4
    target_entropy_mul: float = 1.0
    use_exploration_process: bool = False
    exploration_param_init: float = 0.1
    exploration_param_final: float = 0.1
    exploration_param_anneal: int = 1
    exploration_update_clip: float | None = 0.5
    target_noise_std: float | None = None
    target_critic_ensemble_n: int = 2
    gamma: float = 0.99
    mlp_tau: float = 0.005
    encoder_tau: float = 0.01
    target_delay: int = 1
    n_step: int = 1
    use_target_actor: bool = False
    actor_q_reduction: str = "min"
    weighted_bellman_temp: float | None = None
    weight_type: str = "sunrise"
    afbc_per: bool = False
    augmenter: Any = None
    encoder_lambda: float = 0.0
    actor_lambda: float = 0.0
    aug_mix: float = 1.0
    render: bool = False
    eval_interval: int = 5_000
    eval_episodes: int = 10
    logging_method: str = "tensorboard"
    wandb_entity: str | None = None
    wandb_project: str | None = None
    base_save_path: str | None = None
    name: str = "ssac_run"
    save_to_disk: bool = True
    log_to_disk: bool = True
    log_interval: int = 1_000
    save_interval: int = 10_000
    save_best: bool = False
    verbosity: int = 1
    seed: int | None = None


# Settings of features that other parts of the roadmap add; each must stay at its default here.
_NOT_YET = {
    "num_steps_offline": (0, "the offline (AFBC) phase"),
    "bc_warmup_steps": (0, "the behavioral cloning phase"),
    "use_afbc_update_online": (False, "advantage-filtered BC actor updates"),
    "afbc_per": (False, "advantage-prioritized actor batches"),
    "pop": (False, "PopArt normalisation"),
    "dr3_coeff": (0.0, "the DR3 regulariser"),
    "inverse_markov_coeff": (0.0, "Markov state abstraction losses"),
    "contrastive_markov_coeff": (0.0, "Markov state abstraction losses"),
    "smoothness_markov_coeff": (0.0, "Markov state abstraction losses"),
    "weighted_bellman_temp": (None, "SUNRISE weighted Bellman backups"),
    "augmenter": (None, "data augmentation"),
    "encoder_lambda": (0.0, "augmentation-invariance regularisation"),
    "actor_lambda": (0.0, "augmentation-invariance regularisation"),
}


class ConfigError(ValueError):
    """A setting (or a combination of settings) that cannot work; raised before training."""


def _err(binding: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(f"super_sac.{binding}: {problem}. Fix: {fix}")


def validate_config(
    cfg: TrainConfig, agent: Agent, buffer: ReplayBuffer, train_env: Any, test_env: gym.Env
) -> None:
    """Reject settings that cannot work, with messages naming the binding and the fix."""
    for key, (default, feature) in _NOT_YET.items():
        value = getattr(cfg, key)
        if value != default and not (key == "weighted_bellman_temp" and value == 0):
            raise NotImplementedError(
                f"super_sac.{key} = {value!r} needs {feature}, which this version of super_sac "
                f"does not implement yet. Fix: leave super_sac.{key} at {default!r}."
            )
    positive = (
        "num_steps_online",
        "critic_updates_per_step",
        "pg_actor_updates_per_step",
        "transitions_per_online_step",
        "batch_size",
        "target_delay",
        "actor_delay",
        "eval_interval",
        "log_interval",
        "save_interval",
        "n_step",
        "target_critic_ensemble_n",
    )
    for key in positive:
        if getattr(cfg, key) < 1:
            raise _err(f"{key} = {getattr(cfg, key)}", "must be >= 1", f"set {key} to 1 or more")
    for key in ("random_warmup_steps", "eval_episodes", "exploration_param_anneal"):
        if getattr(cfg, key) < 0:
            raise _err(f"{key} = {getattr(cfg, key)}", "must be >= 0", "use a non-negative value")
    if not 0.0 <= cfg.gamma <= 1.0:
        raise _err(f"gamma = {cfg.gamma}", "the discount must lie in [0, 1]", "use e.g. 0.99")
    for key in ("mlp_tau", "encoder_tau"):
        if not 0.0 < getattr(cfg, key) <= 1.0:
            raise _err(f"{key} = {getattr(cfg, key)}", "must lie in (0, 1]", "use e.g. 0.005")
    if cfg.target_critic_ensemble_n > agent.num_critics:
        raise _err(
            f"target_critic_ensemble_n = {cfg.target_critic_ensemble_n}",
            f"exceeds Agent.num_critics = {agent.num_critics}",
            "set target_critic_ensemble_n <= Agent.num_critics (2 of 2 for SAC/TD3, "
            "2 of 10 for REDQ)",
        )
    if cfg.actor_q_reduction not in lu.CRITIC_REDUCTIONS:
        raise _err(
            f"actor_q_reduction = {cfg.actor_q_reduction!r}",
            "unknown reduction",
            f"choose one of {lu.CRITIC_REDUCTIONS}",
        )
    if cfg.logging_method not in LOGGING_METHODS:
        raise _err(
            f"logging_method = {cfg.logging_method!r}",
            "unknown logging method",
            f"choose one of {LOGGING_METHODS}",
        )
    if cfg.logging_method == "wandb" and cfg.log_to_disk:
        resolve_wandb_target(cfg.wandb_entity, cfg.wandb_project)
    if not cfg.use_pg_update_online:
        raise _err(
            "use_pg_update_online = False",
            "no actor update would run online (AFBC online updates are not implemented yet)",
            "set use_pg_update_online = True",
        )
    if buffer.size < cfg.random_warmup_steps:
        raise _err(
            f"random_warmup_steps = {cfg.random_warmup_steps}",
            f"exceeds the replay buffer's size ({buffer.size}), so warm-up data would be "
            "overwritten before training starts",
            "enlarge the buffer or warm up for less",
        )
    if agent.stochastic:
        if cfg.alpha_lr > 0 and cfg.init_alpha <= 0:
            raise _err(
                f"init_alpha = {cfg.init_alpha}",
                "automatic entropy tuning (alpha_lr > 0) needs a positive initial alpha",
                "set init_alpha > 0, or alpha_lr = 0 to disable tuning",
            )
    else:
        if cfg.init_alpha != 0 or cfg.alpha_lr != 0:
            raise _err(
                f"init_alpha = {cfg.init_alpha}, alpha_lr = {cfg.alpha_lr}",
                f"the actor {type(agent.actor).__name__} is deterministic and has no entropy",
                "set init_alpha = 0 and alpha_lr = 0 (as ddpg.gin and td3.gin do), or use "
                "ContinuousStochasticActor",
            )
        if not cfg.use_exploration_process:
            raise _err(
                "use_exploration_process = False",
                "a deterministic actor would never explore",
                "set use_exploration_process = True (Gaussian action noise)",
            )
    _validate_envs(cfg, agent, train_env, test_env)


def _validate_envs(cfg: TrainConfig, agent: Agent, train_env: Any, test_env: gym.Env) -> None:
    for label, env in (("train_env", train_env), ("test_env", test_env)):
        obs_space = getattr(env, "single_observation_space", env.observation_space)
        act_space = getattr(env, "single_action_space", env.action_space)
        if not isinstance(obs_space, spaces.Dict):
            raise ConfigError(
                f"{label} returns {type(obs_space).__name__} observations, but super_sac needs "
                "dict observations. Fix: wrap the env with super_sac.wrappers.SimpleGymWrapper "
                "(Box -> {'obs': ...}) or your own ObservationWrapper returning a dict."
            )
        if isinstance(act_space, spaces.Discrete):
            raise NotImplementedError(
                f"{label} has a Discrete action space, which needs SAC-Discrete; this version "
                "of super_sac does not implement it yet."
            )
        if not isinstance(act_space, spaces.Box):
            raise ConfigError(f"{label} action space {act_space} is not a Box")
        if not (np.all(np.isfinite(act_space.low)) and np.all(np.isfinite(act_space.high))):
            raise ConfigError(
                f"{label} has an unbounded action space {act_space}. Fix: give the env finite "
                "action bounds, then wrap it with super_sac.wrappers.NormActionSpace."
            )
        if not (np.allclose(act_space.low, -1.0) and np.allclose(act_space.high, 1.0)):
            raise ConfigError(
                f"{label} action bounds are [{act_space.low}, {act_space.high}], but the library "
                "acts in [-1, 1]. Fix: wrap the env with super_sac.wrappers.NormActionSpace."
            )
        if int(np.prod(act_space.shape)) != agent.act_space_size:
            raise ConfigError(
                f"{label} has {int(np.prod(act_space.shape))} action dimensions but "
                f"Agent.act_space_size = {agent.act_space_size}. Fix: build the Agent with "
                f"act_space_size={int(np.prod(act_space.shape))}."
            )
    num_envs = getattr(train_env, "num_envs", 1)
    if cfg.transitions_per_online_step % num_envs:
        raise _err(
            f"transitions_per_online_step = {cfg.transitions_per_online_step}",
            f"is not a multiple of the {num_envs} parallel envs",
            f"use a multiple of {num_envs}",
        )
    if isinstance(train_env, gym.vector.VectorEnv):
        mode = train_env.metadata.get("autoreset_mode")
        if mode not in (AutoresetMode.SAME_STEP, AutoresetMode.SAME_STEP.value):
            raise ConfigError(
                f"train_env is a vector env with autoreset mode {mode}; super_sac reads the "
                "true final observation of every episode from the same step. Fix: build it with "
                "autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP."
            )


def as_vector_env(env: gym.Env | gym.vector.VectorEnv) -> gym.vector.VectorEnv:
    """A single env becomes a one-env ``SyncVectorEnv`` in ``SAME_STEP`` autoreset mode."""
    if isinstance(env, gym.vector.VectorEnv):
        return env
    return gym.vector.SyncVectorEnv([lambda: env], autoreset_mode=AutoresetMode.SAME_STEP)


def _final_observations(
    next_obs: dict[str, np.ndarray], info: dict[str, Any], ended: np.ndarray
) -> dict[str, np.ndarray]:
    """Replace the reset observations of envs that just ended by their true final ones."""
    if not ended.any():
        return next_obs
    out = {k: v.copy() for k, v in next_obs.items()}
    for i in np.flatnonzero(ended):
        final = info["final_obs"][i]
        for k in out:
            out[k][i] = final[k]
    return out


class Trainer:
    """The parts of one training run. Build it with :func:`super_sac`."""

    def __init__(
        self,
        agent: Agent,
        buffer: ReplayBuffer,
        train_env: Any,
        test_env: gym.Env,
        cfg: TrainConfig,
    ) -> None:
        self.cfg = cfg
        self.agent = agent
        self.buffer = buffer
        self.env = as_vector_env(train_env)
        self.test_env = test_env
        self.device = agent.device
        self.num_envs = self.env.num_envs
        self.np_rng = np.random.default_rng(
            cfg.seed if cfg.seed is not None else np.random.randint(2**31 - 1)
        )
        self.target_agent = learning.make_target_agent(agent)
        self._build_optimizers()
        self.noise = lu.GaussianExplorationNoise(
            cfg.exploration_param_init, cfg.exploration_param_final, cfg.exploration_param_anneal
        )
        self.nstep = NStepQueue(self.num_envs, cfg.n_step, cfg.gamma)
        self.buffer.allocate(self.env.single_observation_space, self.env.single_action_space)
        if cfg.seed is not None:
            self.buffer.seed(cfg.seed)
        # counters
        self.step = 0
        self.env_steps = 0
        self.critic_updates = 0
        self.actor_updates = 0
        self.episodes = 0
        self.best_return = -math.inf
        self.last_eval: dict[str, float] = {}
        self.eval_history: list[dict[str, float]] = []
        self.last_logs: dict[str, torch.Tensor] = {}
        self.recent_returns: list[float] = []
        self.phase = "online"
        # the run directory and logger are made by ``open_run``
        self.run_dir: Path | None = None
        self.logger: NullLogger = NullLogger()

    # ------------------------------------------------------------------ set-up
    def _build_optimizers(self) -> None:
        cfg, agent = self.cfg, self.agent
        self.critic_optimizer = learning.build_optimizer(
            learning.ParamGroup(
                list(agent.critic.parameters()), cfg.critic_lr, cfg.critic_l2, cfg.critic_clip
            ),
            learning.ParamGroup(
                list(agent.encoder.parameters()), cfg.encoder_lr, cfg.encoder_l2, cfg.encoder_clip
            ),
        )
        self.actor_optimizer = learning.build_optimizer(
            learning.ParamGroup(
                list(agent.actor.parameters()), cfg.actor_lr, cfg.actor_l2, cfg.actor_clip
            )
        )
        init_log_alpha = math.log(cfg.init_alpha) if cfg.init_alpha > 0 else -math.inf
        self.log_alpha = torch.tensor(
            init_log_alpha, device=self.device, requires_grad=cfg.alpha_lr > 0
        )
        self.alpha_optimizer = (
            torch.optim.Adam([self.log_alpha], lr=cfg.alpha_lr) if cfg.alpha_lr > 0 else None
        )
        self.target_entropy = lu.continuous_target_entropy(
            agent.act_space_size, cfg.target_entropy_mul
        )
        tgt = self.target_agent
        self._critic_pairs = (lu.params_of(tgt.critic), lu.params_of(agent.critic))
        self._encoder_pairs = (lu.params_of(tgt.encoder), lu.params_of(agent.encoder))
        self._actor_pairs = (lu.params_of(tgt.actor), lu.params_of(agent.actor))

    def open_run(self) -> None:
        """Create the run directory, write the configuration and start the logger."""
        cfg = self.cfg
        if not (cfg.save_to_disk or cfg.log_to_disk):
            return
        base = cfg.base_save_path or os.environ.get("SSAC_SAVE", "./saves")
        self.run_dir = make_run_dir(base, cfg.name)
        atomic_write_text(
            self.run_dir / "config.gin",
            gin.operative_config_str() or "# no gin bindings were used for this run\n",
        )
        atomic_write_json(self.run_dir / "hparams.json", self.hparams())
        if cfg.log_to_disk:
            self.logger = make_logger(
                cfg.logging_method,
                self.run_dir,
                name=cfg.name,
                config=self.hparams(),
                wandb_entity=cfg.wandb_entity,
                wandb_project=cfg.wandb_project,
            )

    def hparams(self) -> dict[str, Any]:
        """The resolved settings of the loop and the agent, JSON-friendly."""
        out = {k: v for k, v in dataclasses.asdict(self.cfg).items() if k != "augmenter"}
        out["agent"] = self.agent._signature()
        out["buffer_size"] = self.buffer.size
        out["num_envs"] = self.num_envs
        return out

    # ------------------------------------------------------------------ collect
    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    def _choose_actions(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        cfg = self.cfg
        shape = (self.num_envs, self.agent.act_space_size)
        if self.env_steps < cfg.random_warmup_steps:
            return self.np_rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
        if cfg.use_exploration_process:
            action = self.agent.forward(obs, batched=True)
            noise = self.np_rng.normal(0.0, self.noise.std, size=shape)
            return np.clip(action + noise, -1.0, 1.0).astype(np.float32)
        return self.agent.sample_action(obs, batched=True).astype(np.float32, copy=False)

    def collect(self, num_transitions: int) -> None:
        """Step the train env for ``num_transitions`` transitions into the replay buffer."""
        cfg = self.cfg
        for _ in range(num_transitions // self.num_envs):
            action = self._choose_actions(self.obs)
            next_obs, reward, terminated, truncated, info = self.env.step(action)
            self.episode_len += 1
            self.episode_return += reward
            ended = terminated | truncated
            learn_terminated = terminated.copy()
            if cfg.ignore_all_dones:
                learn_terminated[:] = False
            elif cfg.infinite_bootstrap and cfg.max_episode_steps is not None:
                learn_terminated &= self.episode_len < cfg.max_episode_steps
            true_next = _final_observations(next_obs, info, ended)
            out = self.nstep.push(self.obs, action, reward, true_next, learn_terminated, ended)
            if out is not None:
                self.buffer.push(**out)
            for i in np.flatnonzero(ended):
                self.recent_returns.append(float(self.episode_return[i]))
                self.episodes += 1
            self.episode_return[ended] = 0.0
            self.episode_len[ended] = 0
            self.obs = next_obs
            self.env_steps += self.num_envs
            self.noise.advance(self.num_envs)

    def reset_envs(self) -> None:
        """Start the first episodes (seeded when a seed was given)."""
        self.obs, _ = self.env.reset(seed=self.cfg.seed)
        self.episode_return = np.zeros(self.num_envs, dtype=np.float64)
        self.episode_len = np.zeros(self.num_envs, dtype=np.int64)
        if self.cfg.seed is not None:
            self.env.action_space.seed(self.cfg.seed)
            self.test_env.reset(seed=self.cfg.seed + 10_000)

    # ------------------------------------------------------------------ update
    def _sample(self):
        return self.buffer.sample(self.cfg.batch_size, device=self.device)

    def update(self) -> None:
        """One online step's updates: critics (and target critics), then the actor and alpha."""
        cfg, agent = self.cfg, self.agent
        logs: dict[str, torch.Tensor] = {}
        alpha = self.alpha
        target_noise_std = self.noise.std if cfg.target_noise_std is None else cfg.target_noise_std
        batch = None
        for _ in range(cfg.critic_updates_per_step):
            batch = self._sample()
            logs.update(
                learning.critic_update(
                    agent,
                    self.target_agent,
                    batch,
                    self.critic_optimizer,
                    alpha=alpha,
                    target_critic_ensemble_n=cfg.target_critic_ensemble_n,
                    use_target_actor=cfg.use_target_actor,
                    target_noise_std=target_noise_std,
                    target_noise_clip=cfg.exploration_update_clip,
                )
            )
            if self.buffer.prioritized:
                self.buffer.update_priorities(batch.idxs, logs["critic/abs_td_error"])
            self.critic_updates += 1
            if self.critic_updates % cfg.target_delay == 0:
                lu.soft_update(*self._critic_pairs, cfg.mlp_tau)
                lu.soft_update(*self._encoder_pairs, cfg.encoder_tau)
        if cfg.use_pg_update_online and self.step % cfg.actor_delay == 0:
            for i in range(cfg.pg_actor_updates_per_step):
                if not (cfg.reuse_replay_dicts and i == 0 and batch is not None):
                    batch = self._sample()
                logs.update(
                    learning.online_actor_update(
                        agent,
                        batch,
                        self.actor_optimizer,
                        alpha=alpha,
                        actor_q_reduction=cfg.actor_q_reduction,
                    )
                )
                if self.alpha_optimizer is not None:
                    logs.update(
                        learning.alpha_update(
                            self.log_alpha,
                            self.alpha_optimizer,
                            logs["actor/log_prob"],
                            self.target_entropy,
                        )
                    )
                    alpha = self.alpha
                self.actor_updates += 1
                if cfg.use_target_actor:
                    lu.soft_update(*self._actor_pairs, cfg.mlp_tau)
        self.last_logs = logs

    # ------------------------------------------------------------------ evaluate / log / save
    def evaluate(self) -> dict[str, float]:
        """Run the evaluation episodes and remember the best return."""
        cfg = self.cfg
        if cfg.eval_episodes == 0:
            return {}
        result = evaluate_agent(
            self.agent, self.test_env, cfg.eval_episodes, cfg.max_episode_steps, cfg.render
        )
        result["env_steps"] = self.env_steps
        self.last_eval = result
        self.eval_history.append(result)
        self.logger.log(
            {f"eval/{k}": v for k, v in result.items() if k != "env_steps"}, self.env_steps
        )
        if result["return_mean"] > self.best_return:
            self.best_return = result["return_mean"]
            if cfg.save_best and cfg.save_to_disk and self.run_dir is not None:
                self.agent.save(self.run_dir / "best")
        return result

    def log(self, elapsed: float) -> None:
        """Send the latest update metrics and the schedule to the logger (one host sync)."""
        metrics = {k: float(v.float().mean()) for k, v in self.last_logs.items()}
        metrics.update(
            {
                "schedule/phase_online": 1.0,
                "schedule/env_steps": float(self.env_steps),
                "schedule/critic_updates": float(self.critic_updates),
                "schedule/actor_updates": float(self.actor_updates),
                "schedule/exploration_std": self.noise.std,
                "schedule/alpha": float(self.alpha),
                "schedule/buffer_size": float(len(self.buffer)),
                "perf/env_steps_per_s": self.env_steps / max(elapsed, 1e-9),
            }
        )
        if self.recent_returns:
            metrics["train/episode_return"] = float(np.mean(self.recent_returns))
            self.recent_returns.clear()
        self.logger.log(metrics, self.env_steps)

    def save(self) -> None:
        """Save the agent's weights to the run directory."""
        if self.cfg.save_to_disk and self.run_dir is not None:
            self.agent.save(self.run_dir)

    def summary(self, wall: float) -> dict[str, Any]:
        final = self.last_eval.get("return_mean", float("nan"))
        return {
            "env_steps": self.env_steps,
            "online_steps": self.step,
            "critic_updates": self.critic_updates,
            "actor_updates": self.actor_updates,
            "episodes": self.episodes,
            "final_eval_return": final,
            "best_eval_return": self.best_return if self.eval_history else float("nan"),
            "env_steps_per_s": self.env_steps / max(wall, 1e-9),
            "updates_per_s": self.critic_updates / max(wall, 1e-9),
            "wall_seconds": wall,
            "eval_history": self.eval_history,
            "run_dir": str(self.run_dir) if self.run_dir is not None else None,
        }

    # ------------------------------------------------------------------ phases
    def print_settings(self) -> None:
        cfg, agent = self.cfg, self.agent
        actor = type(agent.actor).__name__
        entropy = (
            f"alpha={cfg.init_alpha} (tuned, lr={cfg.alpha_lr}, target entropy="
            f"{self.target_entropy:g})"
            if cfg.alpha_lr > 0
            else f"alpha={cfg.init_alpha}"
        )
        lines = [
            "super_sac settings",
            f"  actor {actor}, {agent.num_critics} critics (target: min of "
            f"{cfg.target_critic_ensemble_n}), hidden {agent.hidden_size}, device {self.device}",
            f"  {cfg.num_steps_online} online steps x {cfg.transitions_per_online_step} "
            f"transitions, {self.num_envs} env(s), {cfg.random_warmup_steps} random warm-up",
            f"  updates/step: critic {cfg.critic_updates_per_step}, actor "
            f"{cfg.pg_actor_updates_per_step} every {cfg.actor_delay}, batch {cfg.batch_size}",
            f"  gamma {cfg.gamma}, n_step {cfg.n_step}, tau {cfg.mlp_tau}/{cfg.encoder_tau} "
            f"every {cfg.target_delay}, target actor {cfg.use_target_actor}",
            f"  lr actor {cfg.actor_lr} critic {cfg.critic_lr} encoder {cfg.encoder_lr}; "
            + entropy,
            f"  exploration noise {cfg.use_exploration_process} "
            f"({cfg.exploration_param_init}->{cfg.exploration_param_final})",
            f"  logs: {self.logger.where if self.run_dir else 'not saved'}",
        ]
        print("\n".join(lines), flush=True)

    def run_online(self) -> None:
        """The online phase: collect, update, evaluate, log and save on their intervals."""
        cfg = self.cfg
        start = time.perf_counter()
        bar = tqdm(
            total=cfg.num_steps_online,
            disable=cfg.verbosity < 1,
            desc="online",
            mininterval=1.0,
            dynamic_ncols=True,
        )
        for _ in range(cfg.num_steps_online):
            self.collect(cfg.transitions_per_online_step)
            self.step += 1
            if self.env_steps > cfg.random_warmup_steps and len(self.buffer) > 0:
                self.update()
            if self.step % cfg.eval_interval == 0:
                if self.evaluate():
                    bar.set_postfix(eval_return=f"{self.last_eval['return_mean']:.1f}")
            if self.step % cfg.log_interval == 0:
                self.log(time.perf_counter() - start)
            if self.step % cfg.save_interval == 0:
                self.save()
            bar.update(1)
        bar.close()
        if self.step % cfg.eval_interval != 0:
            self.evaluate()


def _run(trainer: Trainer) -> dict[str, Any]:
    cfg = trainer.cfg
    trainer.open_run()
    if cfg.verbosity > 0:
        trainer.print_settings()
    start = time.perf_counter()
    try:
        trainer.reset_envs()
        trainer.run_online()
        trainer.save()
    finally:
        trainer.logger.close()
    summary = trainer.summary(time.perf_counter() - start)
    if trainer.run_dir is not None:
        atomic_write_json(trainer.run_dir / "summary.json", summary)
    if cfg.verbosity > 0:
        print(
            f"final evaluation return {summary['final_eval_return']:.2f} "
            f"(best {summary['best_eval_return']:.2f}) after {summary['env_steps']} env steps, "
            f"{summary['env_steps_per_s']:.0f} env steps/s"
            + (f"; logs and weights in {trainer.run_dir}" if trainer.run_dir else ""),
            flush=True,
        )
    return summary


@gin.configurable
def super_sac(
    agent: Agent,
    buffer: ReplayBuffer,
    train_env: gym.Env | gym.vector.VectorEnv,
    test_env: gym.Env,
    num_steps_offline: int = 0,
    num_steps_online: int = 1_000_000,
    random_warmup_steps: int = 1_000,
    bc_warmup_steps: int = 0,
    afbc_actor_updates_per_step: int = 1,
    pg_actor_updates_per_step: int = 1,
    critic_updates_per_step: int = 1,
    use_afbc_update_online: bool = False,
    use_pg_update_online: bool = True,
    transitions_per_online_step: int = 1,
    actor_delay: int = 1,
    infinite_bootstrap: bool = False,
    ignore_all_dones: bool = False,
    max_episode_steps: int | None = None,
    batch_size: int = 256,
    reuse_replay_dicts: bool = True,
    actor_lr: float = 3e-4,
    critic_lr: float = 3e-4,
    encoder_lr: float = 3e-4,
    actor_clip: float | None = None,
    critic_clip: float | None = None,
    encoder_clip: float | None = None,
    actor_l2: float = 0.0,
    critic_l2: float = 0.0,
    encoder_l2: float = 0.0,
    pop: bool = False,
    dr3_coeff: float = 0.0,
    inverse_markov_coeff: float = 0.0,
    contrastive_markov_coeff: float = 0.0,
    smoothness_markov_coeff: float = 0.0,
    smoothness_markov_max_dist: float = 0.1,
    init_alpha: float = 1.0,
    alpha_lr: float = 3e-4,
    target_entropy_mul: float = 1.0,
    use_exploration_process: bool = False,
    exploration_param_init: float = 0.1,
    exploration_param_final: float = 0.1,
    exploration_param_anneal: int = 1,
    exploration_update_clip: float | None = 0.5,
    target_noise_std: float | None = None,
    target_critic_ensemble_n: int = 2,
    gamma: float = 0.99,
    mlp_tau: float = 0.005,
    encoder_tau: float = 0.01,
    target_delay: int = 1,
    n_step: int = 1,
    use_target_actor: bool = False,
    actor_q_reduction: str = "min",
    weighted_bellman_temp: float | None = None,
    weight_type: str = "sunrise",
    afbc_per: bool = False,
    augmenter: Any = None,
    encoder_lambda: float = 0.0,
    actor_lambda: float = 0.0,
    aug_mix: float = 1.0,
    render: bool = False,
    eval_interval: int = 5_000,
    eval_episodes: int = 10,
    logging_method: str = "tensorboard",
    wandb_entity: str | None = None,
    wandb_project: str | None = None,
    base_save_path: str | None = None,
    name: str = "ssac_run",
    save_to_disk: bool = True,
    log_to_disk: bool = True,
    log_interval: int = 1_000,
    save_interval: int = 10_000,
    save_best: bool = False,
    verbosity: int = 1,
    seed: int | None = None,
) -> dict[str, Any]:
    """Train ``agent`` off-policy; every argument after the four objects is a gin setting.

    Schedule: ``num_steps_online`` steps, each collecting ``transitions_per_online_step`` env
    transitions and then running ``critic_updates_per_step`` critic updates and (every
    ``actor_delay`` steps) ``pg_actor_updates_per_step`` actor updates, each followed by an alpha
    update when ``alpha_lr > 0``. The first ``random_warmup_steps`` transitions use uniform
    random actions and no updates run until they are collected. Only ``terminated`` stops
    bootstrapping; truncated episodes bootstrap from their true final observation.

    Algorithms are settings (see ``experiments/gym/*.gin``): SAC uses a stochastic actor and
    entropy tuning; TD3 a deterministic actor, a target actor, ``target_noise_std = 0.2``,
    ``exploration_update_clip = 0.5`` (TD3's c), ``actor_delay = target_delay = 2`` and
    ``actor_q_reduction = "first"``; DDPG one critic, a target actor and no target noise.

    ``target_noise_std = None`` follows the exploration schedule's current std (the original
    library's behaviour). ``target_critic_ensemble_n`` is the size of the random critic subset
    whose minimum forms the TD target (REDQ's M). The README's hyperparameter reference lists
    every other setting. Returns the run summary (also written to ``summary.json``).
    """
    settings = dict(locals())
    cfg = TrainConfig(**{f.name: settings[f.name] for f in dataclasses.fields(TrainConfig)})
    validate_config(cfg, agent, buffer, train_env, test_env)
    if seed is not None:
        set_seed(seed)
    trainer = Trainer(agent, buffer, train_env, test_env, cfg)
    return _run(trainer)
