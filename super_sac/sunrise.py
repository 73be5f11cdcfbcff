"""SUNRISE ensembles (Lee et al. 2021, "SUNRISE: A Simple Unified Framework for Ensemble
Learning in Deep RL"): the critic and actor updates of E agents stacked along a member dimension.

Member ``e`` owns actor ``e`` and critics ``e*N .. e*N + N - 1`` (see :class:`~super_sac.Agent`);
every member trains on the same sampled batch, made different by bootstrap masks
(``bootstrap_mask_prob``), and its TD targets are down-weighted where the members disagree
(weighted Bellman backups). Each update is one batched call over all members.
"""

from __future__ import annotations

import torch

from super_sac import learning_utils as lu
from super_sac.agent import Agent
from super_sac.learning import (
    Backup,
    Logs,
    critic_logs,
    critic_regression,
    dr3_regularizer,
    evaluate_critics,
)
from super_sac.optim import optimizer_step
from super_sac.replay import Batch


def _member_view(agent: Agent, q: torch.Tensor) -> torch.Tensor:
    """``(E*K, B, 1)`` critic outputs as ``(E, K, B, 1)``."""
    return q.view(agent.ensemble_size, -1, *q.shape[1:])


def compute_ensemble_td_target(
    agent: Agent,
    target_agent: Agent,
    batch: Batch,
    *,
    alpha: torch.Tensor,
    target_critic_ensemble_n: int,
    weighted_bellman_temp: float | None = None,
    weight_type: str = "sunrise",
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The targets ``(E, B, 1)`` and backup weights of :func:`ensemble_td_backup` (same
    arguments)."""
    backup, weights = ensemble_td_backup(
        agent,
        target_agent,
        batch,
        alpha=alpha,
        target_critic_ensemble_n=target_critic_ensemble_n,
        weighted_bellman_temp=weighted_bellman_temp,
        weight_type=weight_type,
    )
    return backup.target, weights


@torch.no_grad()
def ensemble_td_backup(
    agent: Agent,
    target_agent: Agent,
    batch: Batch,
    *,
    alpha: torch.Tensor,
    target_critic_ensemble_n: int,
    weighted_bellman_temp: float | None = None,
    weight_type: str = "sunrise",
) -> tuple[Backup, torch.Tensor | None]:
    """Each member's soft TD target and SUNRISE's backup weights.

    Member ``e`` samples ``a'_e ~ pi_e(s')`` and gets
    ``y_e = R + gamma^k (1 - done) [min_M Q'_e(s', a'_e) - alpha_e log pi_e(a'_e|s')]``, the min
    over a random subset of ``target_critic_ensemble_n`` of its own target critics (the same
    subset positions in every member). With ``weighted_bellman_temp`` the weights come from the
    standard deviation, across all members' target critics, of ``Q'_e(s', a'_e)``: see
    :func:`super_sac.learning_utils.backup_weights`.

    :param alpha: the members' entropy coefficients, ``(E,)``.
    :return: a :class:`~super_sac.learning.Backup` (targets ``(E, B, 1)``, the target-encoded
        ``s'`` and the members' ``a'_e`` ``(E, B, A)``; ``None`` for discrete members) and the
        backup weights ``(B, 1)`` (or ``None``).
    """
    num_members = agent.ensemble_size
    next_rep = target_agent.encoder(batch.next_obs)
    if agent.discrete:
        return _discrete_ensemble_td_target(
            agent,
            target_agent,
            batch,
            next_rep,
            alpha=alpha,
            target_critic_ensemble_n=target_critic_ensemble_n,
            weighted_bellman_temp=weighted_bellman_temp,
            weight_type=weight_type,
        )
    next_action, next_log_prob = agent.actor(next_rep).rsample_with_log_prob()  # (E, B, *)
    subset = lu.random_subset(agent.num_critics, target_critic_ensemble_n, next_rep.device)
    weights = None
    if weighted_bellman_temp is not None:  # the weights need every critic: evaluate them all
        next_q_all = _member_view(agent, target_agent.critic(next_rep, next_action))
        next_q_sub = next_q_all if subset is None else next_q_all.index_select(1, subset)
        spread = next_q_all.flatten(0, 1).std(dim=0, correction=0)  # (B, 1)
        weights = lu.backup_weights(spread, weighted_bellman_temp, weight_type)
    else:
        members = lu.member_subset(num_members, agent.num_critics, subset)
        next_q_sub = _member_view(
            agent, evaluate_critics(target_agent.critic, next_rep, next_action, members)
        )
    next_q = next_q_sub.amin(dim=1)  # (E, B, 1)
    next_value = lu.soft_value(next_q, next_log_prob, alpha.view(-1, 1, 1))
    target = lu.td_target(batch.reward, batch.done, batch.discount, next_value)
    return Backup(target, next_rep, next_action), weights


def _discrete_ensemble_td_target(
    agent: Agent,
    target_agent: Agent,
    batch: Batch,
    next_rep: torch.Tensor,
    *,
    alpha: torch.Tensor,
    target_critic_ensemble_n: int,
    weighted_bellman_temp: float | None,
    weight_type: str,
) -> tuple[Backup, torch.Tensor | None]:
    """:func:`ensemble_td_backup` for SAC-Discrete members: member ``e``'s value is the
    exact expectation ``sum_a pi_e(a|s') [min_M Q'_e(s', a) - alpha_e log pi_e(a|s')]``; the
    backup weights use the spread of the target critics' expected values ``sum_a pi_e Q'_{e,i}``,
    each member's critics under that member's policy."""
    dist = agent.actor(next_rep)
    probs, log_probs = dist.probs, dist.logits  # (E, B, A)
    next_q_all = _member_view(agent, target_agent.critic(next_rep))  # (E, N, B, A)
    subset = lu.random_subset(agent.num_critics, target_critic_ensemble_n, next_rep.device)
    next_q_sub = next_q_all if subset is None else next_q_all.index_select(1, subset)
    weights = None
    if weighted_bellman_temp is not None:
        expected = (probs.unsqueeze(1) * next_q_all).sum(dim=-1, keepdim=True)  # (E, N, B, 1)
        spread = expected.flatten(0, 1).std(dim=0, correction=0)
        weights = lu.backup_weights(spread, weighted_bellman_temp, weight_type)
    next_value = lu.discrete_soft_value(
        next_q_sub.amin(dim=1), probs, log_probs, alpha.view(-1, 1, 1)
    )
    target = lu.td_target(batch.reward, batch.done, batch.discount, next_value)
    return Backup(target, next_rep, None), weights


def ensemble_critic_update(
    agent: Agent,
    target_agent: Agent,
    batch: Batch,
    optimizer: torch.optim.Optimizer,
    *,
    alpha: torch.Tensor,
    target_critic_ensemble_n: int,
    weighted_bellman_temp: float | None = None,
    weight_type: str = "sunrise",
    masks: torch.Tensor | None = None,
    pop: bool = False,
    dr3_coeff: float = 0.0,
    dr3_online_next: bool = False,
    log_feature_dot: bool = False,
) -> Logs:
    """SUNRISE's critic update: every member's critics regress on that member's target.

    The loss is ``mean_{e,i} mean_b m_{e,b} w_b u_b (Q_{e,i}(s_b, a_b) - y_{e,b})^2 /
    mean_b m_{e,b}`` with bootstrap masks ``m`` (``masks`` ``(E, B, 1)``, or none), backup
    weights ``w`` (:func:`compute_ensemble_td_target`) and prioritized-replay weights ``u``,
    averaged over the E members' N critics (as in the original super_sac, so the gradient norm
    that ``critic_clip`` bounds does not grow with E and N). With PopArt critics
    (``Agent.auto_rescale_targets``) every critic's statistics follow its member's targets and
    the regression is on normalised values (:func:`super_sac.learning.critic_regression`).

    ``dr3_coeff > 0`` adds DR3 (:func:`super_sac.learning.dr3_regularizer`) averaged over all
    ``E N`` critics, member ``e``'s critics evaluated at ``(s', a'_e)`` with ``a'_e`` the action
    of that member's backup (``s'`` through the online encoder with ``dr3_online_next``); the
    term ignores bootstrap masks and backup weights.
    ``log_feature_dot`` logs the dot product without the penalty.

    :return: the logs of :func:`critic_update` (``critic/member_mse`` per critic of every
        member) plus ``critic/backup_weight`` (batch mean) when weighted backups are on.
    """
    num_members, n = agent.ensemble_size, agent.num_critics
    next_step, backup = ensemble_td_backup(
        agent,
        target_agent,
        batch,
        alpha=alpha,
        target_critic_ensemble_n=target_critic_ensemble_n,
        weighted_bellman_temp=weighted_bellman_temp,
        weight_type=weight_type,
    )
    target = next_step.target
    weights = batch.weights.unsqueeze(0)  # (1, B, 1)
    if backup is not None:
        weights = weights * backup.unsqueeze(0)
    if masks is not None:
        weights = weights * masks / masks.mean(dim=(1, 2), keepdim=True).clamp_min(1e-6)
    weights = weights.expand(num_members, -1, -1).repeat_interleave(n, dim=0)  # (E*N, B, 1)
    per_critic_target = target.repeat_interleave(n, dim=0)  # (E*N, B, 1)
    rep = agent.encoder(batch.obs)
    with_dot = dr3_coeff > 0 or log_feature_dot
    loss, q, features = critic_regression(
        agent,
        target_agent,
        rep,
        batch.action,
        per_critic_target,
        weights,
        pop=pop,
        return_features=with_dot,
    )
    dot_logs: Logs = {}
    if with_dot:
        online_next_obs = batch.next_obs if dr3_online_next else None
        term, dot_logs = dr3_regularizer(agent, features, next_step, dr3_coeff, online_next_obs)
        if term is not None:
            loss = loss + term
    optimizer_step(optimizer, loss)
    logs = critic_logs(loss, q, per_critic_target, batch.weights) | dot_logs
    if backup is not None:
        logs["critic/backup_weight"] = backup.mean()
    return logs


def ensemble_actor_update(
    agent: Agent,
    batch: Batch,
    optimizer: torch.optim.Optimizer,
    *,
    alpha: torch.Tensor,
    actor_q_reduction: str = "min",
    masks: torch.Tensor | None = None,
) -> Logs:
    """SUNRISE's actor update: each member's SAC objective on its own critics, averaged over
    the members as in the original super_sac (SAC-Discrete's exact expectation over actions for
    discrete members).

    ``L = mean_e mean_b u_b m_{e,b} [alpha_e log pi_e(a|s_b) - Q_e(s_b, a)] / mean_b m_{e,b}``,
    ``a ~ pi_e`` reparameterised, ``Q_e`` member ``e``'s critics reduced by
    ``actor_q_reduction``, ``u`` prioritized replay's importance weights (ones for uniform
    batches). Detached encoder features; critic parameters get no gradient.

    :return: ``actor/loss``, ``actor/q`` and ``actor/log_prob`` (``(E,)``: each member's mean
        log-probability, self-normalised by the weights, for the members' alpha updates).
    """
    with torch.no_grad():
        rep = agent.encoder(batch.obs)
    alpha = alpha.view(-1, 1, 1)
    if agent.discrete:  # exact expectations over actions, each member under its own policy
        dist = agent.actor(rep)
        probs, log_probs = dist.probs, dist.logits  # (E, B, A)
        q_all = _member_view(agent, agent.critic(rep, detach_params=True))  # (E, N, B, A)
        q_actions = lu.reduce_critics(q_all.transpose(0, 1), actor_q_reduction)  # (E, B, A)
        per_sample = (probs * (alpha * log_probs - q_actions)).sum(dim=-1, keepdim=True)
        log_prob = (probs * log_probs).sum(dim=-1, keepdim=True)  # (E, B, 1)
        q = (probs * q_actions).sum(dim=-1, keepdim=True)
    else:
        action, log_prob = agent.actor(rep).rsample_with_log_prob()  # (E, B, A), (E, B, 1)
        q_all = _member_view(agent, agent.critic(rep, action, detach_params=True))
        q = lu.reduce_critics(q_all.transpose(0, 1), actor_q_reduction)  # (E, B, 1)
        per_sample = alpha * log_prob - q
    weights = batch.weights.unsqueeze(0)  # (1, B, 1)
    per_sample = per_sample * weights
    if masks is not None:
        per_sample = per_sample * masks / masks.mean(dim=(1, 2), keepdim=True).clamp_min(1e-6)
    loss = per_sample.mean()
    optimizer_step(optimizer, loss)
    return {
        "actor/loss": loss.detach(),
        "actor/q": q.detach().mean(),
        "actor/log_prob": lu.normalized_weighted_mean(log_prob.detach(), batch.weights),
    }
