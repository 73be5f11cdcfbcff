"""``super_sac()``: the gin-configurable training loop.

The loop is split into small named parts (:class:`Trainer`): ``collect`` (env steps into the
n-step queue and the replay buffer), ``update`` (critic, actor and alpha updates, target
networks), ``evaluate``, ``log`` and ``save``. A run goes through three phases, each a method:
``run_bc`` (behavioral cloning on the buffer's data), ``run_offline`` (critic and
advantage-filtered BC updates on the buffer's data, no env interaction) and ``run_online``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import gin
import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from tqdm.auto import tqdm

from super_sac import adv_estimator, checkpoint, learning
from super_sac import learning_utils as lu
from super_sac.agent import Agent
from super_sac.config import TrainConfig
from super_sac.evaluation import evaluate_agent
from super_sac.loggers import NullLogger, make_logger
from super_sac.replay import AdvantageIndex, NStepQueue, ReplayBuffer
from super_sac.utils import (
    atomic_write_json,
    atomic_write_text,
    flush_denormals,
    make_run_dir,
    matmul_precision,
    set_seed,
)
from super_sac.validation import ConfigError, validate_config  # noqa: E402,F401

PHASES = ("bc", "offline", "online")


class NonFiniteError(FloatingPointError):
    """A loss or parameter became NaN or infinite; training stops instead of going on silently."""


def as_vector_env(env: gym.Env | gym.vector.VectorEnv) -> gym.vector.VectorEnv:
    """A single env becomes a one-env ``SyncVectorEnv`` whose episodes the loop resets itself."""
    if isinstance(env, gym.vector.VectorEnv):
        return env
    return gym.vector.SyncVectorEnv([lambda: env], autoreset_mode=AutoresetMode.DISABLED)


def _autoreset_mode(env: gym.vector.VectorEnv) -> AutoresetMode:
    return AutoresetMode(env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))


def _final_observations(
    next_obs: dict[str, np.ndarray], info: dict[str, Any], ended: np.ndarray
) -> dict[str, np.ndarray]:
    """SAME_STEP autoreset: replace the reset observations of ended envs by their final ones."""
    if not ended.any():
        return next_obs
    out = {k: v.copy() for k, v in next_obs.items()}
    for i in np.flatnonzero(ended):
        final = info["final_obs"][i]
        for k in out:
            out[k][i] = final[k]
    return out


def _episode_seed(base: int, env_index: int, episode_index: int) -> int:
    """A well-mixed seed for episode ``episode_index`` of env ``env_index``."""
    return int(np.random.SeedSequence([base, env_index, episode_index]).generate_state(1)[0])


class Trainer:
    """The parts of one training run. Build it with :func:`super_sac`.

    Episodes of the training envs are started by the loop itself (autoreset ``DISABLED``), each
    with a seed derived from the run's seed, the env's index and the episode's index, and the
    actions of every running episode are recorded. A resumed run rebuilds each env's state by
    resetting it with that seed and replaying those actions, which is exact for envs that are
    deterministic given their seed and actions.
    """

    def __init__(
        self,
        agent: Agent,
        buffer: ReplayBuffer,
        train_env: Any,
        test_env: gym.Env,
        cfg: TrainConfig,
    ) -> None:
        self.cfg = cfg
        self.agent = agent
        self.buffer = buffer
        self.env = as_vector_env(train_env)
        self.autoreset = _autoreset_mode(self.env)
        self.test_env = test_env
        self.device = agent.device
        if self.device.type == "cpu":
            flush_denormals()
        self.num_envs = self.env.num_envs
        self.base_seed = cfg.seed if cfg.seed is not None else int(np.random.randint(2**31 - 1))
        self.np_rng = np.random.default_rng(self.base_seed)
        self.target_agent = learning.make_target_agent(agent)
        if cfg.compile:
            for networks in (agent, self.target_agent):
                networks.compile_networks()
        self._build_optimizers()
        self.noise = lu.GaussianExplorationNoise(
            cfg.exploration_param_init, cfg.exploration_param_final, cfg.exploration_param_anneal
        )
        self.nstep = NStepQueue(self.num_envs, cfg.n_step, cfg.gamma)
        self.buffer.allocate(self.env.single_observation_space, self.env.single_action_space)
        if cfg.seed is not None:
            self.buffer.seed(cfg.seed)
        self.afbc_index: AdvantageIndex | None = None
        if cfg.afbc_per:  # the AFBC trick's second sampling index over the same storage
            self.afbc_index = AdvantageIndex(self.buffer.size, seed=self.base_seed + 1)
            self.afbc_index.add(np.arange(len(self.buffer)))
        # counters and history (all of it goes into checkpoints); ``step`` counts the steps of
        # the current phase
        self.phase = PHASES[0]
        self.step = 0
        self.env_steps = 0
        self.critic_updates = 0
        self.actor_updates = 0
        self.episodes = 0
        self.evaluations = 0
        self.wall_seconds = 0.0
        self.best_return = -math.inf
        self.last_eval: dict[str, float] = {}
        self.eval_history: list[dict[str, float]] = []
        self.last_logs: dict[str, torch.Tensor] = {}
        self.recent_returns: list[float] = []
        self._losses_finite = torch.ones((), dtype=torch.bool, device=self.device)
        self._unchecked_losses: list[torch.Tensor] = []
        self.last_checkpoint: Path | None = None
        self._session_start = (0, 0, time.perf_counter())
        # the run directory and logger are made by ``open_run``
        self.run_dir: Path | None = None
        self.logger: NullLogger = NullLogger()

    # ------------------------------------------------------------------ set-up
    def _build_optimizers(self) -> None:
        cfg, agent = self.cfg, self.agent
        self.critic_optimizer = learning.build_optimizer(
            learning.ParamGroup(
                list(agent.critic.parameters()), cfg.critic_lr, cfg.critic_l2, cfg.critic_clip
            ),
            learning.ParamGroup(
                list(agent.encoder.parameters()), cfg.encoder_lr, cfg.encoder_l2, cfg.encoder_clip
            ),
        )
        self.actor_optimizer = learning.build_optimizer(
            learning.ParamGroup(
                list(agent.actor.parameters()), cfg.actor_lr, cfg.actor_l2, cfg.actor_clip
            )
        )
        init_log_alpha = math.log(cfg.init_alpha) if cfg.init_alpha > 0 else -math.inf
        # one entropy coefficient per SUNRISE member (a scalar for a single agent)
        shape = (agent.ensemble_size,) if agent.ensemble_size > 1 else ()
        self.log_alpha = torch.full(
            shape, init_log_alpha, device=self.device, requires_grad=cfg.alpha_lr > 0
        )
        self.alpha_optimizer = (
            learning.build_optimizer(learning.ParamGroup([self.log_alpha], cfg.alpha_lr))
            if cfg.alpha_lr > 0
            else None
        )
        # behavioral cloning trains the encoder through the actor's loss (no critic runs then)
        self.bc_optimizer = (
            learning.build_optimizer(
                learning.ParamGroup(
                    list(agent.actor.parameters()), cfg.actor_lr, cfg.actor_l2, cfg.actor_clip
                ),
                learning.ParamGroup(
                    list(agent.encoder.parameters()),
                    cfg.encoder_lr,
                    cfg.encoder_l2,
                    cfg.encoder_clip,
                ),
            )
            if cfg.bc_warmup_steps > 0
            else None
        )
        target_entropy = (
            lu.discrete_target_entropy if agent.discrete else lu.continuous_target_entropy
        )
        self.target_entropy = target_entropy(agent.act_space_size, cfg.target_entropy_mul)
        self._pair_target_params()

    def _pair_target_params(self) -> None:
        agent, tgt = self.agent, self.target_agent
        self._critic_pairs = (lu.params_of(tgt.critic), lu.params_of(agent.critic))
        self._encoder_pairs = (lu.params_of(tgt.encoder), lu.params_of(agent.encoder))
        self._actor_pairs = (lu.params_of(tgt.actor), lu.params_of(agent.actor))

    def open_run(self) -> None:
        """Create (or, when resuming, reopen) the run directory and start the logger."""
        cfg = self.cfg
        if cfg.resume:
            self.run_dir = resolve_resume_dir(cfg)
        elif cfg.save_to_disk or cfg.log_to_disk:
            base = cfg.base_save_path or os.environ.get("SSAC_SAVE", "./saves")
            self.run_dir = make_run_dir(base, cfg.name)
        if self.run_dir is None:
            return
        check_writable(
            self.run_dir,
            self.estimated_checkpoint_bytes() * (cfg.keep_checkpoints + 1)
            if cfg.save_to_disk
            else 0,
        )
        config_text = gin.operative_config_str() or "# no gin bindings were used for this run\n"
        atomic_write_text(self.run_dir / "config.gin", config_text)
        atomic_write_json(self.run_dir / "hparams.json", self.hparams())

    def start_logger(self) -> None:
        """Open the logger; a resumed tensorboard log drops events after the checkpoint."""
        cfg = self.cfg
        if cfg.log_to_disk and self.run_dir is not None:
            self.logger = make_logger(
                cfg.logging_method,
                self.run_dir,
                name=cfg.name,
                config=self.hparams(),
                wandb_entity=cfg.wandb_entity,
                wandb_project=cfg.wandb_project,
                purge_step=self.log_step if cfg.resume else None,
            )

    def hparams(self) -> dict[str, Any]:
        """The resolved settings of the loop and the agent, JSON-friendly."""
        out = {k: v for k, v in dataclasses.asdict(self.cfg).items() if k != "augmenter"}
        out["agent"] = self.agent._signature()
        out["buffer_size"] = self.buffer.size
        out["num_envs"] = self.num_envs
        return out

    def estimated_checkpoint_bytes(self) -> int:
        params = sum(p.numel() * p.element_size() for p in self.agent.parameters())
        return int(self.buffer.memory_bytes + 4 * params)  # agent, target, two Adam moments

    # ------------------------------------------------------------------ collect
    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    def _choose_actions(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        cfg = self.cfg
        if self.agent.discrete:
            return self._choose_discrete_actions(obs)
        shape = (self.num_envs, self.agent.act_space_size)
        if self.env_steps < cfg.random_warmup_steps:
            return self.np_rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
        if cfg.use_exploration_process:
            action = self.agent.forward(obs, batched=True)
            noise = self.np_rng.normal(0.0, self.noise.std, size=shape)
            return np.clip(action + noise, -1.0, 1.0).astype(np.float32)
        return self.agent.sample_action(obs, batched=True).astype(np.float32, copy=False)

    def _choose_discrete_actions(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Uniform random actions during warm-up; then epsilon-greedy around the greedy (argmax)
        action when ``use_exploration_process`` (epsilon follows the exploration schedule), else
        a sample of the categorical policy."""
        cfg, num_actions = self.cfg, self.agent.act_space_size
        if self.env_steps < cfg.random_warmup_steps:
            return self.np_rng.integers(0, num_actions, size=self.num_envs, dtype=np.int64)
        if cfg.use_exploration_process:
            greedy = self.agent.forward(obs, batched=True)
            return lu.epsilon_greedy(greedy, self.noise.std, num_actions, self.np_rng)
        return self.agent.sample_action(obs, batched=True).astype(np.int64, copy=False)

    def collect(self, num_transitions: int) -> None:
        """Step the train env for ``num_transitions`` transitions into the replay buffer."""
        cfg = self.cfg
        for _ in range(num_transitions // self.num_envs):
            action = self._choose_actions(self.obs)
            next_obs, reward, terminated, truncated, info = self.env.step(action)
            for i in range(self.num_envs):
                self.episode_actions[i].append(action[i])
            self.episode_len += 1
            self.episode_return += reward
            ended = terminated | truncated
            learn_terminated = terminated.copy()
            if cfg.ignore_all_dones:
                learn_terminated[:] = False
            elif cfg.infinite_bootstrap and cfg.max_episode_steps is not None:
                learn_terminated &= self.episode_len < cfg.max_episode_steps
            if self.autoreset is AutoresetMode.SAME_STEP:
                true_next = _final_observations(next_obs, info, ended)
            else:
                true_next = next_obs
            out = self.nstep.push(self.obs, action, reward, true_next, learn_terminated, ended)
            if out is not None:
                slots = self.buffer.push(**out)
                if self.afbc_index is not None:
                    self.afbc_index.add(slots)
            if ended.any():
                next_obs = self._end_episodes(ended, next_obs)
            self.obs = next_obs
            self.env_steps += self.num_envs
            self.noise.advance(self.num_envs)

    def _end_episodes(self, ended: np.ndarray, next_obs: dict[str, np.ndarray]) -> dict:
        for i in np.flatnonzero(ended):
            self.recent_returns.append(float(self.episode_return[i]))
            self.episodes += 1
            self.episode_index[i] += 1
            self.episode_actions[i] = []
        self.episode_return[ended] = 0.0
        self.episode_len[ended] = 0
        if self.autoreset is AutoresetMode.SAME_STEP:
            return next_obs  # the vector env has reset them already
        seeds = [self._seed_of(i) if ended[i] else None for i in range(self.num_envs)]
        obs, _ = self.env.reset(seed=seeds, options={"reset_mask": ended.copy()})
        return obs

    def _seed_of(self, env_index: int) -> int:
        return _episode_seed(self.base_seed, env_index, int(self.episode_index[env_index]))

    def reset_envs(self) -> None:
        """Start the first episode of every env, and seed the evaluation env."""
        self.episode_return = np.zeros(self.num_envs, dtype=np.float64)
        self.episode_len = np.zeros(self.num_envs, dtype=np.int64)
        self.episode_index = np.zeros(self.num_envs, dtype=np.int64)
        self.episode_actions: list[list[np.ndarray]] = [[] for _ in range(self.num_envs)]
        self.obs, _ = self.env.reset(seed=[self._seed_of(i) for i in range(self.num_envs)])

    # ------------------------------------------------------------------ update
    def _sample(self):
        return self.buffer.sample(self.cfg.batch_size, device=self.device)

    def _critic_step(self, batch, alpha: torch.Tensor) -> dict[str, torch.Tensor]:
        """One critic update on ``batch``: a single agent's, or every SUNRISE member's."""
        cfg, agent = self.cfg, self.agent
        if agent.ensemble_size > 1:
            return learning.ensemble_critic_update(
                agent,
                self.target_agent,
                batch,
                self.critic_optimizer,
                alpha=alpha,
                target_critic_ensemble_n=cfg.target_critic_ensemble_n,
                weighted_bellman_temp=cfg.weighted_bellman_temp or None,
                weight_type=cfg.weight_type,
                masks=self._bootstrap_masks(batch),
            )
        target_noise_std = self.noise.std if cfg.target_noise_std is None else cfg.target_noise_std
        return learning.critic_update(
            agent,
            self.target_agent,
            batch,
            self.critic_optimizer,
            alpha=alpha,
            target_critic_ensemble_n=cfg.target_critic_ensemble_n,
            use_target_actor=cfg.use_target_actor,
            target_noise_std=target_noise_std,
            target_noise_clip=cfg.exploration_update_clip,
            pop=cfg.pop,
        )

    def _actor_step(self, batch, alpha: torch.Tensor) -> dict[str, torch.Tensor]:
        """One policy-gradient actor update: a single agent's, or every SUNRISE member's."""
        cfg, agent = self.cfg, self.agent
        if agent.ensemble_size > 1:
            return learning.ensemble_actor_update(
                agent,
                batch,
                self.actor_optimizer,
                alpha=alpha,
                actor_q_reduction=cfg.actor_q_reduction,
                masks=self._bootstrap_masks(batch),
            )
        return learning.online_actor_update(
            agent, batch, self.actor_optimizer, alpha=alpha, actor_q_reduction=cfg.actor_q_reduction
        )

    def _bootstrap_masks(self, batch) -> torch.Tensor | None:
        if self.cfg.bootstrap_mask_prob >= 1.0:
            return None
        idxs = torch.as_tensor(batch.idxs, device=self.device)
        return lu.bootstrap_masks(
            idxs, self.agent.ensemble_size, self.cfg.bootstrap_mask_prob, self.base_seed
        )

    def update(self, phase: str = "online") -> None:
        """One step's updates: critics (and target critics), then the actor and alpha.

        Online, the actor takes policy-gradient updates (``use_pg_update_online``) and/or AFBC
        updates (``use_afbc_update_online``); in the offline phase only AFBC updates.
        """
        cfg = self.cfg
        use_pg = cfg.use_pg_update_online and phase == "online"
        use_afbc = phase == "offline" or cfg.use_afbc_update_online
        logs: dict[str, torch.Tensor] = {}
        alpha = self.alpha
        batch = None
        for _ in range(cfg.critic_updates_per_step):
            batch = self._sample()
            logs.update(self._critic_step(batch, alpha))
            self._track_finite(logs["critic/loss"])
            if self.buffer.prioritized:
                self.buffer.update_priorities(batch.idxs, logs["critic/abs_td_error"])
            self.critic_updates += 1
            if self.critic_updates % cfg.target_delay == 0:
                lu.soft_update(*self._critic_pairs, cfg.mlp_tau)
                lu.soft_update(*self._encoder_pairs, cfg.encoder_tau)
        if use_pg and self.step % cfg.actor_delay == 0:
            for i in range(cfg.pg_actor_updates_per_step):
                if not (cfg.reuse_replay_dicts and i == 0 and batch is not None):
                    batch = self._sample()
                logs.update(self._actor_step(batch, alpha))
                self._track_finite(logs["actor/loss"])
                if self.alpha_optimizer is not None:
                    logs.update(
                        learning.alpha_update(
                            self.log_alpha,
                            self.alpha_optimizer,
                            logs["actor/log_prob"],
                            self.target_entropy,
                        )
                    )
                    self._track_finite(logs["alpha/loss"])
                    alpha = self.alpha
                self.actor_updates += 1
                if cfg.use_target_actor:
                    lu.soft_update(*self._actor_pairs, cfg.mlp_tau)
        if use_afbc and self.step % cfg.actor_delay == 0:
            self.afbc_updates(logs, batch)
        self._fold_finite()
        self.last_logs = logs

    def afbc_updates(self, logs: dict[str, torch.Tensor], batch: Any = None) -> None:
        """``afbc_actor_updates_per_step`` advantage-filtered BC actor updates.

        With ``afbc_per`` each batch comes from the advantage index (with importance weights)
        and its filter weights become the slots' new priorities; otherwise the first update may
        reuse the critics' last ``batch`` (``reuse_replay_dicts``).
        """
        cfg = self.cfg
        for i in range(cfg.afbc_actor_updates_per_step):
            importance = None
            if self.afbc_index is not None:
                batch, importance = self.afbc_index.sample(self.buffer, cfg.batch_size, self.device)
            elif not (cfg.reuse_replay_dicts and i == 0 and batch is not None):
                batch = self._sample()
            out = learning.offline_actor_update(
                self.agent,
                batch,
                self.actor_optimizer,
                adv_filter=cfg.afbc_filter,
                temperature=cfg.afbc_temperature,
                max_weight=cfg.afbc_max_weight,
                adv_samples=cfg.afbc_adv_samples,
                importance_weights=importance,
            )
            if self.afbc_index is not None:
                priorities = adv_estimator.advantage_priorities(out["actor/filter_weights"])
                self.afbc_index.update(batch.idxs, priorities)
            logs.update(out)
            self._track_finite(logs["actor/afbc_loss"])
            self.actor_updates += 1
            if cfg.use_target_actor:
                lu.soft_update(*self._actor_pairs, cfg.mlp_tau)

    def bc_update(self) -> None:
        """One behavioral cloning step: maximise the log-likelihood of the buffer's actions
        (an unfiltered AFBC update that also trains the encoder)."""
        logs = learning.offline_actor_update(
            self.agent,
            self._sample(),
            self.bc_optimizer,
            adv_filter="none",
            train_encoder=True,
        )
        self._track_finite(logs["actor/afbc_loss"])
        self._fold_finite()
        self.actor_updates += 1
        self.last_logs = logs

    # ------------------------------------------------------------------ fault checks
    def _track_finite(self, loss: torch.Tensor) -> None:
        # remembered until ``_fold_finite`` (end of every update) checks them all in one call
        self._unchecked_losses.append(loss)

    def _fold_finite(self) -> None:
        # a device-side flag: no host sync here; it is read by ``check_finite``
        if self._unchecked_losses:
            losses = torch.cat([loss.reshape(-1) for loss in self._unchecked_losses])
            self._losses_finite = self._losses_finite & torch.isfinite(losses).all()
            self._unchecked_losses.clear()

    def check_finite(self, params: bool = False) -> None:
        """Stop with :class:`NonFiniteError` if a loss (or, with ``params``, a weight) is NaN/inf.

        Losses are checked every step on the CPU and every ``log_interval`` steps on a GPU (to
        avoid a host sync per update); parameters at every log and before every checkpoint.
        A diagnostic snapshot (weights and the latest metrics) is written to the run directory.
        """
        self._fold_finite()
        bad_losses = not bool(self._losses_finite)
        bad_params = params and not self._weights_finite()
        if not (bad_losses or bad_params):
            return
        values = {k: float(v.float().mean()) for k, v in self.last_logs.items()}
        culprits = [k for k, v in values.items() if not math.isfinite(v)] or (
            ["agent parameters"] if bad_params else ["a loss since the last check"]
        )
        snapshot = self._write_diagnostics(values)
        raise NonFiniteError(
            f"non-finite {', '.join(culprits)} at {self.phase} step {self.step} "
            f"(env step {self.env_steps}). Training stopped. Last checkpoint: "
            f"{self.last_checkpoint or 'none'}; diagnostic snapshot: {snapshot or 'not saved'}. "
            "Lower the learning rates, clip gradients (actor_clip/critic_clip) or check the "
            "rewards and observations for NaN/inf, then resume from the checkpoint."
        )

    def _weights_finite(self) -> bool:
        tensors = list(self.agent.parameters())
        if self.alpha_optimizer is not None:  # a fixed alpha of 0 has log-alpha = -inf on purpose
            tensors.append(self.log_alpha.detach())
        return all(bool(torch.isfinite(t).all()) for t in tensors)

    def _write_diagnostics(self, values: dict[str, float]) -> Path | None:
        if self.run_dir is None:
            return None
        folder = self.run_dir / "diagnostics" / f"step_{self.step}"
        self.agent.save(folder)
        atomic_write_json(
            folder / "metrics.json",
            {
                "step": self.step,
                "env_steps": self.env_steps,
                "metrics": values,
                "alpha": self.alpha.tolist(),
            },
        )
        return folder

    # ------------------------------------------------------------------ evaluate / log / save
    def evaluate(self) -> dict[str, float]:
        """Run the evaluation episodes (seeded per evaluation) and remember the best return."""
        cfg = self.cfg
        if cfg.eval_episodes == 0:
            return {}
        self.test_env.reset(seed=_episode_seed(self.base_seed, -1 % 2**31, self.evaluations))
        self.evaluations += 1
        result = evaluate_agent(
            self.agent, self.test_env, cfg.eval_episodes, cfg.max_episode_steps, cfg.render
        )
        self.logger.log({f"eval/{k}": v for k, v in result.items()}, self.log_step)
        result.update(env_steps=self.env_steps, phase=self.phase, phase_step=self.step)
        self.last_eval = result
        self.eval_history.append(result)
        if result["return_mean"] > self.best_return:
            self.best_return = result["return_mean"]
            if cfg.save_best and cfg.save_to_disk and self.run_dir is not None:
                self.agent.save(self.run_dir / "best")
        return result

    def log(self, elapsed: float) -> None:
        """Send the latest update metrics and the schedule to the logger (one host sync)."""
        metrics = {k: float(v.float().mean()) for k, v in self.last_logs.items()}
        metrics.update(
            {
                **{f"schedule/phase_{p}": float(p == self.phase) for p in PHASES},
                "schedule/phase_step": float(self.step),
                "schedule/env_steps": float(self.env_steps),
                "schedule/critic_updates": float(self.critic_updates),
                "schedule/actor_updates": float(self.actor_updates),
                "schedule/exploration_std": self.noise.std,
                "schedule/alpha": float(self.alpha.mean()),
                "schedule/buffer_size": float(len(self.buffer)),
                "perf/env_steps_per_s": (self.env_steps - self._session_start[0])
                / max(elapsed, 1e-9),
            }
        )
        if self.recent_returns:
            metrics["train/episode_return"] = float(np.mean(self.recent_returns))
            self.recent_returns.clear()
        self.logger.log(metrics, self.log_step)

    @property
    def log_step(self) -> int:
        """The logs' x-axis: steps of the earlier phases plus this phase's steps (online: env
        steps), so a purely online run logs against env steps."""
        cfg = self.cfg
        before = {
            "bc": 0,
            "offline": cfg.bc_warmup_steps,
            "online": cfg.bc_warmup_steps + cfg.num_steps_offline,
        }[self.phase]
        return before + (self.env_steps if self.phase == "online" else self.step)

    def save(self) -> None:
        """Save the agent's weights to the run directory."""
        if self.cfg.save_to_disk and self.run_dir is not None:
            self.agent.save(self.run_dir)

    # ------------------------------------------------------------------ checkpoints
    def signature(self) -> dict[str, Any]:
        """What a checkpoint must share with this run to be resumed by it."""
        sig = dict(self.agent._signature())
        sig.update(
            {
                "buffer_size": self.buffer.size,
                "buffer_prioritized": self.buffer.prioritized,
                "observation_keys": sorted(self.env.single_observation_space.spaces),
                "observation_shapes": {
                    k: list(v.shape) for k, v in self.env.single_observation_space.spaces.items()
                },
                "action_shape": list(self.env.single_action_space.shape),
                "num_envs": self.num_envs,
                "n_step": self.cfg.n_step,
                "afbc_per": self.cfg.afbc_per,
            }
        )
        return sig

    def state_dict(self) -> dict[str, Any]:
        """The whole training state except the replay data (see :mod:`super_sac.checkpoint`)."""
        opt = lambda o: o.state_dict() if o is not None else None  # noqa: E731
        return {
            "format": checkpoint.FORMAT_VERSION,
            "signature": self.signature(),
            "agent": self.agent.state_dict(),
            "target_agent": self.target_agent.state_dict(),
            "critic_optimizer": opt(self.critic_optimizer),
            "actor_optimizer": opt(self.actor_optimizer),
            "alpha_optimizer": opt(self.alpha_optimizer),
            "bc_optimizer": opt(self.bc_optimizer),
            "afbc_index": self.afbc_index.state_dict() if self.afbc_index is not None else None,
            "log_alpha": self.log_alpha.detach().clone(),
            "noise": self.noise.state_dict(),
            "nstep": self.nstep.state_dict(),
            "counters": {
                "phase": self.phase,
                "step": self.step,
                "env_steps": self.env_steps,
                "critic_updates": self.critic_updates,
                "actor_updates": self.actor_updates,
                "episodes": self.episodes,
                "evaluations": self.evaluations,
                "wall_seconds": self.wall_seconds,
                "best_return": self.best_return,
                "base_seed": self.base_seed,
            },
            "eval_history": self.eval_history,
            "episodes_in_progress": {
                "obs": {k: torch.from_numpy(v.copy()) for k, v in self.obs.items()},
                "return": torch.from_numpy(self.episode_return.copy()),
                "len": torch.from_numpy(self.episode_len.copy()),
                "index": torch.from_numpy(self.episode_index.copy()),
                "actions": [self._episode_actions_tensor(a) for a in self.episode_actions],
                "recent_returns": list(self.recent_returns),
            },
            "rng": checkpoint.capture_rng_states(**self._generators()),
        }

    def _episode_actions_tensor(self, actions: list[np.ndarray]) -> torch.Tensor:
        """One running episode's actions: ``(T, act_space_size)`` float32, or ``(T,)`` int64
        for discrete agents."""
        if self.agent.discrete:
            return torch.from_numpy(np.array(actions, dtype=np.int64).reshape(len(actions)))
        shape = (len(actions), self.agent.act_space_size)
        return torch.from_numpy(np.array(actions, dtype=np.float32).reshape(shape))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output (the buffer is restored separately)."""
        diffs = checkpoint.describe_differences(state["signature"], self.signature())
        if diffs:
            raise checkpoint.CheckpointError(
                "the checkpoint was written by a run configured differently:\n  "
                + "\n  ".join(diffs)
                + "\nResume with the same settings (train_gym.py --resume reads the run's "
                "config.gin)."
            )
        self.agent.load_state_dict(state["agent"])
        self.target_agent.load_state_dict(state["target_agent"])
        for name in ("critic_optimizer", "actor_optimizer", "alpha_optimizer", "bc_optimizer"):
            if getattr(self, name) is not None and state.get(name) is not None:
                getattr(self, name).load_state_dict(state[name])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.noise.load_state_dict(state["noise"])
        self.nstep.load_state_dict(state["nstep"])
        c = state["counters"]
        self.phase, self.step, self.env_steps = c["phase"], c["step"], c["env_steps"]
        self.critic_updates, self.actor_updates = c["critic_updates"], c["actor_updates"]
        self.episodes, self.evaluations = c["episodes"], c["evaluations"]
        self.wall_seconds, self.best_return = c["wall_seconds"], c["best_return"]
        self.base_seed = c["base_seed"]
        self.eval_history = list(state["eval_history"])
        self.last_eval = self.eval_history[-1] if self.eval_history else {}
        ep = state["episodes_in_progress"]
        self.obs = {k: v.numpy().copy() for k, v in ep["obs"].items()}
        self.episode_return = ep["return"].numpy().copy()
        self.episode_len = ep["len"].numpy().copy()
        self.episode_index = ep["index"].numpy().copy()
        self.episode_actions = [list(a.numpy()) for a in ep["actions"]]
        self.recent_returns = list(ep["recent_returns"])
        if self.afbc_index is not None:
            self.afbc_index.load_state_dict(state["afbc_index"])
        checkpoint.restore_rng_states(state["rng"], **self._generators())

    def _generators(self) -> dict[str, np.random.Generator]:
        gens = {"trainer": self.np_rng, "buffer": self.buffer.rng}
        if self.afbc_index is not None:
            gens["afbc_index"] = self.afbc_index.rng
        return gens

    def write_checkpoint(self) -> None:
        """Check for NaNs, then write the whole state atomically."""
        if not (self.cfg.save_to_disk and self.run_dir is not None):
            return
        self.check_finite(params=True)
        self.last_checkpoint = checkpoint.write_checkpoint(
            self.run_dir,
            self.log_step,
            self.state_dict(),
            self.buffer,
            keep=self.cfg.keep_checkpoints,
        )

    def restore(self) -> None:
        """Load the newest intact checkpoint of the run and rebuild the envs' episodes."""
        checkpoint.remove_incomplete(self.run_dir)
        folder, state = checkpoint.load_latest(self.run_dir, self.buffer, self.device)
        self.reset_envs()  # builds the episode bookkeeping arrays before they are overwritten
        self.load_state_dict(state)
        self.last_checkpoint = folder
        self._replay_episodes()

    def _replay_episodes(self) -> None:
        """Bring every env back to where the checkpoint was taken (see the class docstring)."""
        envs = getattr(self.env, "envs", None)
        if self.autoreset is AutoresetMode.DISABLED and envs is not None:
            for i, sub in enumerate(envs):
                obs, _ = sub.reset(seed=self._seed_of(i))
                for action in self.episode_actions[i]:
                    obs, *_ = sub.step(action)
                for k in self.obs:
                    if not np.array_equal(np.asarray(obs[k]), self.obs[k][i]):
                        warnings.warn(
                            f"env {i} did not return to its checkpointed state when its episode "
                            "was replayed (the env is not deterministic given its seed and "
                            "actions); the resumed run continues from the replayed state.",
                            stacklevel=2,
                        )
                    self.obs[k][i] = obs[k]
            return
        warnings.warn(
            "this train_env cannot be replayed (it is not a SyncVectorEnv in DISABLED autoreset "
            "mode): the resumed run starts fresh episodes, so it is not bit-identical to an "
            "uninterrupted run.",
            stacklevel=2,
        )
        self.nstep.reset()
        for i in range(self.num_envs):
            self.episode_index[i] += 1
            self.episode_actions[i] = []
        self.episode_return[:] = 0.0
        self.episode_len[:] = 0
        self.obs, _ = self.env.reset(seed=[self._seed_of(i) for i in range(self.num_envs)])

    # ------------------------------------------------------------------ summary
    def summary(self) -> dict[str, Any]:
        final = self.last_eval.get("return_mean", float("nan"))
        steps0, updates0, t0 = self._session_start
        session = max(time.perf_counter() - t0, 1e-9)
        return {
            "env_steps": self.env_steps,
            "online_steps": self.step,
            "critic_updates": self.critic_updates,
            "actor_updates": self.actor_updates,
            "episodes": self.episodes,
            "final_eval_return": final,
            "best_eval_return": self.best_return if self.eval_history else float("nan"),
            "env_steps_per_s": (self.env_steps - steps0) / session,
            "updates_per_s": (self.critic_updates - updates0) / session,
            "wall_seconds": self.wall_seconds,
            "eval_history": self.eval_history,
            "last_checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None,
            "run_dir": str(self.run_dir) if self.run_dir is not None else None,
        }

    # ------------------------------------------------------------------ phases
    def print_settings(self) -> None:
        cfg, agent = self.cfg, self.agent
        actor = type(agent.actor).__name__
        entropy = (
            f"alpha={cfg.init_alpha} (tuned, lr={cfg.alpha_lr}, target entropy="
            f"{self.target_entropy:g})"
            if cfg.alpha_lr > 0
            else f"alpha={cfg.init_alpha}"
        )
        lines = [
            "super_sac settings",
            f"  actor {actor}, {agent.num_critics} critics (target: min of "
            f"{cfg.target_critic_ensemble_n}), hidden {agent.hidden_size}, device {self.device}",
            f"  phases: {cfg.bc_warmup_steps} behavioral cloning, {cfg.num_steps_offline} offline "
            f"(AFBC filter {cfg.afbc_filter!r}, advantage {agent.adv_method!r}"
            f"{', prioritized' if cfg.afbc_per else ''}), then online actor updates: "
            f"{'PG ' if cfg.use_pg_update_online else ''}"
            f"{'AFBC' if cfg.use_afbc_update_online else ''}",
            f"  {cfg.num_steps_online} online steps x {cfg.transitions_per_online_step} "
            f"transitions, {self.num_envs} env(s), {cfg.random_warmup_steps} random warm-up",
            f"  updates/step: critic {cfg.critic_updates_per_step}, actor "
            f"{cfg.pg_actor_updates_per_step} every {cfg.actor_delay}, batch {cfg.batch_size}",
            f"  gamma {cfg.gamma}, n_step {cfg.n_step}, tau {cfg.mlp_tau}/{cfg.encoder_tau} "
            f"every {cfg.target_delay}, target actor {cfg.use_target_actor}",
            f"  lr actor {cfg.actor_lr} critic {cfg.critic_lr} encoder {cfg.encoder_lr}; "
            + entropy,
            f"  exploration noise {cfg.use_exploration_process} "
            f"({cfg.exploration_param_init}->{cfg.exploration_param_final})",
            f"  run directory: {self.run_dir or 'none (nothing saved)'}; logs: {self.logger.where}",
        ]
        if agent.ensemble_size > 1:
            lines.insert(
                2,
                f"  SUNRISE ensemble of {agent.ensemble_size} (ucb_bonus {agent.ucb_bonus}, "
                f"weighted backups T={cfg.weighted_bellman_temp} {cfg.weight_type}, bootstrap "
                f"p={cfg.bootstrap_mask_prob})",
            )
        if cfg.resume:
            lines.append(f"  resumed from {self.last_checkpoint} at {self.phase} step {self.step}")
        print("\n".join(lines), flush=True)

    def phase_length(self, phase: str) -> int:
        """Number of steps of ``phase`` ("bc", "offline" or "online")."""
        cfg = self.cfg
        return {
            "bc": cfg.bc_warmup_steps,
            "offline": cfg.num_steps_offline,
            "online": cfg.num_steps_online,
        }[phase]

    def _run_phase(self, step_fn: Any) -> None:
        """Run the current phase from ``self.step`` to its end: ``step_fn`` once per step, then
        the periodic evaluation, logging, saving and checkpointing; evaluate at the end."""
        cfg = self.cfg
        total = self.phase_length(self.phase)
        check_every_step = self.device.type == "cpu"
        start = time.perf_counter()
        bar = tqdm(
            total=total,
            initial=self.step,
            disable=cfg.verbosity < 1 or total == 0,
            desc=self.phase,
            mininterval=1.0,
            dynamic_ncols=True,
        )
        while self.step < total:
            self.step += 1
            updated = step_fn()
            if updated and check_every_step:
                self.check_finite()
            if self.step % cfg.eval_interval == 0 and self.evaluate():
                bar.set_postfix(eval_return=f"{self.last_eval['return_mean']:.1f}")
            if self.step % cfg.log_interval == 0:
                self.check_finite(params=True)
                self.log(time.perf_counter() - start)
            if self.step % cfg.save_interval == 0:
                self.save()
            if self.step % cfg.checkpoint_interval == 0:
                self.write_checkpoint()
            bar.update(1)
        bar.close()
        if total > 0 and self.step % cfg.eval_interval != 0:
            self.evaluate()

    def run_bc(self) -> None:
        """The behavioral cloning phase: ``bc_warmup_steps`` BC updates on the buffer's data."""

        def step() -> bool:
            self.bc_update()
            return True

        self._run_phase(step)

    def run_offline(self) -> None:
        """The offline phase: ``num_steps_offline`` steps of critic updates and
        ``afbc_actor_updates_per_step`` AFBC actor updates on the buffer's data (no env
        interaction)."""

        def step() -> bool:
            self.update(phase="offline")
            return True

        self._run_phase(step)

    def run_online(self) -> None:
        """The online phase: collect, update, evaluate, log, save and checkpoint."""

        def step() -> bool:
            self.collect(self.cfg.transitions_per_online_step)
            if self.env_steps > self.cfg.random_warmup_steps and len(self.buffer) > 0:
                self.update()
                return True
            return False

        self._run_phase(step)

    def enter_phase(self, phase: str) -> None:
        """Switch to ``phase`` at its step 0. Leaving behavioral cloning re-creates the target
        networks from the cloned agent (the initial targets know nothing of the data)."""
        if self.phase == "bc" and self.cfg.bc_warmup_steps > 0:
            self.target_agent = learning.make_target_agent(self.agent)
            self._pair_target_params()
        self.phase, self.step = phase, 0

    def run_phases(self) -> None:
        """Run the phases in order, starting from the current one (a resumed run continues
        where its checkpoint was written)."""
        runners = {"bc": self.run_bc, "offline": self.run_offline, "online": self.run_online}
        for phase in PHASES[PHASES.index(self.phase) :]:
            if phase != self.phase:
                self.enter_phase(phase)
            runners[phase]()
        if not self.eval_history:
            self.evaluate()

    def run(self) -> dict[str, Any]:
        """Open (or resume) the run, train through the phases, save, and summarise."""
        with matmul_precision(self.cfg.matmul_precision):
            return self._run()

    def _run(self) -> dict[str, Any]:
        self.open_run()
        if self.cfg.resume:
            self.restore()
        else:
            self.reset_envs()
        self.start_logger()
        if self.cfg.verbosity > 0:
            self.print_settings()
        self._session_start = (self.env_steps, self.critic_updates, time.perf_counter())
        wall_before = self.wall_seconds
        try:
            self.run_phases()
            self.check_finite(params=True)
            self.save()
            if self.last_checkpoint is None or self.step % self.cfg.checkpoint_interval:
                self.write_checkpoint()
        finally:
            self.logger.close()
        self.wall_seconds = wall_before + time.perf_counter() - self._session_start[2]
        summary = self.summary()
        if self.run_dir is not None:
            atomic_write_json(self.run_dir / "summary.json", summary)
        if self.cfg.verbosity > 0:
            print(
                f"final evaluation return {summary['final_eval_return']:.2f} "
                f"(best {summary['best_eval_return']:.2f}) after {summary['env_steps']} env "
                f"steps, {summary['env_steps_per_s']:.0f} env steps/s"
                + (f"; logs and weights in {self.run_dir}" if self.run_dir else ""),
                flush=True,
            )
        return summary


def resolve_resume_dir(cfg: TrainConfig) -> Path:
    """``resume`` as a path, or ``True``: the newest ``<name>_<i>`` under the save path."""
    if isinstance(cfg.resume, (str, os.PathLike)):
        run_dir = Path(cfg.resume)
        if not run_dir.is_dir():
            raise checkpoint.CheckpointError(f"resume: run directory {run_dir} does not exist")
        return run_dir
    base = Path(cfg.base_save_path or os.environ.get("SSAC_SAVE", "./saves"))
    runs = [p for p in base.glob(f"{cfg.name}_*") if p.name[len(cfg.name) + 1 :].isdigit()]
    if not runs:
        raise checkpoint.CheckpointError(
            f"resume=True but {base} holds no run named {cfg.name}_<i>; pass the run "
            "directory itself as resume='saves/<name>_<i>'"
        )
    return max(runs, key=lambda p: int(p.name[len(cfg.name) + 1 :]))


def check_writable(run_dir: Path, needed_bytes: int) -> None:
    """Fail before training if the run directory cannot hold files or the checkpoints."""
    probe = run_dir / ".write_probe"
    try:
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as err:
        raise PermissionError(
            f"cannot write to the run directory {run_dir} ({err}); set SSAC_SAVE or "
            "base_save_path to a writable folder"
        ) from err
    free = shutil.disk_usage(run_dir).free
    if needed_bytes > free:
        raise OSError(
            f"{run_dir} has {free / 2**20:.0f} MiB free but the checkpoints need about "
            f"{needed_bytes / 2**20:.0f} MiB (replay buffer included); free space, use "
            "another SSAC_SAVE, lower keep_checkpoints or the buffer size"
        )


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
    max_episode_steps: int | None = None,
    batch_size: int = 256,
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
    dr3_coeff: float = 0.0,
    inverse_markov_coeff: float = 0.0,
    contrastive_markov_coeff: float = 0.0,
    smoothness_markov_coeff: float = 0.0,
    smoothness_markov_max_dist: float = 0.1,
    init_alpha: float = 1.0,
    alpha_lr: float = 3e-4,
    target_entropy_mul: float = 1.0,
    use_exploration_process: bool = False,
    exploration_param_init: float = 0.1,
    exploration_param_final: float = 0.1,
    exploration_param_anneal: int = 1,
    exploration_update_clip: float | None = 0.5,
    target_noise_std: float | None = None,
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
    afbc_filter: str = "binary",
    afbc_temperature: float = 1.0,
    afbc_max_weight: float = 20.0,
    afbc_adv_samples: int = 4,
    augmenter: Any = None,
    encoder_lambda: float = 0.0,
    actor_lambda: float = 0.0,
    aug_mix: float = 1.0,
    render: bool = False,
    eval_interval: int = 5_000,
    eval_episodes: int = 10,
    logging_method: str = "tensorboard",
    wandb_entity: str | None = None,
    wandb_project: str | None = None,
    base_save_path: str | None = None,
    name: str = "ssac_run",
    save_to_disk: bool = True,
    log_to_disk: bool = True,
    log_interval: int = 1_000,
    save_interval: int = 10_000,
    save_best: bool = False,
    verbosity: int = 1,
    seed: int | None = None,
    checkpoint_interval: int = 10_000,
    keep_checkpoints: int = 2,
    resume: bool | str = False,
    run_info: dict[str, Any] | None = None,
    compile: bool = False,
    matmul_precision: str = "highest",
) -> dict[str, Any]:
    """Train ``agent`` off-policy; every argument after the four objects is a gin setting.

    Phases (each optional): ``bc_warmup_steps`` behavioral cloning updates on the buffer's data
    (the target networks are then re-created from the cloned agent); ``num_steps_offline``
    offline steps of ``critic_updates_per_step`` critic updates and
    ``afbc_actor_updates_per_step`` advantage-filtered BC (AFBC) actor updates, with no env
    interaction; then the online phase below. Offline phases need a buffer holding a dataset
    (``ReplayBuffer.load_dataset``). AFBC maximises ``E[f(A(s, a)) log pi(a|s)]`` over dataset
    actions, with ``A`` estimated by ``Agent.adv_method`` and the filter ``afbc_filter``:
    "binary" ``1[A > 0]`` (CRR), "exp" ``min(exp(A / afbc_temperature), afbc_max_weight)``
    (AWAC) or "none" (plain BC); ``afbc_adv_samples`` policy samples estimate ``V(s)``.
    ``afbc_per`` draws AFBC batches by advantage-based priorities (critics stay uniform);
    see :mod:`super_sac.adv_estimator`.

    Online schedule: ``num_steps_online`` steps, each collecting ``transitions_per_online_step`` env
    transitions and then running ``critic_updates_per_step`` critic updates and (every
    ``actor_delay`` steps) ``pg_actor_updates_per_step`` policy-gradient actor updates
    (``use_pg_update_online``), each followed by an alpha update when ``alpha_lr > 0``, and/or
    ``afbc_actor_updates_per_step`` AFBC updates (``use_afbc_update_online``; AWAC-style
    fine-tuning). The first ``random_warmup_steps`` transitions use uniform
    random actions and no updates run until they are collected. Only ``terminated`` stops
    bootstrapping; truncated episodes bootstrap from their true final observation.

    Algorithms are settings (see ``experiments/gym/*.gin``): SAC uses a stochastic actor and
    entropy tuning; TD3 a deterministic actor, a target actor, ``target_noise_std = 0.2``,
    ``exploration_update_clip = 0.5`` (TD3's c), ``actor_delay = target_delay = 2`` and
    ``actor_q_reduction = "first"``; DDPG one critic, a target actor and no target noise.
    SAC-Discrete is a discrete Agent (``Agent.discrete = True``) with the SAC settings: targets,
    actor and alpha losses become exact expectations over the actions, the target entropy is
    ``target_entropy_mul * 0.98 * log|A|``, and ``use_exploration_process`` means
    epsilon-greedy acting (epsilon = the exploration schedule's value).

    ``target_noise_std = None`` follows the exploration schedule's current std (the original
    library's behaviour). ``target_critic_ensemble_n`` is the size of the random critic subset
    whose minimum forms the TD target (REDQ's M). The README's hyperparameter reference lists
    every other setting.

    Crash safety: every ``checkpoint_interval`` steps of each phase (and at the end) the whole
    training state is written atomically to ``<run_dir>/checkpoints/`` (the newest
    ``keep_checkpoints`` are kept); ``resume=True`` (the newest run named ``name``) or
    ``resume="<run_dir>"`` continues from the newest intact checkpoint. ``run_info`` is stored
    in ``hparams.json`` (the training scripts keep their command line there). Returns the run
    summary (also written to ``summary.json``).

    ``compile = True`` applies ``torch.compile`` to the networks of the agent and its target
    copy (:meth:`Agent.compile_networks`). It costs minutes of compilation at the first updates;
    on the CPU it measured slower than eager mode (see experiments/benchmarks/README.md), so it
    is off by default and meant for GPUs. ``matmul_precision`` trades float32 exactness of the
    matrix products for speed during the run (see :func:`super_sac.utils.matmul_precision`).
    """
    settings = dict(locals())
    cfg = TrainConfig(**{f.name: settings[f.name] for f in dataclasses.fields(TrainConfig)})
    validate_config(cfg, agent, buffer, train_env, test_env)
    if seed is not None:
        set_seed(seed)
    return Trainer(agent, buffer, train_env, test_env, cfg).run()
