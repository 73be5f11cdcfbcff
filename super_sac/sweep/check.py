"""Checking a committed report: rebuild it from the evaluations archived beside it and list
every number that differs (``sweep.py check``)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from super_sac.sweep.archive import EVALUATIONS_DIR
from super_sac.sweep.report import build_report, markdown_table

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


def json_differences(committed: Any, rebuilt: Any, where: str = "") -> list[str]:
    """Every place where two JSON values differ (floats to 1e-9), named by its path from
    ``where``, keys on one side only included: the comparison of :func:`check_report`, for
    other scripts' reports."""
    out: list[str] = []
    _differences(committed, rebuilt, where, out, strict=True)
    return out


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
        if any(folder.glob("evaluations_*_seed*.csv")):  # representation_losses.py's own form
            raise FileNotFoundError(
                f"{folder} is a report of experiments/benchmarks/representation_losses.py (its "
                "runs' CSV files sit beside it, with no evaluations/ folder): check it with "
                f"`python experiments/benchmarks/representation_losses.py --check {folder}`"
            )
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
