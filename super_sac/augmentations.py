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
import torch.nn.functional as F

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


# ----------------------------------------------------------------------------- shifts and crops


@gin.configurable(module="super_sac.augmentations")
class IdentityAug(Augmentation):
    """No augmentation: a float32 copy of the images (a baseline and a placeholder in gin).

    Draws nothing, so shared and independent draws give the same result."""

    def __init__(self, batch_size: int | None = None) -> None:
        pass

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        return images.to(torch.float32, copy=True)


@gin.configurable(module="super_sac.augmentations")
class DrqAug(Augmentation):
    """DrQ's random shift (Kostrikov et al. 2020, arXiv 2004.13649): replicate-pad each side by
    ``pad`` pixels, then crop an ``H x W`` window at an integer offset ``(dy, dx)`` uniform in
    ``{0, ..., 2 pad}``: ``out[i, j] = x[clip(i + dy - pad), clip(j + dx - pad)]`` (clip to the
    image; the replicate padding). ``dy = dx = pad`` is the identity.

    Draws: DrQ's code augments ``obs`` and ``next_obs`` with independent draws (and K / M fresh
    draws for targets and critic losses); the original super_sac shared one draw.

    :param batch_size: ignored (compatibility with the original's ``DrqAug(256)``).
    :param pad: replicate padding in pixels (4 for 84x84 frames in the paper).
    """

    def __init__(self, batch_size: int | None = None, pad: int = 4) -> None:
        if int(pad) < 0:
            raise ValueError(f"DrqAug pad must be >= 0, got {pad}; use pad=4 as in DrQ")
        self.pad = int(pad)

    def sample_params(
        self, batch: int, shape: Sequence[int], device: Device, generator: Generator = None
    ) -> Params:
        return {"shift": _randint(0, 2 * self.pad + 1, (batch, 2), device, generator)}

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        return _replicate_shift(images, params["shift"], self.pad)


@gin.configurable(module="super_sac.augmentations")
class Drqv2Aug(Augmentation):
    """DrQ-v2's random shift (Yarats et al. 2021, arXiv 2107.09645, ``RandomShiftsAug``):
    replicate-pad by ``pad``, then resample an ``H x W`` window with bilinear
    ``F.grid_sample(padding_mode="zeros", align_corners=False)`` on a grid of pixel centres
    moved by ``(dx, dy)`` pixels per sample, drawn uniform in ``{0, ..., 2 pad}`` (integers, as
    the reference code does; ``continuous=True`` draws ``U[0, 2 pad]`` for sub-pixel shifts). In
    normalised coordinates of the padded image ``(Hp = H + 2 pad)``:
    ``grid_y(i) = (2 (i + dy) + 1) / Hp - 1``, likewise ``x``; ``dy = dx = pad`` is the identity.
    Whole-pixel shifts land on pixel centres, where the bilinear weights are 0 and 1: they are
    computed as the equal index crop of the padded image (:class:`DrqAug`'s), which is cheaper;
    :func:`bilinear_shift` is the resampling itself.

    Draws: DrQ-v2 augments ``obs`` and ``next_obs`` independently
    (``AugmentationSequence(shared_draw=False)``).

    :param batch_size: ignored (compatibility with the original's ``Drqv2Aug(256)``).
    :param pad: replicate padding in pixels (4 for 84x84 frames in the paper).
    :param continuous: draw real-valued shifts instead of whole pixels.
    """

    def __init__(
        self, batch_size: int | None = None, pad: int = 4, continuous: bool = False
    ) -> None:
        if int(pad) < 0:
            raise ValueError(f"Drqv2Aug pad must be >= 0, got {pad}; use pad=4 as in DrQ-v2")
        self.pad = int(pad)
        self.continuous = bool(continuous)

    def sample_params(
        self, batch: int, shape: Sequence[int], device: Device, generator: Generator = None
    ) -> Params:
        if self.continuous:
            return {"shift": _uniform((batch, 2), 0.0, 2.0 * self.pad, device, generator)}
        shift = _randint(0, 2 * self.pad + 1, (batch, 2), device, generator)
        return {"shift": shift.to(torch.float32)}

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        shift = params["shift"]
        if self.continuous:
            return bilinear_shift(images, shift, self.pad)
        # whole-pixel shifts put every grid point on a pixel centre of the padded image, where
        # bilinear sampling returns that pixel: the same values as an index crop of the padded
        # image, gathered in the input's dtype (a quarter of the float traffic for uint8)
        return _replicate_shift(images, shift.to(torch.long), self.pad)


def _replicate_shift(images: torch.Tensor, shift: torch.Tensor, pad: int) -> torch.Tensor:
    """``out[b, :, i, j] = x[b, :, clip(i + dy_b - pad), clip(j + dx_b - pad)]``: the ``H x W``
    window at integer offset ``shift[b] = (dy, dx)`` of the image replicate-padded by ``pad``,
    as float32."""
    h, w = images.shape[-2:]
    dev = images.device
    rows = (torch.arange(h, device=dev) + shift[:, :1] - pad).clamp(0, h - 1)
    cols = (torch.arange(w, device=dev) + shift[:, 1:] - pad).clamp(0, w - 1)
    return as_float(_gather_pixels(images, rows, cols))


def bilinear_shift(images: torch.Tensor, shift: torch.Tensor, pad: int) -> torch.Tensor:
    """DrQ-v2's ``RandomShiftsAug`` resampling: replicate-pad by ``pad``, then bilinear
    ``F.grid_sample`` (zeros padding, ``align_corners=False``) of an ``H x W`` window whose
    pixel centres are moved by ``shift[b] = (dy, dx)`` pixels (real-valued allowed):
    ``grid_y(i) = (2 (i + dy) + 1) / (H + 2 pad) - 1``, likewise ``x``.

    :param images: ``(B, C, H, W)`` batch.
    :param shift: ``(B, 2)`` shifts in pixels, each in ``[0, 2 pad]``.
    :param pad: replicate padding in pixels.
    :return: float32 ``(B, C, H, W)``.
    """
    b, _, h, w = images.shape
    p = int(pad)
    padded = F.pad(as_float(images), (p, p, p, p), mode="replicate") if p else as_float(images)
    shift = shift.to(torch.float32)
    ys = (2.0 * (torch.arange(h, device=images.device) + shift[:, :1]) + 1.0) / (h + 2 * p)
    xs = (2.0 * (torch.arange(w, device=images.device) + shift[:, 1:]) + 1.0) / (w + 2 * p)
    grid = torch.stack(  # grid_sample reads (x, y) in the last dimension
        [xs[:, None, :].expand(b, h, w), ys[:, :, None].expand(b, h, w)], dim=-1
    )
    return F.grid_sample(padded, grid - 1.0, padding_mode="zeros", align_corners=False)


@gin.configurable(module="super_sac.augmentations")
class RadAug(Augmentation):
    """RAD's random crop (Laskin et al. 2020, arXiv 2004.14990): an ``(H - crop, W - crop)``
    window at an integer offset ``(top, left)`` uniform in ``{0, ..., crop}``, for frames
    rendered larger than the encoder's input (100 -> 84 in the paper: ``crop=16``). Elsewhere
    (evaluation, acting) use :func:`center_crop` to the same size.

    Draws: RAD's code crops ``obs`` and ``next_obs`` with independent calls (independent
    draws); the original super_sac shared one draw.

    :param batch_size: ignored (compatibility with the original's ``RadAug(256)``).
    :param crop: pixels removed from the height and from the width.
    """

    def __init__(self, batch_size: int | None = None, crop: int = 16) -> None:
        if int(crop) < 0:
            raise ValueError(f"RadAug crop must be >= 0, got {crop}; RAD uses crop=16 (100->84)")
        self.crop = int(crop)

    def output_size(self, shape: Sequence[int]) -> tuple[int, int]:
        """``(H - crop, W - crop)`` for images of ``shape``; an error when nothing is left."""
        h, w = _hw(shape)
        if self.crop >= min(h, w):
            raise ValueError(
                f"RadAug crop={self.crop} leaves nothing of {h}x{w} images; render larger frames "
                f"or choose crop < {min(h, w)}"
            )
        return h - self.crop, w - self.crop

    def sample_params(
        self, batch: int, shape: Sequence[int], device: Device, generator: Generator = None
    ) -> Params:
        self.output_size(shape)
        return {"corner": _randint(0, self.crop + 1, (batch, 2), device, generator)}

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        corner = params["corner"]
        return _crop(as_float(images), corner[:, 0], corner[:, 1], self.output_size(images.shape))


@gin.configurable(module="super_sac.augmentations")
class TranslateAug(Augmentation):
    """Random translation within the frame: move the content by an integer ``(dy, dx)``
    uniform in ``{-translate_max, ..., translate_max}`` and fill the uncovered border with one
    random colour per sample (uniform in ``[0, max_value]`` per RGB channel, the same for every
    frame of a stack); the size is kept and content shifted out of the frame is lost.

    It is related to, but not, RAD's ``translate`` (Laskin et al. 2020), which pastes the
    (centre-cropped) image whole at a random offset into a larger all-zero canvas, so the output
    is larger than the input and nothing is cut off.

    Draws: RAD reuses the translation of ``obs`` for ``next_obs`` (shared); so did the original.

    :param batch_size: ignored (compatibility).
    :param translate_max: largest shift in pixels.
    :param max_value: top of the value range (255 for uint8-valued images).
    """

    def __init__(
        self, batch_size: int | None = None, translate_max: int = 4, max_value: float = 255.0
    ) -> None:
        if int(translate_max) < 0:
            raise ValueError(f"TranslateAug translate_max must be >= 0, got {translate_max}")
        self.translate_max = int(translate_max)
        self.max_value = float(max_value)

    def sample_params(
        self, batch: int, shape: Sequence[int], device: Device, generator: Generator = None
    ) -> Params:
        m = self.translate_max
        return {
            "shift": _randint(-m, m + 1, (batch, 2), device, generator),
            "color": _uniform((batch, 3), 0.0, self.max_value, device, generator),
        }

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        frames = _rgb_frames(as_float(images), "TranslateAug")
        h, w = images.shape[-2:]
        dev, shift = images.device, params["shift"]
        rows = torch.arange(h, device=dev) - shift[:, :1]  # source row of each output row
        cols = torch.arange(w, device=dev) - shift[:, 1:]
        moved = _gather_pixels(as_float(images), rows.clamp(0, h - 1), cols.clamp(0, w - 1))
        inside = ((rows >= 0) & (rows < h))[:, :, None] & ((cols >= 0) & (cols < w))[:, None, :]
        fill = params["color"].view(-1, 1, 3, 1, 1).expand_as(frames).reshape(images.shape)
        return torch.where(inside[:, None], moved, fill)


@gin.configurable(module="super_sac.augmentations")
class RotateAug(Augmentation):
    """Random rotation by ``k * 90`` degrees, ``k`` uniform in ``{0, 1, 2, 3}`` per sample
    (counter-clockwise, ``torch.rot90`` over ``(H, W)``); square images only. With probability
    ``1 - p_rand`` a sample keeps ``k = 0``.

    Draws: RAD draws each call afresh (independent); the original shared one draw.

    :param batch_size: ignored (compatibility).
    :param p_rand: probability that a sample is rotated by a random multiple of 90 degrees.
    """

    def __init__(self, batch_size: int | None = None, p_rand: float = 1.0) -> None:
        self.p_rand = float(p_rand)

    def sample_params(
        self, batch: int, shape: Sequence[int], device: Device, generator: Generator = None
    ) -> Params:
        h, w = _hw(shape)
        if h != w:
            raise ValueError(
                f"RotateAug needs square images, got {h}x{w}; crop them square first (RadAug / "
                "center_crop) or use HorizontalFlipAug / VerticalFlipAug"
            )
        k = _randint(0, 4, (batch,), device, generator)
        return {"k": torch.where(_coin(batch, self.p_rand, device, generator), k, 0)}

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        b, c, n, _ = images.shape
        index = torch.arange(n * n, device=images.device).view(n, n)
        sources = torch.stack([torch.rot90(index, k, dims=(0, 1)) for k in range(4)])
        flat = sources[params["k"]].view(b, 1, n * n).expand(b, c, n * n)
        return as_float(images).flatten(2).gather(2, flat).view(b, c, n, n)


class _FlipAug(Augmentation):
    """Flip a random subset of the batch along one image axis."""

    dim = 3

    def __init__(self, batch_size: int | None = None, p_rand: float = 0.5) -> None:
        self.p_rand = float(p_rand)

    def sample_params(
        self, batch: int, shape: Sequence[int], device: Device, generator: Generator = None
    ) -> Params:
        return {"flip": _coin(batch, self.p_rand, device, generator)}

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        x = as_float(images)
        return torch.where(_per_sample(params["flip"], 4), x.flip(self.dim), x)


@gin.configurable(module="super_sac.augmentations")
class HorizontalFlipAug(_FlipAug):
    """Mirror left-right (``out[..., j] = x[..., W - 1 - j]``) each sample with probability
    ``p_rand`` (RAD's ``flip``, Laskin et al. 2020).

    Draws: RAD draws each call afresh (independent); the original shared one draw.

    :param batch_size: ignored (compatibility).
    :param p_rand: probability that a sample is flipped.
    """

    dim = 3


@gin.configurable(module="super_sac.augmentations")
class VerticalFlipAug(_FlipAug):
    """Mirror top-bottom (``out[..., i, :] = x[..., H - 1 - i, :]``) each sample with
    probability ``p_rand``.

    Draws: the original super_sac shared one draw between ``obs`` and ``next_obs``.

    :param batch_size: ignored (compatibility).
    :param p_rand: probability that a sample is flipped.
    """

    dim = 2


def _box_params(
    aug: CutoutAug, batch: int, shape: Sequence[int], device: Device, generator: Generator
) -> Params:
    h, w = _hw(shape)
    if aug.box_max > min(h, w) + 1 or not 0 < aug.box_min < aug.box_max:
        raise ValueError(
            f"{type(aug).__name__} needs 0 < box_min < box_max <= min(H, W) + 1, got "
            f"box_min={aug.box_min}, box_max={aug.box_max} for {h}x{w} images; shrink the box"
        )
    size = _randint(aug.box_min, aug.box_max, (batch, 2), device, generator)
    positions = size.new_tensor([h, w]) - size + 1  # top-left corners that keep the box inside
    corner = (_uniform((batch, 2), 0.0, 1.0, device, generator) * positions).long()
    return {"size": size, "corner": torch.minimum(corner, positions - 1)}


def _box_mask(params: Params, h: int, w: int, device: torch.device) -> torch.Tensor:
    """``(B, 1, H, W)`` bool mask of each sample's box."""
    top, left = params["corner"][:, 0, None], params["corner"][:, 1, None]
    rows = torch.arange(h, device=device) - top
    cols = torch.arange(w, device=device) - left
    in_rows = (rows >= 0) & (rows < params["size"][:, 0, None])
    in_cols = (cols >= 0) & (cols < params["size"][:, 1, None])
    return (in_rows[:, :, None] & in_cols[:, None, :])[:, None]


@gin.configurable(module="super_sac.augmentations")
class CutoutAug(Augmentation):
    """Cutout (DeVries & Taylor 2017; RAD's ``cutout``): blank one random box per sample to 0
    in every channel. Box height and width are uniform in ``{box_min, ..., box_max - 1}``, its
    top-left corner uniform over the positions that keep it inside the image.

    Draws: RAD draws each call afresh (independent); the original shared one draw.

    :param batch_size: ignored (compatibility).
    :param box_min: smallest box side in pixels.
    :param box_max: one more than the largest box side.
    """

    def __init__(self, batch_size: int | None = None, box_min: int = 7, box_max: int = 22) -> None:
        self.box_min, self.box_max = int(box_min), int(box_max)

    def sample_params(
        self, batch: int, shape: Sequence[int], device: Device, generator: Generator = None
    ) -> Params:
        return _box_params(self, batch, shape, device, generator)

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        mask = _box_mask(params, *images.shape[-2:], images.device)
        return as_float(images).masked_fill(mask, 0.0)


@gin.configurable(module="super_sac.augmentations")
class CutoutColorAug(CutoutAug):
    """Coloured cutout (RAD's ``cutout_color``): like :class:`CutoutAug`, but the box is filled
    with one random RGB colour per sample (uniform in ``[0, max_value]`` per channel), the same
    in every frame of the stack.

    Draws: RAD draws each call afresh (independent); the original shared one draw.

    :param batch_size: ignored (compatibility).
    :param box_min: smallest box side in pixels.
    :param box_max: one more than the largest box side.
    :param max_value: top of the value range (255 for uint8-valued images).
    """

    def __init__(
        self,
        batch_size: int | None = None,
        box_min: int = 7,
        box_max: int = 22,
        max_value: float = 255.0,
    ) -> None:
        super().__init__(batch_size, box_min, box_max)
        self.max_value = float(max_value)

    def sample_params(
        self, batch: int, shape: Sequence[int], device: Device, generator: Generator = None
    ) -> Params:
        params = _box_params(self, batch, shape, device, generator)
        params["color"] = _uniform((batch, 3), 0.0, self.max_value, device, generator)
        return params

    def apply(self, images: torch.Tensor, params: Params) -> torch.Tensor:
        frames = _rgb_frames(as_float(images), "CutoutColorAug")
        mask = _box_mask(params, *images.shape[-2:], images.device)[:, None]  # (B,1,1,H,W)
        out = torch.where(mask, params["color"].view(-1, 1, 3, 1, 1), frames)
        return out.reshape(images.shape)


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
