"""Collecting and training for :class:`~super_sac.quickstart.SAC`: ``train`` (episodes of one
env) and ``train_vector`` (a vector env), both stepping the env through the gin loop's
:class:`~super_sac.collector.Collector`."""

from __future__ import annotations

import itertools
import math
import numbers
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import VectorEnv
from tqdm.auto import tqdm

from super_sac.collector import Collector
from super_sac.quickstart.persistence import default_run_path
from super_sac.video import env_fps, render_frame, require_encoder, write_video
from super_sac.wrappers import NormActionSpace, SimpleGymWrapper, VectorSimpleGymWrapper


def agent_view_of(env: gym.Env | VectorEnv) -> gym.Env | VectorEnv:
    """``env`` as the agent sees it: ``{"obs": float32}`` observations and ``[-1, 1]`` actions
    (:class:`~super_sac.wrappers.SimpleGymWrapper` and
    :class:`~super_sac.wrappers.NormActionSpace`, applied per env for vector envs)."""
    if not isinstance(env, VectorEnv):
        return NormActionSpace(SimpleGymWrapper(env))
    env = gym.wrappers.vector.VectorizeTransformAction(env, NormActionSpace)
    return VectorSimpleGymWrapper(env)


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer (Python's or numpy's), and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def check_count(method: str, name: str, value: Any, low: int, allow_none: bool = False) -> None:
    """Refuse a step or episode count that is not an int ``>= low`` (``None`` too, unless
    ``allow_none``): a float or negative count would otherwise run a different length silently.

    :raises TypeError: for a value that is not an int.
    :raises ValueError: for an int below ``low``.
    """
    if value is None and allow_none:
        return
    if not is_int(value):
        kind = "an int or None" if allow_none else "an int"
        raise TypeError(f"{method}: {name} must be {kind}, got {value!r} ({type(value).__name__})")
    if value < low:
        raise ValueError(f"{method}: {name} must be >= {low}, got {value}")


class TrainingMixin:
    """The training methods of :class:`~super_sac.quickstart.SAC`."""

    # ------------------------------------------------------------------ videos
    def record(
        self,
        path: str | Path,
        episodes: int = 1,
        env: gym.Env | None = None,
        fps: float | None = None,
        max_steps: int | None = None,
    ) -> Path:
        """Run the deterministic controller for ``episodes`` episodes and write what the env
        renders to a video: ``path`` with suffix ``.mp4`` (``.gif`` without ffmpeg; see
        :mod:`super_sac.video`).

        :param path: the video file (its suffix is replaced by the format's).
        :param episodes: episodes in the video, one after the other.
        :param env: a single env made with ``render_mode="rgb_array"`` (default: this SAC's env).
        :param fps: frames per second (default: the env's ``render_fps``, else 30).
        :param max_steps: cut each episode after this many steps.
        :return: the written file.
        :raises ValueError: when the env renders no RGB frames or is a vector env.
        :raises super_sac.video.VideoDependencyError: when no encoder is installed.
        """
        env = self.env if env is None else env
        if isinstance(env, VectorEnv):
            raise ValueError(
                "record needs a single env: pass env=gymnasium.make(env_id, "
                'render_mode="rgb_array")'
            )
        require_encoder()
        frames = []
        for _ in range(episodes):
            state, _ = env.reset()
            frames.append(render_frame(env))
            for step in itertools.count(1):
                state, _, terminated, truncated, _ = env.step(
                    self.select_action(state, evaluate=True)
                )
                frames.append(render_frame(env))
                if terminated or truncated or (max_steps is not None and step >= max_steps):
                    break
        fps = fps or env_fps(env)
        return write_video(frames, path, fps)

    # ------------------------------------------------------------------ collection
    def _collector_for(self, warmup_steps: int, max_steps: int | None = None) -> Collector:
        """The collector over this SAC's env (made at the first call): the gin loop's collector
        with episode seeding ``"first"`` (the first reset gets ``seed``)."""
        if self._collector is None:
            self._collector = Collector.from_config(
                agent_view_of(self.env),
                self.agent,
                self.memory.buffer,
                self.settings,
                rng=self._rng,
                seed=self.seed,
                seeding="first",
            )
            self._collector.env_steps = self._total_steps
        self._collector.random_warmup_steps = int(warmup_steps)
        self._collector.cut_episodes_at = max_steps
        return self._collector

    def _collect_and_update(self, collector: Collector, warmup_steps: int) -> list[float]:
        """One step of every env, then the updates; returns the ended episodes' returns."""
        returns = collector.collect(collector.num_envs)
        self._maybe_update(warmup_steps)
        return returns

    def train(
        self,
        num_episodes: int = 1,
        *,
        max_steps: int | None = None,
        save_best: bool = False,
        save_path: str | Path | None = None,
        verbose: bool = True,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Train for ``num_episodes`` episodes of the (single) env, with a tqdm progress bar.

        Every env step stores one transition (``done`` = terminated: a truncated episode still
        bootstraps) and then runs ``updates_per_step`` updates once the memory holds a batch.

        :param num_episodes: episodes to run.
        :param max_steps: cut episodes at this many steps (a truncation); ``None``: the env's own
            end.
        :param save_best: save the agent whenever an episode beats the best return so far.
        :param save_path: the folder for those saves (default ``$SSAC_SAVE/sac_best_<date-time>``).
        :param verbose: show the progress bar.
        :param kwargs: ``save_best_with_gradients`` (bool, default False: include the optimizer
            states in the best saves) and ``warmup_steps`` (int, default 0: act uniformly at
            random, and do not update, for the agent's first this many env steps).
        :return: ``{"episode_rewards": [...], "best_reward": float, "updates": int}``
            (``updates``: the agent's total update count).
        """
        options = {"save_best_with_gradients": False, "warmup_steps": 0}
        unknown = sorted(set(kwargs) - set(options))
        if unknown:
            raise TypeError(f"unknown train() options {unknown}; recognised: {sorted(options)}")
        options.update(kwargs)
        if isinstance(self.env, VectorEnv):
            raise TypeError("this SAC was built on a vector env: use train_vector(total_steps=...)")
        check_count("train", "num_episodes", num_episodes, 1)
        check_count("train", "max_steps", max_steps, 1, allow_none=True)
        check_count("train", "warmup_steps", options["warmup_steps"], 0)
        if save_best and save_path is None:
            save_path = default_run_path("sac_best")
        warmup = int(options["warmup_steps"])
        collector = self._collector_for(warmup, max_steps)
        rewards: list[float] = []
        best = -math.inf
        bar = tqdm(total=num_episodes, desc="SAC", unit="episode", disable=not verbose)
        while len(rewards) < num_episodes:
            for reward in self._collect_and_update(collector, warmup):
                rewards.append(reward)
                self._log({"train/episode_reward": reward}, self.total_steps)
                if reward > best:
                    best = reward
                    if save_best:
                        gradients = bool(options["save_best_with_gradients"])
                        self.save(save_path, save_gradients=gradients)
                bar.update(1)
                bar.set_postfix(reward=f"{reward:.2f}", best=f"{best:.2f}", updates=self.updates)
        bar.close()
        return {"episode_rewards": rewards, "best_reward": best, "updates": self.updates}

    def train_vector(
        self,
        *,
        total_steps: int,
        warmup_steps: int = 10_000,
        log_every: int = 2_000,
        reward_window: int = 200,
        save_best: bool = False,
        save_path: str | Path | None = None,
        save_best_with_gradients: bool = False,
        verbose: bool = True,
    ) -> dict[str, Any]:
        """Train on a gymnasium vector env (the ``env`` this SAC was built on).

        Autoreset modes: ``SAME_STEP`` (the final observation of an ended episode is read from
        ``info["final_obs"]``), ``NEXT_STEP`` (the step that resets an env crosses episodes and
        is not stored) and ``DISABLED`` (ended envs are reset by the collector). Only
        ``terminated`` stops bootstrapping. Each vector step stores ``num_envs`` transitions and
        then runs ``updates_per_step`` updates.

        :param total_steps: env transitions to collect (summed over the envs; rounded up to a
            multiple of ``num_envs``).
        :param warmup_steps: transitions with uniformly random actions before the policy acts
            and updates start.
        :param log_every: every this many transitions, print (``verbose``) and log the mean
            return of the last ``reward_window`` episodes, and save when it is the best yet
            (``save_best``).
        :param reward_window: episodes in that mean.
        :param save_best: save the agent when the windowed mean return improves.
        :param save_path: the folder for those saves (default ``$SSAC_SAVE/sac_best_<date-time>``).
        :param save_best_with_gradients: include the optimizer states in those saves.
        :param verbose: print the progress lines.
        :return: ``{"episode_rewards": [...], "best_reward": float, "updates": int,
            "env_steps": int}``; ``best_reward`` is the best windowed mean seen at a log point.
        """
        if not isinstance(self.env, VectorEnv):
            raise TypeError(
                "train_vector needs a gymnasium.vector.VectorEnv, e.g. gymnasium.make_vec(id, "
                "num_envs=8, vector_kwargs={'autoreset_mode': AutoresetMode.SAME_STEP}); "
                "use train() for a single env"
            )
        check_count("train_vector", "total_steps", total_steps, 1)
        check_count("train_vector", "warmup_steps", warmup_steps, 0)
        check_count("train_vector", "log_every", log_every, 1)
        check_count("train_vector", "reward_window", reward_window, 1)
        if save_best and save_path is None:
            save_path = default_run_path("sac_best")
        collector = self._collector_for(warmup_steps)
        collector.reset_envs()  # every call starts fresh episodes
        returns: list[float] = []
        steps, next_log, best = 0, log_every, -math.inf
        while steps < total_steps:
            returns += self._collect_and_update(collector, warmup_steps)
            steps += collector.num_envs
            if steps >= next_log or steps >= total_steps:
                next_log += log_every
                mean = float(np.mean(returns[-reward_window:])) if returns else None
                self._report_vector(steps, len(returns), mean, reward_window, verbose)
                if mean is not None and mean > best:
                    best = mean
                    if save_best:
                        self.save(save_path, save_gradients=save_best_with_gradients)
        return {
            "episode_rewards": returns,
            "best_reward": best,
            "updates": self.updates,
            "env_steps": steps,
        }

    def _report_vector(
        self, steps: int, episodes: int, mean: float | None, window: int, verbose: bool
    ) -> None:
        if mean is not None:
            self._log({"train/episode_reward_mean": mean}, self.total_steps)
        if verbose:
            shown = "n/a" if mean is None else f"{mean:.2f}"
            print(
                f"steps {steps:>9,d} | episodes {episodes:>6,d} | mean return "
                f"(last {window}) {shown} | updates {self.updates:,d}",
                flush=True,
            )
