"""Image replay: bytes per transition and sampling speed of frame-stacked observations, our
frame-deduplicated ``ReplayBuffer`` against stable-baselines3's ``ReplayBuffer`` (with and without
``optimize_memory_usage``) filled with the same stream of transitions.

The stream imitates an env with ``FrameStackObservation``: episodes of ``--episode`` steps whose
observations stack the last ``k`` frames (``C`` channels each; the first stack of an episode repeats
the reset frame), random uint8 frames of 84x84, Discrete(6) actions. Two shapes by default: Atari
``(4, 84, 84)`` (4 grayscale frames) and DeepMind-Control-like ``(9, 84, 84)`` (3 RGB frames). For
each: the bytes per transition each buffer allocates for ``--size`` transitions (ours from
``ReplayBuffer.bytes_per_transition`` at that size, where the frame ring adds a small constant;
whole stacks and SB3, whose cost per transition does not depend on the size, from buffers of
``--fill`` transitions: SB3 from its arrays' ``nbytes``), and batches of 256 per second sampled from
buffers holding ``--fill`` transitions (median of ``--rounds`` rounds of 40 batches, the three
buffers alternating; one torch thread). Ours rebuilds every stack from frame indices at sample time;
SB3 stores stacks whole.

    python experiments/benchmarks/image_replay.py
    python experiments/benchmarks/image_replay.py --fill 5000 --rounds 3 --name image_replay_quick
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator

import bench_utils
import numpy as np

SHAPES = {"atari": (4, 1), "dmc": (3, 3)}  # name -> (frames per stack, channels per frame)
BATCH = 256


def transitions(
    fill: int, k: int, c: int, episode: int, seed: int = 0
) -> Iterator[tuple[np.ndarray, np.ndarray, bool]]:
    """``(obs, next_obs, done)`` of ``fill`` transitions of stacked random frames."""
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, (fill + fill // episode + 2, c, 84, 84), dtype=np.uint8)
    f, t = 0, 0
    history = [frames[f]] * k
    for _ in range(fill):
        obs = np.concatenate(history)
        f += 1
        history = history[1:] + [frames[f]]
        t += 1
        done = t == episode
        yield obs, np.concatenate(history), done
        if done:
            f, t = f + 1, 0
            history = [frames[f]] * k


def sb3_bytes_per_transition(buffer: object) -> int:
    arrays = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
    total = sum(getattr(buffer, a).nbytes for a in arrays if getattr(buffer, a, None) is not None)
    return round(total / buffer.buffer_size)


def measure(name: str, k: int, c: int, args: argparse.Namespace) -> dict[str, object]:
    import gymnasium as gym
    from stable_baselines3.common.buffers import ReplayBuffer as SB3Buffer

    from super_sac import ReplayBuffer

    shape = (k * c, 84, 84)
    obs_space = gym.spaces.Dict({"obs": gym.spaces.Box(0, 255, shape, np.uint8)})
    act_space = gym.spaces.Discrete(6)
    sized = ReplayBuffer(args.size, verbose=False, frame_stack={"obs": k})
    sized.allocate(obs_space, act_space)
    whole = ReplayBuffer(args.fill, verbose=False)  # whole stacks: the same bytes at any size
    whole.allocate(obs_space, act_space)
    sb3_kwargs = dict(device="cpu", n_envs=1, handle_timeout_termination=False)
    box = obs_space["obs"]
    sizes = {
        "ours, frames stored once": sized.bytes_per_transition,
        "ours, stacks stored whole": whole.bytes_per_transition,
        "SB3": sb3_bytes_per_transition(SB3Buffer(args.fill, box, act_space, **sb3_kwargs)),
        "SB3 optimize_memory_usage": sb3_bytes_per_transition(
            SB3Buffer(args.fill, box, act_space, optimize_memory_usage=True, **sb3_kwargs)
        ),
    }
    del sized, whole

    ours = ReplayBuffer(args.fill, seed=0, verbose=False, frame_stack={"obs": k})
    sb3 = SB3Buffer(args.fill, box, act_space, **sb3_kwargs)
    sb3_opt = SB3Buffer(args.fill + 1, box, act_space, optimize_memory_usage=True, **sb3_kwargs)
    rng = np.random.default_rng(1)
    push_seconds = 0.0
    for obs, next_obs, done in transitions(args.fill, k, c, args.episode):
        action = rng.integers(0, 6, size=1)
        start = time.perf_counter()
        ours.push(
            {"obs": obs[None]}, action, np.zeros(1), {"obs": next_obs[None]}, [float(done)], 0.99
        )
        push_seconds += time.perf_counter() - start
        for buffer in (sb3, sb3_opt):
            buffer.add(obs[None], next_obs[None], action[:, None], np.zeros(1), [done], [{}])
    samplers: dict[str, Callable[[], object]] = {
        "ours, frames stored once": lambda: ours.sample(BATCH),
        "SB3": lambda: sb3.sample(BATCH),
        "SB3 optimize_memory_usage": lambda: sb3_opt.sample(BATCH),
    }
    rates: dict[str, list[float]] = {key: [] for key in samplers}
    for sample in samplers.values():  # warm caches
        for _ in range(5):
            sample()
    for _ in range(args.rounds):
        for key, sample in samplers.items():
            start = time.perf_counter()
            for _ in range(40):
                sample()
            rates[key].append(40 / (time.perf_counter() - start))
    row = {
        "shape": list(shape),
        "bytes_per_transition": sizes,
        "frames_per_transition": ours.frames_per_transition,
        "ours_push_per_s": args.fill / push_seconds,
        "batches_per_s": {key: statistics.median(v) for key, v in rates.items()},
        "batches_per_s_rounds": rates,
    }
    print(name, row["bytes_per_transition"], row["batches_per_s"], flush=True)
    return row


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--size", type=int, default=1_000_000, help="capacity for the bytes figure")
    p.add_argument("--fill", type=int, default=10_000, help="transitions in the timed buffers")
    p.add_argument("--episode", type=int, default=200, help="episode length of the stream")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--shapes", default=",".join(SHAPES), help="atari,dmc")
    p.add_argument("--name", default="image_replay")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    results = {name: measure(name, *SHAPES[name], args) for name in args.shapes.split(",")}
    rows = []
    for name, r in results.items():
        sizes, rates = r["bytes_per_transition"], r["batches_per_s"]
        per_round = r["batches_per_s_rounds"]
        ratios = [
            ours / sb3
            for ours, sb3 in zip(
                per_round["ours, frames stored once"], per_round["SB3"], strict=True
            )
        ]
        rows.append(
            [
                f"{name} {tuple(r['shape'])}",
                f"{sizes['ours, frames stored once']:,}",
                f"{sizes['ours, stacks stored whole']:,}",
                f"{sizes['SB3']:,}",
                f"{sizes['SB3 optimize_memory_usage']:,}",
                f"{rates['ours, frames stored once']:.0f}",
                f"{rates['SB3']:.0f}",
                f"{rates['SB3 optimize_memory_usage']:.0f}",
                bench_utils.format_ratio_interval(ratios),
            ]
        )
    headers = [
        "observation",
        "ours B/transition",
        "ours, whole stacks",
        "SB3",
        "SB3 optimize_memory_usage",
        "ours batches/s",
        "SB3 batches/s",
        "SB3 opt. batches/s",
        "ours / SB3 per round: mean [95% CI]",
    ]
    markdown = (
        "# Image replay: bytes per transition and sampling speed\n\n"
        f"Bytes for {args.size:,} transitions; batches of {BATCH} per second from buffers of "
        f"{args.fill:,} transitions (episodes of {args.episode} steps), median of {args.rounds} "
        "rounds (each round times all three in turn; the last column is the mean of the per-round "
        "ratios with a 95% bootstrap interval over rounds), one torch thread.\n\n"
        + bench_utils.markdown_table(headers, rows)
    )
    print(markdown)
    payload = {"settings": vars(args), "results": results, "versions": bench_utils.versions()}
    bench_utils.write_results(args.name, markdown, payload)


if __name__ == "__main__":
    main()
