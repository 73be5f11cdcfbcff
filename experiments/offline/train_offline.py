"""Learn from an offline dataset: behavioral cloning, offline AFBC, then optional online
fine-tuning, with the command line of experiments/gym/train_gym.py plus ``--dataset``.

    python experiments/offline/train_offline.py --env Pendulum-v1 --config bc.gin \
        --dataset super_sac/pendulum-expert-v0 --datasets_path offline_data/minari
    python experiments/offline/train_offline.py --env HalfCheetah-v5 --config awac.gin \
        --dataset offline_data/npz/halfcheetah-medium.npz --offline_steps 20000 --steps 10000

``--dataset`` is a Minari dataset id (looked up under ``--datasets_path``, default
``$MINARI_DATASETS_PATH``; nothing is downloaded) or a ``.npz`` file written by
record_replay.py. The dataset is validated against the env and stored in protected replay slots,
so online fine-tuning never overwrites it. A bare ``--config`` name resolves next to this script,
then in experiments/gym/.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from super_sac import cli

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return cli.train_offline(argv, search_dirs=[HERE, HERE.parent / "gym"], description=__doc__)


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    cli.cli(main)
