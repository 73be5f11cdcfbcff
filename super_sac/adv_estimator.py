"""Advantage estimates and advantage filters for advantage-filtered behavioral cloning (AFBC).

The offline actor update (:func:`super_sac.learning.offline_actor_update`) maximises
``E_{(s, a) ~ D}[f(A(s, a)) log pi(a|s)]``, the common form of AWAC (Nair et al. 2020,
"Accelerating Online Reinforcement Learning with Offline Datasets", arXiv:2006.09359) and
CRR (Wang et al. 2020, "Critic Regularized Regression", arXiv:2006.15134). This module holds
the two ingredients:

* the advantage ``A(s, a) = Q(s, a) - V(s)`` of a dataset action, with ``Q`` the minimum over
  the critic ensemble (as in the original super_sac; ``super_sac.afbc_critic_reduction = "mean"``
  averages them instead) and ``V(s)`` estimated from the current policy
  (:func:`estimate_advantage`, ``Agent.adv_method``):

  - ``"mean"``: ``V(s) = 1/K sum_k Q(s, a_k)``, ``a_k ~ pi(.|s)`` (CRR's mean estimator);
  - ``"max"``: ``V(s) = max_k Q(s, a_k)``, a stricter baseline that keeps only actions better
    than every sampled one (CRR's max estimator);
  - ``"indirect"`` (discrete actions): ``V(s) = sum_a pi(a|s) Q(s, a)``, the exact expectation;

* the filter ``f`` (:func:`filter_weights`):

  - ``"binary"``: ``f(A) = 1[A >= 0]`` (CRR's binary filter; see :func:`filter_weights` for why
    ``>=``);
  - ``"exp"``: ``f(A) = min(exp(A / temperature), max_weight)`` (AWAC; CRR's exponential filter);
  - ``"none"``: ``f(A) = 1``, plain behavioral cloning.

The AFBC prioritized replay trick (Grigsby & Qi 2021, "A Closer Look at Advantage-Filtered
Behavioral Cloning in High-Noise Datasets", arXiv:2110.04698) samples actor batches with
probability proportional to ``(max(A, 0) + 1e-4)^0.6`` (:func:`advantage_priorities`), so that
the batch is spent on the rare transitions the filter keeps; the loss is not importance-weighted
(the point is to find the expert actions among the noise, not to keep the uniform objective).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from super_sac import learning_utils as lu

__all__ = [
    "ADV_FILTERS",
    "advantage_priorities",
    "estimate_advantage",
    "estimate_value",
    "filter_weights",
    "q_of_actions",
]

ADV_FILTERS = ("binary", "exp", "none")


def q_of_actions(
    agent: Any, rep: torch.Tensor, actions: torch.Tensor, critic_reduction: str = "min"
) -> torch.Tensor:
    """``Q(s, a)`` of given actions, reduced over the critic ensemble, shape ``(B, 1)``.

    :param agent: an :class:`super_sac.agent.Agent` (continuous: ``critic(rep, a) -> (C, B, 1)``;
        discrete: ``critic(rep) -> (C, B, num_actions)`` and integer ``actions``).
    :param rep: encoded states ``(B, D)``.
    :param actions: ``(B, A)`` float actions or ``(B,)`` integer action indices.
    :param critic_reduction: how to reduce the ensemble ("mean", "min" or "first").
    """
    if agent.discrete:
        q_all = lu.reduce_critics(agent.critic(rep), critic_reduction)  # (B, num_actions)
        return q_all.gather(1, actions.long().reshape(-1, 1))
    return lu.reduce_critics(agent.critic(rep, actions), critic_reduction)


def estimate_value(
    agent: Any,
    rep: torch.Tensor,
    method: str,
    num_samples: int = 4,
    critic_reduction: str = "min",
) -> torch.Tensor:
    """``V(s)`` of the current policy, shape ``(B, 1)`` (see the module docstring).

    :param agent: the agent (its actor and critics are only read).
    :param rep: encoded states ``(B, D)``.
    :param method: "mean" or "max" (continuous actions), "indirect" (discrete actions).
    :param num_samples: policy samples ``K`` for "mean" and "max".
    :param critic_reduction: how to reduce the critic ensemble before the estimate.
    :raises ValueError: on a method that does not fit the action space.
    """
    if agent.discrete:
        if method != "indirect":
            raise ValueError(
                f"adv_method {method!r} is for continuous actions; discrete agents use "
                "Agent.adv_method = 'indirect'"
            )
        q_all = lu.reduce_critics(agent.critic(rep), critic_reduction)  # (B, num_actions)
        probs = agent.actor(rep).probs
        return (probs * q_all).sum(dim=1, keepdim=True)
    if method not in ("mean", "max"):
        raise ValueError(
            f"adv_method {method!r} is for discrete actions; continuous agents use "
            "Agent.adv_method = 'mean' or 'max'"
        )
    batch = rep.shape[0]
    # K policy samples per state, evaluated as one (K * B) batch
    reps = rep.unsqueeze(0).expand(num_samples, *rep.shape).reshape(num_samples * batch, -1)
    actions = agent.actor(reps).sample()
    q = q_of_actions(agent, reps, actions, critic_reduction).reshape(num_samples, batch, 1)
    return q.mean(dim=0) if method == "mean" else q.amax(dim=0)


@torch.no_grad()
def estimate_advantage(
    agent: Any,
    rep: torch.Tensor,
    actions: torch.Tensor,
    method: str | None = None,
    num_samples: int = 4,
    critic_reduction: str = "min",
) -> torch.Tensor:
    """``A(s, a) = Q(s, a) - V(s)`` of dataset actions, shape ``(B, 1)``, without gradients.

    :param agent: the agent.
    :param rep: encoded states ``(B, D)``.
    :param actions: dataset actions ``(B, A)`` (continuous) or ``(B,)`` indices (discrete).
    :param method: value estimator (default: ``agent.adv_method``).
    :param num_samples: policy samples for "mean"/"max".
    :param critic_reduction: how to reduce the critic ensemble.
    """
    method = agent.adv_method if method is None else method
    q = q_of_actions(agent, rep, actions, critic_reduction)
    return q - estimate_value(agent, rep, method, num_samples, critic_reduction)


def filter_weights(
    adv: torch.Tensor, kind: str, temperature: float = 1.0, max_weight: float = 20.0
) -> torch.Tensor:
    """The AFBC filter ``f(A)`` (see the module docstring), same shape as ``adv``.

    The binary filter keeps ``A >= 0``, as the original super_sac did (CRR writes ``A > 0``).
    The two differ only where ``A`` is exactly 0, which in practice is the policy's own action
    under a (near-)deterministic discrete policy: ``A = Q(s, a) - sum_a' pi(a'|s) Q(s, a')`` is
    then 0 up to rounding, and ``> 0`` would drop those samples at random.

    :param adv: advantages.
    :param kind: "binary", "exp" or "none".
    :param temperature: the exponential filter's temperature (AWAC's lambda, CRR's beta).
    :param max_weight: upper clip of the exponential filter (numerical stability).
    """
    if kind == "binary":
        return (adv >= 0).to(adv.dtype)
    if kind == "exp":
        # clamp the exponent first so a large advantage cannot overflow to inf
        exponent = (adv / temperature).clamp(max=math.log(max_weight))
        return exponent.exp()
    if kind == "none":
        return torch.ones_like(adv)
    raise ValueError(f"unknown AFBC filter {kind!r}; choose one of {ADV_FILTERS}")


#: the floor added to ``max(A, 0)`` and the exponent of the AFBC trick's priorities
AFBC_PRIORITY_EPS, AFBC_PRIORITY_ALPHA = 1e-4, 0.6


def advantage_priorities(
    adv: torch.Tensor, eps: float = AFBC_PRIORITY_EPS, alpha: float = AFBC_PRIORITY_ALPHA
) -> torch.Tensor:
    """Replay priorities of the AFBC trick: ``p = (max(A, 0) + eps)^alpha``, flattened to ``(B,)``.

    Grigsby & Qi (2021) and the original super_sac: transitions are drawn in proportion to how
    much better than the policy they are, so actor batches fill with the (possibly very rare)
    actions the filter keeps; ``eps`` lets a transition with ``A < 0`` be drawn again (and
    re-scored) once the critic changes its mind, and ``alpha = 0.6`` (Schaul et al. 2016) flattens
    the distribution.

    A non-finite advantage (a diverging critic) gets the floor priority ``eps^alpha``, so the
    index stays valid and the loop's NaN guard reports the divergence with its diagnostics.

    :param adv: advantages ``A(s, a)``.
    :param eps: the floor added to every priority.
    :param alpha: the priority exponent.
    """
    adv = adv.detach().reshape(-1).float()
    adv = torch.where(torch.isfinite(adv), adv, torch.zeros_like(adv))
    return (adv.clamp_min(0.0) + eps).pow(alpha)
