"""Batched, on-device image augmentations for pixel RL (DrQ, DrQ-v2, RAD and a catalogue of
photometric and geometric ones), chained over the image keys of observation dicts by
:class:`AugmentationSequence`.

Every augmentation works on a ``(B, C, H, W)`` tensor on whatever device it lives on, with one
vectorised call per batch (no Python loop over samples), and never modifies its input: ``uint8``
images become ``float32`` in the same range (0..255 stays 0..255). Each one splits its randomness
from its arithmetic: ``sample_params(batch, shape, device, generator)`` draws the per-sample
parameters (from the global torch RNG, or from ``generator``) and ``apply(images, params)`` is a
deterministic function of them, so one draw can serve both ``obs`` and ``next_obs``.

Frame stacks are channel-concatenated frames; augmentations that read colour (grayscale, colour
jitter, coloured fills, random convolution) need RGB frames, ``C = 3 * k``, and treat each
3-channel frame alike (one draw per sample, shared by the frames of its stack).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gin
import torch

from super_sac.augmentations.base import (  # noqa: F401  (public names re-exported)
    LUMA_WEIGHTS,
    Augmentation,
    Device,
    Generator,
    Params,
    _check_images,
    as_float,
    center_crop,
    luma,
)
from super_sac.augmentations.geometric import (  # noqa: F401  (re-exported)
    CutoutAug,
    CutoutColorAug,
    DrqAug,
    Drqv2Aug,
    HorizontalFlipAug,
    IdentityAug,
    RadAug,
    RotateAug,
    TranslateAug,
    VerticalFlipAug,
    bilinear_shift,
)
from super_sac.augmentations.photometric import (  # noqa: F401  (re-exported)
    ColorJitterAug,
    GammaAug,
    GrayscaleAug,
    RandomConvAug,
)

# ----------------------------------------------------------------------------- the sequence


@gin.configurable(module="super_sac.augmentations")
class AugmentationSequence:
    """Apply ``aug_list`` in order to the image keys of observation dicts.

    ``seq(obs)`` returns one new dict, ``seq(obs, next_obs)`` a tuple of two. Inputs are never
    modified. Image keys are ``keys``, or (``None``) every tensor value with ``ndim == 4``
    ``(B, C, H, W)``; other entries pass through unchanged. Images come out float32 in the input's
    range (uint8 0..255 -> float 0..255). Each image key gets its own draws.

    :param aug_list: augmentations, applied first to last.
    :param keys: image keys to augment; ``None``: every 4-d tensor.
    :param shared_draw: True: ``obs`` and ``next_obs`` of a sample get the same draw (the
        original super_sac; RAD for ``translate``); False: independent draws (DrQ, DrQ-v2).
    :param generator: a ``torch.Generator`` for the draws; ``None``: the global torch RNG.
    """

    def __init__(
        self,
        aug_list: Sequence[Augmentation] | Augmentation,
        keys: Sequence[str] | None = None,
        shared_draw: bool = True,
        generator: torch.Generator | None = None,
    ) -> None:
        augs = [aug_list] if isinstance(aug_list, Augmentation) else list(aug_list)
        for aug in augs:
            if (
                isinstance(aug, type)
                or not callable(getattr(aug, "sample_params", None))
                or not callable(getattr(aug, "apply", None))
            ):
                raise TypeError(
                    f"AugmentationSequence needs augmentations with sample_params/apply, got "
                    f"{aug!r}; in gin, pass instances: aug_list = [@Drqv2Aug()]"
                )
        self.aug_list = augs
        self.keys = None if keys is None else [keys] if isinstance(keys, str) else list(keys)
        self.shared_draw = bool(shared_draw)
        self.generator = generator

    def image_keys(self, obs: Mapping[str, Any]) -> list[str]:
        """The keys of ``obs`` this sequence augments (an error for missing or non-4-d ones)."""
        if self.keys is None:
            return [k for k, v in obs.items() if isinstance(v, torch.Tensor) and v.ndim == 4]
        missing = [k for k in self.keys if k not in obs]
        if missing:
            raise KeyError(
                f"AugmentationSequence keys {missing} are not in the observation (keys: "
                f"{list(obs)}); fix AugmentationSequence.keys or use keys=None (every 4-d tensor)"
            )
        for k in self.keys:
            _check_images(obs[k], f"AugmentationSequence key {k!r}")
        return list(self.keys)

    def augment_pair(
        self, images: torch.Tensor, next_images: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Run the chain on one key's images (and next images), sharing or not each draw."""
        if next_images is not None and self.shared_draw and next_images.shape != images.shape:
            raise ValueError(
                f"shared_draw needs obs and next_obs images of one shape, got "
                f"{tuple(images.shape)} and {tuple(next_images.shape)}; use shared_draw=False"
            )
        x, y = as_float(images), None if next_images is None else as_float(next_images)
        if not self.aug_list:  # still a float32 copy, never an alias of the stored batch
            return x.clone(), None if y is None else y.clone()
        for aug in self.aug_list:
            params = aug.sample_params(x.shape[0], x.shape[1:], x.device, self.generator)
            new_x = aug.apply(x, params)
            if y is not None:
                if not self.shared_draw:
                    params = aug.sample_params(y.shape[0], y.shape[1:], y.device, self.generator)
                y = aug.apply(y, params)
            x = new_x
        return x, y

    @torch.no_grad()
    def __call__(
        self, obs: Mapping[str, Any], next_obs: Mapping[str, Any] | None = None
    ) -> dict[str, Any] | tuple[dict[str, Any], dict[str, Any]]:
        out, next_out = dict(obs), None if next_obs is None else dict(next_obs)
        for key in self.image_keys(obs):
            if next_out is not None and key not in next_out:
                raise KeyError(f"image key {key!r} is in obs but not in next_obs; pass both dicts")
            nxt = None if next_out is None else next_out[key]
            out[key], augmented_next = self.augment_pair(obs[key], nxt)
            if next_out is not None:
                next_out[key] = augmented_next
        return out if next_out is None else (out, next_out)

    def __repr__(self) -> str:
        return (
            f"AugmentationSequence({self.aug_list!r}, keys={self.keys!r}, "
            f"shared_draw={self.shared_draw})"
        )
