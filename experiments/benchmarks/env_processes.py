"""Env steps per second of a rendering MuJoCo env, in the training process and in worker processes.

The env is ``HalfCheetah-v5`` rendered offscreen (``render_mode="rgb_array"``, 84x84) with the
rendered frame as its only observation (gymnasium's ``AddRenderObservation``), as pixel control
uses it; every step renders a frame. The training envs are built as the training scripts build
them (:func:`super_sac.vector_envs.make_vector_env`): ``sync`` keeps every env in this process
(``--vector sync``, the default), ``async`` runs one worker process per env with shared memory
(``--vector async``). Actions are uniform random (a seeded generator); after a reset and a few
warm-up steps, ``--env_steps`` env steps are timed (summed over the envs), in rounds that
alternate the settings; the report gives each setting's median env steps per second, its
speed-up over one env in the training process, and the mean of the per-round speed-ups with a
95% bootstrap interval over rounds.

Rendering uses EGL (``MUJOCO_GL=egl``, set before MuJoCo is imported, unless already set).
Async workers are spawned (not forked), since this process renders too.
Process parallelism can only help up to the number of free CPU cores: the report names the
cores this machine has.

    python experiments/benchmarks/env_processes.py
    python experiments/benchmarks/env_processes.py --settings sync:1 async:2 --env_steps 200
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("MUJOCO_GL", "egl")
if "--lp_threads" in sys.argv:  # before MuJoCo loads Mesa; spawned workers inherit it
    os.environ["LP_NUM_THREADS"] = sys.argv[sys.argv.index("--lp_threads") + 1]

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import bench_utils  # noqa: E402
import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from super_sac.vector_envs import make_vector_env  # noqa: E402
from super_sac.wrappers import DictObsWrapper  # noqa: E402

ENV_ID, SIZE = "HalfCheetah-v5", 84
WARMUP_STEPS = 5


def make_pixel_env() -> gym.Env:
    """HalfCheetah whose observation is its 84x84 RGB render, as ``{"obs": uint8 array}``."""
    env = gym.make(ENV_ID, render_mode="rgb_array", width=SIZE, height=SIZE)
    env = gym.wrappers.AddRenderObservation(env, render_only=True)
    return DictObsWrapper(env)


def gl_renderer() -> str:
    """The OpenGL renderer MuJoCo's offscreen context gets (``llvmpipe``: Mesa's software
    rasterizer, on the CPU, itself multi-threaded: ``LP_NUM_THREADS`` threads, default one per
    core)."""
    try:
        import mujoco
        from OpenGL import GL

        ctx = mujoco.GLContext(16, 16)
        ctx.make_current()
        name = GL.glGetString(GL.GL_RENDERER).decode()
        ctx.free()
        return name
    except Exception as err:  # a report without the name rather than no report
        return f"unknown ({type(err).__name__})"


def machine_note(cores: int | None, load: tuple[float, ...], single_thread_render: bool) -> str:
    """What the report says about the machine the figures come from."""
    note = (
        f"**This machine has {cores} CPU cores** (load average {load[0]:.1f} / {load[1]:.1f} / "
        f"{load[2]:.1f} at the end of the run, this benchmark's own processes included): the env "
        f"processes can run on at most {cores} cores at once, and where other jobs share the "
        "machine more processes also take a larger share of its time, so these figures are no "
        "clean measure of how env processes scale on free cores (not measured here)."
    )
    if not single_thread_render:
        note += (
            " With a software renderer (llvmpipe) the rendering of one env already runs on "
            "several threads, so the env processes compete for the same cores."
        )
    return note + "\n"


def time_setting(kind: str, num_envs: int, env_steps: int, seed: int) -> dict[str, Any]:
    """Build ``num_envs`` envs of ``kind``, step them with random actions; time the steps."""
    start = time.perf_counter()
    # spawned workers: this process renders too (the sync settings), and a forked worker
    # inherits its EGL state and hangs
    venv = make_vector_env(make_pixel_env, num_envs, kind, context="spawn")
    try:
        rng = np.random.default_rng(seed)
        obs, _ = venv.reset(seed=[seed + i for i in range(num_envs)])
        shape = (num_envs, *venv.single_action_space.shape)
        build_s = time.perf_counter() - start

        def random_actions() -> np.ndarray:
            return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)

        for _ in range(WARMUP_STEPS):
            venv.step(random_actions())
        vector_steps = max(1, env_steps // num_envs)
        start = time.perf_counter()
        for _ in range(vector_steps):
            obs, _, terminated, truncated, _ = venv.step(random_actions())
            # HalfCheetah never terminates; its 1000-step limit is not reached here
            assert not (terminated | truncated).any()
        elapsed = time.perf_counter() - start
    finally:
        venv.close()
    assert obs["obs"].shape == (num_envs, SIZE, SIZE, 3)
    return {
        "steps": vector_steps * num_envs,
        "seconds": elapsed,
        "steps_per_s": vector_steps * num_envs / elapsed,
        "build_s": build_s,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--settings",
        nargs="+",
        default=["sync:1", "async:1", "async:2", "async:4"],
        help="KIND:NUM_ENVS entries (kind sync or async)",
    )
    p.add_argument("--env_steps", type=int, default=300, help="timed env steps per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="env_processes", help="results/<name>.{md,json}")
    p.add_argument(
        "--lp_threads",
        default=None,
        help="LP_NUM_THREADS: rendering threads of Mesa's llvmpipe per process (default: Mesa's)",
    )
    args = p.parse_args(argv)
    settings = [(s.split(":")[0], int(s.split(":")[1])) for s in args.settings]
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in args.settings}
    for r in range(args.rounds):
        for label, (kind, n) in zip(args.settings, settings):
            result = time_setting(kind, n, args.env_steps, args.seed + 100 * r)
            runs[label].append(result)
            print(f"round {r} {label}: {result['steps_per_s']:.1f} env steps/s", flush=True)
    cores = os.cpu_count()
    load = os.getloadavg()
    renderer = gl_renderer()
    lp_threads = os.environ.get("LP_NUM_THREADS", "Mesa's default (one per core)")
    medians = {label: statistics.median(x["steps_per_s"] for x in runs[label]) for label in runs}
    base = medians.get("sync:1")
    rows = []
    for label, (kind, n) in zip(args.settings, settings):
        rounds = " / ".join(f"{x['steps_per_s']:.1f}" for x in runs[label])
        speedup = f"{medians[label] / base:.2f}" if base else "n/a"
        per_round = "n/a"
        if base and len(runs[label]) > 1:  # each round's ratio to that round's sync:1 run
            ratios = [
                x["steps_per_s"] / b["steps_per_s"]
                for x, b in zip(runs[label], runs["sync:1"], strict=True)
            ]
            per_round = bench_utils.format_ratio_interval(ratios)
        place = "training process" if kind == "sync" else f"{n} worker process" + "es" * (n > 1)
        rows.append([f"{kind} ({place})", n, f"{medians[label]:.1f}", speedup, per_round, rounds])
    table = bench_utils.markdown_table(
        [
            "vector",
            "envs",
            "median env steps/s",
            "vs sync 1 env",
            "per round vs sync: mean [95% CI]",
            "rounds",
        ],
        rows,
    )
    markdown = (
        "# Env worker processes: rendering MuJoCo env steps per second\n\n"
        f"`{ENV_ID}` rendered offscreen at {SIZE}x{SIZE} (`MUJOCO_GL={os.environ['MUJOCO_GL']}`), "
        "the frame as the observation, uniform random actions; "
        f"{args.env_steps} timed env steps per setting and round, {args.rounds} rounds "
        "alternating the settings, median reported; the per-round column is the mean of each "
        "round's ratio to that round's sync run, with a 95% bootstrap interval over rounds. "
        "OpenGL renderer: "
        f"`{renderer}`, LP_NUM_THREADS: {lp_threads}.\n\n"
        f"{table}\n\n" + machine_note(cores, load, "LP_NUM_THREADS" in os.environ)
    )
    payload = {
        "env": ENV_ID,
        "image_size": SIZE,
        "mujoco_gl": os.environ["MUJOCO_GL"],
        "gl_renderer": renderer,
        "lp_num_threads": lp_threads,
        "env_steps_per_round": args.env_steps,
        "rounds": args.rounds,
        "cpu_count": cores,
        "load_average": load,
        "median_env_steps_per_s": medians,
        "runs": runs,
        "versions": bench_utils.versions(),
    }
    md, js = bench_utils.write_results(args.name, markdown, payload)
    print(markdown)
    print(f"wrote {md} and {js}")
    return payload


if __name__ == "__main__":
    main()
