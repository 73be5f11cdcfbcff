"""Shifts, crops, rotations, flips and cutouts: augmentations that move or occlude pixels
(DrQ, DrQ-v2, RAD; see :mod:`super_sac.augmentations`)."""

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
    _crop,
    _gather_pixels,
    _hw,
    _per_sample,
    _randint,
    _rgb_frames,
    _uniform,
    as_float,
)

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
