"""Checks of the loop's settings that run before training: each failure names the binding and
the fix."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from super_sac import learning_utils as lu
from super_sac.agent import Agent
from super_sac.loggers import LOGGING_METHODS, resolve_wandb_target
from super_sac.replay import ReplayBuffer
from super_sac.utils import MATMUL_PRECISIONS
from super_sac.wrappers import has_finite_bounds

if TYPE_CHECKING:
    from super_sac.main import TrainConfig


# Settings of features that other parts of the roadmap add; each must stay at its default here.
_NOT_YET = {
    "num_steps_offline": (0, "the offline (AFBC) phase"),
    "bc_warmup_steps": (0, "the behavioral cloning phase"),
    "use_afbc_update_online": (False, "advantage-filtered BC actor updates"),
    "afbc_per": (False, "advantage-prioritized actor batches"),
    "dr3_coeff": (0.0, "the DR3 regulariser"),
    "inverse_markov_coeff": (0.0, "Markov state abstraction losses"),
    "contrastive_markov_coeff": (0.0, "Markov state abstraction losses"),
    "smoothness_markov_coeff": (0.0, "Markov state abstraction losses"),
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
    wants_afbc = cfg.use_afbc_update_online or cfg.num_steps_offline > 0 or cfg.bc_warmup_steps
    if wants_afbc and not agent.stochastic:
        raise ConfigError(
            "behavioral cloning / advantage-filtered BC (num_steps_offline, bc_warmup_steps, "
            "use_afbc_update_online) maximise the log-likelihood of dataset actions, which the "
            f"deterministic actor {type(agent.actor).__name__} does not have. Fix: use "
            "Agent.actor_network_cls = @super_sac.nets.mlps.ContinuousStochasticActor."
        )
    for key, (default, feature) in _NOT_YET.items():
        value = getattr(cfg, key)
        if value != default:
            raise NotImplementedError(
                f"super_sac.{key} = {value!r} needs {feature}, which this version of super_sac "
                f"does not implement yet. Fix: leave super_sac.{key} at {default!r}."
            )
    positive = (
        "num_steps_online",
        "checkpoint_interval",
        "keep_checkpoints",
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
    _validate_ensemble(cfg, agent)
    if cfg.matmul_precision not in MATMUL_PRECISIONS:
        raise _err(
            f"matmul_precision = {cfg.matmul_precision!r}",
            "unknown float32 matmul precision",
            f"choose one of {MATMUL_PRECISIONS} (torch.set_float32_matmul_precision)",
        )
    if cfg.pop and getattr(agent.critic, "popart", None) is None:
        raise _err(
            "pop = True",
            "preserving outputs needs PopArt statistics on the critic",
            "set Agent.auto_rescale_targets = True as well (or pop = False)",
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
    if agent.discrete:
        _validate_discrete_settings(cfg)
    _validate_envs(cfg, agent, train_env, test_env)


def _validate_discrete_space(label: str, act_space: spaces.Space, agent: Agent) -> None:
    if not agent.discrete:
        raise ConfigError(
            f"{label} has a Discrete action space ({act_space}) but the Agent is continuous. "
            "Fix: build the Agent with discrete=True (Agent.discrete = True in gin), "
            f"act_space_size={getattr(act_space, 'n', '?')}."
        )
    if not isinstance(act_space, spaces.Discrete):
        raise ConfigError(
            f"Agent.discrete = True but {label} has the action space {act_space}. Fix: use an "
            "env with a gymnasium.spaces.Discrete action space, or Agent.discrete = False."
        )
    if int(act_space.start) != 0:
        raise ConfigError(
            f"{label} has Discrete actions starting at {act_space.start}; the agent outputs "
            "indices from 0. Fix: wrap the env so that its actions start at 0."
        )
    if int(act_space.n) != agent.act_space_size:
        raise ConfigError(
            f"{label} has {int(act_space.n)} discrete actions but Agent.act_space_size = "
            f"{agent.act_space_size}. Fix: build the Agent with act_space_size={int(act_space.n)}."
        )


def _validate_discrete_settings(cfg: TrainConfig) -> None:
    """TD3/DDPG's deterministic-policy settings have no meaning for SAC-Discrete."""
    if cfg.use_target_actor:
        raise _err(
            "use_target_actor = True",
            "SAC-Discrete bootstraps with the online categorical actor (exact expectation over "
            "actions); a target actor is a TD3/DDPG setting",
            "set use_target_actor = False for Agent.discrete = True",
        )
    if cfg.target_noise_std is not None and cfg.target_noise_std > 0:
        raise _err(
            f"target_noise_std = {cfg.target_noise_std}",
            "target policy smoothing adds Gaussian noise to continuous actions (TD3)",
            "set target_noise_std = None (or 0) for Agent.discrete = True",
        )
    if not 0.0 <= cfg.exploration_param_init <= 1.0 or not 0.0 <= cfg.exploration_param_final <= 1:
        raise _err(
            f"exploration_param_init = {cfg.exploration_param_init}, exploration_param_final = "
            f"{cfg.exploration_param_final}",
            "for discrete actions they are epsilon-greedy probabilities",
            "use values in [0, 1]",
        )


def _validate_ensemble(cfg: TrainConfig, agent: Agent) -> None:
    """SUNRISE settings: backup weights and bootstrap masks."""
    if cfg.weight_type not in lu.BACKUP_WEIGHT_TYPES:
        raise _err(
            f"weight_type = {cfg.weight_type!r}",
            "unknown weighted Bellman backup",
            f"choose one of {lu.BACKUP_WEIGHT_TYPES}",
        )
    if cfg.weighted_bellman_temp is not None and cfg.weighted_bellman_temp < 0:
        raise _err(
            f"weighted_bellman_temp = {cfg.weighted_bellman_temp}",
            "the temperature must be >= 0",
            "use e.g. 20 (SUNRISE), or None to skip weighted backups",
        )
    if not 0.0 < cfg.bootstrap_mask_prob <= 1.0:
        raise _err(
            f"bootstrap_mask_prob = {cfg.bootstrap_mask_prob}",
            "the probability that a member trains on a transition must lie in (0, 1]",
            "use 1.0 (every member sees every sample) or e.g. 0.5",
        )
    if agent.ensemble_size == 1:
        unused = [
            f"{key} = {getattr(cfg, key)!r}"
            for key, default in (("weighted_bellman_temp", None), ("bootstrap_mask_prob", 1.0))
            if getattr(cfg, key) not in (default, 0)
        ]
        if unused:
            raise _err(
                ", ".join(unused),
                "these SUNRISE settings need an ensemble, but Agent.ensemble_size = 1",
                "set Agent.ensemble_size > 1 (sunrise.gin uses 5), or remove them",
            )
    elif cfg.use_target_actor:
        raise _err(
            "use_target_actor = True",
            "SUNRISE ensembles are SAC agents, which have no target actor",
            "set use_target_actor = False",
        )


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
        if isinstance(act_space, spaces.Discrete) or agent.discrete:
            _validate_discrete_space(label, act_space, agent)
            continue
        if not isinstance(act_space, spaces.Box):
            raise ConfigError(f"{label} action space {act_space} is not a Box")
        if not has_finite_bounds(act_space):
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
        accepted = (AutoresetMode.DISABLED, AutoresetMode.SAME_STEP)
        if mode not in accepted and mode not in [m.value for m in accepted]:
            raise ConfigError(
                f"train_env is a vector env with autoreset mode {mode}; super_sac needs the true "
                "final observation of every episode. Fix: build it with autoreset_mode="
                "gymnasium.vector.AutoresetMode.DISABLED (the loop resets episodes itself, and "
                "resumed runs replay them exactly) or AutoresetMode.SAME_STEP."
            )
