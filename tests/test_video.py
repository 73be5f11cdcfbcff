"""Evaluation videos: which evaluations record, the files they write (decoded back), the
tensorboard summary, the quick-start recorder and the errors for a missing encoder or an env that
does not render."""

import io
from functools import partial
from pathlib import Path

import gymnasium as gym
import imageio.v2 as imageio
import numpy as np
import pytest
from PIL import Image

from super_sac import SAC, cli, video
from super_sac.validation import ConfigError

ROOT = Path(__file__).resolve().parents[1]
train_gym = partial(cli.train_gym, search_dirs=[ROOT / "experiments" / "gym"])

EPISODE = 30  # evaluation episodes are cut here, so a video has EPISODE + 1 frames


def _train(*bindings, logging="none", steps=200):
    settings = [
        "Agent.hidden_size = 16",
        "ReplayBuffer.size = 1000",
        "super_sac.batch_size = 16",
        "super_sac.random_warmup_steps = 50",
        "super_sac.eval_interval = 50",
        "super_sac.eval_episodes = 1",
        "super_sac.verbosity = 0",
        f"super_sac.max_episode_steps = {EPISODE}",
        *bindings,
    ]
    args = ["--env", "Pendulum-v1", "--config", "sac.gin", "--steps", str(steps), "--seed", "0"]
    args += ["--logging", logging]
    return train_gym(args + [x for b in settings for x in ("--gin_bindings", b)])


def test_every_second_evaluation_writes_a_playable_video_of_the_first_episode():
    summary = _train("super_sac.video_interval = 2")
    folder = Path(summary["run_dir"]) / "videos"
    # evaluations at env steps 50, 100, 150, 200: the 2nd and 4th are recorded
    assert sorted(p.name for p in folder.iterdir()) == ["eval_100.mp4", "eval_200.mp4"]
    frames = imageio.mimread(folder / "eval_200.mp4")
    assert len(frames) == EPISODE + 1  # the reset frame and one per step
    assert frames[0].shape == (500, 500, 3)  # Pendulum's rgb_array render
    assert len({f.tobytes() for f in frames}) > 1  # the pendulum moves


def test_no_videos_and_no_rendering_when_off():
    summary = _train()
    assert not (Path(summary["run_dir"]) / "videos").exists()


def test_tensorboard_holds_the_video():
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    summary = _train("super_sac.video_interval = 4", logging="tensorboard")
    events = EventAccumulator(summary["run_dir"], size_guidance={"images": 0})
    events.Reload()
    assert "eval/video" in events.Tags()["images"]
    (image,) = events.Images("eval/video")  # only the 4th evaluation
    assert image.step == 200 and (image.width, image.height) == (500, 500)
    gif = Image.open(io.BytesIO(image.encoded_image_string))
    assert gif.format == "GIF" and gif.n_frames == EPISODE + 1


def test_gif_when_ffmpeg_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(video, "video_format", lambda: "gif")
    frames = [np.full((7, 9, 3), i * 20, np.uint8) for i in range(5)]
    path = video.write_video(frames, tmp_path / "clip.mp4", fps=10)
    assert path.suffix == ".gif"
    gif = Image.open(path)
    assert gif.n_frames == 5 and gif.size == (9, 7)


def test_odd_frame_sizes_are_padded_for_mp4(tmp_path):
    frames = [np.random.default_rng(i).integers(0, 255, (7, 9, 3), np.uint8) for i in range(4)]
    decoded = imageio.mimread(video.write_video(frames, tmp_path / "odd", fps=10))
    assert len(decoded) == 4 and decoded[0].shape == (8, 10, 3)


def test_a_missing_encoder_is_a_one_line_error_naming_the_extra(monkeypatch):
    monkeypatch.setattr(video, "video_format", lambda: None)
    with pytest.raises(
        ConfigError, match=r'video_interval = 1: .*pip install "super_sac\[video\]"'
    ):
        _train("super_sac.video_interval = 1")
    with pytest.raises(video.VideoDependencyError, match=r"super_sac\[video\]"):
        video.write_video([np.zeros((2, 2, 3), np.uint8)], "never")


def test_a_test_env_that_does_not_render_is_refused():
    from super_sac import Agent, ReplayBuffer, nets
    from super_sac.config import TrainConfig
    from super_sac.validation import validate_config
    from super_sac.wrappers import make_gym_env

    env = make_gym_env("Pendulum-v1")  # no render_mode
    cfg = TrainConfig(video_interval=1, random_warmup_steps=10, logging_method="none")
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    with pytest.raises(ConfigError, match=r"render_mode=None.*render_mode=\"rgb_array\""):
        validate_config(cfg, agent, ReplayBuffer(100, verbose=False), env, env)


def test_quick_start_records_a_controller_run(tmp_path):
    sac = SAC(gym.make("Pendulum-v1", render_mode="rgb_array"), seed=0, hidden_size=16)
    path = sac.record(tmp_path / "controller", episodes=2, max_steps=10)
    assert path.suffix == ".mp4"
    assert len(imageio.mimread(path)) == 2 * 11
    with pytest.raises(ValueError, match="render_mode"):
        SAC(gym.make("Pendulum-v1"), seed=0, hidden_size=16).record(tmp_path / "none")
    # an env that draws nothing at all (gymnasium's Env.render raises NotImplementedError)
    with pytest.raises(ValueError, match="renders no RGB frames"):
        SAC(gym.make("LinearLongitudinalF16-v0"), seed=0, hidden_size=16).record(tmp_path / "x")


def test_wandb_receives_the_written_file(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    from super_sac.loggers import WandbLogger

    logged = []

    class _Run:
        def log(self, data, step):
            logged.append((data, step))

    logger = WandbLogger.__new__(WandbLogger)
    logger.run, logger._first_step = _Run(), 0
    path = video.write_video([np.zeros((4, 4, 3), np.uint8)] * 3, tmp_path / "v", fps=5)
    logger.log_video("eval/video", [], 7, 5.0, path)
    ((data, step),) = logged
    assert step == 7 and isinstance(data["eval/video"], wandb.Video)


def test_videos_of_a_run_that_writes_nothing_warn_and_render_nothing(monkeypatch):
    from super_sac import evaluation
    from super_sac.validation import ConfigWarning

    def never(env):
        raise AssertionError("a frame was rendered for a video that goes nowhere")

    monkeypatch.setattr(evaluation, "render_frame", never)
    with pytest.warns(ConfigWarning, match="video_interval = 1: has no effect: the run writes"):
        summary = _train(
            "super_sac.video_interval = 1",
            "super_sac.save_to_disk = False",
            "super_sac.log_to_disk = False",
            steps=60,
        )
    assert summary["run_dir"] is None
