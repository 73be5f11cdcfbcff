"""Train on a DeepMind Control Suite task (dm_control) from pixels, or from states.

    python experiments/dmc/train_dmc_from_pixels.py --domain cartpole --task swingup \
        --config drqv2.gin
    python experiments/dmc/train_dmc_from_pixels.py --domain cartpole --task swingup \
        --config drqv1.gin --action_repeat 8
    python experiments/dmc/train_dmc_from_pixels.py --domain walker --task walk \
        --config rad.gin --image_size 100
    python experiments/dmc/train_dmc_from_pixels.py --domain cheetah --task run \
        --config sac_state.gin --from_states
    python experiments/dmc/train_dmc_from_pixels.py --domain cartpole --task swingup \
        --config bc_from_pixels.gin --dataset cartpole_pixels.npz

Observations: ``{"obs": (3 * frame_stack, image_size, image_size) uint8}`` stacks of RGB
renders (camera 0; 2 for quadruped), read by ``super_sac.nets.cnns.DrQPixelEncoder``; the
replay buffer stores each frame once. Each action is repeated ``--action_repeat`` times (the
rewards summed); episodes end at the suite's 1,000-step time limit (truncated). Without a
``super_sac.augmenter`` binding in the gin files, pixel runs augment with DrQ-v2's random shift
(``AugmentationSequence([Drqv2Aug()], shared_draw=False)``: obs and next_obs drawn
independently). Rendering is headless (``MUJOCO_GL=egl`` unless set);
``--fast_render`` turns shadows and multisampling off. ``--dataset`` (an ``.npz`` from
``record_replay.py`` or a Minari id) fills the buffer first, for the offline configs. A bare
``--config`` name resolves next to this script.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # before dm_control is imported

from super_sac import cli  # noqa: E402

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return cli.train_dmc(argv, search_dirs=[HERE], description=__doc__)


if __name__ == "__main__":
    cli.cli(main)
