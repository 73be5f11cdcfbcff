"""Evaluation videos: the frames of an evaluation episode, written to the run folder and sent to
the loggers.

Frames come from the env's ``render()`` (an env made with ``render_mode="rgb_array"``). They are
written as MP4 (H.264 through imageio's ffmpeg plugin, ``pip install "super_sac[video]"``) or, when
that plugin is missing, as an animated GIF (Pillow). TensorBoard receives an animated GIF image
summary (it shows GIFs in its Images tab; no moviepy needed) and wandb the written file.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "VIDEO_EXTRA_HINT",
    "VideoDependencyError",
    "env_fps",
    "gif_bytes",
    "render_frame",
    "video_format",
    "write_video",
]

#: how to install the encoders
VIDEO_EXTRA_HINT = 'pip install "super_sac[video]" (imageio and imageio-ffmpeg)'


class VideoDependencyError(ImportError):
    """No video encoder is installed."""


def video_format() -> str | None:
    """``"mp4"`` when imageio and its ffmpeg plugin are installed, else ``"gif"`` when Pillow is,
    else ``None``."""
    if importlib.util.find_spec("imageio") and importlib.util.find_spec("imageio_ffmpeg"):
        return "mp4"
    if importlib.util.find_spec("PIL"):
        return "gif"
    return None


def require_encoder() -> str:
    """The format :func:`write_video` will use.

    :raises VideoDependencyError: one line naming the extra to install, when none is available.
    """
    fmt = video_format()
    if fmt is None:
        raise VideoDependencyError(
            f"recording evaluation videos needs an encoder: {VIDEO_EXTRA_HINT}"
        )
    return fmt


def env_fps(env: Any, default: float = 30.0) -> float:
    """The frame rate of ``env``'s renders (its ``metadata["render_fps"]``), else ``default``."""
    return float(getattr(env, "metadata", {}).get("render_fps") or default)


def render_frame(env: Any) -> np.ndarray:
    """One ``(H, W, 3)`` uint8 frame of ``env.render()``.

    :raises ValueError: when the env renders nothing (made without ``render_mode="rgb_array"``).
    """
    try:
        frame = env.render()
    except NotImplementedError:  # gymnasium's Env.render of an env that draws nothing
        frame = None
    if frame is None or np.ndim(frame) != 3:
        mode = getattr(env, "render_mode", None)
        raise ValueError(
            f"the env renders no RGB frames (render_mode={mode!r}); videos need an env made with "
            'render_mode="rgb_array", e.g. gymnasium.make(env_id, render_mode="rgb_array")'
        )
    return np.ascontiguousarray(frame, dtype=np.uint8)


def _even(frames: Sequence[np.ndarray]) -> np.ndarray:
    """Frames padded by one edge row/column where a side is odd (H.264's 4:2:0 needs even)."""
    video = np.stack(frames)
    pad_h, pad_w = video.shape[1] % 2, video.shape[2] % 2
    if pad_h or pad_w:
        video = np.pad(video, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), mode="edge")
    return video


def gif_bytes(frames: Sequence[np.ndarray], fps: float) -> bytes:
    """An animated GIF of ``frames`` (looping), as bytes."""
    from PIL import Image

    images = [Image.fromarray(np.asarray(f, dtype=np.uint8)) for f in frames]
    out = io.BytesIO()
    duration = max(int(round(1000.0 / fps)), 10)
    images[0].save(
        out, format="GIF", save_all=True, append_images=images[1:], duration=duration, loop=0
    )
    return out.getvalue()


def write_video(frames: Sequence[np.ndarray], path: str | Path, fps: float = 30.0) -> Path:
    """Write ``frames`` (``(H, W, 3)`` uint8 each) to ``path`` with the suffix of the available
    format (``.mp4``, else ``.gif``).

    :return: the written file.
    :raises VideoDependencyError: when no encoder is installed.
    :raises ValueError: for an empty list of frames.
    """
    if len(frames) == 0:
        raise ValueError("no frames to write")
    fmt = require_encoder()
    path = Path(path).with_suffix("." + fmt)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "mp4":
        import imageio.v2 as imageio

        imageio.mimwrite(
            path, _even(frames), fps=fps, codec="libx264", quality=7, macro_block_size=1
        )
    else:
        path.write_bytes(gif_bytes(frames, fps))
    return path
