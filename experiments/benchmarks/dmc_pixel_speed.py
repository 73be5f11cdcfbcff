"""Pixel-control speed (issue 15, benchmark 6b): our DrQ-v2 configuration against
stable-baselines3's SAC with ``CnnPolicy`` on DeepMind Control's cartpole_swingup from pixels,
plus a profile of one of our updates.

Every side trains on the same env, ``make_dmc_env("cartpole", "swingup", from_pixels=True)``
with ``--image_size`` S, ``--action_repeat`` R and a frame stack of 3 (``(9, S, S)`` uint8
stacks; SB3 reads the Box inside the observation dict through :class:`ImageOnly`), with the
same batch, hidden 1024x1024 MLPs, learning rate 1e-4, a buffer of uint8 stacks, one torch
thread, CPU, and one gradient update per two env transitions. Rows:

* ``ours``: ``experiments/dmc/drqv2.gin`` unchanged except for the batch, the buffer size and
  the warm-up (DrQ encoder: four 3x3 convolutions of 32 channels, strides 2, 1, 1, 1, then
  ``tanh(LayerNorm(Linear))`` to 50 features, trained by the critic; random-shift augmentation
  of obs and next_obs; deterministic actor; critic, actor and target update per update), built
  by :func:`super_sac.cli.train_dmc` and driven by the Trainer's own ``collect`` and ``update``.
* ``sb3``: ``SAC("CnnPolicy", train_freq=2, gradient_steps=1, optimize_memory_usage=True)``
  with SB3's NatureCNN (8x8/4, 4x4/2, 3x3/1 convolutions, 512 features): about 3.5x fewer
  FLOPs per image than the DrQ encoder at 84 px, so this row is not a like-for-like network.
* ``sb3_drq``: the same SB3 SAC with :class:`DrQExtractor`, the DrQ encoder's architecture
  written as a plain SB3 features extractor (NCHW convolutions), so that the encoders cost the
  same per image. SB3's SAC keeps its default ``share_features_extractor=False``: the actor
  and the critics have separate encoders (and the actor loss backpropagates through the
  critic's encoder), while ours shares one encoder, read detached by the actor (DrQ-v2). That
  difference in algorithm, not in implementation, is part of what the ratio measures.

Per round each side is built fresh, collects ``--warmup`` random transitions, then is timed over
``--collect`` training transitions (env steps and the updates that go with them, one per two
transitions: "env frames/s" = transitions x R / seconds), then over ``--updates`` updates alone
on the filled buffer (ms per update, updates/s; ours: ``Trainer.update()``, SB3:
``model.train(gradient_steps=...)``; both include sampling, ours also the augmentation). Rounds
alternate the order of the sides (ABAB...), and the report gives the median of each side and
the median of the per-round ratios ours / SB3 row, which is robust to load that changes between
rounds on a shared machine.

Profile: ours at the last configuration, ``torch.profiler`` (CPU) over ``--profile_updates``
updates after warm-up (top ops by self CPU time), and a breakdown of an update by phase from
``time.perf_counter`` around the Learner's calls (wrapped here, not in the library).

    python experiments/benchmarks/dmc_pixel_speed.py        # 64 and 84 px, batch 128, 3 rounds
    python experiments/benchmarks/dmc_pixel_speed.py --sizes 84 --batches 256 --name dmc_speed_256

The committed ``results/dmc_pixel_speed.{md,json}`` came from a short run on a heavily loaded
2-core machine (load average 5-10):

    python experiments/benchmarks/dmc_pixel_speed.py --sizes 64,84 --batches 128 --warmup 150 \
        --collect 20 --updates 10 --rounds 3 --profile_updates 5 --name dmc_pixel_speed
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import bench_utils

DOMAIN, TASK, FRAME_STACK, HIDDEN, LR = "cartpole", "swingup", 3, 1024, 1e-4
DMC_CONFIGS = bench_utils.REPO_ROOT / "experiments" / "dmc"
SIDES = ("ours", "sb3", "sb3_drq")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="64,84", help="image sizes S (comma-separated)")
    p.add_argument("--batches", default="128", help="batch sizes (comma-separated)")
    p.add_argument("--sides", default=",".join(SIDES), help=f"rows, from {', '.join(SIDES)}")
    p.add_argument("--action_repeat", type=int, default=2, help="R (DrQ-v2: 2)")
    p.add_argument("--warmup", type=int, default=300, help="random transitions before timing")
    p.add_argument("--collect", type=int, default=100,
                   help="timed training transitions (one update per two)")
    p.add_argument("--updates", type=int, default=40, help="timed updates on the filled buffer")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--no_fast_render", action="store_true",
                   help="render with shadows and multisampling (slower env, same for all sides)")
    p.add_argument("--profile_updates", type=int, default=10,
                   help="updates under torch.profiler (0: no profile)")
    p.add_argument("--paired_windows", type=int, default=0,
                   help="paired update timing at the last configuration: windows of "
                   "--paired_updates updates per row, the rows alternating, all agents built "
                   "once (0: off)")
    p.add_argument("--paired_updates", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="dmc_pixel_speed")
    args = p.parse_args(argv)
    args.size_list = [int(s) for s in args.sizes.split(",")]
    args.batch_list = [int(b) for b in args.batches.split(",")]
    args.side_list = [s.strip() for s in args.sides.split(",")]
    unknown = [s for s in args.side_list if s not in SIDES]
    if unknown:
        p.error(f"--sides: unknown {unknown}; choose from {', '.join(SIDES)}")
    if min(args.size_list) < 36:
        p.error("--sizes: SB3's NatureCNN needs images of at least 36 px")
    if args.warmup < max(args.batch_list):
        p.error(f"--warmup must be at least the largest batch ({max(args.batch_list)})")
    if args.collect % 2 or args.collect < 2:
        p.error("--collect must be a positive even number (one update per two transitions)")
    return args


def make_env(args: argparse.Namespace, size: int) -> Any:
    from super_sac.envs.dmc import make_dmc_env

    return make_dmc_env(DOMAIN, TASK, from_pixels=True, image_size=size,
                        action_repeat=args.action_repeat, frame_stack=FRAME_STACK,
                        fast_render=not args.no_fast_render)


def buffer_size(args: argparse.Namespace) -> int:
    return args.warmup + args.collect + 16


# ------------------------------------------------------------------------------ ours


@contextlib.contextmanager
def captured_trainer(action: Callable[[Any], dict[str, Any]]) -> Iterator[None]:
    """Within the block, ``Trainer.run`` calls ``action(trainer)`` instead of training, so
    :func:`super_sac.cli.train_dmc` builds everything as a real run does and returns what
    ``action`` returns."""
    from super_sac import main as loop

    original = loop.Trainer.run
    loop.Trainer.run = lambda self: action(self)  # type: ignore[method-assign]
    try:
        yield
    finally:
        loop.Trainer.run = original  # type: ignore[method-assign]


def run_ours(args: argparse.Namespace, size: int, batch: int,
             action: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """Build our DrQ-v2 run through ``train_dmc`` and hand its Trainer to ``action``."""
    import gin

    from super_sac import cli

    gin.clear_config()
    bindings = [
        *bench_utils.QUIET_BINDINGS,
        f"super_sac.batch_size = {batch}",
        f"super_sac.random_warmup_steps = {args.warmup}",
        f"ReplayBuffer.size = {buffer_size(args)}",
    ]
    argv = ["--domain", DOMAIN, "--task", TASK, "--action_repeat", str(args.action_repeat),
            "--image_size", str(size), "--frame_stack", str(FRAME_STACK), "--config",
            "drqv2.gin", "--seed", str(args.seed), "--device", "cpu", "--logging", "none",
            "--threads", str(args.threads)]
    if not args.no_fast_render:
        argv.append("--fast_render")
    argv += [x for b in bindings for x in ("--gin_bindings", b)]
    with captured_trainer(action):
        return cli.train_dmc(argv, search_dirs=[DMC_CONFIGS])


def warm_up(trainer: Any) -> None:
    """Start the online phase and collect the random warm-up transitions."""
    trainer.reset_envs()
    trainer.phase, trainer.step = "online", 0
    trainer.collect(trainer.cfg.random_warmup_steps)


def loop_step(trainer: Any) -> None:
    """One step of ``Trainer.run_online`` (two transitions, one update, the NaN check)."""
    trainer.step += 1
    trainer.collect(trainer.cfg.transitions_per_online_step)
    trainer.update()
    trainer.check_finite()


def update_step(trainer: Any) -> None:
    trainer.step += 1
    trainer.update()
    trainer.check_finite()


def ours_measure(args: argparse.Namespace, trainer: Any) -> dict[str, Any]:
    from super_sac.utils import matmul_precision

    if trainer.cfg.transitions_per_online_step != 2:
        raise RuntimeError("drqv2.gin is expected to update once per two transitions")
    with matmul_precision(trainer.cfg.matmul_precision):
        warm_up(trainer)
        update_step(trainer)  # first update: lazy allocations
        updates_before = trainer.critic_updates
        start = time.perf_counter()
        for _ in range(args.collect // 2):
            loop_step(trainer)
        collect_s = time.perf_counter() - start
        collect_updates = trainer.critic_updates - updates_before
        start = time.perf_counter()
        for _ in range(args.updates):
            update_step(trainer)
        update_s = time.perf_counter() - start
    return timings(args, collect_s, collect_updates, update_s)


def timings(args: argparse.Namespace, collect_s: float, collect_updates: int,
            update_s: float) -> dict[str, Any]:
    if collect_updates != args.collect // 2:
        raise RuntimeError(f"expected {args.collect // 2} updates while collecting, "
                           f"got {collect_updates}")
    return {
        "collect_seconds": collect_s,
        "collect_updates": collect_updates,
        "env_frames_per_s": args.collect * args.action_repeat / collect_s,
        "transitions_per_s": args.collect / collect_s,
        "update_seconds": update_s,
        "ms_per_update": 1000.0 * update_s / args.updates,
        "updates_per_s": args.updates / update_s,
    }


# ------------------------------------------------------------------------------ SB3


def image_only_wrapper() -> type:
    import gymnasium as gym

    class ImageOnly(gym.ObservationWrapper):
        """The ``key`` Box of a dict-observation env as the observation (SB3's CnnPolicy
        wants a Box image: uint8, channels first, bounds 0 and 255)."""

        def __init__(self, env: gym.Env, key: str = "obs") -> None:
            super().__init__(env)
            self.key = key
            self.observation_space = env.observation_space[key]

        def observation(self, observation: dict[str, Any]) -> Any:
            return observation[self.key]

    return ImageOnly


def drq_extractor_class() -> type:
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from torch import nn

    class DrQExtractor(BaseFeaturesExtractor):
        """The DrQ encoder's architecture as an SB3 features extractor: four 3x3 convolutions
        of 32 channels (strides 2, 1, 1, 1) with ReLUs, then ``tanh(LayerNorm(W h + b))`` of
        ``features_dim`` (Kostrikov et al. 2020; Yarats et al. 2021). SB3 hands it pixels
        divided by 255; they are centred on 0 as the DrQ encoder does."""

        def __init__(self, observation_space: Any, features_dim: int = 50) -> None:
            super().__init__(observation_space, features_dim)
            channels, height, width = observation_space.shape
            layers: list[nn.Module] = []
            for i, stride in enumerate((2, 1, 1, 1)):
                layers += [nn.Conv2d(channels if i == 0 else 32, 32, 3, stride), nn.ReLU()]
            self.convs = nn.Sequential(*layers, nn.Flatten())
            with torch.no_grad():
                flat = self.convs(torch.zeros(1, channels, height, width)).shape[1]
            self.head = nn.Sequential(nn.Linear(flat, features_dim), nn.LayerNorm(features_dim),
                                      nn.Tanh())

        def forward(self, observations: torch.Tensor) -> torch.Tensor:
            return self.head(self.convs(observations - 0.5))

    return DrQExtractor


def sb3_model(args: argparse.Namespace, size: int, batch: int, drq: bool) -> Any:
    from stable_baselines3 import SAC

    policy_kwargs: dict[str, Any] = {"net_arch": [HIDDEN, HIDDEN]}
    if drq:
        policy_kwargs |= {"features_extractor_class": drq_extractor_class(),
                          "features_extractor_kwargs": {"features_dim": 50}}
    return SAC(
        "CnnPolicy", image_only_wrapper()(make_env(args, size)), learning_rate=LR,
        buffer_size=buffer_size(args), learning_starts=args.warmup, batch_size=batch,
        train_freq=2, gradient_steps=1, optimize_memory_usage=True,
        replay_buffer_kwargs={"handle_timeout_termination": False},
        policy_kwargs=policy_kwargs, seed=args.seed, device="cpu", verbose=0,
    )


def sb3_measure(args: argparse.Namespace, size: int, batch: int, drq: bool) -> dict[str, Any]:
    import torch

    torch.set_num_threads(args.threads)
    model = sb3_model(args, size, batch, drq)
    model.learn(total_timesteps=args.warmup)  # random actions, no update yet
    model.train(gradient_steps=1, batch_size=batch)  # first update: lazy allocations
    before = model._n_updates
    start = time.perf_counter()
    model.learn(total_timesteps=args.collect, reset_num_timesteps=False)
    collect_s = time.perf_counter() - start
    collect_updates = model._n_updates - before
    start = time.perf_counter()
    model.train(gradient_steps=args.updates, batch_size=batch)
    update_s = time.perf_counter() - start
    model.get_env().close()
    return timings(args, collect_s, collect_updates, update_s)


def measure_side(args: argparse.Namespace, side: str, size: int, batch: int) -> dict[str, Any]:
    if side == "ours":
        return run_ours(args, size, batch, lambda trainer: ours_measure(args, trainer))
    return sb3_measure(args, size, batch, drq=side == "sb3_drq")


# ------------------------------------------------------------------------------ profile


class PhaseTimer:
    """Accumulates ``time.perf_counter`` seconds per label; with ``ranges`` each timed call
    also opens a ``torch.profiler.record_function`` range of its label."""

    def __init__(self, ranges: bool = False) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.ranges = ranges

    @contextlib.contextmanager
    def time(self, label: str) -> Iterator[None]:
        import torch

        scope = torch.profiler.record_function(label) if self.ranges else contextlib.nullcontext()
        start = time.perf_counter()
        with scope:
            yield
        self.seconds[label] += time.perf_counter() - start

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **kw: Any) -> Any:
            with self.time(label):
                return fn(*a, **kw)

        return timed


@contextlib.contextmanager
def timed_phases(trainer: Any, timer: PhaseTimer) -> Iterator[None]:
    """Wrap the Learner's calls of one update (instance attributes and the module functions
    that ``learning`` and ``learner`` look up at call time); everything is restored after."""
    import super_sac.learning as learning
    import super_sac.learning_utils as lu

    learner = trainer.learner
    critic_opt = learner.critic_optimizer

    def optimizer_step(optimizer: Any, loss: Any) -> None:
        who = "critic" if optimizer is critic_opt else "actor"
        with timer.time(f"{who}: zero_grad + backward"):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with timer.time(f"{who}: optimizer step"):
            optimizer.step()  # drqv2.gin clips no gradient (optimizer_step's only other work)

    module_patches = [
        (learning, "td_backup", timer.wrap("critic: TD target (no grad)",
                                                   learning.td_backup)),
        (learning, "optimizer_step", optimizer_step),
        (lu, "soft_update", timer.wrap("target update (Polyak)", lu.soft_update)),
    ]
    originals = [(m, name, getattr(m, name)) for m, name, _ in module_patches]
    for module, name, fn in module_patches:
        setattr(module, name, fn)
    trainer.buffer.sample = timer.wrap("replay sample", trainer.buffer.sample)
    learner.augment = timer.wrap("augmentation (random shift)", learner.augment)
    learner.critic_step = timer.wrap("critic_step total", learner.critic_step)
    learner.pg_actor_step = timer.wrap("pg_actor_step total", learner.pg_actor_step)
    try:
        yield
    finally:
        for module, name, fn in originals:
            setattr(module, name, fn)
        for obj, name in ((trainer.buffer, "sample"), (learner, "augment"),
                          (learner, "critic_step"), (learner, "pg_actor_step")):
            delattr(obj, name)  # back to the class's method


def phase_breakdown(timer: PhaseTimer, total: float, updates: int) -> list[tuple[str, float]]:
    """Milliseconds per update by phase; the forward passes are what remains of each step."""
    s = timer.seconds
    critic_parts = ["critic: TD target (no grad)", "critic: zero_grad + backward",
                    "critic: optimizer step", "target update (Polyak)"]
    actor_parts = ["actor: zero_grad + backward", "actor: optimizer step"]
    rows = [
        ("replay sample", s["replay sample"]),
        ("augmentation (random shift)", s["augmentation (random shift)"]),
        ("critic: TD target (no grad)", s["critic: TD target (no grad)"]),
        ("critic: forward + loss", s["critic_step total"] - sum(s[k] for k in critic_parts)),
        ("critic: zero_grad + backward", s["critic: zero_grad + backward"]),
        ("critic: optimizer step", s["critic: optimizer step"]),
        ("target update (Polyak)", s["target update (Polyak)"]),
        ("actor: forward + loss", s["pg_actor_step total"] - sum(s[k] for k in actor_parts)),
        ("actor: zero_grad + backward", s["actor: zero_grad + backward"]),
        ("actor: optimizer step", s["actor: optimizer step"]),
    ]
    rows.append(("rest of Trainer.update (logs, finite checks)",
                 total - sum(v for _, v in rows)))
    return [(label, 1000.0 * v / updates) for label, v in rows]


def profile_ours(args: argparse.Namespace, trainer: Any) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from super_sac.utils import matmul_precision

    with matmul_precision(trainer.cfg.matmul_precision):
        warm_up(trainer)
        for _ in range(5):
            update_step(trainer)
        timer = PhaseTimer()
        n = max(2 * args.profile_updates, 10)
        with timed_phases(trainer, timer):
            start = time.perf_counter()
            for _ in range(n):
                update_step(trainer)
            total = time.perf_counter() - start
        breakdown = phase_breakdown(timer, total, n)
        plain_start = time.perf_counter()
        for _ in range(n):
            update_step(trainer)
        plain_ms = 1000.0 * (time.perf_counter() - plain_start) / n
        ranged = PhaseTimer(ranges=True)
        with timed_phases(trainer, ranged), profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.profile_updates):
                with torch.profiler.record_function("Trainer.update"):
                    update_step(trainer)
    averages = prof.key_averages()
    table = averages.table(sort_by="self_cpu_time_total", row_limit=20)
    top = sorted(averages, key=lambda e: e.self_cpu_time_total, reverse=True)[:20]
    return {
        "timed_updates": n,
        "ms_per_update_with_timers": 1000.0 * total / n,
        "ms_per_update_plain": plain_ms,
        "breakdown_ms": breakdown,
        "profiled_updates": args.profile_updates,
        "top_ops_table": table,
        "top_ops": [{"name": e.key, "calls": e.count,
                     "self_cpu_ms_per_update": e.self_cpu_time_total / 1000.0
                     / args.profile_updates} for e in top],
    }


# ------------------------------------------------------------------------------ paired


def paired_updates(args: argparse.Namespace, trainer: Any, size: int,
                   batch: int) -> dict[str, Any]:
    """ms per update of every row in short windows that alternate between the rows (ours,
    then each SB3 row, the order rotating), every agent built and warmed up once: each window's
    ratio compares updates made seconds apart, under nearly the same load."""
    from super_sac.utils import matmul_precision

    models = {}
    for side in (s for s in args.side_list if s != "ours"):
        models[side] = sb3_model(args, size, batch, drq=side == "sb3_drq")
        models[side].learn(total_timesteps=args.warmup)
        models[side].train(gradient_steps=1, batch_size=batch)
    with matmul_precision(trainer.cfg.matmul_precision):
        warm_up(trainer)
        update_step(trainer)
        windows: list[dict[str, float]] = []
        sides = ["ours", *models]
        for w in range(args.paired_windows):
            window: dict[str, float] = {}
            for side in sides[w % len(sides):] + sides[:w % len(sides)]:
                start = time.perf_counter()
                if side == "ours":
                    for _ in range(args.paired_updates):
                        update_step(trainer)
                else:
                    models[side].train(gradient_steps=args.paired_updates, batch_size=batch)
                window[side] = 1000.0 * (time.perf_counter() - start) / args.paired_updates
            windows.append(window)
            print(f"paired window {w}: " + ", ".join(
                f"{k} {v:.0f} ms" for k, v in window.items()), flush=True)
    return {"size": size, "batch": batch, "updates_per_window": args.paired_updates,
            "windows": windows}


def paired_table(paired: dict[str, Any]) -> str:
    windows = paired["windows"]
    rows = []
    for side in windows[0]:
        ms = [w[side] for w in windows]
        row = [side, f"{median(ms):.0f}"]
        if side == "ours":
            row += ["", ""]
        else:
            ratios = [w[side] / w["ours"] for w in windows]
            row.append(f"**{median(ratios):.2f}** (" + ", ".join(f"{x:.2f}" for x in ratios)
                       + ")")
            row.append(bench_utils.format_ratio_interval(ratios))
        rows.append(row)
    return bench_utils.markdown_table(
        ["row", "ms / update (median of windows)",
         "ours / row, updates/s: median (each window)", "mean [95% CI over windows]"], rows)


# ------------------------------------------------------------------------------ report


def median(values: list[float]) -> float:
    return statistics.median(values)


def config_table(args: argparse.Namespace, config: dict[str, Any]) -> str:
    rounds = config["rounds"]
    rows = []
    for side in args.side_list:
        runs = [r[side] for r in rounds]
        row = [side, f"{median([x['ms_per_update'] for x in runs]):.1f}",
               f"{median([x['updates_per_s'] for x in runs]):.2f}",
               f"{median([x['env_frames_per_s'] for x in runs]):.1f}"]
        if side == "ours" or "ours" not in args.side_list:
            row += ["", "", ""]
        else:
            for metric in ("updates_per_s", "env_frames_per_s"):
                ratios = [r["ours"][metric] / r[side][metric] for r in rounds]
                row.append(f"**{median(ratios):.2f}** ("
                           + ", ".join(f"{x:.2f}" for x in ratios) + ")")
                if metric == "updates_per_s":
                    row.append(bench_utils.format_ratio_interval(ratios))
        rows.append(row)
    return bench_utils.markdown_table(
        ["row", "ms / update", "updates/s", "env frames/s (training)",
         "ours / row, updates/s: median (rounds)", "updates/s: mean [95% CI over rounds]",
         "ours / row, env frames/s: median (rounds)"],
        rows)


def markdown(args: argparse.Namespace, payload: dict[str, Any]) -> str:
    rounds = (
        f"per round {args.warmup} random transitions, then {args.collect} timed training "
        f"transitions ({args.collect // 2} updates) and {args.updates} timed updates alone; "
        f"{args.rounds} rounds alternating the order of the rows. Medians over rounds; the "
        "ratio columns give the median of the per-round ratios and each round's ratio. "
        "Env frames = transitions x action repeat."
        if args.rounds > 0 else f"{args.warmup} random transitions before the updates."
    )
    parts = [
        "# Pixel speed: our DrQ-v2 against SB3's SAC with CnnPolicy (cartpole_swingup)\n",
        f"Image sizes {args.sizes}, batch {args.batches}, action repeat {args.action_repeat}, "
        f"frame stack {FRAME_STACK}, fast_render={not args.no_fast_render}, hidden "
        f"{HIDDEN}x{HIDDEN}, {args.threads} torch thread(s), CPU; {rounds} Load average at "
        f"the start {payload['load_average'][0]:.1f}, at the end "
        f"{payload['load_average_end'][0]:.1f} ({os.cpu_count()} cores). See "
        "dmc_pixel_speed.py for what each row runs.\n",
    ]
    for config in payload["configs"]:
        parts.append(f"## {config['size']} px, batch {config['batch']}\n")
        parts.append(config_table(args, config) + "\n")
    paired = payload.get("paired")
    if paired:
        parts.append(f"## Paired update timing ({paired['size']} px, batch {paired['batch']})\n")
        parts.append(
            f"Every agent built once; {len(paired['windows'])} windows of "
            f"{paired['updates_per_window']} updates per row, the rows alternating (the order "
            "rotating), so each window's ratio compares updates made seconds apart.\n")
        parts.append(paired_table(paired) + "\n")
    profile_data = payload.get("profile")
    if profile_data:
        parts.append(f"## Profile of one update of ours ({payload['profile_size']} px, batch "
                     f"{payload['profile_batch']})\n")
        parts.append(
            f"Breakdown from `time.perf_counter` around the Learner's calls over "
            f"{profile_data['timed_updates']} updates "
            f"({profile_data['ms_per_update_with_timers']:.1f} ms per update with the timers, "
            f"{profile_data['ms_per_update_plain']:.1f} ms without):\n")
        total = sum(v for _, v in profile_data["breakdown_ms"])
        parts.append(bench_utils.markdown_table(
            ["phase", "ms / update", "share"],
            [[label, f"{v:.2f}", f"{100 * v / total:.0f}%"]
             for label, v in profile_data["breakdown_ms"]]) + "\n")
        parts.append(f"`torch.profiler` (CPU) over {profile_data['profiled_updates']} updates, "
                     "top 20 ops by self CPU time (the phase names are ranges opened by the "
                     "benchmark's wrappers):\n")
        parts.append("```\n" + profile_data["top_ops_table"].rstrip() + "\n```\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import torch

    args = parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    payload: dict[str, Any] = {
        "benchmark": "dmc_pixel_speed",
        "env": f"{DOMAIN}_{TASK}",
        "settings": {k: v for k, v in vars(args).items()
                     if k not in ("size_list", "batch_list", "side_list")},
        "versions": bench_utils.versions(),
        "load_average": os.getloadavg(),
        "configs": [],
    }
    for size in args.size_list if args.rounds > 0 else []:
        for batch in args.batch_list:
            config: dict[str, Any] = {"size": size, "batch": batch, "rounds": []}
            for r in range(args.rounds):
                order = args.side_list if r % 2 == 0 else args.side_list[::-1]
                result: dict[str, Any] = {"round": r, "order": list(order)}
                for side in order:
                    result[side] = measure_side(args, side, size, batch)
                config["rounds"].append(result)
                print(f"{size} px, batch {batch}, round {r}: " + ", ".join(
                    f"{s} {result[s]['ms_per_update']:.1f} ms/update "
                    f"{result[s]['env_frames_per_s']:.1f} frames/s" for s in args.side_list),
                    flush=True)
            payload["configs"].append(config)
    if args.paired_windows > 0:
        size, batch = args.size_list[-1], args.batch_list[-1]
        payload["paired"] = run_ours(
            args, size, batch, lambda trainer: paired_updates(args, trainer, size, batch))
    if args.profile_updates > 0:
        size, batch = args.size_list[-1], args.batch_list[-1]
        payload["profile_size"], payload["profile_batch"] = size, batch
        payload["profile"] = run_ours(args, size, batch,
                                      lambda trainer: profile_ours(args, trainer))
    payload["load_average_end"] = os.getloadavg()
    text = markdown(args, payload)
    print("\n" + text, flush=True)
    md, js = bench_utils.write_results(args.name, text, payload)
    print(f"wrote {md} and {js}", flush=True)
    return payload


if __name__ == "__main__":
    main()
