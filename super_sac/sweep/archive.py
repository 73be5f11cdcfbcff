"""Evaluations archived beside a report (its ``evaluations/`` folder and index), so that a report
can be rebuilt, checked and extended without the sweep folders it came from."""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from super_sac.sweep.grid import env_folder
from super_sac.utils import atomic_write_json

SweepDirs = str | os.PathLike | Sequence[str | os.PathLike]  # one sweep folder or several


EVALUATIONS_DIR = "evaluations"  # the copied per-trial curves beside a report
EVALUATIONS_INDEX = "index.json"  # in EVALUATIONS_DIR: file name -> config, env, seed, source
_ARCHIVED_NAME = re.compile(r"^(?P<config>.+)_(?P<env>[^_]+)_seed(?P<seed>\d+)\.csv$")


def read_evaluations(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of an evaluations CSV file (``evaluations.csv`` or an archived copy; none when
    there is no such file), each a dict of :data:`super_sac.reporting.EVAL_CSV_COLUMNS`."""
    if not Path(path).is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


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
