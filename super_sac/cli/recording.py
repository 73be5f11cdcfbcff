"""Recording datasets with a trained or random policy (experiments/offline)."""

from __future__ import annotations

import argparse
import json
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import super_sac
from super_sac import datasets
from super_sac.checkpoint import checkpoint_episodes
from super_sac.cli.factories import (
    MINATAR_GAMES,
    action_spec,
    build_agent,
    dmc_agent,
    dmc_env_kwargs,
    make_dmc,
    make_env,
    minatar_agent,
)
from super_sac.cli.options import (
    parse_gin_args,
    warn_beyond_time_limit,
)
from super_sac.cli.parsers import (
    DMC_ENV_OPTIONS,
    PIXEL_ONLY_OPTIONS,
    add_dmc_args,
    check_dmc_args,
)
from super_sac.envs.dmc import resolve_camera
from super_sac.wrappers import make_minatar_env

PathLike = str | os.PathLike
DEFAULT_TRANSITIONS = 100_000
AgentBuilder = Callable[[gym.Env, torch.device], super_sac.Agent]
SearchDirs = Sequence[PathLike]


def record_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``experiments/offline/record_replay.py``.

    :param description: the help text.
    """
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--env", default="Pendulum-v1")
    add_record_args(p, default_config="sac.gin")
    return p


def record_dmc_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``experiments/dmc/record_replay.py``: ``--domain --task``, the
    DeepMind Control env options and those of :func:`record_parser`.

    :param description: the help text.
    """
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--domain", default="cartpole", help="dm_control suite domain")
    p.add_argument("--task", default="swingup", help="task of the domain")
    add_dmc_args(p)
    add_record_args(p, default_config="drqv2.gin")
    return p


def record_minatar_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``experiments/minatar/record_replay.py``: ``--game`` (alias
    ``--env``) and the options of :func:`record_parser` (10,000-step episode limit).

    :param description: the help text.
    """
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--game", "--env", dest="game", default="breakout", choices=MINATAR_GAMES)
    add_record_args(p, default_config="basic_online.gin")
    p.set_defaults(max_episode_steps=10_000)
    return p


def add_record_args(p: argparse.ArgumentParser, default_config: str) -> None:
    """Add the options of the dataset recorders (policy, size, noise, output).

    :param p: the parser to extend.
    :param default_config: the ``--config`` default (the gin file a saved agent trained with).
    """
    p.add_argument(
        "--policy",
        default="random",
        help="'random', or a saved agent: a run directory / agent.pt / checkpoint folder",
    )
    p.add_argument(
        "--replay",
        default=None,
        metavar="CHECKPOINT",
        help="write the whole replay of a training run up to this checkpoint folder "
        "(<run>/checkpoints/ckpt_N: n_step 1, any number of envs) instead of recording a "
        "policy: a mixed-quality dataset like D4RL's medium-replay; the env options must be "
        "the run's",
    )
    p.add_argument("--config", default=default_config, help="gin file the agent was trained with")
    p.add_argument("--transitions", type=int, default=None, help=f"default {DEFAULT_TRANSITIONS}")
    p.add_argument("--noise_std", type=float, default=0.0, help="Gaussian action noise std")
    p.add_argument(
        "--epsilon",
        type=float,
        default=0.0,
        help="with this probability per step, a uniform random action instead of the agent's",
    )
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="act with the policy's mean instead of sampling it",
    )
    p.add_argument("--max_episode_steps", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--dataset_id", default=None, help="Minari id, e.g. super_sac/pendulum-expert-v0"
    )
    p.add_argument("--datasets_path", default=None, help="local Minari folder")
    p.add_argument("--npz", default=None, help="also (or only) write this .npz file")
    p.add_argument(
        "--overwrite", action="store_true", help="replace an existing Minari dataset or --npz file"
    )
    p.add_argument(
        "--label",
        default=None,
        help="the policy's name in the Minari metadata (default: --policy as given)",
    )
    p.add_argument("--threads", type=int, default=1)


def load_agent(
    policy: PathLike,
    config: PathLike,
    env: gym.Env,
    search_dirs: SearchDirs = (),
    agent_builder: AgentBuilder = build_agent,
) -> super_sac.Agent:
    """Rebuild an agent (:func:`build_agent`) from the gin file it was trained with and load
    its saved weights, on the CPU and in eval mode.

    :param policy: ``agent.pt``, a run directory, or a checkpoint folder (its ``state.pt``).
    :param config: the gin file; a bare name is looked up in ``search_dirs``.
    :param env: an env of the task.
    :param search_dirs: folders searched for ``config``.
    :param agent_builder: ``(env, device) -> Agent`` of the script that trained it.
    """
    parse_gin_args([config], [], search_dirs)
    agent = agent_builder(env, torch.device("cpu"))
    path = Path(policy)
    if (path / "state.pt").exists():  # a checkpoint folder
        state = torch.load(path / "state.pt", map_location="cpu", weights_only=True)
        agent.load_state_dict(state["agent"])
    else:
        agent.load(path)
    agent.eval()
    return agent


def record(
    args: argparse.Namespace,
    search_dirs: SearchDirs = (),
    make: Callable[[], gym.Env] | None = None,
    agent_builder: AgentBuilder = build_agent,
) -> dict[str, Any]:
    """Record the dataset :func:`record_parser`'s options describe and write it.

    :param args: the parsed command line.
    :param search_dirs: folders searched for ``--config``.
    :param make: builds the env (None: ``--env`` with ``--max_episode_steps``).
    :param agent_builder: ``(env, device) -> Agent`` for a saved ``--policy``.
    :return: a summary with the returns of the complete episodes.
    """
    if args.dataset_id is None and args.npz is None:
        raise SystemExit("error: give --dataset_id (Minari) and/or --npz")
    _check_replay_args(args)
    _check_replay_env(args)
    npz = Path(args.npz).with_suffix(".npz") if args.npz else None
    if npz is not None and npz.exists() and not args.overwrite:
        raise SystemExit(
            f"error: --npz {npz} exists, and a dataset is replaced only with --overwrite. Fix: "
            "pass --overwrite, or write to another path"
        )
    torch.set_num_threads(args.threads)
    super_sac.set_seed(args.seed)
    env = make() if make is not None else make_env(args.env, args.max_episode_steps)
    warn_beyond_time_limit(env, args.max_episode_steps)
    env_name = (
        getattr(args, "env", None) or getattr(args, "game", None) or f"{args.domain}-{args.task}"
    )
    if args.replay is not None:
        obs_space, act_space = datasets.raw_observation_space(env), datasets.raw_action_space(env)
        episodes = checkpoint_episodes(
            args.replay, act_space, datasets.flat_observation_key(env), env.observation_space
        )
        source = f"replay of {args.replay}"
    else:
        episodes, obs_space, act_space = _record_policy(args, env, search_dirs, agent_builder)
        source = args.policy
    limit = getattr(getattr(env, "spec", None), "max_episode_steps", None)
    complete = [ep for i, ep in enumerate(episodes) if _complete(ep, limit, i == len(episodes) - 1)]
    returns = [float(np.sum(ep.rewards)) for ep in complete]
    summary = {
        "env": env_name,
        "policy": source,
        # a replay was collected by the run's own exploration, which these options do not describe
        "noise_std": None if args.replay is not None else args.noise_std,
        "epsilon": None if args.replay is not None else args.epsilon,
        "transitions": int(sum(len(ep.rewards) for ep in episodes)),
        "episodes": len(episodes),
        "complete_episode_returns": returns,
        "return_mean": float(np.mean(returns)) if returns else float("nan"),
    }
    if args.dataset_id:
        exploration = (
            "" if args.replay is not None else f" (noise {args.noise_std}, epsilon {args.epsilon})"
        )
        folder = datasets.save_minari(
            args.dataset_id,
            episodes,
            obs_space,
            act_space,
            datasets_path=args.datasets_path,
            overwrite=args.overwrite,
            algorithm_name=f"super_sac {args.label or source}{exploration}",
            description=f"{env_name}, recorded by super_sac's record_replay.py",
        )
        summary["minari_folder"] = str(folder)
    if args.npz:
        summary["npz"] = str(datasets.save_npz(args.npz, episodes, act_space))
    env.close()
    return summary


# the options that decide what an env's transitions are; a replay is written under the recorder's
_ENV_OPTIONS = ("env", "game", "domain", "task", *DMC_ENV_OPTIONS, "max_episode_steps")
# what a state run's data do not depend on
_PIXEL_OPTIONS = (*PIXEL_ONLY_OPTIONS, "camera_id", "fast_render")
_GYM_RECORDER = "experiments/offline/record_replay.py"
_MINATAR_RECORDER = "experiments/minatar/record_replay.py"
_DMC_RECORDER = "experiments/dmc/record_replay.py"
# the recorder that reads the runs of each training script (run_info's "script", by file name)
_RECORDER_OF_SCRIPT = {
    "train_gym.py": _GYM_RECORDER,
    "train_offline.py": _GYM_RECORDER,
    "train_minatar.py": _MINATAR_RECORDER,
    "train_dmc_from_pixels.py": _DMC_RECORDER,
}


def _check_replay_env(args: argparse.Namespace) -> None:
    """``--replay``: the recorder and its env options must be the training run's (its
    ``hparams.json``), or the dataset would label the run's transitions with another env (an
    action repeat, a task of the same shapes). Without that record (a checkpoint moved out of
    its run) a warning says so; the buffer's layout is still checked against the env."""
    folder = Path(args.replay).resolve() if args.replay is not None else None
    if folder is None or not (folder / "buffer.npz").is_file():
        return  # not a checkpoint folder: reading it says so
    hparams = folder.parent.parent / "hparams.json"
    try:
        info = json.loads(hparams.read_text())["run_info"]
        ran = dict(info["args"])
    except (OSError, ValueError, KeyError, TypeError):
        warnings.warn(
            f"--replay {args.replay}: no run record at {hparams}, so the env options are not "
            "checked against the training run's (only the buffer's shapes against this env)",
            stacklevel=2,
        )
        return
    script = Path(str(info.get("script") or "")).name
    mine = _recorder(args)
    wanted = _RECORDER_OF_SCRIPT.get(script, mine)
    if wanted != mine:
        raise SystemExit(
            f"error: --replay {args.replay}: the run was trained by {script}, whose env this "
            f"recorder ({mine}) does not build. Fix: record its replay with {wanted}"
        )
    here = {key: getattr(args, key) for key in _ENV_OPTIONS if key in ran and hasattr(args, key)}
    if "camera_id" in here:  # None is the domain's default camera
        for options in (ran, here):
            options["camera_id"] = resolve_camera(options["domain"], options["camera_id"])
    if ran.get("from_states"):  # a state run: the pixel options do nothing
        here = {key: value for key, value in here.items() if key not in _PIXEL_OPTIONS}
    differ = [key for key, value in here.items() if value != ran[key]]
    if differ:
        said = "; ".join(f"{_flag(k, ran[k])} in the run, {_flag(k, here[k])} here" for k in differ)
        fix = ", ".join(_flag(k, ran[k], leave_out=True) for k in differ)
        raise SystemExit(
            f"error: --replay {args.replay}: the recorder's env is not the one the run trained "
            f"on ({hparams}): {said}. Fix: record with the run's options: {fix}"
        )


def _recorder(args: argparse.Namespace) -> str:
    """Which recorder parsed ``args``: dm_control's has ``--domain``, MinAtar's ``--game``."""
    if hasattr(args, "domain"):
        return _DMC_RECORDER
    return _MINATAR_RECORDER if hasattr(args, "game") else _GYM_RECORDER


def _flag(key: str, value: Any, leave_out: bool = False) -> str:
    """An option's value as a command line writes it (``no --x``, or ``leave out --x``, unset)."""
    if value is None or value is False:
        return f"{'leave out' if leave_out else 'no'} --{key}"
    return f"--{key}" if value is True else f"--{key} {value}"


def _check_replay_args(args: argparse.Namespace) -> None:
    """``--replay`` writes what the run collected: options that shape a recording conflict."""
    if args.replay is None:
        return
    given = [
        flag
        for flag, value in (
            ("--policy", args.policy != "random"),
            ("--transitions", args.transitions is not None),
        )
        if value
    ] + _action_options_given(args)
    if given:
        raise SystemExit(
            f"error: --replay writes every transition the run collected, as it collected "
            f"them; {', '.join(given)} would shape a new recording. Drop "
            f"{'it' if len(given) == 1 else 'them'}, or drop --replay to record a policy"
        )


def _record_policy(
    args: argparse.Namespace,
    env: gym.Env,
    search_dirs: SearchDirs,
    agent_builder: AgentBuilder,
) -> tuple[list[datasets.Episode], Any, Any]:
    """Run ``--policy`` (random or a saved agent) for ``--transitions`` transitions."""
    num_actions, discrete = action_spec(env.action_space)
    _check_policy_args(args, discrete)
    if args.policy == "random":
        policy = datasets.random_policy(env, args.seed)
    else:
        agent = load_agent(args.policy, args.config, env, search_dirs, agent_builder)
        policy = datasets.agent_policy(
            agent,
            args.noise_std,
            stochastic=not args.deterministic,
            seed=args.seed,
            epsilon=args.epsilon,
            num_actions=num_actions if discrete else None,
        )
    size = DEFAULT_TRANSITIONS if args.transitions is None else args.transitions
    return datasets.record_episodes(env, policy, size, seed=args.seed)


def _action_options_given(args: argparse.Namespace) -> list[str]:
    """The options given that shape a saved agent's actions (noise, epsilon, its mean)."""
    return [
        flag
        for flag, given in (
            ("--noise_std", args.noise_std != 0.0),
            ("--epsilon", args.epsilon != 0.0),
            ("--deterministic", args.deterministic),
        )
        if given
    ]


def _check_policy_args(args: argparse.Namespace, discrete: bool) -> None:
    """Refuse the action options that would be ignored: Gaussian noise on discrete actions, and
    any of them with the random policy."""
    if discrete and args.noise_std:
        raise SystemExit(
            "error: --noise_std adds Gaussian noise to continuous actions; this env's are "
            "discrete. Fix: mix in uniform random actions with --epsilon instead"
        )
    if args.policy == "random":
        unused = _action_options_given(args)
        if unused:
            raise SystemExit(
                f"error: {', '.join(unused)} shape a saved agent's actions, and --policy random "
                "is random already. Fix: leave them out, or record a saved agent with --policy "
                "RUN_DIR"
            )


def _complete(episode: Any, limit: int | None, last: bool) -> bool:
    """Whether an episode ended on its own (terminated, or at the time limit: the spec's
    ``limit``, or without one the env's own truncation, as DeepMind Control's) rather than
    being cut at the requested number of transitions (only the ``last`` one can be)."""
    if episode.terminations[-1]:
        return True
    if limit is not None:
        return len(episode.rewards) == limit
    return bool(episode.truncations[-1]) and not last


def _print_summary(summary: dict[str, Any]) -> None:
    """Print a recording's summary without its per-episode returns."""
    shown = {k: v for k, v in summary.items() if k != "complete_episode_returns"}
    print(json.dumps(shown, indent=1), flush=True)


def record_dataset(
    argv: Sequence[str] | None = None,
    *,
    search_dirs: SearchDirs = (),
    description: str | None = None,
) -> dict[str, Any]:
    """Record a dataset and print its summary: the command line of
    ``experiments/offline/record_replay.py``.

    :param argv: the command line (None: ``sys.argv[1:]``).
    :param search_dirs: folders searched for ``--config`` (``experiments/offline`` and
        ``experiments/gym``).
    :param description: the ``--help`` text.
    :return: the summary of :func:`record`.
    """
    summary = record(record_parser(description).parse_args(argv), search_dirs)
    _print_summary(summary)
    return summary


def record_dmc_dataset(
    argv: Sequence[str] | None = None,
    *,
    search_dirs: SearchDirs = (),
    description: str | None = None,
) -> dict[str, Any]:
    """Record a DeepMind Control dataset (pixels or ``--from_states``) and print its summary:
    the command line of ``experiments/dmc/record_replay.py``.

    :param argv: the command line (None: ``sys.argv[1:]``).
    :param search_dirs: folders searched for ``--config`` (``experiments/dmc``).
    :param description: the ``--help`` text.
    :return: the summary of :func:`record`.
    """
    parser = record_dmc_parser(description)
    args = parser.parse_args(argv)
    check_dmc_args(parser, args)
    kwargs = dmc_env_kwargs(args)
    summary = record(
        args,
        search_dirs,
        make=lambda: _time_limited(
            make_dmc(args.domain, args.task, **kwargs), args.max_episode_steps
        ),
        agent_builder=dmc_agent,
    )
    _print_summary(summary)
    return summary


def _time_limited(env: gym.Env, max_episode_steps: int | None) -> gym.Env:
    """``env`` with episodes cut at ``max_episode_steps`` (None: its own limit only)."""
    return env if max_episode_steps is None else gym.wrappers.TimeLimit(env, max_episode_steps)


def record_minatar_dataset(
    argv: Sequence[str] | None = None,
    *,
    search_dirs: SearchDirs = (),
    description: str | None = None,
) -> dict[str, Any]:
    """Record a MinAtar dataset (a random policy or a saved SAC-Discrete agent, whose policy is
    sampled) and print its summary: the command line of ``experiments/minatar/record_replay.py``.

    :param argv: the command line (None: ``sys.argv[1:]``).
    :param search_dirs: folders searched for ``--config`` (``experiments/minatar``).
    :param description: the ``--help`` text.
    :return: the summary of :func:`record`.
    """
    args = record_minatar_parser(description).parse_args(argv)
    summary = record(
        args,
        search_dirs,
        make=lambda: make_minatar_env(args.game, max_episode_steps=args.max_episode_steps),
        agent_builder=minatar_agent,
    )
    _print_summary(summary)
    return summary


def dataset_id(env_id: str, quality: str) -> str:
    """Minari id of a dataset that ``experiments/offline/build_datasets.py`` builds, e.g.
    ``super_sac/halfcheetah-medium-v0``.

    :param env_id: gymnasium env id.
    :param quality: "random", "medium" or "expert".
    """
    return f"super_sac/{env_id.split('-')[0].lower()}-{quality}-v0"


def normalized_score(ret: float, random_return: float, expert_return: float) -> float:
    """D4RL's normalized score: 0 = random policy, 100 = expert policy.

    :param ret: the return to score.
    :param random_return: the random policy's return.
    :param expert_return: the expert policy's return.
    """
    return 100.0 * (ret - random_return) / (expert_return - random_return)
