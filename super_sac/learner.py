"""The learner: what an update changes, and one method per kind of update.

:class:`Learner` holds the agent being trained, its target copy, the optimizers (critics with the
encoder, actor, entropy coefficient, and the behavioral-cloning optimizer), log-alpha and the
update counters. Each ``*_step`` method runs one update through a function of
:mod:`super_sac.learning` (or :mod:`super_sac.sunrise` for ensembles), applies the target-network
rule and returns the update's metrics as a dict of detached tensors. The gin loop
(:func:`super_sac.main.super_sac`) and the quick-start :class:`super_sac.SAC` both update through
it, so both follow the same rules:

* target critics and the target encoder move after every ``target_delay``-th critic update
  (Polyak rates ``mlp_tau`` and ``encoder_tau``);
* a target actor (``use_target_actor``) moves after every actor update (rate ``mlp_tau``);
* alpha is tuned after every policy-gradient actor update when ``alpha_lr > 0``; a loop whose
  online phase runs no policy-gradient update (AWAC-style fine-tuning) tunes it with
  :meth:`Learner.alpha_step` once per step instead, as the original super_sac did.
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

import torch

from super_sac import learning, markov, sunrise
from super_sac import learning_utils as lu
from super_sac.agent import Agent
from super_sac.augmented_batch import augment_batch, fresh_view
from super_sac.optim import ParamGroup, build_optimizer
from super_sac.replay import Batch

if TYPE_CHECKING:
    from super_sac.config import TrainConfig

Logs = dict[str, torch.Tensor]
OPTIMIZER_NAMES = (
    "critic_optimizer",
    "actor_optimizer",
    "alpha_optimizer",
    "bc_optimizer",
    "markov_optimizer",
)


class Learner:
    """The trainable state of a run and its updates.

    :param agent: the agent to train (its device is the learner's device).
    :param cfg: the loop's settings (learning rates, clips, L2, taus, delays, alpha, ...).
    :param base_seed: the run's seed (SUNRISE's bootstrap masks are a hash of it).
    """

    def __init__(self, agent: Agent, cfg: TrainConfig, base_seed: int = 0) -> None:
        self.cfg, self.agent, self.base_seed = cfg, agent, int(base_seed)
        self.device = agent.device
        if cfg.markov_abstraction_updates_per_step > 0:
            agent.attach_markov_heads()
        self.target_agent = learning.make_target_agent(agent)
        if cfg.compile:
            for networks in (agent, self.target_agent):
                networks.compile_networks()
        self.critic_updates = 0
        self.actor_updates = 0
        # the last critic batch (weakly) and its pre-step features, for the actor updates
        self._critic_features: tuple[weakref.ref[Batch], torch.Tensor] | None = None
        self._losses_finite = torch.ones((), dtype=torch.bool, device=self.device)
        self._unchecked_losses: list[torch.Tensor] = []
        self._build_optimizers()
        for networks in (agent, self.target_agent):
            stats = getattr(networks.critic, "popart", None)
            if stats is not None:
                stats.beta = cfg.popart_beta
        entropy = lu.discrete_target_entropy if agent.discrete else lu.continuous_target_entropy
        self.target_entropy = entropy(agent.act_space_size, cfg.target_entropy_mul)
        self._pair_target_params()

    # ------------------------------------------------------------------ set-up
    def _build_optimizers(self) -> None:
        cfg, agent = self.cfg, self.agent
        actor = ParamGroup(
            list(agent.actor.parameters()), cfg.actor_lr, cfg.actor_l2, cfg.actor_clip
        )
        encoder = ParamGroup(
            list(agent.encoder.parameters()), cfg.encoder_lr, cfg.encoder_l2, cfg.encoder_clip
        )
        critic = ParamGroup(
            list(agent.critic.parameters()), cfg.critic_lr, cfg.critic_l2, cfg.critic_clip
        )
        self.critic_optimizer = build_optimizer(critic, encoder)
        self.actor_optimizer = build_optimizer(actor)
        # behavioral cloning trains the encoder through the actor's loss (no critic runs then);
        # with afbc_update_encoder the AFBC actor loss does too, through the same optimizer
        # (Adam moments of its own, apart from the critic's, as the Markov optimizer's are)
        trains_encoder = cfg.bc_warmup_steps > 0 or cfg.afbc_update_encoder
        self.bc_optimizer = build_optimizer(actor, encoder) if trains_encoder else None
        # the Markov state abstraction trains the encoder and its heads by its own optimizer;
        # the heads share the encoder's settings, as in the original super_sac
        self.markov_optimizer = None
        if cfg.markov_abstraction_updates_per_step > 0 and agent.markov_heads is not None:
            heads = ParamGroup(
                list(agent.markov_heads.parameters()),
                cfg.encoder_lr,
                cfg.encoder_l2,
                cfg.encoder_clip,
            )
            self.markov_optimizer = build_optimizer(encoder, heads)
        init_log_alpha = (
            math.log(cfg.init_alpha or 1e-15)
            if cfg.init_alpha > 0 or cfg.alpha_lr > 0
            else -math.inf
        )
        # one entropy coefficient per SUNRISE member (a scalar for a single agent)
        shape = (agent.ensemble_size,) if agent.ensemble_size > 1 else ()
        self.log_alpha = torch.full(
            shape, init_log_alpha, device=self.device, requires_grad=cfg.alpha_lr > 0
        )
        self.alpha_optimizer = (
            build_optimizer(ParamGroup([self.log_alpha], cfg.alpha_lr, betas=cfg.alpha_betas))
            if cfg.alpha_lr > 0
            else None
        )

    def _pair_target_params(self) -> None:
        agent, tgt = self.agent, self.target_agent
        self._critic_pairs = (lu.params_of(tgt.critic), lu.params_of(agent.critic))
        self._encoder_pairs = (lu.params_of(tgt.encoder), lu.params_of(agent.encoder))
        self._actor_pairs = (lu.params_of(tgt.actor), lu.params_of(agent.actor))

    def reset_targets(self) -> None:
        """Re-create the target networks as copies of the agent (after behavioral cloning: the
        initial targets know nothing of the data)."""
        self.target_agent = learning.make_target_agent(self.agent)
        self._pair_target_params()

    @property
    def alpha(self) -> torch.Tensor:
        """The entropy coefficient(s), detached: a scalar, or ``(E,)`` for SUNRISE members."""
        return self.log_alpha.detach().exp()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the last critic batch's features (a weak reference, a cache)."""
        state = self.__dict__.copy()
        state["_critic_features"] = None
        return state

    # ------------------------------------------------------------------ updates
    def critic_step(self, batch: Batch, alpha: torch.Tensor, target_noise_std: float) -> Logs:
        """One critic update on ``batch`` (every SUNRISE member's at once for ensembles), then
        the target critics and encoder move if this is a ``target_delay``-th critic update.

        :param target_noise_std: std of the target policy smoothing noise (TD3), clipped at
            ``exploration_update_clip``.
        """
        cfg, agent = self.cfg, self.agent
        self._critic_features = None
        if agent.ensemble_size > 1:
            logs = sunrise.ensemble_critic_update(
                agent,
                self.target_agent,
                batch,
                self.critic_optimizer,
                alpha=alpha,
                target_critic_ensemble_n=cfg.target_critic_ensemble_n,
                weighted_bellman_temp=cfg.weighted_bellman_temp or None,
                weight_type=cfg.weight_type,
                masks=self.bootstrap_masks(batch),
                pop=cfg.pop,
                dr3_coeff=cfg.dr3_coeff,
                dr3_online_next=cfg.dr3_online_next,
                log_feature_dot=cfg.log_feature_dot,
            )
        else:
            logs, features = learning.critic_update_with_features(
                agent,
                self.target_agent,
                batch,
                self.critic_optimizer,
                alpha=alpha,
                target_critic_ensemble_n=cfg.target_critic_ensemble_n,
                use_target_actor=cfg.use_target_actor,
                target_noise_std=target_noise_std,
                target_noise_clip=cfg.exploration_update_clip,
                next_action_encoder=cfg.next_action_encoder,
                pop=cfg.pop,
                extra_next_obs=self.extra_views(batch, "next_obs", cfg.aug_target_samples),
                extra_obs=self.extra_views(batch, "obs", cfg.aug_critic_samples),
                encoder_lambda=cfg.encoder_lambda,
                dr3_coeff=cfg.dr3_coeff,
                dr3_online_next=cfg.dr3_online_next,
                log_feature_dot=cfg.log_feature_dot,
            )
            self._critic_features = (weakref.ref(batch), features)
        self.critic_updates += 1
        if self.critic_updates % cfg.target_delay == 0:
            lu.soft_update(*self._critic_pairs, cfg.mlp_tau)
            lu.soft_update(*self._encoder_pairs, cfg.encoder_tau)
        return logs

    def critic_features(self, batch: Batch) -> torch.Tensor | None:
        """The detached encoder features of ``batch.obs`` that the last critic update computed
        before its step, when ``batch`` is that update's batch (the same object); else ``None``.
        DrQ-v2 (Yarats et al. 2021) hands exactly these to its actor update; reusing them also
        saves an encoder forward pass. Every encoder gets this (DrQ v1, RAD and the original
        super_sac encode again after the critic's step: one optimizer step apart). A Markov
        abstraction update moves the encoder again and forgets them (the actor then encodes
        afresh)."""
        if self._critic_features is None:
            return None
        ref, features = self._critic_features
        return features if ref() is batch else None

    def pg_actor_step(
        self, batch: Batch, alpha: torch.Tensor, actor_noise_std: float = 0.0
    ) -> Logs:
        """One policy-gradient actor update (every member's for ensembles), then alpha's update
        (when tuned) and the target actor's (when used). On the last critic batch the actor
        reads the critic update's features (:meth:`critic_features`).

        :param actor_noise_std: deterministic actors: std of DrQ-v2's noise on the action the
            critics score (``actor_update_noise``; clipped at ``exploration_update_clip``).
        """
        cfg, agent = self.cfg, self.agent
        if agent.ensemble_size > 1:
            logs = sunrise.ensemble_actor_update(
                agent,
                batch,
                self.actor_optimizer,
                alpha=alpha,
                actor_q_reduction=cfg.actor_q_reduction,
                masks=self.bootstrap_masks(batch),
            )
        else:
            logs = learning.online_actor_update(
                agent,
                batch,
                self.actor_optimizer,
                alpha=alpha,
                actor_q_reduction=cfg.actor_q_reduction,
                actor_lambda=cfg.actor_lambda,
                actor_noise_std=actor_noise_std,
                actor_noise_clip=cfg.exploration_update_clip,
                rep=self.critic_features(batch),
            )
        if self.alpha_optimizer is not None:
            logs.update(self._tune_alpha(logs["actor/log_prob"]))
        self._after_actor_update()
        return logs

    def alpha_step(self, batch: Batch) -> Logs:
        """One alpha update on ``batch`` without an actor update: the policy's log-probability
        is estimated on the batch's states (:func:`super_sac.learning.policy_log_prob`).

        :raises RuntimeError: when alpha is not tuned (``alpha_lr = 0``).
        """
        if self.alpha_optimizer is None:
            raise RuntimeError("alpha_step needs alpha_lr > 0 (alpha is fixed)")
        return self._tune_alpha(learning.policy_log_prob(self.agent, batch))

    def _tune_alpha(self, log_prob_mean: torch.Tensor) -> Logs:
        return learning.alpha_update(
            self.log_alpha, self.alpha_optimizer, log_prob_mean, self.target_entropy
        )

    def afbc_step(self, batch: Batch, importance_weights: torch.Tensor | None = None) -> Logs:
        """One advantage-filtered behavioral cloning update of the actor (AWAC/CRR-style).

        By default the actor reads detached features, on the last critic batch the critic
        update's own (:meth:`critic_features`). With ``afbc_update_encoder`` the loss trains the
        encoder too: the batch is encoded afresh and the encoder steps with the actor.
        """
        cfg = self.cfg
        update_encoder = cfg.afbc_update_encoder
        logs = learning.offline_actor_update(
            self.agent,
            batch,
            self.bc_optimizer if update_encoder else self.actor_optimizer,
            adv_filter=cfg.afbc_filter,
            temperature=cfg.afbc_temperature,
            max_weight=cfg.afbc_max_weight,
            adv_samples=cfg.afbc_adv_samples,
            critic_reduction=cfg.afbc_critic_reduction,
            importance_weights=importance_weights,
            actor_lambda=cfg.actor_lambda,
            train_encoder=update_encoder,
            rep=None if update_encoder else self.critic_features(batch),
        )
        if update_encoder:
            self._critic_features = None  # the encoder moved: the critic's features are stale
        self._after_actor_update()
        return logs

    def advantage(self, batch: Batch) -> torch.Tensor:
        """``A(s, a)`` of ``batch``'s actions under the current actor and critics, ``(B, 1)``, with
        the loop's estimator settings (the AFBC trick re-scores critic batches with it)."""
        return learning.batch_advantage(
            self.agent, batch, self.cfg.afbc_adv_samples, self.cfg.afbc_critic_reduction
        )

    def bc_step(self, batch: Batch) -> Logs:
        """One behavioral cloning update: the log-likelihood of the batch's actions, through the
        actor and the encoder (no target networks move)."""
        logs = learning.offline_actor_update(
            self.agent,
            batch,
            self.bc_optimizer,
            adv_filter="none",
            train_encoder=True,
            actor_lambda=self.cfg.actor_lambda,
        )
        for key in ("actor/advantages", "actor/adv_mean", "actor/filter_mean"):
            logs.pop(key)  # no critic is evaluated: zeros and ones that mean nothing
        self.actor_updates += 1
        return logs

    def markov_step(self, batch: Batch) -> Logs:
        """One Markov state abstraction update of the encoder and the heads on ``batch``
        (:func:`super_sac.markov.markov_abstraction_update`, Allen et al. 2021).

        :raises RuntimeError: when the loop trains no abstraction
            (``markov_abstraction_updates_per_step = 0``).
        """
        cfg, agent = self.cfg, self.agent
        if self.markov_optimizer is None or agent.markov_heads is None:
            raise RuntimeError("markov_step needs markov_abstraction_updates_per_step > 0")
        self._critic_features = None  # the encoder moves: the critic's features are stale
        return markov.markov_abstraction_update(
            agent.encoder,
            agent.markov_heads,
            batch,
            self.markov_optimizer,
            inverse_coeff=cfg.inverse_markov_coeff,
            contrastive_coeff=cfg.contrastive_markov_coeff,
            smoothness_coeff=cfg.smoothness_markov_coeff,
            max_dist=cfg.smoothness_markov_max_dist,
        )

    def augment(self, batch: Batch) -> Batch:
        """``batch`` with its first ``int(B * aug_mix)`` samples augmented by ``augmenter``
        (:func:`super_sac.augmented_batch.augment_batch`); ``batch`` itself without augmenter."""
        if self.cfg.augmenter is None:
            return batch
        return augment_batch(batch, self.cfg.augmenter, self.cfg.aug_mix)

    def extra_views(self, batch: Batch, which: str, samples: int) -> list[dict[str, torch.Tensor]]:
        """DrQ's ``samples - 1`` further augmentations of ``batch``'s ``which`` ("obs" or
        "next_obs"), each drawn independently and mixed like the batch's own; none without an
        augmented batch."""
        if samples <= 1 or batch.views is None:
            return []
        return [fresh_view(batch.views, self.cfg.augmenter, which) for _ in range(samples - 1)]

    def _after_actor_update(self) -> None:
        self.actor_updates += 1
        if self.cfg.use_target_actor:
            lu.soft_update(*self._actor_pairs, self.cfg.mlp_tau)

    def bootstrap_masks(self, batch: Batch) -> torch.Tensor | None:
        """SUNRISE's per-member bootstrap masks of ``batch`` (``None`` when every member uses
        every transition)."""
        if self.cfg.bootstrap_mask_prob >= 1.0:
            return None
        idxs = torch.as_tensor(batch.idxs, device=self.device)
        return lu.bootstrap_masks(
            idxs, self.agent.ensemble_size, self.cfg.bootstrap_mask_prob, self.base_seed
        )

    # ------------------------------------------------------------------ fault checks
    def track_finite(self, loss: torch.Tensor) -> None:
        """Remember ``loss`` until :meth:`fold_finite` checks every remembered loss at once."""
        self._unchecked_losses.append(loss)

    def fold_finite(self) -> None:
        """Fold the remembered losses into a device-side flag (no host sync)."""
        if self._unchecked_losses:
            losses = torch.cat([loss.reshape(-1) for loss in self._unchecked_losses])
            self._losses_finite = self._losses_finite & torch.isfinite(losses).all()
            self._unchecked_losses.clear()

    def losses_finite(self) -> bool:
        """Whether every loss tracked so far was finite (one host sync)."""
        self.fold_finite()
        return bool(self._losses_finite)

    # ------------------------------------------------------------------ state
    def parameters_finite(self) -> bool:
        """Whether every weight (and a tuned log-alpha) is finite (one host sync per tensor)."""
        tensors = list(self.agent.parameters())
        if self.alpha_optimizer is not None:  # a fixed alpha of 0 has log-alpha = -inf on purpose
            tensors.append(self.log_alpha.detach())
        return all(bool(torch.isfinite(t).all()) for t in tensors)

    def state_dict(self) -> dict[str, Any]:
        """Networks, target networks, optimizer states, log-alpha and update counters."""
        state: dict[str, Any] = {
            "agent": self.agent.state_dict(),
            "target_agent": self.target_agent.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "critic_updates": self.critic_updates,
            "actor_updates": self.actor_updates,
        }
        for name in OPTIMIZER_NAMES:
            optimizer = getattr(self, name)
            state[name] = optimizer.state_dict() if optimizer is not None else None
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output. The optimizers get back their moments and step
        counts; their settings (learning rates, betas, L2, clips) stay those this learner was
        built with, so a resumed run follows its current settings (as its ``hparams.json``
        records them), not the checkpoint's."""
        self.agent.load_state_dict(state["agent"])
        self.target_agent.load_state_dict(state["target_agent"])
        for name in OPTIMIZER_NAMES:
            optimizer = getattr(self, name)
            if optimizer is not None and state.get(name) is not None:
                settings = [
                    {k: v for k, v in group.items() if k != "params"}
                    for group in optimizer.param_groups
                ]
                optimizer.load_state_dict(state[name])
                for group, kept in zip(optimizer.param_groups, settings):
                    group.update(kept)
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.critic_updates = int(state["critic_updates"])
        self.actor_updates = int(state["actor_updates"])
