"""Train SAC-Discrete on a MinAtar game (Young & Tian 2019) from its 10x10 grid observations.

    python experiments/minatar/train_minatar.py --game breakout --config basic_online.gin
    python experiments/minatar/train_minatar.py --game space_invaders --seed 1 --steps 500000
    # offline: CRR-style filtered BC or plain BC on a recorded dataset (.npz or a Minari id)
    python experiments/minatar/train_minatar.py --game breakout --config basic_offline.gin \
        --dataset offline_data/npz/breakout-random.npz
    python experiments/minatar/train_minatar.py --game breakout \
        --config behavioral_cloning.gin --dataset offline_data/npz/breakout-expert.npz

Games: asterix, breakout, freeway, seaquest, space_invaders. Observations are
``{"obs": (C, 10, 10) uint8}`` grids read by ``super_sac.nets.cnns.MinAtarEncoder`` (its width is a
gin setting: ``MinAtarEncoder.emb_dim``). The other options are those of
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
from super_sac.nets.cnns import MinAtarEncoder
from super_sac.wrappers import make_minatar_env

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "gym"))
import train_gym  # noqa: E402

GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--game", default="breakout", choices=GAMES, help="MinAtar game")
    train_gym.add_common_args(p, default_config="basic_online.gin")
    train_gym.add_dataset_args(p, required=False)
    p.set_defaults(max_episode_steps=10_000)
    return p.parse_args(argv)


def make_envs(args: argparse.Namespace) -> tuple[Any, gym.Env]:
    """Training env (a vector env when ``--parallel_envs > 1``) and a single test env."""
    return train_gym.train_and_test_envs(
        lambda: make_minatar_env(args.game, max_episode_steps=args.max_episode_steps),
        args.parallel_envs,
    )


def build_agent(test_env: gym.Env, device: torch.device) -> super_sac.Agent:
    """A discrete Agent with a MinAtar CNN encoder sized for the game's channels."""
    channels = test_env.observation_space["obs"].shape[0]
    return super_sac.Agent(
        act_space_size=int(test_env.action_space.n),
        encoder=MinAtarEncoder(channels),
        discrete=True,
    ).to(device)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    return train_gym.run(
        args,
        make_envs,
        build_agent,
        script="experiments/minatar/train_minatar.py",
        task_key="game",
        search_dirs=[HERE],
        prepare_buffer=train_gym.dataset_loader(args),
        extra_saved_args=("dataset", "datasets_path"),
    )


if __name__ == "__main__":
    train_gym.cli(main)
