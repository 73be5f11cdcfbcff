"""Checks of the loop's settings that run before training: each failure names the binding and
the fix."""

from __future__ import annotations

import ast
import copy
import dataclasses
import difflib
import functools
import inspect
import numbers
import os
import types
import typing
import warnings
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from super_sac.agent import Agent
from super_sac.augmentations import AugmentationSequence
from super_sac.config import TrainConfig, format_type
from super_sac.evaluation import EVAL_METRICS, METRIC_ALIASES, eval_metric
from super_sac.loggers import resolve_wandb_target
from super_sac.replay import ReplayBuffer
from super_sac.video import VIDEO_EXTRA_HINT, VideoDependencyError, require_encoder
from super_sac.wrappers import has_finite_bounds

# Settings of features that other parts of the roadmap add; each must stay at its default here.
_NOT_YET: dict[str, tuple[object, str]] = {}

MARKOV_COEFFS = ("inverse_markov_coeff", "contrastive_markov_coeff", "smoothness_markov_coeff")


class ConfigError(ValueError):
    """A setting (or a combination of settings) that cannot work; raised before training."""


class ConfigWarning(UserWarning):
    """A setting that has no effect in this combination (harmless, but probably unintended), or
    a value kept for the original super_sac's gin files whose meaning deserves a mention."""


AUGMENTER_EXAMPLE = (
    "super_sac.augmenter = @super_sac.augmentations.AugmentationSequence() with "
    "super_sac.augmentations.AugmentationSequence.aug_list = "
    "[@super_sac.augmentations.Drqv2Aug()]"
)
"""Two bindings that set DrQ-v2's random shift as the augmenter (what error messages suggest)."""


def _err(binding: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(f"super_sac.{binding}: {problem}. Fix: {fix}")


def _warn(binding: str, problem: str, fix: str) -> None:
    """Warn once per run (validation runs once) about ``super_sac.<binding>``."""
    warnings.warn(f"super_sac.{binding}: {problem}. Fix: {fix}", ConfigWarning, stacklevel=3)


def _default(name: str) -> Any:
    return next(f.default for f in dataclasses.fields(TrainConfig) if f.name == name)


# ------------------------------------------------------------------ types of the values


@functools.cache
def _setting_types() -> dict[str, Any]:
    return typing.get_type_hints(TrainConfig)


def _alternatives(tp: Any) -> tuple[Any, ...]:
    """The members of a union annotation (``int | None`` -> ``(int, NoneType)``), else ``(tp,)``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return (tp,)


def _choices(tp: Any) -> list[Any]:
    """The values a ``Literal`` annotation (possibly inside a union) accepts."""
    return [
        value
        for alt in _alternatives(tp)
        if typing.get_origin(alt) is Literal
        for value in typing.get_args(alt)
    ]


def value_matches(value: Any, tp: Any) -> bool:
    """Whether ``value`` is acceptable for a setting annotated ``tp``.

    Integers are accepted for ``float`` (gin reads ``init_alpha = 1`` as an int) and numpy
    scalars count as Python numbers, but ``bool`` and ``int`` stay apart: ``batch_size = True``
    and ``render = 1`` are rejected, although Python's bool is a subclass of int.
    """
    if tp is Any:
        return True
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return any(value_matches(value, alt) for alt in typing.get_args(tp))
    if typing.get_origin(tp) is Literal:
        return any(isinstance(value, type(c)) and value == c for c in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, (bool, np.bool_))
    if tp is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    return isinstance(value, typing.get_origin(tp) or tp)


def describe_type(tp: Any) -> str:
    """An annotation in words: ``an integer or None``, ``one of 'min', 'mean', 'first'``."""
    words = {
        bool: "True or False",
        int: "an integer",
        float: "a number",
        str: "a string",
        dict: "a dict",
        os.PathLike: "a path",
        type(None): "None",
    }
    parts = []
    if _choices(tp):
        parts.append("one of " + ", ".join(repr(c) for c in _choices(tp)))
    for alt in _alternatives(tp):
        if typing.get_origin(alt) is not Literal:
            key = typing.get_origin(alt) or alt
            parts.append(words.get(key, f"a {format_type(alt)}"))
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _example(value: Any, tp: Any, default: Any) -> tuple[Any, str]:
    """A value that fits ``tp``, as close to the bound ``value`` as possible, and where it came
    from: the bound text read as a literal (``'256'`` -> 256), a whole float as an integer
    (``1e6`` -> 1000000), 0/1 as a bool, the closest accepted string, or else the default."""
    seen = [value]
    if isinstance(value, str):
        try:
            seen.append(ast.literal_eval(value.strip()))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    converted = []
    for v in seen:
        if isinstance(v, float) and v.is_integer():
            converted.append(int(v))
        if isinstance(v, int) and not isinstance(v, bool) and v in (0, 1):
            converted.append(bool(v))
    for candidate in seen[1:] + converted:
        if value_matches(candidate, tp):
            return candidate, ""
    strings = [c for c in _choices(tp) if isinstance(c, str)]
    if isinstance(value, str) and strings:
        lowered = {c.lower(): c for c in strings}
        close = difflib.get_close_matches(value.lower(), list(lowered), n=1, cutoff=0.6)
        if close:
            return lowered[close[0]], " (the closest accepted value)"
    return default, " (the default)"


def _a(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def check_setting_types(cfg: TrainConfig) -> None:
    """Check every setting's value against its annotation in :class:`TrainConfig`.

    :raises ConfigError: one line naming the binding, the value and its type, the expected type
        and a value that would fit, e.g. ``super_sac.batch_size = 'abc': got a str, expected an
        integer. Fix: bind an integer, e.g. super_sac.batch_size = 256 (the default)``.
    """
    hints = _setting_types()
    for field in dataclasses.fields(TrainConfig):
        value, tp = getattr(cfg, field.name), hints[field.name]
        if value_matches(value, tp):
            continue
        expected = describe_type(tp)
        example, source = _example(value, tp, field.default)
        kind = "one of them" if _choices(tp) and isinstance(value, str) else expected
        raise _err(
            f"{field.name} = {value!r}",
            f"got {'None' if value is None else _a(type(value).__name__)}, expected {expected}",
            f"bind {kind}, e.g. super_sac.{field.name} = {example!r}{source}",
        )


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


def _validate_observation_statistics(cfg: TrainConfig, agent: Agent) -> None:
    """A standardising encoder must have its dataset statistics before training starts (a
    resumed run restores them from its checkpoint)."""
    fitted = getattr(agent.encoder, "statistics_fitted", None)
    if fitted is None or cfg.resume or bool(fitted):
        return
    raise ConfigError(
        "FlatEncoder.standardize = True: the encoder's observation mean and std were never set, "
        "so it would standardise with mean 0 and std 1 (no standardisation at all). Fix: learn "
        "from a dataset (train_offline.py --dataset fits them), call "
        "agent.encoder.fit_statistics(dataset_obs) before training, or remove the binding"
    )


def _validate_update_counts(cfg: TrainConfig) -> None:
    """A count of updates may be 0 only where that kind of update never runs (as the original
    super_sac's gin files write ``afbc_actor_updates_per_step = 0`` for SAC, and
    ``critic_updates_per_step = 0`` for behavioral cloning alone)."""
    critic_phases = [
        f"{name} = {steps}"
        for name, steps in (
            ("num_steps_offline", cfg.num_steps_offline),
            ("num_steps_online", cfg.num_steps_online),
        )
        if steps > 0
    ]
    if cfg.critic_updates_per_step < (1 if critic_phases else 0):
        raise _err(
            f"critic_updates_per_step = {cfg.critic_updates_per_step}",
            f"must be >= 1 when critic updates run ({' and '.join(critic_phases)}; 0 only for "
            "behavioral cloning alone)",
            "set critic_updates_per_step to 1 or more",
        )
    if cfg.use_pg_update_online and cfg.num_steps_online > 0 and cfg.pg_actor_updates_per_step == 0:
        raise _err(
            "pg_actor_updates_per_step = 0",
            f"use_pg_update_online = True runs policy-gradient actor (and alpha) updates in the "
            f"{cfg.num_steps_online} online steps, but 0 per step means that none would run",
            "set pg_actor_updates_per_step = 1 (or more), or use_pg_update_online = False "
            "(with use_afbc_update_online = True for AWAC-style online learning)",
        )
    if cfg.num_steps_offline > 0:
        afbc_by = f"num_steps_offline = {cfg.num_steps_offline}"
    elif cfg.use_afbc_update_online and cfg.num_steps_online > 0:
        afbc_by = "use_afbc_update_online = True"
    else:
        return
    if cfg.afbc_actor_updates_per_step == 0:
        raise _err(
            "afbc_actor_updates_per_step = 0",
            f"{afbc_by} runs advantage-filtered BC actor updates, but 0 per step means that "
            "none would run",
            "set afbc_actor_updates_per_step = 1 (or more), or num_steps_offline = 0 and "
            "use_afbc_update_online = False",
        )


def _validate_episodes(cfg: TrainConfig) -> None:
    """``max_episode_steps`` and what depends on it."""
    if cfg.max_episode_steps is not None and cfg.max_episode_steps < 1:
        raise _err(
            f"max_episode_steps = {cfg.max_episode_steps}",
            "episodes need at least one step",
            "use a positive limit, or None for the env's own",
        )
    if cfg.infinite_bootstrap and cfg.max_episode_steps is None:
        raise _err(
            "infinite_bootstrap = True",
            "it bootstraps through a termination at exactly max_episode_steps, but "
            "max_episode_steps is None",
            "set super_sac.max_episode_steps to the episodes' time limit (e.g. 1000), or "
            "infinite_bootstrap = False",
        )


def _validate_exploration(cfg: TrainConfig, agent: Agent) -> None:
    """Target policy smoothing and the exploration noise schedule."""
    if cfg.target_noise_std is not None and cfg.target_noise_std < 0:
        raise _err(
            f"target_noise_std = {cfg.target_noise_std}",
            "a standard deviation must be >= 0",
            "use e.g. 0.2 (TD3), 0 (no smoothing) or None",
        )
    stochastic_continuous = agent.stochastic and not agent.discrete
    if stochastic_continuous and cfg.target_noise_std is not None and cfg.target_noise_std > 0:
        raise _err(
            f"target_noise_std = {cfg.target_noise_std}",
            "target policy smoothing perturbs a deterministic actor's next action (TD3), but "
            f"the actor {type(agent.actor).__name__} is stochastic: its next action is already a "
            "sample, so the noise would be ignored",
            "set target_noise_std = None (or 0), or use Agent.actor_network_cls = "
            "@super_sac.nets.mlps.ContinuousDeterministicActor (as td3.gin does)",
        )
    init, final = cfg.exploration_param_init, cfg.exploration_param_final
    if cfg.use_exploration_process and cfg.exploration_param_anneal == 0 and init != final:
        raise _err(
            "exploration_param_anneal = 0",
            f"use_exploration_process = True anneals the noise from exploration_param_init = "
            f"{init} to exploration_param_final = {final}, but over 0 transitions the initial "
            "value would never be used",
            "anneal over 1 or more transitions (e.g. 250_000), or set exploration_param_init = "
            "exploration_param_final for a constant noise",
        )


def _validate_actor_update_noise(cfg: TrainConfig, agent: Agent) -> None:
    """DrQ-v2's noisy actor update is for deterministic actors (which never form ensembles)."""
    if cfg.actor_update_noise and (agent.stochastic or agent.discrete):
        _warn(
            "actor_update_noise = True",
            f"it has no effect: the actor {type(agent.actor).__name__} is not deterministic "
            "(its update already scores sampled actions)",
            "remove the actor_update_noise binding",
        )


def _validate_next_action_encoder(cfg: TrainConfig, agent: Agent) -> None:
    """``next_action_encoder``: a known value, and "online" only where the continuous TD backup
    of a single agent reads it."""
    value = cfg.next_action_encoder
    if value not in ("target", "online"):
        raise _err(
            f"next_action_encoder = {value!r}",
            'must be "target" or "online"',
            'use "target" (the default) or "online" (DrQ, RAD: the actor reads s\' through the '
            "online encoder)",
        )
    if value == "online" and (agent.discrete or agent.ensemble_size > 1):
        kind = "discrete" if agent.discrete else f"ensemble_size = {agent.ensemble_size}"
        raise _err(
            'next_action_encoder = "online"',
            f"only the continuous single-agent TD backup reads it, and this agent is {kind}",
            'remove the binding (the default "target")',
        )


def _validate_unused_settings(cfg: TrainConfig) -> None:
    """Settings that would have no effect: an error when the run cannot do what they ask, a
    warning when ignoring them is harmless."""
    if cfg.aug_mix is not None and not 0.0 <= cfg.aug_mix <= 1.0:
        raise _err(
            f"aug_mix = {cfg.aug_mix}",
            "a fraction of the batch must lie in [0, 1]",
            "use e.g. 0.9, or leave it at None (all of the batch)",
        )
    if cfg.augmenter is None and cfg.aug_mix not in (None, 0):
        _warn(
            f"aug_mix = {cfg.aug_mix}",
            "it has no effect: no augmenter is set (super_sac.augmenter = None), so no "
            "observation is augmented; the original super_sac's pixel scripts passed their "
            "own random shift to the loop, which overrode a gin file's augmenter = None, so its "
            "files that bind both were trained with augmentation",
            f"remove the aug_mix binding, or set an augmenter: {AUGMENTER_EXAMPLE} (the DMC "
            "and Atari scripts use DrQ-v2's random shift when the augmenter is left unbound)",
        )
    max_dist = cfg.smoothness_markov_max_dist
    smoothness_on = cfg.smoothness_markov_coeff > 0 and cfg.markov_abstraction_updates_per_step
    if not smoothness_on and max_dist != _default("smoothness_markov_max_dist"):
        _warn(
            f"smoothness_markov_max_dist = {max_dist}",
            "it has no effect: it sets the distance of the Markov smoothness penalty, which is "
            f"off (smoothness_markov_coeff = {cfg.smoothness_markov_coeff}, "
            f"markov_abstraction_updates_per_step = {cfg.markov_abstraction_updates_per_step})",
            "remove the smoothness_markov_max_dist binding, or turn the penalty on with "
            "smoothness_markov_coeff > 0 and markov_abstraction_updates_per_step >= 1",
        )
    if isinstance(cfg.save_best, str) and eval_metric(cfg.save_best) is None:
        aliases = ", ".join(f"{k!r} (= {v!r})" for k, v in METRIC_ALIASES.items())
        raise _err(
            f"save_best = {cfg.save_best!r}",
            "is not a metric of the evaluations",
            f"use True (the mean return) or one of {', '.join(repr(m) for m in EVAL_METRICS)} "
            f"(also with the 'eval/' prefix the logs show), or {aliases}",
        )
    wants_best = isinstance(cfg.save_best, str) or bool(cfg.save_best)
    if wants_best and (not cfg.save_to_disk or cfg.eval_episodes == 0):
        why = "save_to_disk = False" if not cfg.save_to_disk else "eval_episodes = 0"
        _warn(
            f"save_best = {cfg.save_best!r}",
            f"it has no effect with {why}: no best weights are saved",
            "set save_to_disk = True and eval_episodes >= 1, or remove the save_best binding",
        )


_AUG_SETTINGS = ("encoder_lambda", "actor_lambda", "aug_target_samples", "aug_critic_samples")


def _active_aug_settings(cfg: TrainConfig) -> list[str]:
    """``name = value`` of the augmentation settings that ask for more than the default."""
    return [
        f"{key} = {getattr(cfg, key)!r}"
        for key in _AUG_SETTINGS
        if getattr(cfg, key) != _default(key)
    ]


def _validate_augmentation(cfg: TrainConfig, agent: Agent) -> None:
    """The augmenter and what builds on it: invariance weights, DrQ's K and M."""
    if cfg.augmenter is not None and not callable(cfg.augmenter):
        raise _err(
            f"augmenter = {cfg.augmenter!r}",
            "the augmenter must be callable as augmenter(obs, next_obs) -> (obs, next_obs)",
            "bind an augmentation object, e.g. super_sac.augmenter = "
            "@super_sac.augmentations.AugmentationSequence() (note the parentheses), or None",
        )
    for key in ("encoder_lambda", "actor_lambda"):
        if getattr(cfg, key) < 0:
            raise _err(
                f"{key} = {getattr(cfg, key)}",
                "an invariance weight must be >= 0",
                f"use 0 (off) or a positive weight such as 0.1 for {key}",
            )
    for key in ("aug_target_samples", "aug_critic_samples"):
        value = getattr(cfg, key)
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise _err(
                f"{key} = {getattr(cfg, key)}",
                "the number of augmentations averaged must be an integer >= 1",
                f"set {key} = 1 (one augmentation: DrQ-v2, RAD) or e.g. 2 (DrQ)",
            )
    _validate_augmenter_generator(cfg.augmenter)
    active = _active_aug_settings(cfg)
    if cfg.augmenter is not None and cfg.aug_mix == 0 and not active:
        _warn(
            "aug_mix = 0",
            "every row of every batch stays clean, and no invariance loss or extra DrQ "
            "augmentation reads the augmented views, so the augmenter's cost buys nothing",
            "set aug_mix > 0 (None: the whole batch), or super_sac.augmenter = None",
        )
    if active and cfg.augmenter is None:
        raise _err(
            ", ".join(active),
            "these settings build on augmented observations, but no augmenter is set "
            "(super_sac.augmenter = None)",
            f"set an augmenter ({AUGMENTER_EXAMPLE}), or put them back to their defaults "
            "(lambdas 0, aug_target_samples = aug_critic_samples = 1)",
        )
    if active and agent.ensemble_size > 1:
        raise _err(
            ", ".join(active),
            f"SUNRISE ensembles (Agent.ensemble_size = {agent.ensemble_size}) do not support "
            "the invariance losses or DrQ's extra augmentations yet (their batches are "
            "augmented like any other)",
            "set Agent.ensemble_size = 1, or keep the lambdas at 0 and aug_target_samples = "
            "aug_critic_samples = 1",
        )


def _validate_dr3(cfg: TrainConfig, agent: Agent) -> None:
    """DR3's weight is a non-negative number, and the critic must expose its features."""
    if cfg.dr3_coeff < 0:
        raise _err(
            f"dr3_coeff = {cfg.dr3_coeff}",
            "DR3's weight must be >= 0 (a negative weight rewards feature co-adaptation)",
            "use 0 (off) or a positive weight such as 0.01 (the original's offline configs)",
        )
    if cfg.dr3_online_next and not cfg.dr3_coeff > 0:
        raise _err(
            "dr3_online_next = True",
            "only DR3's penalty encodes s' with the online encoder, and dr3_coeff = 0",
            "set dr3_coeff > 0 (e.g. 0.005), or dr3_online_next = False",
        )
    wants_features = cfg.dr3_coeff > 0 or cfg.log_feature_dot
    critic_cls = type(agent.critic)
    has_features = callable(getattr(agent.critic, "features", None)) and (
        "return_features" in inspect.signature(critic_cls.forward).parameters
    )
    if wants_features and not has_features:
        setting = f"dr3_coeff = {cfg.dr3_coeff}" if cfg.dr3_coeff > 0 else "log_feature_dot = True"
        raise _err(
            setting,
            f"DR3 needs the critics' penultimate features, but {critic_cls.__name__} has no "
            "features() method or no return_features option in forward()",
            "use super_sac.nets.mlps.ContinuousCritic / DiscreteCritic, or give the critic class "
            "features(state, action) (discrete: features(state)) and a return_features=True "
            "forward option returning (values, features)",
        )


def _validate_markov(cfg: TrainConfig, agent: Agent) -> None:
    """The Markov state abstraction (Allen et al. 2021): weights >= 0, updates that run the
    weighted losses, and an encoder they can train."""
    for key in (*MARKOV_COEFFS, "smoothness_markov_max_dist"):
        if getattr(cfg, key) < 0:
            raise _err(
                f"{key} = {getattr(cfg, key)}",
                "must be >= 0",
                f"use 0 (off) or a positive value for {key}",
            )
    updates = cfg.markov_abstraction_updates_per_step
    if updates < 0:
        raise _err(
            f"markov_abstraction_updates_per_step = {updates}",
            "must be >= 0",
            "use 0 (no Markov state abstraction) or 1 (the original's drqv2_markov.gin)",
        )
    weighted = [f"{k} = {getattr(cfg, k)}" for k in MARKOV_COEFFS if getattr(cfg, k) > 0]
    if weighted and updates == 0:
        raise _err(
            ", ".join(weighted),
            "these Markov state abstraction losses never run: "
            "markov_abstraction_updates_per_step = 0",
            "set super_sac.markov_abstraction_updates_per_step = 1 (or more), or set the "
            "coefficients back to 0",
        )
    if updates > 0 and not weighted:
        _warn(
            f"markov_abstraction_updates_per_step = {updates}",
            "every Markov loss has weight 0 (inverse_markov_coeff, contrastive_markov_coeff, "
            "smoothness_markov_coeff), so these updates only move Adam's state",
            "set the coefficients (e.g. 1, 1, 10 as in the original's drqv2_markov.gin), or "
            "markov_abstraction_updates_per_step = 0",
        )
    if updates > 0 and weighted and not any(True for _ in agent.encoder.parameters()):
        _warn(
            f"markov_abstraction_updates_per_step = {updates}",
            f"the encoder {type(agent.encoder).__name__} has no parameters, so the Markov "
            "losses train only their own heads and do not change the agent's states",
            "use a trainable encoder (e.g. a CNN for images), or "
            "markov_abstraction_updates_per_step = 0",
        )
    if updates > 0 and weighted and getattr(agent.encoder, "trunk", None) is False:
        _warn(
            f"markov_abstraction_updates_per_step = {updates}",
            f"{type(agent.encoder).__name__}(trunk=False) gives the raw convolutional features "
            f"({agent.encoder.embedding_dim} of them), so the Markov heads read those instead "
            "of a compact embedding z",
            "set DrQPixelEncoder.trunk = True and the actor's and critic's trunk_dim = None, as "
            "experiments/dmc/drqv2_markov.gin does",
        )


def _validate_augmenter_generator(augmenter: Any) -> None:
    """An augmenter drawing from its own ``torch.Generator``: that state is not checkpointed,
    so a resumed run would draw other augmentations than the uninterrupted one."""
    if isinstance(getattr(augmenter, "generator", None), torch.Generator):
        raise _err(
            f"augmenter = {augmenter!r}",
            "the augmenter draws from its own torch.Generator, whose state checkpoints do not "
            "save, so a resumed run would not continue exactly",
            "leave its generator = None: the global torch RNG it then draws from is checkpointed",
        )


_PROBE_BATCH = 2


def _zero_observations(obs_space: spaces.Dict, device: torch.device) -> dict[str, torch.Tensor]:
    """A batch of ``_PROBE_BATCH`` all-zero observations of ``obs_space`` as the replay buffer
    hands them out (float64 stored as float32), or ``{}`` when a key has no fixed shape."""
    obs = {}
    for key, space in obs_space.spaces.items():
        if space.shape is None or space.dtype is None:
            return {}
        dtype = np.float32 if space.dtype == np.float64 else space.dtype
        obs[key] = torch.as_tensor(np.zeros((_PROBE_BATCH, *space.shape), dtype), device=device)
    return obs


def _observation_space(env: Any) -> spaces.Space:
    """An env's observation space, per env for a vector env."""
    return getattr(env, "single_observation_space", env.observation_space)


def _env_zero_observations(train_env: Any, device: torch.device) -> dict[str, torch.Tensor]:
    """:func:`_zero_observations` of the training env's (single) observation space; ``{}``
    when it is not a fixed-shape ``Dict`` (the env checks report that)."""
    obs_space = _observation_space(train_env)
    if not isinstance(obs_space, spaces.Dict):
        return {}
    return _zero_observations(obs_space, device)


def _looks_channels_last(shape: tuple[int, ...]) -> bool:
    """An image of shape ``(H, W, C)``: three axes, the last smaller than both others (a
    ``(C, H, W)`` image has its channel axis first; a square one like MinAtar's ``(10, 10,
    10)`` is not judged)."""
    return len(shape) == 3 and shape[2] < min(shape[0], shape[1])


def _channels_last_keys(obs: dict[str, torch.Tensor]) -> list[str]:
    """The keys of a probe batch whose observations look ``(H, W, C)``."""
    return [k for k, v in obs.items() if _looks_channels_last(tuple(v.shape[1:]))]


def _channels_last_problem(keys: list[str]) -> tuple[str, str]:
    """What is wrong with channels-last image keys, and the fix."""
    shown = ", ".join(repr(k) for k in keys)
    return (
        f"the image key(s) {shown} look channels-last (H, W, C), but image encoders and "
        "augmentations read (C, H, W)",
        f"wrap the env with super_sac.wrappers.ChannelsFirstWrapper(env, keys={tuple(keys)!r})",
    )


def _validate_image_scale(agent: Agent, train_env: Any) -> None:
    """A built-in image encoder (``pixel_scale < 1``, made for 8-bit pixels) reading float
    images declared within ``[0, 1]`` would scale them twice, to at most 1/255."""
    encoder = agent.encoder
    scale, key = getattr(encoder, "pixel_scale", None), getattr(encoder, "image_key", None)
    obs_space = _observation_space(train_env)
    if not isinstance(scale, float) or scale >= 1.0 or not isinstance(obs_space, spaces.Dict):
        return
    space = obs_space.spaces.get(key)
    if not isinstance(space, spaces.Box) or not np.issubdtype(space.dtype, np.floating):
        return
    low, high = float(np.min(space.low)), float(np.max(space.high))
    if high <= 1.0:
        uint8 = (
            f"wrap the env with super_sac.wrappers.Uint8Wrapper(env, keys=({key!r},)) (a "
            "quarter of the replay memory), or "
            if low >= 0
            else ""
        )
        raise ConfigError(
            f"the encoder {type(encoder).__name__} multiplies its images by pixel_scale = "
            f"{scale:.6g} (made for uint8 pixels in 0..255), but {key!r} holds floats declared "
            f"in [{low:g}, {high:g}]: they would reach the network within {scale * high:.6g} "
            f"of zero. Fix: {uint8}build the encoder with pixel_scale=1.0"
        )


def _has_lazy_parameters(module: torch.nn.Module) -> bool:
    lazy = (torch.nn.parameter.UninitializedParameter, torch.nn.parameter.UninitializedBuffer)
    return any(isinstance(t, lazy) for t in (*module.parameters(), *module.buffers()))


def _validate_encoder_probe(agent: Agent, train_env: Any) -> None:
    """Run the encoder once on a zero batch of the env's observations before anything is
    allocated, so that an encoder built for other keys or sizes fails here, naming the shapes,
    and not at the first action; its output must be ``(batch, embedding_dim)`` floats, the
    features the actor and critics were built for.

    An encoder with lazy modules (``nn.LazyLinear``) is materialised by this call (the loop's
    target copy cannot be made of uninitialised parameters); it draws its initial weights from
    the global torch RNG, as building the module would. Any other encoder runs as a copy, with
    the RNG left as it was, so the agent is untouched.
    """
    obs = _env_zero_observations(train_env, agent.device)
    if not obs:
        return
    name = type(agent.encoder).__name__
    lazy = _has_lazy_parameters(agent.encoder)
    encoder = agent.encoder if lazy else copy.deepcopy(agent.encoder)
    training = encoder.training
    encoder.eval()  # a probe of zeros must not move running statistics
    devices = [agent.device] if agent.device.type == "cuda" else []
    try:
        with torch.no_grad():
            if lazy:
                out = encoder(obs)
            else:
                with torch.random.fork_rng(devices=devices):
                    out = encoder(obs)
    except Exception as exc:  # any failure of user code, reported with the observations
        layout = {k: f"{tuple(v.shape[1:])} {str(v.dtype).replace('torch.', '')}"
                  for k, v in obs.items()}  # fmt: skip
        detail = str(exc).rstrip(". ")
        hwc = _channels_last_keys(obs)
        if hwc:
            problem, how = _channels_last_problem(hwc)
            fix = f". The {problem}. Fix: {how}"
        elif "Fix:" in detail:  # the encoder's own message says what to do
            fix = ""
        else:
            fix = (". Fix: build the encoder for these keys and shapes (FlatEncoder(dim) takes "
                   "the sum of the keys' flat sizes)")  # fmt: skip
        raise ConfigError(
            f"the encoder {name} cannot read the env's observations {layout} (a batch of "
            f"{_PROBE_BATCH}; float64 arrives as float32): {type(exc).__name__}: {detail}{fix}"
        ) from exc
    finally:
        encoder.train(training)
    expected = (_PROBE_BATCH, agent.encoder.embedding_dim)
    feature_dtype = next(agent.actor.parameters()).dtype
    if not (isinstance(out, torch.Tensor) and out.dtype == feature_dtype):
        got = type(out).__name__ if not isinstance(out, torch.Tensor) else f"{out.dtype} tensor"
        dtype = str(feature_dtype).replace("torch.", "")
        raise ConfigError(
            f"the encoder {name} returns a {got}, but the actor and critics read {dtype} "
            f"features of shape (batch, embedding_dim). Fix: return {dtype} features from "
            f"forward (e.g. end it with .to(torch.{dtype}))"
        )
    if tuple(out.shape) != expected:
        flat = sum(int(np.prod(v.shape[1:])) for v in obs.values())
        raise ConfigError(
            f"the encoder {name} returns features of shape {tuple(out.shape)} for a batch of "
            f"{_PROBE_BATCH}, but its embedding_dim is {expected[1]}, the width the actor and "
            f"critics were built for. Fix: make embedding_dim the width forward returns (a "
            f"FlatEncoder(dim) of these observations needs dim = {flat}, the sum of the keys' "
            "flat sizes)"
        )


def _validate_augmenter_probe(cfg: TrainConfig, agent: Agent, train_env: Any) -> None:
    """Run the augmenter, and the encoder on its output, once on a tiny zero batch before
    training, so that a crop the encoder cannot read (RAD's sizes) fails here and not at the
    first update. The torch RNG and the agent are left as they were."""
    if cfg.augmenter is None:
        return
    obs = _env_zero_observations(train_env, agent.device)
    if not obs:
        return
    _validate_augmented_keys(cfg.augmenter, obs)
    devices = [agent.device] if agent.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        aug_obs = _probe_augmenter_call(cfg, obs)
        _probe_encoder(agent, aug_obs)


def _validate_augmented_keys(augmenter: Any, obs: dict[str, torch.Tensor]) -> None:
    """An :class:`AugmentationSequence` shifts and crops the last two axes of ``(C, H, W)``
    images: refuse channels-last images (it would shift along the colour axis), and warn when
    it finds no image to augment."""
    if not isinstance(augmenter, AugmentationSequence):
        return
    keys = augmenter.keys if augmenter.keys is not None else [
        k for k, v in obs.items() if v.dim() == 4
    ]  # fmt: skip
    hwc = _channels_last_keys({k: obs[k] for k in keys if k in obs})
    if hwc:
        problem, how = _channels_last_problem(hwc)
        raise _err(
            f"augmenter = {augmenter!r}",
            "it would shift and crop the last two axes of images it reads as (C, H, W). The "
            + problem,
            how,
        )
    if not keys:
        _warn(
            f"augmenter = {augmenter!r}",
            f"it has nothing to augment: none of the observation keys {sorted(obs)} holds "
            "(C, H, W) images, so every batch passes through unchanged",
            "remove the augmenter binding (state observations need none; a config written for "
            "pixels binds one, e.g. the DMC script's default drqv2.gin with --from_states: "
            "pass a state config such as --config sac_state.gin)",
        )


def _probe_augmenter_call(cfg: TrainConfig, obs: dict[str, torch.Tensor]) -> dict[str, Any]:
    try:
        aug_obs, _ = cfg.augmenter(obs, {k: v.clone() for k, v in obs.items()})
    except Exception as exc:  # any failure of user code, reported with the binding
        raise _err(
            f"augmenter = {cfg.augmenter!r}",
            f"calling it as augmenter(obs, next_obs) on a zero batch of the env's observations "
            f"failed with {type(exc).__name__}: {exc}",
            "bind an augmenter that takes (obs, next_obs) dicts and returns a pair of dicts",
        ) from exc
    drq_samples = max(cfg.aug_target_samples, cfg.aug_critic_samples)
    if drq_samples > 1:
        try:
            cfg.augmenter(obs)
        except Exception as exc:
            raise _err(
                f"aug_target_samples = {cfg.aug_target_samples}, aug_critic_samples = "
                f"{cfg.aug_critic_samples}",
                f"DrQ's extra augmentations call augmenter(obs) with one dict, which failed "
                f"with {type(exc).__name__}: {exc}",
                "make the augmenter accept one dict (as AugmentationSequence does), or set "
                "aug_target_samples = aug_critic_samples = 1",
            ) from exc
    return aug_obs


def _probe_encoder(agent: Agent, aug_obs: dict[str, Any]) -> None:
    encoder = copy.deepcopy(agent.encoder)  # the agent's own stats stay put
    try:
        encoder(aug_obs)
    except Exception as exc:
        shapes = {k: tuple(v.shape) for k, v in aug_obs.items() if isinstance(v, torch.Tensor)}
        raise ConfigError(
            f"super_sac.augmenter: the encoder {type(agent.encoder).__name__} cannot read the "
            f"augmented observations {shapes}: {type(exc).__name__}: {exc}. Fix: match the "
            "augmentation's output size and the encoder's input size: for RAD's crops build "
            "the encoder for the cropped size (DrQPixelEncoder.image_size = rendered size - "
            "RadAug.crop) and render frames that large (the DMC script's --image_size), or "
            "change RadAug.crop"
        ) from exc


def _validate_ensemble(cfg: TrainConfig, agent: Agent) -> None:
    """SUNRISE settings: backup weights and bootstrap masks."""
    if cfg.weight_type is None and cfg.weighted_bellman_temp:
        raise _err(
            f"weight_type = None, weighted_bellman_temp = {cfg.weighted_bellman_temp}",
            "weighted Bellman backups need a weight formula",
            "set weight_type = 'sunrise' (the paper's) or 'softmax', or weighted_bellman_temp "
            "= None",
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
    elif cfg.bc_warmup_steps or cfg.num_steps_offline or cfg.use_afbc_update_online:
        raise ConfigError(
            f"Agent.ensemble_size = {agent.ensemble_size} with behavioral cloning / AFBC "
            "(bc_warmup_steps, num_steps_offline, use_afbc_update_online): the filtered-BC "
            "update is written for a single actor and SUNRISE ensembles do not support it yet. "
            "Fix: set Agent.ensemble_size = 1 for offline training."
        )


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


def _validate_phases(cfg: TrainConfig, agent: Agent, buffer: ReplayBuffer) -> None:
    """The behavioral cloning / offline / online schedule and the AFBC settings."""
    if cfg.bc_warmup_steps + cfg.num_steps_offline + cfg.num_steps_online == 0:
        raise _err(
            "num_steps_online = 0",
            "bc_warmup_steps, num_steps_offline and num_steps_online are all 0: nothing to do",
            "give at least one phase a positive number of steps",
        )
    offline = [k for k in ("bc_warmup_steps", "num_steps_offline") if getattr(cfg, k) > 0]
    if offline and len(buffer) == 0 and not cfg.resume:  # a resumed run restores its buffer
        raise _err(
            f"{offline[0]} = {getattr(cfg, offline[0])}",
            "the behavioral cloning and offline phases learn from the replay buffer's data, but "
            "the buffer is empty",
            "load a dataset first: buffer.load_dataset('<minari id or .npz path>', env, "
            "gamma=...) (experiments/offline/train_offline.py --dataset does it), or "
            "ReplayBuffer.load('<buffer>.npz') for a saved buffer",
        )
    if cfg.num_steps_online > 0 and not (cfg.use_pg_update_online or cfg.use_afbc_update_online):
        raise _err(
            "use_pg_update_online = False",
            "no actor update would run online (use_afbc_update_online is False too)",
            "set use_pg_update_online = True (SAC/TD3-style fine-tuning) and/or "
            "use_afbc_update_online = True (AWAC-style)",
        )
    uses_afbc = cfg.num_steps_offline > 0 or cfg.use_afbc_update_online
    afbc_only = {
        "afbc_per": "advantage-prioritized batches are only drawn by AFBC updates",
        "afbc_update_encoder": "only AFBC updates train the encoder through the actor's loss",
    }
    for key, why in afbc_only.items():
        if getattr(cfg, key) and not uses_afbc:
            raise _err(
                f"{key} = True",
                f"{why}, and none run",
                f"set num_steps_offline > 0 or use_afbc_update_online = True, or {key} = False",
            )
    for key in ("afbc_temperature", "afbc_max_weight"):
        if not getattr(cfg, key) > 0:
            raise _err(f"{key} = {getattr(cfg, key)}", "must be > 0", "use e.g. 1.0 and 20.0")
    wanted = ("indirect",) if agent.discrete else ("mean", "max")
    if uses_afbc and cfg.afbc_filter != "none" and agent.adv_method not in wanted:
        raise ConfigError(
            f"Agent.adv_method = {agent.adv_method!r} does not fit "
            f"{'discrete' if agent.discrete else 'continuous'} actions. Fix: set "
            f"Agent.adv_method to one of {wanted}."
        )
    if cfg.num_steps_online > 0 and buffer.protected >= buffer.size:
        raise _err(
            f"num_steps_online = {cfg.num_steps_online}",
            f"the replay buffer (size {buffer.size}) is full of protected offline data, so "
            "online transitions have nowhere to go",
            "build the ReplayBuffer with a larger size than the dataset",
        )
    if len(buffer) > 0:
        expected = cfg.gamma ** np.arange(1, cfg.n_step + 1)
        stored = buffer.stored_discounts()
        if not np.all(np.isclose(stored[:, None], expected[None, :], rtol=1e-5).any(axis=1)):
            raise _err(
                f"gamma = {cfg.gamma}",
                f"the buffer holds transitions with bootstrap discounts {stored[:5].tolist()}, "
                f"not gamma**k for k in 1..n_step",
                "load the dataset with the run's gamma (load_dataset(..., gamma=super_sac.gamma))",
            )
        offline = cfg.num_steps_offline > 0 or cfg.bc_warmup_steps > 0
        if cfg.reward_clip is not None:
            _warn(
                f"reward_clip = {cfg.reward_clip}",
                f"clips the rewards the loop collects, not the {len(buffer)} transitions already "
                "in the buffer (a dataset), which keep theirs: the critics learn from both",
                "clip the dataset's rewards before loading it, or leave reward_clip = None",
            )
        if cfg.n_step > 1 and offline and np.allclose(stored, cfg.gamma):
            _warn(
                f"n_step = {cfg.n_step}",
                f"n-step returns are built from the online transitions only; the {len(buffer)} "
                "dataset transitions in the buffer are one-step, so the offline phase learns "
                "one-step targets",
                "nothing, if that is meant (the original's offline configs do this); set "
                "super_sac.n_step = 1 for one-step targets online too",
            )


def _validate_envs(cfg: TrainConfig, agent: Agent, train_env: Any, test_env: gym.Env) -> None:
    for label, env in (("train_env", train_env), ("test_env", test_env)):
        obs_space = _observation_space(env)
        act_space = getattr(env, "single_action_space", env.action_space)
        if not isinstance(obs_space, spaces.Dict):
            raise ConfigError(
                f"{label} returns {type(obs_space).__name__} observations, but super_sac needs "
                f"dict observations. Fix: {_dict_wrapper_fix(obs_space)}"
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
    if cfg.num_steps_online > 0 and _same_env(train_env, test_env):
        raise ConfigError(
            "train_env and test_env are the same env object: every evaluation would reset the "
            "training episode in progress, so stored transitions would cross resets and time "
            "limits would never fire. Fix: make two envs (the test env with its own "
            "gymnasium.make call); an offline-only run (num_steps_online = 0) may share one"
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
        disabled = mode in (AutoresetMode.DISABLED, AutoresetMode.DISABLED.value)
        if cfg.max_episode_steps is not None and not disabled:
            raise _err(
                f"max_episode_steps = {cfg.max_episode_steps}",
                f"training episodes are cut at this step, but the vector train_env resets its "
                f"envs itself (autoreset mode {mode})",
                "build the vector env with autoreset_mode=gymnasium.vector.AutoresetMode.DISABLED "
                "(the loop then resets the envs), or leave max_episode_steps = None and give each "
                "env its own limit (gymnasium.wrappers.TimeLimit, or gymnasium.make(..., "
                "max_episode_steps=N))",
            )


def _dict_wrapper_fix(obs_space: spaces.Space) -> str:
    """The wrapper that makes dict observations of ``obs_space``."""
    shape = getattr(obs_space, "shape", None) or ()
    if isinstance(obs_space, spaces.Box) and obs_space.dtype == np.uint8 and len(shape) == 3:
        fix = (
            "wrap the env with super_sac.wrappers.DictObsWrapper(env) (the frames under 'obs', "
            "the key the built-in image encoders read; it keeps the uint8 pixels, where "
            "SimpleGymWrapper would store them as float32, 4x the memory)"
        )
        if _looks_channels_last(tuple(shape)):
            fix += ", then ChannelsFirstWrapper, since these look (H, W, C)"
        return fix
    return (
        "wrap the env with super_sac.wrappers.SimpleGymWrapper (Box -> {'obs': ...}), "
        "DictObsWrapper for images, or your own ObservationWrapper returning a dict"
    )


def _observation_layout(env: Any) -> dict[str, tuple[tuple[int, ...], str]]:
    """``{key: (shape, dtype)}`` of an env's dict observations as the agent reads them
    (float64 is acted on as float32)."""
    space = _observation_space(env)
    layout = {}
    for key, sub in space.spaces.items():
        if sub.dtype is None:  # a Dict, Tuple or other space without one dtype
            layout[key] = (tuple(sub.shape or ()), type(sub).__name__)
            continue
        dtype = np.dtype(np.float32 if sub.dtype == np.float64 else sub.dtype)
        layout[key] = (tuple(sub.shape or ()), dtype.name)
    return layout


def _validate_same_observations(agent: Agent, train_env: Any, test_env: gym.Env) -> None:
    """The test env is evaluated by the agent built for the train env's observations: a key
    both give must have the same shape (other frames would crash an evaluation, or be read
    silently, e.g. as a centre crop of larger frames), and the encoder must read the test
    env's observations (a key the train env has and the encoder ignores may be missing).
    Dtypes may differ (uint8 frames against float32 0..255 read the same)."""
    train, test = _observation_layout(train_env), _observation_layout(test_env)
    diffs = [
        f"{k!r} is {test[k][0]} {test[k][1]} (train_env: {train[k][0]} {train[k][1]})"
        for k in train
        if k in test and test[k][0] != train[k][0]
    ]
    problem = "; ".join(diffs)
    if not problem and set(test) != set(train):
        try:  # the train env's probe has passed: the keys the test env lacks may be unused
            _validate_encoder_probe(agent, test_env)
        except ConfigError:
            missing = [k for k in train if k not in test]
            problem = (
                f"it lacks the key(s) {missing}, and the encoder {type(agent.encoder).__name__} "
                "cannot read its observations without them"
            )
    if problem:
        raise ConfigError(
            f"test_env's observations differ from train_env's: {problem}. The agent evaluates "
            "on test_env with the encoder built for train_env's observations. Fix: build both "
            "envs with the same options and wrappers (image size, keys, layout)"
        )


def _same_env(train_env: Any, test_env: gym.Env) -> bool:
    """Whether ``test_env`` is ``train_env`` or one of its sub-envs (compared unwrapped)."""
    core = getattr(test_env, "unwrapped", test_env)
    sb3 = getattr(train_env, "venv", None)  # an SB3 VecEnv behind the library's adapter
    candidates = [train_env, *getattr(train_env, "envs", ()), *getattr(sb3, "envs", ())]
    return any(getattr(env, "unwrapped", env) is core for env in candidates)


def _validate_optimizer_settings(cfg: TrainConfig, agent: Agent, buffer: ReplayBuffer) -> None:
    """Adam's betas for alpha, PopArt's step size, prioritized replay's final beta and the
    advantage's critic reduction: their ranges, and a warning when one is set where it does
    nothing."""
    betas = cfg.alpha_betas
    if len(betas) != 2 or not all(isinstance(b, (int, float)) and 0.0 <= b < 1.0 for b in betas):
        raise _err(
            f"alpha_betas = {betas!r}",
            "Adam's betas are two numbers in [0, 1)",
            "use e.g. (0.9, 0.999) (Adam's and SAC's) or (0.5, 0.999) (the original super_sac)",
        )
    if not 0.0 < cfg.popart_beta <= 1.0:
        raise _err(
            f"popart_beta = {cfg.popart_beta}",
            "PopArt's step size must lie in (0, 1]",
            "use e.g. 1e-4 (the original super_sac) or 3e-4",
        )
    if cfg.per_beta_final is not None and not 0.0 <= cfg.per_beta_final <= 1.0:
        raise _err(
            f"per_beta_final = {cfg.per_beta_final}",
            "prioritized replay's importance-sampling exponent must lie in [0, 1]",
            "use 1.0 (Schaul et al. 2016), or None to keep the buffer's beta fixed",
        )
    _warn_unused_fidelity_settings(cfg, agent, buffer)


def _warn_unused_fidelity_settings(cfg: TrainConfig, agent: Agent, buffer: ReplayBuffer) -> None:
    afbc_runs = cfg.num_steps_offline > 0 or (
        cfg.use_afbc_update_online and cfg.num_steps_online > 0
    )
    unused = (
        (
            "popart_beta",
            getattr(agent.critic, "popart", None) is None,
            "the critics have no PopArt statistics",
            "set Agent.auto_rescale_targets = True, or remove the binding",
        ),
        (
            "per_beta_final",
            not buffer.prioritized,
            "the ReplayBuffer samples uniformly, so there are no importance weights",
            "set ReplayBuffer.prioritized = True, or remove the binding",
        ),
        (
            "alpha_betas",
            cfg.alpha_lr == 0,
            "alpha is not tuned (alpha_lr = 0)",
            "set alpha_lr > 0, or remove the binding",
        ),
        (
            "afbc_critic_reduction",
            not afbc_runs,
            "no AFBC update runs, so no advantage is estimated",
            "set num_steps_offline > 0 or use_afbc_update_online = True, or remove the binding",
        ),
    )
    for name, does_nothing, problem, fix in unused:
        value = getattr(cfg, name)
        if does_nothing and value != _default(name):
            _warn(f"{name} = {value!r}", f"has no effect: {problem}", fix)


def _validate_video(cfg: TrainConfig, test_env: gym.Env) -> None:
    """Evaluation videos need an encoder and a test env that renders RGB frames."""
    if cfg.video_interval < 0:
        raise _err(
            f"video_interval = {cfg.video_interval}",
            "must be >= 0",
            "use 0 (no videos) or k to record every k-th evaluation",
        )
    if cfg.video_interval == 0:
        return
    if not (cfg.save_to_disk or cfg.log_to_disk):
        _warn(
            f"video_interval = {cfg.video_interval}",
            "has no effect: the run writes nothing (save_to_disk and log_to_disk are False)",
            "set save_to_disk or log_to_disk to True, or video_interval = 0",
        )
        return
    if cfg.eval_episodes == 0:
        _warn(
            f"video_interval = {cfg.video_interval}",
            "has no effect: eval_episodes = 0, so there is no evaluation to record",
            "set eval_episodes > 0, or video_interval = 0",
        )
        return
    try:
        require_encoder()
    except VideoDependencyError as err:
        raise _err(f"video_interval = {cfg.video_interval}", str(err), VIDEO_EXTRA_HINT) from None
    mode = getattr(test_env, "render_mode", None)
    if mode != "rgb_array":
        raise _err(
            f"video_interval = {cfg.video_interval}",
            f"the test env renders no RGB frames (render_mode={mode!r})",
            'make the test env with render_mode="rgb_array" (the training scripts do so when '
            'video_interval > 0), e.g. gymnasium.make(env_id, render_mode="rgb_array")',
        )
