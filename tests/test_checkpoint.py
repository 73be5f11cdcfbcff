"""Crash safety: atomic checkpoints, exact resume after SIGKILL, corrupted and malicious
checkpoints, NaN guards, unwritable save folders."""

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections import deque
from pathlib import Path

import numpy as np
import pytest
import torch

import super_sac
from super_sac import Agent, ReplayBuffer, checkpoint, nets
from super_sac.checkpoint import CheckpointError
from super_sac.loggers import check_writable
from super_sac.main import NonFiniteError, TrainConfig, Trainer
from super_sac.utils import sha256_file
from super_sac.wrappers import make_gym_env

HERE = Path(__file__).resolve().parent
STEPS = 300


def _crash_run(save_dir, name, *extra):
    proc = subprocess.run(
        [sys.executable, str(HERE / "crash_run.py"), str(save_dir), name, str(STEPS), *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc


def _final_weights(run_dir):
    return torch.load(Path(run_dir) / "agent.pt", weights_only=True)["state_dict"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run of the same length and seed."""
    save = tmp_path_factory.mktemp("reference")
    proc = _crash_run(save, "ref")
    assert proc.returncode == 0, proc.stderr
    return _final_weights(save / "ref_0")


@pytest.mark.parametrize(
    "kill, resumed_from",
    [
        ("update:150", "ckpt_200"),  # killed inside an update at step 250
        ("state_write:2", "ckpt_100"),  # killed while writing the step-200 state.pt
        ("buffer_write:2", "ckpt_100"),  # killed before the step-200 manifest
        ("rename:2", "ckpt_200"),  # killed after the rename, before old ones are deleted
    ],
)
def test_resume_after_sigkill_matches_an_uninterrupted_run(tmp_path, reference, kill, resumed_from):
    proc = _crash_run(tmp_path, "crash", "--kill", kill)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    run_dir = tmp_path / "crash_0"
    complete = [p.name for p in checkpoint.list_checkpoints(run_dir)]
    assert complete[0] == resumed_from
    proc = _crash_run(tmp_path, "crash", "--resume", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    resumed = _final_weights(run_dir)
    for key, value in reference.items():
        assert torch.equal(value, resumed[key]), key
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == STEPS
    assert not list((run_dir / "checkpoints").glob(".tmp*"))


def test_kill_before_the_first_checkpoint_leaves_nothing_to_resume(tmp_path):
    proc = _crash_run(tmp_path, "early", "--kill", "state_write:1")
    assert proc.returncode == -signal.SIGKILL
    proc = _crash_run(tmp_path, "early", "--resume", str(tmp_path / "early_0"))
    assert proc.returncode != 0
    assert "no checkpoint" in proc.stderr
    assert f"Fix: delete {tmp_path / 'early_0'} and start the run again" in proc.stderr


# ----------------------------------------------------------------------------- in-process


def _trainer(tmp_path, **cfg):
    env, test_env = make_gym_env("Pendulum-v1"), make_gym_env("Pendulum-v1")
    torch.manual_seed(0)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=16)
    settings = dict(
        random_warmup_steps=20,
        batch_size=16,
        verbosity=0,
        eval_episodes=1,
        base_save_path=str(tmp_path),
        name="t",
        logging_method="none",
        max_episode_steps=30,
        seed=1,
        checkpoint_interval=10,
        eval_interval=1000,
    )
    settings.update(cfg)
    return Trainer(agent, ReplayBuffer(1000, verbose=False), env, test_env, TrainConfig(**settings))


def test_truncated_checkpoint_falls_back_to_the_previous_one(tmp_path):
    trainer = _trainer(tmp_path, num_steps_online=40, keep_checkpoints=3)
    trainer.run()
    newest, previous = checkpoint.list_checkpoints(trainer.run_dir)[:2]
    state_file = newest / "state.pt"
    state_file.write_bytes(state_file.read_bytes()[:100])
    with pytest.warns(UserWarning, match="skipping corrupted checkpoint.*state.pt has 100 bytes"):
        folder, state = checkpoint.load_latest(
            trainer.run_dir, ReplayBuffer(1000, verbose=False), torch.device("cpu")
        )
    assert folder == previous and state["counters"]["step"] == 30
    for folder in checkpoint.list_checkpoints(trainer.run_dir):  # damage them all
        (folder / "state.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"every checkpoint .* is corrupted.*Fix: restore"):
        with pytest.warns(UserWarning):
            checkpoint.load_latest(
                trainer.run_dir, ReplayBuffer(1000, verbose=False), torch.device("cpu")
            )


def test_checkpoint_holds_the_whole_state_and_keeps_the_last_k(tmp_path):
    trainer = _trainer(tmp_path, num_steps_online=50, keep_checkpoints=2)
    trainer.run()
    names = [p.name for p in checkpoint.list_checkpoints(trainer.run_dir)]
    assert names == ["ckpt_50", "ckpt_40"]
    buffer = ReplayBuffer(1000, verbose=False)
    _, state = checkpoint.load_latest(trainer.run_dir, buffer, torch.device("cpu"))
    for key in (
        "agent",
        "target_agent",
        "critic_optimizer",
        "actor_optimizer",
        "alpha_optimizer",
        "log_alpha",
        "noise",
        "nstep",
        "counters",
        "eval_history",
        "episodes_in_progress",
        "rng",
    ):
        assert key in state
    assert state["counters"]["critic_updates"] == trainer.critic_updates
    assert len(buffer) == len(trainer.buffer) == 50
    assert torch.equal(state["log_alpha"], trainer.log_alpha.detach())


def test_agent_load_reads_a_checkpoint_folder_and_names_a_damaged_file(tmp_path):
    trainer = _trainer(tmp_path, num_steps_online=40, keep_checkpoints=2)
    trainer.run()
    older = checkpoint.list_checkpoints(trainer.run_dir)[-1]  # ckpt_30, before the last updates
    state = torch.load(older / "state.pt", weights_only=True)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=16)
    agent.load(older)  # the checkpoint's agent, not the run's final agent.pt
    agent.load(older / "state.pt")  # the state file itself names the same checkpoint
    for name, value in agent.state_dict().items():
        assert torch.equal(value, state["agent"][name]), name
    assert not all(
        torch.equal(value, trainer.agent.state_dict()[name])
        for name, value in agent.state_dict().items()
    )
    with pytest.raises(ValueError, match="hidden_size: saved 16, this agent 8"):
        Agent(1, nets.FlatEncoder(3), hidden_size=8).load(older)
    with pytest.raises(FileNotFoundError, match=r"no agent weights at .*Fix: pass the run"):
        agent.load(tmp_path / "nowhere")
    empty = tmp_path / "empty" / "agent.pt"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"agent.pt could not be read \(EOFError"):
        agent.load(empty.parent)


def test_smuggled_pickle_is_refused_and_never_runs(tmp_path):
    trainer = _trainer(tmp_path, num_steps_online=20)
    trainer.run()
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    newest = checkpoint.list_checkpoints(trainer.run_dir)[0]
    torch.save({"counters": Payload()}, newest / "state.pt")
    manifest = json.loads((newest / "MANIFEST.json").read_text())
    manifest["files"]["state.pt"] = {
        "sha256": sha256_file(newest / "state.pt"),
        "bytes": (newest / "state.pt").stat().st_size,
    }
    (newest / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.warns(UserWarning, match="could not be read.*Weights only load failed"):
        folder, _ = checkpoint.load_latest(
            trainer.run_dir, ReplayBuffer(1000, verbose=False), torch.device("cpu")
        )
    assert folder.name == "ckpt_10"
    assert not marker.exists()


def test_resume_with_a_different_configuration_lists_the_differences(tmp_path):
    trainer = _trainer(tmp_path, num_steps_online=20)
    trainer.run()
    env, test_env = make_gym_env("Pendulum-v1"), make_gym_env("Pendulum-v1")
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=32, num_critics=3)
    cfg = TrainConfig(
        random_warmup_steps=20,
        batch_size=16,
        verbosity=0,
        logging_method="none",
        num_steps_online=30,
        resume=str(trainer.run_dir),
        target_critic_ensemble_n=2,
    )
    with pytest.raises(CheckpointError, match="hidden_size: saved 16, now 32") as info:
        Trainer(agent, ReplayBuffer(1000, verbose=False), env, test_env, cfg).run()
    assert "num_critics: saved 2, now 3" in str(info.value)


def test_nan_loss_stops_the_run_with_a_diagnostic_snapshot(tmp_path, monkeypatch):
    original = super_sac.learning_utils.critic_loss
    calls = {"n": 0}

    def poisoned(q, target, weights=None):
        calls["n"] += 1
        loss = original(q, target, weights)
        return loss * float("nan") if calls["n"] >= 15 else loss

    monkeypatch.setattr(super_sac.learning_utils, "critic_loss", poisoned)
    trainer = _trainer(tmp_path, num_steps_online=100)
    with pytest.raises(NonFiniteError) as info:
        trainer.run()
    message = str(info.value)
    # warm-up 20 steps, so the 15th critic update happens at online step 35
    # the critic loss is named first; the NaN weights then spoil the actor loss of that step
    assert message.startswith("non-finite critic/loss, actor/loss")
    assert "at online step 35 (env step 35)" in message
    assert "ckpt_30" in message
    snapshot = trainer.run_dir / "diagnostics" / "step_35"
    assert (snapshot / "agent.pt").exists()
    assert json.loads((snapshot / "metrics.json").read_text())["step"] == 35


def test_checkpoints_are_never_written_from_non_finite_weights(tmp_path):
    trainer = _trainer(tmp_path, num_steps_online=5)
    trainer.run()
    with torch.no_grad():
        next(trainer.agent.critic.parameters()).fill_(float("inf"))
    with pytest.raises(NonFiniteError, match="agent parameters"):
        trainer.write_checkpoint()


def test_unwritable_or_full_save_folder_fails_early(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    trainer = _trainer(tmp_path, num_steps_online=5, base_save_path=str(blocker / "sub"))
    with pytest.raises(PermissionError, match="set SSAC_SAVE"):
        trainer.run()
    with pytest.raises(OSError, match="MiB free but the checkpoints need"):
        check_writable(tmp_path, 1 << 60)


def test_resume_needs_an_existing_run(tmp_path):
    trainer = _trainer(tmp_path, num_steps_online=5, resume=True, name="never_ran")
    with pytest.raises(CheckpointError, match="no run named never_ran"):
        trainer.run()


def test_rng_states_round_trip():
    gen = np.random.default_rng(5)
    states = checkpoint.capture_rng_states(g=gen)
    expected = (gen.random(), np.random.rand(), torch.rand(1))
    checkpoint.restore_rng_states(states, g=gen)
    assert (gen.random(), np.random.rand(), torch.rand(1)) == expected


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"checkpoint_interval": 0}, "checkpoint_interval = 0: must be >= 1"),
        ({"keep_checkpoints": 0}, "keep_checkpoints = 0: must be >= 1"),
    ],
)
def test_checkpoint_settings_are_validated(kwargs, message):
    env = make_gym_env("Pendulum-v1")
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    with pytest.raises(super_sac.main.ConfigError, match=message):
        super_sac.super_sac(
            agent,
            ReplayBuffer(100, verbose=False),
            env,
            env,
            random_warmup_steps=0,
            verbosity=0,
            **kwargs,
        )


def test_afbc_with_a_deterministic_actor_is_rejected():
    env = make_gym_env("Pendulum-v1")
    agent = Agent(
        1,
        nets.FlatEncoder(3),
        hidden_size=8,
        actor_network_cls=super_sac.nets.mlps.ContinuousDeterministicActor,
    )
    with pytest.raises(super_sac.main.ConfigError, match="log-likelihood"):
        super_sac.super_sac(
            agent, ReplayBuffer(100, verbose=False), env, env, num_steps_offline=10, verbosity=0
        )


def test_warnings_module_is_quiet_for_a_clean_resume(tmp_path):
    trainer = _trainer(tmp_path, num_steps_online=25)
    trainer.run()
    resumed = _trainer(tmp_path, num_steps_online=40, resume=str(trainer.run_dir))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = resumed.run()
    assert summary["env_steps"] == 40 and resumed.critic_updates == 20


def test_a_resumed_run_trains_with_its_current_learning_rates(tmp_path):
    trainer = _trainer(tmp_path, num_steps_online=25)
    trainer.run()
    saved = trainer.learner.critic_optimizer.state_dict()["state"]
    resumed = _trainer(tmp_path, num_steps_online=40, resume=str(trainer.run_dir), critic_lr=1e-5)
    resumed.open_run()
    resumed.restore()
    critic = resumed.learner.critic_optimizer
    # the moments come from the checkpoint, the learning rate from the resumed run's settings
    assert {g["lr"] for g in critic.param_groups} == {1e-5}
    assert critic.state_dict()["state"][0]["exp_avg"].equal(saved[0]["exp_avg"])
    assert {g["lr"] for g in resumed.learner.actor_optimizer.param_groups} == {3e-4}
    resumed._release_run_dir()


def test_a_second_run_into_a_run_directory_in_use_is_refused(tmp_path):
    from super_sac.loggers import RunDirInUseError, lock_run_dir

    folder = tmp_path / "run"
    folder.mkdir()
    held = lock_run_dir(folder)  # another run writing there
    with pytest.raises(RunDirInUseError, match=r"being written by another run.*Fix: wait"):
        _trainer(tmp_path, num_steps_online=5, run_dir=str(folder)).run()
    assert not (folder / "config.gin").exists() and not (folder / "hparams.json").exists()
    held.close()
    trainer = _trainer(tmp_path, num_steps_online=25, run_dir=str(folder))
    trainer.run()  # free again; a finished run releases it for a resume
    with pytest.raises(RunDirInUseError):  # resuming a run that is still going
        lock = lock_run_dir(folder)
        try:
            _trainer(tmp_path, num_steps_online=30, resume=str(folder)).run()
        finally:
            lock.close()
    assert _trainer(tmp_path, num_steps_online=30, resume=str(folder)).run()["env_steps"] == 30


def test_a_resumed_tensorboard_log_keeps_the_checkpoints_own_step(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    settings = dict(logging_method="tensorboard", log_interval=10, checkpoint_interval=20)
    trainer = _trainer(tmp_path, num_steps_online=40, **settings)
    trainer.run()
    _trainer(tmp_path, num_steps_online=60, resume=str(trainer.run_dir), **settings).run()
    events = EventAccumulator(str(trainer.run_dir))
    events.Reload()
    steps = [e.step for e in events.Scalars("critic/loss")]
    # updates start after the 20 warm-up steps; 40 was logged before the final checkpoint at
    # 40, so the resume keeps it (it used to purge it) and adds 50 and 60
    assert steps == [30, 40, 50, 60]


def test_the_last_steps_evaluation_comes_before_its_checkpoint_and_is_not_repeated(
    tmp_path, monkeypatch
):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    settings = dict(
        logging_method="tensorboard", log_interval=10, checkpoint_interval=10, eval_interval=15
    )
    trainer = _trainer(tmp_path, num_steps_online=20, **settings)
    save = Trainer.save

    def interrupted(self):  # the run stops after the last checkpoint, before its final save
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        trainer.run()
    monkeypatch.setattr(Trainer, "save", save)
    resumed = _trainer(tmp_path, num_steps_online=20, resume=str(trainer.run_dir), **settings)
    summary = resumed.run()
    assert [e["env_steps"] for e in summary["eval_history"]] == [15, 20]
    events = EventAccumulator(str(trainer.run_dir))
    events.Reload()
    assert [e.step for e in events.Scalars("eval/return_mean")] == [15, 20]  # 20 once


def test_resuming_a_finished_run_keeps_its_speed_figures(tmp_path):
    trainer = _trainer(tmp_path, num_steps_online=25)
    first = trainer.run()
    again = _trainer(tmp_path, num_steps_online=25, resume=str(trainer.run_dir)).run()
    assert again["env_steps"] == 25 and first["env_steps_per_s"] > 0
    assert again["env_steps_per_s"] == first["env_steps_per_s"]
    assert again["updates_per_s"] == first["updates_per_s"]


def test_optimizer_states_that_do_not_fit_are_a_checkpoint_error(tmp_path, monkeypatch):
    from super_sac.learner import Learner

    trainer = _trainer(tmp_path, num_steps_online=20)
    trainer.run()

    def other_groups(self, state):  # what torch raises for another number of param groups
        raise ValueError("loaded state dict has a different number of parameter groups")

    monkeypatch.setattr(Learner, "load_state_dict", other_groups)
    with pytest.raises(CheckpointError, match=r"do not fit this run's \(loaded state dict"):
        _trainer(tmp_path, num_steps_online=30, resume=str(trainer.run_dir)).run()


def test_an_interrupted_run_says_how_to_resume_and_frees_its_folder(tmp_path, capsys):
    from super_sac.loggers import lock_run_dir

    trainer = _trainer(tmp_path, num_steps_online=40)
    update = trainer.update

    def interrupted_at_25(*args, **kwargs):
        if trainer.step == 25:
            raise KeyboardInterrupt
        return update(*args, **kwargs)

    trainer.update = interrupted_at_25
    with pytest.raises(KeyboardInterrupt):
        trainer.run()
    err = capsys.readouterr().err
    assert f"interrupted at online step 25 of {trainer.run_dir}" in err
    assert "newest checkpoint is" in err and err.rstrip().endswith("run again")
    assert "ckpt_20" in err and f"--resume {trainer.run_dir}" in err
    lock_run_dir(trainer.run_dir).close()  # released: a resume may start
    assert (
        _trainer(tmp_path, num_steps_online=40, resume=str(trainer.run_dir)).run()["env_steps"]
        == 40
    )


def test_the_scripts_stop_quietly_on_sigterm_as_on_ctrl_c(capsys):
    import os

    from super_sac.cli import cli

    before = signal.getsignal(signal.SIGTERM)

    def preempted():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this

    with pytest.raises(SystemExit) as info:
        cli(preempted)
    assert info.value.code == 130 and "interrupted" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is put back


SUNRISE = {
    "agent": {"ensemble_size": 3, "ucb_bonus": 1.0},
    "loop": {"weighted_bellman_temp": 20.0, "bootstrap_mask_prob": 0.5},
}


def _parallel_trainer(
    tmp_path, steps, resume=False, agent_kwargs=None, loop_kwargs=None, autoreset="DISABLED"
):
    import gymnasium as gym

    venv = gym.vector.SyncVectorEnv(
        [lambda: make_gym_env("Pendulum-v1", max_episode_steps=15)] * 2,
        autoreset_mode=gym.vector.AutoresetMode[autoreset],
    )
    torch.manual_seed(0)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=16, **(agent_kwargs or {}))
    cfg = TrainConfig(
        **(loop_kwargs or {}),
        random_warmup_steps=20,
        batch_size=16,
        verbosity=0,
        eval_episodes=0,
        base_save_path=str(tmp_path),
        name="par",
        logging_method="none",
        seed=4,
        checkpoint_interval=10,
        num_steps_online=steps,
        transitions_per_online_step=2,
        n_step=3,
        resume=resume,
    )
    return Trainer(agent, ReplayBuffer(1000, verbose=False), venv, make_gym_env("Pendulum-v1"), cfg)


@pytest.mark.parametrize("algo", ["sac", "sunrise"])
def test_parallel_envs_with_nstep_resume_exactly(tmp_path, algo):
    kw = (
        {"agent_kwargs": SUNRISE["agent"], "loop_kwargs": SUNRISE["loop"]}
        if algo == "sunrise"
        else {}
    )
    full = _parallel_trainer(tmp_path / "a", 40, **kw)
    full.run()
    # checkpoint at 25 mid-episode, n-step pending
    part = _parallel_trainer(tmp_path / "b", 25, **kw)
    part.run()
    resumed = _parallel_trainer(tmp_path / "b", 40, resume=True, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed.run()
    assert resumed.env_steps == full.env_steps == 80
    for (k, a), b in zip(full.agent.state_dict().items(), resumed.agent.state_dict().values()):
        assert torch.equal(a, b), k
    assert torch.equal(full.log_alpha, resumed.log_alpha)


def test_a_resume_on_envs_it_cannot_replay_stores_the_pending_windows_as_truncated(tmp_path):
    """A SAME_STEP vector env starts fresh episodes on resume; the n-step windows in progress
    at the checkpoint become truncated windows bootstrapping from the checkpoint's
    observations, as at a time limit."""
    part = _parallel_trainer(tmp_path, 25, autoreset="SAME_STEP")
    part.run()  # each env 25 steps into 15-step episodes: 10 into the second, 2 steps pending
    saved, gamma = len(part.buffer), part.cfg.gamma
    pending = [list(queue) for queue in part.collector.nstep._pending]
    assert [len(queue) for queue in pending] == [2, 2]
    resumed = _parallel_trainer(tmp_path, 25, resume=True, autoreset="SAME_STEP")
    resumed.open_run()
    try:
        with pytest.warns(UserWarning, match="cannot be replayed.*stored as truncated"):
            resumed.restore()
    finally:
        resumed._release_run_dir()
    buf = resumed.buffer
    assert len(buf) == saved + 4 and resumed.collector.nstep._pending == [deque(), deque()]
    new = slice(saved, saved + 4)
    rows = [step for queue in pending for step in queue]  # env 0's two steps, then env 1's
    r = [reward for _, _, reward in rows]
    expected = [r[0] + gamma * r[1], r[1], r[2] + gamma * r[3], r[3]]
    np.testing.assert_allclose(buf._reward[new], expected, rtol=1e-6)
    np.testing.assert_allclose(buf._discount[new], [gamma**2, gamma] * 2, rtol=1e-6)
    assert buf._done[new].tolist() == [0.0] * 4
    np.testing.assert_array_equal(buf._obs["obs"][new], np.stack([o["obs"] for o, _, _ in rows]))
    np.testing.assert_array_equal(buf._action[new], np.stack([a for _, a, _ in rows]))
    last = part.collector.obs["obs"]
    np.testing.assert_array_equal(buf._next_obs["obs"][new], last[[0, 0, 1, 1]])
