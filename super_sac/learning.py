"""One function per update. Each takes explicit arguments, steps its optimizer and returns a dict
of detached metric tensors (read them on the host only when logging: no ``.item()`` here)."""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from super_sac import adv_estimator
from super_sac import learning_utils as lu
from super_sac.agent import Agent
from super_sac.optim import LeanAdam
from super_sac.replay import Batch

Logs = dict[str, torch.Tensor]


@dataclass(frozen=True)
class ParamGroup:
    """Parameters that share a learning rate, an L2 coefficient and a gradient-norm clip.

    :param params: the parameters.
    :param lr: Adam learning rate.
    :param l2: L2 coefficient (Adam's ``weight_decay``: ``l2 * theta`` is added to the gradient).
    :param clip: maximum gradient norm of the group, or ``None`` for no clipping.
    """

    params: Sequence[torch.Tensor]
    lr: float
    l2: float = 0.0
    clip: float | None = None


def build_optimizer(*groups: ParamGroup) -> torch.optim.Adam | None:
    """One Adam optimizer over the non-empty groups; each group keeps its own clip.

    Uses the fused Adam kernel through :class:`super_sac.optim.LeanAdam` (or torch's foreach
    Adam on devices without the fused kernel), so that a step is a handful of calls whatever the
    number of parameter tensors. :return: ``None`` when no group has parameters.
    """
    param_groups = [
        {"params": list(g.params), "lr": g.lr, "weight_decay": g.l2, "max_grad_norm": g.clip}
        for g in groups
        if len(g.params) > 0
    ]
    if not param_groups:
        return None
    fused = all(
        p.is_floating_point() and p.device.type in ("cpu", "cuda")
        for g in param_groups
        for p in g["params"]
    )
    if fused:
        try:
            return LeanAdam(param_groups)
        except RuntimeError:  # a torch version without a fused Adam kernel for this device
            pass
    return torch.optim.Adam(param_groups, foreach=True)


def optimizer_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """Zero the gradients, backpropagate ``loss``, clip each group's gradient norm, step."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    for group in optimizer.param_groups:
        clip = group.get("max_grad_norm")
        if clip is not None and clip > 0:
            torch.nn.utils.clip_grad_norm_(group["params"], clip, foreach=True)
    optimizer.step()


def make_target_agent(agent: Agent) -> Agent:
    """A frozen copy of ``agent`` whose parameters follow it by Polyak averaging."""
    target = copy.deepcopy(agent)
    target.requires_grad_(False)
    target.eval()
    return target


@functools.cache
def _takes_members(critic_cls: type) -> bool:
    return "members" in inspect.signature(critic_cls.forward).parameters


def evaluate_critics(
    critic: torch.nn.Module,
    state: torch.Tensor,
    action: torch.Tensor,
    subset: torch.Tensor | None,
) -> torch.Tensor:
    """The critics listed in ``subset`` (all when ``None``), ``(K, B, 1)``. Critic classes with a
    ``members`` argument evaluate only those; others evaluate all and are indexed afterwards."""
    if subset is None:
        return critic(state, action)
    if _takes_members(type(critic)):
        return critic(state, action, members=subset)
    return critic(state, action).index_select(0, subset)


@torch.no_grad()
def compute_td_target(
    agent: Agent,
    target_agent: Agent,
    batch: Batch,
    *,
    alpha: torch.Tensor,
    target_critic_ensemble_n: int,
    use_target_actor: bool = False,
    target_noise_std: float = 0.0,
    target_noise_clip: float | None = None,
) -> torch.Tensor:
    """The TD target ``(B, 1)`` for SAC, TD3 and DDPG.

    ``s'`` is encoded by the target encoder; ``a'`` comes from the target actor when the
    algorithm has one (TD3, DDPG) or else from the online actor (SAC). Stochastic actors give
    ``y = R + gamma^k (1 - done) [min_M Q'(s', a') - alpha log pi(a'|s')]``, ``a' ~ pi``
    (Haarnoja et al. 2018); deterministic actors give
    ``y = R + gamma^k (1 - done) min_M Q'(s', clip(mu'(s') + clip(eps, -c, c), -1, 1))``
    with ``eps ~ N(0, target_noise_std^2)`` (Fujimoto et al. 2018; DDPG sets the std to 0).
    ``min_M`` is over a random subset of ``target_critic_ensemble_n`` target critics (REDQ).
    Discrete agents use :func:`compute_discrete_td_target`.
    """
    if agent.discrete:
        return compute_discrete_td_target(
            agent,
            target_agent,
            batch,
            alpha=alpha,
            target_critic_ensemble_n=target_critic_ensemble_n,
        )
    next_rep = target_agent.encoder(batch.next_obs)
    actor = target_agent.actor if use_target_actor else agent.actor
    if agent.stochastic:
        next_action, next_log_prob = actor(next_rep).rsample_with_log_prob()
    else:
        next_action = lu.smoothed_target_action(
            actor(next_rep), target_noise_std, target_noise_clip
        )
    subset = lu.random_subset(agent.num_critics, target_critic_ensemble_n, next_rep.device)
    next_q = evaluate_critics(target_agent.critic, next_rep, next_action, subset).amin(dim=0)
    next_value = lu.soft_value(next_q, next_log_prob, alpha) if agent.stochastic else next_q
    return lu.td_target(batch.reward, batch.done, batch.discount, next_value)


@torch.no_grad()
def compute_discrete_td_target(
    agent: Agent,
    target_agent: Agent,
    batch: Batch,
    *,
    alpha: torch.Tensor,
    target_critic_ensemble_n: int,
) -> torch.Tensor:
    """SAC-Discrete's TD target ``(B, 1)`` (Christodoulou 2019, eq. 10), exact over next actions:

    ``y = R + gamma^k (1 - done) sum_a' pi(a'|s') [min_M Q'(s', a') - alpha log pi(a'|s')]``

    with ``pi`` the online actor on target-encoded ``s'`` and ``min_M`` the minimum over a random
    subset of ``target_critic_ensemble_n`` target critics, taken per action (REDQ).
    """
    next_rep = target_agent.encoder(batch.next_obs)
    dist = agent.actor(next_rep)
    next_q = lu.random_subset_min(target_agent.critic(next_rep), target_critic_ensemble_n)
    next_value = lu.discrete_soft_value(next_q, dist.probs, dist.logits, alpha)
    return lu.td_target(batch.reward, batch.done, batch.discount, next_value)


def critic_values(agent: Agent, rep: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """``Q_i(s, a)`` of every critic, ``(N, B, 1)``: continuous critics take the action as input;
    discrete critics output every action's value and the taken one is gathered."""
    if agent.discrete:
        return lu.gather_actions(agent.critic(rep), action)
    return agent.critic(rep, action)


def critic_update(
    agent: Agent,
    target_agent: Agent,
    batch: Batch,
    optimizer: torch.optim.Optimizer,
    *,
    alpha: torch.Tensor,
    target_critic_ensemble_n: int,
    use_target_actor: bool = False,
    target_noise_std: float = 0.0,
    target_noise_clip: float | None = None,
    pop: bool = False,
) -> Logs:
    """Regress every critic on the TD target (see :func:`compute_td_target`).

    The encoder is trained through this loss only. ``batch.weights`` (prioritized replay's
    importance weights, ones otherwise) scale each sample's squared error. A critic with PopArt
    statistics first moves them towards the batch's targets (rescaling the online and target
    output layers when ``pop``) and then regresses its normalised outputs on normalised targets.

    :return: ``critic/loss``, ``critic/q_mean``, ``critic/target_mean``,
        ``critic/abs_td_error`` (per sample, mean over critics; new replay priorities) and
        ``critic/member_mse`` (each critic's weighted mean squared TD error, ``(num_critics,)``;
        the loss is half their sum).
    """
    target = compute_td_target(
        agent,
        target_agent,
        batch,
        alpha=alpha,
        target_critic_ensemble_n=target_critic_ensemble_n,
        use_target_actor=use_target_actor,
        target_noise_std=target_noise_std,
        target_noise_clip=target_noise_clip,
    )
    rep = agent.encoder(batch.obs)
    stats = getattr(agent.critic, "popart", None)
    if stats is None:
        q = critic_values(agent, rep, batch.action)
        loss = lu.critic_loss(q, target, batch.weights)
    else:
        update_popart(agent, target_agent, target, pop)
        normalized = agent.critic(rep, batch.action, normalized=True)
        loss = lu.critic_loss(normalized, stats.normalize(target), batch.weights)
        q = stats.unnormalize(normalized)
    optimizer_step(optimizer, loss)
    return _critic_logs(loss, q, target.unsqueeze(0), batch.weights)


def _critic_logs(
    loss: torch.Tensor, q: torch.Tensor, target: torch.Tensor, weights: torch.Tensor
) -> Logs:
    """Metrics of a critic update: ``q`` ``(K, B, 1)``, ``target`` broadcastable to it."""
    q = q.detach()
    td_error = q - target
    return {
        "critic/loss": loss.detach(),
        "critic/q_mean": q.mean(),
        "critic/target_mean": target.mean(),
        "critic/abs_td_error": td_error.abs().mean(dim=0).squeeze(-1),
        "critic/member_mse": (td_error.pow(2) * weights.unsqueeze(0)).mean(dim=(1, 2)),
    }


@torch.no_grad()
def update_popart(agent: Agent, target_agent: Agent, targets: torch.Tensor, pop: bool) -> None:
    """Move the critic's PopArt statistics towards ``targets`` and share them with the target
    critic; with ``pop`` both output layers are rescaled so their values are preserved."""
    stats, target_stats = agent.critic.popart, target_agent.critic.popart
    layers = (agent.critic.output_layer, target_agent.critic.output_layer) if pop else ()
    stats.update(targets, preserve=layers)
    target_stats.mu.copy_(stats.mu)
    target_stats.nu.copy_(stats.nu)


def online_actor_update(
    agent: Agent,
    batch: Batch,
    optimizer: torch.optim.Optimizer,
    *,
    alpha: torch.Tensor,
    actor_q_reduction: str = "min",
) -> Logs:
    """Policy-gradient actor update through the critics.

    Stochastic actors minimise ``E[alpha log pi(a|s) - Q(s, a)]`` with reparameterised samples
    (SAC); deterministic actors minimise ``-E[Q(s, mu(s))]`` (DDPG/TD3). ``Q`` is the critic
    ensemble reduced by ``actor_q_reduction`` ("min", "mean" or "first"). The actor sees detached
    encoder features and the critics' parameters receive no gradient. Discrete actors minimise
    SAC-Discrete's exact expectation (see :func:`super_sac.learning_utils.discrete_actor_loss`).

    To let the actor loss train the encoder too, compute ``rep`` with gradients in a copy of
    this function; the library keeps the encoder a critic-only module (Yarats et al. 2019 found
    actor gradients through the encoder harmful for pixel SAC).

    :return: ``actor/loss``, ``actor/q`` and, for stochastic actors, ``actor/log_prob``
        (the batch mean of ``log pi`` -- for discrete actors the exact ``sum_a pi log pi`` --,
        which :func:`alpha_update` consumes).
    """
    with torch.no_grad():
        rep = agent.encoder(batch.obs)
    logs: Logs = {}
    if agent.discrete:
        dist = agent.actor(rep)
        q = lu.reduce_critics(agent.critic(rep, detach_params=True), actor_q_reduction)
        loss = lu.discrete_actor_loss(q, dist.probs, dist.logits, alpha)
        logs["actor/log_prob"] = lu.expected_log_prob(dist.probs, dist.logits).detach()
        q = (dist.probs * q).sum(dim=-1)
    elif agent.stochastic:
        action, log_prob = agent.actor(rep).rsample_with_log_prob()
        q = lu.reduce_critics(agent.critic(rep, action, detach_params=True), actor_q_reduction)
        loss = lu.sac_actor_loss(q, log_prob, alpha)
        logs["actor/log_prob"] = log_prob.detach().mean()
    else:
        action = agent.actor(rep)
        q = lu.reduce_critics(agent.critic(rep, action, detach_params=True), actor_q_reduction)
        loss = lu.deterministic_actor_loss(q)
    optimizer_step(optimizer, loss)
    logs["actor/loss"] = loss.detach()
    logs["actor/q"] = q.detach().mean()
    return logs


def offline_actor_update(
    agent: Agent,
    batch: Batch,
    optimizer: torch.optim.Optimizer,
    *,
    adv_filter: str = "binary",
    temperature: float = 1.0,
    max_weight: float = 20.0,
    adv_samples: int = 4,
    importance_weights: torch.Tensor | None = None,
    train_encoder: bool = False,
) -> Logs:
    """Advantage-filtered behavioral cloning (AFBC) on dataset actions.

    Minimises ``-E[f(A(s, a)) log pi(a|s)]`` over the batch's ``(s, a)``, where
    ``A = Q(s, a) - V(s)`` is estimated by :func:`super_sac.adv_estimator.estimate_advantage`
    with ``agent.adv_method`` and ``f`` is the filter ``adv_filter``: "binary" ``1[A > 0]`` (CRR,
    Wang et al. 2020), "exp" ``min(exp(A / temperature), max_weight)`` (AWAC, Nair et al. 2020)
    or "none" (behavioral cloning: no critic is evaluated). The critics receive no gradient.

    :param agent: a stochastic (or discrete) agent: the loss is a log-likelihood.
    :param batch: dataset transitions.
    :param optimizer: the actor's optimizer (plus the encoder's when ``train_encoder``).
    :param adv_filter: "binary", "exp" or "none".
    :param temperature: temperature of the exponential filter.
    :param max_weight: clip of the exponential filter.
    :param adv_samples: policy samples for the "mean"/"max" value estimate.
    :param importance_weights: ``(B, 1)`` corrections of a prioritized batch (see
        :class:`super_sac.replay.AdvantageIndex`); ``None`` for a uniform batch.
    :param train_encoder: let the loss train the encoder (behavioral cloning without critics,
        where the encoder would otherwise never learn); otherwise the actor sees detached
        features, as in the policy-gradient update.
    :return: ``actor/afbc_loss``, ``actor/log_prob_data`` (mean log-likelihood of the dataset
        actions), ``actor/adv_mean``, ``actor/filter_mean`` (mean filter weight: the
        fraction kept by the binary filter) and ``actor/filter_weights`` (per sample, ``(B,)``;
        the priorities of the AFBC replay trick).
    """
    with torch.set_grad_enabled(train_encoder):
        rep = agent.encoder(batch.obs)
    if adv_filter == "none":
        adv = torch.zeros(rep.shape[0], 1, device=rep.device)
    else:
        adv = adv_estimator.estimate_advantage(
            agent, rep.detach(), batch.action, num_samples=adv_samples
        )
    weights = adv_estimator.filter_weights(adv, adv_filter, temperature, max_weight)
    loss_weights = weights if importance_weights is None else weights * importance_weights
    log_prob = agent.actor(rep).log_prob(batch.action).reshape(-1, 1)
    loss = lu.afbc_actor_loss(log_prob, loss_weights)
    optimizer_step(optimizer, loss)
    return {
        "actor/afbc_loss": loss.detach(),
        "actor/log_prob_data": log_prob.detach().mean(),
        "actor/adv_mean": adv.mean(),
        "actor/filter_mean": weights.mean(),
        "actor/filter_weights": weights.reshape(-1),
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


# ---------------------------------------------------------------------------------------------
# SUNRISE ensembles (Lee et al. 2021): E agents along a member dimension, one batched call each.
# Member e owns actor e and critics e*N .. e*N + N - 1 (see Agent); every member trains on the
# same sampled batch, made different by bootstrap masks (``bootstrap_mask_prob``).


def _member_view(agent: Agent, q: torch.Tensor) -> torch.Tensor:
    """``(E*K, B, 1)`` critic outputs as ``(E, K, B, 1)``."""
    return q.view(agent.ensemble_size, -1, *q.shape[1:])


@torch.no_grad()
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
    """Each member's soft TD target and SUNRISE's backup weights.

    Member ``e`` samples ``a'_e ~ pi_e(s')`` and gets
    ``y_e = R + gamma^k (1 - done) [min_M Q'_e(s', a'_e) - alpha_e log pi_e(a'_e|s')]``, the min
    over a random subset of ``target_critic_ensemble_n`` of its own target critics (the same
    subset positions in every member). With ``weighted_bellman_temp`` the weights come from the
    standard deviation, across all members' target critics, of ``Q'_e(s', a'_e)``: see
    :func:`super_sac.learning_utils.backup_weights`.

    :param alpha: the members' entropy coefficients, ``(E,)``.
    :return: targets ``(E, B, 1)`` and backup weights ``(B, 1)`` (or ``None``).
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
    return lu.td_target(batch.reward, batch.done, batch.discount, next_value), weights


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
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`compute_ensemble_td_target` for SAC-Discrete members: member ``e``'s value is the
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
    return lu.td_target(batch.reward, batch.done, batch.discount, next_value), weights


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
) -> Logs:
    """SUNRISE's critic update: every member's critics regress on that member's target.

    The loss is ``sum_e sum_i 0.5 * mean_b m_{e,b} w_b u_b (Q_{e,i}(s_b, a_b) - y_{e,b})^2 /
    mean_b m_{e,b}`` with bootstrap masks ``m`` (``masks`` ``(E, B, 1)``, or none), backup
    weights ``w`` (:func:`compute_ensemble_td_target`) and prioritized-replay weights ``u``:
    each member's gradient is what a lone SAC agent with its own critics would get from the
    samples its mask keeps.

    :return: the logs of :func:`critic_update` (``critic/member_mse`` per critic of every
        member) plus ``critic/backup_weight`` (batch mean) when weighted backups are on.
    """
    num_members, n = agent.ensemble_size, agent.num_critics
    target, backup = compute_ensemble_td_target(
        agent,
        target_agent,
        batch,
        alpha=alpha,
        target_critic_ensemble_n=target_critic_ensemble_n,
        weighted_bellman_temp=weighted_bellman_temp,
        weight_type=weight_type,
    )
    weights = batch.weights.unsqueeze(0)  # (1, B, 1)
    if backup is not None:
        weights = weights * backup.unsqueeze(0)
    if masks is not None:
        weights = weights * masks / masks.mean(dim=(1, 2), keepdim=True).clamp_min(1e-6)
    weights = weights.expand(num_members, -1, -1).repeat_interleave(n, dim=0)  # (E*N, B, 1)
    per_critic_target = target.repeat_interleave(n, dim=0)  # (E*N, B, 1)
    rep = agent.encoder(batch.obs)
    q = critic_values(agent, rep, batch.action)
    loss = lu.critic_loss(q, per_critic_target, weights)
    optimizer_step(optimizer, loss)
    logs = _critic_logs(loss, q, per_critic_target, batch.weights)
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
    """SUNRISE's actor update: each member's SAC objective on its own critics, summed
    (SAC-Discrete's exact expectation over actions for discrete members).

    ``L = sum_e mean_b m_{e,b} [alpha_e log pi_e(a|s_b) - Q_e(s_b, a)] / mean_b m_{e,b}``,
    ``a ~ pi_e`` reparameterised, ``Q_e`` member ``e``'s critics reduced by
    ``actor_q_reduction``. Detached encoder features; critic parameters get no gradient.

    :return: ``actor/loss``, ``actor/q`` and ``actor/log_prob`` (``(E,)``: each member's mean
        log-probability, for the members' alpha updates).
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
    if masks is not None:
        per_sample = per_sample * masks / masks.mean(dim=(1, 2), keepdim=True).clamp_min(1e-6)
    loss = per_sample.mean(dim=(1, 2)).sum()
    optimizer_step(optimizer, loss)
    return {
        "actor/loss": loss.detach(),
        "actor/q": q.detach().mean(),
        "actor/log_prob": log_prob.detach().mean(dim=(1, 2)),
    }
