"""A stable-baselines3 peer as a trial of the sweep runner, so that SB3 runs sit beside ours
in one report with the same seeds, evaluations and statistics.

The script speaks the runner's trial protocol (``--config --env --seed --run_dir --steps
--gin_bindings --threads``) and writes what a trial of ours writes: ``evaluations.csv`` (same
columns, one row per evaluation), ``hparams.json`` and, when done, ``summary.json``. The config
is a gin file of the ``sb3`` configurable below (``experiments/benchmarks/peers/*.gin``)::

    python experiments/sweep.py run --root sweeps --name pendulum_sb3 \\
        --script experiments/benchmarks/sb3_trial.py \\
        --configs experiments/benchmarks/peers/sb3_{sac,td3}.gin \\
        --envs Pendulum-v1 --seeds 0-4 --steps 10000 --workers 2 \\
        --gin_bindings "sb3.eval_interval = 1000"
    python experiments/sweep.py report sweeps/pendulum_ours sweeps/pendulum_sb3 --out results/x

Evaluation matches ours: every ``eval_interval`` env steps (and after the last step), the mean
return of ``eval_episodes`` deterministic episodes, played by our own ``evaluate_agent`` on a
separate env reset first with the seed our loop uses (``episode_seed(seed, EVAL_ENV_INDEX, k)``
for the k-th evaluation), so both libraries are scored on the same start states.

SB3 models are not checkpointed: an interrupted SB3 trial starts again from scratch on the next
run of the sweep (these runs are minutes long).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import gin
import numpy as np

from super_sac.collector import episode_seed
from super_sac.evaluation import evaluate_agent
from super_sac.reporting import EVAL_CSV, EVAL_ENV_INDEX, append_eval_csv, eval_csv_text
from super_sac.sweep.grid import SUMMARY
from super_sac.utils import atomic_write_json, atomic_write_text

ALGOS = ("SAC", "TD3", "DQN", "DDPG")


@gin.configurable("sb3")
def sb3_settings(
    algo: str = "SAC",
    policy: str = "MlpPolicy",
    hyperparams: dict[str, Any] | None = None,
    net_arch: list[int] | dict[str, list[int]] | None = None,
    action_noise_std: float = 0.0,
    eval_interval: int = 5000,
    eval_episodes: int = 10,
    source: str = "",
) -> dict[str, Any]:
    """One SB3 peer's settings (bound in a gin file).

    :param algo: ``SAC``, ``TD3``, ``DDPG`` or ``DQN``.
    :param policy: the SB3 policy name.
    :param hyperparams: keyword arguments of the algorithm's constructor (learning rate, batch
        size, ...), as in rl-zoo's yml files.
    :param net_arch: ``policy_kwargs['net_arch']`` (``None``: SB3's default).
    :param action_noise_std: std of Gaussian exploration noise in SB3's normalised action space
        (``NormalActionNoise``; TD3/DDPG); 0 for none.
    :param eval_interval: env steps between evaluations.
    :param eval_episodes: deterministic episodes per evaluation.
    :param source: where the settings come from (e.g. rl-zoo's file), kept in ``hparams.json``.
    """
    if algo not in ALGOS:
        raise ValueError(f"sb3.algo = {algo!r}: expected one of {', '.join(ALGOS)}")
    if eval_interval < 1 or eval_episodes < 1:
        raise ValueError("sb3.eval_interval and sb3.eval_episodes must be positive")
    return {
        "algo": algo,
        "policy": policy,
        "hyperparams": dict(hyperparams or {}),
        "net_arch": net_arch,
        "action_noise_std": float(action_noise_std),
        "eval_interval": int(eval_interval),
        "eval_episodes": int(eval_episodes),
        "source": source,
    }


def load_settings(config: str | Path, bindings: list[str] = ()) -> dict[str, Any]:
    """The settings of the peer file ``config`` (its ``include``s are looked up beside it)
    with ``bindings`` applied."""
    gin.clear_config()
    gin.add_config_file_search_path(str(Path(config).resolve().parent))
    gin.parse_config_files_and_bindings([str(config)], list(bindings))
    return sb3_settings()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", help="gin file binding the sb3 settings")
    p.add_argument("--env", help="gymnasium env id")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run_dir", help="the trial's folder")
    p.add_argument("--steps", type=int, required=True, help="env steps of training")
    p.add_argument("--gin_bindings", action="append", default=[], help="repeatable")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--resume", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def build_model(settings: dict[str, Any], env, seed: int):
    """The SB3 model of ``settings`` on ``env`` (CPU, quiet, seeded)."""
    import stable_baselines3 as sb3
    from stable_baselines3.common.noise import NormalActionNoise

    kwargs = dict(settings["hyperparams"])
    if settings["net_arch"] is not None:
        kwargs.setdefault("policy_kwargs", {})["net_arch"] = settings["net_arch"]
    if settings["action_noise_std"] > 0:
        dim = env.action_space.shape[0]
        kwargs["action_noise"] = NormalActionNoise(
            np.zeros(dim), settings["action_noise_std"] * np.ones(dim)
        )
    cls = getattr(sb3, settings["algo"])
    return cls(settings["policy"], env, seed=seed, device="cpu", verbose=0, **kwargs)


class DeterministicPolicy:
    """An SB3 model seen as the agent :func:`super_sac.evaluation.evaluate_agent` plays: its
    ``forward`` is SB3's deterministic (greedy) action."""

    training = False

    def __init__(self, model) -> None:
        self.model = model

    def forward(self, obs):
        return self.model.predict(obs, deterministic=True)[0]

    def eval(self) -> None:
        pass

    def train(self, mode: bool = True) -> None:
        pass


def evaluate(model, env, episodes: int, reset_seed: int) -> dict[str, float]:
    """``episodes`` deterministic episodes from the start states our loop evaluates from: the
    env is reset once with ``reset_seed``, then played by our own ``evaluate_agent``, as
    ``super_sac.reporting.evaluate`` does."""
    env.reset(seed=reset_seed)
    return evaluate_agent(DeterministicPolicy(model), env, episodes)


def train(settings: dict[str, Any], env_id: str, seed: int, steps: int, run_dir: Path) -> dict:
    """One ``learn`` call of ``steps`` env steps (so SB3's schedules, e.g. DQN's epsilon, see
    the whole run), evaluating from a callback every ``eval_interval`` env steps and after the
    last one, and write the trial's files. :return: the summary."""
    import gymnasium as gym
    from stable_baselines3.common.callbacks import BaseCallback

    env, test_env = gym.make(env_id), gym.make(env_id)
    model = build_model(settings, env, seed)
    csv_path = run_dir / EVAL_CSV
    atomic_write_text(csv_path, eval_csv_text([], header=True))
    history: list[dict[str, Any]] = []
    start = time.perf_counter()

    def record() -> None:
        result = evaluate(
            model,
            test_env,
            settings["eval_episodes"],
            episode_seed(seed, EVAL_ENV_INDEX, len(history)),
        )
        result.update(
            env_steps=int(model.num_timesteps),
            phase="online",
            phase_step=int(model.num_timesteps),
            wall_seconds=time.perf_counter() - start,
        )
        history.append(result)
        append_eval_csv(csv_path, result)

    class Evaluations(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % settings["eval_interval"] == 0:
                record()
            # stop at exactly ``steps``: an algorithm that collects in chunks (DQN's train_freq
            # of 256 steps) would otherwise run on to the end of its last chunk
            return self.num_timesteps < steps

    model.learn(total_timesteps=steps, callback=Evaluations())
    if not history or history[-1]["env_steps"] != model.num_timesteps:
        record()
    wall = time.perf_counter() - start
    env.close()
    test_env.close()
    return {
        "env_steps": int(model.num_timesteps),
        "final_eval_return": history[-1]["return_mean"],
        "best_eval_return": max(h["return_mean"] for h in history),
        "env_steps_per_s": model.num_timesteps / max(wall, 1e-9),
        "wall_seconds": wall,
        "eval_history": history,
        "run_dir": str(run_dir),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.resume:
        raise SystemExit(
            f"error: SB3 trials keep no checkpoints, so {args.resume} cannot be resumed; "
            "delete its checkpoints folder to run it again from scratch"
        )
    for name in ("config", "env", "run_dir"):
        if getattr(args, name) is None:
            raise SystemExit(f"error: --{name} is required")
    import stable_baselines3
    import torch

    torch.set_num_threads(args.threads)
    settings = load_settings(args.config, args.gin_bindings)
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(
        run_dir / "hparams.json",
        {
            **settings,
            "env": args.env,
            "seed": args.seed,
            "steps": args.steps,
            "config": args.config,
            "stable_baselines3": stable_baselines3.__version__,
            "torch": torch.__version__,
        },
    )
    summary = train(settings, args.env, args.seed, args.steps, run_dir)
    atomic_write_json(run_dir / SUMMARY, summary)
    print(json.dumps({k: summary[k] for k in ("env_steps", "final_eval_return", "wall_seconds")}))
    return summary


if __name__ == "__main__":
    main()
