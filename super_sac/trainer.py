"""The training loop's :class:`Trainer`: what happens at every step of the phases
(:data:`~super_sac.reporting.PHASES`: behavioral cloning, offline, online), the update schedule,
evaluation, logging and checkpoints. The pieces it drives have their own modules:
:mod:`~super_sac.collector` (env steps), :mod:`~super_sac.learner` (networks, optimizers,
updates), :mod:`~super_sac.checkpoint` (the whole loop state), :mod:`~super_sac.reporting`
(evaluation, logs, summary). :func:`super_sac.main.super_sac` builds one from its settings.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path
from typing import IO, Any

import gymnasium as gym
import numpy as np
import torch
from tqdm.auto import tqdm

from super_sac import adv_estimator, checkpoint, reporting
from super_sac import learning_utils as lu
from super_sac.agent import Agent
from super_sac.collector import Collector
from super_sac.config import TrainConfig
from super_sac.learner import Learner
from super_sac.loggers import NullLogger, make_logger, open_run_dir
from super_sac.replay import AdvantageIndex, Batch, ReplayBuffer
from super_sac.reporting import PHASES, SessionStart
from super_sac.utils import (
    atomic_write_json,
    flush_denormals,
    matmul_precision,
    nan_to_none,
)


class Trainer:
    """One training run: builds the collector and the learner, and runs the phases.

    Build it with :func:`~super_sac.main.super_sac` (which validates the settings first). The
    collector seeds every episode from the run's seed, so a resumed run rebuilds each env's
    state exactly.
    """

    def __init__(
        self,
        agent: Agent,
        buffer: ReplayBuffer,
        train_env: Any,
        test_env: gym.Env,
        cfg: TrainConfig,
    ) -> None:
        self.cfg, self.agent, self.buffer, self.test_env = cfg, agent, buffer, test_env
        if cfg.verbosity == 0:
            buffer.verbose = False  # a quiet run prints nothing, allocation included
        self.device = agent.device
        if self.device.type == "cpu":
            flush_denormals()
        self.base_seed = cfg.seed if cfg.seed is not None else int(np.random.randint(2**31 - 1))
        self.np_rng = np.random.default_rng(self.base_seed)
        self.learner = Learner(agent, cfg, self.base_seed)
        self.collector = Collector.from_config(
            train_env,
            agent,
            buffer,
            cfg,
            rng=self.np_rng,
            seed=self.base_seed,
            on_push=self._on_push,
        )
        self.buffer.allocate(self.env.single_observation_space, self.env.single_action_space)
        if cfg.seed is not None:
            self.buffer.seed(cfg.seed)
        self.per_beta_init = self.buffer.beta  # the start of prioritized replay's beta schedule
        self.afbc_index: AdvantageIndex | None = None
        if cfg.afbc_per:  # the AFBC trick's second sampling index over the same storage
            self.afbc_index = AdvantageIndex(self.buffer.size, seed=self.base_seed + 1)
            self.afbc_index.add(np.arange(len(self.buffer)))
        # the schedule (``step`` counts the steps of the current phase) and the history; all of
        # it goes into checkpoints
        self.phase, self.step = PHASES[0], 0
        self.evaluations = 0
        self.wall_seconds = 0.0
        self.best_return = -math.inf
        self.last_eval: dict[str, float] = {}
        self.eval_history: list[dict[str, float]] = []
        self.last_logs: dict[str, torch.Tensor] = {}
        self.recent_returns: list[float] = []
        self.last_checkpoint: Path | None = None
        self.session = SessionStart()
        self.run_dir: Path | None = None
        self._run_lock: IO[str] | None = None  # held while the run writes run_dir
        self.logger: NullLogger = NullLogger()

    def _on_push(self, slots: np.ndarray) -> None:
        if self.afbc_index is not None:
            self.afbc_index.add(slots)

    # ------------------------------------------------------------------ views of the parts
    env = property(lambda self: self.collector.env, doc="The (vector) training env.")
    num_envs = property(lambda self: self.collector.num_envs, doc="Parallel training envs.")
    noise = property(lambda self: self.collector.noise, doc="The exploration noise schedule.")
    env_steps = property(lambda self: self.collector.env_steps, doc="Env transitions so far.")
    episodes = property(lambda self: self.collector.episodes, doc="Training episodes ended.")
    obs = property(lambda self: self.collector.obs, doc="The envs' current observations.")
    target_agent = property(lambda self: self.learner.target_agent, doc="The target networks.")
    log_alpha = property(lambda self: self.learner.log_alpha, doc="Log entropy coefficient(s).")
    alpha = property(lambda self: self.learner.alpha, doc="Entropy coefficient(s), detached.")
    critic_updates = property(lambda self: self.learner.critic_updates, doc="Critic updates.")
    actor_updates = property(lambda self: self.learner.actor_updates, doc="Actor updates.")

    def collect(self, num_transitions: int) -> None:
        """Collect ``num_transitions`` transitions; ended episodes' returns wait for the log."""
        self.recent_returns += self.collector.collect(num_transitions)

    def reset_envs(self) -> None:
        """Start the first episode of every training env."""
        self.collector.reset_envs()

    # ------------------------------------------------------------------ run directory
    def open_run(self) -> None:
        """Create (or, when resuming, reopen) the run directory; write the operative config."""
        copies = self.cfg.keep_checkpoints + 1 if self.cfg.save_to_disk else 0
        self._release_run_dir()  # opened before by this trainer: its own lock is no obstacle
        self.run_dir, self._run_lock = open_run_dir(
            self.cfg, reporting.hparams(self), reporting.checkpoint_bytes(self) * copies
        )

    def start_logger(self) -> None:
        """Open the logger; a resumed tensorboard log drops the events logged after the
        checkpoint (those of later steps: the checkpoint's own step was logged before it)."""
        cfg = self.cfg
        if cfg.log_to_disk and self.run_dir is not None:
            self.logger = make_logger(
                cfg.logging_method,
                self.run_dir,
                name=cfg.name,
                config=reporting.hparams(self),
                wandb_entity=cfg.wandb_entity,
                wandb_project=cfg.wandb_project,
                purge_step=self.log_step + 1 if cfg.resume else None,
            )

    # ------------------------------------------------------------------ updates
    def _sample(self) -> Batch:
        """A batch from the buffer, augmented when an augmenter is set."""
        return self.learner.augment(self.buffer.sample(self.cfg.batch_size, device=self.device))

    def update(self, phase: str = "online") -> None:
        """One step's updates: ``critic_updates_per_step`` critic updates (with prioritized
        replay, the batches' new priorities; with ``afbc_per`` in a phase that runs AFBC, the
        batches' new advantage priorities), ``markov_abstraction_updates_per_step`` Markov
        state abstraction updates of the encoder, then every ``actor_delay``-th update step
        (:meth:`_actor_due`) the actor:
        ``pg_actor_updates_per_step`` policy-gradient updates (online, ``use_pg_update_online``;
        each followed by alpha's) and/or ``afbc_actor_updates_per_step`` AFBC updates (offline,
        or online with ``use_afbc_update_online``). An online step without policy-gradient
        updates still tunes alpha once (``alpha_lr > 0``) on the last critic batch."""
        cfg, learner = self.cfg, self.learner
        use_pg = cfg.use_pg_update_online and phase == "online"
        use_afbc = phase == "offline" or cfg.use_afbc_update_online
        logs: dict[str, torch.Tensor] = {}
        alpha = learner.alpha
        target_noise_std = self.noise.std if cfg.target_noise_std is None else cfg.target_noise_std
        actor_noise_std = self.noise.std if cfg.actor_update_noise else 0.0
        self._anneal_per_beta()
        batch = None
        for _ in range(cfg.critic_updates_per_step):
            batch = self._sample()
            logs.update(learner.critic_step(batch, alpha, target_noise_std))
            self.learner.track_finite(logs["critic/loss"])
            if self.buffer.prioritized:
                self.buffer.update_priorities(batch.idxs, logs["critic/abs_td_error"])
            if use_afbc and self.afbc_index is not None:
                self.afbc_index.update(
                    batch.idxs, adv_estimator.advantage_priorities(learner.advantage(batch))
                )
        batch = self.markov_updates(logs, batch)
        actor_due = self._actor_due()
        if use_pg and actor_due:
            for i in range(cfg.pg_actor_updates_per_step):
                if not (cfg.reuse_replay_dicts and i == 0 and batch is not None):
                    batch = self._sample()
                logs.update(learner.pg_actor_step(batch, alpha, actor_noise_std))
                self.learner.track_finite(logs["actor/loss"])
                if learner.alpha_optimizer is not None:
                    self.learner.track_finite(logs["alpha/loss"])
                    alpha = learner.alpha
        if use_afbc and actor_due:
            self.afbc_updates(logs, batch)
        if phase == "online" and not use_pg and learner.alpha_optimizer is not None:
            if not (cfg.reuse_replay_dicts and batch is not None):
                batch = self._sample()
            logs.update(learner.alpha_step(batch))
            self.learner.track_finite(logs["alpha/loss"])
        self.learner.fold_finite()
        self.last_logs = logs

    def _actor_due(self) -> bool:
        """Whether this step's actor updates run: every ``actor_delay``-th step of updates,
        counted as the critic updates so far (across phases) divided by
        ``critic_updates_per_step``, so that a warm-up of any length or several transitions a
        step do not shift it. With one critic update a step it counts as ``target_delay`` does
        (critic updates), and TD3's actor and targets move on the same step (Fujimoto et al.
        2018: the policy and every target network every d-th critic update). The phases that
        update (offline, online) run at least one critic update a step (validation)."""
        cfg = self.cfg
        update_steps = self.learner.critic_updates // cfg.critic_updates_per_step
        return update_steps % cfg.actor_delay == 0

    def markov_updates(self, logs: dict[str, torch.Tensor], batch: Batch | None) -> Batch | None:
        """``markov_abstraction_updates_per_step`` Markov state abstraction updates (Allen et
        al. 2021) of the encoder and its heads, after the critics' (as the original super_sac
        ran them), in the offline and the online phase. The first may reuse the critics' last
        ``batch`` (``reuse_replay_dicts``); the others sample (and augment) their own.

        :return: the last batch used (the actor's update may reuse it).
        """
        cfg = self.cfg
        for i in range(cfg.markov_abstraction_updates_per_step):
            if not (cfg.reuse_replay_dicts and i == 0 and batch is not None):
                batch = self._sample()
            logs.update(self.learner.markov_step(batch))
            self.learner.track_finite(logs["markov/loss"])
        return batch

    def _anneal_per_beta(self) -> None:
        """Prioritized replay's beta: from the buffer's own value at the start of the phase to
        ``per_beta_final`` at its end (Schaul et al. 2016 anneal it to 1)."""
        if self.buffer.prioritized and self.cfg.per_beta_final is not None:
            self.buffer.beta = lu.linear_schedule(
                self.per_beta_init,
                self.cfg.per_beta_final,
                self.phase_length(self.phase),
                self.step,
            )

    def afbc_updates(self, logs: dict[str, torch.Tensor], batch: Batch | None = None) -> None:
        """``afbc_actor_updates_per_step`` advantage-filtered BC actor updates.

        With ``afbc_per`` each batch is drawn from the advantage index by priority
        ``(max(A, 0) + 1e-4)^0.6``, without importance weights (Grigsby & Qi 2021: the batch is
        spent on the transitions the filter keeps), and the advantages computed in the update
        become the slots' new priorities; otherwise the first update may reuse the critics'
        last ``batch`` (``reuse_replay_dicts``).
        """
        cfg = self.cfg
        for i in range(cfg.afbc_actor_updates_per_step):
            if self.afbc_index is not None:
                batch, _ = self.afbc_index.sample(self.buffer, cfg.batch_size, self.device)
                batch = self.learner.augment(batch)
            elif not (cfg.reuse_replay_dicts and i == 0 and batch is not None):
                batch = self._sample()
            out = self.learner.afbc_step(batch)
            advantages = out.pop("actor/advantages")
            if self.afbc_index is not None:
                self.afbc_index.update(batch.idxs, adv_estimator.advantage_priorities(advantages))
            logs.update(out)
            self.learner.track_finite(logs["actor/afbc_loss"])

    def bc_update(self) -> None:
        """One behavioral cloning step: maximise the log-likelihood of the buffer's actions
        (an unfiltered AFBC update that also trains the encoder)."""
        logs = self.learner.bc_step(self._sample())
        self.learner.track_finite(logs["actor/afbc_loss"])
        self.learner.fold_finite()
        self.last_logs = logs

    # ------------------------------------------------------------------ fault checks
    def check_finite(self, params: bool = False) -> None:
        """Stop with :class:`NonFiniteError` if a loss (or, with ``params``, a weight) became
        NaN/inf (:func:`super_sac.reporting.check_finite`)."""
        reporting.check_finite(self, params)

    # ------------------------------------------------------------------ evaluate / log / save
    def evaluate(self) -> dict[str, float]:
        """Run the evaluation episodes (:func:`super_sac.reporting.evaluate`)."""
        return reporting.evaluate(self)

    def log(self, elapsed: float) -> None:
        """Log the latest update metrics and the schedule (:func:`super_sac.reporting.log`)."""
        reporting.log(self, elapsed)

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
    def state_dict(self) -> dict[str, Any]:
        """The whole training state except the replay data (:func:`checkpoint.capture_loop`)."""
        return checkpoint.capture_loop(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output (the buffer is restored separately)."""
        checkpoint.restore_loop(self, state)

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
        self.load_state_dict(state)
        self.last_checkpoint = folder
        if not self.collector.replay_episodes():
            warnings.warn(
                "this train_env cannot be replayed (it is not a vector env in DISABLED "
                "autoreset mode; an SB3 VecEnv resets its envs itself): the resumed run starts "
                "fresh episodes, so it is not bit-identical to an uninterrupted run (the n-step "
                "windows in progress at the checkpoint were stored as truncated ones, "
                "bootstrapping from the checkpoint's observations).",
                stacklevel=2,
            )

    # ------------------------------------------------------------------ summary
    def summary(self) -> dict[str, Any]:
        """Counters, evaluation results, speed and where things were written."""
        return reporting.summary(self)

    # ------------------------------------------------------------------ phases
    def phase_length(self, phase: str) -> int:
        """Number of steps of ``phase`` ("bc", "offline" or "online")."""
        cfg = self.cfg
        lengths = {"bc": cfg.bc_warmup_steps, "offline": cfg.num_steps_offline}
        return lengths.get(phase, cfg.num_steps_online)

    def _run_phase(self, step_fn: Any) -> None:
        """Run the current phase from ``self.step`` to its end: ``step_fn`` once per step, then
        the periodic evaluation (and one at the phase's last step), logging, saving and
        checkpointing."""
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
            # the phase's last step is always evaluated, before its checkpoint, so a resume
            # from that checkpoint does not evaluate (and log) the same step again
            due = self.step % cfg.eval_interval == 0 or self.step == total
            if due and self.evaluate():
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

    def run_bc(self) -> None:
        """The behavioral cloning phase: ``bc_warmup_steps`` BC updates on the buffer's data."""
        self._run_phase(lambda: self.bc_update() or True)

    def run_offline(self) -> None:
        """The offline phase: critic and AFBC actor updates on the buffer's data, no env steps."""
        self._run_phase(lambda: self.update(phase="offline") or True)

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
            self.learner.reset_targets()
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
        try:
            with matmul_precision(self.cfg.matmul_precision):
                return self._run()
        except KeyboardInterrupt:
            self._say_how_to_resume()
            raise
        finally:
            self._release_run_dir()

    def _release_run_dir(self) -> None:
        """Release the run directory's lock (a resume or another run may then write it)."""
        if self._run_lock is not None:
            self._run_lock.close()
            self._run_lock = None

    def _say_how_to_resume(self) -> None:
        """After Ctrl-C or SIGTERM: where the newest checkpoint is and how to continue."""
        if self.run_dir is None:
            return
        where = (
            f"its newest checkpoint is {self.last_checkpoint}"
            if self.last_checkpoint is not None
            else "it has no checkpoint yet (nothing to resume)"
        )
        print(
            f"\ninterrupted at {self.phase} step {self.step} of {self.run_dir}; {where}. "
            f"Continue it with --resume {self.run_dir} (from Python: resume="
            f"{str(self.run_dir)!r}); the steps since that checkpoint run again",
            file=sys.stderr,
            flush=True,
        )

    def _run(self) -> dict[str, Any]:
        self.open_run()
        if self.cfg.resume:
            self.restore()
        else:
            self.reset_envs()
        self.start_logger()
        reporting.write_eval_log(self)
        if self.cfg.verbosity > 0:
            reporting.print_settings(self)
        self.session = SessionStart(self.env_steps, self.critic_updates)
        try:
            self.run_phases()
            self.check_finite(params=True)
            self.save()
            if self.last_checkpoint is None or self.step % self.cfg.checkpoint_interval:
                self.write_checkpoint()
        finally:
            self.logger.close()
        self.wall_seconds = reporting.wall_clock(self)
        summary = self.summary()
        if self.run_dir is not None:  # no evaluation: null returns (NaN in the dict)
            atomic_write_json(self.run_dir / "summary.json", nan_to_none(summary))
        if self.cfg.verbosity > 0:
            result = (
                f"final evaluation return {summary['final_eval_return']:.2f} "
                f"(best {summary['best_eval_return']:.2f})"
                if self.eval_history
                else "no evaluations"
            )
            print(
                f"{result} after {summary['env_steps']} env "
                f"steps, {summary['env_steps_per_s']:.0f} env steps/s"
                + (f"; logs and weights in {self.run_dir}" if self.run_dir else ""),
                flush=True,
            )
        return summary
