"""The errors and warnings that validation raises, and the helpers that word them."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from super_sac.config import TrainConfig

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


def _a(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun
