"""Augmented replay batches: which rows of a sampled batch are augmented, and the views kept for
the invariance losses and DrQ's extra augmentations.

An augmenter follows the interface of :class:`super_sac.augmentations.AugmentationSequence`:
``augmenter(obs)`` returns one new observation dict, ``augmenter(obs, next_obs)`` a tuple of two;
image keys come back as float32 in the input's value range (possibly smaller, for RAD's crops),
other keys pass through, and the inputs are never modified. :func:`augment_batch` gives the first
``int(B * aug_mix)`` samples of a batch the augmented ``obs`` and ``next_obs`` and leaves the rest
clean, as the original super_sac mixed them (Grigsby's ``sample_move_and_augment``); the clean rows
are converted to the augmented dtype and centre-cropped to the augmented size when the
augmentation crops (RAD, Laskin et al. 2020, evaluates on centre crops the same way).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch

from super_sac.augmentations import center_crop
from super_sac.replay import Batch

Obs = dict[str, torch.Tensor]
Augmenter = Callable[..., Any]

__all__ = [
    "AugmentedViews",
    "augment_batch",
    "augmented_rows",
    "fresh_view",
    "match_view",
    "mix_views",
]


@dataclasses.dataclass
class AugmentedViews:
    """The views of one sampled batch that augmentation produced.

    The clean views are built on first use only (a batch whose rows are all augmented and that
    feeds no invariance loss and no extra DrQ augmentation never converts them).

    :param source_obs: the sampled observations, unmodified (fresh augmentations start here).
    :param source_next_obs: the sampled next observations, unmodified.
    :param aug_obs: the whole batch augmented (every row, whatever ``aug_mix``).
    :param aug_next_obs: the whole batch's next observations augmented.
    :param rows: how many leading rows of the batch's ``obs`` / ``next_obs`` are augmented.
    """

    source_obs: Obs
    source_next_obs: Obs
    aug_obs: Obs
    aug_next_obs: Obs
    rows: int

    @functools.cached_property
    def clean_obs(self) -> Obs:
        """``source_obs`` as the encoder sees un-augmented images: the augmented dtype,
        centre-cropped to the augmented size (built on first use, then kept)."""
        return _clean_views(self.source_obs, self.aug_obs)

    @functools.cached_property
    def clean_next_obs(self) -> Obs:
        """The same for ``source_next_obs``."""
        return _clean_views(self.source_next_obs, self.aug_next_obs)


def augmented_rows(batch_size: int, aug_mix: float | None) -> int:
    """How many leading rows of a batch are augmented: ``int(B * aug_mix)``, all for ``None``."""
    return batch_size if aug_mix is None else int(batch_size * aug_mix)


def match_view(clean: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``clean`` converted to ``like``'s dtype and, for images whose augmentation changed the
    size, centre-cropped to ``like``'s height and width (never modified in place)."""
    if clean.dtype != like.dtype:
        clean = clean.to(like.dtype)
    if clean.ndim == 4 and clean.shape[-2:] != like.shape[-2:]:
        clean = center_crop(clean, tuple(like.shape[-2:]))
    return clean


def _clean_views(source: Obs, augmented: Obs) -> Obs:
    return {k: v if augmented[k] is v else match_view(v, augmented[k]) for k, v in source.items()}


def mix_views(clean: Obs, augmented: Obs, rows: int) -> Obs:
    """The first ``rows`` samples of every key from ``augmented``, the rest from ``clean`` (both
    of the same shapes and dtypes, see :func:`match_view`). ``augmented`` itself when every row
    is augmented, else a new dict; no tensor is modified."""
    if rows >= next(iter(augmented.values())).shape[0]:
        return augmented
    out: Obs = {}
    for key, aug in augmented.items():
        batch_size = aug.shape[0]
        if rows >= batch_size or aug is clean[key]:
            out[key] = aug
        elif rows <= 0:
            out[key] = clean[key]
        else:
            out[key] = torch.cat([aug[:rows], clean[key][rows:]])
    return out


def shuffled_rows(batch: Batch) -> Batch:
    """``batch`` with its samples in a random order (torch's generator), every field alike."""
    order = torch.randperm(batch.action.shape[0])
    on_device = order.to(batch.action.device)

    shuffled = batch.map_tensors(lambda x: x.index_select(0, on_device))
    return dataclasses.replace(shuffled, idxs=batch.idxs[order.numpy()])


def augment_batch(batch: Batch, augmenter: Augmenter, aug_mix: float | None) -> Batch:
    """A new :class:`~super_sac.replay.Batch` whose first ``int(B * aug_mix)`` samples (all for
    ``None``) carry augmented ``obs`` and ``next_obs`` and whose other samples stay clean, with
    the views of :class:`AugmentedViews` in ``batch.views``. ``batch`` is left as it was.

    When only some samples are augmented, the batch is shuffled first, so that they are a random
    subset: prioritized replay and the AFBC advantage index return their samples in the order of
    their buffer slots (one per priority segment), and the first rows would otherwise be the
    oldest ones (or the protected offline data)."""
    rows = augmented_rows(batch.action.shape[0], aug_mix)
    if 0 < rows < batch.action.shape[0]:
        batch = shuffled_rows(batch)
    aug_obs, aug_next_obs = augmenter(batch.obs, batch.next_obs)
    views = AugmentedViews(batch.obs, batch.next_obs, aug_obs, aug_next_obs, rows)
    return dataclasses.replace(
        batch,
        obs=_mixed(views, "obs", aug_obs),
        next_obs=_mixed(views, "next_obs", aug_next_obs),
        views=views,
    )


def _mixed(views: AugmentedViews, which: str, augmented: Obs) -> Obs:
    """``augmented`` mixed with the clean rows of ``which``; the clean views are only built
    when some row stays clean."""
    if views.rows >= next(iter(augmented.values())).shape[0]:
        return augmented
    clean = views.clean_obs if which == "obs" else views.clean_next_obs
    return mix_views(clean, augmented, views.rows)


def fresh_view(views: AugmentedViews, augmenter: Augmenter, which: str) -> Obs:
    """A new, independently drawn augmentation of the batch's ``"obs"`` or ``"next_obs"``, mixed
    with the clean rows like the batch's own (DrQ's extra target and critic augmentations)."""
    if which == "obs":
        source = views.source_obs
    elif which == "next_obs":
        source = views.source_next_obs
    else:
        raise ValueError(f"which must be 'obs' or 'next_obs', got {which!r}")
    return _mixed(views, which, augmenter(source))
