"""Checks of the update schedule, exploration, ensembles, phases and optimizer settings."""

from __future__ import annotations

import numpy as np

from super_sac.agent import Agent
from super_sac.config import TrainConfig
from super_sac.evaluation import EVAL_METRICS, METRIC_ALIASES, eval_metric
from super_sac.replay import ReplayBuffer
from super_sac.validation.common import AUGMENTER_EXAMPLE, ConfigError, _default, _err, _warn


def _validate_update_counts(cfg: TrainConfig) -> None:
    """A count of updates may be 0 only where that kind of update never runs (as the original
    super_sac's gin files write ``afbc_actor_updates_per_step = 0`` for SAC, and
    ``critic_updates_per_step = 0`` for behavioral cloning alone)."""
    critic_phases = [
        f"{name} = {steps}"
        for name, steps in (
            ("num_steps_offline", cfg.num_steps_offline),
            ("num_steps_online", cfg.num_steps_online),
        )
        if steps > 0
    ]
    if cfg.critic_updates_per_step < (1 if critic_phases else 0):
        raise _err(
            f"critic_updates_per_step = {cfg.critic_updates_per_step}",
            f"must be >= 1 when critic updates run ({' and '.join(critic_phases)}; 0 only for "
            "behavioral cloning alone)",
            "set critic_updates_per_step to 1 or more",
        )
    if cfg.use_pg_update_online and cfg.num_steps_online > 0 and cfg.pg_actor_updates_per_step == 0:
        raise _err(
            "pg_actor_updates_per_step = 0",
            f"use_pg_update_online = True runs policy-gradient actor (and alpha) updates in the "
            f"{cfg.num_steps_online} online steps, but 0 per step means that none would run",
            "set pg_actor_updates_per_step = 1 (or more), or use_pg_update_online = False "
            "(with use_afbc_update_online = True for AWAC-style online learning)",
        )
    if cfg.num_steps_offline > 0:
        afbc_by = f"num_steps_offline = {cfg.num_steps_offline}"
    elif cfg.use_afbc_update_online and cfg.num_steps_online > 0:
        afbc_by = "use_afbc_update_online = True"
    else:
        return
    if cfg.afbc_actor_updates_per_step == 0:
        raise _err(
            "afbc_actor_updates_per_step = 0",
            f"{afbc_by} runs advantage-filtered BC actor updates, but 0 per step means that "
            "none would run",
            "set afbc_actor_updates_per_step = 1 (or more), or num_steps_offline = 0 and "
            "use_afbc_update_online = False",
        )


def _validate_episodes(cfg: TrainConfig) -> None:
    """``max_episode_steps`` and what depends on it."""
    if cfg.max_episode_steps is not None and cfg.max_episode_steps < 1:
        raise _err(
            f"max_episode_steps = {cfg.max_episode_steps}",
            "episodes need at least one step",
            "use a positive limit, or None for the env's own",
        )
    if cfg.infinite_bootstrap and cfg.max_episode_steps is None:
        raise _err(
            "infinite_bootstrap = True",
            "it bootstraps through a termination at exactly max_episode_steps, but "
            "max_episode_steps is None",
            "set super_sac.max_episode_steps to the episodes' time limit (e.g. 1000), or "
            "infinite_bootstrap = False",
        )


def _validate_exploration(cfg: TrainConfig, agent: Agent) -> None:
    """Target policy smoothing and the exploration noise schedule."""
    if cfg.target_noise_std is not None and cfg.target_noise_std < 0:
        raise _err(
            f"target_noise_std = {cfg.target_noise_std}",
            "a standard deviation must be >= 0",
            "use e.g. 0.2 (TD3), 0 (no smoothing) or None",
        )
    stochastic_continuous = agent.stochastic and not agent.discrete
    if stochastic_continuous and cfg.target_noise_std is not None and cfg.target_noise_std > 0:
        raise _err(
            f"target_noise_std = {cfg.target_noise_std}",
            "target policy smoothing perturbs a deterministic actor's next action (TD3), but "
            f"the actor {type(agent.actor).__name__} is stochastic: its next action is already a "
            "sample, so the noise would be ignored",
            "set target_noise_std = None (or 0), or use Agent.actor_network_cls = "
            "@super_sac.nets.mlps.ContinuousDeterministicActor (as td3.gin does)",
        )
    init, final = cfg.exploration_param_init, cfg.exploration_param_final
    if cfg.use_exploration_process and cfg.exploration_param_anneal == 0 and init != final:
        raise _err(
            "exploration_param_anneal = 0",
            f"use_exploration_process = True anneals the noise from exploration_param_init = "
            f"{init} to exploration_param_final = {final}, but over 0 transitions the initial "
            "value would never be used",
            "anneal over 1 or more transitions (e.g. 250_000), or set exploration_param_init = "
            "exploration_param_final for a constant noise",
        )


def _validate_actor_update_noise(cfg: TrainConfig, agent: Agent) -> None:
    """DrQ-v2's noisy actor update is for deterministic actors (which never form ensembles)."""
    if cfg.actor_update_noise and (agent.stochastic or agent.discrete):
        _warn(
            "actor_update_noise = True",
            f"it has no effect: the actor {type(agent.actor).__name__} is not deterministic "
            "(its update already scores sampled actions)",
            "remove the actor_update_noise binding",
        )


def _validate_next_action_encoder(cfg: TrainConfig, agent: Agent) -> None:
    """``next_action_encoder``: a known value, and "online" only where the continuous TD backup
    of a single agent reads it."""
    value = cfg.next_action_encoder
    if value not in ("target", "online"):
        raise _err(
            f"next_action_encoder = {value!r}",
            'must be "target" or "online"',
            'use "target" (the default) or "online" (DrQ, RAD: the actor reads s\' through the '
            "online encoder)",
        )
    if value == "online" and (agent.discrete or agent.ensemble_size > 1):
        kind = "discrete" if agent.discrete else f"ensemble_size = {agent.ensemble_size}"
        raise _err(
            'next_action_encoder = "online"',
            f"only the continuous single-agent TD backup reads it, and this agent is {kind}",
            'remove the binding (the default "target")',
        )


def _validate_unused_settings(cfg: TrainConfig) -> None:
    """Settings that would have no effect: an error when the run cannot do what they ask, a
    warning when ignoring them is harmless."""
    if cfg.aug_mix is not None and not 0.0 <= cfg.aug_mix <= 1.0:
        raise _err(
            f"aug_mix = {cfg.aug_mix}",
            "a fraction of the batch must lie in [0, 1]",
            "use e.g. 0.9, or leave it at None (all of the batch)",
        )
    if cfg.augmenter is None and cfg.aug_mix not in (None, 0):
        _warn(
            f"aug_mix = {cfg.aug_mix}",
            "it has no effect: no augmenter is set (super_sac.augmenter = None), so no "
            "observation is augmented; the original super_sac's pixel scripts passed their "
            "own random shift to the loop, which overrode a gin file's augmenter = None, so its "
            "files that bind both were trained with augmentation",
            f"remove the aug_mix binding, or set an augmenter: {AUGMENTER_EXAMPLE} (the DMC "
            "and Atari scripts use DrQ-v2's random shift when the augmenter is left unbound)",
        )
    max_dist = cfg.smoothness_markov_max_dist
    smoothness_on = cfg.smoothness_markov_coeff > 0 and cfg.markov_abstraction_updates_per_step
    if not smoothness_on and max_dist != _default("smoothness_markov_max_dist"):
        _warn(
            f"smoothness_markov_max_dist = {max_dist}",
            "it has no effect: it sets the distance of the Markov smoothness penalty, which is "
            f"off (smoothness_markov_coeff = {cfg.smoothness_markov_coeff}, "
            f"markov_abstraction_updates_per_step = {cfg.markov_abstraction_updates_per_step})",
            "remove the smoothness_markov_max_dist binding, or turn the penalty on with "
            "smoothness_markov_coeff > 0 and markov_abstraction_updates_per_step >= 1",
        )
    if isinstance(cfg.save_best, str) and eval_metric(cfg.save_best) is None:
        aliases = ", ".join(f"{k!r} (= {v!r})" for k, v in METRIC_ALIASES.items())
        raise _err(
            f"save_best = {cfg.save_best!r}",
            "is not a metric of the evaluations",
            f"use True (the mean return) or one of {', '.join(repr(m) for m in EVAL_METRICS)} "
            f"(also with the 'eval/' prefix the logs show), or {aliases}",
        )
    wants_best = isinstance(cfg.save_best, str) or bool(cfg.save_best)
    if wants_best and (not cfg.save_to_disk or cfg.eval_episodes == 0):
        why = "save_to_disk = False" if not cfg.save_to_disk else "eval_episodes = 0"
        _warn(
            f"save_best = {cfg.save_best!r}",
            f"it has no effect with {why}: no best weights are saved",
            "set save_to_disk = True and eval_episodes >= 1, or remove the save_best binding",
        )


def _validate_ensemble(cfg: TrainConfig, agent: Agent) -> None:
    """SUNRISE settings: backup weights and bootstrap masks."""
    if cfg.weight_type is None and cfg.weighted_bellman_temp:
        raise _err(
            f"weight_type = None, weighted_bellman_temp = {cfg.weighted_bellman_temp}",
            "weighted Bellman backups need a weight formula",
            "set weight_type = 'sunrise' (the paper's) or 'softmax', or weighted_bellman_temp "
            "= None",
        )
    if cfg.weighted_bellman_temp is not None and cfg.weighted_bellman_temp < 0:
        raise _err(
            f"weighted_bellman_temp = {cfg.weighted_bellman_temp}",
            "the temperature must be >= 0",
            "use e.g. 20 (SUNRISE), or None to skip weighted backups",
        )
    if not 0.0 < cfg.bootstrap_mask_prob <= 1.0:
        raise _err(
            f"bootstrap_mask_prob = {cfg.bootstrap_mask_prob}",
            "the probability that a member trains on a transition must lie in (0, 1]",
            "use 1.0 (every member sees every sample) or e.g. 0.5",
        )
    if agent.ensemble_size == 1:
        unused = [
            f"{key} = {getattr(cfg, key)!r}"
            for key, default in (("weighted_bellman_temp", None), ("bootstrap_mask_prob", 1.0))
            if getattr(cfg, key) not in (default, 0)
        ]
        if unused:
            raise _err(
                ", ".join(unused),
                "these SUNRISE settings need an ensemble, but Agent.ensemble_size = 1",
                "set Agent.ensemble_size > 1 (sunrise.gin uses 5), or remove them",
            )
    elif cfg.use_target_actor:
        raise _err(
            "use_target_actor = True",
            "SUNRISE ensembles are SAC agents, which have no target actor",
            "set use_target_actor = False",
        )
    elif cfg.bc_warmup_steps or cfg.num_steps_offline or cfg.use_afbc_update_online:
        raise ConfigError(
            f"Agent.ensemble_size = {agent.ensemble_size} with behavioral cloning / AFBC "
            "(bc_warmup_steps, num_steps_offline, use_afbc_update_online): the filtered-BC "
            "update is written for a single actor and SUNRISE ensembles do not support it yet. "
            "Fix: set Agent.ensemble_size = 1 for offline training."
        )


def _validate_discrete_settings(cfg: TrainConfig) -> None:
    """TD3/DDPG's deterministic-policy settings have no meaning for SAC-Discrete."""
    if cfg.use_target_actor:
        raise _err(
            "use_target_actor = True",
            "SAC-Discrete bootstraps with the online categorical actor (exact expectation over "
            "actions); a target actor is a TD3/DDPG setting",
            "set use_target_actor = False for Agent.discrete = True",
        )
    if cfg.target_noise_std is not None and cfg.target_noise_std > 0:
        raise _err(
            f"target_noise_std = {cfg.target_noise_std}",
            "target policy smoothing adds Gaussian noise to continuous actions (TD3)",
            "set target_noise_std = None (or 0) for Agent.discrete = True",
        )
    if not 0.0 <= cfg.exploration_param_init <= 1.0 or not 0.0 <= cfg.exploration_param_final <= 1:
        raise _err(
            f"exploration_param_init = {cfg.exploration_param_init}, exploration_param_final = "
            f"{cfg.exploration_param_final}",
            "for discrete actions they are epsilon-greedy probabilities",
            "use values in [0, 1]",
        )


def _validate_phases(cfg: TrainConfig, agent: Agent, buffer: ReplayBuffer) -> None:
    """The behavioral cloning / offline / online schedule and the AFBC settings."""
    if cfg.bc_warmup_steps + cfg.num_steps_offline + cfg.num_steps_online == 0:
        raise _err(
            "num_steps_online = 0",
            "bc_warmup_steps, num_steps_offline and num_steps_online are all 0: nothing to do",
            "give at least one phase a positive number of steps",
        )
    offline = [k for k in ("bc_warmup_steps", "num_steps_offline") if getattr(cfg, k) > 0]
    if offline and len(buffer) == 0 and not cfg.resume:  # a resumed run restores its buffer
        raise _err(
            f"{offline[0]} = {getattr(cfg, offline[0])}",
            "the behavioral cloning and offline phases learn from the replay buffer's data, but "
            "the buffer is empty",
            "load a dataset first: buffer.load_dataset('<minari id or .npz path>', env, "
            "gamma=...) (experiments/offline/train_offline.py --dataset does it), or "
            "ReplayBuffer.load('<buffer>.npz') for a saved buffer",
        )
    if cfg.num_steps_online > 0 and not (cfg.use_pg_update_online or cfg.use_afbc_update_online):
        raise _err(
            "use_pg_update_online = False",
            "no actor update would run online (use_afbc_update_online is False too)",
            "set use_pg_update_online = True (SAC/TD3-style fine-tuning) and/or "
            "use_afbc_update_online = True (AWAC-style)",
        )
    uses_afbc = cfg.num_steps_offline > 0 or cfg.use_afbc_update_online
    afbc_only = {
        "afbc_per": "advantage-prioritized batches are only drawn by AFBC updates",
        "afbc_update_encoder": "only AFBC updates train the encoder through the actor's loss",
    }
    for key, why in afbc_only.items():
        if getattr(cfg, key) and not uses_afbc:
            raise _err(
                f"{key} = True",
                f"{why}, and none run",
                f"set num_steps_offline > 0 or use_afbc_update_online = True, or {key} = False",
            )
    for key in ("afbc_temperature", "afbc_max_weight"):
        if not getattr(cfg, key) > 0:
            raise _err(f"{key} = {getattr(cfg, key)}", "must be > 0", "use e.g. 1.0 and 20.0")
    wanted = ("indirect",) if agent.discrete else ("mean", "max")
    if uses_afbc and cfg.afbc_filter != "none" and agent.adv_method not in wanted:
        raise ConfigError(
            f"Agent.adv_method = {agent.adv_method!r} does not fit "
            f"{'discrete' if agent.discrete else 'continuous'} actions. Fix: set "
            f"Agent.adv_method to one of {wanted}."
        )
    if cfg.num_steps_online > 0 and buffer.protected >= buffer.size:
        raise _err(
            f"num_steps_online = {cfg.num_steps_online}",
            f"the replay buffer (size {buffer.size}) is full of protected offline data, so "
            "online transitions have nowhere to go",
            "build the ReplayBuffer with a larger size than the dataset",
        )
    if len(buffer) > 0:
        expected = cfg.gamma ** np.arange(1, cfg.n_step + 1)
        stored = buffer.stored_discounts()
        if not np.all(np.isclose(stored[:, None], expected[None, :], rtol=1e-5).any(axis=1)):
            raise _err(
                f"gamma = {cfg.gamma}",
                f"the buffer holds transitions with bootstrap discounts {stored[:5].tolist()}, "
                f"not gamma**k for k in 1..n_step",
                "load the dataset with the run's gamma (load_dataset(..., gamma=super_sac.gamma))",
            )
        offline = cfg.num_steps_offline > 0 or cfg.bc_warmup_steps > 0
        if cfg.reward_clip is not None:
            _warn(
                f"reward_clip = {cfg.reward_clip}",
                f"clips the rewards the loop collects, not the {len(buffer)} transitions already "
                "in the buffer (a dataset), which keep theirs: the critics learn from both",
                "clip the dataset's rewards before loading it, or leave reward_clip = None",
            )
        if cfg.n_step > 1 and offline and np.allclose(stored, cfg.gamma):
            _warn(
                f"n_step = {cfg.n_step}",
                f"n-step returns are built from the online transitions only; the {len(buffer)} "
                "dataset transitions in the buffer are one-step, so the offline phase learns "
                "one-step targets",
                "nothing, if that is meant (the original's offline configs do this); set "
                "super_sac.n_step = 1 for one-step targets online too",
            )


def _validate_optimizer_settings(cfg: TrainConfig, agent: Agent, buffer: ReplayBuffer) -> None:
    """Adam's betas for alpha, PopArt's step size, prioritized replay's final beta and the
    advantage's critic reduction: their ranges, and a warning when one is set where it does
    nothing."""
    betas = cfg.alpha_betas
    if len(betas) != 2 or not all(isinstance(b, (int, float)) and 0.0 <= b < 1.0 for b in betas):
        raise _err(
            f"alpha_betas = {betas!r}",
            "Adam's betas are two numbers in [0, 1)",
            "use e.g. (0.9, 0.999) (Adam's and SAC's) or (0.5, 0.999) (the original super_sac)",
        )
    if not 0.0 < cfg.popart_beta <= 1.0:
        raise _err(
            f"popart_beta = {cfg.popart_beta}",
            "PopArt's step size must lie in (0, 1]",
            "use e.g. 1e-4 (the original super_sac) or 3e-4",
        )
    if cfg.per_beta_final is not None and not 0.0 <= cfg.per_beta_final <= 1.0:
        raise _err(
            f"per_beta_final = {cfg.per_beta_final}",
            "prioritized replay's importance-sampling exponent must lie in [0, 1]",
            "use 1.0 (Schaul et al. 2016), or None to keep the buffer's beta fixed",
        )
    _warn_unused_fidelity_settings(cfg, agent, buffer)


def _warn_unused_fidelity_settings(cfg: TrainConfig, agent: Agent, buffer: ReplayBuffer) -> None:
    afbc_runs = cfg.num_steps_offline > 0 or (
        cfg.use_afbc_update_online and cfg.num_steps_online > 0
    )
    unused = (
        (
            "popart_beta",
            getattr(agent.critic, "popart", None) is None,
            "the critics have no PopArt statistics",
            "set Agent.auto_rescale_targets = True, or remove the binding",
        ),
        (
            "per_beta_final",
            not buffer.prioritized,
            "the ReplayBuffer samples uniformly, so there are no importance weights",
            "set ReplayBuffer.prioritized = True, or remove the binding",
        ),
        (
            "alpha_betas",
            cfg.alpha_lr == 0,
            "alpha is not tuned (alpha_lr = 0)",
            "set alpha_lr > 0, or remove the binding",
        ),
        (
            "afbc_critic_reduction",
            not afbc_runs,
            "no AFBC update runs, so no advantage is estimated",
            "set num_steps_offline > 0 or use_afbc_update_online = True, or remove the binding",
        ),
    )
    for name, does_nothing, problem, fix in unused:
        value = getattr(cfg, name)
        if does_nothing and value != _default(name):
            _warn(f"{name} = {value!r}", f"has no effect: {problem}", fix)
