"""The quick-start replay memory (:class:`ReplayMemory`) and the space checks of :class:`SAC`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import VectorEnv

from super_sac.replay import Batch, ReplayBuffer
from super_sac.wrappers import ActionScaler, has_finite_bounds

OBS_KEY = "obs"


def single_spaces(env: Any) -> tuple[spaces.Space, spaces.Space]:
    """The per-env observation and action spaces of a single or a vector env.

    :raises TypeError: when ``env`` is not an env (an id string, ``None``, ...)."""
    if isinstance(env, str):
        raise TypeError(
            f"SAC needs an env object, got the string {env!r}. Fix: pass gymnasium.make({env!r})"
        )
    if not (hasattr(env, "observation_space") and hasattr(env, "action_space")):
        raise TypeError(
            f"SAC needs a gymnasium env (with observation_space and action_space), got "
            f"{type(env).__name__}. Fix: pass gymnasium.make(env_id), or a gymnasium.Env"
        )
    if isinstance(env, VectorEnv):
        return env.single_observation_space, env.single_action_space
    return env.observation_space, env.action_space


def check_spaces(observation_space: spaces.Space, action_space: spaces.Space) -> None:
    """Raise a ``ValueError`` naming the fix unless the spaces suit :class:`SAC`.

    :param observation_space: must be a ``Box``.
    :param action_space: must be a ``Box`` with finite bounds.
    """
    for space in (observation_space, action_space):
        modules = {cls.__module__.split(".")[0] for cls in type(space).__mro__}
        if not isinstance(space, spaces.Space) and "gym" in modules:
            raise ValueError(
                f"the env's spaces come from the old gym package ({type(space).__module__}), not "
                "gymnasium. Fix: import gymnasium as gym and make the env with it, or wrap an "
                "old gym env with shimmy's GymV26CompatibilityV0"
            )
    if not isinstance(observation_space, spaces.Box):
        raise ValueError(
            f"SAC needs a Box observation space, got {observation_space}. Flatten the "
            "observation first (gymnasium.wrappers.FlattenObservation(env)), or use the gin "
            "loop super_sac.super_sac with an Encoder for dict or image observations."
        )
    check_action_space(action_space)


def check_action_space(action_space: spaces.Space) -> None:
    """Raise a ``ValueError`` naming the fix unless ``action_space`` is a bounded ``Box``."""
    if not isinstance(action_space, spaces.Box):
        raise ValueError(
            f"SAC needs a continuous (Box) action space, got {action_space}. Fix: for discrete "
            "actions use the gin loop's SAC-Discrete, super_sac.Agent(..., discrete=True) with "
            "experiments/gym/sac_discrete.gin (python experiments/gym/train_gym.py --env "
            "CartPole-v1 --config sac_discrete.gin)"
        )
    if not has_finite_bounds(action_space):
        raise ValueError(
            f"the action space {action_space} is unbounded, but SAC's actors output bounded "
            "actions that are rescaled to the env's bounds. Give the env its physical limits, "
            "e.g. env.action_space = gymnasium.spaces.Box(low, high) inside a "
            "gymnasium.ActionWrapper that clips to them."
        )


class ReplayMemory:
    """A replay memory of single transitions, stored in a :class:`super_sac.replay.ReplayBuffer`.

    ``done`` is the *termination* flag: 1 means the episode reached a terminal state and the
    learner must not bootstrap from ``next_state``; a time-limit truncation is pushed with
    ``done = 0``. Transitions are one-step: the learner discounts them by its own ``gamma``.

    Actions: with ``action_space`` given, :meth:`push` takes env-scale actions and stores them
    normalised to ``[-1, 1]`` (clipped to the bounds), and :meth:`sample` returns env-scale
    actions again. Without it, actions are stored as pushed, and :class:`SAC` refuses to learn
    from actions outside ``[-1, 1]``. A :class:`SAC`'s own ``memory`` is built with its env's
    action space.

    :param capacity: maximum number of transitions (the oldest are overwritten).
    :param seed: seed of the sampling random number generator.
    :param action_space: the env's bounded ``Box`` action space (optional, see above).
    """

    def __init__(self, capacity: int, seed: int, action_space: spaces.Box | None = None) -> None:
        self.capacity = int(capacity)
        self.seed = seed
        self.buffer = ReplayBuffer(size=self.capacity, seed=seed, verbose=False)
        self.scaler = None
        if action_space is not None:
            check_action_space(action_space)
            self.scaler = ActionScaler(action_space)

    def __len__(self) -> int:
        return len(self.buffer)

    def push(
        self,
        state: np.ndarray,
        action: np.ndarray,
        reward: float,
        next_state: np.ndarray,
        done: bool | float,
    ) -> None:
        """Add one transition.

        :param state: observation before the action.
        :param action: the action taken (env scale when the memory has an ``action_space``).
        :param reward: the reward received.
        :param next_state: observation after the action (the true final one at an episode end).
        :param done: 1/True when the episode terminated (no bootstrap), 0/False otherwise.
        """
        self.push_batch(
            np.asarray(state)[None],
            np.atleast_1d(np.asarray(action, dtype=np.float32))[None],
            [reward],
            np.asarray(next_state)[None],
            [float(done)],
        )

    def push_batch(
        self,
        states: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_states: np.ndarray,
        dones: np.ndarray,
        *,
        normalized: bool = False,
    ) -> None:
        """Add ``B`` transitions at once (leading dimension ``B`` everywhere).

        :param states: ``(B, *obs_shape)``.
        :param actions: ``(B, act_dim)``.
        :param rewards: ``(B,)``.
        :param next_states: ``(B, *obs_shape)``.
        :param dones: ``(B,)`` termination flags.
        :param normalized: the actions are already in ``[-1, 1]`` (skip the rescaling).
        """
        actions = np.asarray(actions, dtype=np.float32)
        if self.scaler is not None and not normalized:
            actions = self.scaler.to_unit(actions)
        self.buffer.push(
            {OBS_KEY: np.asarray(states, dtype=np.float32)},
            actions,
            np.asarray(rewards, dtype=np.float32),
            {OBS_KEY: np.asarray(next_states, dtype=np.float32)},
            np.asarray(dones, dtype=np.float32),
            1.0,  # one-step transitions; the learner applies its gamma
        )

    def sample(
        self, batch_size: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Draw ``batch_size`` transitions uniformly, with replacement.

        :return: ``(state, action, reward, next_state, done)`` numpy arrays; ``reward`` and
            ``done`` have shape ``(batch_size,)``, actions are env scale when the memory has an
            ``action_space``.
        """
        batch = self.buffer.sample(batch_size)
        action = batch.action.numpy()
        if self.scaler is not None:
            action = self.scaler.to_env(action)
        return (
            batch.obs[OBS_KEY].numpy(),
            action,
            batch.reward.numpy()[:, 0],
            batch.next_obs[OBS_KEY].numpy(),
            batch.done.numpy()[:, 0],
        )

    def sample_batch(
        self, batch_size: int, gamma: float, device: str | torch.device = "cpu"
    ) -> Batch:
        """A learner's batch: normalised actions, ``discount = gamma``, tensors on ``device``.

        :raises ValueError: if the memory has no ``action_space`` and holds actions outside
            ``[-1, 1]``.
        """
        batch = self.buffer.sample(batch_size, device="cpu")
        if self.scaler is None and not bool((batch.action.abs() <= 1.0 + 1e-6).all()):
            raise ValueError(
                "this ReplayMemory holds actions outside [-1, 1], but SAC learns from normalised "
                "actions. Build it as ReplayMemory(capacity, seed, action_space=env.action_space) "
                "so that env-scale actions are normalised on push, or push actions in [-1, 1]."
            )

        moved = batch.map_tensors(lambda t: t.to(device, non_blocking=True))
        return dataclasses.replace(moved, discount=torch.full_like(moved.reward, gamma))

    def save_buffer(
        self, env_name: str, suffix: str = "", save_path: str | Path | None = None
    ) -> str:
        """Write the memory to one ``.npz`` file (no pickles).

        :param env_name: used in the default file name.
        :param suffix: appended to the default file name.
        :param save_path: the file; default ``checkpoints/sac_buffer_<env_name>_<suffix>.npz``.
        :return: the path written.
        """
        if save_path is None:
            save_path = Path("checkpoints") / f"sac_buffer_{env_name}_{suffix}.npz"
        Path(save_path).parent.mkdir(parents=True, exist_ok=True)
        return self.buffer.save(save_path)

    def load_buffer(self, save_path: str | Path) -> None:
        """Replace the contents with a file written by :meth:`save_buffer`.

        :param save_path: the ``.npz`` file.
        """
        self.buffer.load(save_path)
