"""Train SAC-Discrete on an Atari game (ale-py's bundled ROMs) from stacked 84x84 frames.

    python experiments/atari/train_atari.py --game Breakout --config basic_online.gin
    python experiments/atari/train_atari.py --game Pong --seed 1 --device cuda

Envs: ``ALE/<game>-v5`` with gymnasium's ``AtariPreprocessing`` (no-op starts, 4-frame skip,
84x84 grayscale) and ``FrameStackObservation`` (4 frames), as ``{"obs": (4, 84, 84) uint8}``
observations read by ``super_sac.nets.cnns.NatureEncoder``. The other options are those of
``experiments/gym/train_gym.py``; a bare ``--config`` name resolves next to this script.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

import super_sac
from super_sac.nets.cnns import NatureEncoder
from super_sac.wrappers import make_atari_env

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "gym"))
import train_gym  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--game", default="Breakout", help="ALE game name (Breakout, Pong, ...)")
    train_gym.add_common_args(p, default_config="basic_online.gin")
    return p.parse_args(argv)


def make_envs(args: argparse.Namespace) -> tuple[Any, gym.Env]:
    """Training env (a vector env when ``--parallel_envs > 1``) and a single test env."""
    return train_gym.train_and_test_envs(
        lambda: make_atari_env(args.game, max_episode_steps=args.max_episode_steps),
        args.parallel_envs,
    )


def build_agent(test_env: gym.Env, device: torch.device) -> super_sac.Agent:
    """A discrete Agent with the Nature-DQN encoder over the stacked frames."""
    channels, height, width = test_env.observation_space["obs"].shape
    return super_sac.Agent(
        act_space_size=int(test_env.action_space.n),
        encoder=NatureEncoder(channels, image_size=(height, width)),
        discrete=True,
    ).to(device)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return train_gym.run(
        parse_args(argv),
        make_envs,
        build_agent,
        script="experiments/atari/train_atari.py",
        task_key="game",
        search_dirs=[HERE],
    )


if __name__ == "__main__":
    train_gym.cli(main)
