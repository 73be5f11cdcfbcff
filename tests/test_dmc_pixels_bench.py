"""The pixel learning benchmark's untrained reference is built under the runs' bindings."""

from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "experiments" / "benchmarks"


class _Built(Exception):
    """Stops the reference once its agent would be built."""


def test_untrained_reference_uses_the_gin_bindings(monkeypatch):
    import gin

    from super_sac import cli

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    bench = pytest.importorskip("dmc_pixels")
    seen = {}

    def agent_under_config(env, device):
        seen["conv_init"] = gin.query_parameter("DrQPixelEncoder.conv_init")
        seen["pixel_shift"] = gin.query_parameter("DrQPixelEncoder.pixel_shift")
        raise _Built

    monkeypatch.setattr(cli, "make_dmc", lambda *a, **k: object())
    monkeypatch.setattr(cli, "pixel_agent", agent_under_config)
    args = bench.parse_args(["--config", "drqv1.gin"])
    with pytest.raises(_Built):
        bench.untrained_return(args, seed=0)
    assert seen == {"conv_init": "orthogonal", "pixel_shift": 0.0}  # drqv1.gin's own
    args = bench.parse_args(
        [
            "--config",
            "drqv1.gin",
            "--gin_bindings",
            "DrQPixelEncoder.conv_init = 'delta_orthogonal'",
            "--gin_bindings",
            "DrQPixelEncoder.pixel_shift = -0.5",
        ]
    )
    with pytest.raises(_Built):
        bench.untrained_return(args, seed=0)
    assert seen == {"conv_init": "delta_orthogonal", "pixel_shift": -0.5}
    gin.clear_config()
