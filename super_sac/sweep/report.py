"""The report of a sweep: per (config, env) scores over seeds (the final evaluation and the area
under the learning curve) with mean, median and IQM and 95% stratified bootstrap intervals, as a
Markdown and a JSON table, and PNG learning curves (one panel per env, one line per config)."""

from __future__ import annotations

import json
import os
import shutil
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from warnings import warn

import numpy as np

from super_sac.sweep.archive import (
    EVALUATIONS_DIR,
    EVALUATIONS_INDEX,
    SweepDirs,
    _Run,
    archived_runs,
    experiment_identity,
    identity_differences,
    index_evaluations,
    read_evaluations,
    recover_evaluations,
)
from super_sac.sweep.grid import read_manifest
from super_sac.sweep.plots import plot_curves, plot_runs
from super_sac.sweep.runs import METRICS, _as_list, _gather, collect, is_offline_only, read_curve
from super_sac.sweep.stats import (
    SCORES,
    first_reach,
    iqm,
    paired_entry,
    pooled_paired_entry,
    run_scores,
    stratified_bootstrap_ci,
)
from super_sac.utils import atomic_write_json, atomic_write_text, json_list

STATISTICS = {"mean": np.mean, "median": np.median, "iqm": iqm}


def _summarise(values: list[float], seed: int) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(values)}
    for name, fn in STATISTICS.items():
        point, low, high = stratified_bootstrap_ci({"runs": values}, fn, seed=seed)
        out[name] = {"value": point, "ci_low": low, "ci_high": high}
    return out


def _budgets_differ_on_an_env(data: dict[str, Any]) -> bool:
    """Whether two sweeps with different step budgets ran a common env (sweeps of disjoint envs
    may run different budgets: their rows are never compared)."""
    per_env: dict[str, set[int]] = defaultdict(set)
    for sweep, budget in data["budgets"].items():
        for env in data["sweep_envs"][sweep]:
            if budget is not None:
                per_env[env].add(budget)
    return any(len(b) > 1 for b in per_env.values())


def parse_references(items: list[str]) -> dict[str, tuple[float, float]]:
    """``ENV=LOW:HIGH`` items (e.g. a random and an expert score) as ``{env: (low, high)}``."""
    out = {}
    for item in items:
        env, _, span = item.rpartition("=")
        low, _, high = span.partition(":")
        try:
            out[env] = (float(low), float(high))
        except ValueError:
            raise ValueError(f"reference {item!r}: write ENV=LOW:HIGH") from None
        if not env or out[env][0] == out[env][1]:
            raise ValueError(f"reference {item!r}: needs an env and LOW != HIGH")
    return out


def _normalised_aggregate(
    data: dict[str, Any],
    references: dict[str, tuple[float, float]],
    seed: int,
    last: int,
    notes: list[str],
) -> list[dict[str, Any]]:
    """Per config, the scores normalised by ``references`` and pooled over its envs, with
    stratified bootstrap intervals; a config whose envs ran different numbers of seeds adds a
    warning to ``notes`` (the report's warnings)."""
    out = []
    for stem in data["configs"]:
        strata: dict[str, dict[str, list[float]]] = {score: {} for score in SCORES}
        for env, (low, high) in references.items():
            runs = data["curves"].get((stem, env))
            if not runs:
                continue
            per_run = [run_scores(s, v, last) for s, v in runs]
            for score in SCORES:
                strata[score][env] = [(r[score] - low) / (high - low) for r in per_run]
        if not strata["final"]:
            continue
        counts = {env: len(v) for env, v in strata["final"].items()}
        if len(set(counts.values())) > 1:
            notes.append(
                f"the normalised aggregate of {stem} pools envs with different numbers of seeds "
                f"({counts}): an env with more seeds weighs more; run the same seeds on every "
                "env for an aggregate that weighs them equally"
            )
        entry: dict[str, Any] = {"config": stem, "envs": sorted(strata["final"])}
        for score, by_env in strata.items():
            entry[score] = {}
            for name, fn in STATISTICS.items():
                point, low, high = stratified_bootstrap_ci(by_env, fn, seed=seed)
                entry[score][name] = {"value": point, "ci_low": low, "ci_high": high}
        out.append(entry)
    return out


def paired_differences(
    data: dict[str, Any],
    base: str,
    seed: int = 0,
    last: int = 3,
    threshold: float | None = None,
) -> list[dict[str, Any]]:
    """Every other config against ``base``, env by env, matched by seed: per seed the
    difference ``score(config) - score(base)`` of the final evaluation, the mean of the last
    ``last`` evaluations and the area under the curve, then the mean difference with a 95%
    bootstrap interval over those seeds (a paired comparison: seed-to-seed variation that both
    share, such as an easy or hard seed, cancels, so it can separate configs whose unpaired
    intervals in :func:`build_report` overlap). With ``threshold``, also the difference in steps
    (of the curves: env steps, or gradient steps offline) to the first evaluation at or above
    it, over the seeds where both got there (negative: ``config`` got there sooner; ``None``
    where no seed did). A config with no seed in common with ``base`` gets no entry.

    :param data: :func:`collect`'s output.
    :param base: the config (its file's stem) to subtract.
    :raises ValueError: when no run has the config ``base``.
    """
    if not any(config == base for config, _ in data["curves"]):
        finished = list(dict.fromkeys(config for config, _ in data["curves"]))
        grid = "" if base not in data["configs"] else f" ({base!r} is in the grid, unfinished)"
        raise ValueError(
            f"paired comparison: no finished run of config {base!r}{grid}; finished runs have "
            + (", ".join(repr(c) for c in finished) or "none")
            + " (name a config by its gin file's stem, e.g. 'sac' for sac.gin)"
        )

    def by_seed(config: str, env: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        return dict(
            zip(data["seeds"].get((config, env), []), data["curves"].get((config, env), []))
        )

    out = []
    for env in data["envs"]:
        base_runs = by_seed(base, env)
        if not base_runs:
            continue
        for config in data["configs"]:
            runs = by_seed(config, env)
            common = sorted(set(runs) & set(base_runs))
            if config == base or not common:
                continue
            scores: dict[str, dict[int, float]] = {score: {} for score in SCORES}
            firsts: dict[int, float] = {}
            left_out = 0  # seeds where only one of the two reached the threshold
            for k in common:
                (s1, v1), (s0, v0) = runs[k], base_runs[k]
                ours, theirs = run_scores(s1, v1, last), run_scores(s0, v0, last)
                for score in SCORES:
                    scores[score][k] = ours[score] - theirs[score]
                if threshold is not None:
                    t1, t0 = first_reach(s1, v1, threshold), first_reach(s0, v0, threshold)
                    if t1 is not None and t0 is not None:
                        firsts[k] = t1 - t0
                    elif (t1 is None) != (t0 is None):
                        left_out += 1
            entry: dict[str, Any] = {"config": config, "base": base, "env": env}
            entry["seeds"] = [str(k) for k in common]
            entry.update({score: paired_entry(d, seed) for score, d in scores.items()})
            if threshold is not None:
                entry["first_reach"] = paired_entry(firsts, seed) if firsts else None
                if left_out:  # (absent when none: the earlier reports' form)
                    entry["first_reach_left_out"] = left_out
            out.append(entry)
    return out


def build_report(
    sweep_dirs: SweepDirs,
    metric: str = "eval_return",
    seed: int = 0,
    references: dict[str, tuple[float, float]] | None = None,
    last: int = 3,
    threshold: float | None = None,
    archives: Sequence[str | os.PathLike] = (),
    paired: str | None = None,
) -> dict[str, Any]:
    """Per (config, env): the final score, the mean of the last ``last`` evaluations of each
    run (less noisy than one evaluation) and the area under the curve over seeds, each with
    mean, median and IQM and a 95% bootstrap interval, and every seed's final score.

    :param sweep_dirs: a sweep folder or several (see :func:`collect`).
    :param archives: earlier reports' copied evaluations that join the runs (see :func:`collect`).
    :param threshold: also give, per seed, the env steps of the first evaluation at or above
        this score (``None`` where it never got there) and how many seeds got there (e.g.
        CartPole's solved level, 475).
    :param paired: a config (its gin file's stem) to compare every other config with, seed by
        seed (:func:`paired_differences`).
    With ``references`` (``{env: (low, high)}``, e.g. random and expert scores), also per config
    an aggregate over the envs that have one: every run's score normalised to
    ``(score - low) / (high - low)``, then mean, median and IQM over all those runs, with
    intervals from a bootstrap stratified by env (runs resampled within each env)."""
    if last < 1:
        raise ValueError(f"last = {last}: the number of final evaluations must be at least 1")
    data = collect(sweep_dirs, metric, archives)
    unknown = [env for env in references or {} if env not in data["envs"]]
    if unknown:
        raise ValueError(
            f"--reference {', '.join(unknown)}: no run of that env in the report (its envs: "
            f"{', '.join(data['envs'])}). Fix: spell the env as the sweep's --envs did"
        )
    rows = []
    for config in data["configs"]:
        for env in data["envs"]:
            runs = data["curves"].get((config, env))
            if not runs:
                continue
            per_run = [run_scores(s, v, last) for s, v in runs]
            seeds = [str(k) for k in data["seeds"][(config, env)]]
            row: dict[str, Any] = {"config": config, "env": env}
            for score in SCORES:
                row[score] = _summarise([r[score] for r in per_run], seed)
            row["final_per_seed"] = dict(zip(seeds, (r["final"] for r in per_run)))
            if threshold is not None:
                first = dict(zip(seeds, (first_reach(s, v, threshold) for s, v in runs)))
                row["first_reach"] = first
                row["reached"] = sum(step is not None for step in first.values())
            rows.append(row)
    warnings = list(data["warnings"])
    shortest = min((len(v) for runs in data["curves"].values() for _, v in runs), default=last)
    if shortest < last:
        warnings.append(
            f"some runs have only {shortest} evaluations, fewer than --last {last}: their "
            "last-k mean averages all of them"
        )
    if _budgets_differ_on_an_env(data):
        warnings.append(
            "the sweeps ran different step budgets ("
            + ", ".join(f"{d}: {b}" for d, b in data["budgets"].items())
            + "): final scores, last-k means and areas under the curve are not comparable"
        )
    aggregate = _normalised_aggregate(data, references or {}, seed, last, warnings)
    return {
        "sweeps": [str(d) for d in _as_list(sweep_dirs)],
        **({"archives": [str(a) for a in archives]} if archives else {}),
        "warnings": warnings,
        "metric": metric,
        "last_evaluations": last,
        "threshold": threshold,
        "rows": rows,
        "normalised_aggregate": aggregate,
        **(
            {"paired": paired_differences(data, paired, seed, last, threshold)}
            if paired is not None
            else {}
        ),
        "references": {k: list(v) for k, v in (references or {}).items()},
        "unfinished_trials": data["missing"],
    }


def markdown_table(report: dict[str, Any]) -> str:
    def cell(s: dict[str, Any], digits: int = 1) -> str:
        return f"{s['value']:.{digits}f} [{s['ci_low']:.{digits}f}, {s['ci_high']:.{digits}f}]"

    lines = [
        f"Metric: {report['metric']}; values with 95% bootstrap intervals over seeds.",
        "",
        f"| config | env | seeds | final mean | final median | final IQM "
        f"| last-{report.get('last_evaluations', 3)} mean | AUC mean | AUC IQM |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        f, a, k = r["final"], r["auc"], r["last"]
        lines.append(
            f"| {r['config']} | {r['env']} | {f['n']} | {cell(f['mean'])} | {cell(f['median'])} "
            f"| {cell(f['iqm'])} | {cell(k['mean'])} | {cell(a['mean'])} | {cell(a['iqm'])} |"
        )
    lines += ["", "Final score per seed:", "", "| config | env | seed: final |", "|---|---|---|"]
    for r in report["rows"]:
        seeds = ", ".join(f"{s}: {v:.1f}" for s, v in r["final_per_seed"].items())
        lines.append(f"| {r['config']} | {r['env']} | {seeds} |")
    if report.get("threshold") is not None:
        lines += [
            "",
            f"First evaluation at or above {report['threshold']:g} (steps; '-': never):",
            "",
            "| config | env | seeds that got there | seed: steps |",
            "|---|---|---|---|",
        ]
        for r in report["rows"]:
            firsts = ", ".join(
                f"{s}: {'-' if v is None else f'{v:.0f}'}" for s, v in r["first_reach"].items()
            )
            lines.append(
                f"| {r['config']} | {r['env']} | {r['reached']}/{r['final']['n']} | {firsts} |"
            )
    if report.get("normalised_aggregate"):
        lines += [
            "",
            "Aggregate over envs, normalised by the reference scores ((x - low) / (high - low)):",
            "",
            f"| config | envs | final mean | final IQM | last-{report.get('last_evaluations', 3)} "
            "mean | AUC mean | AUC IQM |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in report["normalised_aggregate"]:
            f, k, a = r["final"], r["last"], r["auc"]
            lines.append(
                f"| {r['config']} | {', '.join(r['envs'])} | {cell(f['mean'], 3)} | "
                f"{cell(f['iqm'], 3)} | {cell(k['mean'], 3)} | {cell(a['mean'], 3)} | "
                f"{cell(a['iqm'], 3)} |"
            )
    if report.get("paired"):
        lines += _paired_lines(report)
    for warning in report.get("warnings", []):
        lines += ["", f"Warning: {warning}"]
    if report["unfinished_trials"]:
        lines += ["", f"Unfinished trials (left out): {', '.join(report['unfinished_trials'])}"]
    return "\n".join(lines) + "\n"


def paired_cell(entry: dict[str, Any] | None, digits: int = 1) -> str:
    """A :func:`paired_entry` as a table cell: ``+mean [low, high] (k up, m down of n)``, or
    ``-`` for ``None`` (no seed to pair)."""
    if entry is None:
        return "-"
    m = entry["mean"]
    return (
        f"{m['value']:+.{digits}f} [{m['ci_low']:.{digits}f}, {m['ci_high']:.{digits}f}] "
        f"({entry['higher']} up, {entry['lower']} down of {entry['n']})"
    )


def _paired_lines(report: dict[str, Any]) -> list[str]:
    base = report["paired"][0]["base"]
    threshold = report.get("threshold")
    head = f"| config | env | seeds | final | last-{report.get('last_evaluations', 3)} mean | AUC |"
    rule = "|---|---|---|---|---|---|"
    if threshold is not None:
        head += f" first >= {threshold:g} (steps, seeds where both got there; < 0: sooner) |"
        rule += "---|"
    lines = [
        "",
        f"Paired by seed against {base}: config minus {base} at each seed both ran, the mean "
        "difference with a 95% bootstrap interval, and at how many seeds it is above (up) and "
        "below (down) zero:",
        "",
        head,
        rule,
    ]
    for r in report["paired"]:
        line = (
            f"| {r['config']} | {r['env']} | {', '.join(r['seeds'])} | {paired_cell(r['final'])} "
            f"| {paired_cell(r['last'])} | {paired_cell(r['auc'])} |"
        )
        if threshold is not None:
            left_out = r.get("first_reach_left_out", 0)
            note = f"; {left_out} left out: only one got there" if left_out else ""
            line += f" {paired_cell(r['first_reach'], 0)}{note} |"
        lines.append(line)
    return lines


def copy_evaluations(
    sweep_dirs: SweepDirs,
    out: str | os.PathLike,
    archives: Sequence[str | os.PathLike] = (),
    replace: bool = False,
) -> list[Path]:
    """Copy every finished trial's ``evaluations.csv`` (and every archived run, see
    :func:`collect`) to ``out/evaluations/<config>_<env>_seed<k>.csv``, with an ``index.json``
    naming each file's config, env, seed, the sweep it ran in and the experiment's settings
    (:func:`experiment_identity`), so that a committed report carries the per-evaluation data
    behind its tables and curves and later reports can pool more seeds with it (``--archive``).
    The folder is written beside the old one and swapped in at the end (an interrupted swap is
    undone by :func:`recover_evaluations`), so an archive inside ``out`` is read before it is
    replaced.

    :param replace: allow dropping runs the old folder holds and this copy does not (without
        it, that is refused: pass ``out`` as an archive to keep them).
    :raises ValueError: when two runs would share a file name, or runs would be dropped.
    :return: the copied files.
    """
    out = Path(out)
    recover_evaluations(out)
    runs = _gather(sweep_dirs, archives)["runs"]
    names: dict[str, _Run] = {}
    for run in runs:
        if run.file_name in names:
            other = names[run.file_name]
            raise ValueError(
                f"{run.config} on {run.env} and {other.config} on {other.env} (seed {run.seed}) "
                f"would both be copied to {run.file_name}: rename one of the configs"
            )
        names[run.file_name] = run
    folder = out / EVALUATIONS_DIR
    if folder.is_dir() and not replace:
        present = [p for p in sorted(folder.iterdir()) if p.name != EVALUATIONS_INDEX]
        dropped = [p.name for p in present if p.name not in names]
        changed = [
            p.name
            for p in present
            if p.name in names
            and p.resolve() != names[p.name].source.resolve()
            and (not p.is_file() or p.read_bytes() != names[p.name].source.read_bytes())
        ]
        if dropped or changed:
            raise ValueError(
                f"{folder} holds "
                + "; ".join(
                    text
                    for text in (
                        dropped and f"files this report does not include ({', '.join(dropped)})",
                        changed and f"other evaluations of runs it does ({', '.join(changed)})",
                    )
                    if text
                )
                + f": pass --archive {out} to keep its runs, or --replace_evaluations to replace "
                "the folder with this report's runs"
            )
    fresh, old = out / f"{EVALUATIONS_DIR}.new", out / f"{EVALUATIONS_DIR}.old"
    if fresh.exists():
        shutil.rmtree(fresh)  # a partial copy of an interrupted call; the data is in `folder`
    if old.exists():
        shutil.rmtree(old)  # `folder` exists (recovered above), so this is a finished swap's
    fresh.mkdir(parents=True)
    index = {}
    for name, run in names.items():
        shutil.copyfile(run.source, fresh / name)
        index[name] = {
            "config": run.config,
            "env": run.env,
            "seed": run.seed,
            "from": run.origin,
            "identity": run.identity,
        }
    atomic_write_json(fresh / EVALUATIONS_INDEX, {"files": index})
    if folder.exists():
        folder.rename(old)
    fresh.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    return [folder / name for name in index]


def _processor_label(machine: dict[str, Any]) -> str:
    """The processor of a :func:`~super_sac.utils.machine_info` record (a GPU is left out: a
    sweep's manifest, written by its driver, names none, while its trials may)."""
    cpu = str(machine.get("cpu") or "unknown processor")
    if machine.get("cpu_family") is not None:
        cpu += f" (family {machine['cpu_family']}, model {machine.get('cpu_model')})"
    capability = machine.get("torch_cpu_capability")
    return f"{cpu}, {capability}" if capability else cpu


def _recorded_machines(folder: Path) -> list[dict[str, Any]]:
    """The machines a sweep folder records: its trials' (each ``hparams.json``'s first session
    and resumes), or, where no trial records one (older runs, peers' trials), its manifest's
    (the sweep driver's, at the start and at each rerun; with a Ray cluster the driver may be
    another machine than the trials', so it counts only in their absence)."""
    trials = []
    for hparams_file in folder.rglob("hparams.json"):
        try:
            hparams = json.loads(hparams_file.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(hparams, dict):
            trials += [hparams.get("machine"), *json_list(hparams, "resume_machines")]
    found = [m for m in trials if isinstance(m, dict)]
    if found:
        return found
    try:
        manifest = read_manifest(folder)
    except (OSError, ValueError):  # none (FileNotFoundError), or not JSON
        return []
    sessions = [manifest, *json_list(manifest, "reruns")]
    machines = [s.get("machine") for s in sessions if isinstance(s, dict)]
    return [m for m in machines if isinstance(m, dict)]


def processor_mix(sweep_dirs: SweepDirs) -> str | None:
    """A warning when ``sweep_dirs`` record more than one processor model
    (:func:`_recorded_machines`, :func:`~super_sac.utils.machine_info`), else ``None``. Runs
    repeat to the digit on one processor model but not across models, so the differences
    between configs run on different machines (paired ones included) mix the setting with the
    machine. Records from before machines were recorded are not counted, nor are archives."""
    where: dict[str, list[str]] = {}
    for folder in map(Path, _as_list(sweep_dirs)):
        name = folder.resolve().name
        for machine in _recorded_machines(folder):
            names = where.setdefault(_processor_label(machine), [])
            if name not in names:
                names.append(name)
    if len(where) < 2:
        return None
    listed = "; ".join(f"{label}: {', '.join(names)}" for label, names in where.items())
    return (
        f"these sweeps ran on {len(where)} processors ({listed}). Runs repeat to the digit on one "
        "processor model only, so a difference between runs of two machines mixes the setting "
        "with the machine. Fix: compare configs run on one machine (rerun the other side there)"
    )


def write_report(
    sweep_dirs: SweepDirs,
    metric: str = "eval_return",
    plot: bool = True,
    references: dict[str, tuple[float, float]] | None = None,
    out: str | os.PathLike | None = None,
    last: int = 3,
    threshold: float | None = None,
    evaluations: bool = False,
    archives: Sequence[str | os.PathLike] = (),
    replace_evaluations: bool = False,
    paired: str | None = None,
) -> dict[str, Path]:
    """Write ``report.md``, ``report.json`` and (with ``plot``) ``curves.png`` into ``out``
    (default: the sweep folder; required for several sweeps). ``references``, ``last``,
    ``threshold``, ``archives`` and ``paired`` as for :func:`build_report`; ``evaluations``
    also copies every finished trial's evaluations (:func:`copy_evaluations`, before the
    report files, so a refused copy leaves the old report; only into an ``out`` outside the
    sweeps; ``replace_evaluations`` allows it to drop runs). :return: the files by kind."""
    dirs = _as_list(sweep_dirs)
    if not dirs and not archives:
        raise ValueError("nothing to report: give a sweep folder or an archive (--archive)")
    if out is None:
        if len(dirs) != 1:
            raise ValueError(
                "a report of several sweeps, or of archives alone, needs an output folder (--out)"
            )
        out = dirs[0]
    out = Path(out)
    if evaluations and any(out.resolve() == d.resolve() for d in dirs):
        raise ValueError(
            "copying the evaluations needs an output folder outside the sweep (--out): the "
            "trials' own evaluations.csv files are already there"
        )
    if out.is_dir():
        recover_evaluations(out)
    report = build_report(
        dirs,
        metric,
        references=references,
        last=last,
        threshold=threshold,
        archives=archives,
        paired=paired,
    )
    mix = processor_mix(dirs)
    if mix is not None:
        warn(mix, stacklevel=2)
    if not any(row["final"]["n"] for row in report["rows"]):
        raise ValueError(
            "no finished trial to report yet. Fix: run the sweep until some trials finish (a "
            "failed trial's reason is in its <config>/<env>/seed_<k>/sweep.log)"
        )
    out.mkdir(parents=True, exist_ok=True)  # after the checks: a refused report leaves nothing
    files = {"markdown": out / "report.md", "json": out / "report.json"}
    if evaluations:
        copy_evaluations(dirs, out, archives, replace=replace_evaluations)
        files["evaluations"] = out / EVALUATIONS_DIR
    atomic_write_text(files["markdown"], markdown_table(report))
    atomic_write_json(files["json"], report)
    if plot:
        files["png"] = plot_curves(dirs, out / "curves.png", metric, archives)
    return files


__all__ = [  # with the names that lived here before the module was split, for old imports
    "METRICS",
    "archived_runs",
    "build_report",
    "collect",
    "copy_evaluations",
    "experiment_identity",
    "first_reach",
    "identity_differences",
    "index_evaluations",
    "is_offline_only",
    "markdown_table",
    "paired_differences",
    "paired_entry",
    "plot_curves",
    "processor_mix",
    "plot_runs",
    "pooled_paired_entry",
    "read_curve",
    "read_evaluations",
    "recover_evaluations",
    "run_scores",
    "write_report",
]


def __getattr__(name: str) -> Any:
    """``check_report`` moved to :mod:`super_sac.sweep.check` (which imports this module, so it
    cannot be imported here at load time); old imports of it from here still work."""
    if name == "check_report":
        from super_sac.sweep.check import check_report

        return check_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
