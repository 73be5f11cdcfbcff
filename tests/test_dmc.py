"""DeepMind Control envs (super_sac/envs/dmc.py) and experiments/dmc/train_dmc_from_pixels.py.

Small images (32 px) and short runs keep these fast; dm_control renders headless (EGL).
"""

import inspect
import shutil
from pathlib import Path

import numpy as np
import pytest
from script_loader import load_script

pytest.importorskip("dm_control")

import super_sac  # noqa: E402
from super_sac import cli, validation  # noqa: E402
from super_sac.envs.dmc import DMCEnv, make_dmc_env, parse_dmc_id  # noqa: E402
from super_sac.replay import ReplayBuffer  # noqa: E402
from super_sac.wrappers import frame_stack_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DMC = ROOT / "experiments" / "dmc"
ORIGINAL = ROOT / "tests" / "data" / "original_gin" / "dmc"

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = [
    "super_sac.random_warmup_steps = 20",
    "super_sac.batch_size = 8",
    "super_sac.eval_episodes = 1",
    "Agent.hidden_size = 16",
    "ReplayBuffer.size = 500",
]

AUGMENTER_REFUSED = "augmenter" in getattr(validation, "_NOT_YET", {})
AUG_REASON = (
    "super_sac.augmenter is still refused as not implemented (and super_sac.augmentations may "
    "be missing); runs after the pixel-loop integration"
)
HAS_K_M = "aug_target_samples" in inspect.signature(super_sac.super_sac).parameters


def _script():
    return load_script(DMC / "train_dmc_from_pixels.py", register=True)


def _recorder():
    return load_script(DMC / "record_replay.py", name="dmc_record")


def _bindings(extra=()):
    return [x for b in [*SMALL, *extra] for x in ("--gin_bindings", b)]


def train_cartpole_from_pixels(config, tmp_path, image_size="32", extra_argv=(), bindings=()):
    """A 30-step cartpole_swingup run of the pixel script with ``config``; its summary."""
    argv = ["--domain", "cartpole", "--task", "swingup", "--config", str(config)]
    argv += ["--image_size", image_size, *extra_argv, "--steps", "30", "--seed", "0"]
    argv += ["--logging", "none", "--run_dir", str(tmp_path / "run")]
    return _script().main(argv + _bindings(bindings))


# ------------------------------------------------------------------------------ the env


def test_pixel_spaces_dtypes_and_stack_layout():
    env = make_dmc_env("cartpole", "swingup", from_pixels=True, image_size=32, frame_stack=3)
    space = env.observation_space["obs"]
    assert space.shape == (9, 32, 32) and space.dtype == np.uint8
    assert env.action_space.shape == (1,) and env.action_space.dtype == np.float32
    assert np.all(env.action_space.low == -1) and np.all(env.action_space.high == 1)
    first, _ = env.reset(seed=0)
    assert first["obs"].shape == (9, 32, 32) and first["obs"].dtype == np.uint8
    # the reset frame fills the stack; each step pushes one new RGB frame in at the end
    np.testing.assert_array_equal(first["obs"][0:3], first["obs"][6:9])
    second, *_ = env.step(np.ones(1, np.float32))
    third, *_ = env.step(np.ones(1, np.float32))
    np.testing.assert_array_equal(second["obs"][0:6], first["obs"][3:9])
    np.testing.assert_array_equal(third["obs"][0:6], second["obs"][3:9])
    assert not np.array_equal(third["obs"][6:9], second["obs"][6:9])  # the cart moved
    assert frame_stack_of(env) == {"obs": 3}
    env.close()


def test_state_observation_is_the_flat_float32_state_in_spec_order():
    env = make_dmc_env("cartpole", "swingup", seed=0)
    raw = env.unwrapped
    assert env.observation_space["obs"].shape == (5,)  # position (3) + velocity (2)
    obs, _ = env.reset(seed=3)
    assert obs["obs"].dtype == np.float32
    parts = raw._env.task.get_observation(raw._env.physics)
    expected = np.concatenate([np.ravel(parts[k]) for k in ("position", "velocity")])
    np.testing.assert_allclose(obs["obs"], expected.astype(np.float32))
    assert frame_stack_of(env) == {}


def test_reward_sums_over_the_repeated_actions():
    one = make_dmc_env("cartpole", "balance", action_repeat=1)
    four = make_dmc_env("cartpole", "balance", action_repeat=4)
    one.reset(seed=5)
    four.reset(seed=5)
    action = np.array([0.3], np.float32)
    single = [one.step(action)[1] for _ in range(4)]
    _, summed, *_ = four.step(action)
    assert summed == pytest.approx(sum(single), rel=1e-6)
    assert 0 < summed <= 4  # dm_control's per-step reward is in [0, 1]


def test_time_limit_truncates_after_1000_over_action_repeat_steps():
    env = make_dmc_env("cartpole", "swingup", action_repeat=8)
    env.reset(seed=0)
    steps, terminated, truncated = 0, False, False
    while not (terminated or truncated):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
    assert steps == 125 and truncated and not terminated


def test_termination_when_the_task_ends_with_discount_zero():
    class Step:  # a dm_env TimeStep at a real termination
        reward, discount = 1.0, 0.0

        def last(self):
            return True

    env = DMCEnv("cartpole", "swingup", action_repeat=3)
    env.reset(seed=0)
    calls = []
    env._env.step = lambda action: calls.append(action) or Step()
    env._observe = lambda time_step: np.zeros(5, np.float32)
    _, reward, terminated, truncated, _ = env.step(np.zeros(1, np.float32))
    assert (reward, terminated, truncated, len(calls)) == (1.0, True, False, 1)


def test_reset_seed_is_reproducible():
    a = make_dmc_env("cartpole", "swingup", from_pixels=True, image_size=32)
    b = make_dmc_env("cartpole", "swingup", from_pixels=True, image_size=32)
    first_a, _ = a.reset(seed=7)
    first_b, _ = b.reset(seed=7)
    np.testing.assert_array_equal(first_a["obs"], first_b["obs"])
    s1 = make_dmc_env("walker", "walk")
    s2 = make_dmc_env("walker", "walk")
    x = s1.reset(seed=1)[0]["obs"]
    np.testing.assert_array_equal(x, s2.reset(seed=1)[0]["obs"])
    assert not np.array_equal(x, s2.reset(seed=2)[0]["obs"])
    np.testing.assert_array_equal(x, s2.reset(seed=1)[0]["obs"])


def test_fast_render_turns_off_shadows_and_multisampling():
    slow = make_dmc_env("cartpole", "swingup", from_pixels=True, image_size=32, frame_stack=1)
    fast = make_dmc_env(
        "cartpole", "swingup", from_pixels=True, image_size=32, frame_stack=1, fast_render=True
    )
    quality = fast.unwrapped._env.physics.model.vis.quality
    assert quality.shadowsize == 0 and quality.offsamples == 0
    assert slow.unwrapped._env.physics.model.vis.quality.shadowsize > 0
    a, _ = slow.reset(seed=0)
    b, _ = fast.reset(seed=0)
    assert a["obs"].shape == b["obs"].shape == (3, 32, 32)
    assert not np.array_equal(a["obs"], b["obs"])  # no shadows, no anti-aliasing


def test_quadruped_uses_camera_2_and_render_gives_camera_0():
    env = make_dmc_env(
        "quadruped",
        "walk",
        from_pixels=True,
        image_size=32,
        frame_stack=1,
        render_mode="rgb_array",
        render_size=48,
    )
    assert env.unwrapped.camera_id == 2
    assert (
        make_dmc_env("cartpole", "swingup", from_pixels=True, image_size=32).unwrapped.camera_id
        == 0
    )
    obs, _ = env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (48, 48, 3) and frame.dtype == np.uint8
    physics = env.unwrapped._env.physics
    # videos come from the observation camera (quadruped's following camera), not camera 0
    np.testing.assert_array_equal(frame, physics.render(48, 48, camera_id=2))
    assert not np.array_equal(frame, physics.render(48, 48, camera_id=0))
    np.testing.assert_array_equal(
        obs["obs"].transpose(1, 2, 0), physics.render(32, 32, camera_id=2)
    )
    assert env.metadata["render_fps"] == 50  # 0.02 s control steps, action repeat 1


def test_unknown_domain_or_task_names_close_ones():
    with pytest.raises(ValueError, match=r"cartpole.*swingup") as err:
        make_dmc_env("cartpole", "swingupp")
    assert "balance" in str(err.value) and "Fix" in str(err.value)
    with pytest.raises(ValueError, match="did you mean the domain cheetah"):
        make_dmc_env("cheeta", "run")
    with pytest.raises(cli.UnknownEnvError, match="walker"):
        cli.make_dmc("walkr", "walk")
    with pytest.raises(ValueError, match="dmc:<domain>-<task>"):
        parse_dmc_id("dmc:cartpole")
    assert parse_dmc_id("dmc:ball_in_cup-catch") == ("ball_in_cup", "catch")


def test_dmc_ids_in_the_gym_cli():
    env = cli.make_env("dmc:cartpole-swingup", max_episode_steps=10)
    env.reset(seed=0)
    steps = 0
    while True:
        *_, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        if terminated or truncated:
            break
    assert steps == 10


def test_buffer_stores_each_frame_of_the_stacks_once():
    env = make_dmc_env("cartpole", "swingup", from_pixels=True, image_size=32, action_repeat=8)
    buffer = ReplayBuffer(200, seed=0, verbose=False, frame_stack=frame_stack_of(env))
    plain = ReplayBuffer(200, seed=0, verbose=False)
    obs, _ = env.reset(seed=0)
    pushed = []
    for _ in range(60):
        action = env.action_space.sample()
        next_obs, reward, terminated, truncated, _ = env.step(action)
        for buf in (buffer, plain):
            buf.push(
                {k: v[None] for k, v in obs.items()},
                action[None],
                np.array([reward]),
                {k: v[None] for k, v in next_obs.items()},
                np.array([terminated]),
                np.array([0.99]),
            )
        pushed.append((obs["obs"], next_obs["obs"]))
        obs = next_obs
    frame = 3 * 32 * 32
    assert plain.bytes_per_transition >= 2 * 9 * 32 * 32  # two whole stacks per transition
    # about one new frame per transition (plus the frame store's window and slack, and indices)
    assert buffer.bytes_per_transition < 0.5 * plain.bytes_per_transition
    assert buffer.frames_per_transition["obs"] * frame < 4 * 2 * 9 * 32 * 32
    batch = buffer.sample(16)
    for i, slot in enumerate(batch.idxs.tolist()):
        np.testing.assert_array_equal(batch.obs["obs"][i].numpy(), pushed[slot][0])
        np.testing.assert_array_equal(batch.next_obs["obs"][i].numpy(), pushed[slot][1])


# ------------------------------------------------------------------------------ the script


def test_script_trains_a_few_steps_from_states(tmp_path):
    argv = [
        "--domain",
        "cartpole",
        "--task",
        "swingup",
        "--config",
        "sac_state.gin",
        "--from_states",
        "--steps",
        "40",
        "--seed",
        "0",
        "--logging",
        "none",
        "--max_episode_steps",
        "30",
        "--run_dir",
        str(tmp_path / "run"),
    ]
    summary = _script().main(argv + _bindings())
    assert summary["env_steps"] == 40 and summary["critic_updates"] == 20
    assert np.isfinite(summary["final_eval_return"])
    assert summary["eval_history"][-1]["length_mean"] <= 30


def test_script_records_a_pixel_dataset_and_clones_it(tmp_path):
    module = _recorder()
    npz = tmp_path / "px.npz"
    env_flags = [
        "--domain",
        "cartpole",
        "--task",
        "swingup",
        "--image_size",
        "32",
        "--action_repeat",
        "8",
    ]
    summary = module.main(env_flags + ["--transitions", "150", "--npz", str(npz)])
    assert summary["transitions"] == 150 and summary["episodes"] == 2
    assert len(summary["complete_episode_returns"]) == 1  # the second one was cut at 150
    with np.load(npz) as data:
        assert data["obs/obs"].shape == (150, 9, 32, 32) and data["obs/obs"].dtype == np.uint8
    argv = env_flags + [
        "--config",
        "bc_from_pixels.gin",
        "--dataset",
        str(npz),
        "--bc_steps",
        "5",
        "--seed",
        "0",
        "--logging",
        "none",
        "--run_dir",
        str(tmp_path / "run"),
    ]
    result = _script().main(argv + _bindings())
    assert result["env_steps"] == 0 and np.isfinite(result["final_eval_return"])


def test_replay_of_a_pixel_run_is_written_as_its_frame_stacked_episodes(tmp_path):
    """--replay reads a pixel run's frame-deduplicated buffer back as whole stacks, in order."""
    from super_sac import datasets as ds

    module = _recorder()
    env_flags = ["--domain", "cartpole", "--task", "swingup", "--image_size", "32",
                 "--action_repeat", "8"]  # fmt: skip
    run = tmp_path / "run"
    argv = env_flags + ["--config", "drqv2.gin", "--steps", "150", "--seed", "0",
                        "--logging", "none", "--run_dir", str(run)]  # fmt: skip
    extra = ["super_sac.n_step = 1", "super_sac.checkpoint_interval = 300",
             "super_sac.eval_interval = 300"]  # fmt: skip
    _script().main(argv + _bindings(extra))
    ckpt = run / "checkpoints" / "ckpt_300"  # drqv2.gin collects 2 transitions per step
    npz = tmp_path / "replay.npz"
    summary = module.main(env_flags + ["--replay", str(ckpt), "--npz", str(npz)])
    # 125 agent steps per episode (1,000 control steps, action repeat 8): two whole, one cut
    assert summary["transitions"] == 300 and summary["episodes"] == 3
    data, _ = ds.load_npz(npz)
    obs, nxt = data.obs["obs"], data.next_obs["obs"]
    assert obs.shape == (300, 9, 32, 32) and obs.dtype == np.uint8
    np.testing.assert_array_equal(np.flatnonzero(data.truncated), [124, 249, 299])
    inner = ~data.truncated[:-1]
    np.testing.assert_array_equal(nxt[:-1][inner], obs[1:][inner])
    # each step pushes one new frame in at the end; a reset fills the stack with its frame
    np.testing.assert_array_equal(obs[1:][inner][:, :6], obs[:-1][inner][:, 3:])
    for start in (0, 125, 250):
        np.testing.assert_array_equal(obs[start][:3], obs[start][6:])
    with np.load(ckpt / "buffer.npz") as buf:
        np.testing.assert_allclose(buf["action"][:300].reshape(300, -1), data.action)
        np.testing.assert_allclose(buf["reward"][:300].reshape(-1), data.reward)
    # the default camera (None) and its number are the same env
    module.main(
        env_flags + ["--camera_id", "0", "--replay", str(ckpt), "--npz", str(npz), "--overwrite"]
    )
    # ... and so for --resume, which refuses another camera
    from super_sac.cli.runner import DMC_SAVED_ARGS

    for camera, refused_ in (("0", False), ("1", True)):
        argv = ["--resume", str(run), "--camera_id", camera]
        args = cli.dmc_parser().parse_args(argv)
        given = cli.given_options(cli.dmc_parser(), argv, args)
        if refused_:
            with pytest.raises(validation.ConfigError, match="--camera_id 1 here, None in the run"):
                cli.resumed_args(args, "domain", DMC_SAVED_ARGS, given)
        else:
            assert cli.resumed_args(args, "domain", DMC_SAVED_ARGS, given)[0].camera_id is None
    refused = tmp_path / "refused.npz"  # the refusals below write nothing
    # a recorder whose env is not the run's is refused, not written with the run's frames: by
    # the run's record of its options (an action repeat changes no shape) ...
    for other, said, fix in [
        (["--action_repeat", "4"], "--action_repeat 8 in the run, --action_repeat 4 here",
         "--action_repeat 8"),
        (["--task", "balance", "--fast_render"],
         "--task swingup in the run, --task balance here; no --fast_render in the run, "
         "--fast_render here", "--task swingup, leave out --fast_render"),
    ]:  # fmt: skip
        with pytest.raises(SystemExit, match=f"run trained on .*: {said}. Fix: .*options: {fix}$"):
            module.main(env_flags + other + ["--replay", str(ckpt), "--npz", str(refused)])
    # ... and, for a checkpoint moved out of its run, by the buffer's layout
    moved = tmp_path / "moved"
    shutil.copytree(ckpt, moved)
    for other, diff in [
        (["--image_size", "40"], r"shape \(9, 32, 32\) != \(9, 40, 40\)"),
        (["--domain", "walker", "--task", "walk"], r"action: shape \(1,\) != \(6,\)"),
    ]:
        with (
            pytest.warns(UserWarning, match="no run record"),
            pytest.raises(ds.DatasetError, match=f"do not fit this env.*{diff}.*Fix"),
        ):
            module.main(env_flags + other + ["--replay", str(moved), "--npz", str(refused)])
    assert not refused.exists()


def test_pixel_options_with_from_states_are_refused(capsys):
    module = _recorder()
    for main, out in ((module.main, ["--npz", "x.npz"]), (_script().main, [])):
        with pytest.raises(SystemExit):
            main(["--from_states", "--image_size", "64", "--frame_stack", "2", *out])
        assert "--frame_stack, --image_size shape pixel observations" in capsys.readouterr().err


def test_dmc_recorder_cuts_episodes_at_max_episode_steps(tmp_path):
    module = _recorder()
    argv = ["--domain", "cartpole", "--task", "swingup", "--from_states", "--transitions", "120",
            "--max_episode_steps", "50", "--npz", str(tmp_path / "states.npz")]  # fmt: skip
    summary = module.main(argv)
    assert summary["episodes"] == 3 and len(summary["complete_episode_returns"]) == 2
    with np.load(tmp_path / "states.npz") as data:
        np.testing.assert_array_equal(np.flatnonzero(data["truncated"]), [49, 99, 119])
    # a limit beyond the suite's own (1,000 control steps: 125 agent steps at action repeat 8)
    # is said, in the recorder and in the training script
    beyond = ["--from_states", "--action_repeat", "8", "--max_episode_steps", "200"]
    with pytest.warns(UserWarning, match="above the task's own time limit of 125 agent steps"):
        module.main([*beyond, "--transitions", "10", "--npz", str(tmp_path / "beyond.npz")])
    run = ["--config", "sac_state.gin", "--steps", "5", "--logging", "none", "--run_dir",
           str(tmp_path / "run")]  # fmt: skip
    with pytest.warns(UserWarning, match="above the task's own time limit of 125 agent steps"):
        _script().main([*beyond, *run, *_bindings(["super_sac.random_warmup_steps = 5"])])


def test_pixel_agent_reads_the_frames_with_the_drq_encoder():
    env = make_dmc_env("cartpole", "swingup", from_pixels=True, image_size=32)
    agent = cli.dmc_agent(env, super_sac.get_device("cpu"))
    assert type(agent.encoder).__name__ == "DrQPixelEncoder"
    assert agent.encoder.image_size == (32, 32)
    states = cli.dmc_agent(make_dmc_env("cartpole", "swingup"), super_sac.get_device("cpu"))
    assert type(states.encoder).__name__ == "FlatEncoder"


@pytest.mark.skipif(AUGMENTER_REFUSED, reason=AUG_REASON)
@pytest.mark.parametrize("config", ["drqv2.gin", "drqv1.gin", "rad.gin", "drqv2_markov.gin"])
def test_pixel_configs_train_a_few_steps(config, tmp_path):
    if config != "drqv2.gin" and not HAS_K_M:
        pytest.skip("aug_target_samples / aug_critic_samples are not loop settings yet")
    size = "40" if config == "rad.gin" else "32"
    extra = ["DrQPixelEncoder.image_size = (24, 24)"] if config == "rad.gin" else []
    summary = train_cartpole_from_pixels(config, tmp_path, size, ["--action_repeat", "8"], extra)
    assert np.isfinite(summary["final_eval_return"])


@pytest.mark.skipif(AUGMENTER_REFUSED, reason=AUG_REASON)
def test_default_augmenter_is_drqv2_shift_when_gin_binds_none():
    pytest.importorskip("super_sac.augmentations")
    aug = cli.default_pixel_augmenter()
    assert type(aug).__name__ == "AugmentationSequence"
    assert [type(a).__name__ for a in aug.aug_list] == ["Drqv2Aug"]
    assert aug.shared_draw is False  # DrQ-v2 shifts obs and next_obs independently


@pytest.mark.skipif(AUGMENTER_REFUSED, reason=AUG_REASON)
@pytest.mark.parametrize("name", ["drqv1.gin", "drqv2.gin"])
def test_original_dmc_gin_files_run_unchanged(name, tmp_path):
    pytest.importorskip("super_sac.augmentations")
    bindings = ["super_sac.max_episode_steps = 20"]
    summary = train_cartpole_from_pixels(ORIGINAL / name, tmp_path, bindings=bindings)
    assert np.isfinite(summary["final_eval_return"])


def test_drqv2_gin_evaluates_every_10k_frames_of_a_1m_frame_run():
    """DrQ-v2 evaluates every 10,000 frames (eval_every_frames) and reports the easy tasks at
    1M frames; a loop step is transitions_per_online_step transitions of action_repeat frames."""
    import gin

    from super_sac.config import parse_gin

    action_repeat = cli.dmc_parser().parse_args([]).action_repeat
    assert action_repeat == 2
    parse_gin([DMC / "drqv2.gin"])
    frames_per_step = gin.query_parameter("super_sac.transitions_per_online_step") * action_repeat
    assert frames_per_step == 4
    assert gin.query_parameter("super_sac.eval_interval") * frames_per_step == 10_000
    assert gin.query_parameter("super_sac.num_steps_online") * frames_per_step == 1_000_000
    assert gin.query_parameter("DrQPixelEncoder.conv_init") == "orthogonal"
