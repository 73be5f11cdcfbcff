"""The augmentations' shared parts: random draws, pure image helpers and the
:class:`Augmentation` base class (see :mod:`super_sac.augmentations`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

Params = dict[str, torch.Tensor]
Device = torch.device | str
Generator = torch.Generator | None

#: ITU-R BT.601 luma weights of (R, G, B): Y = 0.299 R + 0.587 G + 0.114 B
LUMA_WEIGHTS = (0.299, 0.587, 0.114)


# ----------------------------------------------------------------------------- random draws


def _draw_device(device: torch.device | str, generator: torch.Generator | None) -> torch.device:
    """Draw on the generator's device when one is given (a generator only serves its own
    device), else on the images' device."""
    return generator.device if generator is not None else torch.device(device)


def _uniform(
    size: tuple[int, ...],
    low: float,
    high: float,
    device: torch.device | str,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """``U[low, high)`` float32 draws of ``size`` on ``device``."""
    u = torch.rand(size, device=_draw_device(device, generator), generator=generator)
    return (low + (high - low) * u).to(device)


def _randint(
    low: int,
    high: int,
    size: tuple[int, ...],
    device: torch.device | str,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Integers uniform in ``{low, ..., high - 1}`` (int64) of ``size`` on ``device``."""
    draw = torch.randint(
        low, high, size, device=_draw_device(device, generator), generator=generator
    )
    return draw.to(device)


def _coin(
    batch: int, p: float, device: torch.device | str, generator: torch.Generator | None
) -> torch.Tensor:
    """A ``(batch,)`` bool mask, each entry True with probability ``p``."""
    return _uniform((batch,), 0.0, 1.0, device, generator) < p


# ----------------------------------------------------------------------------- pure helpers


def as_float(images: torch.Tensor) -> torch.Tensor:
    """``images`` as float32 without rescaling (uint8 0..255 -> float 0..255); a float32 input
    is returned as is (callers must not write into it)."""
    return images.to(torch.float32)


def _check_images(images: torch.Tensor, name: str) -> None:
    if not isinstance(images, torch.Tensor) or images.ndim != 4:
        shape = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
        raise ValueError(
            f"{name} expects a (B, C, H, W) image batch, got {shape}; add a batch dimension "
            "(images[None]) or pass only image keys to AugmentationSequence(keys=[...])"
        )


def _rgb_frames(images: torch.Tensor, name: str) -> torch.Tensor:
    """View ``(B, 3k, H, W)`` as ``(B, k, 3, H, W)``; a clear error when C is not 3k."""
    b, c, h, w = images.shape
    if c % 3 != 0:
        raise ValueError(
            f"{name} works on stacks of RGB frames (C = 3 * k channels), got C={c}; apply it "
            "only to RGB image keys (AugmentationSequence(keys=[...])), render RGB frames, or "
            "drop it for grayscale stacks"
        )
    return images.reshape(b, c // 3, 3, h, w)


def luma(frames: torch.Tensor) -> torch.Tensor:
    """Grayscale of RGB frames ``(..., 3, H, W)`` -> ``(..., 1, H, W)``:
    ``Y = 0.299 R + 0.587 G + 0.114 B`` (ITU-R BT.601)."""
    w = frames.new_tensor(LUMA_WEIGHTS).view(3, 1, 1)
    return (frames * w).sum(dim=-3, keepdim=True)


def _per_sample(values: torch.Tensor, ndim: int) -> torch.Tensor:
    """``(B,)`` -> ``(B, 1, ..., 1)`` with ``ndim`` dimensions, for broadcasting."""
    return values.view(-1, *([1] * (ndim - 1)))


def _gather_pixels(images: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Per-sample pixel gather: ``out[b, c, i, j] = images[b, c, rows[b, i], cols[b, j]]`` for
    ``rows`` ``(B, h)`` and ``cols`` ``(B, w)`` (one vectorised ``gather``)."""
    b, c, _, w_in = images.shape
    flat = (rows[:, :, None] * w_in + cols[:, None, :]).reshape(b, 1, -1)
    out = images.flatten(2).gather(2, flat.expand(b, c, flat.shape[-1]))
    return out.view(b, c, rows.shape[1], cols.shape[1])


def _crop(images: torch.Tensor, top: torch.Tensor, left: torch.Tensor, size: tuple[int, int]):
    """Per-sample crops of ``size`` whose top-left corners are ``(top[b], left[b])``."""
    dev = images.device
    rows = top[:, None] + torch.arange(size[0], device=dev)
    cols = left[:, None] + torch.arange(size[1], device=dev)
    return _gather_pixels(images, rows, cols)


def center_crop(images: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """The centre ``size = (h, w)`` window of ``(B, C, H, W)`` images, top-left corner at
    ``((H - h) // 2, (W - w) // 2)`` (RAD's evaluation-time crop, Laskin et al. 2020). Returns a
    view of the input (no copy, dtype kept).

    :param images: ``(B, C, H, W)`` batch.
    :param size: output ``(height, width)``, at most ``(H, W)``.
    """
    _check_images(images, "center_crop")
    h, w = (int(s) for s in size)
    height, width = images.shape[-2:]
    if not (0 < h <= height and 0 < w <= width):
        raise ValueError(
            f"center_crop size {(h, w)} does not fit images of {(height, width)}; choose a size "
            "between (1, 1) and the image size"
        )
    top, left = (height - h) // 2, (width - w) // 2
    return images[:, :, top : top + h, left : left + w]


# ----------------------------------------------------------------------------- the base class


class Augmentation:
    """Base class: ``aug(images)`` = ``apply(images, sample_params(B, images.shape[1:], ...))``.

    Subclasses define ``sample_params`` (all randomness) and ``apply`` (a pure function of the
    images and the drawn parameters). ``batch_size``, the first positional argument of every
    augmentation, is accepted for compatibility with the original super_sac (``Drqv2Aug(256)``)
    and ignored: the batch size is read from the images.
    """

    name = "augmentation"

    def sample_params(
        self,
        batch: int,
        shape: Sequence[int],
        device: torch.device | str,
        generator: torch.Generator | None = None,
    ) -> Params:
        """Draw the random parameters of ``batch`` samples of shape ``(C, H, W)``."""
        return {}

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        """Augment ``(B, C, H, W)`` images with drawn ``params``; a new float32 tensor."""
        raise NotImplementedError

    def __call__(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        _check_images(images, type(self).__name__)
        params = self.sample_params(images.shape[0], images.shape[1:], images.device, generator)
        return self.apply(images, params)

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({settings})"


def _hw(shape: Sequence[int]) -> tuple[int, int]:
    """``(H, W)`` from a ``(C, H, W)`` or ``(B, C, H, W)`` shape."""
    return int(shape[-2]), int(shape[-1])
