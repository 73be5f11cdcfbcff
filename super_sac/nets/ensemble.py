"""Batched ("vectorized") layers: one module holds every member of an ensemble.

Every parameter carries a leading *member* dimension ``M``. A forward pass evaluates all members
with one batched matrix product (:func:`torch.baddbmm`), so an ensemble of ten critics costs one
kernel launch per layer instead of ten Python calls. Inputs are either shared by all members,
shape ``(B, in)``, or given per member, shape ``(M, B, in)``; outputs are always ``(M, B, out)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn


class EnsembleLinear(nn.Module):
    """``M`` independent affine maps ``y_m = x_m W_m + b_m`` evaluated in one call.

    :param num_members: ensemble size ``M``.
    :param in_features: input width.
    :param out_features: output width.
    """

    def __init__(self, num_members: int, in_features: int, out_features: int) -> None:
        super().__init__()
        if num_members < 1:
            raise ValueError(f"num_members must be >= 1, got {num_members}")
        self.num_members = num_members
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(num_members, in_features, out_features))
        self.bias = nn.Parameter(torch.empty(num_members, 1, out_features))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise each member as :class:`torch.nn.Linear` would (uniform fan-in bounds)."""
        bound = 1.0 / math.sqrt(self.in_features)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(
        self,
        x: torch.Tensor,
        detach_params: bool = False,
        members: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Apply every member, or only the members listed in ``members``.

        :param x: ``(B, in)`` (shared input) or ``(K, B, in)`` (one input per evaluated member).
        :param detach_params: use detached weights, so no gradient reaches this layer's
            parameters (the actor update uses this to differentiate through the critics
            without computing gradients for them).
        :param members: indices of the ``K`` members to evaluate (REDQ's target subset); the
            others cost nothing. ``None`` evaluates all ``M``.
        :return: ``(K, B, out)`` (``K = M`` without ``members``).
        """
        weight, bias = self.weight, self.bias
        if detach_params:
            weight, bias = weight.detach(), bias.detach()
        if members is not None:
            weight, bias = weight.index_select(0, members), bias.index_select(0, members)
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(weight.shape[0], -1, -1)
        return torch.baddbmm(bias, x, weight)

    def extra_repr(self) -> str:
        return f"members={self.num_members}, in={self.in_features}, out={self.out_features}"


class EnsembleMLP(nn.Module):
    """A stack of :class:`EnsembleLinear` layers with an activation between them.

    :param num_members: ensemble size ``M``.
    :param in_features: input width.
    :param out_features: output width of the last layer.
    :param hidden_size: width of every hidden layer.
    :param num_hidden_layers: number of hidden layers (2 gives in -> h -> h -> out).
    :param activation: elementwise nonlinearity between layers.
    """

    def __init__(
        self,
        num_members: int,
        in_features: int,
        out_features: int,
        hidden_size: int = 256,
        num_hidden_layers: int = 2,
        activation: Callable[[torch.Tensor], torch.Tensor] = torch.relu,
    ) -> None:
        super().__init__()
        widths = [in_features] + [hidden_size] * num_hidden_layers + [out_features]
        self.layers = nn.ModuleList(
            EnsembleLinear(num_members, w_in, w_out) for w_in, w_out in zip(widths, widths[1:])
        )
        self.activation = activation
        self.num_members = num_members

    def forward(
        self,
        x: torch.Tensor,
        detach_params: bool = False,
        members: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """:param x: ``(B, in)`` or ``(K, B, in)``.
        :param detach_params: use detached weights in every layer (see
            :meth:`EnsembleLinear.forward`).
        :param members: optional indices of the ``K`` members to evaluate (see
            :meth:`EnsembleLinear.forward`).
        :return: ``(K, B, out)``."""
        # the layers' ``forward`` is called directly (no module hooks): the critics run several
        # times per update and ``Module.__call__`` costs more than the small layers' arithmetic
        # ReLU runs in place: a batched affine map's backward does not need its output
        activation = torch.relu_ if self.activation is torch.relu else self.activation
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer.forward(x, detach_params, members)
            if i < last:
                x = activation(x)
        return x

    def features(
        self,
        x: torch.Tensor,
        detach_params: bool = False,
        members: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The penultimate features: the last hidden layer's output after its activation,
        ``(K, B, hidden_size)`` (the output layer is not evaluated). Arguments as in
        :meth:`forward`."""
        activation = torch.relu_ if self.activation is torch.relu else self.activation
        for layer in self.layers[:-1]:
            x = activation(layer.forward(x, detach_params, members))
        return x

    def forward_with_features(
        self,
        x: torch.Tensor,
        detach_params: bool = False,
        members: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` that also returns the penultimate features it computed on the way:
        ``(K, B, out)`` and ``(K, B, hidden_size)``, one pass (DR3 uses both). :meth:`forward`
        itself stays a plain loop, so the ordinary path pays nothing for this one."""
        features = self.features(x, detach_params, members)
        return self.layers[-1].forward(features, detach_params, members), features
