"""Reading a sweep's runs: each finished trial's evaluation curve, gathered by (config, env)
with the manifests' experiment identities checked to agree."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from super_sac.reporting import EVAL_CSV
from super_sac.sweep.archive import (
    SweepDirs,
    _Run,
    archived_runs,
    experiment_identity,
    identity_differences,
    read_evaluations,
)
from super_sac.sweep.grid import FINISHED, Grid, read_manifest

METRICS = {"eval_return": "return_mean", "eval_length": "length_mean"}


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


def _as_list(sweep_dirs: SweepDirs) -> list[Path]:
    """The sweep folders, each once (a folder named twice, even by another path, is read once)."""
    dirs = [sweep_dirs] if isinstance(sweep_dirs, (str, os.PathLike)) else list(sweep_dirs)
    out: dict[Path, Path] = {}
    for d in dirs:
        out.setdefault(Path(d).resolve(), Path(d))
    return list(out.values())


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
