"""Networks: the :class:`Encoder` interface, weight initialisation and the standard MLPs."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

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

    def target_shared_buffers(self) -> tuple[torch.Tensor, ...]:
        """Buffers the target network's copy of this encoder shares instead of copying: fixed
        statistics that the target must see whenever they are set (none by default)."""
        return ()


@gin.configurable
class FlatEncoder(Encoder):
    """Parameter-free encoder for vector observations: flattens and concatenates the dict's keys.

    Keys are read in sorted order, so ``{"obs": ...}`` (what
    :class:`super_sac.wrappers.SimpleGymWrapper` produces) passes through unchanged.

    With ``standardize=True`` the state is ``(x - mu) / sigma`` with fixed per-feature
    statistics of a dataset, set by :meth:`fit_statistics` (the offline script does this from
    ``--dataset``; Fujimoto & Gu, "A Minimalist Approach to Offline Reinforcement Learning",
    arXiv:2106.06860, 2021, standardise states the same way). The statistics are buffers, so
    they are saved and restored with the agent and applied to every observation it reads:
    training batches, evaluation and online fine-tuning.

    :param dim: total flattened width of all keys.
    :param keys: the keys to read (default: every key, sorted).
    :param standardize: subtract a dataset's mean and divide by its standard deviation.
    """

    def __init__(
        self, dim: int, keys: tuple[str, ...] | None = None, standardize: bool = False
    ) -> None:
        super().__init__()
        self._dim = int(dim)
        self.keys = tuple(keys) if keys is not None else None
        self.standardize = bool(standardize)
        if self.standardize:
            self.register_buffer("obs_mean", torch.zeros(self._dim))
            self.register_buffer("obs_std", torch.ones(self._dim))
            self.register_buffer("statistics_fitted", torch.tensor(False))

    @property
    def embedding_dim(self) -> int:
        return self._dim

    def target_shared_buffers(self) -> tuple[torch.Tensor, ...]:
        if not self.standardize:
            return ()
        return (self.obs_mean, self.obs_std, self.statistics_fitted)

    def flatten(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        """The concatenated ``(B, dim)`` float state, before any standardisation."""
        keys = self.keys if self.keys is not None else sorted(obs_dict)
        if len(keys) == 1:
            return obs_dict[keys[0]].flatten(1).float()
        return torch.cat([obs_dict[k].flatten(1).float() for k in keys], dim=1)

    def forward(self, obs_dict: dict[str, torch.Tensor]) -> torch.Tensor:
        x = self.flatten(obs_dict)
        if self.standardize:
            x = (x - self.obs_mean) / self.obs_std
        return x

    @torch.no_grad()
    def fit_statistics(self, obs_dict: dict[str, Any], eps: float = 1e-3) -> None:
        """Set the standardisation to ``mu = mean(x)``, ``sigma = std(x) + eps`` over a dataset.

        :param obs_dict: the dataset's observations (arrays or tensors with a leading
            transition dimension), keyed like the env's observations.
        :param eps: added to every standard deviation, so constant features stay finite
            (1e-3, as TD3+BC and d3rlpy's ``StandardObservationScaler`` use).
        :raises ValueError: when the encoder was built without ``standardize=True``, or the
            observations are empty or do not have the encoder's width.
        """
        if not self.standardize:
            raise ValueError(
                "FlatEncoder.fit_statistics needs an encoder built with standardize=True. "
                "Fix: FlatEncoder(dim, standardize=True) (gin: FlatEncoder.standardize = True)."
            )
        x = self.flatten({k: torch.as_tensor(v) for k, v in obs_dict.items()}).double()
        if x.shape[0] == 0 or x.shape[1] != self._dim:
            raise ValueError(
                f"FlatEncoder.fit_statistics got observations of shape {tuple(x.shape)}; it needs "
                f"at least one row of width {self._dim} (the encoder's dim)."
            )
        self.obs_mean.copy_(x.mean(dim=0))
        self.obs_std.copy_(x.std(dim=0, correction=0) + eps)
        self.statistics_fitted.fill_(True)


# The original library called the pass-through encoder of state-based gym envs this.
IdentityEncoder = FlatEncoder


def weight_init(m: nn.Module) -> None:
    """Orthogonal weights and zero biases for linear layers, delta-orthogonal for convolutions.

    Use with ``module.apply(weight_init)``. Ensemble layers are initialised member by member.
    :func:`conv_weight_init` offers DrQ's whole-kernel orthogonal convolutions instead.
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


#: the convolution initialisations :func:`conv_weight_init` accepts
CONV_INITS = ("delta_orthogonal", "orthogonal")


def conv_weight_init(conv_init: str = "delta_orthogonal") -> Callable[[nn.Module], None]:
    """:func:`weight_init` with a choice of scheme for convolutions, for ``module.apply``.

    - ``"delta_orthogonal"``: :func:`weight_init` itself: only the kernel's centre tap is
      non-zero, an orthogonal matrix with the ReLU gain (Xiao et al. 2018, arXiv:1806.05393);
      SAC+AE's, RAD's and CURL's scheme, and the original super_sac's.
    - ``"orthogonal"``: the whole kernel, flattened to ``(out, in * kh * kw)``, is orthogonal
      with the ReLU gain, biases zero (``utils.weight_init`` of DrQ's and DrQ-v2's code).

    Every other layer gets :func:`weight_init`'s treatment either way, so the random draws of
    ``"delta_orthogonal"`` are those of ``module.apply(weight_init)``.

    :param conv_init: one of :data:`CONV_INITS`.
    :return: a function of one module.
    :raises ValueError: for any other name (the message lists the accepted ones).
    """
    if conv_init not in CONV_INITS:
        raise ValueError(f"conv_init must be one of {CONV_INITS}, got {conv_init!r}")
    if conv_init == "delta_orthogonal":
        return weight_init

    def init(m: nn.Module) -> None:
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.orthogonal_(m.weight.data, nn.init.calculate_gain("relu"))
            if m.bias is not None:
                m.bias.data.fill_(0.0)
        else:
            weight_init(m)

    return init


__all__ = [
    "CONV_INITS",
    "Encoder",
    "EnsembleLinear",
    "EnsembleMLP",
    "FlatEncoder",
    "IdentityEncoder",
    "conv_weight_init",
    "weight_init",
]
