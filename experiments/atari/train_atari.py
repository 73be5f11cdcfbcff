"""Train SAC-Discrete on an Atari game (ale-py's bundled ROMs) from stacked 84x84 frames.

    python experiments/atari/train_atari.py --game Breakout --config basic_online.gin
    python experiments/atari/train_atari.py --game Pong --seed 1 --device cuda

Envs: ``ALE/<game>-v5`` with gymnasium's ``AtariPreprocessing`` (no-op starts, 4-frame skip,
84x84 grayscale) and ``FrameStackObservation`` (4 frames), as ``{"obs": (4, 84, 84) uint8}``
observations read by ``super_sac.nets.cnns.NatureEncoder``. Where gin binds no
``super_sac.augmenter``, batches are augmented with DrQ-v2's random shift (as the original
super_sac's Atari script did); ``basic_online.gin`` binds none, as its paper trains on plain
frames. The other options are those of ``experiments/gym/train_gym.py``; a bare ``--config`` name
resolves next to this script.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from super_sac import cli

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return cli.train_atari(argv, search_dirs=[HERE], description=__doc__)


if __name__ == "__main__":
    cli.cli(main)
