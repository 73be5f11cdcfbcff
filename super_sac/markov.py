"""Markov state abstraction: self-supervised losses that train the encoder.

Allen, Parikh, Gottesman and Konidaris, "Learning Markov State Abstractions for Deep
Reinforcement Learning", NeurIPS 2021 (arXiv:2106.04379). The paper gives conditions under
which an abstraction ``z = phi(s)`` keeps the Markov property (its inverse model
``p(a | z, z')`` must match the ground one, and the abstract transitions must be told apart
from unrelated pairs of states by a density ratio) and trains them with two heads on top of the
encoder:

* an **inverse-dynamics head** predicts the action from ``[z, z']`` (continuous actions: a
  tanh-squashed diagonal Gaussian, trained by negative log-likelihood as in the original
  super_sac; discrete actions: a categorical, trained by cross-entropy);
* a **contrastive head** tells real pairs ``(z, z')`` from pairs whose ``z'`` is shuffled within
  the batch (logistic loss, the paper's "ratio" objective);
* a **smoothness penalty** ``relu(||z' - z|| / sqrt(d) - max_dist)^2`` keeps consecutive
  embeddings close, so that the contrastive head cannot win by spreading the embeddings apart
  (the original super_sac's ``drqv2_markov.gin`` weighs it 10 with ``max_dist = 0.01``).

:class:`MarkovHeads` holds both heads (``Agent.markov_heads``, saved with the agent); the pure
losses and :func:`markov_abstraction_update` (one optimizer step of encoder + heads) follow.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from super_sac.nets import weight_init
from super_sac.nets.distributions import SquashedNormal
from super_sac.nets.mlps import mlp
from super_sac.optim import optimizer_step
from super_sac.replay import Batch

Logs = dict[str, torch.Tensor]


class MarkovHeads(nn.Module):
    """The inverse-dynamics and contrastive heads of a Markov state abstraction.

    Both read the concatenated pair ``[z, z']`` of encoded states, ``(B, 2 * state_size)``.

    :param state_size: the encoder's ``embedding_dim`` ``d``.
    :param act_space_size: action dimension (continuous) or number of actions (discrete).
    :param discrete: a categorical inverse head instead of the tanh-Gaussian.
    :param hidden_size: hidden width of both two-hidden-layer MLPs.
    :param log_std_low: lower bound of the inverse head's log standard deviation (continuous).
    :param log_std_high: upper bound of the inverse head's log standard deviation (continuous).
    """

    def __init__(
        self,
        state_size: int,
        act_space_size: int,
        discrete: bool = False,
        hidden_size: int = 256,
        log_std_low: float = -5.0,
        log_std_high: float = 2.0,
    ) -> None:
        super().__init__()
        if not log_std_low < log_std_high:
            raise ValueError(
                f"log_std_low ({log_std_low}) must be below log_std_high ({log_std_high})"
            )
        self.discrete = bool(discrete)
        self.hidden_size = int(hidden_size)
        self.log_std_low, self.log_std_high = float(log_std_low), float(log_std_high)
        outputs = act_space_size if discrete else 2 * act_space_size
        self.inverse = mlp(2 * state_size, outputs, hidden_size)
        self.contrastive = mlp(2 * state_size, 1, hidden_size)
        self.apply(weight_init)

    def settings(self) -> dict[str, float | int | bool]:
        """What :class:`super_sac.agent.Agent` needs to rebuild these heads (its signature)."""
        return {
            "discrete": self.discrete,
            "hidden_size": self.hidden_size,
            "log_std_low": self.log_std_low,
            "log_std_high": self.log_std_high,
        }

    def inverse_dist(
        self, z: torch.Tensor, next_z: torch.Tensor
    ) -> SquashedNormal | torch.distributions.Categorical:
        """``p(a | z, z')``: a categorical over the actions (discrete) or a tanh-squashed
        Gaussian whose log-std is squashed smoothly into ``[log_std_low, log_std_high]``."""
        out = self.inverse(torch.cat((z, next_z), dim=-1))
        if self.discrete:
            return torch.distributions.Categorical(logits=out)
        mean, raw_log_std = out.chunk(2, dim=-1)
        half_range = 0.5 * (self.log_std_high - self.log_std_low)
        log_std = self.log_std_low + half_range * (torch.tanh(raw_log_std) + 1.0)
        return SquashedNormal(mean, log_std.exp(), log_scale=log_std)

    def contrastive_logits(self, z: torch.Tensor, next_z: torch.Tensor) -> torch.Tensor:
        """Logit ``(B,)`` of "``(z, z')`` is a real transition" (sigmoid: its probability)."""
        return self.contrastive(torch.cat((z, next_z), dim=-1)).squeeze(-1)


# ------------------------------------------------------------------ the losses (pure functions)


def inverse_loss(
    dist: SquashedNormal | torch.distributions.Categorical, action: torch.Tensor
) -> torch.Tensor:
    """Inverse-dynamics loss ``-mean_i log p(a_i | z_i, z'_i)`` (Allen et al. 2021).

    :param dist: the inverse head's distribution (:meth:`MarkovHeads.inverse_dist`).
    :param action: the batch's actions, ``(B, A)`` in ``[-1, 1]`` (continuous; values on the
        bound are clamped by :meth:`SquashedNormal.log_prob`) or ``(B,)`` int64 (discrete: the
        loss is the cross-entropy of the logits).
    """
    if isinstance(dist, torch.distributions.Categorical):
        return F.cross_entropy(dist.logits, action.reshape(-1).long())
    return -dist.log_prob(action).mean()


def contrastive_loss(
    real_logits: torch.Tensor, fake_logits: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Contrastive (density-ratio) loss of Allen et al. 2021: binary cross-entropy of a
    classifier of real transitions ``(z_i, z'_i)`` (label 1) against pairs ``(z_i, z'_{pi(i)})``
    with ``z'`` shuffled within the batch (label 0), averaged over all ``2B`` pairs:
    ``-(sum_i log sigmoid(l_i) + sum_i log(1 - sigmoid(f_i))) / 2B``.

    :param real_logits: ``(B,)`` logits of the real pairs.
    :param fake_logits: ``(B,)`` logits of the shuffled pairs.
    :return: the loss and the classifier's accuracy (fraction of the ``2B`` pairs on the right
        side of logit 0), a detached scalar.
    """
    logits = torch.cat((real_logits, fake_logits))
    labels = torch.cat((torch.ones_like(real_logits), torch.zeros_like(fake_logits)))
    loss = F.binary_cross_entropy_with_logits(logits, labels)
    with torch.no_grad():
        accuracy = ((logits > 0).to(labels.dtype) == labels).to(labels.dtype).mean()
    return loss, accuracy


def embedding_distance(z: torch.Tensor, next_z: torch.Tensor) -> torch.Tensor:
    """Per-sample distance ``||z' - z||_2 / sqrt(d)`` of consecutive embeddings, ``(B,)``."""
    return torch.linalg.vector_norm(next_z - z, dim=-1) / math.sqrt(z.shape[-1])


def smoothness_loss(z: torch.Tensor, next_z: torch.Tensor, max_dist: float) -> torch.Tensor:
    """Smoothness penalty on consecutive embeddings (Allen et al. 2021):
    ``mean_i relu(||z'_i - z_i||_2 / sqrt(d) - max_dist)^2``; zero while consecutive embeddings
    stay within ``max_dist`` (per-dimension RMS distance) of each other.

    :param z: ``(B, d)`` embeddings of the states.
    :param next_z: ``(B, d)`` embeddings of the next states.
    :param max_dist: the distance below which consecutive embeddings are not penalised.
    """
    return F.relu(embedding_distance(z, next_z) - max_dist).square().mean()


def shuffled(x: torch.Tensor) -> torch.Tensor:
    """The rows of ``x`` in a random order (a uniform permutation from torch's generator)."""
    return x[torch.randperm(x.shape[0], device=x.device)]


# ------------------------------------------------------------------ the update


def markov_losses(
    encoder: nn.Module,
    heads: MarkovHeads,
    batch: Batch,
    max_dist: float,
) -> dict[str, torch.Tensor]:
    """The three Markov losses of ``batch`` (un-weighted) and the contrastive accuracy.

    ``z = phi(s)`` and ``z' = phi(s')`` both come from the online encoder with gradient (as in
    the paper: the abstraction is trained through both ends of the transition). With n-step
    returns, ``s'`` is the n-step next observation and the inverse head predicts the first
    action of the n steps.
    """
    z, next_z = encoder(batch.obs), encoder(batch.next_obs)
    inverse = inverse_loss(heads.inverse_dist(z, next_z), batch.action)
    contrastive, accuracy = contrastive_loss(
        heads.contrastive_logits(z, next_z), heads.contrastive_logits(z, shuffled(next_z))
    )
    return {
        "inverse_loss": inverse,
        "contrastive_loss": contrastive,
        "smoothness_loss": smoothness_loss(z, next_z, max_dist),
        "contrastive_accuracy": accuracy,
        "embedding_distance": embedding_distance(z, next_z).detach().mean(),
    }


def markov_abstraction_update(
    encoder: nn.Module,
    heads: MarkovHeads,
    batch: Batch,
    optimizer: torch.optim.Optimizer,
    *,
    inverse_coeff: float,
    contrastive_coeff: float,
    smoothness_coeff: float,
    max_dist: float,
) -> Logs:
    """One step of the Markov state abstraction (Allen et al. 2021) on ``batch``: minimise
    ``inverse_coeff * L_inv + contrastive_coeff * L_ratio + smoothness_coeff * L_smooth``
    (:func:`markov_losses`) over the encoder and the heads. Actors and critics are not touched.

    :param optimizer: the optimizer of the encoder and the heads (nothing else).
    :return: ``markov/loss`` (the weighted sum), ``markov/inverse_loss``,
        ``markov/contrastive_loss``, ``markov/smoothness_loss``, ``markov/contrastive_accuracy``
        and ``markov/embedding_distance`` (mean ``||z' - z|| / sqrt(d)``), detached.
    """
    parts = markov_losses(encoder, heads, batch, max_dist)
    loss = (
        inverse_coeff * parts["inverse_loss"]
        + contrastive_coeff * parts["contrastive_loss"]
        + smoothness_coeff * parts["smoothness_loss"]
    )
    optimizer_step(optimizer, loss)
    logs = {f"markov/{name}": value.detach() for name, value in parts.items()}
    logs["markov/loss"] = loss.detach()
    return logs
