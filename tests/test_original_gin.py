"""The original super_sac's gin files run unchanged through the training scripts' entry points.

tests/data/original_gin holds unmodified copies of the original project's configs. Each test runs
one of them with the command line of the script it was written for (experiments/gym, minatar,
atari); ``--gin_bindings`` only shorten the run and shrink the networks and the buffer. Each
run must finish with the expected number of env steps and critic updates, a finite evaluation
return, and exactly the warnings its values call for.
"""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from super_sac import cli
from super_sac.validation import ConfigWarning

ROOT = Path(__file__).resolve().parents[1]
ORIGINAL = ROOT / "tests" / "data" / "original_gin"

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# shorter and smaller only: every other value comes from the original file
SHORT = [
    "super_sac.random_warmup_steps = 100",
    "super_sac.batch_size = 32",
    "super_sac.eval_episodes = 1",
    "Agent.hidden_size = 32",
    "ReplayBuffer.size = 1000",
]
STEPS = 150  # online steps of the gym and MinAtar runs: 50 of them after the warm-up

# file -> (env, critic updates per step, transitions per step, warnings its values call for)
GYM = {
    "gym_sac.gin": ("Pendulum-v1", 1, 1, []),
    "gym_td3.gin": ("Pendulum-v1", 2, 2, []),
    "gym_ddpg.gin": ("Pendulum-v1", 1, 1, []),
    "gym_redq.gin": ("Pendulum-v1", 20, 1, []),
    "gym_sunrise.gin": ("Pendulum-v1", 1, 1, []),
    "gym_awac.gin": ("Pendulum-v1", 1, 1, []),
    "gym_sac_discrete.gin": ("CartPole-v1", 1, 1, []),
    "gym_awac_discrete.gin": ("CartPole-v1", 1, 1, []),
}


def test_every_original_file_has_a_test():
    covered = set(GYM) | {"minatar_basic_online.gin", "atari_basic_online.gin"}
    covered |= {"minatar_basic_offline.gin", "d4rl_basic_afbc.gin"}  # DR3: tests/test_dr3.py
    covered |= {"minatar_behavioral_cloning.gin"}
    assert {p.name for p in ORIGINAL.glob("*.gin")} == covered


def _bindings(extra=()):
    return [x for b in [*SHORT, *extra] for x in ("--gin_bindings", b)]


def _run(entry, argv):
    """Run ``entry(argv)``; return the summary and the bindings named by its ConfigWarnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = entry(argv)
    named = [
        str(w.message).split(":")[0].split(" ")[0]
        for w in caught
        if issubclass(w.category, ConfigWarning)
    ]
    return summary, named


@pytest.mark.parametrize("name", sorted(GYM))
def test_original_gym_file_trains_unchanged(name):
    env, per_step, transitions, expected_warnings = GYM[name]
    argv = ["--env", env, "--config", str(ORIGINAL / name), "--steps", str(STEPS), "--seed", "0"]
    summary, named = _run(cli.train_gym, argv + _bindings())
    assert summary["env_steps"] == STEPS * transitions
    # updates start once the 100 warm-up transitions are in: 50 steps x 1 (20 for REDQ); TD3
    # collects 2 transitions per step, so 100 steps x 2 critic updates
    assert summary["critic_updates"] == {1: 50, 20: 1000, 2: 200}[per_step]
    assert np.isfinite(summary["final_eval_return"])
    assert named == expected_warnings
    if name.startswith("gym_awac"):  # pg_actor_updates_per_step = 0: one AFBC update per step
        assert summary["actor_updates"] == 50


def test_original_minatar_file_trains_unchanged():
    argv = ["--game", "breakout", "--config", str(ORIGINAL / "minatar_basic_online.gin")]
    argv += ["--steps", str(STEPS), "--seed", "0"]
    summary, named = _run(cli.train_minatar, argv + _bindings(["MinAtarEncoder.emb_dim = 16"]))
    assert summary["env_steps"] == STEPS and summary["critic_updates"] == 50
    assert np.isfinite(summary["final_eval_return"])
    # init_alpha = 0 with alpha_lr = 1e-4: alpha starts at 1e-15 and is tuned (announced once)
    assert named == ["super_sac.init_alpha"]


def test_original_minatar_behavioral_cloning_trains_unchanged(tmp_path):
    """Behavioral cloning alone: the file's ``critic_updates_per_step = 0`` is accepted (no
    critic update runs without offline or online steps) and only BC updates run."""
    from super_sac import datasets as ds
    from super_sac.wrappers import make_minatar_env

    env = make_minatar_env("breakout", max_episode_steps=100)
    episodes, _, act_space = ds.record_episodes(env, ds.random_policy(env, 0), 300, seed=0)
    path = ds.save_npz(tmp_path / "breakout-random.npz", episodes, act_space)
    argv = ["--game", "breakout", "--config", str(ORIGINAL / "minatar_behavioral_cloning.gin")]
    argv += ["--dataset", str(path), "--seed", "0", "--max_episode_steps", "100"]
    extra = ["super_sac.bc_warmup_steps = 20", "MinAtarEncoder.emb_dim = 8"]
    summary, named = _run(cli.train_minatar, argv + _bindings(extra))
    assert summary["env_steps"] == 0 and summary["critic_updates"] == 0
    assert summary["actor_updates"] == 20  # the BC updates
    assert np.isfinite(summary["final_eval_return"])
    assert named == []


def test_critic_updates_per_step_0_is_refused_where_critic_updates_run():
    from super_sac.config import TrainConfig
    from super_sac.validation import ConfigError
    from super_sac.validation.settings import _validate_update_counts

    _validate_update_counts(TrainConfig(critic_updates_per_step=0, num_steps_online=0))
    with pytest.raises(ConfigError, match=r"critic_updates_per_step = 0.*num_steps_offline = 5"):
        _validate_update_counts(
            TrainConfig(critic_updates_per_step=0, num_steps_online=0, num_steps_offline=5)
        )
    with pytest.raises(ConfigError, match=r"critic_updates_per_step = -1"):
        _validate_update_counts(TrainConfig(critic_updates_per_step=-1, num_steps_online=0))


def test_original_atari_file_trains_unchanged():
    pytest.importorskip("ale_py")
    extra = [
        "super_sac.random_warmup_steps = 30",  # replaces SHORT's 100 (applied later)
        "super_sac.batch_size = 8",
        "NatureEncoder.emb_dim = 16",
        "super_sac.max_episode_steps = 40",  # cuts the training and evaluation episodes
    ]
    argv = ["--game", "Pong", "--config", str(ORIGINAL / "atari_basic_online.gin")]
    argv += ["--steps", "50", "--seed", "0"]
    summary, named = _run(cli.train_atari, argv + _bindings(extra))
    assert summary["env_steps"] == 50 and summary["critic_updates"] == 20
    assert np.isfinite(summary["final_eval_return"])
    assert summary["eval_history"][-1]["length_mean"] <= 40
    # the file's aug_mix = .9 applies to the script's default random shift, as in the original
    assert named == []
    hparams = json.loads((Path(summary["run_dir"]) / "hparams.json").read_text())
    assert hparams["augmenter"] == "AugmentationSequence"  # the default random shift


def test_the_atari_script_shifts_frames_unless_gin_binds_an_augmenter():
    import gin

    from super_sac.augmentations import AugmentationSequence, Drqv2Aug
    from super_sac.config import parse_gin

    gin.clear_config()
    try:
        augmenter = cli.atari_loop_defaults(None)["augmenter"]
        assert isinstance(augmenter, AugmentationSequence) and not augmenter.shared_draw
        assert [type(a) for a in augmenter.aug_list] == [Drqv2Aug]
        assert augmenter.aug_list[0].pad == 4  # DrQ-v2's shift of up to 4 pixels
        parse_gin([], ["super_sac.augmenter = None"])
        assert cli.atari_loop_defaults(None) == {}
    finally:
        gin.clear_config()
