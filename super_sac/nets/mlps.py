"""Actor and critic MLPs for continuous and discrete actions.

Actors read the encoder's state vector. Critics are *ensembles*: every critic of the agent lives
in one module whose parameters carry a leading member dimension, and one call returns
``(num_critics, B, 1)`` (continuous: ``Q(s, a)``) or ``(num_critics, B, num_actions)``
(discrete: ``Q(s, .)`` for every action).
"""

from __future__ import annotations

import gin
import torch
import torch.nn.functional as F
from torch import nn

from super_sac.nets import weight_init
from super_sac.nets.distributions import ScaledBeta, SquashedNormal
from super_sac.nets.ensemble import EnsembleLinear, EnsembleMLP
from super_sac.popart import PopArt


class MLP(nn.Sequential):
    """``Linear, ReLU, ..., Linear`` as an :class:`torch.nn.Sequential` (so parameter names are
    ``0.weight``, ``0.bias``, ``2.weight``, ...) whose forward applies the layers' functions
    directly: an actor runs several times per update, and going through every submodule's
    ``__call__`` costs more than a small layer's arithmetic on a CPU. Module hooks registered on
    its ``nn.Linear`` and ``nn.ReLU`` layers are therefore not called; other modules run as
    usual."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        after_linear = False
        for layer in self._modules.values():
            if type(layer) is nn.Linear:
                x = F.linear(x, layer.weight, layer.bias)
                after_linear = True
                continue
            if type(layer) is nn.ReLU:
                # in place after a linear layer, whose backward does not need its output
                x = torch.relu_(x) if after_linear else torch.relu(x)
            else:  # any other module runs as usual
                x = layer(x)
            after_linear = False
        return x


def mlp(in_features: int, out_features: int, hidden_size: int, num_hidden_layers: int = 2) -> MLP:
    """A plain ReLU MLP ``in -> hidden x num_hidden_layers -> out`` (see :class:`MLP`)."""
    widths = [in_features] + [hidden_size] * num_hidden_layers
    layers: list[nn.Module] = []
    for w_in, w_out in zip(widths, widths[1:]):
        layers += [nn.Linear(w_in, w_out), nn.ReLU()]
    layers.append(nn.Linear(widths[-1], out_features))
    return MLP(*layers)


class Trunk(nn.Module):
    """``tanh(LayerNorm(W x + b))``: DrQ-v2's ``trunk`` (Yarats et al. 2021, arXiv:2107.09645),
    the small head by which an actor or a critic turns the shared convolutional features into
    its own ``trunk_dim`` features (DrQ, Kostrikov et al. 2020, gives the actor such a head of
    its own too). Its parameters belong to the network that owns it, so they are trained by that
    network's loss and, for a critic, Polyak-averaged with it.

    With ``tanh=False`` it is ``LayerNorm(W x + b)``, unbounded: the head of RAD's actor and
    critic encoders (Laskin et al. 2020; CURL's code builds them with ``output_logits=True``).

    :param in_features: width of the encoder's features.
    :param out_features: the trunk's width (DrQ / DrQ-v2: 50).
    :param tanh: end with a tanh (DrQ, DrQ-v2); ``False`` ends at the LayerNorm (RAD).
    """

    def __init__(self, in_features: int, out_features: int, tanh: bool = True) -> None:
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)
        self.tanh = bool(tanh)

    def forward(self, x: torch.Tensor, detach_params: bool = False) -> torch.Tensor:
        """:param x: ``(B, in_features)``. :param detach_params: use detached parameters (no
        gradient reaches them; gradients still flow to ``x``). :return: ``(B, out_features)``."""
        fc_w, fc_b, ln_w, ln_b = self.fc.weight, self.fc.bias, self.norm.weight, self.norm.bias
        if detach_params:
            fc_w, fc_b, ln_w, ln_b = fc_w.detach(), fc_b.detach(), ln_w.detach(), ln_b.detach()
        x = F.layer_norm(F.linear(x, fc_w, fc_b), self.norm.normalized_shape, ln_w, ln_b)
        return torch.tanh(x) if self.tanh else x


def make_trunk(
    state_space_size: int, trunk_dim: int | None, tanh: bool = True
) -> tuple[Trunk | None, int]:
    """A :class:`Trunk` of width ``trunk_dim`` over ``state_space_size`` features and the width
    the network after it reads; ``(None, state_space_size)`` when ``trunk_dim`` is ``None``.

    :param state_space_size: width of the encoder's features.
    :param trunk_dim: the trunk's width, or ``None`` for no trunk.
    :param tanh: end the trunk with a tanh (see :class:`Trunk`).
    :raises ValueError: for a ``trunk_dim`` below 1."""
    if trunk_dim is None:
        return None, state_space_size
    if trunk_dim < 1:
        raise ValueError(f"trunk_dim must be None or >= 1, got {trunk_dim}")
    return Trunk(state_space_size, int(trunk_dim), tanh=tanh), int(trunk_dim)


def policy_net(
    in_features: int, out_features: int, hidden_size: int, ensemble_size: int
) -> nn.Module:
    """An actor's network: a plain :func:`mlp` for one policy, an :class:`EnsembleMLP` with a
    leading member dimension for ``ensemble_size > 1`` (SUNRISE's actor ensemble)."""
    if ensemble_size < 1:
        raise ValueError(f"ensemble_size must be >= 1, got {ensemble_size}")
    if ensemble_size == 1:
        return mlp(in_features, out_features, hidden_size)
    return EnsembleMLP(ensemble_size, in_features, out_features, hidden_size)


@gin.configurable
class ContinuousStochasticActor(nn.Module):
    """SAC's policy: a tanh-squashed diagonal Gaussian (Haarnoja et al. 2018), or with
    ``beta_dist`` a Beta distribution scaled to ``[-1, 1]`` (Chou et al. 2017).

    Gaussian: the raw log-std output ``z`` is squashed into ``[log_std_low, log_std_high]``
    smoothly, ``log_std = low + (high - low) * (tanh(z) + 1) / 2``. Beta: both concentrations are
    ``1 + softplus(z)``, so every density is unimodal and finite at the bounds.

    :param state_space_size: width of the encoder's state vector.
    :param act_space_size: action dimension.
    :param log_std_low: lower bound of the log standard deviation (Gaussian only).
    :param log_std_high: upper bound of the log standard deviation (Gaussian only).
    :param hidden_size: hidden width.
    :param beta_dist: use the Beta distribution instead of the tanh-Gaussian.
    :param ensemble_size: number of independent policies held in this module (SUNRISE's actor
        ensemble, Lee et al. 2021). With more than one, the distribution has a leading member
        dimension, ``(ensemble_size, B, A)``, and all members run in one batched call.
    :param trunk_dim: width of the actor's own :class:`Trunk` (linear, LayerNorm, tanh) over
        the encoder's features, as DrQ and DrQ-v2 give the actor; ``None``: no trunk.
    :param trunk_tanh: end the trunk with its tanh; ``False`` ends it at the LayerNorm (RAD's
        actor head). Ignored without a trunk.
    """

    stochastic = True

    def __init__(
        self,
        state_space_size: int,
        act_space_size: int,
        log_std_low: float = -5.0,
        log_std_high: float = 2.0,
        hidden_size: int = 256,
        beta_dist: bool = False,
        ensemble_size: int = 1,
        trunk_dim: int | None = None,
        trunk_tanh: bool = True,
    ) -> None:
        super().__init__()
        if not log_std_low < log_std_high:
            raise ValueError(
                f"log_std_low ({log_std_low}) must be below log_std_high ({log_std_high})"
            )
        self.ensemble_size = int(ensemble_size)
        self.trunk, width = make_trunk(state_space_size, trunk_dim, trunk_tanh)
        self.net = policy_net(width, 2 * act_space_size, hidden_size, ensemble_size)
        self.log_std_low = float(log_std_low)
        self.log_std_high = float(log_std_high)
        self.beta_dist = bool(beta_dist)
        # the midpoint of the log-std range as a 0-dim tensor (a Python float operand costs an
        # extra conversion per call); not saved with the weights
        self.register_buffer(
            "_log_std_mid", torch.tensor(0.5 * (log_std_low + log_std_high)), persistent=False
        )
        self.apply(weight_init)

    def forward(self, state: torch.Tensor) -> SquashedNormal | ScaledBeta:
        """:param state: ``(B, state_space_size)``. :return: the action distribution, batch
        shape ``(B, A)``, or ``(ensemble_size, B, A)`` for an actor ensemble."""
        if self.trunk is not None:
            state = self.trunk(state)
        first, second = self.net(state).chunk(2, dim=-1)
        if self.beta_dist:
            return ScaledBeta(1.0 + F.softplus(first), 1.0 + F.softplus(second))
        # log_std = low + (high - low) * (tanh(z) + 1) / 2, as one fused call
        half_range = 0.5 * (self.log_std_high - self.log_std_low)
        log_std = torch.add(self._log_std_mid, torch.tanh(second), alpha=half_range)
        return SquashedNormal(first, log_std.exp(), log_scale=log_std)


@gin.configurable
class ContinuousDeterministicActor(nn.Module):
    """DDPG/TD3's policy: ``a = tanh(f(s))`` in ``[-1, 1]`` (Lillicrap et al. 2016).

    :param state_space_size: width of the encoder's state vector.
    :param act_space_size: action dimension.
    :param hidden_size: hidden width.
    :param trunk_dim: give the actor its own :class:`Trunk` of this width (DrQ-v2's actor);
        ``None``: the MLP reads the encoder's features directly.
    :param trunk_tanh: end the trunk with its tanh (DrQ-v2's); ``False`` ends it at the
        LayerNorm. Ignored without a trunk.
    """

    stochastic = False

    def __init__(
        self,
        state_space_size: int,
        act_space_size: int,
        hidden_size: int = 256,
        trunk_dim: int | None = None,
        trunk_tanh: bool = True,
    ) -> None:
        super().__init__()
        self.trunk, width = make_trunk(state_space_size, trunk_dim, trunk_tanh)
        self.net = mlp(width, act_space_size, hidden_size)
        self.apply(weight_init)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """:param state: ``(B, state_space_size)``. :return: actions ``(B, act_space_size)``."""
        if self.trunk is not None:
            state = self.trunk(state)
        return torch.tanh(self.net(state))


@gin.configurable
class ContinuousCritic(nn.Module):
    """An ensemble of ``num_critics`` Q-functions ``Q_i(s, a)`` evaluated in one batched call.

    Generalises TD3's clipped double-Q pair to any ensemble size (REDQ, Chen et al. 2021). With
    ``popart`` the network predicts normalised values and :attr:`popart` holds each member's
    target statistics (see :mod:`super_sac.popart`); :meth:`forward` still returns real values.

    :param state_space_size: width of the encoder's state vector.
    :param act_space_size: action dimension.
    :param num_critics: ensemble size N.
    :param hidden_size: hidden width of every member.
    :param popart: normalise the outputs with PopArt statistics.
    :param trunk_dim: put a :class:`Trunk` of this width, shared by every member, between the
        encoder's features and the ensemble (DrQ-v2's critic: one trunk, two Q heads); it is
        trained by the critic loss and Polyak-averaged with the critics (``mlp_tau``). ``None``:
        the members read the encoder's features directly.
    :param trunk_tanh: end the trunk with its tanh (DrQ's, DrQ-v2's); ``False`` ends it at the
        LayerNorm (RAD's critic head). Ignored without a trunk.
    """

    def __init__(
        self,
        state_space_size: int,
        act_space_size: int,
        num_critics: int = 2,
        hidden_size: int = 256,
        popart: bool = False,
        trunk_dim: int | None = None,
        trunk_tanh: bool = True,
    ) -> None:
        super().__init__()
        self.num_critics = num_critics
        self.trunk, width = make_trunk(state_space_size, trunk_dim, trunk_tanh)
        self.net = EnsembleMLP(num_critics, width + act_space_size, 1, hidden_size)
        self.popart = PopArt(num_critics) if popart else None
        self.apply(weight_init)

    @property
    def output_layer(self) -> EnsembleLinear:
        """The last layer, which PopArt rescales to preserve outputs."""
        return self.net.layers[-1]

    def forward(
        self,
        state: torch.Tensor,
        action: torch.Tensor,
        detach_params: bool = False,
        normalized: bool = False,
        members: torch.Tensor | None = None,
        return_features: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Evaluate every critic (or the critics listed in ``members``).

        :param state: ``(B, state_space_size)``.
        :param action: ``(B, act_space_size)`` shared by every critic, or ``(G, B, A)``: one
            action batch per *group* of consecutive critics (SUNRISE: each member's critics
            judge that member's actions), ``G`` dividing the number of evaluated critics.
        :param detach_params: block gradients to the critic's own parameters (they still flow to
            ``state`` and ``action``); the actor update uses this.
        :param normalized: return PopArt's normalised outputs instead of values.
        :param members: indices of the critics to evaluate (REDQ's target subset), or ``None``.
        :param return_features: also return every evaluated critic's penultimate features
            (see :meth:`features`), computed in the same pass.
        :return: ``(K, B, 1)``, ``K`` = ``num_critics`` or ``len(members)``; with
            ``return_features`` the pair ``(values, features)``, features ``(K, B, hidden)``.
        """
        x = self._inputs(state, action, members, detach_params)
        if return_features:
            out, features = self.net.forward_with_features(x, detach_params, members)
        else:
            out = self.net(x, detach_params=detach_params, members=members)
        if self.popart is not None and not normalized:
            out = self.popart.unnormalize(out, members)
        return (out, features) if return_features else out

    def features(
        self,
        state: torch.Tensor,
        action: torch.Tensor,
        members: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Every critic's penultimate features ``phi_i(s, a)``, ``(K, B, hidden)``: the last
        hidden layer after its ReLU, the vector the output layer maps to ``Q_i`` (DR3, Kumar et
        al. 2021). PopArt does not touch them: they come before the output layer. Arguments as
        in :meth:`forward`; the output layer is not evaluated."""
        return self.net.features(self._inputs(state, action, members), members=members)

    def _inputs(
        self,
        state: torch.Tensor,
        action: torch.Tensor,
        members: torch.Tensor | None,
        detach_params: bool = False,
    ) -> torch.Tensor:
        """``[s, a]``: ``(B, S + A)``, or ``(K, B, S + A)`` when ``action`` is ``(G, B, A)``
        (each group of ``K / G`` consecutive critics gets its own actions); ``s`` is the trunk's
        output when the critic has one."""
        if self.trunk is not None:
            state = self.trunk(state, detach_params)
        if action.dim() == 3:
            k = self.num_critics if members is None else members.shape[0]
            action = action.repeat_interleave(k // action.shape[0], dim=0)
            state = state.unsqueeze(0).expand(k, -1, -1)
        return torch.cat((state, action), dim=-1)


@gin.configurable
class DiscreteActor(nn.Module):
    """SAC-Discrete's policy: a categorical distribution over ``act_space_size`` actions
    (Christodoulou 2019, "Soft Actor-Critic for Discrete Action Settings", arXiv:1910.07207).

    The MLP outputs one logit per action; :meth:`forward` returns
    ``torch.distributions.Categorical(logits=...)``, whose ``probs`` and ``logits`` (normalised
    log-probabilities) the SAC-Discrete losses use to take exact expectations over actions.

    :param state_space_size: width of the encoder's state vector.
    :param act_space_size: number of discrete actions.
    :param hidden_size: hidden width.
    :param ensemble_size: number of independent policies held in this module (SUNRISE); with
        more than one the categoricals have batch shape ``(ensemble_size, B)``.
    """

    stochastic = True

    def __init__(
        self,
        state_space_size: int,
        act_space_size: int,
        hidden_size: int = 256,
        ensemble_size: int = 1,
    ) -> None:
        super().__init__()
        if act_space_size < 2:
            raise ValueError(f"DiscreteActor needs at least 2 actions, got {act_space_size}")
        self.ensemble_size = int(ensemble_size)
        self.net = policy_net(state_space_size, act_space_size, hidden_size, ensemble_size)
        self.apply(weight_init)

    def forward(self, state: torch.Tensor) -> torch.distributions.Categorical:
        """:param state: ``(B, state_space_size)``. :return: a batch of ``B`` categoricals
        (``(ensemble_size, B)`` for an actor ensemble)."""
        return torch.distributions.Categorical(logits=self.net(state))


@gin.configurable
class DiscreteCritic(nn.Module):
    """An ensemble of ``num_critics`` Q-functions that output ``Q_i(s, a)`` for every action at
    once (as in DQN), evaluated in one batched call over the members.

    :param state_space_size: width of the encoder's state vector.
    :param act_space_size: number of discrete actions.
    :param num_critics: ensemble size N (2 = clipped double-Q, 10 = REDQ).
    :param hidden_size: hidden width of every member.
    """

    def __init__(
        self,
        state_space_size: int,
        act_space_size: int,
        num_critics: int = 2,
        hidden_size: int = 256,
    ) -> None:
        super().__init__()
        self.num_critics = num_critics
        self.net = EnsembleMLP(num_critics, state_space_size, act_space_size, hidden_size)
        self.apply(weight_init)

    def forward(
        self, state: torch.Tensor, detach_params: bool = False, return_features: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Evaluate every critic on every action.

        :param state: ``(B, state_space_size)``.
        :param detach_params: block gradients to the critic's own parameters (the actor update
            uses this).
        :param return_features: also return the penultimate features (see :meth:`features`),
            computed in the same pass.
        :return: ``(num_critics, B, act_space_size)``; with ``return_features`` the pair
            ``(values, features)``, features ``(num_critics, B, hidden)``.
        """
        if return_features:
            return self.net.forward_with_features(state, detach_params)
        return self.net(state, detach_params=detach_params)

    def features(self, state: torch.Tensor) -> torch.Tensor:
        """Every critic's penultimate features ``phi_i(s)``, ``(num_critics, B, hidden)``: the
        last hidden layer after its ReLU, shared by all actions (the output layer maps it to
        every action's value at once). DR3 on a discrete critic therefore uses ``phi(s)`` and
        ``phi(s')``, as the DR3 paper does for its DQN-style networks (Kumar et al. 2021): the
        action selects an output row, not a feature vector."""
        return self.net.features(state)
