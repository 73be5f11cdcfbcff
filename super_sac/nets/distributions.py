"""Action distributions for bounded continuous actions."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def _constant(value: float) -> torch.Tensor:
    """A 0-dim float32 tensor. As an operand it acts like the Python float (any device, no dtype
    promotion), but a Python float is converted to a tensor again on every call, which costs
    more than these small ops themselves; the log-probabilities run several times per update."""
    return torch.tensor(value, dtype=torch.float32)


_C_HALF_LOG_2PI = _constant(_HALF_LOG_2PI)
_C_LOG_2 = _constant(_LOG_2)
_C_TWO = _constant(2.0)
_C_MINUS_TWO = _constant(-2.0)
_C_MINUS_HALF = _constant(-0.5)

ATANH_EDGE = 1e-6
"""How far inside ``[-1, 1]`` an action is kept before ``atanh`` (:func:`preimage`)."""


def preimage(action: torch.Tensor, eps: float = ATANH_EDGE) -> torch.Tensor:
    """``atanh(a)``, the point before the ``tanh`` squashing, with ``a`` clipped to
    ``[-1 + eps, 1 - eps]`` first so that actions lying exactly on a bound (common in datasets)
    give a finite value (``atanh(1 - 1e-6)`` is about 7.25)."""
    return torch.atanh(action.clamp(-1.0 + eps, 1.0 - eps))


def tanh_log_det_jacobian(pre_tanh: torch.Tensor) -> torch.Tensor:
    """``log(1 - tanh(u)^2)`` computed stably as ``2 * (log 2 - u - softplus(-2u))``.

    The naive form loses all precision once ``|tanh(u)|`` rounds to 1 (for ``|u|`` > ~9 in fp32);
    the identity above stays exact for any ``u`` (Haarnoja et al. 2018, appendix C; the
    rewrite is the one used by TensorFlow Probability's Tanh bijector).
    """
    return _C_TWO * (_C_LOG_2 - pre_tanh - F.softplus(_C_MINUS_TWO * pre_tanh))


class SquashedNormal:
    """Diagonal Gaussian pushed through ``tanh``: ``a = tanh(u)``, ``u ~ N(loc, scale^2)``.

    ``log pi(a) = sum_i [log N(u_i; loc_i, scale_i) - log(1 - tanh(u_i)^2)]``
    (SAC, Haarnoja et al. 2018, eq. 21). Samples are reparameterised, so gradients flow to
    ``loc`` and ``scale``.

    :param loc: mean of the pre-squash Gaussian, ``(..., A)``.
    :param scale: standard deviation of the pre-squash Gaussian, ``(..., A)``, positive.
    :param log_scale: ``log(scale)`` when the caller already has it (an actor that outputs the
        log standard deviation); computed from ``scale`` otherwise.
    """

    def __init__(
        self, loc: torch.Tensor, scale: torch.Tensor, log_scale: torch.Tensor | None = None
    ) -> None:
        self.loc = loc
        self.scale = scale
        self._log_scale = log_scale

    @property
    def log_scale(self) -> torch.Tensor:
        """``log(scale)``."""
        if self._log_scale is None:
            self._log_scale = self.scale.log()
        return self._log_scale

    @property
    def mean(self) -> torch.Tensor:
        """The deterministic action ``tanh(loc)`` used for evaluation."""
        return torch.tanh(self.loc)

    def _log_prob_from_noise(self, eps: torch.Tensor, pre_tanh: torch.Tensor) -> torch.Tensor:
        gaussian = _C_MINUS_HALF * eps.pow(2) - self.log_scale - _C_HALF_LOG_2PI
        return (gaussian - tanh_log_det_jacobian(pre_tanh)).sum(-1, keepdim=True)

    def rsample_with_log_prob(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw a reparameterised action and its log-probability, shape ``(..., 1)``."""
        eps = torch.randn_like(self.loc)
        pre_tanh = self.loc + self.scale * eps
        return torch.tanh(pre_tanh), self._log_prob_from_noise(eps, pre_tanh)

    def sample(self) -> torch.Tensor:
        """Draw an action without tracking gradients."""
        with torch.no_grad():
            return torch.tanh(self.loc + self.scale * torch.randn_like(self.loc))

    def log_prob(self, action: torch.Tensor, eps: float = ATANH_EDGE) -> torch.Tensor:
        """Log-probability of given actions in ``[-1, 1]``, shape ``(..., 1)``.

        Actions are clipped to ``[-1 + eps, 1 - eps]`` before ``atanh`` (:func:`preimage`) so
        that dataset actions lying exactly on the bound give a finite value.
        """
        pre_tanh = preimage(action, eps)
        noise = (pre_tanh - self.loc) / self.scale
        return self._log_prob_from_noise(noise, pre_tanh)


class ScaledBeta:
    """A Beta distribution stretched from ``[0, 1]`` to ``[-1, 1]``: ``a = 2 x - 1``,
    ``x ~ Beta(c1, c0)`` independently per action dimension (Chou, Maturana and Scherer 2017).

    A bounded policy needs no squashing: ``log pi(a) = sum_i [log Beta(x_i; c1_i, c0_i) - log 2]``.
    Samples are reparameterised (implicit gradients of :class:`torch.distributions.Beta`).

    :param concentration1: ``c1`` (often written alpha), ``(..., A)``, positive.
    :param concentration0: ``c0`` (often written beta), ``(..., A)``, positive.
    :param eps: samples are kept in ``[eps, 1 - eps]`` so their log-density stays finite.
    """

    def __init__(
        self, concentration1: torch.Tensor, concentration0: torch.Tensor, eps: float = 1e-6
    ) -> None:
        self.concentration1 = concentration1
        self.concentration0 = concentration0
        self.eps = eps
        self._beta = torch.distributions.Beta(concentration1, concentration0, validate_args=False)

    @property
    def mean(self) -> torch.Tensor:
        """The deterministic action ``2 c1 / (c1 + c0) - 1``."""
        return 2.0 * self.concentration1 / (self.concentration1 + self.concentration0) - 1.0

    def _log_prob_unit(self, x: torch.Tensor) -> torch.Tensor:
        return (self._beta.log_prob(x) - _LOG_2).sum(-1, keepdim=True)

    def rsample_with_log_prob(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw a reparameterised action and its log-probability, shape ``(..., 1)``."""
        x = self._beta.rsample().clamp(self.eps, 1.0 - self.eps)
        return 2.0 * x - 1.0, self._log_prob_unit(x)

    def sample(self) -> torch.Tensor:
        """Draw an action without tracking gradients."""
        with torch.no_grad():
            return 2.0 * self._beta.sample() - 1.0

    def log_prob(self, action: torch.Tensor) -> torch.Tensor:
        """Log-probability of actions in ``[-1, 1]``, shape ``(..., 1)``."""
        x = ((action + 1.0) / 2.0).clamp(self.eps, 1.0 - self.eps)
        return self._log_prob_unit(x)
