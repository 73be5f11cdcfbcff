"""The quick-start interface's network classes: :class:`QNetwork`, :class:`GaussianPolicy` and
:class:`DeterministicPolicy`.

They are thin modules over the library's own networks, not second implementations: a
:class:`QNetwork` holds a two-member :class:`~super_sac.nets.mlps.ContinuousCritic` (both Q
functions in one batched call), the policies hold a
:class:`~super_sac.nets.mlps.ContinuousStochasticActor` or a
:class:`~super_sac.nets.mlps.ContinuousDeterministicActor`. What they add is the interface's
tensor conventions: plain ``(B, num_inputs)`` state tensors, ``(Q1, Q2)`` pairs, ``(action,
log_prob, mean)`` triples, and actions in the env's own units through ``action_scale`` and
``action_bias`` (the library's networks act in ``[-1, 1]``).

Built alone (``GaussianPolicy(obs_dim, act_dim, 256, env.action_space)``) each owns a new network;
:class:`~super_sac.quickstart.SAC` exposes its agent's networks through them (``sac.policy``,
``sac.critic``, ``sac.critic_target``), sharing the parameters, so what is trained is what they
compute.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from super_sac.nets.mlps import (
    ContinuousCritic,
    ContinuousDeterministicActor,
    ContinuousStochasticActor,
)


def _affine_bounds(action_space: Any, num_actions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``action_scale = (high - low) / 2`` and ``action_bias = (high + low) / 2`` as ``(A,)``
    float32 tensors; without an action space the 0-dim tensors ``1`` and ``0``."""
    if action_space is None:
        return torch.tensor(1.0), torch.tensor(0.0)
    if not isinstance(action_space, spaces.Box):
        raise TypeError(
            f"action_space must be a gymnasium.spaces.Box, got {type(action_space).__name__}. "
            "These networks are for continuous actions; for discrete actions use the gin loop "
            "(experiments/gym/train_gym.py --config sac_discrete.gin)"
        )
    low = np.asarray(action_space.low, dtype=np.float64).reshape(-1)
    high = np.asarray(action_space.high, dtype=np.float64).reshape(-1)
    if low.size != num_actions:
        raise ValueError(
            f"action_space {action_space} has {low.size} dimensions, but num_actions is "
            f"{num_actions}. Fix: pass num_actions = int(np.prod(action_space.shape))"
        )
    if not (np.isfinite(low).all() and np.isfinite(high).all() and (high > low).all()):
        raise ValueError(
            f"action_space {action_space} needs finite bounds with high > low to scale the "
            "policy's [-1, 1] outputs to it. Fix: give the space its physical limits, or pass "
            "action_space=None to work in [-1, 1]"
        )
    scale = torch.as_tensor((high - low) / 2.0, dtype=torch.float32)
    bias = torch.as_tensor((high + low) / 2.0, dtype=torch.float32)
    return scale, bias


class _SeedNetwork(nn.Module):
    """What the three classes share: the input width check and the action bounds.

    ``action_scale`` and ``action_bias`` are non-persistent buffers: they move with ``.to()``
    and are not part of ``state_dict()``, which holds only the wrapped network's weights.
    """

    action_scale: torch.Tensor
    action_bias: torch.Tensor

    def __init__(self, num_inputs: int, num_actions: int, action_space: Any) -> None:
        super().__init__()
        for name, value in (("num_inputs", num_inputs), ("num_actions", num_actions)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        self.num_inputs, self.num_actions = int(num_inputs), int(num_actions)
        scale, bias = _affine_bounds(action_space, self.num_actions)
        self.register_buffer("action_scale", scale, persistent=False)
        self.register_buffer("action_bias", bias, persistent=False)

    def _states(self, state: torch.Tensor) -> torch.Tensor:
        """``state`` in the wrapped network's float dtype: a batch ``(B, *obs_shape)`` flattened
        to ``(B, num_inputs)``, one ``(num_inputs,)`` state as it is."""
        state = torch.as_tensor(state)
        dtype = next(self.parameters()).dtype  # the one wrapped network's parameters
        if state.dim() >= 2 and math.prod(state.shape[1:]) == self.num_inputs:
            return state.flatten(1).to(dtype)  # (B, num_inputs), also from (B, 1, n) or (B, h, w)
        if state.shape == (self.num_inputs,):
            return state.to(dtype)  # one state
        raise ValueError(
            f"{type(self).__name__} expects states of shape (B, {self.num_inputs}) (num_inputs="
            f"{self.num_inputs}), got {tuple(state.shape)}"
        )

    def to_unit(self, action: torch.Tensor) -> torch.Tensor:
        """Env-unit actions to the network's ``[-1, 1]``: ``(a - action_bias) / action_scale``."""
        return (action - self.action_bias) / self.action_scale

    def to_env(self, unit_action: torch.Tensor) -> torch.Tensor:
        """``[-1, 1]`` actions to env units: ``u * action_scale + action_bias``."""
        return unit_action * self.action_scale + self.action_bias


def _own_or_wrapped(given: nn.Module | None, expected: type, owner: str, **build: Any) -> Any:
    """``given`` after a type check, or a new ``expected(**build)`` when ``given`` is ``None``."""
    if given is None:
        return expected(**build)
    if type(given) is not expected:
        raise TypeError(
            f"{owner} wraps a {expected.__name__}, got {type(given).__name__}. Fix: leave the "
            f"keyword out to build a new network"
        )
    return given


class QNetwork(_SeedNetwork):
    """Twin Q-functions ``Q1(s, a)``, ``Q2(s, a)``, each a ReLU MLP with two hidden layers of
    ``hidden_dim``; SAC's targets use their minimum (clipped double-Q, Fujimoto et al. 2018,
    "Addressing Function Approximation Error in Actor-Critic Methods", arXiv:1802.09477).

    Both run in one batched call of a two-member
    :class:`~super_sac.nets.mlps.ContinuousCritic` (:attr:`critic`), so there are no separate
    ``linear1`` ... ``linear6`` layers: member ``i`` of each layer is network ``i``'s.

    :param num_inputs: state width.
    :param num_actions: action width.
    :param hidden_dim: hidden width of both networks.
    :param action_space: with a bounded ``Box``, :meth:`forward` takes actions in the env's
        units and feeds the critics ``(a - action_bias) / action_scale`` (``[-1, 1]``, the units
        the library's critics learn in); ``None``: actions are fed as given.
    :param critic: wrap this existing two-member critic (parameters shared) instead of building
        one; :class:`~super_sac.quickstart.SAC` uses this for ``critic`` and ``critic_target``.
    """

    def __init__(
        self,
        num_inputs: int,
        num_actions: int,
        hidden_dim: int,
        action_space: spaces.Box | None = None,
        *,
        critic: ContinuousCritic | None = None,
    ) -> None:
        super().__init__(num_inputs, num_actions, action_space)
        critic = _own_or_wrapped(
            critic, ContinuousCritic, "QNetwork", state_space_size=num_inputs,
            act_space_size=num_actions, num_critics=2, hidden_size=hidden_dim,
        )  # fmt: skip
        if critic.num_critics != 2:
            raise ValueError(f"QNetwork wraps two critics, got {critic.num_critics}")
        self.critic = critic
        self._normalise = action_space is not None

    def forward(
        self, state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:param state: ``(B, num_inputs)``. :param action: ``(B, num_actions)``, env units
        when the network has an ``action_space``. :return: ``(Q1, Q2)``, each ``(B, 1)``."""
        state = self._states(state)
        action = torch.as_tensor(action, dtype=state.dtype, device=state.device)
        if self._normalise:
            action = self.to_unit(action)
        q = self.critic(state, action)
        return q[0], q[1]


class GaussianPolicy(_SeedNetwork):
    """SAC's policy (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications",
    arXiv:1812.05905): ``u ~ N(mu(s), sigma(s)^2)``, ``a = tanh(u) * action_scale +
    action_bias``, with

    ``log pi(a|s) = sum_i [log N(u_i; mu_i, sigma_i) - log(1 - tanh(u_i)^2) - log action_scale_i]``

    (the last term makes it a density over env-unit actions; it is constant, so it changes no
    gradient). The log standard deviation is squashed smoothly into ``[-5, 2]`` by the library's
    :class:`~super_sac.nets.mlps.ContinuousStochasticActor` (:attr:`actor`), and the
    ``log(1 - tanh^2)`` term is computed in its overflow-free form, so no epsilon is added.

    :param num_inputs: state width.
    :param num_actions: action width.
    :param hidden_dim: hidden width.
    :param action_space: a bounded ``Box`` giving ``action_scale = (high - low) / 2`` and
        ``action_bias = (high + low) / 2`` (``(A,)`` tensors); ``None``: the 0-dim tensors ``1``
        and ``0`` (actions in ``[-1, 1]``).
    :param actor: wrap this existing actor (parameters shared) instead of building one.
    """

    def __init__(
        self,
        num_inputs: int,
        num_actions: int,
        hidden_dim: int,
        action_space: spaces.Box | None = None,
        *,
        actor: ContinuousStochasticActor | None = None,
    ) -> None:
        super().__init__(num_inputs, num_actions, action_space)
        actor = _own_or_wrapped(
            actor, ContinuousStochasticActor, "GaussianPolicy", state_space_size=num_inputs,
            act_space_size=num_actions, hidden_size=hidden_dim,
        )  # fmt: skip
        if actor.beta_dist or actor.ensemble_size != 1:
            setting = "beta_dist = True" if actor.beta_dist else "ensemble_size"
            raise ValueError(
                "GaussianPolicy wraps one tanh-Gaussian actor (no Beta, no ensemble), got one "
                f"with {setting} (in a quick-start SAC: a gin file bound "
                f"ContinuousStochasticActor.{setting}). Fix: use sac.agent.actor (the actor "
                "itself, which returns the action distribution in [-1, 1]), or clear that "
                "binding before building SAC"
            )
        self.actor = actor

    def forward(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:return: ``(mean, log_std)`` of the Gaussian before ``tanh``, each
        ``(B, num_actions)``."""
        dist = self.actor(self._states(state))
        return dist.loc, dist.log_scale

    def sample(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A reparameterised action (gradients reach the actor's parameters).

        :return: ``(action, log_prob, mean)``: the sampled action in env units
            ``(B, num_actions)``, its log-density ``(B, 1)`` and the deterministic action
            ``tanh(mu) * action_scale + action_bias`` (what to use for evaluation).
        """
        dist = self.actor(self._states(state))
        unit, log_prob = dist.rsample_with_log_prob()
        log_prob = log_prob - self.action_scale.log().sum()
        return self.to_env(unit), log_prob, self.to_env(dist.mean)


class DeterministicPolicy(_SeedNetwork):
    """A deterministic policy ``a = tanh(f(s)) * action_scale + action_bias`` (DDPG, Lillicrap et
    al. 2016, arXiv:1509.02971), without entropy: use it with ``alpha = 0``.

    :meth:`sample` explores with Gaussian noise added in ``[-1, 1]`` units,
    ``clip(N(0, noise_std^2), -noise_clip, noise_clip)``, then clipped to the bounds.

    :param num_inputs: state width.
    :param num_actions: action width.
    :param hidden_dim: hidden width.
    :param action_space: a bounded ``Box`` for ``action_scale`` and ``action_bias``; ``None``:
        ``1`` and ``0``.
    :param actor: wrap this existing actor (parameters shared) instead of building one.
    :param noise_std: exploration noise std in ``[-1, 1]`` units (0.1: the interface's value).
    :param noise_clip: bound on the noise in ``[-1, 1]`` units (0.25), ``None``: unbounded.
    """

    def __init__(
        self,
        num_inputs: int,
        num_actions: int,
        hidden_dim: int,
        action_space: spaces.Box | None = None,
        *,
        actor: ContinuousDeterministicActor | None = None,
        noise_std: float = 0.1,
        noise_clip: float | None = 0.25,
    ) -> None:
        super().__init__(num_inputs, num_actions, action_space)
        actor = _own_or_wrapped(
            actor, ContinuousDeterministicActor, "DeterministicPolicy",
            state_space_size=num_inputs, act_space_size=num_actions, hidden_size=hidden_dim,
        )  # fmt: skip
        if not noise_std >= 0 or (noise_clip is not None and not noise_clip >= 0):
            raise ValueError(
                f"noise_std and noise_clip must be >= 0, got {noise_std} and {noise_clip}"
            )
        self.actor = actor
        self.noise_std = float(noise_std)
        self.noise_clip = None if noise_clip is None else float(noise_clip)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """:return: the action in env units, ``(B, num_actions)``."""
        return self.to_env(self.actor(self._states(state)))

    def sample(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:return: ``(action, log_prob, mean)``: the mean plus exploration noise (env units,
        within the bounds), zeros ``(B, 1)`` (a deterministic policy has no density), and the
        mean action."""
        unit_mean = self.actor(self._states(state))
        noise = torch.randn_like(unit_mean) * self.noise_std
        if self.noise_clip is not None:
            noise = noise.clamp(-self.noise_clip, self.noise_clip)
        unit = (unit_mean + noise).clamp(-1.0, 1.0)
        log_prob = unit_mean.new_zeros((*unit_mean.shape[:-1], 1))
        return self.to_env(unit), log_prob, self.to_env(unit_mean)
