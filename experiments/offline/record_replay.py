"""Record a dataset by running a saved agent (optionally with Gaussian action noise) or a
uniform random policy, in Minari's format (local, never downloaded) or as a plain ``.npz``.

    # random policy, 100k transitions, Minari dataset in offline_data/minari
    python experiments/offline/record_replay.py --env HalfCheetah-v5 --policy random \
        --transitions 100000 --dataset_id super_sac/halfcheetah-random-v0 \
        --datasets_path offline_data/minari
    # a saved agent (a run directory, its agent.pt, or a checkpoint folder), plus a .npz copy
    python experiments/offline/record_replay.py --env HalfCheetah-v5 \
        --policy saves/sac_HalfCheetah-v5_0 --config sac.gin --noise_std 0.1 \
        --dataset_id super_sac/halfcheetah-expert-v0 --npz offline_data/npz/expert.npz
    # the whole replay of a training run (n_step 1, any --parallel_envs) up to a checkpoint
    python experiments/offline/record_replay.py --env HalfCheetah-v5 \
        --replay saves/sac_HalfCheetah-v5_0/checkpoints/ckpt_100000 \
        --npz offline_data/npz/replay.npz

The agent is rebuilt from ``--config`` (the gin file it was trained with) before its weights
are loaded. Actions are stored in the env's own units with its action space, observations as
the env returns them; terminations and truncations stay distinct.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from super_sac import cli

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return cli.record_dataset(argv, search_dirs=[HERE, HERE.parent / "gym"], description=__doc__)


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    cli.cli(main)
