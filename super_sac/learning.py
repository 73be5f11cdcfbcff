"""One function per update. Each takes explicit arguments, steps its optimizer and returns a dict
of detached metric tensors (read them on the host only when logging: no ``.item()`` here).
The critic's updates live here; the actor's and the temperature's in
:mod:`super_sac.actor_updates`, re-exported here."""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from super_sac import learning_utils as lu
from super_sac.actor_updates import (  # noqa: F401  (re-exported: one module of every update)
    action_invariance,
    alpha_update,
    batch_advantage,
    offline_actor_update,
    online_actor_update,
    policy_log_prob,
)
from super_sac.agent import Agent
from super_sac.optim import optimizer_step
from super_sac.replay import Batch

if TYPE_CHECKING:
    from super_sac.augmented_batch import AugmentedViews

Logs = dict[str, torch.Tensor]
Obs = dict[str, torch.Tensor]


class Backup(NamedTuple):
    """A TD target and the next step it bootstrapped from (what DR3 needs without encoding
    ``s'`` again).

    :param target: ``(B, 1)`` (SUNRISE: ``(E, B, 1)``).
    :param next_rep: ``s'`` encoded by the target encoder, ``(B, D)``, without gradient.
    :param next_action: ``a'``, the action the backup evaluated the target critics at
        (``(B, A)``; SUNRISE ``(E, B, A)``), or ``None`` for discrete agents, whose backup is an
        exact expectation over every next action.
    """

    target: torch.Tensor
    next_rep: torch.Tensor
    next_action: torch.Tensor | None


def make_target_agent(agent: Agent) -> Agent:
    """A frozen copy of ``agent`` whose parameters follow it by Polyak averaging. Markov
    abstraction heads are not copied (no target uses them): the copy has none. The encoder's
    fixed statistics (:meth:`super_sac.nets.Encoder.target_shared_buffers`, e.g. a
    standardising :class:`~super_sac.nets.FlatEncoder`'s mean and std) are shared, not copied,
    so statistics fitted after the target was made reach it too."""
    memo: dict[int, Any] = {}
    if agent.markov_heads is not None:
        memo[id(agent.markov_heads)] = None
    for buffer in agent.encoder.target_shared_buffers():
        memo[id(buffer)] = buffer
    target = copy.deepcopy(agent, memo=memo)
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


def compute_td_target(
    agent: Agent, target_agent: Agent, batch: Batch, **settings: Any
) -> torch.Tensor:
    """The TD target ``(B, 1)`` of :func:`td_backup` (same keyword settings; discrete agents
    too)."""
    return td_backup(agent, target_agent, batch, **settings).target


@torch.no_grad()
def td_backup(
    agent: Agent,
    target_agent: Agent,
    batch: Batch,
    *,
    alpha: torch.Tensor,
    target_critic_ensemble_n: int,
    use_target_actor: bool = False,
    target_noise_std: float = 0.0,
    target_noise_clip: float | None = None,
    next_obs: Obs | None = None,
    next_action_encoder: str = "target",
    online_next_rep: torch.Tensor | None = None,
) -> Backup:
    """The TD target ``(B, 1)`` for SAC, TD3 and DDPG, with the ``s'`` features and the ``a'``
    it used (:class:`Backup`).

    ``s'`` is encoded by the target encoder; ``a'`` comes from the target actor when the
    algorithm has one (TD3, DDPG) or else from the online actor (SAC). The actor reads the
    target encoder's ``s'`` too, or with ``next_action_encoder = "online"`` the online
    encoder's (DrQ, RAD and SAC-AE pick ``a' ~ pi(.|s')`` through the actor's own encoder,
    whose convolutions are the critic's online ones; one more encoder pass). Stochastic actors give
    ``y = R + gamma^k (1 - done) [min_M Q'(s', a') - alpha log pi(a'|s')]``, ``a' ~ pi``
    (Haarnoja et al. 2018); deterministic actors give
    ``y = R + gamma^k (1 - done) min_M Q'(s', clip(mu'(s') + clip(eps, -c, c), -1, 1))``
    with ``eps ~ N(0, target_noise_std^2)`` (Fujimoto et al. 2018; DDPG sets the std to 0).
    ``min_M`` is over a random subset of ``target_critic_ensemble_n`` target critics (REDQ).
    Discrete agents use :func:`discrete_td_backup`. ``next_obs`` replaces
    ``batch.next_obs`` (one of DrQ's extra augmentations of it). ``online_next_rep``: the online
    encoder's features of that ``s'`` when the caller already has them (read, detached, by an
    ``"online"`` next-action encoder instead of a second pass).
    """
    if agent.discrete:
        return discrete_td_backup(
            agent,
            target_agent,
            batch,
            alpha=alpha,
            target_critic_ensemble_n=target_critic_ensemble_n,
            next_obs=next_obs,
        )
    next_obs = batch.next_obs if next_obs is None else next_obs
    next_rep = target_agent.encoder(next_obs)
    actor_rep = next_rep
    if next_action_encoder == "online":
        actor_rep = agent.encoder(next_obs) if online_next_rep is None else online_next_rep.detach()
    actor = target_agent.actor if use_target_actor else agent.actor
    if agent.stochastic:
        next_action, next_log_prob = actor(actor_rep).rsample_with_log_prob()
    else:
        next_action = lu.smoothed_target_action(
            actor(actor_rep), target_noise_std, target_noise_clip
        )
    subset = lu.random_subset(agent.num_critics, target_critic_ensemble_n, next_rep.device)
    next_q = evaluate_critics(target_agent.critic, next_rep, next_action, subset).amin(dim=0)
    next_value = lu.soft_value(next_q, next_log_prob, alpha) if agent.stochastic else next_q
    target = lu.td_target(batch.reward, batch.done, batch.discount, next_value)
    return Backup(target, next_rep, next_action)


def compute_discrete_td_target(
    agent: Agent, target_agent: Agent, batch: Batch, **settings: Any
) -> torch.Tensor:
    """SAC-Discrete's TD target ``(B, 1)`` of :func:`discrete_td_backup` (same settings)."""
    return discrete_td_backup(agent, target_agent, batch, **settings).target


@torch.no_grad()
def discrete_td_backup(
    agent: Agent,
    target_agent: Agent,
    batch: Batch,
    *,
    alpha: torch.Tensor,
    target_critic_ensemble_n: int,
    next_obs: Obs | None = None,
) -> Backup:
    """SAC-Discrete's TD target ``(B, 1)`` (Christodoulou 2019, eq. 10), exact over next actions
    (:class:`Backup` with ``next_action = None``):

    ``y = R + gamma^k (1 - done) sum_a' pi(a'|s') [min_M Q'(s', a') - alpha log pi(a'|s')]``

    with ``pi`` the online actor on target-encoded ``s'`` and ``min_M`` the minimum over a random
    subset of ``target_critic_ensemble_n`` target critics, taken per action (REDQ).
    ``next_obs`` replaces ``batch.next_obs``.
    """
    next_rep = target_agent.encoder(batch.next_obs if next_obs is None else next_obs)
    dist = agent.actor(next_rep)
    next_q = lu.random_subset_min(target_agent.critic(next_rep), target_critic_ensemble_n)
    next_value = lu.discrete_soft_value(next_q, dist.probs, dist.logits, alpha)
    target = lu.td_target(batch.reward, batch.done, batch.discount, next_value)
    return Backup(target, next_rep, None)


def critic_values(agent: Agent, rep: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """``Q_i(s, a)`` of every critic, ``(N, B, 1)``: continuous critics take the action as input;
    discrete critics output every action's value and the taken one is gathered."""
    if agent.discrete:
        return lu.gather_actions(agent.critic(rep), action)
    return agent.critic(rep, action)


def critic_values_and_features(
    agent: Agent, rep: torch.Tensor, action: torch.Tensor, *, normalized: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`critic_values` (PopArt's normalised outputs with ``normalized``) and every critic's
    penultimate features from the same pass, ``(N, B, hidden)`` (see :func:`critic_features`)."""
    if agent.discrete:
        q_all, features = agent.critic(rep, return_features=True)
        return lu.gather_actions(q_all, action), features
    return agent.critic(rep, action, normalized=normalized, return_features=True)


def critic_features(agent: Agent, rep: torch.Tensor, action: torch.Tensor | None) -> torch.Tensor:
    """Every critic's penultimate features ``(N, B, hidden)`` (after the last hidden ReLU):
    ``phi_i(s, a)`` for continuous critics (``action`` ``(B, A)``, or ``(G, B, A)`` per group of
    critics); ``phi_i(s)`` for discrete critics, whose output layer maps one state feature to
    every action's value (``action`` is ignored)."""
    if agent.discrete:
        return agent.critic.features(rep)
    return agent.critic.features(rep, action)


def dr3_regularizer(
    agent: Agent,
    features: torch.Tensor,
    backup: Backup,
    dr3_coeff: float,
    online_next_obs: Obs | None = None,
    online_next_rep: torch.Tensor | None = None,
) -> tuple[torch.Tensor | None, Logs]:
    """DR3 (Kumar et al. 2021, "DR3: Value-Based Deep Reinforcement Learning Requires Explicit
    Regularization", arXiv 2112.04716, eq. 5):
    ``dr3_coeff * mean_k mean_b phi_k(s_b, a_b) . phi_k(s'_b, a'_b)``.

    ``phi_k`` is critic ``k``'s penultimate feature vector (after the last hidden ReLU, before
    the output layer, so PopArt's normalisation does not touch it). ``phi(s, a)`` comes from the
    critic update's own forward pass (``features``): its gradient reaches the critics and the
    online encoder. ``phi(s', a')`` is evaluated by the same *online* critics -- the paper's
    regulariser is a function of the Q-network's parameters at both pairs, so the critics
    receive gradient from both -- at ``a'`` the action the TD backup used (:class:`Backup`) and
    ``s'`` encoded by the target encoder without gradient (the original super_sac's choice: the
    encoder learns only from the ``phi(s, a)`` side), or, given ``online_next_obs``, by the
    online encoder with gradient (``dr3_online_next``: the paper's regulariser of the whole network,
    as Dopamine's DR3 agent computes it; one more encoder pass). Discrete critics use
    ``phi(s)`` and ``phi(s')`` (:func:`critic_features`), as the paper's DQN-style networks
    do. Over an ensemble the term is the mean of every critic's own term
    (:func:`~super_sac.learning_utils.feature_dot`). The term is not scaled by replay
    priorities' importance weights or bootstrap masks.

    The original super_sac also evaluates the online critics at ``(s', a')`` from the target
    encoder, with gradient, but adds the term before dividing the whole critic loss by the
    number of critics, so its ``dr3_coeff`` acts as ``dr3_coeff / num_critics`` of ours (0.01
    there is 0.005 here with two critics).

    :param features: ``(N, B, hidden)`` ``phi(s, a)`` of the batch's own rows.
    :param backup: the backup of the same batch (``s'`` features and ``a'``).
    :param online_next_obs: the batch's ``s'``, to encode with the online encoder (with
        gradient, only when ``dr3_coeff > 0``) instead of reading ``backup.next_rep``.
    :param online_next_rep: those online features of ``s'`` already computed with gradient (in
        place of ``online_next_obs``; only when ``dr3_coeff > 0``).
    :param dr3_coeff: weight of the term; 0 computes only the logged dot product (no gradient,
        an extra forward pass of the critics on ``(s', a')``).
    :return: the term (``None`` when ``dr3_coeff`` is 0) and its logs: ``critic/feature_dot``
        (the mean dot product) and, with a weight, ``critic/dr3_loss`` (weight times it).
    """
    with torch.set_grad_enabled(dr3_coeff > 0 and torch.is_grad_enabled()):
        rep = backup.next_rep
        if dr3_coeff > 0 and online_next_rep is not None:
            rep = online_next_rep
        elif dr3_coeff > 0 and online_next_obs is not None:
            rep = agent.encoder(online_next_obs)
        next_features = critic_features(agent, rep, backup.next_action)
    if dr3_coeff == 0:
        features = features.detach()
    dot = lu.feature_dot(features, next_features).mean()
    logs: Logs = {"critic/feature_dot": dot.detach()}
    if dr3_coeff == 0:
        return None, logs
    term = dr3_coeff * dot
    logs["critic/dr3_loss"] = term.detach()
    return term, logs


def critic_update(
    agent: Agent,
    target_agent: Agent,
    batch: Batch,
    optimizer: torch.optim.Optimizer,
    **settings: Any,
) -> Logs:
    """:func:`critic_update_with_features` without the features: its logs only (same keyword
    settings)."""
    return critic_update_with_features(agent, target_agent, batch, optimizer, **settings)[0]


def critic_update_with_features(
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
    next_action_encoder: str = "target",
    pop: bool = False,
    extra_next_obs: Sequence[Obs] = (),
    extra_obs: Sequence[Obs] = (),
    encoder_lambda: float = 0.0,
    dr3_coeff: float = 0.0,
    dr3_online_next: bool = False,
    log_feature_dot: bool = False,
) -> tuple[Logs, torch.Tensor]:
    """Regress every critic on the TD target (see :func:`td_backup`).

    The encoder is trained through this loss only. ``batch.weights`` (prioritized replay's
    importance weights, ones otherwise) scale each sample's squared error. A critic with PopArt
    statistics first moves them towards the batch's targets (rescaling the online and target
    output layers when ``pop``) and then regresses its normalised outputs on normalised targets.

    DrQ (Kostrikov et al. 2020, eqs. 3-4): the target is the mean of the targets from
    ``batch.next_obs`` and the ``K - 1`` further augmentations ``extra_next_obs``
    (:func:`~super_sac.learning_utils.averaged_td_target`), and the loss is the mean of the
    losses on ``batch.obs`` and the ``M - 1`` further augmentations ``extra_obs`` (evaluated as
    one batch of ``M B`` samples). ``encoder_lambda > 0`` adds ``encoder_lambda *
    ||phi(aug(s)) - sg(phi(s))||`` (:func:`~super_sac.learning_utils.encoder_invariance_loss`)
    on the batch's views (``batch.views``, set by an augmenter).

    ``dr3_coeff > 0`` adds DR3's feature co-adaptation penalty (:func:`dr3_regularizer`) on the
    batch's own rows and its ``batch.next_obs`` backup (with ``dr3_online_next``, ``s'`` encoded
    by the online encoder with gradient); ``log_feature_dot`` logs the feature
    dot product without the penalty (one extra forward pass of the critics).

    :return: ``critic/loss`` (with the invariance and DR3 terms), ``critic/q_mean``,
        ``critic/target_mean``, ``critic/abs_td_error`` (per sample, mean over critics; new
        replay priorities), ``critic/member_mse`` (each critic's weighted mean squared TD error,
        ``(num_critics,)``; without PopArt, invariance and DR3 the loss is their mean) -- all on
        the batch's own observations --, ``critic/encoder_invariance`` when it is used, and
        ``critic/feature_dot`` (with DR3 or ``log_feature_dot``) and ``critic/dr3_loss`` (with
        DR3) from :func:`dr3_regularizer`; and the encoder's features of ``batch.obs``,
        ``(B, D)``, detached and computed before the optimizer step (DrQ-v2's actor update
        reads these, Yarats et al. 2021).
    """
    # s' through the online encoder with gradient (DR3 on the whole network), computed once and
    # read detached by an online next-action encoder too (otherwise DR3 encodes it after s)
    online_next_rep = None
    shared = dr3_online_next and dr3_coeff > 0 and next_action_encoder == "online"
    if shared and torch.is_grad_enabled():
        online_next_rep = agent.encoder(batch.next_obs)
    backups = [
        td_backup(
            agent,
            target_agent,
            batch,
            alpha=alpha,
            target_critic_ensemble_n=target_critic_ensemble_n,
            use_target_actor=use_target_actor,
            target_noise_std=target_noise_std,
            target_noise_clip=target_noise_clip,
            next_obs=next_obs,
            next_action_encoder=next_action_encoder,
            online_next_rep=online_next_rep if next_obs is None else None,
        )
        for next_obs in (None, *extra_next_obs)
    ]
    target = lu.averaged_td_target([backup.target for backup in backups])
    copies = 1 + len(extra_obs)
    rep = agent.encoder(stack_views([batch.obs, *extra_obs]) if copies > 1 else batch.obs)
    with_dot = dr3_coeff > 0 or log_feature_dot
    loss, q, features = critic_regression(
        agent,
        target_agent,
        rep,
        repeat_rows(batch.action, copies),
        repeat_rows(target, copies),
        repeat_rows(batch.weights, copies),
        pop=pop,
        return_features=with_dot,
    )
    batch_size = batch.action.shape[0]
    q = q[:, :batch_size]
    logs: Logs = {}
    if with_dot:
        online_next_obs = batch.next_obs if dr3_online_next else None
        term, logs = dr3_regularizer(
            agent, features[:, :batch_size], backups[0], dr3_coeff, online_next_obs, online_next_rep
        )
        if term is not None:
            loss = loss + term
    if encoder_lambda > 0 and batch.views is not None:
        own_rep = rep[:batch_size] if batch.obs is batch.views.aug_obs else None
        invariance = encoder_invariance(agent, batch.views, own_rep)
        loss = loss + encoder_lambda * invariance
        logs["critic/encoder_invariance"] = invariance.detach()
    encoded = rep[:batch_size].detach()
    optimizer_step(optimizer, loss)
    return critic_logs(loss, q, target.unsqueeze(0), batch.weights) | logs, encoded


def stack_views(views: Sequence[Obs]) -> Obs:
    """Several observation dicts of ``B`` samples each, concatenated into one of ``len * B``."""
    return {key: torch.cat([view[key] for view in views]) for key in views[0]}


def repeat_rows(x: torch.Tensor, copies: int) -> torch.Tensor:
    """``copies`` copies of ``x`` stacked along the batch dimension (``x`` itself for one)."""
    return x if copies == 1 else torch.cat([x] * copies)


def encoder_invariance(
    agent: Agent, views: AugmentedViews, aug_rep: torch.Tensor | None = None
) -> torch.Tensor:
    """``||phi(aug(s)) - sg(phi(s))||`` over the whole batch
    (:func:`~super_sac.learning_utils.encoder_invariance_loss`); gradients reach the encoder
    through the augmented features only. ``aug_rep``: ``phi(views.aug_obs)`` when the caller
    already has it."""
    with torch.no_grad():
        clean_rep = agent.encoder(views.clean_obs)
    if aug_rep is None:
        aug_rep = agent.encoder(views.aug_obs)
    return lu.encoder_invariance_loss(aug_rep, clean_rep)


def critic_regression(
    agent: Agent,
    target_agent: Agent,
    rep: torch.Tensor,
    action: torch.Tensor,
    target: torch.Tensor,
    weights: torch.Tensor,
    *,
    pop: bool = False,
    return_features: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The critic loss of :func:`super_sac.learning_utils.critic_loss`, the critics' values and,
    with ``return_features``, their penultimate features from the same pass (for DR3).

    Without PopArt the critics' values ``(K, B, 1)`` regress on ``target`` directly. A critic
    with PopArt statistics (``Agent.auto_rescale_targets``) first moves them towards the targets
    (each critic towards its own, for SUNRISE; with ``pop`` the online and target output layers
    are rescaled so their values are preserved), then regresses its normalised outputs on
    ``(y - mu) / sigma`` (van Hasselt et al. 2016).

    :param target: ``(B, 1)`` shared by every critic, or ``(K, B, 1)``.
    :param weights: ``(B, 1)`` or ``(K, B, 1)`` per-sample weights of the squared errors.
    :param return_features: also return the features ``(K, B, hidden)`` (else ``None``).
    :return: the loss, the critics' (unnormalised) values ``(K, B, 1)`` and the features.
    """
    stats = getattr(agent.critic, "popart", None)
    features = None
    if stats is None:
        if return_features:
            q, features = critic_values_and_features(agent, rep, action)
        else:
            q = critic_values(agent, rep, action)
        return lu.critic_loss(q, target, weights), q, features
    update_popart(agent, target_agent, target, pop)
    if return_features:
        normalized, features = critic_values_and_features(agent, rep, action, normalized=True)
    else:
        normalized = agent.critic(rep, action, normalized=True)
    loss = lu.critic_loss(normalized, stats.normalize(target), weights)
    return loss, stats.unnormalize(normalized), features


def critic_logs(
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
    """Move the critic's PopArt statistics towards ``targets`` (``(B, 1)``, or ``(K, B, 1)``:
    each critic's own) and share them with the target critic; with ``pop`` both output layers
    are rescaled so their values are preserved."""
    stats, target_stats = agent.critic.popart, target_agent.critic.popart
    layers = (agent.critic.output_layer, target_agent.critic.output_layer) if pop else ()
    stats.update(targets, preserve=layers)
    target_stats.copy_statistics_(stats)
