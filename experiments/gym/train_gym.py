"""Train on any gymnasium env with Box observations and a bounded Box action space, or (with
SAC-Discrete) a Discrete action space.

    python experiments/gym/train_gym.py --env Pendulum-v1 --config sac.gin
    python experiments/gym/train_gym.py --env CartPole-v1 --config sac_discrete.gin
    python experiments/gym/train_gym.py --env HalfCheetah-v5 --config td3.gin --seed 1
    python experiments/gym/train_gym.py --env Pendulum-v1 --config ddpg.gin \
        --gin_bindings "super_sac.batch_size = 512" --steps 20000

A bare ``--config`` name resolves next to this script.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from super_sac import cli

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return cli.train_gym(argv, search_dirs=[HERE], description=__doc__)


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    cli.cli(main)
