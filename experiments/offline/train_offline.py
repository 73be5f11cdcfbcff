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

import argparse
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "gym"))

import train_gym  # noqa: E402

from super_sac.datasets import DatasetError  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = train_gym.build_parser(__doc__)
    p.set_defaults(config="awac.gin")
    train_gym.add_dataset_args(p, required=False)
    return p


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.dataset is None and not args.resume:
        parser.error("--dataset is required (a resumed run takes it from its run directory)")
    if args.name is None and not args.resume:
        args.name = f"{Path(args.config).stem}_{Path(args.dataset).stem.replace('/', '_')}"
    return train_gym.run(
        args,
        lambda a: train_gym.make_envs(a.env, a.parallel_envs, a.max_episode_steps),
        train_gym.build_agent,
        script="experiments/offline/train_offline.py",
        task_key="env",
        search_dirs=[HERE, HERE.parent / "gym"],
        prepare_buffer=train_gym.dataset_loader(args),
        extra_saved_args=("dataset", "datasets_path"),
    )


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    train_gym.cli(main, extra_errors=(DatasetError,))
