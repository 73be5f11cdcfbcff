"""Augmentations that change pixel values: grayscale, colour jitter, gamma and random
convolution (see :mod:`super_sac.augmentations`)."""

from __future__ import annotations

from collections.abc import Sequence

import gin
import torch
import torch.nn.functional as F

from super_sac.augmentations.base import (
    Augmentation,
    Device,
    Generator,
    Params,
    _coin,
    _draw_device,
    _per_sample,
    _rgb_frames,
    _uniform,
    as_float,
    luma,
)

# ----------------------------------------------------------------------------- photometric


@gin.configurable(module="super_sac.augmentations")
class GrayscaleAug(Augmentation):
    """Random grayscale (RAD's ``grayscale``): with probability ``p_rand`` a sample's RGB frames
    are each replaced by their luma ``Y = 0.299 R + 0.587 G + 0.114 B`` in all three channels.

    Draws: RAD draws each call afresh (independent); the original shared one draw.

    :param batch_size: ignored (compatibility).
    :param p_rand: probability that a sample is turned gray.
    """

    def __init__(self, batch_size: int | None = None, p_rand: float = 0.5) -> None:
        self.p_rand = float(p_rand)

    def sample_params(
        self, batch: int, shape: Sequence[int], device: Device, generator: Generator = None
    ) -> Params:
        return {"gray": _coin(batch, self.p_rand, device, generator)}

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        frames = _rgb_frames(as_float(images), "GrayscaleAug")
        gray = luma(frames).expand_as(frames)
        out = torch.where(_per_sample(params["gray"], 5), gray, frames)
        return out.reshape(images.shape)


@gin.configurable(module="super_sac.augmentations")
class ColorJitterAug(Augmentation):
    """Random brightness, contrast and saturation (RAD's ``color_jitter``, hue left out), one
    draw per sample shared by the frames of its stack, applied in that order to each RGB frame
    ``x`` with values in ``[0, M]`` (``M = max_value``), clipping to ``[0, M]`` after each step:

    - brightness ``x <- b x``,
    - contrast ``x <- c (x - mean(Y)) + mean(Y)`` (mean luma of the frame),
    - saturation ``x <- s (x - Y) + Y`` (per-pixel luma ``Y``),

    with ``b ~ U[max(0, 1 - brightness), 1 + brightness]`` and likewise ``c``, ``s``. With
    probability ``1 - p_rand`` a sample is left unchanged.

    Draws: RAD draws each call afresh (independent); the original shared one draw.

    :param batch_size: ignored (compatibility).
    :param brightness: half-width of the brightness factor's range around 1.
    :param contrast: half-width of the contrast factor's range around 1.
    :param saturation: half-width of the saturation factor's range around 1.
    :param p_rand: probability that a sample is jittered.
    :param max_value: top of the value range (255 for uint8-valued images).
    """

    def __init__(
        self,
        batch_size: int | None = None,
        brightness: float = 0.4,
        contrast: float = 0.4,
        saturation: float = 0.4,
        p_rand: float = 1.0,
        max_value: float = 255.0,
    ) -> None:
        for name, value in (
            ("brightness", brightness),
            ("contrast", contrast),
            ("saturation", saturation),
        ):
            if value < 0:
                raise ValueError(f"ColorJitterAug {name} must be >= 0, got {value}; 0 turns it off")
        self.brightness, self.contrast = float(brightness), float(contrast)
        self.saturation, self.p_rand = float(saturation), float(p_rand)
        self.max_value = float(max_value)

    def sample_params(
        self, batch: int, shape: Sequence[int], device: Device, generator: Generator = None
    ) -> Params:
        def factor(spread: float) -> torch.Tensor:
            return _uniform((batch,), max(0.0, 1.0 - spread), 1.0 + spread, device, generator)

        return {
            "brightness": factor(self.brightness),
            "contrast": factor(self.contrast),
            "saturation": factor(self.saturation),
            "jitter": _coin(batch, self.p_rand, device, generator),
        }

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        frames = _rgb_frames(as_float(images), "ColorJitterAug")  # (B, k, 3, H, W)
        top = self.max_value
        x = (frames * _per_sample(params["brightness"], 5)).clamp(0.0, top)
        mean = luma(x).mean(dim=(-2, -1), keepdim=True)
        x = ((x - mean) * _per_sample(params["contrast"], 5) + mean).clamp(0.0, top)
        gray = luma(x)
        x = ((x - gray) * _per_sample(params["saturation"], 5) + gray).clamp(0.0, top)
        return torch.where(_per_sample(params["jitter"], 5), x, frames).reshape(images.shape)


@gin.configurable(module="super_sac.augmentations")
class GammaAug(Augmentation):
    """Random gamma: ``out = M (x / M) ** g`` (``M = max_value``) with one
    ``g ~ N(gamma_mean, gamma_std)`` per sample, clipped below at ``min_gamma`` (a gamma near or
    below 0 would blow dark pixels up); values stay in ``[0, M]``.

    Draws: the original super_sac shared one draw between ``obs`` and ``next_obs``.

    :param batch_size: ignored (compatibility).
    :param gamma_mean: mean of the gamma distribution (1 is the identity).
    :param gamma_std: its standard deviation (the original's 0.45).
    :param min_gamma: smallest gamma used.
    :param max_value: top of the value range (255 for uint8-valued images).
    """

    def __init__(
        self,
        batch_size: int | None = None,
        gamma_mean: float = 1.0,
        gamma_std: float = 0.45,
        min_gamma: float = 0.1,
        max_value: float = 255.0,
    ) -> None:
        if min_gamma <= 0:
            raise ValueError(f"GammaAug min_gamma must be > 0, got {min_gamma}; try 0.1")
        self.gamma_mean, self.gamma_std = float(gamma_mean), float(gamma_std)
        self.min_gamma, self.max_value = float(min_gamma), float(max_value)

    def sample_params(
        self, batch: int, shape: Sequence[int], device: Device, generator: Generator = None
    ) -> Params:
        normal = torch.randn((batch,), device=_draw_device(device, generator), generator=generator)
        gamma = (self.gamma_mean + self.gamma_std * normal).clamp_min(self.min_gamma)
        return {"gamma": gamma.to(device)}

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        x = (as_float(images) / self.max_value).clamp(0.0, 1.0)
        return x.pow(_per_sample(params["gamma"], 4)) * self.max_value


@gin.configurable(module="super_sac.augmentations")
class RandomConvAug(Augmentation):
    """Random convolution (Lee et al. 2020, "Network Randomization", arXiv 1910.05396): each
    sample's RGB frames pass through its own random 3x3 convolution ``3 -> 3`` channels (zero
    'same' padding, no bias) with weights ``~ N(0, 2 / (fan_in + fan_out))`` (Xavier normal, as in
    the paper), on values scaled to ``[0, 1]``; the result is scaled back and clipped to
    ``[0, max_value]``. With probability ``1 - p_rand`` a sample is left unchanged (the paper
    keeps clean inputs with probability 0.1). Vectorised as one grouped convolution.

    Draws: the paper re-draws the network every iteration; the original super_sac shared one
    draw between ``obs`` and ``next_obs``.

    :param batch_size: ignored (compatibility).
    :param p_rand: probability that a sample is convolved.
    :param max_value: top of the value range (255 for uint8-valued images).
    """

    def __init__(
        self, batch_size: int | None = None, p_rand: float = 1.0, max_value: float = 255.0
    ) -> None:
        self.p_rand, self.max_value = float(p_rand), float(max_value)

    def sample_params(
        self, batch: int, shape: Sequence[int], device: Device, generator: Generator = None
    ) -> Params:
        std = (2.0 / (27 + 27)) ** 0.5  # Xavier normal: fan_in = fan_out = 3 * 3 * 3
        normal = torch.randn(
            (batch, 3, 3, 3, 3), device=_draw_device(device, generator), generator=generator
        )
        return {
            "weight": (std * normal).to(device),
            "conv": _coin(batch, self.p_rand, device, generator),
        }

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        frames = _rgb_frames(as_float(images), "RandomConvAug")  # (B, k, 3, H, W)
        b, k, _, h, w = frames.shape
        # frames become the conv's batch, samples its groups: (k, B * 3, H, W)
        x = (frames / self.max_value).transpose(0, 1).reshape(k, b * 3, h, w)
        y = F.conv2d(x, params["weight"].reshape(b * 3, 3, 3, 3), padding=1, groups=b)
        y = (y.view(k, b, 3, h, w).transpose(0, 1) * self.max_value).clamp(0.0, self.max_value)
        return torch.where(_per_sample(params["conv"], 5), y, frames).reshape(images.shape)
