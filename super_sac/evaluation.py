"""Evaluation episodes with the deterministic policy."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from super_sac.agent import Agent
from super_sac.video import render_frame

#: the metrics :func:`evaluate_agent` returns (the loop logs them as ``eval/<name>``)
EVAL_METRICS = ("return_mean", "return_std", "return_min", "return_max", "length_mean")
#: metric names of the original super_sac that ``save_best`` accepts, and ours they stand for
METRIC_ALIASES = {"eval/mean_return": "return_mean"}


def eval_metric(name: str) -> str | None:
    """The evaluation metric ``name`` stands for: a name of :data:`EVAL_METRICS`, the same name
    with the loggers' ``eval/`` prefix, or an alias of :data:`METRIC_ALIASES`; ``None`` when it
    stands for none of them."""
    name = METRIC_ALIASES.get(name, name).removeprefix("eval/")
    return name if name in EVAL_METRICS else None


def save_best_metric(save_best: bool | str) -> str | None:
    """The metric that decides which evaluation is the best one for the loop's ``save_best``
    setting: ``None`` when it is off, ``"return_mean"`` for ``True``, else the named metric
    (larger is better).

    :raises ValueError: for a name that is not an evaluation metric.
    """
    if not isinstance(save_best, str):
        return "return_mean" if save_best else None
    metric = eval_metric(save_best)
    if metric is None:
        raise ValueError(
            f"save_best = {save_best!r} is not an evaluation metric; use True (mean return) or "
            f"one of {', '.join(repr(m) for m in EVAL_METRICS)}"
        )
    return metric


def evaluate_agent(
    agent: Agent,
    env: gym.Env,
    eval_episodes: int = 10,
    max_episode_steps: int | None = None,
    render: bool = False,
    frames: list[np.ndarray] | None = None,
) -> dict[str, float]:
    """Run ``eval_episodes`` episodes acting with ``agent.forward`` (the mean action).

    :param agent: the agent.
    :param env: a single (not vectorised) env with dict observations and ``[-1, 1]`` actions.
    :param eval_episodes: number of episodes.
    :param max_episode_steps: cut episodes at this many steps (``None``: the env's own limit).
    :param render: call ``env.render()`` every step.
    :param frames: when a list, the first episode's rendered frames are appended to it (the
        frame after the reset and one after every step; the env must render ``rgb_array``).
    :return: ``return_mean``, ``return_std``, ``return_min``, ``return_max``, ``length_mean``.
    """
    returns, lengths = [], []
    was_training = agent.training
    agent.eval()
    for episode in range(eval_episodes):
        obs, _ = env.reset()
        record = frames is not None and episode == 0
        if record:
            frames.append(render_frame(env))
        total, steps, done = 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(agent.forward(obs))
            total += float(reward)
            steps += 1
            if record:
                frames.append(render_frame(env))
            elif render:
                env.render()
            done = (
                terminated
                or truncated
                or (max_episode_steps is not None and steps >= max_episode_steps)
            )
        returns.append(total)
        lengths.append(steps)
    agent.train(was_training)
    arr = np.asarray(returns, dtype=np.float64)
    return {
        "return_mean": float(arr.mean()),
        "return_std": float(arr.std()),
        "return_min": float(arr.min()),
        "return_max": float(arr.max()),
        "length_mean": float(np.mean(lengths)),
    }
