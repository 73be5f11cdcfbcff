"""What a run reports: evaluation episodes, logged metrics, the summary, the settings printed at
the start and the diagnostic snapshot written when training stops on a NaN."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from super_sac.collector import episode_seed
from super_sac.evaluation import evaluate_agent, save_best_metric
from super_sac.utils import atomic_write_json, atomic_write_text, machine_info
from super_sac.video import env_fps, write_video

if TYPE_CHECKING:
    import torch

    from super_sac.main import Trainer

PHASES = ("bc", "offline", "online")
EVAL_ENV_INDEX = 2**31 - 1  # the episode-seed stream of the evaluation env
EVAL_CSV = "evaluations.csv"
PER_CRITIC_LOGS = ("critic/member_mse",)  # logged as one scalar per critic
EVAL_CSV_COLUMNS = (
    "env_steps",
    "phase",
    "phase_step",
    "return_mean",
    "return_std",
    "return_min",
    "return_max",
    "length_mean",
    "wall_seconds",
)


class NonFiniteError(FloatingPointError):
    """A loss or parameter became NaN or infinite; training stops instead of going on silently."""


@dataclasses.dataclass
class SessionStart:
    """Counters when this process started (or resumed) the run, for its speed figures."""

    env_steps: int = 0
    critic_updates: int = 0
    time: float = dataclasses.field(default_factory=time.perf_counter)


def hparams(trainer: Trainer) -> dict[str, Any]:
    """The resolved settings of the loop and the agent, JSON-friendly, and the machine this
    session runs on (:func:`~super_sac.utils.machine_info`)."""
    cfg = trainer.cfg
    out = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name != "augmenter"}
    out["augmenter"] = None if cfg.augmenter is None else type(cfg.augmenter).__name__
    out.update(agent=trainer.agent.signature(), buffer_size=trainer.buffer.size)
    out["num_envs"] = trainer.num_envs
    out["machine"] = machine_info(trainer.device)
    return out


def checkpoint_bytes(trainer: Trainer) -> int:
    """About how many bytes one checkpoint takes (replay buffer included)."""
    params = sum(p.numel() * p.element_size() for p in trainer.agent.parameters())
    return int(trainer.buffer.memory_bytes + 4 * params)  # agent, target, two Adam moments


def check_finite(trainer: Trainer, params: bool = False) -> None:
    """Stop with :class:`NonFiniteError` if a loss (or, with ``params``, a weight) is NaN/inf.

    Losses are checked every step on the CPU and every ``log_interval`` steps on a GPU (to
    avoid a host sync per update); parameters at every log and before every checkpoint.
    A diagnostic snapshot (weights and the latest metrics) is written to the run directory.
    """
    bad_losses = not trainer.learner.losses_finite()
    bad_params = params and not trainer.learner.parameters_finite()
    if not (bad_losses or bad_params):
        return
    values = {k: float(v.float().mean()) for k, v in trainer.last_logs.items()}
    culprits = [k for k, v in values.items() if not math.isfinite(v)] or (
        ["agent parameters"] if bad_params else ["a loss since the last check"]
    )
    snapshot = write_diagnostics(trainer, values)
    raise NonFiniteError(
        f"non-finite {', '.join(culprits)} at {trainer.phase} step {trainer.step} "
        f"(env step {trainer.env_steps}). Training stopped. Last checkpoint: "
        f"{trainer.last_checkpoint or 'none'}; diagnostic snapshot: {snapshot or 'not saved'}. "
        "Lower the learning rates, clip gradients (actor_clip/critic_clip) or check the "
        "rewards and observations for NaN/inf, then resume from the checkpoint."
    )


def write_diagnostics(trainer: Trainer, values: dict[str, float]) -> Path | None:
    if trainer.run_dir is None:
        return None
    folder = trainer.run_dir / "diagnostics" / f"step_{trainer.step}"
    trainer.agent.save(folder)
    atomic_write_json(
        folder / "metrics.json",
        {
            "step": trainer.step,
            "env_steps": trainer.env_steps,
            "metrics": values,
            "alpha": trainer.alpha.tolist(),
        },
    )
    return folder


def evaluate(trainer: Trainer) -> dict[str, float]:
    """Run the evaluation episodes (seeded per evaluation) and remember the best return; with
    ``save_best``, save the agent to ``<run_dir>/best`` when its metric beats every earlier
    evaluation of the run (``best/metric.json`` says which metric, value and step)."""
    cfg = trainer.cfg
    if cfg.eval_episodes == 0:
        return {}
    trainer.test_env.reset(
        seed=episode_seed(trainer.base_seed, EVAL_ENV_INDEX, trainer.evaluations)
    )
    trainer.evaluations += 1
    record = records_video(cfg, trainer.evaluations) and trainer.run_dir is not None
    frames: list[np.ndarray] | None = [] if record else None
    result = evaluate_agent(
        trainer.agent,
        trainer.test_env,
        cfg.eval_episodes,
        cfg.max_episode_steps,
        cfg.render,
        frames=frames,
    )
    trainer.logger.log({f"eval/{k}": v for k, v in result.items()}, trainer.log_step)
    if frames:
        save_video(trainer, frames)
    result.update(
        env_steps=trainer.env_steps,
        phase=trainer.phase,
        phase_step=trainer.step,
        wall_seconds=wall_clock(trainer),
    )
    metric = save_best_metric(cfg.save_best)
    # the earlier evaluations are in the (checkpointed) history, so a resumed run compares too
    best_before = max((h[metric] for h in trainer.eval_history if metric in h), default=-math.inf)
    trainer.last_eval = result
    trainer.eval_history.append(result)
    append_eval_row(trainer, result)
    trainer.best_return = max(trainer.best_return, result["return_mean"])
    improved = metric is not None and result[metric] > best_before
    if improved and cfg.save_to_disk and trainer.run_dir is not None:
        folder = trainer.run_dir / "best"
        trainer.agent.save(folder)
        atomic_write_json(
            folder / "metric.json",
            {
                "metric": metric,
                "value": result[metric],
                "env_steps": trainer.env_steps,
                "phase": trainer.phase,
                "phase_step": trainer.step,
            },
        )
    return result


def wall_clock(trainer: Trainer) -> float:
    """Seconds the run has trained so far, over all its sessions (resumes included)."""
    return trainer.wall_seconds + time.perf_counter() - trainer.session.time


def eval_csv_text(rows: list[dict[str, Any]], header: bool) -> str:
    """``rows`` (evaluation results) as lines of ``evaluations.csv`` (:data:`EVAL_CSV_COLUMNS`;
    other keys are left out), after the header line when ``header``."""
    buf = io.StringIO()
    writer = csv.DictWriter(
        buf, fieldnames=EVAL_CSV_COLUMNS, extrasaction="ignore", lineterminator="\n"
    )
    if header:
        writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def write_eval_log(trainer: Trainer) -> Path | None:
    """(Re)write ``<run_dir>/evaluations.csv`` from ``trainer.eval_history``: the header alone
    for a new run; for a resumed run the checkpointed history, so rows that a crashed
    predecessor appended after its last checkpoint are dropped, not duplicated.
    :return: the file, or ``None`` without a run folder."""
    if trainer.run_dir is None:
        return None
    path = trainer.run_dir / EVAL_CSV
    atomic_write_text(path, eval_csv_text(trainer.eval_history, header=True))
    return path


def append_eval_csv(path: Path, result: dict[str, Any]) -> None:
    """Append one evaluation to the ``evaluations.csv`` at ``path`` (its header first when the
    file is new) in one ``write`` of a whole line, flushed, so the history can be read while the
    run goes on and survives a crash."""
    text = eval_csv_text([result], header=not path.exists())
    with open(path, "a") as f:
        f.write(text)
        f.flush()


def append_eval_row(trainer: Trainer, result: dict[str, Any]) -> None:
    """Append one evaluation to ``<run_dir>/evaluations.csv`` (:func:`append_eval_csv`)."""
    if trainer.run_dir is not None:
        append_eval_csv(trainer.run_dir / EVAL_CSV, result)


def records_video(cfg: Any, evaluations: int) -> bool:
    """Whether the evaluation numbered ``evaluations`` (1 for the first) records a video:
    every ``video_interval``-th one."""
    return cfg.video_interval > 0 and evaluations % cfg.video_interval == 0


def save_video(trainer: Trainer, frames: list[np.ndarray]) -> Path | None:
    """Write an evaluation's frames to ``<run_dir>/videos/eval_<log step>.mp4`` (``.gif`` without
    ffmpeg) and send them to the logger. :return: the file, or ``None`` without a run folder."""
    fps = env_fps(trainer.test_env)
    path = None
    if trainer.run_dir is not None:
        path = write_video(frames, trainer.run_dir / "videos" / f"eval_{trainer.log_step}", fps)
    trainer.logger.log_video("eval/video", frames, trainer.log_step, fps, path)
    return path


def log(trainer: Trainer, elapsed: float) -> None:
    """Send the latest update metrics and the schedule to the logger (one host sync).

    The update metrics are those of the last update before the log (a snapshot, not an average
    over the interval), and each is logged once: a log with no update since the previous one
    (the online warm-up after an offline phase) sends only the schedule. Per-critic vectors
    (``critic/member_mse``) are logged one scalar per critic. The exploration noise's std is
    logged when the loop adds it, the env steps per second in the online phase."""
    metrics = update_metrics(trainer.last_logs)
    trainer.last_logs = {}
    metrics.update({f"schedule/phase_{p}": float(p == trainer.phase) for p in PHASES})
    metrics.update(
        {
            "schedule/phase_step": float(trainer.step),
            "schedule/env_steps": float(trainer.env_steps),
            "schedule/critic_updates": float(trainer.critic_updates),
            "schedule/actor_updates": float(trainer.actor_updates),
            "schedule/alpha": float(trainer.alpha.mean()),
            "schedule/buffer_size": float(len(trainer.buffer)),
        }
    )
    if trainer.cfg.use_exploration_process:
        metrics["schedule/exploration_std"] = trainer.noise.std
    if trainer.phase == "online":
        speed = (trainer.env_steps - trainer.session.env_steps) / max(elapsed, 1e-9)
        metrics["perf/env_steps_per_s"] = speed
    returns = trainer.recent_returns
    if returns:
        metrics["train/episode_return"] = float(np.mean(returns))
        returns.clear()
    trainer.logger.log(metrics, trainer.log_step)


def update_metrics(logs: dict[str, torch.Tensor]) -> dict[str, float]:
    """Scalars of an update's logs: the mean of a batch of values (a SUNRISE member's or a
    sample's), and one ``<key>/<i>`` scalar per critic for per-critic vectors."""
    metrics = {}
    for key, value in logs.items():
        if key in PER_CRITIC_LOGS and value.dim() == 1:
            metrics.update({f"{key}/{i}": float(v) for i, v in enumerate(value.float().tolist())})
        else:
            metrics[key] = float(value.float().mean())
    return metrics


def _earlier_speeds(run_dir: Path | None) -> dict[str, float]:
    """The speed figures of the run's existing ``summary.json`` (none when unreadable)."""
    try:
        earlier = json.loads((Path(run_dir) / "summary.json").read_text())
        return {k: float(earlier[k]) for k in ("env_steps_per_s", "updates_per_s")}
    except (TypeError, OSError, ValueError, KeyError):
        return {}


def summary(trainer: Trainer) -> dict[str, Any]:
    """Counters, evaluation results, speed and where things were written. The speeds are this
    session's; a session that trained nothing (a finished run resumed with no more steps) keeps
    the figures of the run's earlier ``summary.json``."""
    session = max(time.perf_counter() - trainer.session.time, 1e-9)
    speeds = {
        "env_steps_per_s": (trainer.env_steps - trainer.session.env_steps) / session,
        "updates_per_s": (trainer.critic_updates - trainer.session.critic_updates) / session,
    }
    if not any(speeds.values()):
        speeds.update(_earlier_speeds(trainer.run_dir))
    return {
        "env_steps": trainer.env_steps,
        "online_steps": trainer.step,
        "critic_updates": trainer.critic_updates,
        "actor_updates": trainer.actor_updates,
        "episodes": trainer.episodes,
        "final_eval_return": trainer.last_eval.get("return_mean", float("nan")),
        "best_eval_return": trainer.best_return if trainer.eval_history else float("nan"),
        **speeds,
        "wall_seconds": trainer.wall_seconds,
        "eval_history": trainer.eval_history,
        "last_checkpoint": str(trainer.last_checkpoint) if trainer.last_checkpoint else None,
        "run_dir": str(trainer.run_dir) if trainer.run_dir is not None else None,
    }


def print_settings(trainer: Trainer) -> None:
    """Print the run's main settings (what ``verbosity > 0`` shows at the start)."""
    lines = describe_settings(trainer)
    where = trainer.run_dir or "none (nothing saved)"
    lines.append(f"  run directory: {where}; logs: {trainer.logger.where}")
    if trainer.cfg.resume:
        lines.append(
            f"  resumed from {trainer.last_checkpoint} at {trainer.phase} step {trainer.step}"
        )
    print("\n".join(lines), flush=True)


def describe_settings(trainer: Trainer) -> list[str]:
    """The run's main settings in a few lines: networks, phases, schedule, targets, rates."""
    cfg, agent = trainer.cfg, trainer.agent
    entropy = (
        f"alpha={cfg.init_alpha} (tuned, lr={cfg.alpha_lr}, target entropy="
        f"{trainer.learner.target_entropy:g})"
        if cfg.alpha_lr > 0
        else f"alpha={cfg.init_alpha}"
    )
    lines = [
        "super_sac settings",
        f"  actor {type(agent.actor).__name__}, {agent.num_critics} critics (target: min of "
        f"{cfg.target_critic_ensemble_n}), hidden {agent.hidden_size}, device {trainer.device}",
        f"  phases: {cfg.bc_warmup_steps} behavioral cloning, {cfg.num_steps_offline} offline "
        f"(AFBC filter {cfg.afbc_filter!r}, advantage {agent.adv_method!r}"
        f"{', prioritized' if cfg.afbc_per else ''}"
        f"{', trains the encoder' if cfg.afbc_update_encoder else ''}), then online actor updates: "
        f"{'PG ' if cfg.use_pg_update_online else ''}"
        f"{'AFBC' if cfg.use_afbc_update_online else ''}",
        f"  {cfg.num_steps_online} online steps x {cfg.transitions_per_online_step} "
        f"transitions, {trainer.num_envs} env(s), {cfg.random_warmup_steps} random warm-up",
        f"  updates/step: critic {cfg.critic_updates_per_step}, actor "
        f"{cfg.pg_actor_updates_per_step} every {cfg.actor_delay}, batch {cfg.batch_size}",
        f"  gamma {cfg.gamma}, n_step {cfg.n_step}, tau {cfg.mlp_tau}/{cfg.encoder_tau} "
        f"every {cfg.target_delay}, target actor {cfg.use_target_actor}",
        f"  lr actor {cfg.actor_lr} critic {cfg.critic_lr} encoder {cfg.encoder_lr}; " + entropy,
        f"  exploration noise {cfg.use_exploration_process} "
        f"({cfg.exploration_param_init}->{cfg.exploration_param_final})",
    ]
    if agent.ensemble_size > 1:
        lines.insert(
            2,
            f"  SUNRISE ensemble of {agent.ensemble_size} (ucb_bonus {agent.ucb_bonus}, "
            f"weighted backups T={cfg.weighted_bellman_temp} {cfg.weight_type}, bootstrap "
            f"p={cfg.bootstrap_mask_prob})",
        )
    if cfg.markov_abstraction_updates_per_step > 0:
        lines.append(
            f"  Markov abstraction: {cfg.markov_abstraction_updates_per_step} update(s)/step, "
            f"inverse {cfg.inverse_markov_coeff}, contrastive {cfg.contrastive_markov_coeff}, "
            f"smoothness {cfg.smoothness_markov_coeff} (max dist "
            f"{cfg.smoothness_markov_max_dist})"
        )
    return lines
