"""d3rlpy peers as offline sweep trials (experiments/benchmarks/d3rlpy_trial.py): the trial
protocol, the files a report reads, evaluations from the start states our loop uses, AWAC's
critic temperature, and the errors of a bad peer file or a bad sweep."""

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from super_sac.utils import machine_info

pytest.importorskip("d3rlpy")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "experiments" / "benchmarks"
PEERS = BENCHMARKS / "peers"
ENV = "Pendulum-v1"
SMALL = ["d3rlpy.gradient_steps = 4", "d3rlpy.eval_interval = 2", "d3rlpy.eval_episodes = 1"]


@pytest.fixture(scope="module")
def trial():
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        import d3rlpy_trial

        yield d3rlpy_trial


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A 400-transition random Pendulum dataset (two episodes) as .npz."""
    from super_sac import datasets as ds
    from super_sac.wrappers import make_gym_env

    env = make_gym_env(ENV)
    episodes, _, act_space = ds.record_episodes(env, ds.random_policy(env, 0), 400, seed=0)
    return ds.save_npz(tmp_path_factory.mktemp("data") / "pendulum-random.npz", episodes, act_space)


def test_d3rlpy_sweep_runs_through_the_runner_and_reports_offline_curves(dataset, tmp_path):
    from super_sac.sweep.grid import FINISHED, Grid
    from super_sac.sweep.local import run_local
    from super_sac.sweep.report import build_report

    script = BENCHMARKS / "d3rlpy_trial.py"
    grid = Grid.make(
        [str(PEERS / "d3rlpy_bc.gin"), str(PEERS / "d3rlpy_awac.gin")],
        [ENV],
        "0",
        0,
        [*SMALL, "d3rlpy.batch_size = 32"],
        str(script),
        ["--dataset", str(dataset)],
    )
    out = io.StringIO()
    results = run_local(grid, tmp_path / "s", script=script, out=out, order="seed", workers=2)
    assert [r.status for r in results] == ["finished", "finished"], out.getvalue()
    for t in grid.trials(tmp_path / "s"):
        assert t.state() == FINISHED
        lines = (t.folder / "evaluations.csv").read_text().splitlines()
        rows = [dict(zip(lines[0].split(","), line.split(","))) for line in lines[1:]]
        assert [(r["env_steps"], r["phase"], r["phase_step"]) for r in rows] == [
            ("0", "offline", "2"),
            ("0", "offline", "4"),
        ]
        hparams = json.loads((t.folder / "hparams.json").read_text())
        assert hparams["batch_size"] == 32 and hparams["dataset"] == str(dataset)
    awac_dir = tmp_path / "s" / "d3rlpy_awac" / ENV / "seed_0"
    awac = json.loads((awac_dir / "summary.json").read_text())
    assert awac["critic"]["temperature"] == pytest.approx(np.exp(-30.0), rel=1e-6, abs=0)
    assert awac["critic"]["entropy_term"] < 1e-10
    report = build_report(tmp_path / "s")
    assert {r["config"] for r in report["rows"]} == {"d3rlpy_bc", "d3rlpy_awac"}
    assert all(r["final"]["n"] == 1 for r in report["rows"])


def test_stock_awac_keeps_its_critic_temperature_of_one(trial, dataset, tmp_path):
    summary = trial.main(
        [
            "--config", str(PEERS / "d3rlpy_awac_stock.gin"), "--env", ENV, "--seed", "0",
            "--run_dir", str(tmp_path), "--dataset", str(dataset),
            *[a for b in [*SMALL, "d3rlpy.batch_size = 32"] for a in ("--gin_bindings", b)],
        ]
    )  # fmt: skip
    assert summary["critic"]["temperature"] == pytest.approx(1.0)
    assert summary["critic"]["entropy_term"] > 0.1  # |log pi| of a fresh policy is O(1)


def test_d3rlpy_is_evaluated_from_exactly_the_start_states_of_our_loop(trial):
    """The same policy through our evaluation path and the trial's adapter gives the same
    returns (ours: reset with the evaluation seed, then evaluate_agent)."""
    from super_sac.evaluation import evaluate_agent
    from super_sac.wrappers import make_gym_env

    class Zero:  # a d3rlpy-like model and an agent-like object acting alike (zero torque)
        training = False

        def predict(self, obs):
            assert obs.shape == (1, 3) and obs.dtype == np.float32
            return np.zeros((1, 1), dtype=np.float32)

        def forward(self, obs):
            return np.zeros(1, dtype=np.float32)

        def eval(self):
            pass

        def train(self, mode=True):
            pass

    ours_env, peer_env = make_gym_env(ENV), make_gym_env(ENV)
    ours_env.reset(seed=5)
    peer_env.reset(seed=5)
    ours = evaluate_agent(Zero(), ours_env, 3)
    theirs = evaluate_agent(trial.GreedyPolicy(Zero()), peer_env, 3)
    assert theirs == pytest.approx(ours)
    assert theirs["return_min"] != theirs["return_max"]


def test_evaluations_are_seeded_per_evaluation_like_ours(trial, dataset, tmp_path, monkeypatch):
    from super_sac.collector import episode_seed
    from super_sac.datasets import load_transitions
    from super_sac.reporting import EVAL_ENV_INDEX
    from super_sac.wrappers import make_gym_env

    seeds = []
    real_make = trial.make_gym_env

    def spy_make(env_id):
        env = real_make(env_id)
        reset = env.reset

        def spy_reset(seed=None, options=None):
            if seed is not None:
                seeds.append(seed)
            return reset(seed=seed, options=options)

        env.reset = spy_reset
        return env

    monkeypatch.setattr(trial, "make_gym_env", spy_make)
    settings = trial.d3rlpy_settings(
        algo="bc", gradient_steps=5, eval_interval=2, eval_episodes=1, batch_size=16
    )
    data, _ = load_transitions(dataset, make_gym_env(ENV))
    summary = trial.train(settings, ENV, 7, data, tmp_path)
    assert seeds == [episode_seed(7, EVAL_ENV_INDEX, k) for k in range(3)]
    assert [h["phase_step"] for h in summary["eval_history"]] == [2, 4, 5]


def test_bad_settings_and_online_steps_are_refused_with_the_reason(trial, dataset, tmp_path):
    with pytest.raises(ValueError, match="d3rlpy.algo = 'cql': expected one of bc, iql"):
        trial.d3rlpy_settings(algo="cql")
    with pytest.raises(ValueError, match="critic_temperature = 'hot'"):
        trial.d3rlpy_settings(algo="awac", critic_temperature="hot")
    with pytest.raises(ValueError, match="observation_scaler = 'minmax': expected 'reproduction'"):
        trial.d3rlpy_settings(algo="iql", observation_scaler="minmax")
    base = [sys.executable, str(BENCHMARKS / "d3rlpy_trial.py")]
    args = ["--config", str(PEERS / "d3rlpy_bc.gin"), "--env", ENV, "--run_dir", str(tmp_path)]
    proc = subprocess.run(
        [*base, *args, "--dataset", str(dataset), "--steps", "100"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode != 0 and "train offline only" in proc.stderr
    proc = subprocess.run([*base, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "--dataset is required" in proc.stderr
    with pytest.raises(SystemExit, match="--device tpu:0: unknown device 'tpu:0'. Fix: use 'cpu'"):
        trial.check_device("tpu:0")


def test_a_sweep_preflight_dry_runs_the_peer_on_the_dataset(trial, dataset, tmp_path, monkeypatch):
    import torch

    from super_sac.sweep.grid import Grid
    from super_sac.sweep.local import preflight

    script = BENCHMARKS / "d3rlpy_trial.py"
    config = str(PEERS / "d3rlpy_bc.gin")
    data_args = ["--dataset", str(dataset)]
    bad = Grid.make([config], [ENV], "0", 0, ["d3rlpy.algo = 'cql'"], str(script), data_args)
    with pytest.raises(ValueError, match="(?s)d3rlpy_bc.gin on Pendulum-v1 would fail.*'cql'"):
        preflight(bad, tmp_path / "sweep", script, sys.executable)
    built = []
    build = trial.build_model
    monkeypatch.setattr(trial, "build_model", lambda *a, **k: built.append(build(*a, **k)))
    threads = torch.get_num_threads()  # main sets the trial's thread count
    try:
        argv = ["--config", config, "--env", ENV, "--run_dir", str(tmp_path / "run"), *data_args]
        assert trial.main([*argv, *[f"--gin_bindings={b}" for b in SMALL], "--dry_run"]) == {
            "dry_run": True
        }
    finally:
        torch.set_num_threads(threads)
    assert not (tmp_path / "run").exists() and not (tmp_path / "sweep").exists()
    assert len(built) == 1 and built[0].impl is not None  # the model was built on the dataset


def test_a_cuda_device_on_a_machine_without_one_is_refused_with_the_fix(trial):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(
        SystemExit, match="--device cuda:0: .*torch sees no GPU. Fix: use the device 'cpu'"
    ):
        trial.check_device("cuda:0")
    assert trial.check_device("cpu:0") == "cpu:0"


def _argv(config, run_dir, dataset, *bindings):
    argv = ["--config", str(config), "--env", ENV, "--seed", "3", "--run_dir", str(run_dir)]
    argv += ["--dataset", str(dataset)]
    for b in [*SMALL, "d3rlpy.batch_size = 16", *bindings]:
        argv += ["--gin_bindings", b]
    return argv


def test_an_interrupted_trial_resumes_from_its_last_checkpoint(
    trial, dataset, tmp_path, monkeypatch
):
    from super_sac.sweep.grid import FINISHED, INTERRUPTED, trial_state

    real, calls = trial.save_checkpoint, []

    def killed_before_the_second_checkpoint(*args, **kwargs):
        calls.append(args[2])
        if len(calls) == 2:  # after the second evaluation's csv row, before its checkpoint
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(trial, "save_checkpoint", killed_before_the_second_checkpoint)
    bindings = [*SMALL, "d3rlpy.gradient_steps = 6", "d3rlpy.batch_size = 16"]
    argv = ["--config", str(PEERS / "d3rlpy_td3bc.gin"), "--env", ENV, "--seed", "3"]
    argv += ["--run_dir", str(tmp_path), "--dataset", str(dataset)]
    for b in bindings:
        argv += ["--gin_bindings", b]
    with pytest.raises(KeyboardInterrupt):
        trial.main(argv)
    assert trial_state(tmp_path) == INTERRUPTED
    before = (tmp_path / "evaluations.csv").read_text().splitlines()
    assert len(before) == 3  # header, rows at 2 and 4; only the one at 2 is checkpointed
    monkeypatch.undo()

    # the sweep's resume: the folder, the grid's bindings and --steps 0, nothing else
    resume = ["--resume", str(tmp_path), "--steps", "0"]
    for b in bindings:
        resume += ["--gin_bindings", b]
    summary = trial.main(resume)
    assert trial_state(tmp_path) == FINISHED
    assert [h["phase_step"] for h in summary["eval_history"]] == [2, 4, 6]
    lines = (tmp_path / "evaluations.csv").read_text().splitlines()
    assert lines[:2] == before[:2] and len(lines) == 4  # the unsaved row at 4 redone once
    assert [line.split(",")[2] for line in lines[1:]] == ["2", "4", "6"]
    ckpts = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert ckpts == ["ckpt_4", "ckpt_6"]  # the two newest kept
    # the first session's record is kept, with where the resumed one ran
    hparams = json.loads((tmp_path / "hparams.json").read_text())
    here = machine_info("cpu")
    assert hparams["machine"] == here and hparams["resume_machines"] == [here]

    # resuming with other settings is refused, naming them
    (tmp_path / "summary.json").unlink()
    with pytest.raises(SystemExit, match="eval_episodes was 1, now 2"):
        trial.main([*resume, "--gin_bindings", "d3rlpy.eval_episodes = 2"])


def test_a_checkpoint_restores_weights_optimizer_step_counter_and_scalers(trial, dataset, tmp_path):
    import torch

    from super_sac.datasets import load_transitions
    from super_sac.wrappers import make_gym_env

    settings = trial.d3rlpy_settings(algo="td3bc", gradient_steps=8, batch_size=16)
    data, _ = load_transitions(dataset, make_gym_env(ENV))
    mdp = trial.to_mdp_dataset(data)
    model = trial.build_model(settings, mdp, seed=0)
    trial.fit_steps(model, mdp, 3)
    trial.save_checkpoint(tmp_path, model, 3, [{"phase_step": 3}])
    other = trial.build_model(settings, mdp, seed=1)
    obs = data.obs["obs"][:8].astype(np.float32)
    assert not np.allclose(other.predict(obs), model.predict(obs))
    assert other.grad_step == 0
    assert trial.load_checkpoint(tmp_path, other) == (3, [{"phase_step": 3}])
    assert other.grad_step == 3  # TD3+BC's actor delay counts from here
    np.testing.assert_allclose(other.predict(obs), model.predict(obs))
    # the observation scaler is fitted at build time, before any fit, as d3rlpy's fit would
    plain = trial.d3rlpy_config("d3rlpy_td3bc", 8, 16).create(device="cpu:0")
    trial.fit_steps(plain, mdp, 1)
    assert other.observation_scaler.built
    np.testing.assert_array_equal(other.observation_scaler.mean, plain.observation_scaler.mean)
    np.testing.assert_array_equal(other.observation_scaler.std, plain.observation_scaler.std)
    a = model.impl.modules.actor_optim.state_dict()["optim"]["state"]
    b = other.impl.modules.actor_optim.state_dict()["optim"]["state"]
    assert a and all(torch.equal(a[k]["exp_avg"], b[k]["exp_avg"]) for k in a)
    assert trial.load_checkpoint(tmp_path / "none", other) == (0, [])


def test_the_standard_observation_scaler_probe_standardises_iql_inputs(trial, dataset):
    from super_sac.datasets import load_transitions
    from super_sac.wrappers import make_gym_env

    data, _ = load_transitions(dataset, make_gym_env(ENV))
    mdp = trial.to_mdp_dataset(data)
    stock = trial.build_model(trial.d3rlpy_settings(algo="iql", gradient_steps=8), mdp, seed=0)
    assert stock.observation_scaler is None  # IQL's reproduction leaves observations as they are
    settings = trial.load_settings(PEERS / "d3rlpy_iql_std.gin")
    assert settings["algo"] == "iql" and settings["observation_scaler"] == "standard"
    probe = trial.build_model(settings, mdp, seed=0)
    # fitted on the dataset as TD3+BC's reproduction fits its own
    td3bc = trial.build_model(trial.d3rlpy_settings(algo="td3bc", gradient_steps=8), mdp, seed=0)
    np.testing.assert_array_equal(probe.observation_scaler.mean, td3bc.observation_scaler.mean)
    np.testing.assert_array_equal(probe.observation_scaler.std, td3bc.observation_scaler.std)
    obs = data.obs["obs"].astype(np.float64)
    assert np.abs(probe.observation_scaler.mean - obs.mean(0)).max() < 0.1 * obs.std(0).min()
    assert probe.config.reward_scaler is not None  # the rest of the reproduction is kept
    assert probe.config.weight_temp == stock.config.weight_temp == 3.0


def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(trial, dataset, tmp_path):
    from super_sac.datasets import load_transitions
    from super_sac.wrappers import make_gym_env

    settings = trial.d3rlpy_settings(algo="bc", gradient_steps=8, batch_size=16)
    data, _ = load_transitions(dataset, make_gym_env(ENV))
    mdp = trial.to_mdp_dataset(data)
    model = trial.build_model(settings, mdp, seed=0)
    trial.save_checkpoint(tmp_path, model, 2, [{"phase_step": 2}])
    trial.save_checkpoint(tmp_path, model, 4, [{"phase_step": 2}, {"phase_step": 4}])
    (tmp_path / "checkpoints" / "ckpt_4" / trial.MODEL_FILE).write_bytes(b"truncated")
    assert trial.load_checkpoint(tmp_path, model) == (2, [{"phase_step": 2}])
    (tmp_path / "checkpoints" / "ckpt_2" / trial.MODEL_FILE).write_bytes(b"")
    with pytest.raises(RuntimeError, match="no readable checkpoint .* Fix: delete"):
        trial.load_checkpoint(tmp_path, model)


@pytest.mark.parametrize("peer", sorted(PEERS.glob("d3rlpy_*.gin")), ids=lambda p: p.stem)
def test_every_d3rlpy_peer_file_parses(trial, peer):
    import gin

    settings = trial.load_settings(peer, ["d3rlpy.eval_episodes = 3"])
    gin.clear_config()
    assert settings["algo"] in trial.ALGOS and settings["source"]
    assert settings["eval_episodes"] == 3 and settings["gradient_steps"] == 100_000
    assert settings["algo"] == peer.stem.split("_")[1]  # d3rlpy_<algo>[_variant].gin
    if settings["algo"] == "awac":
        expected = "stock" if peer.stem.endswith("_stock") else "neutral"
        assert settings["critic_temperature"] == expected


def _mixed_episodes():
    """A d3rlpy MDPDataset of three episodes: one that terminates, one cut by a timeout and a
    last one that terminates, so the sampler meets both kinds of episode end."""
    import d3rlpy

    rng = np.random.default_rng(0)
    n = 23
    terminals, timeouts = np.zeros(n, np.float32), np.zeros(n, np.float32)
    terminals[6], timeouts[14], terminals[22] = 1.0, 1.0, 1.0
    return d3rlpy.dataset.MDPDataset(
        observations=rng.normal(size=(n, 3)).astype(np.float32),
        actions=rng.uniform(-1, 1, size=(n, 2)).astype(np.float32),
        rewards=rng.normal(size=n).astype(np.float32),
        terminals=terminals,
        timeouts=timeouts,
    )


def test_the_vectorised_sampler_draws_d3rlpys_batches_element_for_element(trial):
    from offline_d3rlpy import VectorisedTransitionSampler

    mdp = _mixed_episodes()
    sampler = VectorisedTransitionSampler(mdp)
    # a terminating episode's last transition is kept (zero next state, terminal 1); a
    # timed-out episode's last step has no next state and is not a transition
    assert len(sampler) == mdp.transition_count == 22
    assert sampler.terminals.sum() == 2
    np.testing.assert_array_equal(sampler.fields["next_observation"][6], np.zeros(3))
    fields = ("observations", "actions", "rewards", "next_observations", "next_actions")
    for seed in range(3):
        np.random.seed(seed)
        theirs = mdp.sample_transition_batch(64)
        np.random.seed(seed)
        ours = sampler.sample_transition_batch(64)
        for name in (*fields, "terminals", "intervals"):
            np.testing.assert_array_equal(getattr(ours, name), getattr(theirs, name), err_msg=name)
            assert getattr(ours, name).dtype == np.float32
        assert ours.terminals.shape == theirs.terminals.shape == (64, 1)
        # and left numpy's global generator in the same state, so later draws agree too
        after_ours = np.random.get_state()[1].copy()
        np.random.seed(seed)
        mdp.sample_transition_batch(64)
        np.testing.assert_array_equal(after_ours, np.random.get_state()[1])


def test_training_on_the_vectorised_sampler_gives_d3rlpys_weights(trial, dataset):
    import torch

    from super_sac.datasets import load_transitions
    from super_sac.wrappers import make_gym_env

    settings = trial.d3rlpy_settings(algo="awac", gradient_steps=4, batch_size=16)
    data, _ = load_transitions(dataset, make_gym_env(ENV))
    models = []
    for fast in (False, True):
        mdp = trial.to_mdp_dataset(data)
        if fast:
            mdp = trial.with_vectorised_sampling(mdp)
        model = trial.build_model(settings, mdp, seed=0)
        trial.fit_steps(model, mdp, 3)
        models.append(model)
    slow, fast = (dict(m.impl.modules.policy.named_parameters()) for m in models)
    assert all(torch.equal(slow[k], fast[k]) for k in slow)
    q_slow, q_fast = (list(m.impl.modules.q_funcs.parameters()) for m in models)
    assert all(torch.equal(a, b) for a, b in zip(q_slow, q_fast))


def test_fit_steps_refuses_an_algorithm_that_needs_returns_to_go(trial):
    import d3rlpy

    mdp = trial.with_vectorised_sampling(_mixed_episodes())
    model = d3rlpy.algos.CalQLConfig(batch_size=8).create(device="cpu:0")
    with pytest.raises(ValueError, match="needs returns-to-go.*Fix: pass the dataset without"):
        trial.fit_steps(model, mdp, 1)
    # the fix the message names works: d3rlpy's own sampling keeps returns-to-go
    trial.fit_steps(model, _mixed_episodes(), 1)
    assert model.grad_step == 1


def test_compile_graph_reaches_d3rlpy_and_stays_off_on_a_cpu(trial, dataset):
    from super_sac.datasets import load_transitions
    from super_sac.wrappers import make_gym_env

    data, _ = load_transitions(dataset, make_gym_env(ENV))
    mdp = trial.to_mdp_dataset(data)
    plain = trial.load_settings(PEERS / "d3rlpy_awac.gin")
    assert plain["compile_graph"] is False
    settings = trial.load_settings(PEERS / "d3rlpy_awac.gin", ["d3rlpy.compile_graph = True"])
    model = trial.build_model(settings, mdp, seed=0)
    assert model.config.compile_graph is True
    assert model.config.batch_size == 1024  # the reproduction's settings are kept
    assert model.compiled is False  # d3rlpy compiles on CUDA devices only


def test_a_trial_from_before_compile_graph_existed_resumes(trial, dataset, tmp_path):
    argv = ["--config", str(PEERS / "d3rlpy_bc.gin"), "--env", ENV, "--seed", "0"]
    argv += ["--run_dir", str(tmp_path), "--dataset", str(dataset)]
    bindings = [*SMALL, "d3rlpy.batch_size = 16"]
    for b in bindings:
        argv += ["--gin_bindings", b]
    trial.main(argv)
    hparams = json.loads((tmp_path / "hparams.json").read_text())
    del hparams["compile_graph"]  # as such a trial wrote it
    (tmp_path / "hparams.json").write_text(json.dumps(hparams))
    (tmp_path / "summary.json").unlink()
    resume = ["--resume", str(tmp_path), "--steps", "0"]
    for b in bindings:
        resume += ["--gin_bindings", b]
    assert trial.main(resume)["gradient_steps"] == 4
    (tmp_path / "summary.json").unlink()
    with pytest.raises(SystemExit, match="compile_graph was False, now True"):
        trial.main([*resume, "--gin_bindings", "d3rlpy.compile_graph = True"])
