"""The pixel speed benchmark's pure parts: its argument checks, the update breakdown's
arithmetic and the DrQ-architecture features extractor it gives SB3."""

from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "experiments" / "benchmarks"


@pytest.fixture(scope="module")
def speed():
    """The benchmark script as a module (it imports its sibling bench_utils)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        yield pytest.importorskip("dmc_pixel_speed")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--sizes", "32"], "at least 36 px"),
        (["--collect", "7"], "positive even number"),
        (["--warmup", "100", "--batches", "128"], "largest batch"),
        (["--sides", "ours,sb4"], "unknown"),
    ],
)
def test_bad_arguments_are_refused_with_the_reason(speed, argv, message, capsys):
    with pytest.raises(SystemExit):
        speed.parse_args(argv)
    assert message in capsys.readouterr().err


def test_phase_breakdown_splits_the_steps_into_their_parts(speed):
    timer = speed.PhaseTimer()
    timer.seconds.update({
        "replay sample": 0.2, "augmentation (random shift)": 0.4,
        "critic_step total": 5.0, "critic: TD target (no grad)": 1.0,
        "critic: zero_grad + backward": 2.0, "critic: optimizer step": 0.5,
        "target update (Polyak)": 0.1, "pg_actor_step total": 2.0,
        "actor: zero_grad + backward": 0.3, "actor: optimizer step": 0.2,
    })
    rows = dict(speed.phase_breakdown(timer, total=8.0, updates=10))
    # forward = step total - its timed parts, in ms per update (seconds * 1000 / 10 updates)
    assert rows["critic: forward + loss"] == pytest.approx(1000 * (5.0 - 3.6) / 10)
    assert rows["actor: forward + loss"] == pytest.approx(1000 * (2.0 - 0.5) / 10)
    assert rows["rest of Trainer.update (logs, finite checks)"] == pytest.approx(
        1000 * (8.0 - 0.2 - 0.4 - 5.0 - 2.0) / 10)
    assert sum(rows.values()) == pytest.approx(800.0)


def test_drq_extractor_has_the_drq_encoder_shape(speed):
    torch = pytest.importorskip("torch")
    gym = pytest.importorskip("gymnasium")
    pytest.importorskip("stable_baselines3")
    space = gym.spaces.Box(0, 255, (9, 64, 64), dtype="uint8")
    extractor = speed.drq_extractor_class()(space, features_dim=50)
    # 64 -> 31 (3x3 stride 2) -> 29 -> 27 -> 25: 32 * 25 * 25 flat features
    assert extractor.head[0].in_features == 32 * 25 * 25
    out = extractor(torch.rand(2, 9, 64, 64))
    assert out.shape == (2, 50) and out.abs().max() <= 1.0
