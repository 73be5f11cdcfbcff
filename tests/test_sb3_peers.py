"""SB3 peers as sweep trials (experiments/benchmarks/sb3_trial.py): the trial protocol, the
files a report reads, evaluations seeded like ours, and the errors of a bad peer file."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "experiments" / "benchmarks"
PEERS = BENCHMARKS / "peers"


@pytest.fixture(scope="module")
def trial():
    """The trial script as a module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        import sb3_trial

        yield sb3_trial


def test_an_sb3_sweep_runs_through_the_runner_and_reports_beside_ours(tmp_path):
    from super_sac.sweep.grid import FINISHED, Grid
    from super_sac.sweep.local import run_local
    from super_sac.sweep.report import build_report

    bindings = ["sb3.eval_interval = 100", "sb3.eval_episodes = 1"]
    grid = Grid.make(
        [str(PEERS / "sb3_sac.gin")],
        ["Pendulum-v1"],
        "0-1",
        250,
        bindings,
        str(BENCHMARKS / "sb3_trial.py"),
    )
    import io

    out = io.StringIO()
    script = BENCHMARKS / "sb3_trial.py"
    results = run_local(grid, tmp_path / "sb3", script=script, out=out, workers=2)
    assert [r.status for r in results] == ["finished", "finished"], out.getvalue()
    for t in grid.trials(tmp_path / "sb3"):
        assert t.state() == FINISHED
        rows = (t.folder / "evaluations.csv").read_text().splitlines()
        # every 100 env steps and after the last one (250)
        assert [r.split(",")[0] for r in rows[1:]] == ["100", "200", "250"]
        hparams = json.loads((t.folder / "hparams.json").read_text())
        assert hparams["algo"] == "SAC" and hparams["seed"] == t.seed
        assert hparams["machine"]["cpu_count"] == os.cpu_count()  # where it ran
        assert hparams["hyperparams"]["batch_size"] == 256
    (row,) = build_report(tmp_path / "sb3")["rows"]
    assert row["config"] == "sb3_sac" and row["final"]["n"] == 2


def test_evaluations_start_from_the_states_our_loop_evaluates_from(trial, tmp_path, monkeypatch):
    from super_sac.collector import episode_seed
    from super_sac.reporting import EVAL_ENV_INDEX

    seeds = []

    def fake_evaluate(model, env, episodes, reset_seed):
        seeds.append(reset_seed)
        return {
            "return_mean": 0.0,
            "return_std": 0.0,
            "return_min": 0.0,
            "return_max": 0.0,
            "length_mean": 1.0,
        }

    monkeypatch.setattr(trial, "evaluate", fake_evaluate)
    settings = trial.sb3_settings(
        algo="SAC", hyperparams={"learning_starts": 1000}, eval_interval=50, eval_episodes=1
    )
    summary = trial.train(settings, "Pendulum-v1", 7, 120, tmp_path)
    assert seeds == [episode_seed(7, EVAL_ENV_INDEX, k) for k in range(3)]
    assert [h["env_steps"] for h in summary["eval_history"]] == [50, 100, 120]


def test_sb3_is_evaluated_from_exactly_the_start_states_of_our_loop(trial):
    """The same policy through our evaluation path and the SB3 trial's gives the same returns."""
    import gymnasium as gym
    import numpy as np

    from super_sac.evaluation import evaluate_agent

    class Zero:  # an SB3-like model and an agent-like object acting alike (zero torque)
        training = False

        def predict(self, obs, deterministic=True):
            return np.zeros(1, dtype=np.float32), None

        def forward(self, obs):
            return np.zeros(1, dtype=np.float32)

        def eval(self):
            pass

        def train(self, mode=True):
            pass

    ours_env, sb3_env = gym.make("Pendulum-v1"), gym.make("Pendulum-v1")
    ours_env.reset(seed=3)  # what super_sac.reporting.evaluate does before evaluate_agent
    ours = evaluate_agent(Zero(), ours_env, 3)
    theirs = trial.evaluate(Zero(), sb3_env, 3, reset_seed=3)
    assert theirs == pytest.approx(ours)
    assert theirs["return_min"] != theirs["return_max"]  # three different start states
    assert trial.evaluate(Zero(), sb3_env, 3, reset_seed=3) == theirs  # repeatable


def test_bad_peer_settings_and_resume_are_refused_with_the_reason(trial, tmp_path):
    with pytest.raises(ValueError, match="sb3.algo = 'PPO': expected one of SAC, TD3"):
        trial.sb3_settings(algo="PPO")
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "sb3_trial.py"),
            "--resume",
            str(tmp_path),
            "--steps",
            "10",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0 and "keep no checkpoints" in proc.stderr


def test_a_sweep_preflight_dry_runs_the_peer_and_stops_a_misspelt_setting(trial, tmp_path):
    import torch

    from super_sac.sweep.grid import Grid
    from super_sac.sweep.local import preflight

    script = BENCHMARKS / "sb3_trial.py"
    config = str(PEERS / "sb3_sac.gin")
    typo = ["sb3.hyperparams = {'learning_rat': 0.001}"]
    grid = Grid.make([config], ["Pendulum-v1"], "0", 100, typo, str(script))
    with pytest.raises(ValueError, match="(?s)sb3_sac.gin on Pendulum-v1 would fail.*learning_rat"):
        preflight(grid, tmp_path / "sweep", script, sys.executable)
    threads = torch.get_num_threads()  # main sets the trial's thread count
    try:
        argv = ["--config", config, "--env", "Pendulum-v1", "--run_dir", str(tmp_path / "run")]
        assert trial.main([*argv, "--steps", "100", "--dry_run"]) == {"dry_run": True}
    finally:
        torch.set_num_threads(threads)
    assert not (tmp_path / "run").exists() and not (tmp_path / "sweep").exists()


def test_a_peer_that_collects_in_chunks_stops_at_the_step_budget(trial, tmp_path):
    # DQN collects train_freq = 64 steps per rollout: without the stop it would run to 128
    settings = trial.sb3_settings(
        algo="DQN",
        hyperparams={"learning_starts": 10, "train_freq": 64, "batch_size": 8},
        eval_interval=40,
        eval_episodes=1,
    )
    summary = trial.train(settings, "CartPole-v1", 0, 100, tmp_path)
    assert summary["env_steps"] == 100
    assert [h["env_steps"] for h in summary["eval_history"]] == [40, 80, 100]


def test_minatar_peer_plays_our_game_from_our_start_states_with_the_papers_network(trial):
    """A MinAtar game as the env: the same start states and returns as our MinAtar loop's
    evaluation for one fixed policy, and the MinAtar paper's DQN body under SB3's Q head."""
    pytest.importorskip("minatar")
    import numpy as np

    from super_sac.evaluation import evaluate_agent
    from super_sac.wrappers import make_minatar_env

    class Cycle:  # acts 0, 1, 2, 0, ... by the step count of its episode; SB3- and agent-like
        training = False

        def __init__(self):
            self.t = 0

        def predict(self, obs, deterministic=True):
            self.t += 1
            return np.array(self.t % 3), None

        def forward(self, obs):
            return self.predict(obs)[0]

        def eval(self):
            pass

        def train(self, mode=True):
            pass

    ours_env = make_minatar_env("breakout", max_episode_steps=10_000)  # train_minatar.py's env
    ours_env.reset(seed=11)
    ours = evaluate_agent(Cycle(), ours_env, 4)
    theirs_env = trial.make_env("breakout")
    assert theirs_env.observation_space.shape == (10, 10, 4)
    theirs = trial.evaluate(Cycle(), theirs_env, 4, reset_seed=11)
    assert theirs == pytest.approx(ours)
    assert theirs["return_min"] != theirs["return_max"]  # the four episodes differ
    # another seed, other start states (the seed reaches the game's random spawns; seed 12's
    # four episodes happen to have seed 11's returns and lengths, 13's do not)
    assert trial.evaluate(Cycle(), trial.make_env("breakout"), 4, reset_seed=13) != theirs
    import gin

    settings = trial.load_settings(PEERS / "sb3_dqn_minatar.gin")
    gin.clear_config()  # the bad settings below must not pick up the file's bindings
    model = trial.build_model(settings, theirs_env, 0)
    body = model.q_net.features_extractor
    assert (body.conv.in_channels, body.conv.out_channels, body.conv.kernel_size) == (4, 16, (3, 3))
    assert (body.hidden.in_features, body.hidden.out_features) == (16 * 8 * 8, 128)
    (head,) = model.q_net.q_net  # net_arch = []: one linear layer to the 3 actions
    assert (head.in_features, head.out_features) == (128, 3)
    optimizer = model.policy.optimizer
    assert type(optimizer).__name__ == "RMSprop" and optimizer.defaults["centered"]
    assert optimizer.defaults["lr"] == 2.5e-4 and optimizer.defaults["momentum"] == 0.95
    with pytest.raises(ValueError, match="sb3.features_extractor = 'nature': expected None or"):
        trial.sb3_settings(algo="DQN", features_extractor="nature")
    with pytest.raises(ValueError, match="sb3.optimizer = 'Adamm': not a torch.optim class"):
        trial.sb3_settings(algo="DQN", optimizer="Adamm")
    with pytest.raises(ValueError, match="optimizer_kwargs without sb3.optimizer"):
        trial.sb3_settings(algo="DQN", optimizer_kwargs={"eps": 0.01})
    with pytest.raises(ValueError, match="sets 'lr': give the learning rate as"):
        trial.sb3_settings(algo="DQN", optimizer="RMSprop", optimizer_kwargs={"lr": 0.1})


def test_minatar_peer_trains_and_evaluates_through_the_trial(trial, tmp_path):
    pytest.importorskip("minatar")
    import gin

    settings = trial.load_settings(
        PEERS / "sb3_dqn_minatar.gin",
        ["sb3.eval_interval = 150", "sb3.eval_episodes = 1"],
    )
    gin.clear_config()
    settings["hyperparams"].update(learning_starts=100, target_update_interval=50)
    summary = trial.train(settings, "space_invaders", 0, 300, tmp_path)
    assert [h["env_steps"] for h in summary["eval_history"]] == [150, 300]
    rows = (tmp_path / "evaluations.csv").read_text().splitlines()
    assert len(rows) == 3 and rows[0].startswith("env_steps,")


@pytest.mark.parametrize("peer", sorted(PEERS.glob("sb3_*.gin")), ids=lambda p: p.stem)
def test_every_peer_file_parses(trial, peer):
    import gin

    settings = trial.load_settings(peer, ["sb3.eval_episodes = 3"])
    gin.clear_config()
    assert settings["algo"] in trial.ALGOS and settings["source"]
    assert settings["eval_episodes"] == 3 and settings["hyperparams"]["learning_rate"] > 0
    if peer.stem.endswith("_mujoco"):  # rl-zoo's warm-up for MuJoCo, over the included file
        assert settings["hyperparams"]["learning_starts"] == 10000


def test_speed_ratios_are_summarised_with_an_interval_over_rounds():
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        import bench_utils

    out = bench_utils.ratio_interval([1.5, 1.7, 1.6, 1.8])
    assert out["mean"] == pytest.approx(1.65)
    assert (out["min"], out["max"]) == (1.5, 1.8)
    # resampled means stay within the range and the interval holds the mean
    assert 1.5 <= out["ci_low"] < 1.65 < out["ci_high"] <= 1.8
    assert bench_utils.ratio_interval([2.0]) == {
        "mean": 2.0,
        "ci_low": 2.0,
        "ci_high": 2.0,
        "min": 2.0,
        "max": 2.0,
    }
    with pytest.raises(ValueError, match="at least one round"):
        bench_utils.ratio_interval([])
    assert bench_utils.format_ratio_interval([2.0, 2.0]) == "2.00 [2.00, 2.00]"
    low, high = out["ci_low"], out["ci_high"]
    assert bench_utils.format_ratio_interval([1.5, 1.7, 1.6, 1.8]) == (
        f"1.65 [{low:.2f}, {high:.2f}]"
    )


def test_benchmark_records_name_the_processor_they_ran_on(monkeypatch):
    """Speed ratios differ between processors: every benchmark JSON's ``versions`` holds the
    processor's record, the one the sweeps' manifests hold."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_utils

    from super_sac.utils import machine_info

    record = bench_utils.versions()
    assert record["processor"] == machine_info()
    assert record["processor"]["cpu_count"] == os.cpu_count()
    assert json.loads(json.dumps(record)) == record  # written as JSON as it is


def test_the_minatar_random_reference_plays_the_chosen_game_and_writes_nothing(
    tmp_path, monkeypatch, capsys
):
    """``minatar_breakout.py --random_only``: the random-policy row of the MinAtar tables."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import minatar_breakout as bench

    monkeypatch.setattr(bench.bench_utils, "RESULTS_DIR", tmp_path)
    out = bench.main(["--game", "space_invaders", "--random_only", "--random_episodes", "4"])
    assert out == {"random": bench.run_random(0, 4, "space_invaders")}
    assert out["random"]["episodes"] == 4
    assert out["random"] != bench.run_random(0, 4, "breakout")  # the game reaches the env
    assert "random policy on space_invaders: " in capsys.readouterr().out
    assert not any(tmp_path.iterdir())
