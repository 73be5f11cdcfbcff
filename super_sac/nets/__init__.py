"""Networks: the :class:`Encoder` interface, weight initialisation and the standard MLPs."""

from __future__ import annotations

import abc

import gin
import torch
from torch import nn

from super_sac.nets.ensemble import EnsembleLinear, EnsembleMLP


class Encoder(nn.Module, abc.ABC):
    """Maps a dict observation to a flat state vector that actors and critics read.

    Subclass it for every new observation type: implement :meth:`forward`, which takes the
    observation dict (tensors with a leading batch dimension, already on the agent's device;
    image keys arrive as ``uint8``) and returns a ``(B, embedding_dim)`` float tensor, and the
    :attr:`embedding_dim` property. Encoder parameters are trained by the critic loss (and, when
    the loop runs them, by the Markov state abstraction losses of :mod:`super_sac.markov`); the
    actor reads detached features.
    """

    @property
    @abc.abstractmethod
    def embedding_dim(self) -> int:
        """Width of the state vector :meth:`forward` returns."""

    @abc.abstractmethod
    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        """Encode a batch of observations into ``(B, embedding_dim)``."""


@gin.configurable
class FlatEncoder(Encoder):
    """Parameter-free encoder for vector observations: flattens and concatenates the dict's keys.

    Keys are read in sorted order, so ``{"obs": ...}`` (what
    :class:`super_sac.wrappers.SimpleGymWrapper` produces) passes through unchanged.

    :param dim: total flattened width of all keys.
    :param keys: the keys to read (default: every key, sorted).
    """

    def __init__(self, dim: int, keys: tuple[str, ...] | None = None) -> None:
        super().__init__()
        self._dim = int(dim)
        self.keys = tuple(keys) if keys is not None else None

    @property
    def embedding_dim(self) -> int:
        return self._dim

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        keys = self.keys if self.keys is not None else sorted(obs_dict)
        if len(keys) == 1:
            return obs_dict[keys[0]].flatten(1).float()
        return torch.cat([obs_dict[k].flatten(1).float() for k in keys], dim=1)


# The original library called the pass-through encoder of state-based gym envs this.
IdentityEncoder = FlatEncoder


def weight_init(m: nn.Module) -> None:
    """Orthogonal weights and zero biases for linear layers, delta-orthogonal for convolutions.

    Use with ``module.apply(weight_init)``. Ensemble layers are initialised member by member.
    """
    if isinstance(m, nn.Linear):
        nn.init.orthogonal_(m.weight.data)
        if m.bias is not None:
            m.bias.data.fill_(0.0)
    elif isinstance(m, EnsembleLinear):
        for member_weight in m.weight.data:
            nn.init.orthogonal_(member_weight)
        m.bias.data.fill_(0.0)
    elif isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        gain = nn.init.calculate_gain("relu")
        m.weight.data.fill_(0.0)
        if m.bias is not None:
            m.bias.data.fill_(0.0)
        mid_h, mid_w = m.weight.size(2) // 2, m.weight.size(3) // 2
        nn.init.orthogonal_(m.weight.data[:, :, mid_h, mid_w], gain)


__all__ = [
    "Encoder",
    "EnsembleLinear",
    "EnsembleMLP",
    "FlatEncoder",
    "IdentityEncoder",
    "weight_init",
]
