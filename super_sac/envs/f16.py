"""Longitudinal pitch control of the F-16: a linear short-period model with an elevator actuator.

The plant is the short-period approximation of the F-16's longitudinal dynamics, linearised about
a steady level flight condition, in the form used by Stevens & Lewis ("Aircraft Control and
Simulation") and much of the flight-control literature that builds on it::

    d/dt [alpha, q] = A [alpha, q] + B delta

    A = [[-1.01887, 0.90506],      B = [[-0.00215],
         [ 0.82225, -1.07741]]          [-0.17555]]

with the angle of attack ``alpha`` in degrees, the pitch rate ``q`` in degrees per second and the
elevator deflection ``delta`` in degrees (a negative deflection pitches the nose up).

**Discretisation.** The model is sampled with a zero-order hold at ``dt`` (0.01 s by default):
``x_{k+1} = Ad x_k + Bd delta_{k+1}`` with ``Ad = expm(A dt)`` and
``Bd = (integral_0^dt expm(A s) ds) B``. Both come, exactly, from one matrix exponential of the
augmented matrix ``[[A, B], [0, 0]] * dt`` (its top-left block is ``Ad``, its top-right block
``Bd``), evaluated once per env in float64 with :func:`torch.linalg.matrix_exp`. ZOH is the exact
discretisation for a piecewise-constant input, which is what the actuator delivers over a step,
and it needs no SciPy.

**Actuator.** The action is the *commanded* elevator angle ``u`` in degrees. The elevator moves
toward it at most ``elevator_rate_limit * dt`` degrees per step (60 deg/s by default) and then
stays within ``+-elevator_limit`` (25 degrees)::

    delta_{k+1} = clip(delta_k + clip(u_k - delta_k, -rate * dt, rate * dt), -limit, limit)

The rate limit acts on the commanded change and the magnitude limit on the result, so a command
beyond the stops still drives the surface at full rate until it rests on the stop. The new
elevator position is held over the step that follows (the ZOH input above).

**Reference and reward.** A reference angle of attack ``alpha_ref`` is chosen by
``reference_signal``: ``"step"`` (``reference_amplitude`` from ``step_time`` seconds on),
``"sine"`` (``reference_amplitude * sin(2 pi t / reference_period)``) or ``"random_steps"``
(piecewise constant; a new level drawn uniformly from ``[-reference_amplitude,
reference_amplitude]`` every ``random_step_interval`` seconds, from the env's ``np_random``, so
``reset(seed=...)`` fixes it). The observation is
``[alpha, q, delta, alpha_ref, alpha_ref - alpha]`` (float32) and the reward
``-|alpha - alpha_ref| - 0.1 |q|``, both taken after the step.

**Episode end.** After ``number_time_steps`` steps the episode is *truncated* (a time limit,
so learners keep bootstrapping). It never terminates, unless ``terminate_on_divergence`` is set:
then ``|alpha| > divergence_bound`` degrees terminates it (off by default; the linear model has no
physical meaning that far out anyway).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

#: Short-period state matrix of the linearised F-16 (states alpha [deg], q [deg/s]).
F16_A = np.array([[-1.01887, 0.90506], [0.82225, -1.07741]], dtype=np.float64)
#: Elevator input matrix of the linearised F-16 (input delta [deg]).
F16_B = np.array([[-0.00215], [-0.17555]], dtype=np.float64)

REFERENCE_SIGNALS = ("step", "sine", "random_steps")


def zoh_discretise(a: np.ndarray, b: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact zero-order-hold discretisation of ``dx/dt = A x + B u``.

    ``expm([[A, B], [0, 0]] dt) = [[Ad, Bd], [0, I]]`` with ``Ad = expm(A dt)`` and
    ``Bd = integral_0^dt expm(A s) ds B``.

    :param a: ``(n, n)`` state matrix.
    :param b: ``(n, m)`` input matrix.
    :param dt: sampling period in seconds.
    :return: ``(Ad, Bd)`` as float64 arrays.
    """
    n, m = b.shape
    augmented = np.zeros((n + m, n + m), dtype=np.float64)
    augmented[:n, :n] = a
    augmented[:n, n:] = b
    expm = torch.linalg.matrix_exp(torch.from_numpy(augmented * dt)).numpy()
    return expm[:n, :n].copy(), expm[:n, n:].copy()


class LinearLongitudinalF16(gym.Env):
    """Track a reference angle of attack with the F-16's elevator (see the module docstring).

    Registered as ``super_sac/LinearLongitudinalF16-v0``.

    :param number_time_steps: steps per episode; the last one returns ``truncated=True``.
    :param dt: sampling period in seconds.
    :param reference_signal: ``"step"``, ``"sine"`` or ``"random_steps"``.
    :param reference_amplitude: step height, sine amplitude, or bound of the random levels, in
        degrees of angle of attack.
    :param step_time: when the ``"step"`` reference switches on, in seconds.
    :param reference_period: period of the ``"sine"`` reference, in seconds.
    :param random_step_interval: seconds between the levels of ``"random_steps"``.
    :param elevator_limit: elevator magnitude limit in degrees (the action space's bounds).
    :param elevator_rate_limit: elevator rate limit in degrees per second.
    :param initial_state: ``[alpha, q, delta]`` at reset (default zeros: trimmed flight).
    :param terminate_on_divergence: end the episode (``terminated=True``) once
        ``|alpha| > divergence_bound``.
    :param divergence_bound: that bound, in degrees.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        number_time_steps: int = 2000,
        dt: float = 0.01,
        reference_signal: str = "step",
        reference_amplitude: float = 5.0,
        step_time: float = 0.0,
        reference_period: float = 4.0,
        random_step_interval: float = 2.0,
        elevator_limit: float = 25.0,
        elevator_rate_limit: float = 60.0,
        initial_state: tuple[float, float, float] | None = None,
        terminate_on_divergence: bool = False,
        divergence_bound: float = 45.0,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        self._check_arguments(number_time_steps, dt, reference_signal, reference_period)
        if render_mode is not None:
            raise ValueError(
                f"the F-16 env draws nothing (render_mode={render_mode!r}); plot its episodes "
                "instead (experiments/aerospace/train_f16.py --plot), or leave render_mode unset"
            )
        self.render_mode = None
        self.number_time_steps = int(number_time_steps)
        self.dt = float(dt)
        self.reference_signal = reference_signal
        self.reference_amplitude = float(reference_amplitude)
        self.step_time = float(step_time)
        self.reference_period = float(reference_period)
        self.random_step_interval = float(random_step_interval)
        self.elevator_limit = float(elevator_limit)
        self.elevator_rate_limit = float(elevator_rate_limit)
        self.initial_state = self._checked_initial_state(initial_state, float(elevator_limit))
        self.terminate_on_divergence = bool(terminate_on_divergence)
        self.divergence_bound = float(divergence_bound)
        self.Ad, self.Bd = zoh_discretise(F16_A, F16_B, self.dt)
        limit = np.float32(self.elevator_limit)
        self.action_space = spaces.Box(-limit, limit, shape=(1,), dtype=np.float32)
        high = np.array([np.inf, np.inf, limit, np.inf, np.inf], dtype=np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.state = np.zeros(2)  # [alpha, q]
        self.elevator = 0.0
        self.time_step = 0
        self.reference = np.zeros(self.number_time_steps + 1)

    @staticmethod
    def _check_arguments(
        number_time_steps: int, dt: float, reference_signal: str, reference_period: float
    ) -> None:
        if isinstance(number_time_steps, bool) or not float(number_time_steps).is_integer():
            raise ValueError(f"number_time_steps must be a whole number, got {number_time_steps}")
        if number_time_steps < 1:
            raise ValueError(f"number_time_steps must be >= 1, got {number_time_steps}")
        if not dt > 0:
            raise ValueError(f"dt must be positive, got {dt}")
        if reference_signal not in REFERENCE_SIGNALS:
            raise ValueError(
                f"reference_signal must be one of {REFERENCE_SIGNALS}, got {reference_signal!r}"
            )
        if not reference_period > 0:
            raise ValueError(f"reference_period must be positive, got {reference_period}")

    @staticmethod
    def _checked_initial_state(
        initial_state: tuple[float, float, float] | None, elevator_limit: float
    ) -> np.ndarray:
        """``(alpha, q, elevator)`` at reset: three finite numbers, the elevator inside the
        stops."""
        if initial_state is None:
            return np.zeros(3)
        state = np.array(initial_state, dtype=np.float64)  # a copy: later edits do not reach it
        if state.shape != (3,) or not np.isfinite(state).all():
            raise ValueError(
                "initial_state must be three finite numbers (alpha [deg], q [deg/s], elevator "
                f"[deg]), got {initial_state!r}"
            )
        if abs(state[2]) > elevator_limit:
            raise ValueError(
                f"initial_state's elevator {state[2]} deg lies beyond the stops "
                f"(elevator_limit {elevator_limit} deg)"
            )
        return state

    # ------------------------------------------------------------------ reference
    def _make_reference(self) -> np.ndarray:
        """``alpha_ref`` at every time step ``0 .. number_time_steps`` of the episode."""
        t = np.arange(self.number_time_steps + 1) * self.dt
        amplitude = self.reference_amplitude
        if self.reference_signal == "step":
            # the small tolerance keeps a step_time that is a multiple of dt on its own step
            return np.where(t >= self.step_time - 1e-9, amplitude, 0.0)
        if self.reference_signal == "sine":
            return amplitude * np.sin(2.0 * math.pi * t / self.reference_period)
        steps_per_level = max(1, round(self.random_step_interval / self.dt))
        num_levels = self.number_time_steps // steps_per_level + 1
        levels = self.np_random.uniform(-amplitude, amplitude, size=num_levels)
        return levels[np.arange(self.number_time_steps + 1) // steps_per_level]

    # ------------------------------------------------------------------ gymnasium API
    def _observation(self) -> np.ndarray:
        alpha, q = self.state
        ref = self.reference[self.time_step]
        return np.array([alpha, q, self.elevator, ref, ref - alpha], dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode from ``initial_state``; a ``seed`` fixes the random reference.

        :param seed: seed of ``np_random`` (only ``"random_steps"`` draws from it).
        :param options: unused.
        """
        super().reset(seed=seed)
        self.state = self.initial_state[:2].astype(np.float64).copy()
        self.elevator = float(self.initial_state[2])
        self.time_step = 0
        self.reference = self._make_reference()
        return self._observation(), {"time": 0.0}

    def actuator(self, command: float) -> float:
        """The elevator position after one step toward ``command`` (rate, then magnitude limit).

        :param command: commanded elevator angle in degrees.
        """
        max_change = self.elevator_rate_limit * self.dt
        change = float(np.clip(command - self.elevator, -max_change, max_change))
        limit = self.elevator_limit
        return float(np.clip(self.elevator + change, -limit, limit))

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Move the elevator toward the commanded angle, then advance the airframe one ``dt``.

        :param action: ``(1,)`` commanded elevator angle in degrees.
        :return: observation, reward, terminated, truncated, info (``time`` in seconds,
            ``elevator`` position in degrees, ``alpha_ref``).
        """
        commands = np.asarray(action, dtype=np.float64).reshape(-1)
        if commands.size != 1:
            raise ValueError(
                f"the F-16 env takes one elevator command (shape (1,)), got {commands.size} "
                f"values: {np.asarray(action).tolist()}"
            )
        command = float(commands[0])
        if not math.isfinite(command):
            raise ValueError(f"the elevator command must be finite, got {command}")
        self.elevator = self.actuator(command)
        self.state = self.Ad @ self.state + self.Bd[:, 0] * self.elevator
        self.time_step += 1
        alpha, q = self.state
        ref = self.reference[self.time_step]
        reward = -abs(alpha - ref) - 0.1 * abs(q)
        terminated = self.terminate_on_divergence and abs(alpha) > self.divergence_bound
        truncated = self.time_step >= self.number_time_steps
        info = {"time": self.time_step * self.dt, "elevator": self.elevator, "alpha_ref": ref}
        return self._observation(), float(reward), bool(terminated), bool(truncated), info
