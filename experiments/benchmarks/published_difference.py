"""Our seeds against a paper's published per-seed curve: each group's mean, the difference with
a 95% bootstrap interval and a permutation test, at chosen frame counts.

A published curve shares no seed with ours, so the two groups are compared as independent
samples (:func:`super_sac.sweep.stats.two_group_entry`): each group's mean with the sweep
report's bootstrap interval, the difference of the means with an interval that resamples the two
groups separately, and the exact permutation test of that difference (every split of the pooled
seeds; 3,003 for 5 against 10). ``--above T`` also counts each group's seeds above ``T`` (e.g.
100 for cartpole_swingup: off the ~75 plateau of a pole that never swings up).

Our runs come from a report folder written with ``sweep.py report --evaluations`` (its
``evaluations/`` CSVs), against env steps; ``--frames_per_step`` converts them to frames (the
action repeat for DMC, which counts frames). The published file is a CSV with one row per seed
and evaluation, columns ``seed``, ``frame`` and ``episode_reward`` as DrQ-v2's
``curves/*.csv`` (other columns are ignored; ``--frame_column``, ``--value_column`` rename).

Usage (the DrQ-v2 table of ``experiments/benchmarks/README.md``)::

    python experiments/benchmarks/published_difference.py \\
        experiments/benchmarks/results/dmc_cartpole_pixels_drqv2 \\
        --published experiments/benchmarks/peers/published/drqv2_cartpole_swingup.csv \\
        --frames_per_step 2 --at 20000,40000 --above 100
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path
from typing import Any

from super_sac.sweep.runs import collect
from super_sac.sweep.stats import two_group_entry
from super_sac.utils import atomic_write_json


def read_published(
    path: str | Path, frame_column: str = "frame", value_column: str = "episode_reward"
) -> dict[int, dict[int, float]]:
    """``{frame: {seed: value}}`` of a published per-seed curve CSV.

    :raises SystemExit: when a column is missing, a value does not parse, or a seed has two
        values at one frame.
    """
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames or []
        for name in ("seed", frame_column, value_column):
            if name not in columns:
                raise SystemExit(
                    f"error: {path} has no column {name!r} (it has {', '.join(columns)}). Fix: "
                    "give --frame_column / --value_column the names this file uses"
                )
        out: dict[int, dict[int, float]] = defaultdict(dict)
        for line, row in enumerate(reader, start=2):
            try:
                frame, seed = int(float(row[frame_column])), int(row["seed"])
                value = float(row[value_column])
            except ValueError as err:
                raise SystemExit(f"error: {path}, line {line}: {err}") from None
            if seed in out[frame]:
                raise SystemExit(f"error: {path}: seed {seed} has two values at frame {frame}")
            out[frame][seed] = value
    return dict(out)


def our_values(
    folder: str | Path, config: str | None, env: str | None, frames_per_step: float
) -> tuple[str, str, dict[int, dict[int, float]]]:
    """``(config, env, {frame: {seed: value}})`` of the report folder's archived runs."""
    data = collect([], archives=[folder])
    keys = [k for k, curves in data["curves"].items() if curves]
    if config is not None:
        keys = [k for k in keys if k[0] == config]
    if env is not None:
        keys = [k for k in keys if k[1] == env]
    if len(keys) != 1:
        have = ", ".join(f"{c} on {e}" for c, e in sorted(data["curves"]))
        raise SystemExit(
            f"error: {folder} holds {len(keys)} matching (config, env) pairs (it has {have}). "
            "Fix: name one with --config and --env"
        )
    key = keys[0]
    out: dict[int, dict[int, float]] = defaultdict(dict)
    for seed, (steps, values) in zip(data["seeds"][key], data["curves"][key]):
        for step, value in zip(steps, values):
            out[int(round(step * frames_per_step))][seed] = float(value)
    return key[0], key[1], dict(out)


def compare(
    ours: dict[int, dict[int, float]],
    published: dict[int, dict[int, float]],
    frames: list[int],
    above: float | None = None,
    reps: int = 2000,
) -> list[dict[str, Any]]:
    """One :func:`two_group_entry` per frame count (ours as group ``a``; ``reps`` bootstrap
    resamples, generator seed 0, as a sweep report).

    :raises SystemExit: when either side has no evaluation at a requested frame count.
    """
    rows = []
    for frame in frames:
        for name, side in (("our runs", ours), ("the published file", published)):
            if frame not in side:
                raise SystemExit(
                    f"error: {name} have no evaluation at {frame} frames (they have "
                    f"{', '.join(str(f) for f in sorted(side))}). Fix: --at those frames, or "
                    "check --frames_per_step"
                )
        per_seed_a = {str(s): ours[frame][s] for s in sorted(ours[frame])}
        per_seed_b = {str(s): published[frame][s] for s in sorted(published[frame])}
        a, b = list(per_seed_a.values()), list(per_seed_b.values())
        entry = two_group_entry(a, b, reps=reps)
        entry["frame"] = frame
        entry["a"]["per_seed"], entry["b"]["per_seed"] = per_seed_a, per_seed_b
        if above is not None:
            entry["above"] = {
                "threshold": above,
                "a": sum(v > above for v in a),
                "b": sum(v > above for v in b),
            }
        rows.append(entry)
    return rows


def _mean_cell(m: dict[str, float]) -> str:
    return f"{m['value']:.1f} [{m['ci_low']:.1f}, {m['ci_high']:.1f}]"


def markdown(rows: list[dict[str, Any]], label: str) -> str:
    """The table: a row per frame count."""
    above = rows and "above" in rows[0]
    head = "| frames | ours | published | ours - published | p, ours lower | p, two-sided |"
    if above:
        head += f" above {rows[0]['above']['threshold']:g}: ours, published |"
    lines = [
        f"{label}: means with 95% bootstrap intervals (each group over its seeds), the difference "
        "of the means with a 95% interval resampling the groups separately, and the exact "
        "permutation test of the difference",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    for r in rows:
        p = r["permutation"]
        cells = [
            f"{r['frame']:,}",
            f"{_mean_cell(r['a']['mean'])} (n={r['a']['n']})",
            f"{_mean_cell(r['b']['mean'])} (n={r['b']['n']})",
            _mean_cell(r["difference"]),
            f"{p['p_lower']:.3f}",
            f"{p['p_two_sided']:.3f}",
        ]
        if above:
            cells.append(f"{r['above']['a']} of {r['a']['n']}, {r['above']['b']} of {r['b']['n']}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="a report folder with evaluations/ (ours)")
    parser.add_argument("--published", required=True, help="the published per-seed CSV")
    parser.add_argument("--at", required=True, help="frame counts, comma-separated")
    parser.add_argument(
        "--frames_per_step", type=float, default=1.0, help="frames per env step (action repeat)"
    )
    parser.add_argument("--config", default=None, help="default: the folder's only config")
    parser.add_argument("--env", default=None, help="default: the folder's only env")
    parser.add_argument("--frame_column", default="frame")
    parser.add_argument("--value_column", default="episode_reward")
    parser.add_argument("--above", type=float, default=None, help="count seeds above this")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap resamples")
    parser.add_argument("--out", default=None, help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)
    try:
        frames = [int(x) for x in args.at.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"error: --at {args.at!r}: give frame counts like 20000,40000") from None
    config, env, ours = our_values(args.folder, args.config, args.env, args.frames_per_step)
    published = read_published(args.published, args.frame_column, args.value_column)
    rows = compare(ours, published, frames, args.above, args.reps)
    print(markdown(rows, f"{config} on {env} ({args.folder}) against {args.published}"), end="")
    if args.out:
        payload = {
            "folder": str(args.folder),
            "published": str(args.published),
            "config": config,
            "env": env,
            "frames_per_step": args.frames_per_step,
            "rows": rows,
        }
        atomic_write_json(Path(args.out), payload)


if __name__ == "__main__":
    main()
