"""Recording episodes of an env with a policy (for building datasets)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from super_sac.datasets.core import Episode, _denormalize_actions
from super_sac.wrappers import NormActionSpace, SimpleGymWrapper

Policy = Any  # Callable[[dict[str, np.ndarray]], np.ndarray]: wrapped obs -> action in [-1, 1]


def random_policy(env: gym.Env, seed: int | None = None) -> Policy:
    """Uniform random actions in the (wrapped) env's action space (D4RL's "random" policy)."""
    space = env.action_space
    space.seed(seed)
    return lambda obs: space.sample()


def agent_policy(
    agent: Any,
    noise_std: float = 0.0,
    stochastic: bool = True,
    seed: int | None = None,
    epsilon: float = 0.0,
    num_actions: int | None = None,
) -> Policy:
    """Actions of a trained agent: policy samples (``stochastic``, as D4RL recorded its SAC
    policies) or its mean action, plus optional Gaussian noise ``N(0, noise_std^2)``, clipped
    to ``[-1, 1]`` (continuous actions; discrete agents' indices are used as they are).

    :param epsilon: with this probability per step, a uniform random action instead (an index
        below ``num_actions`` for a discrete agent, else uniform on ``[-1, 1]^A``): the noisy
        datasets of Grigsby & Qi (2021, arXiv:2110.04698), where the filter has to find the
        agent's actions among random ones.
    :param num_actions: the discrete agent's number of actions (needed with ``epsilon``).
    :raises ValueError: on ``epsilon`` outside ``[0, 1]``, or a discrete agent with ``epsilon``
        but no ``num_actions``.
    """
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon = {epsilon}: a probability, in [0, 1]")
    discrete = bool(getattr(agent, "discrete", False))
    if discrete and epsilon > 0 and num_actions is None:
        raise ValueError("epsilon with a discrete agent needs num_actions (env.action_space.n)")
    rng = np.random.default_rng(seed)

    def act(obs: dict[str, np.ndarray]) -> np.ndarray:
        action = agent.sample_action(obs) if stochastic else agent.forward(obs)
        if epsilon > 0 and rng.random() < epsilon:
            if discrete:
                return np.asarray(rng.integers(num_actions))
            shape = np.shape(action)
            return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
        if discrete:  # an action index: no noise, no clipping
            return np.asarray(action)
        action = np.asarray(action, dtype=np.float32)
        if noise_std > 0:
            action = action + rng.normal(0.0, noise_std, size=action.shape)
        return np.clip(action, -1.0, 1.0).astype(np.float32)

    return act


def record_episodes(
    env: gym.Env, policy: Policy, num_transitions: int, seed: int = 0
) -> tuple[list[Episode], spaces.Space, spaces.Space]:
    """Run ``policy`` in ``env`` (a library-wrapped env) for ``num_transitions`` transitions.

    Episode ``i`` is reset with seed ``seed + i``. The last episode is cut at
    ``num_transitions`` and marked truncated (it bootstraps, as a time limit would).

    :return: the episodes (observations as the raw env gives them, in float32; actions in the
        env's units), the raw observation space and the raw action space (what Minari stores).
    """
    raw_actions = raw_action_space(env)
    flat_key = flat_observation_key(env)
    raw_obs_space = raw_observation_space(env)

    def unwrap(obs: dict[str, np.ndarray]) -> Any:
        return np.asarray(obs[flat_key]) if flat_key is not None else obs

    episodes: list[Episode] = []
    total = 0
    while total < num_transitions:
        obs, _ = env.reset(seed=seed + len(episodes))
        observations, actions, rewards, terms, truncs = [unwrap(obs)], [], [], [], []
        while True:
            action = policy(obs)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += 1
            truncated = truncated or (total >= num_transitions and not terminated)
            observations.append(unwrap(obs))
            actions.append(action)
            rewards.append(float(reward))
            terms.append(bool(terminated))
            truncs.append(bool(truncated))
            if terminated or truncated:
                break
        stacked: Any
        if flat_key is not None:
            stacked = np.stack(observations)
        else:
            stacked = {k: np.stack([o[k] for o in observations]) for k in observations[0]}
        act = np.stack(actions)
        if isinstance(raw_actions, spaces.Box):
            act = _denormalize_actions(act, raw_actions.low, raw_actions.high).astype(
                raw_actions.dtype
            )
        episodes.append(Episode(stacked, act, np.array(rewards), np.array(terms), np.array(truncs)))
    return episodes, raw_obs_space, raw_actions


# ------------------------------------------------------------------------------ raw spaces
def flat_observation_key(env: gym.Env) -> str | None:
    """The dict key under which a :class:`~super_sac.wrappers.SimpleGymWrapper` in ``env``'s
    wrapper stack puts the raw env's ``Box`` observation (``None`` without one)."""
    current = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, SimpleGymWrapper):
            return current.key
        current = current.env
    return None


def raw_observation_space(env: gym.Env) -> spaces.Space:
    """The observation space datasets store: the ``Box`` under a ``SimpleGymWrapper``, else the
    (wrapped) env's own space."""
    key = flat_observation_key(env)
    return env.observation_space.spaces[key] if key is not None else env.observation_space


def raw_action_space(env: gym.Env) -> spaces.Space:
    """The action space in the env's own units: the space under a ``NormActionSpace`` wrapper
    (or the env's action space when it has none)."""
    current = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, NormActionSpace):
            return current.env.action_space
        current = current.env
    return env.action_space
