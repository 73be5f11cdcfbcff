"""Checks of the optional learning features: observation statistics, augmentation, DR3, Markov."""

from __future__ import annotations

import inspect
import numbers
from typing import Any

import torch

from super_sac.agent import Agent
from super_sac.config import TrainConfig
from super_sac.validation.common import (
    AUGMENTER_EXAMPLE,
    MARKOV_COEFFS,
    ConfigError,
    _default,
    _err,
    _warn,
)


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
        if not getattr(cfg, key) >= 0:  # NaN too
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
        if not getattr(cfg, key) >= 0:  # NaN too
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
