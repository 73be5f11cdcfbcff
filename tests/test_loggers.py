"""The wandb logger: one run per run directory across resumes, one x-axis per metric group, the
``reinit`` setting of each wandb version (offline: ``WANDB_MODE=offline``)."""

import pytest

from super_sac.loggers import WANDB_ID_FILE, WandbLogger, _reinit_setting


@pytest.fixture
def wandb(monkeypatch, tmp_path):
    module = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    return module


def _recording(logger: WandbLogger) -> list[tuple[dict, dict]]:
    calls: list[tuple[dict, dict]] = []
    logger.run.log = lambda data, **kw: calls.append((dict(data), kw))
    return calls


@pytest.mark.parametrize(
    "version, expected",
    [
        ("0.16.0", True),
        ("0.19.9", True),
        ("0.19.10", "finish_previous"),
        ("0.31.0rc1", "finish_previous"),
    ],
)
def test_reinit_is_the_string_where_wandb_deprecates_the_bool(version, expected):
    assert _reinit_setting(version) == expected


def test_a_resumed_run_directory_logs_to_the_same_wandb_run(wandb, tmp_path):
    """Only a resume continues the wandb run whose id the folder holds (a new run in a folder
    left by a run killed early starts its own)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    first = WandbLogger(run_dir, None, "p", "n", {"lr": 1.0})
    run_id = first.run.id
    first.close()
    assert (run_dir / WANDB_ID_FILE).read_text() == run_id
    fresh = WandbLogger(run_dir, None, "p", "n", {"lr": 1.0})  # a new run in that folder
    assert fresh.run.id != run_id and (run_dir / WANDB_ID_FILE).read_text() == fresh.run.id
    fresh.close()
    (run_dir / WANDB_ID_FILE).write_text(run_id)
    again = WandbLogger(run_dir, None, "p", "n", {"lr": 1.0}, resume=True)
    assert again.run.id == run_id
    calls = _recording(again)
    again.log({"critic/loss": 1.0}, 7)
    assert calls == [({"critic/loss": 1.0}, {"step": 7})]  # one growing step: passed as is
    again.close()


def test_metric_groups_on_their_own_axes_are_logged_beside_their_step(wandb, tmp_path):
    """The quick-start logs losses against updates and returns against env steps; wandb drops
    a logged step smaller than one before, so each group carries its own axis instead."""
    axes = {"loss/": "updates", "train/": "env_steps"}
    logger = WandbLogger(None, None, "p", None, {}, step_metrics=axes)
    calls = _recording(logger)
    logger.log({"loss/qf1": 0.5, "loss/qf2": 0.25}, 202)
    logger.log({"train/episode_reward": -3.0}, 200)
    assert calls == [
        ({"loss/qf1": 0.5, "loss/qf2": 0.25, "updates": 202}, {}),
        ({"train/episode_reward": -3.0, "env_steps": 200}, {}),
    ]
    logger.close()


def test_the_quick_start_logs_losses_against_updates_and_returns_against_env_steps(wandb):
    import gymnasium as gym

    from super_sac import SAC

    sac = SAC(gym.make("Pendulum-v1"), hidden_size=16, batch_size=8, updates_per_step=2,
              log_every_updates=1, wandb_project="p")  # fmt: skip
    (logger,) = sac._loggers
    calls = _recording(logger)
    sac.train(1, max_steps=10, verbose=False)
    axes = [(sorted(k for k in data if k in ("updates", "env_steps")), kw) for data, kw in calls]
    # 2 updates a step from the 8th step (a batch): updates 1..6, then the episode's return
    assert axes == [(["updates"], {})] * 6 + [(["env_steps"], {})]
    assert [data["updates"] for data, _ in calls[:-1]] == [1, 2, 3, 4, 5, 6]
    assert calls[-1][0]["env_steps"] == 10
    sac.close()


def test_a_resumed_wandb_run_skips_the_steps_it_already_holds(wandb, tmp_path):
    logger = WandbLogger(None, None, "p", None, {})
    calls = _recording(logger)
    logger._first_step = 500  # what an online wandb run reports after resuming at step 499
    logger.log({"critic/loss": 1.0}, 450)
    logger.log({"critic/loss": 2.0}, 500)
    assert calls == [({"critic/loss": 2.0}, {"step": 500})]
    logger.close()


def test_the_training_scripts_say_in_one_line_that_wandb_is_missing(monkeypatch, capsys):
    import sys
    from pathlib import Path

    from super_sac import cli

    monkeypatch.setitem(sys.modules, "wandb", None)
    monkeypatch.setenv("SSAC_WANDB_ACCOUNT", "me")
    monkeypatch.setenv("SSAC_WANDB_PROJECT", "p")
    gym_dir = Path(__file__).resolve().parents[1] / "experiments" / "gym"
    argv = ["--config", "sac.gin", "--steps", "5", "--logging", "wandb", "--dry_run"]
    with pytest.raises(SystemExit) as stop:
        cli.cli(lambda: cli.train_gym(argv, search_dirs=[gym_dir]))
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: logging_method='wandb' needs the wandb package")
    assert "Traceback" not in err
