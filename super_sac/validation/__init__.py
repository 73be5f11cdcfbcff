"""Checks of the loop's settings that run before training: each failure names the binding and
the fix.

The checks live in small modules by concern; this package's public names are
:func:`validate_config`, :func:`check_setting_types`, :class:`ConfigError` and
:class:`ConfigWarning`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from super_sac.agent import Agent
from super_sac.config import TrainConfig
from super_sac.loggers import resolve_wandb_target
from super_sac.replay import ReplayBuffer
from super_sac.validation.common import (
    _NOT_YET,
    AUGMENTER_EXAMPLE,
    MARKOV_COEFFS,
    ConfigError,
    ConfigWarning,
    _err,
    _warn,
)
from super_sac.validation.envs import _validate_envs, _validate_same_observations, _validate_video
from super_sac.validation.features import (
    _validate_augmentation,
    _validate_dr3,
    _validate_markov,
    _validate_observation_statistics,
)
from super_sac.validation.probes import (
    _validate_augmenter_probe,
    _validate_encoder_probe,
    _validate_image_scale,
)
from super_sac.validation.settings import (
    _validate_actor_update_noise,
    _validate_discrete_settings,
    _validate_ensemble,
    _validate_episodes,
    _validate_exploration,
    _validate_next_action_encoder,
    _validate_optimizer_settings,
    _validate_phases,
    _validate_unused_settings,
    _validate_update_counts,
)
from super_sac.validation.types import check_setting_types, describe_type, value_matches


def validate_config(
    cfg: TrainConfig, agent: Agent, buffer: ReplayBuffer, train_env: Any, test_env: gym.Env
) -> None:
    """Reject settings that cannot work, with messages naming the binding and the fix.

    Every value is first checked against its field's annotation (:func:`check_setting_types`).
    """
    check_setting_types(cfg)
    wants_afbc = cfg.use_afbc_update_online or cfg.num_steps_offline > 0
    if wants_afbc and not (agent.stochastic or agent.discrete):
        raise ConfigError(
            "advantage-filtered BC (num_steps_offline, use_afbc_update_online) estimates V(s) "
            "from policy samples and maximises the log-likelihood of dataset actions, which the "
            f"deterministic actor {type(agent.actor).__name__} does not have (plain behavioral "
            "cloning, bc_warmup_steps, fits it by squared error). Fix: use "
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
        "checkpoint_interval",
        "keep_checkpoints",
        "batch_size",
        "target_delay",
        "actor_delay",
        "eval_interval",
        "log_interval",
        "save_interval",
        "n_step",
        "target_critic_ensemble_n",
        "afbc_adv_samples",
    )
    for key in positive:
        if getattr(cfg, key) < 1:
            raise _err(f"{key} = {getattr(cfg, key)}", "must be >= 1", f"set {key} to 1 or more")
    # 0 is unused without online steps (the original's offline-only configs bind it)
    if cfg.transitions_per_online_step < (1 if cfg.num_steps_online > 0 else 0):
        raise _err(
            f"transitions_per_online_step = {cfg.transitions_per_online_step}",
            "must be >= 1 when online steps run (0 only without them)",
            "set transitions_per_online_step to 1 or more",
        )
    for key in (
        "random_warmup_steps",
        "eval_episodes",
        "exploration_param_anneal",
        "num_steps_online",
        "num_steps_offline",
        "bc_warmup_steps",
        "pg_actor_updates_per_step",
        "afbc_actor_updates_per_step",
    ):
        if getattr(cfg, key) < 0:
            raise _err(f"{key} = {getattr(cfg, key)}", "must be >= 0", "use a non-negative value")
    if not 0.0 <= cfg.gamma <= 1.0:
        raise _err(f"gamma = {cfg.gamma}", "the discount must lie in [0, 1]", "use e.g. 0.99")
    if cfg.reward_clip is not None and not cfg.reward_clip > 0:
        raise _err(
            f"reward_clip = {cfg.reward_clip}",
            "clips rewards to [-c, c] and must be > 0",
            "use 1.0 (DQN's Atari setting), or None to store rewards as the env gives them",
        )
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
    _validate_observation_statistics(cfg, agent)
    _validate_augmentation(cfg, agent)
    _validate_dr3(cfg, agent)
    _validate_markov(cfg, agent)
    if cfg.pop and getattr(agent.critic, "popart", None) is None:
        raise _err(
            "pop = True",
            "preserving outputs needs PopArt statistics on the critic",
            "set Agent.auto_rescale_targets = True as well (or pop = False)",
        )
    if cfg.logging_method == "wandb" and cfg.log_to_disk:
        resolve_wandb_target(cfg.wandb_entity, cfg.wandb_project)
    _validate_update_counts(cfg)
    _validate_phases(cfg, agent, buffer)
    _validate_episodes(cfg)
    _validate_unused_settings(cfg)
    if buffer.size < cfg.random_warmup_steps:
        raise _err(
            f"random_warmup_steps = {cfg.random_warmup_steps}",
            f"exceeds the replay buffer's size ({buffer.size}), so warm-up data would be "
            "overwritten before training starts",
            "enlarge the buffer or warm up for less",
        )
    for key in ("init_alpha", "alpha_lr"):
        if getattr(cfg, key) < 0:
            raise _err(
                f"{key} = {getattr(cfg, key)}",
                "must be >= 0",
                "use e.g. init_alpha = 0.1 and alpha_lr = 1e-4 (tuned), or 0 and 0 (no entropy)",
            )
    _validate_exploration(cfg, agent)
    _validate_actor_update_noise(cfg, agent)
    _validate_next_action_encoder(cfg, agent)
    if agent.stochastic:
        if cfg.alpha_lr > 0 and cfg.init_alpha == 0:
            # the original super_sac started log(alpha) at log(1e-15) and tuned it from there
            _warn(
                f"init_alpha = 0 with alpha_lr = {cfg.alpha_lr}",
                "alpha starts at 1e-15 and is tuned from there (as in the original super_sac), "
                "so the entropy bonus is off until tuning raises it",
                "set init_alpha > 0 (e.g. 0.1) to start from a visible entropy bonus, or "
                "alpha_lr = 0 to keep alpha at 0",
            )
    else:
        if cfg.init_alpha != 0 or cfg.alpha_lr != 0:
            raise _err(
                f"init_alpha = {cfg.init_alpha}, alpha_lr = {cfg.alpha_lr}",
                f"the actor {type(agent.actor).__name__} is deterministic and has no entropy",
                "set init_alpha = 0 and alpha_lr = 0 (as ddpg.gin and td3.gin do), or use "
                "ContinuousStochasticActor",
            )
        if cfg.num_steps_online > 0 and not cfg.use_exploration_process:
            raise _err(
                "use_exploration_process = False",
                f"a deterministic actor would never explore in its {cfg.num_steps_online} "
                "online steps",
                "set use_exploration_process = True (Gaussian action noise)",
            )
    if agent.discrete:
        _validate_discrete_settings(cfg)
    _validate_optimizer_settings(cfg, agent, buffer)
    _validate_video(cfg, test_env)
    _validate_envs(cfg, agent, train_env, test_env)
    _validate_encoder_probe(agent, train_env)
    _validate_same_observations(agent, train_env, test_env)
    _validate_image_scale(agent, train_env)
    _validate_augmenter_probe(cfg, agent, train_env)


__all__ = [
    "AUGMENTER_EXAMPLE",
    "MARKOV_COEFFS",
    "ConfigError",
    "ConfigWarning",
    "check_setting_types",
    "describe_type",
    "validate_config",
    "value_matches",
]
