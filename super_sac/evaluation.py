"""Evaluation episodes with the deterministic policy."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from super_sac.agent import Agent


def evaluate_agent(
    agent: Agent,
    env: gym.Env,
    eval_episodes: int = 10,
    max_episode_steps: int | None = None,
    render: bool = False,
) -> dict[str, float]:
    """Run ``eval_episodes`` episodes acting with ``agent.forward`` (the mean action).

    :param agent: the agent.
    :param env: a single (not vectorised) env with dict observations and ``[-1, 1]`` actions.
    :param eval_episodes: number of episodes.
    :param max_episode_steps: cut episodes at this many steps (``None``: the env's own limit).
    :param render: call ``env.render()`` every step.
    :return: ``return_mean``, ``return_std``, ``return_min``, ``return_max``, ``length_mean``.
    """
    returns, lengths = [], []
    was_training = agent.training
    agent.eval()
    for _ in range(eval_episodes):
        obs, _ = env.reset()
        total, steps, done = 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(agent.forward(obs))
            total += float(reward)
            steps += 1
            if render:
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
