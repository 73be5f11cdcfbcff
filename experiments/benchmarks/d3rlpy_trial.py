"""A d3rlpy offline algorithm as a trial of the sweep runner, so that d3rlpy's BC, IQL, TD3+BC
and AWAC sit beside our offline runs in one report with the same seeds, evaluations and
statistics.

The script speaks the runner's trial protocol (``--config --env --seed --run_dir --steps
--gin_bindings --threads``, plus ``--dataset`` from the sweep's ``--script_args``) and writes
what an offline trial of ours writes: ``evaluations.csv`` (one ``offline`` row per evaluation,
``phase_step`` = gradient steps), ``hparams.json`` and, when done, ``summary.json``. The config
is a gin file of the ``d3rlpy`` configurable below (``experiments/benchmarks/peers/d3rlpy_*.gin``,
each with its reproduction script's settings)::

    python experiments/sweep.py run --root sweeps --name medium_d3rlpy --order seed \\
        --script experiments/benchmarks/d3rlpy_trial.py \\
        --configs experiments/benchmarks/peers/d3rlpy_{bc,iql,td3bc,awac}.gin \\
        --envs HalfCheetah-v5 --seeds 0-4 --steps 0 \\
        --script_args "--dataset offline_data/npz/halfcheetah-medium.npz"

Evaluation matches ours (``super_sac.reporting.evaluate``): every ``eval_interval`` gradient
steps (and after the last one) the mean return of ``eval_episodes`` deterministic episodes,
played by our own ``evaluate_agent`` on an env made like ours (``make_gym_env``) and reset first
with ``episode_seed(seed, EVAL_ENV_INDEX, k)`` for the k-th evaluation, so both libraries are
scored on the same start states.

After every evaluation the trial writes a checkpoint (``checkpoints/ckpt_<gradient steps>``:
d3rlpy's ``save_model`` file, which holds the networks, their targets and the optimizer and
learning-rate schedule states, and the evaluations so far; the two newest are kept), so the sweep
resumes an interrupted trial with ``--resume <folder>``: the run continues from its last
evaluation with the same weights, optimizer states and gradient-step counter (TD3+BC's actor
delay counts it); the data scalers (IQL's reward scale, TD3+BC's observation statistics) are
refitted from the same dataset, and the later minibatches differ from an uninterrupted run's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import gin
import numpy as np
from offline_d3rlpy import (  # the reproduction settings and d3rlpy helpers, beside this file
    critic_entropy_on_dataset,
    d3rlpy_config,
    fit_steps,
    neutralise_critic_temperature,
    to_mdp_dataset,
    with_vectorised_sampling,
)

from super_sac.checkpoint import checkpoint_root, list_checkpoints, remove_incomplete
from super_sac.collector import episode_seed
from super_sac.datasets import load_transitions
from super_sac.evaluation import evaluate_agent
from super_sac.loggers import record_resumed_machine
from super_sac.reporting import EVAL_CSV, EVAL_ENV_INDEX, append_eval_csv, eval_csv_text
from super_sac.sweep.grid import SUMMARY
from super_sac.utils import atomic_write_json, atomic_write_text, get_device, machine_info
from super_sac.wrappers import make_gym_env

ALGOS = ("bc", "iql", "td3bc", "awac")
CRITIC_TEMPERATURES = ("neutral", "stock")
OBSERVATION_SCALERS = ("reproduction", "standard")
# settings a trial's hparams.json may lack because it ran before they existed, as their values then
SETTINGS_ADDED_LATER = {"compile_graph": False}


@gin.configurable("d3rlpy")
def d3rlpy_settings(
    algo: str = "iql",
    gradient_steps: int = 100_000,
    batch_size: int | None = None,
    critic_temperature: str = "neutral",
    observation_scaler: str = "reproduction",
    eval_interval: int = 5000,
    eval_episodes: int = 10,
    compile_graph: bool = False,
    source: str = "",
) -> dict[str, Any]:
    """One d3rlpy peer's settings (bound in a gin file).

    :param algo: ``bc``, ``iql``, ``td3bc`` or ``awac``; the other hyperparameters are those of
        d3rlpy's reproduction scripts (``offline_d3rlpy.d3rlpy_config`` lists them).
    :param gradient_steps: gradient steps of the run (IQL's cosine schedule spans them).
    :param batch_size: one batch size instead of the reproduction's (``None``: its own; AWAC
        1024, the others 256).
    :param critic_temperature: AWAC only. ``"neutral"`` fills the dummy ``log_temp`` of d3rlpy
        2.x's AWAC critic with -30 after building, so its TD target is ``min Q'(s', a')`` as in
        the AWAC paper; ``"stock"`` leaves it at 0, a soft critic at temperature 1 (see
        ``offline_d3rlpy.py``'s docstring for why that matters).
    :param observation_scaler: ``"reproduction"`` keeps the reproduction script's (TD3+BC
        standardises observations, the others do not); ``"standard"`` standardises them with
        the dataset's mean and std for any algorithm (a probe, e.g. of IQL on medium-replay).
    :param eval_interval: gradient steps between evaluations.
    :param eval_episodes: deterministic episodes per evaluation.
    :param compile_graph: d3rlpy's own ``compile_graph`` option: on a CUDA device its critic and
        actor gradient computations are compiled with ``torch.compile`` and replayed as CUDA
        graphs (the same losses, replayed as one launch each); on a CPU d3rlpy ignores it. It
        changes no hyperparameter; floats differ from an eager run as between two devices. (The
        GPU runs of record used it; eager against compiled was not timed.)
    :param source: where the settings come from, kept in ``hparams.json``.
    """
    if algo not in ALGOS:
        raise ValueError(f"d3rlpy.algo = {algo!r}: expected one of {', '.join(ALGOS)}")
    if critic_temperature not in CRITIC_TEMPERATURES:
        raise ValueError(
            f"d3rlpy.critic_temperature = {critic_temperature!r}: expected 'neutral' or 'stock'"
        )
    if observation_scaler not in OBSERVATION_SCALERS:
        raise ValueError(
            f"d3rlpy.observation_scaler = {observation_scaler!r}: expected "
            + " or ".join(map(repr, OBSERVATION_SCALERS))
        )
    if gradient_steps < 1 or eval_interval < 1 or eval_episodes < 1:
        raise ValueError(
            "d3rlpy.gradient_steps, d3rlpy.eval_interval and d3rlpy.eval_episodes must be positive"
        )
    return {
        "algo": algo,
        "gradient_steps": int(gradient_steps),
        "batch_size": None if batch_size is None else int(batch_size),
        "critic_temperature": critic_temperature if algo == "awac" else None,
        "observation_scaler": observation_scaler,
        "eval_interval": int(eval_interval),
        "eval_episodes": int(eval_episodes),
        "compile_graph": bool(compile_graph),
        "source": source,
    }


def load_settings(config: str | Path, bindings: list[str] = ()) -> dict[str, Any]:
    """The settings of the peer file ``config`` (``include``s looked up beside it) with
    ``bindings`` applied."""
    gin.clear_config()
    gin.add_config_file_search_path(str(Path(config).resolve().parent))
    gin.parse_config_files_and_bindings([str(config)], list(bindings))
    return d3rlpy_settings()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", help="gin file binding the d3rlpy settings")
    p.add_argument("--env", help="gymnasium env id")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run_dir", help="the trial's folder")
    p.add_argument("--dataset", help=".npz file or Minari dataset id (see train_offline.py)")
    p.add_argument("--datasets_path", default=None, help="folder of local Minari datasets")
    p.add_argument("--steps", type=int, default=0, help="online env steps: must be 0")
    p.add_argument("--gin_bindings", action="append", default=[], help="repeatable")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--resume", default=None, help="continue the trial in this folder")
    p.add_argument(
        "--device",
        default="cpu:0",
        help="d3rlpy's device: 'cpu:0' (the tables of record) or 'cuda:0' (a GPU machine; "
        "pass it in the sweep's --script_args)",
    )
    p.add_argument(
        "--dry_run",
        action="store_true",
        help="check the gin file, the env, the dataset and the d3rlpy model by building it on "
        "the dataset, then exit without training or writing anything (the sweep runner checks "
        "every config and env so)",
    )
    return p.parse_args(argv)


def check_device(device: str) -> str:
    """``device`` as d3rlpy takes it, parsed and checked by :func:`super_sac.utils.get_device`
    (CUDA without a GPU is refused); a bad one exits with the reason."""
    try:
        return str(get_device(device))
    except ValueError as err:
        raise SystemExit(f"error: --device {device}: {err}") from None


class GreedyPolicy:
    """A d3rlpy model seen as the agent :func:`super_sac.evaluation.evaluate_agent` plays:
    ``forward`` maps our dict observation to d3rlpy's deterministic action."""

    training = False

    def __init__(self, model) -> None:
        self.model = model

    def forward(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return self.model.predict(np.asarray(obs["obs"], dtype=np.float32)[None])[0]

    def eval(self) -> None:
        pass

    def train(self, mode: bool = True) -> None:
        pass


def build_model(settings: dict[str, Any], dataset, seed: int, device: str = "cpu:0"):
    """The d3rlpy model of ``settings``, built on ``dataset`` (seeded, on ``device``); AWAC's
    critic temperature neutralised unless ``critic_temperature == "stock"``."""
    import d3rlpy
    from d3rlpy.algos.utility import build_scalers_with_transition_picker

    d3rlpy.seed(seed)
    config = d3rlpy_config(
        f"d3rlpy_{settings['algo']}",
        settings["gradient_steps"],
        settings["batch_size"],
        standardize=settings["observation_scaler"] == "standard",
    )
    model = replace(config, compile_graph=settings["compile_graph"]).create(device=device)
    model.build_with_dataset(dataset)
    # fit the data scalers now (d3rlpy fits them on the first ``fit``), so a model restored
    # from a checkpoint acts on scaled observations before it trains again
    build_scalers_with_transition_picker(model, dataset)
    if settings["algo"] == "awac" and settings["critic_temperature"] == "neutral":
        neutralise_critic_temperature(model)
    return model


MODEL_FILE = "model.d3"
PROGRESS_FILE = "progress.json"


KEEP_CHECKPOINTS = 2


def save_checkpoint(run_dir: Path, model, done: int, history: list[dict[str, Any]]) -> Path:
    """Write ``checkpoints/ckpt_<done>`` atomically (a temporary folder, its files synced, then
    renamed) and delete all but the :data:`KEEP_CHECKPOINTS` newest."""
    root = checkpoint_root(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    tmp, final = root / f".tmp_ckpt_{done}", root / f"ckpt_{done}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    model.save_model(str(tmp / MODEL_FILE))
    atomic_write_json(tmp / PROGRESS_FILE, {"gradient_steps": done, "eval_history": history})
    for path in (tmp / MODEL_FILE, tmp):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for old in list_checkpoints(run_dir)[KEEP_CHECKPOINTS:]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(run_dir: Path, model) -> tuple[int, list[dict[str, Any]]]:
    """Load the newest readable checkpoint of ``run_dir`` into ``model`` (built, same
    settings) and set its gradient-step counter; a damaged newest one falls back to the one
    before.

    :return: the gradient steps done and the evaluations so far (0 and [] without one).
    :raises RuntimeError: when there are checkpoints and none can be read.
    """
    remove_incomplete(run_dir)
    errors = []
    for folder in list_checkpoints(run_dir):
        try:
            progress = json.loads((folder / PROGRESS_FILE).read_text())
            model.load_model(str(folder / MODEL_FILE))
        except Exception as err:  # noqa: BLE001 - torch.load fails in many ways on a damaged file
            errors.append(f"{folder.name}: {type(err).__name__}: {err}")
            continue
        done = int(progress["gradient_steps"])
        model.set_grad_step(done)
        return done, list(progress["eval_history"])
    if errors:
        raise RuntimeError(
            f"no readable checkpoint in {checkpoint_root(run_dir)} ({'; '.join(errors)}). "
            "Fix: delete the checkpoints folder to run the trial again from scratch"
        )
    return 0, []


def train(
    settings: dict[str, Any],
    env_id: str,
    seed: int,
    data,
    run_dir: Path,
    resume: bool = False,
    device: str = "cpu:0",
) -> dict:
    """``gradient_steps`` of d3rlpy's ``fit`` in chunks of ``eval_interval``, an evaluation and
    a checkpoint after each, and the trial's files; with ``resume``, continue from the newest
    checkpoint in ``run_dir`` (on ``device``, which may differ from the interrupted run's).
    :return: the summary."""
    import d3rlpy

    dataset = with_vectorised_sampling(to_mdp_dataset(data))
    model = build_model(settings, dataset, seed, device)
    done, history = load_checkpoint(run_dir, model) if resume else (0, [])
    if resume:
        d3rlpy.seed(seed + 7919 * done)  # fresh minibatch draws after the resume point
    test_env = make_gym_env(env_id)
    csv_path = run_dir / EVAL_CSV
    atomic_write_text(csv_path, eval_csv_text(history, header=True))
    start = time.perf_counter() - (history[-1]["wall_seconds"] if history else 0.0)
    while done < settings["gradient_steps"]:
        chunk = min(settings["eval_interval"], settings["gradient_steps"] - done)
        fit_steps(model, dataset, chunk)
        done += chunk
        test_env.reset(seed=episode_seed(seed, EVAL_ENV_INDEX, len(history)))
        result = evaluate_agent(GreedyPolicy(model), test_env, settings["eval_episodes"])
        result.update(
            env_steps=0, phase="offline", phase_step=done, wall_seconds=time.perf_counter() - start
        )
        history.append(result)
        append_eval_csv(csv_path, result)
        save_checkpoint(run_dir, model, done, history)
    test_env.close()
    summary: dict[str, Any] = {
        "env_steps": 0,
        "gradient_steps": done,
        "final_eval_return": history[-1]["return_mean"],
        "best_eval_return": max(h["return_mean"] for h in history),
        "wall_seconds": time.perf_counter() - start,
        "eval_history": history,
        "run_dir": str(run_dir),
    }
    if settings["algo"] == "awac":
        summary["critic"] = critic_entropy_on_dataset(model, data, seed)
    return summary


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.resume:  # the sweep passes the folder; the run's own settings come from it
        run_dir = Path(args.resume)
        saved = json.loads((run_dir / "hparams.json").read_text())
        for name in ("config", "env", "seed", "dataset"):
            setattr(args, name, saved[name])
    else:
        for name in ("config", "env", "run_dir", "dataset"):
            if getattr(args, name) is None:
                raise SystemExit(f"error: --{name} is required")
        run_dir = Path(args.run_dir)
    if args.steps:
        raise SystemExit(
            f"error: --steps {args.steps}: d3rlpy peers train offline only; run the sweep with "
            "--steps 0 and set the gradient steps with d3rlpy.gradient_steps"
        )
    import d3rlpy
    import torch

    torch.set_num_threads(args.threads)
    device = check_device(args.device)
    settings = load_settings(args.config, args.gin_bindings)
    if args.resume:
        saved = {**SETTINGS_ADDED_LATER, **saved}
        changed = {k: (saved.get(k), v) for k, v in settings.items() if saved.get(k) != v}
        if changed:
            raise SystemExit(
                f"error: {run_dir} ran with other settings: "
                + ", ".join(f"{k} was {a!r}, now {b!r}" for k, (a, b) in changed.items())
                + ". Fix: resume with the run's own gin bindings, or start a new trial"
            )
    env = make_gym_env(args.env)
    data, _ = load_transitions(args.dataset, env, args.datasets_path)
    env.close()
    if settings["algo"] == "iql" and np.ptp(data.episode_returns) == 0:
        raise SystemExit(
            f"error: {args.dataset}: every episode has the same return, so IQL's reward scale "
            "1000 / (max - min return) is infinite. Fix: a dataset with more episodes"
        )
    if args.dry_run:
        build_model(settings, with_vectorised_sampling(to_mdp_dataset(data)), args.seed, device)
        print("dry run: the options, gin file, env, dataset and d3rlpy model are valid; "
              "nothing was written")  # fmt: skip
        return {"dry_run": True}
    run_dir.mkdir(parents=True, exist_ok=True)
    if not args.resume:
        atomic_write_json(
            run_dir / "hparams.json",
            {
                **settings,
                "env": args.env,
                "seed": args.seed,
                "dataset": args.dataset,
                "config": args.config,
                "d3rlpy": d3rlpy.__version__,
                "torch": torch.__version__,
                "device": device,
                "machine": machine_info(device),
            },
        )
    else:  # where this session goes on (runs repeat to the digit on one processor model only)
        record_resumed_machine(run_dir / "hparams.json", machine_info(device))
    summary = train(
        settings, args.env, args.seed, data, run_dir, resume=bool(args.resume), device=device
    )
    atomic_write_json(run_dir / SUMMARY, summary)
    print(json.dumps({k: summary[k] for k in ("gradient_steps", "final_eval_return")}))
    return summary


if __name__ == "__main__":
    main()
