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

from pathlib import Path
from typing import Any

from super_sac import cli

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return cli.train_minatar(argv, search_dirs=[HERE], description=__doc__)


if __name__ == "__main__":
    cli.cli(main)
