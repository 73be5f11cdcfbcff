"""Teach the quick-start SAC to track a step in angle of attack with the F-16's elevator.

    python experiments/aerospace/train_f16.py                  # a few minutes on 2 CPU cores
    python experiments/aerospace/train_f16.py --episodes 10    # a quick smoke run

The script trains ``super_sac.SAC`` on ``super_sac/LinearLongitudinalF16-v0`` (a 5-degree step in
the reference angle of attack, 20 s episodes), saves it, reloads it with ``SAC.from_pretrained``,
and evaluates the reloaded controller and a zero-elevator policy on the same step: the mean of
``|alpha - alpha_ref|`` over the 2000 simulation steps. It prints both errors and their ratio and
writes ``results/f16_step_tracking.png`` (alpha, alpha_ref, pitch rate and elevator over the
evaluation episode) and ``results/f16_step_tracking.json``.

Two choices of the controller's interface, both of the kind a flight-control engineer makes:

* The plant is simulated at 100 Hz (the env's ``dt = 0.01 s``); the controller runs at 20 Hz:
  :class:`HoldCommand` holds each elevator command for 5 simulation steps and returns the mean of
  their rewards. Discounting with ``gamma = 0.99`` per control step then looks about 5 s ahead,
  which the slow mode of the short-period model (time constant about 5 s) needs.
* :class:`ScaleObservation` divides the observation by typical magnitudes (5 deg, 10 deg/s,
  25 deg, 5 deg, 5 deg), so that the networks see inputs of order one.

The evaluation runs the unwrapped env at 100 Hz with the same 20 Hz command hold.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import super_sac
from super_sac.envs import F16_ENV_ID

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
OBS_SCALE = np.array([5.0, 10.0, 25.0, 5.0, 5.0], dtype=np.float32)


class HoldCommand(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Hold each action for ``steps`` env steps (a slower controller over a faster simulation).

    The reward is the mean of the held steps' rewards, so its scale does not change.

    :param env: the env.
    :param steps: env steps per action.
    """

    def __init__(self, env: gym.Env, steps: int = 5) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, steps=steps)
        gym.Wrapper.__init__(self, env)
        self.steps = int(steps)

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        rewards = []
        for _ in range(self.steps):
            obs, reward, terminated, truncated, info = self.env.step(action)
            rewards.append(reward)
            if terminated or truncated:
                break
        return obs, float(np.mean(rewards)), terminated, truncated, info


class ScaleObservation(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Divide the F-16 observation by :data:`OBS_SCALE`.

    :param env: the F-16 env (possibly wrapped).
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.ObservationWrapper.__init__(self, env)
        self.observation_space = gym.spaces.Box(
            env.observation_space.low / OBS_SCALE,
            env.observation_space.high / OBS_SCALE,
            dtype=np.float32,
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return (observation / OBS_SCALE).astype(np.float32)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--episodes", type=int, default=60, help="training episodes (20 s each)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--amplitude", type=float, default=5.0, help="step height in degrees")
    p.add_argument("--hold", type=int, default=5, help="simulation steps per control step")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--run-dir", type=Path, default=HERE / "runs" / "f16_sac", help="model folder")
    p.add_argument("--results", type=Path, default=HERE / "results", help="plot and numbers")
    return p.parse_args(argv)


def make_env(amplitude: float, hold: int) -> gym.Env:
    """The training env: the registered F-16 env on a step reference, held and scaled."""
    base = gym.make(
        F16_ENV_ID, number_time_steps=2000, reference_signal="step", reference_amplitude=amplitude
    )
    return ScaleObservation(HoldCommand(base, steps=hold))


def evaluate(
    policy: Callable[[np.ndarray], np.ndarray], amplitude: float, hold: int
) -> dict[str, np.ndarray]:
    """One step-reference episode at 100 Hz; ``policy`` maps a raw observation to a command and
    is queried every ``hold`` steps.

    :return: time, alpha, alpha_ref, q and elevator traces, and ``error`` = |alpha - alpha_ref|.
    """
    env = super_sac.envs.LinearLongitudinalF16(
        number_time_steps=2000, reference_signal="step", reference_amplitude=amplitude
    )
    obs, _ = env.reset(seed=0)
    rows, step, done = [], 0, False
    while not done:
        if step % hold == 0:
            command = policy(obs)
        obs, _, terminated, truncated, info = env.step(command)
        rows.append([info["time"], obs[0], obs[3], obs[1], obs[2]])
        step += 1
        done = terminated or truncated
    t, alpha, ref, q, elevator = np.asarray(rows, dtype=np.float64).T
    return {"time": t, "alpha": alpha, "alpha_ref": ref, "q": q, "elevator": elevator,
            "error": np.abs(alpha - ref)}  # fmt: skip


def plot(sac_trace: dict[str, np.ndarray], zero_trace: dict[str, np.ndarray], path: Path) -> None:
    """alpha and alpha_ref, pitch rate and elevator over the evaluation episode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = sac_trace["time"]
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    axes[0].plot(t, sac_trace["alpha_ref"], "k--", label=r"$\alpha_{ref}$")
    axes[0].plot(t, sac_trace["alpha"], "C0", label=r"$\alpha$, SAC")
    axes[0].plot(t, zero_trace["alpha"], "C3:", label=r"$\alpha$, zero elevator")
    axes[0].set_ylabel("angle of attack [deg]")
    axes[1].plot(t, sac_trace["q"], "C0")
    axes[1].set_ylabel("pitch rate q [deg/s]")
    axes[2].plot(t, sac_trace["elevator"], "C0", label="elevator, SAC")
    for bound in (-25.0, 25.0):
        axes[2].axhline(bound, color="grey", linestyle=":", linewidth=1)
    axes[2].set_ylabel("elevator [deg]")
    axes[2].set_xlabel("time [s]")
    axes[0].legend(loc="lower right")
    err_sac, err_zero = sac_trace["error"].mean(), zero_trace["error"].mean()
    axes[0].set_title(
        "F-16 angle-of-attack step, reloaded SAC controller\n"
        rf"mean $|\alpha - \alpha_{{ref}}|$: {err_sac:.3f} deg (SAC), "
        f"{err_zero:.3f} deg (zero elevator)",
        fontsize=11,
    )
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def train(args: argparse.Namespace) -> tuple[super_sac.SAC, dict[str, Any], float]:
    env = make_env(args.amplitude, args.hold)
    sac = super_sac.SAC(
        env,
        batch_size=128,
        memory_capacity=200_000,
        lr=1e-3,
        policy_lr=1e-3,
        gamma=0.99,
        automatic_entropy_tuning=True,
        hidden_size=64,
        seed=args.seed,
    )
    start = time.perf_counter()
    stats = sac.train(args.episodes, warmup_steps=1_000)
    return sac, stats, time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    sac, stats, wall = train(args)
    folder = sac.save(args.run_dir, save_gradients=True)
    controller = super_sac.SAC.from_pretrained(folder, env=make_env(args.amplitude, args.hold))
    sac_trace = evaluate(
        lambda obs: controller.select_action(obs / OBS_SCALE, evaluate=True), args.amplitude,
        args.hold,
    )  # fmt: skip
    zero_trace = evaluate(lambda obs: np.zeros(1, np.float32), args.amplitude, args.hold)
    err_sac, err_zero = float(sac_trace["error"].mean()), float(zero_trace["error"].mean())
    png = args.results / "f16_step_tracking.png"
    plot(sac_trace, zero_trace, png)
    summary = {
        "mean_abs_error_sac_deg": err_sac,
        "mean_abs_error_zero_elevator_deg": err_zero,
        "improvement_ratio": err_zero / err_sac,
        "final_abs_error_sac_deg": float(sac_trace["error"][-1]),
        "elevator_peak_to_peak_last_10s_deg": float(np.ptp(sac_trace["elevator"][-1000:])),
        "training_wall_seconds": wall,
        "training_episodes": args.episodes,
        "env_steps_at_100_hz": args.episodes * 2000,
        "control_steps": sac.total_steps,
        "updates": stats["updates"],
        "last_episode_reward": stats["episode_rewards"][-1],
        "seed": args.seed,
        "torch_threads": args.threads,
        "model_folder": os.path.relpath(folder, REPO),
        "plot": os.path.relpath(png, REPO),
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "f16_step_tracking.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"mean |alpha - alpha_ref| over 20 s: SAC {err_sac:.3f} deg, zero elevator "
        f"{err_zero:.3f} deg, ratio {err_zero / err_sac:.1f}x; training {wall:.0f} s "
        f"({args.episodes} episodes, {stats['updates']} updates); plot: {png}"
    )
    return summary


if __name__ == "__main__":
    main()
