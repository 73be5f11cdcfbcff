"""Crash-safe checkpoints of the whole training state.

A checkpoint is a folder ``<run_dir>/checkpoints/ckpt_<log step>/`` holding (the log step is
the env step online; a run with BC or offline phases counts their steps before it, see
:attr:`super_sac.main.Trainer.log_step`)

* ``state.pt``: everything but the replay data (networks, target networks, optimizers,
  log-alpha, counters, schedules, the n-step queue, the current episodes, RNG states), written
  with :func:`torch.save` and read back with ``weights_only=True``, so a checkpoint from an
  untrusted source cannot run code;
* ``buffer.npz``: the replay buffer (:meth:`super_sac.replay.ReplayBuffer.save`, no pickles);
* ``MANIFEST.json``: the SHA-256 and size of both files, the log step and the env steps.

The folder is assembled under a temporary name, every file is fsynced, and only then is it renamed
into place (an atomic step on POSIX file systems), so a crash leaves either the previous
checkpoints or a complete new one, never a half-written one. On load the manifest is checked and a
corrupted or truncated checkpoint is skipped, with a warning, in favour of the previous one.

A checkpoint's buffer is also the run's whole replay: :func:`checkpoint_episodes` reads it back
as the episodes the agent collected (a "medium-replay" dataset).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from super_sac import reporting
from super_sac.agent import _CHECKPOINT_STATE_FILE, completed_signature
from super_sac.datasets import DatasetError, Episode
from super_sac.replay import ReplayBuffer
from super_sac.replay.episodes import read_replay
from super_sac.utils import sha256_file

if TYPE_CHECKING:
    from gymnasium import spaces

    from super_sac.main import Trainer

CHECKPOINT_DIRNAME = "checkpoints"
FORMAT_VERSION = 1
_NAME = re.compile(r"^ckpt_(\d+)$")
_STATE_FILE = _CHECKPOINT_STATE_FILE  # Agent.load reads a checkpoint's agent from it
_BUFFER_FILE = "buffer.npz"
_MANIFEST = "MANIFEST.json"


class CheckpointError(RuntimeError):
    """No usable checkpoint, or one that does not fit the current configuration."""


# ------------------------------------------------------------------------------ RNG states
def _generator_state(rng: np.random.Generator) -> dict[str, Any]:
    # PCG64 holds 128-bit integers: store them as strings so any loader can read them.
    return json.loads(json.dumps(rng.bit_generator.state, default=str), parse_int=str)


def _set_generator_state(rng: np.random.Generator, state: dict[str, Any]) -> None:
    def to_ints(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: to_ints(v) for k, v in x.items()}
        if isinstance(x, str) and x.lstrip("-").isdigit():
            return int(x)
        return x

    rng.bit_generator.state = to_ints(state)


def capture_rng_states(**generators: np.random.Generator) -> dict[str, Any]:
    """The states of Python's, numpy's and torch's global RNGs plus the named generators."""
    np_state = np.random.get_state()
    out: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "key": torch.from_numpy(np_state[1].astype(np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached": float(np_state[4]),
        },
        "torch": torch.get_rng_state(),
        "generators": {name: _generator_state(g) for name, g in generators.items()},
    }
    if torch.cuda.is_available():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def restore_rng_states(states: dict[str, Any], **generators: np.random.Generator) -> None:
    """Inverse of :func:`capture_rng_states`."""
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    npd = states["numpy"]
    np.random.set_state(
        (
            "MT19937",
            npd["key"].numpy().astype(np.uint32),
            npd["pos"],
            npd["has_gauss"],
            npd["cached"],
        )
    )
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
    for name, g in generators.items():
        _set_generator_state(g, states["generators"][name])


# ------------------------------------------------------------------------------ files
def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checkpoint_root(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / CHECKPOINT_DIRNAME


def list_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoint folders of a run, newest first (temporary folders are ignored)."""
    root = checkpoint_root(run_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found, reverse=True)]


def remove_incomplete(run_dir: str | os.PathLike) -> list[Path]:
    """Delete the temporary folders of checkpoint writes that were interrupted by a crash."""
    root = checkpoint_root(run_dir)
    stale = sorted(root.glob(".tmp_ckpt_*")) if root.is_dir() else []
    for folder in stale:
        shutil.rmtree(folder, ignore_errors=True)
    return stale


def write_checkpoint(
    run_dir: str | os.PathLike,
    log_step: int,
    state: dict[str, Any],
    buffer: ReplayBuffer,
    keep: int = 2,
) -> Path:
    """Write a checkpoint atomically and keep only the newest ``keep`` of them.

    :param run_dir: the run directory.
    :param log_step: names the checkpoint (``ckpt_<log_step>``): the trainer's log step, the
        env step in an online-only run.
    :param state: the trainer state (tensors, numbers, strings, lists, dicts only).
    :param buffer: the replay buffer, saved beside the state.
    :param keep: how many checkpoints to keep (older ones are deleted after the new one is in
        place).
    :return: the checkpoint folder.
    """
    root = checkpoint_root(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"ckpt_{log_step}"
    tmp = root / f".tmp_ckpt_{log_step}_{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        torch.save(state, tmp / _STATE_FILE)
        buffer.save(tmp / _BUFFER_FILE)
        env_steps = state.get("counters", {}).get("env_steps")
        manifest = {
            "format": FORMAT_VERSION,
            "log_step": log_step,
            "env_steps": None if env_steps is None else int(env_steps),
            "files": {},
        }
        for name in (_STATE_FILE, _BUFFER_FILE):
            _fsync_file(tmp / name)
            manifest["files"][name] = {
                "sha256": sha256_file(tmp / name),
                "bytes": (tmp / name).stat().st_size,
            }
        with open(tmp / _MANIFEST, "w") as f:
            json.dump(manifest, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        if final.exists():  # the same step written twice (e.g. after a resume): replace it
            shutil.rmtree(final)
        os.rename(tmp, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for old in list_checkpoints(run_dir)[max(keep, 1) :]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def verify_checkpoint(folder: Path) -> str | None:
    """``None`` if every file matches the manifest, else what is wrong."""
    manifest_path = folder / _MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as err:
        return f"unreadable manifest ({err})"
    if manifest.get("format") != FORMAT_VERSION:
        return f"unknown checkpoint format {manifest.get('format')!r}"
    for name, meta in manifest.get("files", {}).items():
        path = folder / name
        if not path.exists():
            return f"{name} is missing"
        if path.stat().st_size != meta["bytes"]:
            return f"{name} has {path.stat().st_size} bytes, the manifest says {meta['bytes']}"
        if sha256_file(path) != meta["sha256"]:
            return f"{name} does not match its checksum"
    return None


def load_checkpoint(folder: Path, buffer: ReplayBuffer, device: torch.device) -> dict[str, Any]:
    """Read a verified checkpoint: returns the state and fills ``buffer``."""
    state = torch.load(folder / _STATE_FILE, map_location=device, weights_only=True)
    buffer.load(folder / _BUFFER_FILE)
    return state


def load_latest(
    run_dir: str | os.PathLike, buffer: ReplayBuffer, device: torch.device
) -> tuple[Path, dict[str, Any]]:
    """Load the newest checkpoint that passes verification; warn about each one skipped.

    :raises CheckpointError: when the run has no usable checkpoint.
    """
    candidates = list_checkpoints(run_dir)
    if not candidates:
        raise CheckpointError(
            f"no checkpoint in {checkpoint_root(run_dir)}; nothing to resume (the run stopped "
            "before its first checkpoint, or checkpoint_interval was larger than the steps it "
            f"completed). Fix: delete {run_dir} and start the run again"
        )
    for folder in candidates:
        problem = verify_checkpoint(folder)
        if problem is None:
            try:
                return folder, load_checkpoint(folder, buffer, device)
            except Exception as err:  # any failure means: try the previous one
                problem = f"could not be read ({type(err).__name__}: {err})"
        warnings.warn(f"skipping corrupted checkpoint {folder}: {problem}", stacklevel=2)
    raise CheckpointError(
        f"every checkpoint in {checkpoint_root(run_dir)} is corrupted (see the warnings above). "
        f"Fix: restore a checkpoint folder from a backup, or delete {run_dir} and start again"
    )


def checkpoint_episodes(
    checkpoint: str | os.PathLike,
    action_space: spaces.Space,
    flat_key: str | None = "obs",
    observation_space: spaces.Space | None = None,
) -> list[Episode]:
    """The replay of a training run up to one of its checkpoints, as episodes (D4RL's
    "medium-replay" when the checkpoint is the medium policy's).

    Verifies the checkpoint against its manifest (:func:`verify_checkpoint`), reads its replay
    buffer with :func:`super_sac.replay.replay_episodes` and checks the episodes against the
    run's own counters: one transition per env step, and, before the last (possibly unfinished)
    episode, as many episodes as the run finished.

    :param checkpoint: a checkpoint folder, e.g. ``<run>/checkpoints/ckpt_50000``.
    :param action_space: the raw env's action space (see :func:`~super_sac.replay.replay_episodes`).
    :param flat_key: as in :func:`~super_sac.replay.replay_episodes`.
    :param observation_space: as in :func:`~super_sac.replay.replay_episodes`: the env's
        (wrapped) observation space, checked against the buffer's layout.
    :raises DatasetError: when the folder is not a complete checkpoint, a file does not match its
        checksum, the buffer does not fit the env, or the buffer and the counters disagree
        (several training envs, whose steps interleave, or n-step transitions).
    """
    folder = Path(checkpoint)
    if not (folder / _MANIFEST).is_file():
        newest = list_checkpoints(folder)
        where = (
            f"the newest of this run's is {newest[0]}"
            if newest
            else f"<run>/{CHECKPOINT_DIRNAME}/ckpt_<step>, which holds the run's replay buffer"
        )
        what = (
            f"no {_MANIFEST}, so it is not a checkpoint folder"
            if folder.exists()
            else "no such folder"
        )
        raise DatasetError(f"{folder}: {what}. Fix: pass a checkpoint folder ({where})")
    problem = verify_checkpoint(folder)
    if problem is not None:
        raise DatasetError(
            f"{folder}: {problem}. Fix: read an intact checkpoint of the run (the one before, "
            "or the run's checkpoints written again by resuming it)"
        )
    episodes, envs = read_replay(folder / _BUFFER_FILE, action_space, flat_key, observation_space)
    counters = torch.load(folder / _STATE_FILE, map_location="cpu", weights_only=True)["counters"]
    transitions = sum(len(ep.rewards) for ep in episodes)
    finished, env_steps = int(counters["episodes"]), int(counters["env_steps"])
    # every env step is a transition (the loop's vector envs reset with DISABLED or SAME_STEP
    # autoreset, no step is spent on a reset alone); each env may end on an unfinished episode
    if transitions != env_steps or not len(episodes) - envs <= finished <= len(episodes):
        raise DatasetError(
            f"{folder}: the replay buffer gives {transitions} transitions in {len(episodes)} "
            f"episodes of {envs} env(s), but the run took {env_steps} env steps and finished "
            f"{finished} episodes. Fix: read the replay of a run trained with "
            "super_sac.n_step = 1 (one-step transitions)"
        )
    return episodes


def describe_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Lines ``key: saved X, now Y`` for every key whose value differs."""
    keys = sorted(set(saved) | set(current))
    return [
        f"{k}: saved {saved.get(k)!r}, now {current.get(k)!r}"
        for k in keys
        if saved.get(k) != current.get(k)
    ]


# ------------------------------------------------------------------------------ the loop's state
def loop_signature(trainer: Trainer) -> dict[str, Any]:
    """What a checkpoint must share with a run to be resumed by it."""
    env, cfg = trainer.env, trainer.cfg
    sig = dict(trainer.agent.signature())
    sig.update(
        {
            "buffer_size": trainer.buffer.size,
            "buffer_prioritized": trainer.buffer.prioritized,
            "observation_keys": sorted(env.single_observation_space.spaces),
            "observation_shapes": {
                k: list(v.shape) for k, v in env.single_observation_space.spaces.items()
            },
            "action_shape": list(env.single_action_space.shape),
            "num_envs": trainer.num_envs,
            "n_step": cfg.n_step,
            "afbc_per": cfg.afbc_per,
        }
    )
    return sig


def capture_loop(trainer: Trainer) -> dict[str, Any]:
    """The whole state of a training loop except the replay data: networks, target networks,
    optimizers, log-alpha, exploration schedule, n-step windows, counters, evaluation history,
    the running episodes (observations, returns, actions for replay) and every generator."""
    learner, collector = trainer.learner.state_dict(), trainer.collector.state_dict()
    index = trainer.afbc_index
    return {
        "format": FORMAT_VERSION,
        "signature": loop_signature(trainer),
        **{k: learner[k] for k in ("agent", "target_agent", "log_alpha")},
        **{k: v for k, v in learner.items() if k.endswith("_optimizer")},
        "afbc_index": index.state_dict() if index is not None else None,
        "noise": collector.pop("noise"),
        "nstep": collector.pop("nstep"),
        "counters": {
            "phase": trainer.phase,
            "step": trainer.step,
            "env_steps": collector.pop("env_steps"),
            "critic_updates": learner["critic_updates"],
            "actor_updates": learner["actor_updates"],
            "episodes": collector.pop("episodes"),
            "evaluations": trainer.evaluations,
            # the time trained up to now (earlier sessions plus this one), not at this start
            "wall_seconds": reporting.wall_clock(trainer),
            "best_return": trainer.best_return,
            "base_seed": trainer.base_seed,
        },
        "eval_history": trainer.eval_history,
        "episodes_in_progress": {**collector, "recent_returns": list(trainer.recent_returns)},
        "rng": capture_rng_states(**_generators(trainer)),
    }


def restore_loop(trainer: Trainer, state: dict[str, Any]) -> None:
    """Restore :func:`capture_loop`'s output into ``trainer`` (the replay data is restored by
    :func:`load_checkpoint`; the envs by :meth:`Collector.replay_episodes`)."""
    saved = completed_signature(state["signature"], state["agent"])
    diffs = describe_differences(saved, loop_signature(trainer))
    if diffs:
        raise CheckpointError(
            "the checkpoint was written by a run configured differently:\n  "
            + "\n  ".join(diffs)
            + "\nResume with the same settings (train_gym.py --resume reads the run's "
            "config.gin)."
        )
    c = state["counters"]
    try:
        trainer.learner.load_state_dict(
            {**state, "critic_updates": c["critic_updates"], "actor_updates": c["actor_updates"]}
        )
    except ValueError as err:  # torch: optimizers with other parameter groups
        raise CheckpointError(
            f"the checkpoint's networks or optimizers do not fit this run's ({err}). Resume "
            "with the same settings (train_gym.py --resume reads the run's config.gin)."
        ) from err
    trainer.collector.load_state_dict(
        {
            **state["episodes_in_progress"],
            "env_steps": c["env_steps"],
            "episodes": c["episodes"],
            "noise": state["noise"],
            "nstep": state["nstep"],
        }
    )
    trainer.phase, trainer.step = c["phase"], c["step"]
    trainer.evaluations, trainer.wall_seconds = c["evaluations"], c["wall_seconds"]
    trainer.best_return, trainer.base_seed = c["best_return"], c["base_seed"]
    trainer.collector.seed = trainer.learner.base_seed = c["base_seed"]
    trainer.recent_returns = list(state["episodes_in_progress"]["recent_returns"])
    trainer.eval_history = list(state["eval_history"])
    trainer.last_eval = trainer.eval_history[-1] if trainer.eval_history else {}
    if trainer.afbc_index is not None:
        trainer.afbc_index.load_state_dict(state["afbc_index"])
    restore_rng_states(state["rng"], **_generators(trainer))


def _generators(trainer: Trainer) -> dict[str, np.random.Generator]:
    gens = {"trainer": trainer.np_rng, "buffer": trainer.buffer.rng}
    if trainer.afbc_index is not None:
        gens["afbc_index"] = trainer.afbc_index.rng
    return gens
