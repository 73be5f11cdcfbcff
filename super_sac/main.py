"""``super_sac()``: the gin-configurable training loop. It checks its settings and hands them to
a :class:`~super_sac.trainer.Trainer` (re-exported here), which runs the phases and the update
schedule.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from typing import Any

import gin
import gymnasium as gym

from super_sac.agent import Agent
from super_sac.config import TrainConfig
from super_sac.replay import ReplayBuffer
from super_sac.reporting import PHASES, NonFiniteError
from super_sac.trainer import Trainer
from super_sac.utils import set_seed
from super_sac.validation import ConfigError, validate_config
from super_sac.vector_envs import as_gym_vector_env

__all__ = ["PHASES", "ConfigError", "NonFiniteError", "TrainConfig", "Trainer", "super_sac"]


@gin.configurable
def super_sac(
    agent: Agent,
    buffer: ReplayBuffer,
    train_env: gym.Env | gym.vector.VectorEnv,
    test_env: gym.Env,
    num_steps_offline: int = 0,
    num_steps_online: int = 1_000_000,
    random_warmup_steps: int = 1_000,
    bc_warmup_steps: int = 0,
    afbc_actor_updates_per_step: int = 1,
    pg_actor_updates_per_step: int = 1,
    critic_updates_per_step: int = 1,
    use_afbc_update_online: bool = False,
    use_pg_update_online: bool = True,
    transitions_per_online_step: int = 1,
    actor_delay: int = 1,
    infinite_bootstrap: bool = False,
    ignore_all_dones: bool = False,
    reward_clip: float | None = None,
    max_episode_steps: int | None = None,
    batch_size: int = 256,
    per_beta_final: float | None = 1.0,
    reuse_replay_dicts: bool = True,
    actor_lr: float = 3e-4,
    critic_lr: float = 3e-4,
    encoder_lr: float = 3e-4,
    actor_clip: float | None = None,
    critic_clip: float | None = None,
    encoder_clip: float | None = None,
    actor_l2: float = 0.0,
    critic_l2: float = 0.0,
    encoder_l2: float = 0.0,
    pop: bool = False,
    popart_beta: float = 1e-4,
    dr3_coeff: float = 0.0,
    dr3_online_next: bool = False,
    log_feature_dot: bool = False,
    inverse_markov_coeff: float = 0.0,
    contrastive_markov_coeff: float = 0.0,
    smoothness_markov_coeff: float = 0.0,
    smoothness_markov_max_dist: float = 0.1,
    markov_abstraction_updates_per_step: int = 0,
    init_alpha: float = 1.0,
    alpha_lr: float = 3e-4,
    alpha_betas: tuple[float, float] = (0.9, 0.999),
    target_entropy_mul: float = 1.0,
    use_exploration_process: bool = False,
    exploration_param_init: float = 0.1,
    exploration_param_final: float = 0.1,
    exploration_param_anneal: int = 1,
    exploration_update_clip: float | None = 0.5,
    target_noise_std: float | None = None,
    actor_update_noise: bool = False,
    next_action_encoder: str = "target",
    target_critic_ensemble_n: int = 2,
    gamma: float = 0.99,
    mlp_tau: float = 0.005,
    encoder_tau: float = 0.01,
    target_delay: int = 1,
    n_step: int = 1,
    use_target_actor: bool = False,
    actor_q_reduction: str = "min",
    weighted_bellman_temp: float | None = None,
    weight_type: str = "sunrise",
    bootstrap_mask_prob: float = 1.0,
    afbc_per: bool = False,
    afbc_update_encoder: bool = False,
    afbc_critic_reduction: str = "min",
    afbc_filter: str = "binary",
    afbc_temperature: float = 1.0,
    afbc_max_weight: float = 20.0,
    afbc_adv_samples: int = 4,
    augmenter: Any = None,
    aug_mix: float | None = None,
    encoder_lambda: float = 0.0,
    actor_lambda: float = 0.0,
    aug_target_samples: int = 1,
    aug_critic_samples: int = 1,
    render: bool = False,
    video_interval: int = 0,
    eval_interval: int = 5_000,
    eval_episodes: int = 10,
    logging_method: str = "tensorboard",
    wandb_entity: str | None = None,
    wandb_project: str | None = None,
    base_save_path: str | None = None,
    name: str = "ssac_run",
    run_dir: str | None = None,
    save_to_disk: bool = True,
    log_to_disk: bool = True,
    log_interval: int = 1_000,
    save_interval: int = 10_000,
    save_best: bool | str = False,
    verbosity: int = 1,
    seed: int | None = None,
    checkpoint_interval: int = 10_000,
    keep_checkpoints: int = 2,
    resume: bool | str = False,
    run_info: dict[str, Any] | None = None,
    compile: bool = False,
    matmul_precision: str = "highest",
) -> dict[str, Any]:
    """Train ``agent`` off-policy from ``buffer`` and ``train_env``, evaluating on ``test_env``.

    Every other argument is a setting bindable from gin (``super_sac.batch_size = 512``); its
    meaning is written once, in :class:`super_sac.config.TrainConfig` (table: docs/settings.md).
    Algorithms are combinations of settings (``experiments/gym/*.gin``). Phases, each optional:
    ``bc_warmup_steps`` behavioral cloning, ``num_steps_offline`` offline steps, then
    ``num_steps_online`` online steps. Settings are checked first (a bad one raises
    :class:`~super_sac.validation.ConfigError` naming the binding and the fix); the whole loop
    state is checkpointed every ``checkpoint_interval`` steps and ``resume`` continues from it.

    :return: the run summary (also in ``<run_dir>/summary.json``).
    """
    train_env = as_gym_vector_env(train_env)  # an SB3 VecEnv gets its adapter
    settings = dict(locals())
    cfg = TrainConfig(**{f.name: settings[f.name] for f in dataclasses.fields(TrainConfig)})
    if seed is not None and not _VALIDATION_ONLY.get():
        set_seed(seed)  # first: the encoder probe initialises lazy modules from the global RNG
    validate_config(cfg, agent, buffer, train_env, test_env)
    if _VALIDATION_ONLY.get():
        return {"dry_run": True}
    return Trainer(agent, buffer, train_env, test_env, cfg).run()


_VALIDATION_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "validation_only", default=False
)


@contextlib.contextmanager
def validation_only() -> Iterator[None]:
    """Within the block, :func:`super_sac` checks its settings against the agent, buffer and
    envs (:func:`~super_sac.validation.validate_config`) and returns ``{"dry_run": True}``
    without training or writing anything (the training scripts' ``--dry_run``)."""
    token = _VALIDATION_ONLY.set(True)
    try:
        yield
    finally:
        _VALIDATION_ONLY.reset(token)
