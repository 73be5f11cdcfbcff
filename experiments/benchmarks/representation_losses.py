"""Issue 16's benchmarks from their sweeps: DR3 on and off in long offline training (4a), and a
Markov state abstraction on and off (4b). Returns per seed (final, mean of the last evaluations,
peak), the sweep runner's statistics (mean, median, IQM with 95% bootstrap intervals), and the
curves of logged training scalars (DR3's feature dot product ``phi(s, a) . phi(s', a')``, the
critic's Q, the Markov losses) read from each run's tensorboard events.

    # 4a: the sweep (HalfCheetah medium dataset, AWAC-style AFBC, DR3 0 vs 0.01), then the report
    python experiments/sweep.py run --root /work/sweeps --name dr3_halfcheetah_medium \\
        --script experiments/offline/train_offline.py \\
        --configs experiments/offline/awac.gin experiments/offline/awac_dr3.gin \\
        --envs HalfCheetah-v5 --seeds 0-2 --steps 0 --workers 2 --cpus_per_trial 1 \\
        --script_args "--dataset offline_data/npz/halfcheetah-medium.npz --offline_steps 50000" \\
        --gin_bindings "super_sac.log_feature_dot = True" \\
        --gin_bindings "super_sac.eval_interval = 5000"
    python experiments/benchmarks/representation_losses.py \\
        --sweep /work/sweeps/dr3_halfcheetah_medium --name dr3_halfcheetah_medium \\
        --tags critic/feature_dot critic/q_mean --reference HalfCheetah-v5=-282.49:4834.08

The results go to ``results/<name>/``: ``report.{md,json}``, ``curves.png`` (returns and every
tag, mean over seeds with a 95% bootstrap band) and each run's ``evaluations`` and tag series
as CSV files, so the figures can be redrawn without the sweep folder, and the numbers checked
against them without it:

    python experiments/benchmarks/representation_losses.py --check \
        experiments/benchmarks/results/dr3_halfcheetah_medium_5seeds
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
from pathlib import Path
from typing import Any

import bench_utils
import numpy as np

from super_sac.sweep import plots as sweep_plots
from super_sac.sweep import report as sweep_report
from super_sac.sweep import runs as sweep_runs
from super_sac.sweep.grid import FINISHED, Grid, read_manifest
from super_sac.sweep.stats import stratified_bootstrap_ci


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sweep", help="the sweep folder (<root>/<name>)")
    p.add_argument("--name", help="folder of the results under results/")
    p.add_argument(
        "--check",
        nargs="+",
        metavar="FOLDER",
        help="instead of a report: rebuild each committed report's numbers from the CSV files "
        "beside it and name every one that differs (exit 1 if any does)",
    )
    p.add_argument("--tags", nargs="*", default=[], help="tensorboard scalars to report")
    p.add_argument("--last", type=int, default=3, help="evaluations averaged as 'last'")
    p.add_argument("--reference", nargs="*", default=[], help="ENV=LOW:HIGH normalisation")
    args = p.parse_args(argv)
    if args.check is None and not (args.sweep and args.name):
        p.error("give --sweep and --name for a report, or --check FOLDER... to check reports")
    if args.check is not None and (
        args.sweep or args.name or args.tags or args.reference or args.last != 3
    ):
        p.error(
            "--check reads everything from the report folders (their recorded tags, last-k and "
            "references): drop --sweep, --name, --tags, --last, --reference"
        )
    return args


def read_tag(run_dir: Path, tag: str) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of a scalar over every tensorboard event file of ``run_dir``
    (a resumed run has several; a step logged twice keeps its newest value)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    by_step: dict[int, float] = {}
    for events in sorted(run_dir.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            by_step.update({e.step: e.value for e in acc.Scalars(tag)})
    steps = np.array(sorted(by_step), dtype=float)
    return steps, np.array([by_step[int(s)] for s in steps])


def run_rows(sweep: Path, tags: list[str], last: int) -> list[dict[str, Any]]:
    """One row per finished trial: its returns and, per tag, the first and last logged values
    (the mean over the first and over the last 10% of the log)."""
    grid = Grid.from_json(read_manifest(sweep)["grid"])
    rows = []
    for trial in grid.trials(sweep):
        if trial.state() != FINISHED:  # a running or interrupted trial's curve is partial
            continue
        steps, returns = sweep_runs.read_curve(trial.folder)
        if steps.size == 0:
            continue
        series = {tag: read_tag(trial.folder, tag) for tag in tags}
        rows.append(
            make_row(Path(trial.config).stem, trial.env, trial.seed, trial.folder, steps, returns,
                     series, last)
        )  # fmt: skip
    return rows


def make_row(
    config: str,
    env: str,
    seed: int,
    folder: str | Path,
    steps: np.ndarray,
    returns: np.ndarray,
    series: dict[str, tuple[np.ndarray, np.ndarray]],
    last: int,
) -> dict[str, Any]:
    """One run's row: its return curve with the final, last-``last`` mean and peak, and per
    tag of ``series`` (``{tag: (steps, values)}``, empty series left out) the whole series
    with the mean of its first and of its last 10%."""
    peak = int(np.argmax(returns))
    row: dict[str, Any] = {
        "config": config,
        "env": env,
        "seed": seed,
        "folder": str(folder),
        "steps": steps.tolist(),
        "returns": returns.tolist(),
        "final": float(returns[-1]),
        "last_mean": float(returns[-last:].mean()),
        "peak": float(returns[peak]),
        "peak_step": float(steps[peak]),
        "tags": {},
    }
    for tag, (t_steps, values) in series.items():
        if values.size == 0:
            continue
        k = max(1, values.size // 10)
        row["tags"][tag] = {
            "steps": t_steps.tolist(),
            "values": values.tolist(),
            "start": float(values[:k].mean()),
            "end": float(values[-k:].mean()),
        }
    return row


def summary_by_config(rows: list[dict[str, Any]], tags: list[str]) -> list[dict[str, Any]]:
    """Mean over seeds of the per-seed numbers, with their 95% bootstrap interval."""
    out = []
    for config in dict.fromkeys(r["config"] for r in rows):
        mine = [r for r in rows if r["config"] == config]
        entry: dict[str, Any] = {"config": config, "seeds": [r["seed"] for r in mine]}
        for key in ("final", "last_mean", "peak"):
            entry[key] = _mean_ci([r[key] for r in mine])
        for tag in tags:
            for end in ("start", "end"):
                values = [r["tags"][tag][end] for r in mine if tag in r["tags"]]
                if values:
                    entry[f"{tag}:{end}"] = _mean_ci(values)
        out.append(entry)
    return out


def _mean_ci(values: list[float]) -> dict[str, float]:
    point, low, high = stratified_bootstrap_ci({"runs": values}, np.mean, seed=0)
    return {"mean": point, "ci_low": low, "ci_high": high}


def normalise(value: float, reference: tuple[float, float] | None) -> str:
    if reference is None:
        return ""
    low, high = reference
    return f" ({100.0 * (value - low) / (high - low):.1f})"


def markdown(
    rows: list[dict[str, Any]],
    summary: list[dict[str, Any]],
    tags: list[str],
    references: dict[str, tuple[float, float]],
    last: int,
) -> str:
    ref = next(iter(references.values()), None)
    note = " (normalized score in brackets)" if ref else ""
    lines = [
        f"## Per seed{note}",
        "",
        "| config | seed | final | mean of last "
        f"{last} | peak (at step) | " + " | ".join(f"{t} start -> end" for t in tags) + " |",
        "| --- " * (5 + len(tags)) + "|",
    ]
    for r in rows:
        cells = [
            r["config"],
            str(r["seed"]),
            f"{r['final']:.1f}{normalise(r['final'], ref)}",
            f"{r['last_mean']:.1f}{normalise(r['last_mean'], ref)}",
            f"{r['peak']:.1f}{normalise(r['peak'], ref)} ({r['peak_step']:.0f})",
        ]
        for tag in tags:
            t = r["tags"].get(tag)
            cells.append(f"{t['start']:.3g} -> {t['end']:.3g}" if t else "")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Mean over seeds [95% bootstrap interval]", ""]
    keys = ["final", "last_mean", "peak"] + [f"{t}:{e}" for t in tags for e in ("start", "end")]
    lines.append("| config | " + " | ".join(keys) + " |")
    lines.append("| --- " * (1 + len(keys)) + "|")
    for s in summary:
        cells = [s["config"]]
        for key in keys:
            v = s.get(key)
            cells.append(
                f"{v['mean']:.4g} [{v['ci_low']:.4g}, {v['ci_high']:.4g}]"
                + (normalise(v["mean"], ref) if key in ("final", "last_mean", "peak") else "")
                if v
                else ""
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], tags: list[str], path: Path, xlabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("eval return", None)] + [(t, t) for t in tags]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8), squeeze=False)
    for ax, (title, tag) in zip(axes[0], panels):
        for config in dict.fromkeys(r["config"] for r in rows):
            runs = []
            for r in rows:
                if r["config"] != config:
                    continue
                if tag is None:
                    runs.append((np.array(r["steps"]), np.array(r["returns"])))
                elif tag in r["tags"]:
                    t = r["tags"][tag]
                    runs.append((np.array(t["steps"]), np.array(t["values"])))
            if not runs:
                continue
            steps, mean, low, high = sweep_plots._mean_band(runs, seed=0)
            (line,) = ax.plot(steps, mean, label=f"{config} ({len(runs)} seeds)")
            ax.fill_between(steps, low, high, alpha=0.25, color=line.get_color())
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def evaluations_file(config: str, seed: int) -> str:
    """The name of a run's copied ``evaluations.csv`` in a results folder."""
    return f"evaluations_{config}_seed{seed}.csv"


def series_file(tag: str, config: str, seed: int) -> str:
    """The name of a run's tag series in a results folder (``/`` in the tag as ``_``)."""
    return f"{tag.replace('/', '_')}_{config}_seed{seed}.csv"


def write_series(rows: list[dict[str, Any]], out: Path) -> None:
    for r in rows:
        config, seed = r["config"], r["seed"]
        shutil.copy(Path(r["folder"]) / "evaluations.csv", out / evaluations_file(config, seed))
        for tag, t in r["tags"].items():
            with open(out / series_file(tag, config, seed), "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["step", tag])
                writer.writerows(zip(t["steps"], t["values"]))


def read_series(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of a tag series written by :func:`write_series`."""
    with open(path, newline="") as f:
        pairs = [(float(step), float(value)) for step, value in list(csv.reader(f))[1:]]
    steps, values = zip(*pairs) if pairs else ((), ())
    return np.array(steps), np.array(values)


def _tags_of_rows(rows: list[dict[str, Any]]) -> list[str]:
    """The tags of a report that did not record them, in the command's order: that of the row
    with the most tags (each row keeps the command's order of the tags it logged), then any
    other row's."""
    ordered = max((list(r["tags"]) for r in rows), key=len, default=[])
    return list(dict.fromkeys([*ordered, *(t for r in rows for t in r["tags"])]))


def check_folder(folder: Path) -> list[str]:
    """Rebuild a committed report's rows, summary and per-seed tables from the CSV files
    beside it (each run's evaluations and tag series) and name every number that differs from
    ``report.json`` (floats to 1e-9), and a ``report.md`` that does not start with the
    rendering of ``report.json``. Not checked: the sweep report appended to ``report.md`` (its
    runs' folders are not committed here) and ``curves.png``'s pixels.

    :return: the differences (empty: the report holds).
    """
    from super_sac.sweep.check import json_differences

    committed = json.loads((folder / "report.json").read_text())
    last = committed.get("last", 3)  # reports written before it was recorded used the default
    # the tags: recorded since the forty-fourth session, before that the rows' own
    tags = committed.get("tags") or _tags_of_rows(committed["rows"])
    out: list[str] = []
    rows = []
    used: set[str] = set()
    for r in committed["rows"]:
        config, seed = r["config"], r["seed"]
        path = folder / evaluations_file(config, seed)
        used.update([path.name, *(series_file(tag, config, seed) for tag in tags)])
        if not path.is_file():
            out.append(f"{path.name}: missing (the rows of {config} seed {seed} need it)")
            continue
        steps, returns = sweep_runs.read_curve(path)
        if steps.size == 0:
            out.append(f"{path.name}: no evaluations (the rows of {config} seed {seed} need them)")
            continue
        series = {}
        for tag in tags:
            tag_path = folder / series_file(tag, config, seed)
            series[tag] = read_series(tag_path) if tag_path.is_file() else (np.zeros(0),) * 2
        rows.append(make_row(config, r["env"], seed, r["folder"], steps, returns, series, last))
    out += [
        f"{path.name}: in the folder, not in report.json (a run or tag the report left out)"
        for path in sorted(folder.glob("*.csv"))
        if path.name not in used
    ]
    by_run = {(c["config"], c["seed"]): c for c in committed["rows"]}
    for r in rows:
        where = f"rows[{r['config']} seed {r['seed']}]"
        out += json_differences(by_run[r["config"], r["seed"]], r, where)
    if len(rows) == len(committed["rows"]):
        summary = summary_by_config(rows, tags)
        out += json_differences(committed["summary"], summary, "summary")
        references = sweep_report.parse_references(committed.get("references", []))
        text = markdown(rows, summary, tags, references, last)
        if not (folder / "report.md").read_text().startswith(text):
            out.append("report.md does not start with the rendering of report.json")
    return out


def check_main(folders: list[str]) -> int:
    """``--check``: print each folder's verdict and its differences; 1 if any differs."""
    failed = 0
    for folder in map(Path, folders):
        if not (folder / "report.json").is_file():
            print(f"{folder}: no report.json (pass a folder this script wrote)")
            failed += 1
            continue
        differences = check_folder(folder)
        print(f"{folder}: {'DIFFERS' if differences else 'holds'}")
        for line in differences:
            print(f"  {line}")
        failed += bool(differences)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.check is not None:
        raise SystemExit(check_main(args.check))
    sweep = Path(args.sweep)
    references = sweep_report.parse_references(args.reference)
    rows = run_rows(sweep, args.tags, args.last)
    if not rows:
        raise SystemExit(f"{sweep} has no trial with evaluations yet")
    out = bench_utils.RESULTS_DIR / args.name
    out.mkdir(parents=True, exist_ok=True)
    summary = summary_by_config(rows, args.tags)
    sweep_md = sweep_report.markdown_table(sweep_report.build_report(sweep, references=references))
    text = markdown(rows, summary, args.tags, references, args.last) + "\n" + sweep_md
    (out / "report.md").write_text(text)
    shutil.copy(sweep / "manifest.json", out / "manifest.json")
    offline = sweep_runs.is_offline_only([Path(r["folder"]) for r in rows])
    plot(rows, args.tags, out / "curves.png", "gradient steps" if offline else "env steps")
    write_series(rows, out)
    result = {
        "rows": rows,
        "summary": summary,
        "references": args.reference,
        "last": args.last,
        "tags": args.tags,
    }
    (out / "report.json").write_text(json.dumps(result, indent=1))
    print(text)
    return result


if __name__ == "__main__":
    main()
