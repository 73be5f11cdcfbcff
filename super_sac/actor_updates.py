"""The actor's and the entropy temperature's updates: the online policy-gradient step (SAC,
TD3/DDPG, SAC-Discrete), the advantage-filtered behavioral-cloning step (AWAC/CRR-style AFBC),
and the temperature's. Each takes explicit arguments, steps its optimizer and returns a dict
of detached metric tensors (no ``.item()`` here). :mod:`super_sac.learning` re-exports them
beside the critic's updates."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from super_sac import adv_estimator
from super_sac import learning_utils as lu
from super_sac.agent import Agent
from super_sac.optim import optimizer_step
from super_sac.replay import Batch

if TYPE_CHECKING:
    from super_sac.augmented_batch import AugmentedViews

Logs = dict[str, torch.Tensor]
Obs = dict[str, torch.Tensor]


def action_invariance(
    agent: Agent, views: AugmentedViews, aug_rep: torch.Tensor | None = None
) -> torch.Tensor:
    """The actor's invariance to augmentation, on detached features (the encoder learns from
    the critic only): stochastic and discrete actors
    ``mean_b (log pi(a_b|phi(aug(s_b))) - sg(log pi(a_b|phi(s_b))))^2`` with ``a_b`` drawn from
    the clean policy (:func:`~super_sac.learning_utils.action_invariance_loss`), deterministic
    actors the squared distance of their actions
    (:func:`~super_sac.learning_utils.deterministic_action_invariance_loss`). ``aug_rep``:
    ``phi(views.aug_obs)`` when the caller already has it."""
    with torch.no_grad():
        clean_rep = agent.encoder(views.clean_obs)
        if aug_rep is None:
            aug_rep = agent.encoder(views.aug_obs)
        clean_policy = agent.actor(clean_rep)
    if not (agent.stochastic or agent.discrete):
        return lu.deterministic_action_invariance_loss(agent.actor(aug_rep.detach()), clean_policy)
    with torch.no_grad():
        action = clean_policy.sample()
        clean_log_prob = clean_policy.log_prob(action).reshape(-1, 1)
    aug_log_prob = agent.actor(aug_rep.detach()).log_prob(action).reshape(-1, 1)
    return lu.action_invariance_loss(aug_log_prob, clean_log_prob)


def plus_action_invariance(
    loss: torch.Tensor,
    agent: Agent,
    batch: Batch,
    rep: torch.Tensor,
    actor_lambda: float,
    logs: Logs,
) -> torch.Tensor:
    """``loss + actor_lambda * action_invariance`` on the batch's augmented views
    (:func:`action_invariance`, logged in ``logs`` as ``actor/action_invariance``) when
    ``actor_lambda > 0`` and an augmenter set ``batch.views``; ``loss`` otherwise. ``rep``: the
    features of ``batch.obs``, reused when those are the augmented views."""
    if not actor_lambda > 0 or batch.views is None:
        return loss
    own_rep = rep if batch.obs is batch.views.aug_obs else None
    invariance = action_invariance(agent, batch.views, own_rep)
    logs["actor/action_invariance"] = invariance.detach()
    return loss + actor_lambda * invariance


def online_actor_update(
    agent: Agent,
    batch: Batch,
    optimizer: torch.optim.Optimizer,
    *,
    alpha: torch.Tensor,
    actor_q_reduction: str = "min",
    actor_lambda: float = 0.0,
    actor_noise_std: float = 0.0,
    actor_noise_clip: float | None = None,
    rep: torch.Tensor | None = None,
) -> Logs:
    """Policy-gradient actor update through the critics.

    Stochastic actors minimise ``E[alpha log pi(a|s) - Q(s, a)]`` with reparameterised samples
    (SAC); deterministic actors minimise ``-E[Q(s, mu(s))]`` (DDPG/TD3). ``Q`` is the critic
    ensemble reduced by ``actor_q_reduction`` ("min", "mean" or "first"). The actor sees detached
    encoder features and the critics' parameters receive no gradient. Discrete actors minimise
    SAC-Discrete's exact expectation (see :func:`super_sac.learning_utils.discrete_actor_loss`).
    Each sample's term is scaled by ``batch.weights``: prioritized replay's importance weights
    when the batch was drawn by priority (ones otherwise), so a TD-prioritised batch reused from
    the critic update does not bias the actor's objective (Schaul et al. 2016).

    To let the actor loss train the encoder too, compute ``rep`` with gradients in a copy of
    this function; the library keeps the encoder a critic-only module (Yarats et al. 2019 found
    actor gradients through the encoder harmful for pixel SAC).

    ``actor_lambda > 0`` adds ``actor_lambda`` times the actor's invariance to augmentation on
    the batch's views (:func:`action_invariance`; needs ``batch.views``, set by an augmenter).

    :param agent: the agent whose actor is updated (its critics are read, not trained).
    :param batch: the sampled batch (``weights`` scale each sample's term).
    :param optimizer: the actor's optimizer; it takes one step.
    :param alpha: the entropy coefficient as a tensor (0 for deterministic actors).
    :param actor_q_reduction: how the critic ensemble's values are reduced: "min", "mean" or
        "first".
    :param actor_lambda: weight of the augmentation-invariance term (0: off).
    :param actor_noise_std: deterministic actors only: above 0, the critics are evaluated at
        DrQ-v2's noisy action ``clamp_st(mu(s) + clip(eps, -c, c), -1, 1)``, ``eps ~ N(0,
        std^2)`` (:func:`~super_sac.learning_utils.noisy_actor_action`; Yarats et al. 2021),
        instead of ``mu(s)``.
    :param actor_noise_clip: ``c`` of that noise; ``None``: unclipped.
    :param rep: the encoder's features of ``batch.obs`` when the caller has them (the critic
        update's, :func:`~super_sac.learning.critic_update_with_features`: DrQ-v2 feeds the
        actor the features computed before the critic step); ``None``: encoded here.
    :return: ``actor/loss`` (with the invariance term), ``actor/q``, for stochastic actors
        ``actor/log_prob`` (the batch mean of ``log pi`` -- for discrete actors the exact
        ``sum_a pi log pi`` --, self-normalised by the weights, which :func:`alpha_update`
        consumes), and ``actor/action_invariance`` when it is used.
    """
    if rep is None:
        with torch.no_grad():
            rep = agent.encoder(batch.obs)
    rep = rep.detach()
    weights = batch.weights
    logs: Logs = {}
    if agent.discrete:
        dist = agent.actor(rep)
        q = lu.reduce_critics(agent.critic(rep, detach_params=True), actor_q_reduction)
        loss = lu.discrete_actor_loss(q, dist.probs, dist.logits, alpha, weights)
        logs["actor/log_prob"] = lu.expected_log_prob(dist.probs, dist.logits, weights).detach()
        q = (dist.probs * q).sum(dim=-1)
    elif agent.stochastic:
        action, log_prob = agent.actor(rep).rsample_with_log_prob()
        q = lu.reduce_critics(agent.critic(rep, action, detach_params=True), actor_q_reduction)
        loss = lu.sac_actor_loss(q, log_prob, alpha, weights)
        logs["actor/log_prob"] = lu.normalized_weighted_mean(log_prob.detach(), weights)
    else:
        action = lu.noisy_actor_action(agent.actor(rep), actor_noise_std, actor_noise_clip)
        q = lu.reduce_critics(agent.critic(rep, action, detach_params=True), actor_q_reduction)
        loss = lu.deterministic_actor_loss(q, weights)
    loss = plus_action_invariance(loss, agent, batch, rep, actor_lambda, logs)
    optimizer_step(optimizer, loss)
    logs["actor/loss"] = loss.detach()
    logs["actor/q"] = q.detach().mean()
    return logs


@torch.no_grad()
def policy_log_prob(agent: Agent, batch: Batch) -> torch.Tensor:
    """The policy's mean log-probability on ``batch``'s states, for an alpha update that runs
    without a policy-gradient update (AWAC-style online fine-tuning).

    ``E[log pi(a|s)]`` with ``a ~ pi(.|s)`` (discrete: the exact ``sum_a pi log pi``), the states
    weighted by ``batch.weights`` (self-normalised, see
    :func:`super_sac.learning_utils.normalized_weighted_mean`). :return: a scalar, or ``(E,)``
    for SUNRISE members.
    """
    dist = agent.actor(agent.encoder(batch.obs))
    if agent.discrete:
        per_state = (dist.probs * dist.logits).sum(dim=-1, keepdim=True)
    else:
        per_state = dist.rsample_with_log_prob()[1]
    return lu.normalized_weighted_mean(per_state, batch.weights)


@torch.no_grad()
def batch_advantage(
    agent: Agent, batch: Batch, adv_samples: int = 4, critic_reduction: str = "min"
) -> torch.Tensor:
    """``A(s, a)`` of the batch's actions, ``(B, 1)`` (see
    :func:`super_sac.adv_estimator.estimate_advantage`); the AFBC trick re-scores critic batches
    with it."""
    rep = agent.encoder(batch.obs)
    return adv_estimator.estimate_advantage(
        agent, rep, batch.action, num_samples=adv_samples, critic_reduction=critic_reduction
    )


def offline_actor_update(
    agent: Agent,
    batch: Batch,
    optimizer: torch.optim.Optimizer,
    *,
    adv_filter: str = "binary",
    temperature: float = 1.0,
    max_weight: float = 20.0,
    adv_samples: int = 4,
    critic_reduction: str = "min",
    importance_weights: torch.Tensor | None = None,
    train_encoder: bool = False,
    actor_lambda: float = 0.0,
    rep: torch.Tensor | None = None,
) -> Logs:
    """Advantage-filtered behavioral cloning (AFBC) on dataset actions.

    Minimises ``-E[u f(A(s, a)) log pi(a|s)]`` over the batch's ``(s, a)``, where
    ``A = Q(s, a) - V(s)`` is estimated by :func:`super_sac.adv_estimator.estimate_advantage`
    with ``agent.adv_method`` and the critics reduced by ``critic_reduction``, ``f`` is the
    filter ``adv_filter``: "binary" ``1[A >= 0]`` (CRR, Wang et al. 2020), "exp"
    ``min(exp(A / temperature), max_weight)`` (AWAC, Nair et al. 2020) or "none" (behavioral
    cloning: no critic is evaluated), and ``u`` is ``batch.weights`` (prioritized replay's
    importance weights when the batch was drawn by TD priority, ones otherwise) times
    ``importance_weights``. The critics receive no gradient.

    :param agent: a stochastic (or discrete) agent, whose loss is a log-likelihood; or, for
        behavioral cloning only (``adv_filter="none"``), a deterministic one, whose
        ``log pi(a|s)`` is replaced by ``-mean_j (mu(s)_j - a_j)^2`` (the log-likelihood of a
        fixed-std Gaussian up to constants: d3rlpy's deterministic BC, and TD3+BC's BC term).
    :param batch: dataset transitions.
    :param optimizer: the actor's optimizer (plus the encoder's when ``train_encoder``).
    :param adv_filter: "binary", "exp" or "none".
    :param temperature: temperature of the exponential filter.
    :param max_weight: clip of the exponential filter.
    :param adv_samples: policy samples for the "mean"/"max" value estimate.
    :param critic_reduction: how ``Q`` combines the critics: "min" (the original super_sac)
        or "mean".
    :param importance_weights: extra ``(B, 1)`` per-sample weights, or ``None``.
    :param train_encoder: let the loss train the encoder (behavioral cloning without critics,
        where the encoder would otherwise never learn, and AFBC with ``afbc_update_encoder``);
        otherwise the actor sees detached features, as in the policy-gradient update.
    :param actor_lambda: weight of the actor's invariance to augmentation on the batch's views
        (:func:`action_invariance`, on detached features; needs ``batch.views``).
    :param rep: detached features of ``batch.obs`` when the caller has them (the critic
        update's); ignored with ``train_encoder``, whose loss needs the encoder's graph.
    :return: ``actor/afbc_loss`` (with the invariance term), ``actor/log_prob_data`` (mean
        log-likelihood of the dataset actions; ``actor/bc_mse``, their mean squared error, for
        a deterministic actor), ``actor/adv_mean``, ``actor/filter_mean`` (mean
        filter weight: the fraction kept by the binary filter), ``actor/advantages`` (per sample,
        ``(B,)``; the AFBC trick's new priorities come from them) and
        ``actor/action_invariance`` when it is used.
    """
    if train_encoder or rep is None:
        with torch.set_grad_enabled(train_encoder):
            rep = agent.encoder(batch.obs)
    else:
        rep = rep.detach()
    if adv_filter == "none":
        adv = torch.zeros(rep.shape[0], 1, device=rep.device)
    else:
        adv = adv_estimator.estimate_advantage(
            agent,
            rep.detach(),
            batch.action,
            num_samples=adv_samples,
            critic_reduction=critic_reduction,
        )
    weights = adv_estimator.filter_weights(adv, adv_filter, temperature, max_weight)
    loss_weights = weights * batch.weights
    if importance_weights is not None:
        loss_weights = loss_weights * importance_weights
    logs: Logs = {}
    if agent.stochastic or agent.discrete:
        log_prob = agent.actor(rep).log_prob(batch.action).reshape(-1, 1)
        logs["actor/log_prob_data"] = log_prob.detach().mean()
    else:
        # a deterministic actor's "log-likelihood" is that of a fixed-std Gaussian around mu(s),
        # up to constants: minus the squared error
        squared_error = lu.deterministic_bc_error(agent.actor(rep), batch.action)
        log_prob = -squared_error
        logs["actor/bc_mse"] = squared_error.detach().mean()
    loss = lu.afbc_actor_loss(log_prob, loss_weights)
    loss = plus_action_invariance(loss, agent, batch, rep, actor_lambda, logs)
    optimizer_step(optimizer, loss)
    return {
        "actor/afbc_loss": loss.detach(),
        "actor/adv_mean": adv.mean(),
        "actor/filter_mean": weights.mean(),
        "actor/advantages": adv.reshape(-1),
        **logs,
    }


def alpha_update(
    log_alpha: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    log_prob_mean: torch.Tensor,
    target_entropy: float,
) -> Logs:
    """Automatic entropy tuning (Haarnoja et al. 2018b), loss written in ``log alpha``.

    See :func:`super_sac.learning_utils.alpha_loss`. Its gradient,
    ``-(E[log pi] + H_target)``, is set directly instead of running autograd on a
    one-parameter graph. :return: ``alpha/loss``, ``alpha/value`` (after the step).
    """
    with torch.no_grad():
        loss = lu.alpha_loss(log_alpha, log_prob_mean, target_entropy)
        log_alpha.grad = (
            -(log_prob_mean + target_entropy).to(log_alpha.dtype).reshape(log_alpha.shape)
        )
    optimizer.step()
    return {"alpha/loss": loss, "alpha/value": log_alpha.detach().exp()}
