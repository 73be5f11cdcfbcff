"""Record a DeepMind Control dataset, from pixels or states, with a uniform random policy or a
saved agent, as the ``.npz`` that ``train_dmc_from_pixels.py --dataset`` reads (and, with
``--dataset_id``, in Minari's format).

    # 20k random transitions of cartpole swingup from 84x84 pixels (3-frame stacks)
    python experiments/dmc/record_replay.py --domain cartpole --task swingup \
        --transitions 20000 --npz offline_data/cartpole_random_pixels.npz
    # a trained agent (run directory), with Gaussian action noise
    python experiments/dmc/record_replay.py --domain cartpole --task swingup \
        --policy saves/drqv2_cartpole_swingup_0 --config drqv2.gin --noise_std 0.2 \
        --npz offline_data/cartpole_expert_pixels.npz
    # the whole replay of a training run (super_sac.n_step = 1, any --parallel_envs; drqv2.gin
    # collects 2 transitions per step, so ckpt_N counts env steps): like D4RL's medium-replay
    python experiments/dmc/record_replay.py --domain cartpole --task swingup \
        --replay saves/drqv2_cartpole_swingup_0/checkpoints/ckpt_100000 \
        --npz offline_data/cartpole_replay_pixels.npz

The env options (--action_repeat, --frame_stack, --image_size, --camera_id, --fast_render,
--from_states) must match those of the run that learns from the dataset; with --replay, those
of the training run too (checked against its hparams.json).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # before dm_control is imported

from super_sac import cli  # noqa: E402

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return cli.record_dmc_dataset(argv, search_dirs=[HERE], description=__doc__)


if __name__ == "__main__":
    cli.cli(main)
