"""The report of a sweep: per (config, env) scores over seeds (the final evaluation and the area
under the learning curve) with mean, median and IQM and 95% stratified bootstrap intervals, as a
Markdown and a JSON table, and PNG learning curves (one panel per env, one line per config)."""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import math
import os
import re
import shutil
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from super_sac.reporting import EVAL_CSV
from super_sac.sweep.grid import FINISHED, Grid, env_folder, read_manifest
from super_sac.sweep.stats import area_under_curve, iqm, stratified_bootstrap_ci
from super_sac.utils import atomic_write_json, atomic_write_text

SweepDirs = str | os.PathLike | Sequence[str | os.PathLike]  # one sweep folder or several

METRICS = {"eval_return": "return_mean", "eval_length": "length_mean"}
STATISTICS = {"mean": np.mean, "median": np.median, "iqm": iqm}


def read_curve(run_dir: str | os.PathLike, column: str = "return_mean") -> tuple[np.ndarray, ...]:
    """``(steps, values)`` of a run's ``evaluations.csv`` (empty arrays without one); ``run_dir``
    may also be an evaluations CSV file itself (an archived copy in a report's ``evaluations/``).

    The evaluations of the behavioral-cloning and offline phases all sit at the env steps the
    online phase starts from, so when a run has online evaluations only those make the curve,
    against env steps. A run without online evaluations (offline-only) is plotted against its
    gradient steps instead: each row's ``phase_step`` plus the last ``phase_step`` of the phases
    before it (behavioral cloning, then offline).
    """
    return _curve(_rows_of_run(run_dir), column)


def _rows_of_run(run_dir: str | os.PathLike) -> list[dict[str, str]]:
    """The evaluation rows of a run folder, or of an evaluations CSV file itself."""
    path = Path(run_dir)
    return read_evaluations(path) if path.is_file() else _read_rows(path)


def _read_rows(run_dir: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of a run's ``evaluations.csv`` (none without one)."""
    return read_evaluations(Path(run_dir) / EVAL_CSV)


def read_evaluations(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of an evaluations CSV file (``evaluations.csv`` or an archived copy; none when
    there is no such file), each a dict of :data:`super_sac.reporting.EVAL_CSV_COLUMNS`."""
    if not Path(path).is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _has_online(rows: list[dict[str, str]]) -> bool:
    return any(r["phase"] == "online" for r in rows)


def _curve(rows: list[dict[str, str]], column: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`read_curve` of rows already read."""
    if not rows:
        return np.zeros(0), np.zeros(0)
    if _has_online(rows):
        rows = [r for r in rows if r["phase"] == "online"]
        steps = np.array([float(r["env_steps"]) for r in rows])
    else:
        steps = _gradient_steps(rows)
    values = np.array([float(r[column]) for r in rows])
    return steps, values


def _gradient_steps(rows: list[dict[str, str]]) -> np.ndarray:
    """Cumulative gradient steps of offline-phase rows: ``phase_step`` offset by the final
    ``phase_step`` of every earlier phase."""
    offset, last_of_phase, current, out = 0.0, 0.0, None, []
    for r in rows:
        if r["phase"] != current:
            offset += last_of_phase
            current, last_of_phase = r["phase"], 0.0
        step = float(r["phase_step"])
        last_of_phase = max(last_of_phase, step)
        out.append(offset + step)
    return np.array(out)


def is_offline_only(run_dirs: list[Path]) -> bool:
    """Whether none of the runs has an online evaluation (their curves are in gradient steps)."""
    return not any(_has_online(_read_rows(run_dir)) for run_dir in run_dirs)


def _summarise(values: list[float], seed: int) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(values)}
    for name, fn in STATISTICS.items():
        point, low, high = stratified_bootstrap_ci({"runs": values}, fn, seed=seed)
        out[name] = {"value": point, "ci_low": low, "ci_high": high}
    return out


def _as_list(sweep_dirs: SweepDirs) -> list[Path]:
    """The sweep folders, each once (a folder named twice, even by another path, is read once)."""
    dirs = [sweep_dirs] if isinstance(sweep_dirs, (str, os.PathLike)) else list(sweep_dirs)
    out: dict[Path, Path] = {}
    for d in dirs:
        out.setdefault(Path(d).resolve(), Path(d))
    return list(out.values())


EVALUATIONS_DIR = "evaluations"  # the copied per-trial curves beside a report
EVALUATIONS_INDEX = "index.json"  # in EVALUATIONS_DIR: file name -> config, env, seed, source
_ARCHIVED_NAME = re.compile(r"^(?P<config>.+)_(?P<env>[^_]+)_seed(?P<seed>\d+)\.csv$")


@dataclasses.dataclass(frozen=True)
class _Run:
    """One finished run's evaluations: from a trial folder of a sweep or from an archive."""

    config: str  # the config file's stem
    env: str
    seed: int
    source: Path  # its evaluations.csv (or the archived copy)
    origin: str  # the sweep folder it ran in (carried through archives), for the index
    identity: dict[str, Any] | None  # the experiment's settings (None: an older archive)

    @functools.cached_property
    def rows(self) -> list[dict[str, str]]:
        """Its evaluations (:func:`read_evaluations`), read once."""
        return read_evaluations(self.source)

    @property
    def file_name(self) -> str:
        return f"{self.config}_{env_folder(self.env)}_seed{self.seed}.csv"


def experiment_identity(manifest: dict[str, Any], config: str) -> dict[str, Any]:
    """What makes two sweeps' configs of the same name the same experiment: the training
    script (by file name; the default is ``train_gym.py``), the config file's and its includes'
    recorded SHA-256 and the digest of their settings (comments aside,
    :func:`~super_sac.sweep.grid.settings_digests`), the gin bindings, the script's arguments
    and the step budget."""
    grid = manifest["grid"]
    return {
        "script": Path(grid.get("script") or "train_gym.py").name,
        "config_sha256": manifest.get("config_sha256", {}).get(config),
        "include_sha256": manifest.get("include_sha256", {}).get(config),
        "settings_sha256": manifest.get("settings_sha256", {}).get(config),
        "gin_bindings": list(grid.get("gin_bindings", [])),
        "script_args": list(grid.get("script_args", [])),
        "steps": grid.get("steps"),
    }


def identity_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The settings that differ. The config and include files agree when their bytes do
    (includes compared only when both manifests record them: sweeps started before includes
    were recorded have none), or else when both record the same settings digest, so configs
    that differ in comments only agree."""
    includes = a.get("include_sha256"), b.get("include_sha256")
    same_bytes = a.get("config_sha256") == b.get("config_sha256") and (
        includes[0] == includes[1] or None in includes
    )
    by_settings = (
        not same_bytes
        and a.get("settings_sha256") is not None
        and b.get("settings_sha256") is not None
    )
    skipped = {"config_sha256", "include_sha256"} if by_settings else {"settings_sha256"}
    return [
        f"{k}: {a.get(k)!r} against {b.get(k)!r}"
        for k in dict.fromkeys([*a, *b])
        if k not in skipped
        and a.get(k) != b.get(k)
        and not (k == "include_sha256" and None in (a.get(k), b.get(k)))
    ]


def index_evaluations(
    folder: str | os.PathLike, manifests: Sequence[str | os.PathLike]
) -> dict[str, Any]:
    """Write the ``index.json`` of an evaluations folder copied before indexes existed, from the
    manifests of the sweeps its runs came from (e.g. the ``manifest_*.json`` committed beside a
    report): each file's config, env and seed from its name, its settings
    (:func:`experiment_identity`) from the one manifest whose grid has that config and env.

    :raises ValueError: when the folder already has an index, or a file's config and env are in
        no manifest or in several.
    :return: the index written.
    """
    folder = _archive_folder(folder)
    if (folder / EVALUATIONS_INDEX).exists():
        raise ValueError(f"{folder / EVALUATIONS_INDEX} exists already")
    loaded = [(Path(m), json.loads(Path(m).read_text())) for m in manifests]
    index = {}
    for run in archived_runs(folder):
        owners = [
            (path, manifest, config)
            for path, manifest in loaded
            for config in manifest["grid"]["configs"]
            if Path(config).stem == run.config
            and run.env in manifest["grid"]["envs"]
            and run.seed in manifest["grid"]["seeds"]
        ]
        if len(owners) != 1:
            raise ValueError(
                f"{run.source.name}: {run.config} on {run.env} is in "
                f"{len(owners)} of the manifests ({', '.join(map(str, manifests))}); pass the "
                "one manifest of the sweep it ran in"
            )
        path, manifest, config = owners[0]
        index[run.source.name] = {
            "config": run.config,
            "env": run.env,
            "seed": run.seed,
            "from": f"the sweep of {path.name} (indexed afterwards)",
            "identity": experiment_identity(manifest, config),
        }
    atomic_write_json(folder / EVALUATIONS_INDEX, {"files": index})
    return index


def recover_evaluations(out: str | os.PathLike) -> None:
    """Finish an interrupted :func:`copy_evaluations` in ``out``: when the process died between
    moving the old folder aside and moving the new one in, the old one is moved back (the
    partial new one is removed by the next copy)."""
    folder, old = Path(out) / EVALUATIONS_DIR, Path(out) / f"{EVALUATIONS_DIR}.old"
    if old.is_dir() and not folder.exists():
        old.rename(folder)


def _archive_folder(archive: str | os.PathLike) -> Path:
    """The folder of archived evaluations: ``archive/evaluations``, or ``archive`` itself when it
    is such a folder (named ``evaluations`` or holding an ``index.json``)."""
    archive = Path(archive)
    recover_evaluations(archive.parent if archive.name == EVALUATIONS_DIR else archive)
    if (archive / EVALUATIONS_DIR).is_dir():
        return archive / EVALUATIONS_DIR
    if archive.is_dir() and (
        archive.name == EVALUATIONS_DIR or (archive / EVALUATIONS_INDEX).is_file()
    ):
        return archive
    raise FileNotFoundError(
        f"archive {archive} has no {EVALUATIONS_DIR}/ folder: pass a report folder written with "
        "--evaluations (or its evaluations/ folder)"
    )


def archived_runs(archive: str | os.PathLike) -> list[_Run]:
    """The runs of a report's copied evaluations (:func:`copy_evaluations`), e.g. the seeds of
    a sweep whose folder is gone. Config, env, seed, origin and the experiment's settings come
    from the folder's ``index.json``; in folders copied before it was written, config, env and
    seed come from ``<config>_<env>_seed<k>.csv`` (the env being the part between the last
    ``_`` but one and ``_seed``) and the settings are unknown.

    :raises FileNotFoundError: when ``archive`` holds no evaluations folder.
    :raises ValueError: for a file whose name does not have that form, or an empty archive.
    """
    folder = _archive_folder(archive)
    index_path = folder / EVALUATIONS_INDEX
    index = json.loads(index_path.read_text())["files"] if index_path.is_file() else {}
    runs = []
    for path in sorted(folder.glob("*.csv")):
        entry = index.get(path.name)
        if entry is None:
            match = _ARCHIVED_NAME.match(path.name)
            if match is None:
                raise ValueError(
                    f"{path}: an archived evaluation must be named <config>_<env>_seed<k>.csv "
                    "(as `sweep.py report --evaluations` writes them); rename or remove it"
                )
            entry = {**match.groupdict(), "seed": int(match["seed"])}
        runs.append(
            _Run(
                entry["config"],
                entry["env"],
                int(entry["seed"]),
                path,
                entry.get("from", str(archive)),
                entry.get("identity"),
            )
        )
    if not runs:
        raise ValueError(f"archive {archive} holds no <config>_<env>_seed<k>.csv files")
    return runs


def _same_experiment(
    a: tuple[dict[str, Any], str, str], b: tuple[dict[str, Any], str, str]
) -> bool:
    """Whether two recorded settings (settings, where, origin) are one experiment: no
    :func:`identity_differences`, and a config file without a recorded SHA-256 only within the
    sweep it ran in."""
    unknown_file = None in (a[0]["config_sha256"], b[0]["config_sha256"]) and a[2] != b[2]
    return not unknown_file and not identity_differences(a[0], b[0])


def _check_identities(
    stem: str, seen: list[tuple[dict[str, Any], str, str]], env: str | None = None
) -> None:
    """Hold ``stem``'s runs to one experiment: its recorded settings must be linked by
    :func:`_same_experiment`, directly or through each other (an older record with the config's
    bytes only and a newer one whose comments changed are linked by a third with both), in any
    order.

    :raises ValueError: naming the first two records that nothing links, and what differs.
    """
    group = [seen[0]]
    rest = seen[1:]
    grown = True
    while rest and grown:
        joined = [r for r in rest if any(_same_experiment(r, g) for g in group)]
        grown = bool(joined)
        group += joined
        rest = [r for r in rest if r not in joined]
    if not rest:
        return
    (known, known_where, _), (identity, where, _) = seen[0], rest[0]
    diffs = identity_differences(known, identity)
    fix = "give the other experiment's gin file another name"
    if diffs and all(d.startswith("script_args") for d in diffs):
        fix = (
            "if only a path differs (a dataset moved), run the new sweep with the same "
            "script arguments; otherwise " + fix
        )
    raise ValueError(
        f"config {stem!r}{'' if env is None else f' on {env}'} is in both {known_where} and "
        f"{where} with other settings ("
        + ("; ".join(diffs) or "no recorded SHA-256 of the config file")
        + "): a report can pool the seeds of one experiment only (same script, config "
        f"and include settings, gin bindings, script arguments and step budget); {fix}"
    )


def _gather(sweep_dirs: SweepDirs, archives: Sequence[str | os.PathLike] = ()) -> dict[str, Any]:
    """The finished runs of the sweeps and archives (each (config, env, seed) once), the config
    and env order, each sweep's step budget, the unfinished trials and warnings.

    :raises ValueError: for two sweeps, or a sweep and an archived run, that hold a config of the
        same name with other settings (:func:`experiment_identity`), or a run found twice with
        different evaluations.
    """
    configs: list[str] = []
    envs: list[str] = []
    # (config, env) -> the distinct settings its runs carry: (settings, where from, the sweep
    # it ran in); one config may run with other settings (a step budget) on another env
    identities: dict[tuple[str, str], list[tuple[dict[str, Any], str, str]]] = {}
    budgets: dict[str, int | None] = {}
    sweep_envs: dict[str, list[str]] = {}
    conflicts: list[str] = []  # runs found twice with different evaluations
    missing: list[str] = []
    warnings: list[str] = []
    runs: dict[tuple[str, str, int], _Run] = {}

    def note_identity(
        stem: str, env: str, identity: dict[str, Any] | None, where: str, origin: str
    ) -> None:
        """Keep ``stem``'s settings on ``env`` as recorded ``where`` (checked in
        :func:`_check_identities`)."""
        if identity is None:
            return
        seen = identities.setdefault((stem, env), [])
        if not any(known == identity and o == origin for known, _, o in seen):
            seen.append((identity, where, origin))

    def add(run: _Run) -> None:
        key = (run.config, run.env, run.seed)
        if key in runs:
            if runs[key].source.read_bytes() == run.source.read_bytes():
                return  # the same evaluations twice (e.g. a run already copied to the archive)
            # reported after the settings are compared: other settings are the likelier cause
            conflicts.append(
                f"{run.config} on {run.env} with seed {run.seed} has different evaluations in "
                f"{runs[key].source} and {run.source}: remove the wrong one of the two files"
            )
            return
        runs[key] = run
        if run.config not in configs:
            configs.append(run.config)
        if run.env not in envs:
            envs.append(run.env)

    for sweep_dir in _as_list(sweep_dirs):
        manifest = read_manifest(sweep_dir)
        grid = Grid.from_json(manifest["grid"])
        budgets[str(sweep_dir)] = grid.steps
        sweep_envs[str(sweep_dir)] = list(grid.envs)
        sweep_identity = {}
        for config in grid.configs:
            stem = Path(config).stem
            sweep_identity[stem] = experiment_identity(manifest, config)
            for env in grid.envs:
                note_identity(stem, env, sweep_identity[stem], str(sweep_dir), str(sweep_dir))
            if stem not in configs:
                configs.append(stem)
        envs += [env for env in grid.envs if env not in envs]
        for trial in grid.trials(sweep_dir):
            stem = Path(trial.config).stem
            source = Path(trial.folder) / EVAL_CSV
            run = _Run(stem, trial.env, trial.seed, source, str(sweep_dir), sweep_identity[stem])
            if trial.state() != FINISHED or not run.rows:
                missing.append((stem, trial.env, trial.seed, trial.key))
                continue
            add(run)
    for archive in archives:
        unknown = set()
        for run in archived_runs(archive):
            where = f"{archive} (from {run.origin})"
            note_identity(run.config, run.env, run.identity, where, run.origin)
            if run.identity is None:
                unknown.add(run.config)
            add(run)
        if unknown:
            warnings.append(
                f"{archive} records no settings for {', '.join(sorted(unknown))} (an archive "
                "copied before they were recorded): check that its runs used the same settings "
                "as the rows they joined"
            )
    for (stem, env), seen in identities.items():
        _check_identities(stem, seen, env)
    if conflicts:
        raise ValueError(conflicts[0])
    ordered = sorted(runs.values(), key=lambda r: (configs.index(r.config), r.env, r.seed))
    return {
        "configs": configs,
        "envs": envs,
        "runs": ordered,
        "budgets": budgets,
        "sweep_envs": sweep_envs,
        # trials of a sweep that did not finish and that no archive supplied, each once (two
        # sweeps over the same trial both list it)
        "missing": list(dict.fromkeys(key for *run, key in missing if tuple(run) not in runs)),
        "warnings": warnings,
    }


def collect(
    sweep_dirs: SweepDirs,
    metric: str = "eval_return",
    archives: Sequence[str | os.PathLike] = (),
) -> dict[str, Any]:
    """The curves and scores of every finished trial, grouped by config and env.

    :param sweep_dirs: one sweep folder, or several (e.g. ours and a peer library's, run with
        different training scripts) to report side by side; a config's name (its file's stem)
        must then belong to one sweep only, unless the sweeps ran the same script with the same
        file (more seeds of one experiment).
    :param archives: report folders written with ``--evaluations`` (or their ``evaluations/``
        folders) whose runs join as finished trials: the seeds of a sweep folder that is gone.
        A run both in a sweep and an archive must have the same evaluations.
    :raises ValueError: when two sweeps hold different configs of the same name, or a run
        appears twice with different evaluations.
    """
    column = METRICS.get(metric, metric)
    gathered = _gather(sweep_dirs, archives)
    curves: dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    seeds: dict[tuple[str, str], list[int]] = defaultdict(list)  # parallel to curves
    online = False  # whether any trial has an online evaluation
    for run in gathered["runs"]:
        rows = run.rows
        if rows and column not in rows[0]:
            numeric = [k for k in rows[0] if k.endswith(("_mean", "_std", "_min", "_max"))]
            raise ValueError(
                f"metric {metric!r}: the evaluations have no column {column!r}. Fix: give "
                f"--metric one of {sorted(METRICS)} or a column of evaluations.csv, e.g. "
                f"{', '.join(numeric[:6])}"
            )
        online = online or _has_online(rows)
        curves[(run.config, run.env)].append(_curve(rows, column))
        seeds[(run.config, run.env)].append(run.seed)
    return {
        "configs": gathered["configs"],
        "envs": gathered["envs"],
        "curves": curves,
        "seeds": seeds,
        "budgets": gathered["budgets"],
        "sweep_envs": gathered["sweep_envs"],
        "missing": gathered["missing"],
        "warnings": gathered["warnings"],
        "column": column,
        "offline_only": not online,
    }


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


SCORES = ("final", "last", "auc")


def run_scores(steps: np.ndarray, values: np.ndarray, last: int) -> dict[str, float]:
    """One run's scores: its final evaluation, the mean of its last ``last`` evaluations and
    the area under its curve (:func:`area_under_curve`)."""
    return {
        "final": float(values[-1]),
        "last": float(np.mean(values[-last:])),
        "auc": area_under_curve(steps, values),
    }


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


def paired_entry(diffs: dict[int, float], seed: int = 0) -> dict[str, Any]:
    """Seed-matched differences ``{seed: difference}``: their mean with a 95% bootstrap interval
    over the seeds (``seed`` seeds the resampling), and how many seeds are above and below zero.

    :return: ``n``, ``per_seed`` (keys as strings, for JSON), ``mean`` (``value``, ``ci_low``,
        ``ci_high``), ``higher`` and ``lower`` (the counts).
    """
    pooled = pooled_paired_entry([diffs], seed)
    per_seed = {str(k): v for k, v in diffs.items()}
    return {
        "n": pooled["n"],
        "per_seed": per_seed,
        "mean": pooled["mean"],
        "higher": pooled["higher"],
        "lower": pooled["lower"],
    }


def pooled_paired_entry(strata: list[dict[int, float]], seed: int = 0) -> dict[str, Any]:
    """Seed-matched differences from several groups of runs (e.g. the same pair of configs on
    several machines), pooled: the mean over every difference with a stratified 95% bootstrap
    interval (each group's seeds resampled within it, :func:`stratified_bootstrap_ci`), and how
    many are above and below zero. One group gives :func:`paired_entry`'s numbers.

    :return: ``n``, ``mean`` (``value``, ``ci_low``, ``ci_high``), ``higher``, ``lower``.
    """
    values = [list(d.values()) for d in strata]
    point, low, high = stratified_bootstrap_ci(values, np.mean, seed=seed)
    flat = [v for group in values for v in group]
    return {
        "n": len(flat),
        "mean": {"value": point, "ci_low": low, "ci_high": high},
        "higher": sum(v > 0 for v in flat),
        "lower": sum(v < 0 for v in flat),
    }


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


# report.json's parts that a report's own evaluations determine (the sweeps it was made from,
# their step budgets and unfinished trials are not in the copied evaluations)
_CHECKED_PARTS = ("rows", "normalised_aggregate", "paired")


def _same_number(a: Any, b: Any) -> bool:
    if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return False
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))


def _differences(committed: Any, rebuilt: Any, where: str, out: list[str], strict: bool) -> None:
    """Append to ``out`` every place where the committed JSON value differs from the rebuilt one
    (floats to 1e-9). With ``strict``, a key only the rebuilt one has is a difference too (a
    field dropped from the committed report); without, it is a field added to reports since."""
    if isinstance(committed, dict) and isinstance(rebuilt, dict):
        for key in committed:
            if key not in rebuilt:
                out.append(f"{where}.{key}: only in the committed report")
            else:
                _differences(committed[key], rebuilt[key], f"{where}.{key}", out, strict)
        if strict:
            out += [
                f"{where}.{key}: missing from the committed report"
                for key in rebuilt
                if key not in committed
            ]
    elif isinstance(committed, list) and isinstance(rebuilt, list):
        if len(committed) != len(rebuilt):
            out.append(f"{where}: {len(committed)} entries committed, {len(rebuilt)} rebuilt")
            return
        for i, (a, b) in enumerate(zip(committed, rebuilt)):
            _differences(a, b, f"{where}[{i}]", out, strict)
    elif isinstance(committed, float) or isinstance(rebuilt, float):
        if not _same_number(committed, rebuilt):
            out.append(f"{where}: {committed!r} committed, {rebuilt!r} rebuilt")
    elif committed != rebuilt:
        out.append(f"{where}: {committed!r} committed, {rebuilt!r} rebuilt")


def _entry_name(entry: dict[str, Any]) -> str:
    """A row's, aggregate's or paired entry's name in the check's messages."""
    return f"{entry['config']} on {entry['env']}" if "env" in entry else entry["config"]


def _compare_entries(
    name: str,
    committed: list[dict[str, Any]],
    rebuilt: list[dict[str, Any]],
    out: list[str],
    strict: bool,
) -> None:
    """Compare the entries of one part of the report by their config (and env): an entry on one
    side only is named; the others are compared field by field."""
    mine = {_entry_name(e): e for e in committed}
    theirs = {_entry_name(e): e for e in rebuilt}
    for key in mine.keys() - theirs.keys():
        out.append(f"{name}[{key}]: in the committed report, not in its evaluations")
    for key in theirs.keys() - mine.keys():
        out.append(f"{name}[{key}]: in the evaluations, missing from the committed report")
    for key in sorted(mine.keys() & theirs.keys()):
        _differences(mine[key], theirs[key], f"{name}[{key}]", out, strict)


def check_report(folder: str | os.PathLike, seed: int = 0) -> list[str]:
    """Check that a committed report is what its own data says: rebuild it from the
    evaluations copied beside it (``--evaluations``) with the settings its ``report.json``
    records (metric, last-k, threshold, references, the paired base), and compare every
    number of the rows, the normalised aggregate and the paired differences with the committed
    ones, naming entries and fields on one side only; check too that ``report.md`` is the
    rendering of ``report.json`` and that the learning curves (``curves.png``) are there (their
    pixels are not compared).

    Not checked: the settings themselves (the rebuild takes them from ``report.json``, so a
    section dropped together with its setting, e.g. the paired table with its base, goes
    unnoticed), the sweeps' step budgets and unfinished trials (not in the copied evaluations),
    and for a report written before last-k scores existed (no ``last_evaluations``) its
    ``report.md`` and the fields added to reports since.

    :param folder: a report folder written with ``--evaluations`` (or its ``evaluations/``).
    :param seed: the bootstrap seed the report was made with (the command line's is 0).
    :return: the differences, each naming the field and both values (empty: the report holds).
    :raises FileNotFoundError: when the folder has no ``report.json`` or no evaluations.
    """
    folder = Path(folder)
    if folder.name == EVALUATIONS_DIR:
        folder = folder.parent
    path = folder / "report.json"
    if not path.is_file():
        what = "does not exist" if not folder.exists() else "has no report.json"
        raise FileNotFoundError(f"{folder} {what}: pass a report folder written with --evaluations")
    if not (folder / EVALUATIONS_DIR).is_dir():
        raise FileNotFoundError(
            f"{folder} has no {EVALUATIONS_DIR}/ folder, so its report cannot be rebuilt: write "
            "the report with --evaluations to commit the data behind it"
        )
    committed = json.loads(path.read_text())
    current = "last_evaluations" in committed  # written since last-k scores (the current form)
    paired = committed.get("paired") or []
    references = committed.get("references", {})
    rebuilt = build_report(
        [],
        committed.get("metric", "eval_return"),
        seed=seed,
        references={env: (low, high) for env, (low, high) in references.items()},
        last=committed.get("last_evaluations", 3),
        threshold=committed.get("threshold"),
        archives=[folder],
        paired=paired[0]["base"] if paired else None,
    )
    out: list[str] = []
    for name in _CHECKED_PARTS:
        _compare_entries(
            name, committed.get(name) or [], rebuilt.get(name) or [], out, strict=current
        )
    markdown = folder / "report.md"
    if not current:
        pass  # today's renderer cannot draw the older form, nor was it drawn by it
    elif not markdown.is_file():
        out.append(f"{markdown} is missing")
    else:
        try:
            rendering = markdown_table(committed)
        except (KeyError, TypeError) as err:
            rendering = None
            out.append(f"report.json lacks a field its rendering needs ({err!r})")
        if rendering is not None and markdown.read_text() != rendering:
            out.append(f"{markdown} is not the rendering of report.json: regenerate both together")
    if not (folder / "curves.png").is_file():
        out.append(f"{folder / 'curves.png'} is missing: rerun the report without --no_plot")
    return out


def first_reach(steps: np.ndarray, values: np.ndarray, threshold: float) -> float | None:
    """The steps of the first evaluation at or above ``threshold`` (``None``: never)."""
    hits = np.flatnonzero(values >= threshold)
    return float(steps[hits[0]]) if hits.size else None


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


def _mean_band(runs: list[tuple[np.ndarray, np.ndarray]], seed: int, reps: int = 1000):
    """Mean curve and a 95% bootstrap band over runs, on the union of their steps (each run
    interpolated inside its own range)."""
    steps = np.unique(np.concatenate([s for s, _ in runs]))
    table = np.full((len(runs), steps.size), np.nan)
    for i, (s, v) in enumerate(runs):
        inside = (steps >= s[0]) & (steps <= s[-1])
        table[i, inside] = np.interp(steps[inside], s, v)
    rng = np.random.default_rng(seed)
    mean, low, high = (np.full(steps.size, np.nan) for _ in range(3))
    for j in range(steps.size):
        col = table[:, j][~np.isnan(table[:, j])]
        if col.size == 0:
            continue
        boot = col[rng.integers(0, col.size, size=(reps, col.size))].mean(axis=1)
        mean[j] = col.mean()
        low[j], high[j] = np.percentile(boot, [2.5, 97.5])
    return steps, mean, low, high


def plot_curves(
    sweep_dirs: SweepDirs,
    path: str | os.PathLike,
    metric: str = "eval_return",
    archives: Sequence[str | os.PathLike] = (),
) -> Path:
    """PNG learning curves of one sweep folder or several (and ``archives``, see
    :func:`collect`): one panel per env, per config the mean over seeds with its 95% bootstrap
    band. :return: the file written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = collect(sweep_dirs, metric, archives)
    envs = data["envs"]
    cols = min(len(envs), 3)
    rows = math.ceil(len(envs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for k, env in enumerate(envs):
        ax = axes[k // cols][k % cols]
        for stem in data["configs"]:
            runs = data["curves"].get((stem, env))
            if not runs:
                continue
            steps, mean, low, high = _mean_band(runs, seed=0)
            (line,) = ax.plot(steps, mean, label=f"{stem} ({len(runs)} seeds)")
            ax.fill_between(steps, low, high, alpha=0.25, color=line.get_color())
        ax.set_title(env)
        ax.set_xlabel("gradient steps (offline)" if data["offline_only"] else "env steps")
        ax.set_ylabel(metric)
        ax.legend(fontsize="small")
    for k in range(len(envs), rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def plot_runs(
    run_dirs: list[str | os.PathLike], path: str | os.PathLike, column: str = "return_mean"
) -> Path:
    """One panel with the ``column`` curve of each run in ``run_dirs`` (their
    ``evaluations.csv``), against env steps, or against gradient steps when no run has an
    online evaluation (:func:`read_curve`).

    :raises FileNotFoundError: for a run without evaluations.
    :raises ValueError: when online and offline-only runs are mixed (two different x-axes).
    """
    rows_of = {}
    for run_dir in run_dirs:
        run = Path(run_dir)
        rows_of[run] = _rows_of_run(run)
        if not rows_of[run]:
            raise FileNotFoundError(f"{run_dir} has no {EVAL_CSV} (or no evaluation yet)")
    online = {run: _has_online(rows) for run, rows in rows_of.items()}
    if len(set(online.values())) > 1:
        offline = [str(run) for run, has in online.items() if not has]
        raise ValueError(
            f"{', '.join(offline)} evaluated offline only (x-axis: gradient steps) while the "
            "other runs evaluated online (x-axis: env steps); plot them separately"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for run, rows in rows_of.items():
        steps, values = _curve(rows, column)
        ax.plot(steps, values, marker="." if steps.size < 30 else None, label=run.name)
    ax.set_xlabel("env steps" if all(online.values()) else "gradient steps (offline)")
    ax.set_ylabel(column)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


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


__all__ = [
    "archived_runs",
    "experiment_identity",
    "index_evaluations",
    "recover_evaluations",
    "build_report",
    "check_report",
    "copy_evaluations",
    "markdown_table",
    "paired_differences",
    "plot_curves",
    "plot_runs",
    "read_curve",
    "write_report",
]
