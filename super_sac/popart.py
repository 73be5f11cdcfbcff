"""PopArt value normalisation, one set of statistics per critic of the ensemble.

van Hasselt, Guez, Hessel, Mnih and Silver, "Learning values across many orders of magnitude",
NeurIPS 2016; Hessel et al., "Multi-task Deep Reinforcement Learning with PopArt", AAAI 2019
(arXiv:1809.04474).

A critic with PopArt predicts a *normalised* value ``n(s, a)``; its value is
``Q(s, a) = sigma * n(s, a) + mu``. "ART" (adaptively rescaling targets) tracks the first and
second moments of the TD targets with an exponential moving average,
``mu <- (1 - beta) mu + beta E[y]``, ``nu <- (1 - beta) nu + beta E[y^2]``,
``sigma = sqrt(nu - mu^2)``, and the critic regresses ``n`` on ``(y - mu) / sigma``. "POP"
(preserving outputs precisely) rescales the critic's last layer whenever the statistics move,
``w' = w sigma / sigma'``, ``b' = (sigma b + mu - mu') / sigma'``, so ``Q`` is unchanged by the
update of the statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from super_sac.nets.ensemble import EnsembleLinear


class PopArt(nn.Module):
    """Running target statistics of ``num_members`` critics (buffers, saved with the agent).

    :param num_members: number of critics (the member dimension of the critic ensemble).
    :param beta: step size of the moving averages.
    :param min_scale: lower bound of ``sigma``, so that constant targets do not divide by zero.
    """

    def __init__(self, num_members: int, beta: float = 3e-4, min_scale: float = 1e-4) -> None:
        super().__init__()
        if not 0.0 < beta <= 1.0:
            raise ValueError(f"PopArt beta must lie in (0, 1], got {beta}")
        self.beta = float(beta)
        self.min_scale = float(min_scale)
        self.register_buffer("mu", torch.zeros(num_members, 1, 1))
        self.register_buffer("nu", torch.ones(num_members, 1, 1))

    @property
    def sigma(self) -> torch.Tensor:
        """``sqrt(nu - mu^2)``, at least ``min_scale``; shape ``(members, 1, 1)``."""
        return (self.nu - self.mu.pow(2)).clamp_min(self.min_scale**2).sqrt()

    def unnormalize(
        self, normalized: torch.Tensor, members: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``sigma * n + mu`` for member-major outputs ``(members, B, 1)`` (of the listed
        ``members`` only, when given)."""
        sigma, mu = self.sigma, self.mu
        if members is not None:
            sigma, mu = sigma.index_select(0, members), mu.index_select(0, members)
        return sigma * normalized + mu

    def normalize(self, values: torch.Tensor) -> torch.Tensor:
        """``(y - mu) / sigma``; ``values`` ``(B, 1)`` broadcast to ``(members, B, 1)``."""
        return (values - self.mu) / self.sigma

    @torch.no_grad()
    def update(self, targets: torch.Tensor, preserve: Sequence[EnsembleLinear] = ()) -> None:
        """Move the statistics towards the batch ``targets`` ``(B, 1)``; with ``preserve``,
        rescale those output layers so that their unnormalised outputs stay the same (POP).

        :param targets: TD targets, ``(B, 1)`` (one batch for every member) or
            ``(members, B, 1)``.
        :param preserve: output layers (``out_features == 1``) whose members follow these
            statistics: the online critic's and the target critic's last layers.
        """
        if targets.dim() == 2:  # one batch shared by every member
            targets = targets.unsqueeze(0)
        old_mu, old_sigma = self.mu.clone(), self.sigma
        self.mu.lerp_(targets.mean(dim=(1, 2), keepdim=True).expand_as(self.mu), self.beta)
        self.nu.lerp_(targets.pow(2).mean(dim=(1, 2), keepdim=True).expand_as(self.nu), self.beta)
        new_sigma = self.sigma
        for layer in preserve:
            layer.weight.mul_(old_sigma / new_sigma)
            layer.bias.mul_(old_sigma).add_(old_mu - self.mu).div_(new_sigma)
