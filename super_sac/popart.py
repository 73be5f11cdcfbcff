"""PopArt value normalisation, one set of statistics per critic of the ensemble.

van Hasselt, Guez, Hessel, Mnih and Silver, "Learning values across many orders of magnitude",
NeurIPS 2016; Hessel et al., "Multi-task Deep Reinforcement Learning with PopArt", AAAI 2019
(arXiv:1809.04474).

A critic with PopArt predicts a *normalised* value ``n(s, a)``; its value is
``Q(s, a) = sigma * n(s, a) + mu``. "ART" (adaptively rescaling targets) tracks the first and
second moments of the TD targets with an exponential moving average,
``mu <- (1 - beta) mu + beta E[y]``, ``nu <- (1 - beta) nu + beta E[y^2]``,
``sigma = sqrt(nu - mu^2)``, and the critic regresses ``n`` on ``(y - mu) / sigma``. The step
size is bias-corrected, ``beta_t = beta / (1 - (1 - beta)^t)`` at the t-th update (van Hasselt et
al. 2016, p. 13; the original super_sac did the same): the first update sets the statistics to the
first batch's moments and ``beta_t`` falls towards ``beta`` over about ``1 / beta`` updates
(until then the statistics are close to a plain average of every batch so far), so the initial
values never matter. "POP"
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
    :param beta: step size of the moving averages once the bias correction has faded (the loop
        sets it from ``super_sac.popart_beta``; 1e-4 as in the original super_sac).
    :param min_scale: lower bound of ``sigma``, so that constant targets do not divide by zero.
    """

    def __init__(self, num_members: int, beta: float = 1e-4, min_scale: float = 1e-4) -> None:
        super().__init__()
        self.beta = float(beta)
        self.min_scale = float(min_scale)
        self.register_buffer("mu", torch.zeros(num_members, 1, 1))
        self.register_buffer("nu", torch.ones(num_members, 1, 1))
        # updates so far (float64: exact counts far beyond any run, and no host sync to read it)
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @property
    def beta(self) -> float:
        """The step size once the bias correction has faded, in ``(0, 1]``."""
        return self._beta

    @beta.setter
    def beta(self, value: float) -> None:
        if not 0.0 < value <= 1.0:
            raise ValueError(f"PopArt beta must lie in (0, 1], got {value}")
        self._beta = float(value)

    @property
    def sigma(self) -> torch.Tensor:
        """``sqrt(nu - mu^2)``, at least ``min_scale``; shape ``(members, 1, 1)``."""
        return (self.nu - self.mu.pow(2)).clamp_min(self.min_scale**2).sqrt()

    def step_size(self) -> torch.Tensor:
        """The bias-corrected step of the next update, ``beta / (1 - (1 - beta)^(count + 1))``
        (a 0-dim tensor on the statistics' device)."""
        t = self.count + 1.0
        return (self._beta / (1.0 - (1.0 - self._beta) ** t)).to(self.mu.dtype)

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
        """``(y - mu) / sigma``; ``values`` ``(B, 1)`` broadcast to ``(members, B, 1)``, or
        ``(members, B, 1)`` (each member's own targets)."""
        return (values - self.mu) / self.sigma

    @torch.no_grad()
    def update(self, targets: torch.Tensor, preserve: Sequence[EnsembleLinear] = ()) -> None:
        """Move the statistics towards the batch ``targets`` with the bias-corrected step; with
        ``preserve``, rescale those output layers so that their unnormalised outputs stay the
        same (POP).

        :param targets: TD targets, ``(B, 1)`` (one batch for every member) or
            ``(members, B, 1)``.
        :param preserve: output layers (``out_features == 1``) whose members follow these
            statistics: the online critic's and the target critic's last layers.
        """
        if targets.dim() == 2:  # one batch shared by every member
            targets = targets.unsqueeze(0)
        step = self.step_size()
        old_mu, old_sigma = self.mu.clone(), self.sigma
        self.mu.lerp_(targets.mean(dim=(1, 2), keepdim=True).expand_as(self.mu), step)
        self.nu.lerp_(targets.pow(2).mean(dim=(1, 2), keepdim=True).expand_as(self.nu), step)
        self.count.add_(1.0)
        new_sigma = self.sigma
        for layer in preserve:
            layer.weight.mul_(old_sigma / new_sigma)
            layer.bias.mul_(old_sigma).add_(old_mu - self.mu).div_(new_sigma)

    def copy_statistics_(self, other: PopArt) -> None:
        """Take ``other``'s statistics and update count (the target critic follows the
        online critic's statistics)."""
        with torch.no_grad():
            self.mu.copy_(other.mu)
            self.nu.copy_(other.nu)
            self.count.copy_(other.count)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: object) -> None:
        # saves from before the bias correction have no count: statistics still at their initial
        # values (mu = 0, nu = 1) never moved, others are treated as mature (step = beta)
        if prefix + "mu" in state_dict and prefix + "count" not in state_dict:
            untouched = bool(
                (state_dict[prefix + "mu"] == 0).all() and (state_dict[prefix + "nu"] == 1).all()
            )
            count = 0.0 if untouched else 1e9
            state_dict[prefix + "count"] = torch.tensor(count, dtype=torch.float64)
        super()._load_from_state_dict(state_dict, prefix, *args)
