"""Record a MinAtar dataset with a uniform random policy or a saved SAC-Discrete agent (its
policy sampled), as the ``.npz`` that ``train_minatar.py --dataset`` reads (and, with
``--dataset_id``, in Minari's format).

    # 50k transitions of breakout from a trained agent (a run directory of train_minatar.py)
    python experiments/minatar/record_replay.py --game breakout \
        --policy saves/basic_online_breakout_0 --config basic_online.gin \
        --transitions 50000 --npz offline_data/npz/breakout-medium.npz
    # the random policy
    python experiments/minatar/record_replay.py --game breakout --transitions 50000 \
        --npz offline_data/npz/breakout-random.npz
    # the whole replay of a training run (super_sac.n_step = 1, any --parallel_envs) up to a
    # checkpoint: a mixed-quality dataset like D4RL's medium-replay
    python experiments/minatar/record_replay.py --game breakout \
        --replay saves/basic_online_breakout_0/checkpoints/ckpt_50000 \
        --npz offline_data/npz/breakout-replay.npz

``--config`` is the gin file the agent was trained with (its network sizes); a bare name
resolves next to this script.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from super_sac import cli

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return cli.record_minatar_dataset(argv, search_dirs=[HERE], description=__doc__)


if __name__ == "__main__":
    cli.cli(main)
