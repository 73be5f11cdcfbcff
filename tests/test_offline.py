"""The behavioral cloning / offline / online phases of super_sac(): which updates run when,
what is logged, exact resume inside a phase, the settings' validation, and the offline training
script with bc.gin and awac.gin."""

import json
import math
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import gin
import numpy as np
import pytest
import torch
from script_loader import load_script

import super_sac
from super_sac import Agent, ReplayBuffer, cli, learning, nets
from super_sac import datasets as ds
from super_sac.loggers import NullLogger
from super_sac.main import ConfigError, TrainConfig, Trainer
from super_sac.wrappers import make_gym_env

ROOT = Path(__file__).resolve().parents[1]
train_offline = partial(
    cli.train_offline, search_dirs=[ROOT / "experiments" / "offline", ROOT / "experiments" / "gym"]
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """200 random Pendulum transitions (episodes of 20 steps) as .npz."""
    env = make_gym_env("Pendulum-v1", 20)
    episodes, _, act_space = ds.record_episodes(env, ds.random_policy(env, 0), 200, seed=0)
    return ds.save_npz(tmp_path_factory.mktemp("data") / "pendulum.npz", episodes, act_space)


def _settings(**kwargs):
    return {
        "batch_size": 8,
        "random_warmup_steps": 0,
        "eval_episodes": 1,
        "eval_interval": 1000,
        "max_episode_steps": 20,
        "verbosity": 0,
        "seed": 0,
        "init_alpha": 0.0,
        "alpha_lr": 0.0,
        "logging_method": "none",
        **kwargs,
    }


def _parts(dataset, size=400):
    env, test_env = make_gym_env("Pendulum-v1", 20), make_gym_env("Pendulum-v1", 20)
    torch.manual_seed(0)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=16)
    buffer = ReplayBuffer(size, seed=0, verbose=False).load_dataset(dataset, env, gamma=0.99)
    return agent, buffer, env, test_env


def _run(dataset, **kwargs):
    agent, buffer, env, test_env = _parts(dataset)
    return super_sac.super_sac(
        agent, buffer, env, test_env, **_settings(save_to_disk=False, log_to_disk=False, **kwargs)
    )


def test_each_phase_runs_its_own_updates(dataset, monkeypatch):
    calls = []
    phase = {"now": None}
    # the Learner's critic update is critic_update_with_features (counted as critic_update)
    for name in ("critic_update_with_features", "online_actor_update", "offline_actor_update"):
        original = getattr(learning, name)

        def counted(*args, _name=name, _original=original, **kw):
            calls.append((phase["now"], _name.removesuffix("_with_features"), kw.get("adv_filter")))
            return _original(*args, **kw)

        monkeypatch.setattr(learning, name, counted)
    run_phase = Trainer._run_phase

    def tracked(self, step_fn):
        phase["now"] = self.phase
        return run_phase(self, step_fn)

    monkeypatch.setattr(Trainer, "_run_phase", tracked)
    summary = _run(
        dataset,
        bc_warmup_steps=7,
        num_steps_offline=5,
        num_steps_online=6,
        random_warmup_steps=2,  # online updates start after 2 env steps: 4 online steps update
        critic_updates_per_step=2,
        afbc_actor_updates_per_step=3,
        use_afbc_update_online=True,
        afbc_filter="exp",
    )

    def count(p, n):
        return sum(1 for c in calls if c[0] == p and c[1] == n)

    assert count("bc", "offline_actor_update") == 7 and count("bc", "critic_update") == 0
    assert {c[2] for c in calls if c[0] == "bc"} == {"none"}  # unfiltered: plain BC
    assert count("offline", "critic_update") == 10
    assert count("offline", "offline_actor_update") == 15
    assert count("offline", "online_actor_update") == 0
    assert {c[2] for c in calls if c[0] == "offline" and c[2]} == {"exp"}
    assert count("online", "critic_update") == 8
    assert count("online", "online_actor_update") == 4
    assert count("online", "offline_actor_update") == 12
    assert summary["env_steps"] == 6 and summary["critic_updates"] == 18
    assert summary["actor_updates"] == 7 + 15 + 4 + 12
    # each phase ends with an evaluation, labelled with its phase and step
    assert [(e["phase"], e["phase_step"]) for e in summary["eval_history"]] == [
        ("bc", 7),
        ("offline", 5),
        ("online", 6),
    ]


def test_the_online_warm_up_after_offline_phases_logs_no_stale_update_metrics(dataset, monkeypatch):
    logged = []
    monkeypatch.setattr(NullLogger, "log", lambda self, m, step: logged.append((step, m)))
    _run(dataset, bc_warmup_steps=2, num_steps_offline=2, num_steps_online=4,
         random_warmup_steps=2, log_interval=1)  # fmt: skip
    updated = {s: "critic/loss" in m or "actor/afbc_loss" in m for s, m in logged if
               "schedule/phase_bc" in m}  # fmt: skip
    # BC and offline steps 1-4 update; online env steps 1-2 (log steps 5-6) are random warm-up
    assert updated == {1: True, 2: True, 3: True, 4: True, 5: False, 6: False, 7: True, 8: True}


def test_checkpoints_are_named_by_the_log_step_and_record_both_counts(dataset, tmp_path):
    agent, buffer, env, test_env = _parts(dataset)
    settings = _settings(bc_warmup_steps=2, num_steps_offline=2, num_steps_online=3,
                         base_save_path=str(tmp_path), name="run", checkpoint_interval=2,
                         keep_checkpoints=10, log_to_disk=False)  # fmt: skip
    super_sac.super_sac(agent, buffer, env, test_env, **settings)
    folders = sorted((tmp_path / "run_0" / "checkpoints").glob("ckpt_*"))
    manifests = {f.name: json.loads((f / "MANIFEST.json").read_text()) for f in folders}
    counts = {name: (m["log_step"], m["env_steps"]) for name, m in manifests.items()}
    # BC step 2 (log step 2), offline step 2 (4), online env steps 2 and 3 (6 and 7)
    assert counts == {"ckpt_2": (2, 0), "ckpt_4": (4, 0), "ckpt_6": (6, 2), "ckpt_7": (7, 3)}


def test_reward_clip_with_a_dataset_in_the_buffer_says_the_dataset_keeps_its_rewards(dataset):
    from super_sac.validation import ConfigWarning

    with pytest.warns(ConfigWarning, match=r"reward_clip = 1.0: clips the rewards the loop "
                      r"collects, not the 200 transitions already in the buffer"):  # fmt: skip
        _run(dataset, num_steps_offline=1, num_steps_online=0, reward_clip=1.0)


def test_the_logs_say_which_phase_runs(dataset, monkeypatch):
    logged = []
    monkeypatch.setattr(NullLogger, "log", lambda self, m, step: logged.append((step, m)))
    _run(dataset, bc_warmup_steps=2, num_steps_offline=2, num_steps_online=2, log_interval=1)
    schedules = [(s, m["schedule/phase_bc"], m["schedule/phase_offline"]) for s, m in logged if
                 "schedule/phase_bc" in m]  # fmt: skip
    assert schedules == [(1, 1.0, 0.0), (2, 1.0, 0.0), (3, 0.0, 1.0), (4, 0.0, 1.0)] + [
        (5, 0.0, 0.0),
        (6, 0.0, 0.0),
    ]  # x-axis: BC steps, then offline steps, then (online) env steps after them
    offline = [m for s, m in logged if m.get("schedule/phase_offline") == 1.0]
    assert offline[0]["schedule/phase_step"] == 1.0 and "actor/afbc_loss" in offline[0]
    assert "critic/loss" in offline[0]


def test_targets_are_recreated_from_the_cloned_agent(dataset, monkeypatch):
    seen = {}
    enter = Trainer.enter_phase

    def spy(self, phase):
        enter(self, phase)
        if phase == "offline":
            seen["same"] = all(
                torch.equal(a, b)
                for a, b in zip(self.agent.actor.parameters(), self.target_agent.actor.parameters())
            )
            seen["trained"] = self.actor_updates

    monkeypatch.setattr(Trainer, "enter_phase", spy)
    _run(dataset, bc_warmup_steps=5, num_steps_offline=1, num_steps_online=0)
    assert seen == {"same": True, "trained": 5}


def _trainer(dataset, tmp_path, **kwargs):
    agent, buffer, env, test_env = _parts(dataset)
    cfg = TrainConfig(
        **_settings(
            base_save_path=str(tmp_path),
            name="phases",
            checkpoint_interval=3,
            keep_checkpoints=10,
            bc_warmup_steps=4,
            num_steps_offline=7,
            num_steps_online=5,
            afbc_per=True,
            use_afbc_update_online=True,
            **kwargs,
        )
    )
    return Trainer(agent, buffer, env, test_env, cfg)


def test_resume_inside_the_offline_phase_continues_exactly(dataset, tmp_path, monkeypatch):
    reference = _trainer(dataset, tmp_path / "a")
    reference.run()
    write = Trainer.write_checkpoint

    def crash_after_offline_step_6(self):
        write(self)
        if self.phase == "offline" and self.step == 6:
            raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "write_checkpoint", crash_after_offline_step_6)
    crashed = _trainer(dataset, tmp_path / "b")
    with pytest.raises(KeyboardInterrupt):
        crashed.run()
    monkeypatch.setattr(Trainer, "write_checkpoint", write)
    resumed = _trainer(dataset, tmp_path / "b", resume=str(crashed.run_dir))
    resumed.open_run()
    resumed.restore()
    assert (resumed.phase, resumed.step) == ("offline", 6)
    summary = resumed.run()
    assert summary["critic_updates"] == reference.critic_updates
    for a, b in zip(reference.agent.state_dict().values(), resumed.agent.state_dict().values()):
        assert torch.equal(a, b)
    index_a, index_b = reference.afbc_index.state_dict(), resumed.afbc_index.state_dict()
    assert torch.equal(index_a["priorities"], index_b["priorities"])
    assert not torch.all(index_a["priorities"] == 1.0)  # AFBC batches updated priorities


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"afbc_per": True, "num_steps_online": 1}, "afbc_per = True.*none run"),
        (
            {"afbc_update_encoder": True, "num_steps_online": 1},
            "afbc_update_encoder = True.*none run",
        ),
        ({"num_steps_offline": 1, "afbc_filter": "soft"}, "afbc_filter = 'soft'"),
        ({"num_steps_offline": 1, "afbc_temperature": 0.0}, "afbc_temperature = 0.0: must be > 0"),
        ({"use_pg_update_online": False, "num_steps_online": 1}, "no actor update would run"),
        ({"num_steps_online": 0}, "nothing to do"),
        ({"num_steps_offline": 1, "gamma": 0.5}, "gamma = 0.5.*discounts"),
    ],
)
def test_phase_settings_are_validated(dataset, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        _run(dataset, **kwargs)


def test_behavioral_cloning_trains_a_deterministic_actor(dataset):
    env, test_env = make_gym_env("Pendulum-v1", 20), make_gym_env("Pendulum-v1", 20)
    torch.manual_seed(0)
    agent = Agent(
        1,
        nets.FlatEncoder(3),
        hidden_size=16,
        actor_network_cls=nets.mlps.ContinuousDeterministicActor,
    )
    buffer = ReplayBuffer(400, seed=0, verbose=False).load_dataset(dataset, env, gamma=0.99)
    data = buffer.sample(200)
    with torch.no_grad():
        before = (agent.actor(agent.encoder(data.obs)) - data.action).pow(2).mean()
    settings = _settings(bc_warmup_steps=300, actor_lr=3e-3, encoder_lr=3e-3, num_steps_online=0)
    super_sac.super_sac(agent, buffer, env, test_env, save_to_disk=False, **settings)
    with torch.no_grad():
        after = (agent.actor(agent.encoder(data.obs)) - data.action).pow(2).mean()
    # uniform random actions: the best fit is their mean, 0, at a squared error of 1/3, which
    # 300 steps approach from the untrained actor's 0.48
    assert before > 0.45 and after < 0.38
    # online steps after the cloning need the exploration noise a deterministic actor lacks
    with pytest.raises(ConfigError, match="never explore in its 10 online steps"):
        super_sac.super_sac(agent, buffer, env, test_env, **{**settings, "num_steps_online": 10})


def test_afbc_needs_a_stochastic_actor_and_a_matching_advantage(dataset):
    env = make_gym_env("Pendulum-v1", 20)
    buffer = ReplayBuffer(400, verbose=False).load_dataset(dataset, env, gamma=0.99)
    deterministic = Agent(
        1, nets.FlatEncoder(3), actor_network_cls=nets.mlps.ContinuousDeterministicActor
    )
    with pytest.raises(ConfigError, match="log-likelihood.*ContinuousStochasticActor"):
        super_sac.super_sac(deterministic, buffer, env, env, **_settings(num_steps_offline=1))
    indirect = Agent(1, nets.FlatEncoder(3), adv_method="indirect")
    with pytest.raises(ConfigError, match="adv_method = 'indirect'.*continuous"):
        super_sac.super_sac(indirect, buffer, env, env, **_settings(num_steps_offline=1))
    ensemble = Agent(1, nets.FlatEncoder(3), ensemble_size=2)
    with pytest.raises(ConfigError, match="SUNRISE ensembles do not support it yet"):
        super_sac.super_sac(ensemble, buffer, env, env, **_settings(num_steps_offline=1))
    full = ReplayBuffer(200, verbose=False).load_dataset(dataset, env, gamma=0.99)
    with pytest.raises(ConfigError, match="full of protected offline data"):
        super_sac.super_sac(Agent(1, nets.FlatEncoder(3)), full, env, env, **_settings())


@pytest.mark.parametrize(
    "config, steps, extra",
    [
        ("bc.gin", ["--bc_steps", "200", "--steps", "0"], []),
        ("awac.gin", ["--offline_steps", "200", "--steps", "100"], ["super_sac.afbc_per = True"]),
        ("crr.gin", ["--offline_steps", "200", "--steps", "100"], []),
    ],
)
def test_offline_script_trains_with_each_gin_file(dataset, config, steps, extra):
    bindings = [
        "Agent.hidden_size = 16",
        "ReplayBuffer.size = 1000",
        "super_sac.batch_size = 16",
        "super_sac.eval_interval = 100",
        "super_sac.eval_episodes = 1",
        "super_sac.verbosity = 0",
        "super_sac.max_episode_steps = 20",
        *extra,
    ]
    argv = ["--config", config, "--dataset", str(dataset), "--seed", "0", "--threads", "1"]
    argv += ["--logging", "none"]
    summary = train_offline(argv + steps + [x for b in bindings for x in ("--gin_bindings", b)])
    phases = [e["phase"] for e in summary["eval_history"]]
    if config == "bc.gin":
        assert phases == ["bc", "bc"] and summary["critic_updates"] == 0
        assert summary["env_steps"] == 0
    else:
        if config == "crr.gin":  # CRR's binary filter on the "max" advantage (crr.gin)
            assert gin.query_parameter("super_sac.afbc_filter") == "binary"
            assert gin.query_parameter("Agent.adv_method") == "max"
        assert phases == ["offline", "offline", "online"]
        assert summary["critic_updates"] == 300 and summary["env_steps"] == 100
    assert np.isfinite(summary["final_eval_return"])
    assert (Path(summary["run_dir"]) / "agent.pt").exists()


def _small_awac_run(dataset, offline_steps, steps, *extra_bindings):
    """train_offline.py with awac.gin on ``dataset`` at a test's size (16-unit networks, a
    checkpoint and an evaluation every 50 steps)."""
    bindings = [
        "Agent.hidden_size = 16",
        "ReplayBuffer.size = 1000",
        "super_sac.batch_size = 16",
        "super_sac.eval_interval = 50",
        "super_sac.eval_episodes = 1",
        "super_sac.checkpoint_interval = 50",
        "super_sac.verbosity = 0",
        "super_sac.max_episode_steps = 20",
        *extra_bindings,
    ]
    argv = ["--config", "awac.gin", "--dataset", str(dataset), "--seed", "0", "--threads", "1",
            "--logging", "none", "--offline_steps", str(offline_steps),
            "--steps", str(steps)]  # fmt: skip
    return train_offline(argv + [x for b in bindings for x in ("--gin_bindings", b)])


def test_offline_script_standardises_observations_with_the_dataset(dataset, tmp_path):
    first = _small_awac_run(dataset, 50, 20, "FlatEncoder.standardize = True")
    obs = np.load(dataset)["obs/obs"]
    saved = torch.load(Path(first["run_dir"]) / "agent.pt", weights_only=True)["state_dict"]
    assert np.allclose(saved["encoder.obs_mean"].numpy(), obs.mean(0), atol=1e-5)
    assert np.allclose(saved["encoder.obs_std"].numpy(), obs.std(0) + 1e-3, atol=1e-5)
    # the target encoder shares them (its checkpoint copy equals the agent's)
    ckpt = sorted((Path(first["run_dir"]) / "checkpoints").glob("ckpt_*"))[-1]
    state = torch.load(ckpt / "state.pt", weights_only=False)
    assert torch.equal(state["target_agent"]["encoder.obs_std"], saved["encoder.obs_std"])
    # a resumed run restores the statistics from its checkpoint, not by refitting: the
    # dataset file it names now holds other observations, which a refit would pick up
    data = dict(np.load(dataset))
    shifted = tmp_path / "shifted.npz"
    np.savez(shifted, **{**data, "obs/obs": data["obs/obs"] * 3.0 + 1.0})
    hparams = Path(first["run_dir"]) / "hparams.json"
    info = json.loads(hparams.read_text())
    info["run_info"]["args"]["dataset"] = str(shifted)
    hparams.write_text(json.dumps(info))
    resumed = train_offline(["--resume", first["run_dir"], "--steps", "30"])
    again = torch.load(Path(resumed["run_dir"]) / "agent.pt", weights_only=True)["state_dict"]
    assert torch.equal(again["encoder.obs_std"], saved["encoder.obs_std"])


def test_the_target_encoder_shares_statistics_fitted_after_it_was_made(dataset):
    agent = Agent(1, nets.FlatEncoder(3, standardize=True), hidden_size=8)
    target = learning.make_target_agent(agent)
    agent.encoder.fit_statistics({"obs": torch.tensor([[0.0, 1.0, 2.0], [2.0, 3.0, 6.0]])})
    assert torch.equal(target.encoder.obs_mean, torch.tensor([1.0, 2.0, 4.0]))
    assert bool(target.encoder.statistics_fitted)
    obs = {"obs": torch.randn(4, 3)}
    assert torch.equal(target.encoder(obs), agent.encoder(obs))
    # ...while its parameters stay copies (the critic's are not shared)
    assert target.critic.output_layer.weight is not agent.critic.output_layer.weight


def test_a_standardised_agent_names_the_difference_when_loaded_into_a_plain_one(tmp_path):
    agent = Agent(1, nets.FlatEncoder(3, standardize=True), hidden_size=8)
    agent.encoder.fit_statistics({"obs": np.ones((2, 3))})
    file = agent.save(tmp_path)
    with pytest.raises(ValueError, match="standardize_observations: saved True, this agent None"):
        Agent(1, nets.FlatEncoder(3), hidden_size=8).load(file)
    # a file saved before the signature named it is recognised by its statistics
    payload = torch.load(file, weights_only=True)
    del payload["signature"]["standardize_observations"]
    torch.save(payload, file)
    other = Agent(1, nets.FlatEncoder(3, standardize=True), hidden_size=8)
    other.load(file)
    assert torch.equal(other.encoder.obs_std, agent.encoder.obs_std)


def test_a_standardising_encoder_without_statistics_is_refused(dataset):
    agent, buffer, env, test_env = _parts(dataset)
    agent.encoder = nets.FlatEncoder(3, standardize=True)
    with pytest.raises(ConfigError, match="mean and std were never set.*fit_statistics"):
        super_sac.super_sac(agent, buffer, env, test_env, **_settings(num_steps_offline=1))


def test_offline_script_explains_a_missing_dataset(tmp_path):
    with pytest.raises(ds.DatasetError, match="no Minari dataset 'nope/none-v0'"):
        train_offline(
            ["--dataset", "nope/none-v0", "--datasets_path", str(tmp_path), "--logging", "none"]
        )


def test_offline_script_resumes_from_its_run_directory(dataset):
    first = _small_awac_run(dataset, 100, 50)
    assert first["critic_updates"] == 150 and first["env_steps"] == 50
    # the resumed run takes the dataset and settings from the run directory, its buffer (with
    # the protected dataset) from the checkpoint, and only trains the extra online steps
    resumed = train_offline(["--resume", first["run_dir"], "--steps", "80"])
    assert resumed["run_dir"] == first["run_dir"]
    assert resumed["env_steps"] == 80 and resumed["critic_updates"] == 180
    assert [e["phase"] for e in resumed["eval_history"]][-1] == "online"
    with pytest.raises(SystemExit):  # a new run needs its dataset
        train_offline(["--config", "awac.gin", "--logging", "none"])


def _benchmark_script(name):
    """The module of ``experiments/benchmarks/<name>.py`` (``name`` may hold a sub-folder)."""
    return load_script(ROOT / "experiments" / "benchmarks" / f"{name}.py")


def test_kept_fraction_diagnostic_scores_rescaled_dataset_actions(dataset, monkeypatch, capsys):
    """experiments/benchmarks/afbc_kept_fraction.py: shares of A >= 0 in [0, 1], fewer kept
    against the best of many policy samples than against one, and the dataset's actions
    rescaled from Pendulum's [-2, 2] to [-1, 1] before they are scored."""
    from super_sac import adv_estimator

    run = _small_awac_run(dataset, 50, 0, "FlatEncoder.standardize = True")
    script = _benchmark_script("afbc_kept_fraction")
    seen = []
    estimate = adv_estimator.estimate_advantage

    def spy(agent, rep, actions, **kwargs):
        seen.append(actions)
        return estimate(agent, rep, actions, **kwargs)

    monkeypatch.setattr(adv_estimator, "estimate_advantage", spy)
    shares = script.kept_fractions(run["run_dir"], dataset, "Pendulum-v1", [1, 64], n=150)
    raw = np.load(dataset)["action"]
    assert np.abs(raw).max() > 1.5  # the raw actions use Pendulum's range
    assert all(a.abs().max() <= 1.0 and a.abs().max() > 0.75 and len(a) == 150 for a in seen)
    assert all(0.0 <= v <= 1.0 for by_k in shares.values() for v in by_k.values())
    assert shares["max"][64] < shares["max"][1]
    capsys.readouterr()  # drop what the training run printed
    script.main([run["run_dir"], "--dataset", str(dataset), "--env", "Pendulum-v1",
                 "--samples", "1", "4", "--n", "50"])  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "| V over k policy samples | k = 1 | k = 4 |"
    assert out[2].startswith("| max | ") and out[3].startswith("| mean | ")
    assert out[4].startswith("| max, by priority | ")
    # a batch drawn by advantage priority holds at least the uniform share of kept samples
    assert all(shares["max, by priority"][k] >= shares["max"][k] for k in (1, 64))


def test_bc_action_magnitude_diagnostic_averages_neighbours_before_and_after_tanh(dataset, capsys):
    """experiments/benchmarks/bc_action_magnitude.py on hand-computed neighbours, then its CLI
    on a trained run."""
    script = _benchmark_script("bc_action_magnitude")
    obs = np.array([[0.0], [0.1], [10.0], [10.1], [10.2]], dtype=np.float32)
    action = np.array([[0.1], [0.2], [0.0], [0.9], [-0.5]], dtype=np.float32)
    # state 2's two nearest others are states 3 and 4, with actions 0.9 and -0.5
    stats = script.neighbour_averages(obs, action, np.array([2]), k=2)
    assert stats["spread"] == pytest.approx(0.7)  # std of {0.9, -0.5}
    assert stats["mean_abs_linear"] == pytest.approx(0.2)
    pretanh = np.tanh((np.arctanh(0.9) + np.arctanh(-0.5)) / 2)  # 0.4313
    assert stats["mean_abs_pretanh"] == pytest.approx(pretanh, rel=1e-5)
    with pytest.raises(ValueError, match="k = 5: expected 1 <= k < 5"):
        script.neighbour_averages(obs, action, np.array([2]), k=5)
    # atanh(0.995)^2 = 8.9669, atanh(0.5)^2 = 0.3017, atanh(-0.1)^2 = 0.0101; 1.0 is kept 1e-6
    # inside the bound: atanh(1 - 1e-6)^2 = 7.2543^2 = 52.625
    shares = np.array([[0.995, 0.5], [-0.1, 0.0]], dtype=np.float32)
    assert script.pretanh_share(shares) == pytest.approx(8.9669 / 9.2787, rel=1e-4)
    with_bound = np.array([[1.0, 0.5]], dtype=np.float32)
    assert script.pretanh_share(with_bound) == pytest.approx(52.625 / 52.927, rel=1e-4)
    assert script.pretanh_share(np.zeros((2, 2), dtype=np.float32)) == 0.0  # nothing to share
    run = _small_awac_run(dataset, 20, 0)
    capsys.readouterr()  # drop what the training run printed
    script.main([run["run_dir"], "--dataset", str(dataset), "--env", "Pendulum-v1",
                 "--states", "50", "--k", "3"])  # fmt: skip
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    values = [float(line.rsplit("|", 2)[1]) for line in rows[2:]]
    assert len(values) == 5 and all(0.0 <= v <= 1.0 for v in values)
    # per slice of the dataset's order: [0.25, 0] and [0, 0.5] against a = 0.5 in each entry
    pred = np.array([[0.25], [0.0], [0.0], [0.5]], dtype=np.float32)
    fits = script.slice_fits(pred, np.full((4, 1), 0.5, dtype=np.float32), 2)
    assert fits[0]["mse"] == pytest.approx((0.25**2 + 0.5**2) / 2)
    assert fits[1]["mse"] == pytest.approx(0.5**2 / 2)
    assert [f["sign"] for f in fits] == [0.5, 0.5]  # sign(0) differs from sign(0.5)
    script.main([run["run_dir"], "--dataset", str(dataset), "--env", "Pendulum-v1",
                 "--states", "50", "--by_position", "4"])  # fmt: skip
    out = capsys.readouterr().out
    assert "By position in the dataset (4 slices" in out
    assert "of the action entries have abs(a) > 0.99 and hold" in out
    assert "| slice | reward | share of abs(a) > 0.9 | share of abs(a) > 0.99 |" in out
    assert len([line for line in out.splitlines() if line[:4] in ("| 1 ", "| 4 ")]) == 2


def test_bc_loss_probe_takes_the_error_before_the_tanh_or_without_its_slope(monkeypatch):
    from super_sac import learning_utils as lu

    probe = _benchmark_script("tuning/offline/bc_loss_probe")
    f = torch.tensor([[0.3, -2.0], [1.5, 0.1]], requires_grad=True)
    a = torch.tensor([[0.5, -0.9], [0.2, 0.0]])
    squash = torch.tanh(f).detach()
    residual = squash - a

    def value_and_grad(loss):
        f.grad = None
        value = loss(torch.tanh(f), a)
        value.sum().backward()
        return value.detach(), f.grad.clone()

    # the library's loss: mean_j (tanh f_j - a_j)^2, gradient r (1 - tanh^2) (2 / 2 dims)
    value, grad = value_and_grad(probe.LOSSES["action"])
    assert torch.allclose(value, residual.pow(2).mean(-1, keepdim=True))
    assert torch.allclose(grad, residual * (1 - squash.pow(2)))
    # before the tanh: mean_j (f_j - atanh a_j)^2, gradient f - atanh(a)
    value, grad = value_and_grad(probe.LOSSES["preimage"])
    target = torch.atanh(a)
    assert torch.allclose(value, (f.detach() - target).pow(2).mean(-1, keepdim=True), atol=1e-5)
    assert torch.allclose(grad, f.detach() - target, atol=1e-5)
    # straight through: the value on a, the gradient r without the tanh's slope
    value, grad = value_and_grad(probe.LOSSES["straight_through"])
    assert torch.allclose(value, residual.pow(2).mean(-1, keepdim=True))
    assert torch.allclose(grad, residual, atol=1e-6)
    assert not torch.allclose(grad, residual * (1 - squash.pow(2)), atol=1e-3)
    # a target clip moves the dataset's actions, not the prediction: 0.9 caps atanh(a) at 1.47
    clipped = probe.with_target_clip(probe.preimage_error, 0.9)
    b = torch.tensor([[0.99, -0.2]])
    expected = ((f.detach()[:1] - torch.atanh(torch.tensor([[0.9, -0.2]]))) ** 2).mean()
    assert torch.allclose(clipped(torch.tanh(f.detach()[:1]), b), expected.view(1, 1), atol=1e-5)
    # main swaps the library's loss for the chosen one before training
    monkeypatch.setattr(lu, "deterministic_bc_error", lu.deterministic_bc_error)
    seen = {}
    monkeypatch.setattr(probe.cli, "train_offline", lambda argv, **_: seen.update(argv=argv))
    probe.main(["--bc_loss", "preimage", "--config", "x.gin", "--seed", "3"])
    assert lu.deterministic_bc_error is probe.preimage_error
    assert seen["argv"] == ["--config", "x.gin", "--seed", "3"]
    probe.main(["--bc_loss", "action", "--target_clip", "0.5", "--seed", "3"])
    assert lu.deterministic_bc_error(torch.zeros(1, 1), torch.ones(1, 1)).item() == 0.25
    with pytest.raises(SystemExit, match="give a bound inside"):
        probe.main(["--bc_loss", "action", "--target_clip", "1.0"])
    # weighted_action: the error on a, weighted by (1 - a^2)^-2, preimage's metric near the fit
    a = torch.tensor([[0.5, -0.8]])
    pred = torch.tensor([[0.6, -0.7]])
    expected = (0.1**2 / 0.75**2 + 0.1**2 / 0.36**2) / 2
    value = probe.weighted_action_error(pred, a)
    assert math.isclose(value.item(), expected, rel_tol=1e-5)
    near = a + torch.tensor([[1e-3, -2e-3]])  # to first order it is preimage's error
    ratio = probe.weighted_action_error(near, a) / probe.preimage_error(near, a)
    assert math.isclose(ratio.item(), 1.0, rel_tol=1e-2)
    with pytest.raises(SystemExit, match="give --target_clip"):
        probe.main(["--bc_loss", "weighted_action"])


def test_aggregation_probe_averages_a_mixture_after_or_before_the_tanh():
    probe = _benchmark_script("tuning/offline/aggregation_probe")
    # two policies at one state, one action dimension: a hesitant mu = 0.2 and a confident mu = 2
    loc = torch.tensor([[0.2], [2.0]])
    scale = torch.tensor([[0.5], [0.5]])
    eps = torch.tensor([[[1.0], [0.0]], [[-1.0], [0.0]]])  # (K=2 samples, C=2 policies, A=1)
    out = probe.aggregate(loc, scale, eps)
    samples = torch.tensor([math.tanh(0.7), math.tanh(2.0), math.tanh(-0.3), math.tanh(2.0)])
    assert math.isclose(out["a_mean"].item(), samples.mean().item(), abs_tol=1e-6)
    # before the tanh the noise cancels: tanh of the mean of 0.7, 2, -0.3, 2
    assert math.isclose(out["u_mean"].item(), math.tanh(1.1), abs_tol=1e-5)
    assert math.isclose(out["a_det"].item(), (math.tanh(0.2) + math.tanh(2.0)) / 2, abs_tol=1e-6)
    assert math.isclose(out["u_det"].item(), math.tanh(1.1), abs_tol=1e-6)
    # the confident policy pulls harder before the tanh: 0.80 against 0.58
    assert out["u_det"].item() > out["a_det"].item() + 0.2
    # clipped at 0.9 first: tanh(2) = 0.964 counts as 0.9
    clipped = samples.clamp(-0.9, 0.9)
    assert math.isclose(out["a_clip09"].item(), clipped.mean().item(), abs_tol=1e-6)
    u_clip = math.tanh(torch.atanh(clipped).mean().item())
    assert math.isclose(out["u_clip09"].item(), u_clip, abs_tol=1e-5)


def test_minatar_offline_probe_scores_the_dataset_actions_by_hand():
    probe = _benchmark_script("tuning/minatar/offline_probe")
    # two states, three actions; the encoder passes the state's one-hot through
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]))
    q_min = torch.tensor([[1.0, 2.0, 0.0], [4.0, 3.0, 3.5]])
    critic = torch.stack([q_min, q_min + 1.0])  # (critics, B, actions): the min is q_min
    agent = SimpleNamespace(
        discrete=True,
        encoder=lambda obs: obs["obs"],
        actor=lambda rep: torch.distributions.Categorical(logits=rep @ logits),
        critic=lambda rep: torch.einsum("sb,cba->csa", rep, critic),
    )
    data = SimpleNamespace(obs={"obs": np.eye(2, dtype=np.float32)}, action=np.array([0, 0]))
    out = probe.dataset_scores(agent, data, batch=1)  # one state per batch: the sums add up
    assert math.isclose(out["log_lik"], (math.log(0.5) + math.log(0.1)) / 2, rel_tol=1e-6)
    assert out["actor_agree"] == 0.5  # argmax pi is 0 at state 0, 2 at state 1
    assert out["critic_agree"] == 0.5  # argmax Q is 1 at state 0, 0 at state 1
    # V = sum_a pi Q = 0.5 + 0.6 + 0 = 1.1 and 0.4 + 0.3 + 2.8 = 3.5: A = -0.1 (dropped), +0.5
    assert out["kept"] == 0.5
    assert math.isclose(out["action_gap"], (2.0 + 1.0) / 2)
    assert math.isclose(out["v_spread"], torch.tensor([1.1, 3.5]).std().item(), rel_tol=1e-6)
