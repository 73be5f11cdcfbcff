"""Run a short training job that can be made to SIGKILL itself at a chosen point.

Used by test_checkpoint.py:  python crash_run.py SAVE_DIR NAME STEPS [--kill POINT:N] [--resume DIR]
POINT is one of: update (the N-th critic update), state_write (while writing the N-th
checkpoint's state.pt, leaving a truncated file), buffer_write (after the N-th checkpoint's
buffer.npz, before its manifest), rename (right after the N-th checkpoint is renamed into place).
"""

import argparse
import os
import signal
import sys
from pathlib import Path

import torch

from super_sac import checkpoint, cli, learning, replay

ROOT = Path(__file__).resolve().parents[1]

SMALL = [
    "Agent.hidden_size = 32",
    "ReplayBuffer.size = 5000",
    "super_sac.batch_size = 32",
    "super_sac.random_warmup_steps = 100",
    "super_sac.eval_interval = 100",
    "super_sac.eval_episodes = 1",
    "super_sac.log_interval = 50",
    "super_sac.checkpoint_interval = 100",
    "super_sac.verbosity = 0",
    "super_sac.max_episode_steps = 70",
]


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def arm(point: str, n: int) -> None:
    """Wrap the function at ``point`` so that its ``n``-th call kills the process."""
    calls = {"count": 0}

    def hit() -> bool:
        calls["count"] += 1
        return calls["count"] == n

    if point == "update":
        original = learning.critic_update_with_features  # what the Learner calls

        def critic_update_with_features(*args, **kwargs):
            if hit():
                die()
            return original(*args, **kwargs)

        learning.critic_update_with_features = critic_update_with_features
    elif point == "state_write":
        original_save = torch.save

        def save(obj, f, *args, **kwargs):
            original_save(obj, f, *args, **kwargs)
            if str(f).endswith("state.pt") and hit():
                size = os.path.getsize(f)
                with open(f, "r+b") as fh:
                    fh.truncate(size // 2)
                die()

        checkpoint.torch.save = save
    elif point == "buffer_write":
        original_buffer_save = replay.ReplayBuffer.save

        def buffer_save(self, path):
            out = original_buffer_save(self, path)
            if hit():
                die()
            return out

        replay.ReplayBuffer.save = buffer_save
    elif point == "rename":
        original_rename = os.rename

        def rename(src, dst):
            original_rename(src, dst)
            if "ckpt_" in str(dst) and hit():
                die()

        checkpoint.os.rename = rename
    else:
        raise SystemExit(f"unknown kill point {point}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("save_dir")
    p.add_argument("name")
    p.add_argument("steps", type=int)
    p.add_argument("--kill", default=None)
    p.add_argument("--resume", default=None)
    args = p.parse_args()
    os.environ["SSAC_SAVE"] = args.save_dir
    torch.set_num_threads(1)
    if args.kill:
        point, n = args.kill.split(":")
        arm(point, int(n))
    if args.resume:
        argv = ["--resume", args.resume, "--steps", str(args.steps), "--logging", "none"]
    else:
        argv = [
            "--env",
            "Pendulum-v1",
            "--config",
            "sac.gin",
            "--steps",
            str(args.steps),
            "--seed",
            "3",
            "--name",
            args.name,
            "--max_episode_steps",
            "70",
            "--logging",
            "none",
        ]
        for binding in SMALL:
            argv += ["--gin_bindings", binding]
    summary = cli.train_gym(argv, search_dirs=[ROOT / "experiments" / "gym"])
    print("RUN_DIR", summary["run_dir"])


if __name__ == "__main__":
    main()
