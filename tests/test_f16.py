"""The F-16 pitch-tracking env: discretisation, actuator limits, references, episode ends."""

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest

import super_sac  # noqa: F401  (registers the env)
from super_sac.envs import F16_ENV_ID, F16_SEED_ENV_ID, LinearLongitudinalF16
from super_sac.envs.f16 import F16_A, F16_B

A = np.array([[-1.01887, 0.90506], [0.82225, -1.07741]])
B = np.array([[-0.00215], [-0.17555]])


def taylor_zoh(a, b, dt, terms=12):
    """Ad = sum (A dt)^k / k!,  Bd = sum A^k dt^(k+1) / (k+1)! B (independent of matrix_exp)."""
    ad = np.zeros_like(a)
    integral = np.zeros_like(a)
    power = np.eye(a.shape[0])
    for k in range(terms):
        ad += power * dt**k / math.factorial(k)
        integral += power * dt ** (k + 1) / math.factorial(k + 1)
        power = power @ a
    return ad, integral @ b


def test_model_matrices_are_the_stevens_lewis_short_period():
    np.testing.assert_array_equal(F16_A, A)
    np.testing.assert_array_equal(F16_B, B)


def test_zoh_matrices_match_a_taylor_series():
    env = LinearLongitudinalF16(dt=0.01)
    ad, bd = taylor_zoh(A, B, 0.01)
    # torch's float64 matrix_exp agrees with the series to about 1e-12 for this small A dt
    np.testing.assert_allclose(env.Ad, ad, rtol=0, atol=1e-11)
    np.testing.assert_allclose(env.Bd, bd, rtol=0, atol=1e-12)
    # low-order sanity: Ad ~ I + A dt; Bd ~ (I dt + A dt^2 / 2) B, whose second-order term is
    # what gives alpha its small direct response (A12 * B2 * dt^2 / 2 = -7.9e-6)
    np.testing.assert_allclose(env.Ad, np.eye(2) + A * 0.01, atol=1e-3)
    np.testing.assert_allclose(env.Bd, (np.eye(2) * 0.01 + A * 0.01**2 / 2) @ B, rtol=5e-3)


def test_one_step_against_a_hand_computed_discrete_step():
    env = LinearLongitudinalF16(initial_state=(2.0, -1.0, 3.0), reference_amplitude=5.0)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, np.float32([2.0, -1.0, 3.0, 5.0, 3.0]))
    ad, bd = taylor_zoh(A, B, 0.01)
    obs, reward, terminated, truncated, info = env.step(np.array([3.4], dtype=np.float32))
    # |3.4 - 3.0| = 0.4 is within one step of the rate limit (60 deg/s * 0.01 s = 0.6 deg)
    delta = float(np.float32(3.4))
    x1 = ad @ np.array([2.0, -1.0]) + bd[:, 0] * delta
    np.testing.assert_allclose(env.state, x1, rtol=0, atol=1e-10)
    assert env.elevator == pytest.approx(delta, abs=1e-12)
    np.testing.assert_allclose(obs, np.float32([x1[0], x1[1], delta, 5.0, 5.0 - x1[0]]), rtol=1e-6)
    assert reward == pytest.approx(-abs(x1[0] - 5.0) - 0.1 * abs(x1[1]), abs=1e-10)
    assert not terminated and not truncated
    assert info["time"] == pytest.approx(0.01)


def test_zero_elevator_from_trim_keeps_alpha_at_zero():
    env = LinearLongitudinalF16(number_time_steps=50)
    env.reset(seed=0)
    for _ in range(50):
        obs, reward, *_ = env.step(np.zeros(1, dtype=np.float32))
    assert obs[0] == 0.0 and obs[1] == 0.0 and reward == -5.0


def test_rate_limit_moves_the_elevator_at_most_0_6_degrees_per_step():
    env = LinearLongitudinalF16()
    env.reset(seed=0)
    positions = [env.step(np.array([25.0], dtype=np.float32))[0][2] for _ in range(45)]
    expected = [min(0.6 * (k + 1), 25.0) for k in range(45)]
    np.testing.assert_allclose(positions, expected, atol=1e-5)
    # a command within reach is met exactly, in either direction
    env.reset(seed=0)
    assert env.step(np.array([0.3], dtype=np.float32))[0][2] == pytest.approx(0.3, abs=1e-7)
    assert env.step(np.array([-10.0], dtype=np.float32))[0][2] == pytest.approx(-0.3, abs=1e-6)


def test_magnitude_limit_applies_after_the_rate_limit():
    env = LinearLongitudinalF16(initial_state=(0.0, 0.0, 24.8))
    env.reset(seed=0)
    # the rate limit allows 24.8 + 0.6 = 25.4; the stop holds it at 25
    assert env.step(np.array([100.0], dtype=np.float32))[0][2] == 25.0
    assert env.step(np.array([100.0], dtype=np.float32))[0][2] == 25.0
    assert env.step(np.array([-100.0], dtype=np.float32))[0][2] == pytest.approx(24.4, abs=1e-5)
    assert env.action_space.low[0] == -25.0 and env.action_space.high[0] == 25.0


def test_episode_is_truncated_at_number_time_steps_and_never_terminated():
    env = LinearLongitudinalF16(number_time_steps=5, initial_state=(80.0, 0.0, 0.0))
    env.reset(seed=0)
    flags = [env.step(np.zeros(1, dtype=np.float32))[2:4] for _ in range(5)]
    assert flags == [(False, False)] * 4 + [(False, True)]


def test_optional_divergence_termination():
    env = LinearLongitudinalF16(
        initial_state=(80.0, 0.0, 0.0), terminate_on_divergence=True, divergence_bound=45.0
    )
    env.reset(seed=0)
    _, _, terminated, truncated, _ = env.step(np.zeros(1, dtype=np.float32))
    assert terminated and not truncated


def test_step_reference_switches_on_at_step_time():
    env = LinearLongitudinalF16(reference_amplitude=3.0, step_time=0.5)
    obs, _ = env.reset(seed=0)
    refs = [obs[3]] + [env.step(np.zeros(1, dtype=np.float32))[0][3] for _ in range(60)]
    assert refs[49] == 0.0 and refs[50] == 3.0 and refs[60] == 3.0


def test_sine_reference_and_error_channel():
    env = LinearLongitudinalF16(
        reference_signal="sine", reference_amplitude=2.0, reference_period=1.0
    )
    env.reset(seed=0)
    for _ in range(25):  # t = 0.25 s: a quarter period
        obs, *_ = env.step(np.array([-5.0], dtype=np.float32))
    assert obs[3] == pytest.approx(2.0, abs=1e-6)
    assert obs[4] == pytest.approx(obs[3] - obs[0], abs=1e-6)


def test_random_steps_reference_is_piecewise_constant_and_seeded():
    def reference(seed):
        env = LinearLongitudinalF16(
            number_time_steps=1000, reference_signal="random_steps", random_step_interval=2.0
        )
        env.reset(seed=seed)
        return env.reference

    ref = reference(3)
    levels = ref[::200]
    assert len(np.unique(levels)) == len(levels) == 6
    assert np.all(np.abs(ref) <= 5.0)
    for k, level in enumerate(levels[:-1]):
        np.testing.assert_array_equal(ref[200 * k : 200 * (k + 1)], level)
    np.testing.assert_array_equal(ref, reference(3))
    assert not np.array_equal(ref, reference(4))


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="reference_signal"):
        LinearLongitudinalF16(reference_signal="ramp")
    with pytest.raises(ValueError, match="number_time_steps"):
        LinearLongitudinalF16(number_time_steps=0)
    with pytest.raises(ValueError, match="number_time_steps must be a whole number, got 10.7"):
        LinearLongitudinalF16(number_time_steps=10.7)
    with pytest.raises(ValueError, match=r"initial_state must be three finite numbers"):
        LinearLongitudinalF16(initial_state=(1.0, 0.0))
    with pytest.raises(ValueError, match=r"elevator 40.0 deg lies beyond the stops \(.* 25.0"):
        LinearLongitudinalF16(initial_state=(0.0, 0.0, 40.0))
    with pytest.raises(ValueError, match="draws nothing .*plot its episodes"):
        LinearLongitudinalF16(render_mode="rgb_array")
    env = LinearLongitudinalF16()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array([np.nan]))
    with pytest.raises(ValueError, match=r"one elevator command \(shape \(1,\)\), got 2 values"):
        env.step(np.array([1.0, 30.0]))


def test_registered_env_passes_gymnasiums_checker():
    env = gym.make(F16_ENV_ID, number_time_steps=10)
    assert isinstance(env.unwrapped, LinearLongitudinalF16)
    assert env.unwrapped.number_time_steps == 10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # infinite observation bounds, unnormalised actions
        from gymnasium.utils.env_checker import check_env

        check_env(env.unwrapped)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (5,) and obs.dtype == np.float32
    # the quick-start interface's own line, gym.make('LinearLongitudinalF16-v0', ...), works too
    seed_env = gym.make(F16_SEED_ENV_ID, number_time_steps=10)
    assert F16_SEED_ENV_ID == "LinearLongitudinalF16-v0"
    np.testing.assert_array_equal(seed_env.reset(seed=1)[0], obs)
