"""N-step transitions from vectorized envs.

:class:`NStepQueue` keeps the last few steps of every parallel env and folds them into
transitions with an n-step discounted reward, ready for :meth:`ReplayBuffer.push
<super_sac.replay.ReplayBuffer.push>`.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import torch

__all__ = ["NStepQueue"]


class NStepQueue:
    """Turn per-step transitions of ``num_envs`` parallel envs into n-step transitions.

    A window of ``n_step`` pending steps of one env is emitted as
    ``(obs_0, a_0, sum_i gamma^i r_i, next_obs_newest, terminated_newest, gamma^n)``. When an
    env's episode ends, every pending start is flushed with the rewards up to the end and
    ``discount = gamma ** k`` (``k`` rewards summed); ``done`` is 1 only for termination,
    so truncated windows still bootstrap from the final observation.

    Output rows are ordered by env index, then by start step.

    :param num_envs: number of parallel envs.
    :param n_step: window length (1 = plain one-step transitions).
    :param gamma: discount factor.
    """

    def __init__(self, num_envs: int, n_step: int, gamma: float) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if n_step < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.num_envs = int(num_envs)
        self.n_step = int(n_step)
        self.gamma = float(gamma)
        self._pending: list[deque] = [deque() for _ in range(self.num_envs)]

    def reset(self) -> None:
        """Drop all pending steps (e.g. after a hard reset of the envs)."""
        for queue in self._pending:
            queue.clear()

    def state_dict(self) -> dict[str, Any]:
        """The pending steps of every env, as tensors (for checkpoints)."""
        return {
            "pending": [
                [
                    {
                        "obs": {k: torch.from_numpy(np.array(v)) for k, v in step_obs.items()},
                        "action": torch.from_numpy(np.array(action)),
                        "reward": reward,
                    }
                    for step_obs, action, reward in queue
                ]
                for queue in self._pending
            ]
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        pending = state["pending"]
        if len(pending) != self.num_envs:
            raise ValueError(f"state holds {len(pending)} envs, this queue has {self.num_envs}")
        self._pending = [
            deque(
                (
                    {k: v.cpu().numpy() for k, v in step["obs"].items()},
                    step["action"].cpu().numpy(),
                    float(step["reward"]),
                )
                for step in queue
            )
            for queue in pending
        ]

    def push(
        self,
        obs: dict[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: dict[str, np.ndarray],
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> dict[str, Any] | None:
        """Add one step of every env and return the transitions completed by it.

        ``next_obs`` must hold the true final observation for envs whose episode just ended
        (not the autoreset observation). With ``n_step == 1`` the returned arrays may alias
        the inputs.

        :param obs: observations, leading dim ``num_envs``.
        :param action: actions, leading dim ``num_envs``.
        :param reward: ``(num_envs,)`` rewards.
        :param next_obs: observations after the step.
        :param terminated: ``(num_envs,)`` bool, episode reached a terminal state.
        :param truncated: ``(num_envs,)`` bool, episode was cut off (time limit).
        :return: ``dict(obs, action, reward, next_obs, done, discount)`` for
            ``ReplayBuffer.push(**out)``, or ``None`` if nothing completed.
        """
        reward = np.asarray(reward, dtype=np.float64).reshape(self.num_envs)
        terminated = np.asarray(terminated, dtype=bool).reshape(self.num_envs)
        truncated = np.asarray(truncated, dtype=bool).reshape(self.num_envs)
        if self.n_step == 1:
            return {
                "obs": obs,
                "action": np.asarray(action),
                "reward": reward.astype(np.float32),
                "next_obs": next_obs,
                "done": terminated.astype(np.float32),
                "discount": np.full(self.num_envs, self.gamma, dtype=np.float32),
            }
        rows: list[tuple] = []
        for env in range(self.num_envs):
            rows += self._push_env(env, obs, action, reward[env], next_obs, terminated, truncated)
        return self._stack(rows) if rows else None

    def _push_env(
        self,
        env: int,
        obs: dict[str, np.ndarray],
        action: np.ndarray,
        reward: float,
        next_obs: dict[str, np.ndarray],
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> list[tuple]:
        """Queue env ``env``'s step; return finished rows ``(obs, a, R, next_obs, done, disc)``."""
        queue = self._pending[env]
        step_obs = {k: np.array(v[env]) for k, v in obs.items()}  # copy: callers reuse buffers
        queue.append((step_obs, np.array(action[env]), float(reward)))
        ended = bool(terminated[env] or truncated[env])
        if not ended and len(queue) < self.n_step:
            return []
        final_obs = {k: np.array(v[env]) for k, v in next_obs.items()}
        rows = self._rows(queue, final_obs, float(terminated[env]), len(queue) if ended else 1)
        if ended:
            queue.clear()
        else:
            queue.popleft()
        return rows

    def _rows(self, queue: deque, final_obs: dict, done: float, starts: int) -> list[tuple]:
        """Rows of the windows starting at the queue's first ``starts`` steps, all ending at
        ``final_obs``: ``(obs_j, a_j, sum_{i >= j} gamma^(i-j) r_i, final_obs, done,
        gamma^(len - j))``."""
        returns = self._suffix_returns([r for _, _, r in queue])
        discount = [self.gamma ** (len(queue) - j) for j in range(starts)]
        return [
            (queue[j][0], queue[j][1], returns[j], final_obs, done, discount[j])
            for j in range(starts)
        ]

    def flush(self, next_obs: dict[str, np.ndarray]) -> dict[str, Any] | None:
        """Emit every pending window as a truncated one and clear the queues: the episodes are
        cut off where they stand (a run resumed on envs it cannot bring back), each window
        bootstrapping from its env's current observation with ``discount = gamma ** k`` for its
        ``k`` summed rewards, as at a time limit.

        :param next_obs: every env's current observation (the one after its last pending
            step), leading dim ``num_envs``.
        :return: the rows, as :meth:`push` returns them, or ``None`` if nothing was pending.
        """
        rows: list[tuple] = []
        for env, queue in enumerate(self._pending):
            if queue:
                final_obs = {k: np.array(v[env]) for k, v in next_obs.items()}
                rows += self._rows(queue, final_obs, 0.0, len(queue))
                queue.clear()
        return self._stack(rows) if rows else None

    def _suffix_returns(self, rewards: list[float]) -> list[float]:
        """``out[j] = sum_{i >= j} gamma^(i-j) r_i``."""
        out = [0.0] * len(rewards)
        running = 0.0
        for i in range(len(rewards) - 1, -1, -1):
            running = rewards[i] + self.gamma * running
            out[i] = running
        return out

    @staticmethod
    def _stack(rows: list[tuple]) -> dict[str, Any]:
        obs_rows, actions, rewards, next_rows, dones, discounts = zip(*rows)
        return {
            "obs": {k: np.stack([o[k] for o in obs_rows]) for k in obs_rows[0]},
            "action": np.stack(actions),
            "reward": np.asarray(rewards, dtype=np.float32),
            "next_obs": {k: np.stack([o[k] for o in next_rows]) for k in next_rows[0]},
            "done": np.asarray(dones, dtype=np.float32),
            "discount": np.asarray(discounts, dtype=np.float32),
        }
