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

A MinAtar game name as ``--env`` (``breakout``, as our ``train_minatar.py`` sweeps name it) plays
the game through our ``MinAtarEnv`` with the same time limit as ours (10,000 steps), its
``(10, 10, C)`` 0/1 grids as they are: ``sb3.features_extractor = "minatar"`` gives SB3's policy
the MinAtar paper's network body (:class:`MinAtarFeatures`), and ``sb3.optimizer`` names a
``torch.optim`` class for the paper's centred RMSprop.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import gin
import numpy as np

from super_sac.cli.factories import MINATAR_GAMES  # before gin locks its registry (load_settings)
from super_sac.cli.parsers import minatar_parser
from super_sac.collector import episode_seed
from super_sac.evaluation import evaluate_agent
from super_sac.reporting import EVAL_CSV, EVAL_ENV_INDEX, append_eval_csv, eval_csv_text
from super_sac.sweep.grid import SUMMARY
from super_sac.utils import atomic_write_json, atomic_write_text, machine_info
from super_sac.wrappers import MinAtarEnv

ALGOS = ("SAC", "TD3", "DQN", "DDPG")
# train_minatar.py's episode limit (its --max_episode_steps default), read from its parser
MINATAR_TIME_LIMIT = minatar_parser().get_default("max_episode_steps")


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
    features_extractor: str | None = None,
    optimizer: str | None = None,
    optimizer_kwargs: dict[str, Any] | None = None,
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
    :param features_extractor: ``"minatar"`` for :class:`MinAtarFeatures`; ``None``: SB3's
        default for the policy.
    :param optimizer: a ``torch.optim`` class name (e.g. ``"RMSprop"``); ``None``: SB3's Adam.
    :param optimizer_kwargs: its keyword arguments other than the learning rate.
    """
    if algo not in ALGOS:
        raise ValueError(f"sb3.algo = {algo!r}: expected one of {', '.join(ALGOS)}")
    if features_extractor not in (None, *FEATURES_EXTRACTORS):
        raise ValueError(
            f"sb3.features_extractor = {features_extractor!r}: expected None or one of "
            f"{', '.join(map(repr, FEATURES_EXTRACTORS))}"
        )
    import torch

    if optimizer is not None and not isinstance(getattr(torch.optim, optimizer, None), type):
        raise ValueError(f"sb3.optimizer = {optimizer!r}: not a torch.optim class (e.g. 'RMSprop')")
    if optimizer_kwargs and optimizer is None:
        raise ValueError(
            "sb3.optimizer_kwargs without sb3.optimizer: name the optimizer they are for "
            "(SB3's default is 'Adam')"
        )
    if "lr" in (optimizer_kwargs or {}):
        raise ValueError(
            "sb3.optimizer_kwargs sets 'lr': give the learning rate as "
            "sb3.hyperparams['learning_rate'] (SB3 passes it to the optimizer itself)"
        )
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
        "features_extractor": features_extractor,
        "optimizer": optimizer,
        "optimizer_kwargs": dict(optimizer_kwargs or {}),
    }


def _minatar_features():
    """:class:`MinAtarFeatures`, built on first use (SB3 is imported only by a trial)."""
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    class MinAtarFeatures(BaseFeaturesExtractor):
        """The body of the MinAtar paper's DQN (Young & Tian 2019, arXiv:1903.03176): one 3x3
        convolution of 16 filters, stride 1, over the ``(10, 10, C)`` grid (read channels
        first), then a fully connected layer of 128 units, each with a ReLU; SB3's Q head (a
        linear layer with ``net_arch = []``) adds the output layer."""

        def __init__(self, observation_space, features_dim: int = 128) -> None:
            super().__init__(observation_space, features_dim)
            height, width, channels = observation_space.shape
            self.conv = torch.nn.Conv2d(channels, 16, kernel_size=3, stride=1)
            self.hidden = torch.nn.Linear(16 * (height - 2) * (width - 2), features_dim)

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            x = torch.relu(self.conv(obs.permute(0, 3, 1, 2)))
            return torch.relu(self.hidden(x.flatten(1)))

    return MinAtarFeatures


FEATURES_EXTRACTORS = {"minatar": _minatar_features}


def make_env(env_id: str):
    """``env_id`` as SB3 plays it: a MinAtar game name gives the game through our
    ``MinAtarEnv`` (grids ``(10, 10, C)``, sticky actions, the time limit of our MinAtar runs),
    anything else ``gymnasium.make(env_id)``."""
    import gymnasium as gym

    if env_id in MINATAR_GAMES:
        return gym.wrappers.TimeLimit(MinAtarEnv(env_id), MINATAR_TIME_LIMIT)
    return gym.make(env_id)


def load_settings(config: str | Path, bindings: list[str] = ()) -> dict[str, Any]:
    """The settings of the peer file ``config`` (its ``include``s are looked up beside it)
    with ``bindings`` applied."""
    gin.clear_config()
    gin.add_config_file_search_path(str(Path(config).resolve().parent))
    gin.parse_config_files_and_bindings([str(config)], list(bindings))
    return sb3_settings()


DRY_RUN_HELP = (
    "check the gin file, the env and the SB3 model's settings by building the model, then exit "
    "without training or writing anything (the sweep runner checks every config and env so)"
)


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
    p.add_argument("--dry_run", action="store_true", help=DRY_RUN_HELP)
    return p.parse_args(argv)


def build_model(settings: dict[str, Any], env, seed: int):
    """The SB3 model of ``settings`` on ``env`` (CPU, quiet, seeded)."""
    import stable_baselines3 as sb3
    import torch
    from stable_baselines3.common.noise import NormalActionNoise

    kwargs = dict(settings["hyperparams"])
    policy_kwargs = kwargs["policy_kwargs"] = dict(kwargs.get("policy_kwargs") or {})
    if settings["net_arch"] is not None:
        policy_kwargs["net_arch"] = settings["net_arch"]
    if settings.get("features_extractor"):
        policy_kwargs["features_extractor_class"] = FEATURES_EXTRACTORS[
            settings["features_extractor"]
        ]()
    if settings.get("optimizer"):
        policy_kwargs["optimizer_class"] = getattr(torch.optim, settings["optimizer"])
        policy_kwargs["optimizer_kwargs"] = dict(settings.get("optimizer_kwargs") or {})
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
    from stable_baselines3.common.callbacks import BaseCallback

    env, test_env = make_env(env_id), make_env(env_id)
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
    if args.dry_run:
        env = make_env(args.env)
        build_model(settings, env, args.seed)
        env.close()
        print("dry run: the options, gin file, env and SB3 model are valid; nothing was written")
        return {"dry_run": True}
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
            "machine": machine_info(),
        },
    )
    summary = train(settings, args.env, args.seed, args.steps, run_dir)
    atomic_write_json(run_dir / SUMMARY, summary)
    print(json.dumps({k: summary[k] for k in ("env_steps", "final_eval_return", "wall_seconds")}))
    return summary


if __name__ == "__main__":
    main()
