"""The grid of a sweep: configs x envs x seeds expanded into trials, one run directory each at
``<root>/<name>/<config stem>/<env>/seed_<k>``, the state of every trial (finished, interrupted,
fresh) and the sweep's ``manifest.json`` (the grid, the code version, the package versions), which
refuses a rerun of a different grid in the same folder."""

from __future__ import annotations

import ast
import dataclasses
import datetime
import hashlib
import io
import json
import os
import platform
import re
import subprocess
import tokenize
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from super_sac.checkpoint import list_checkpoints
from super_sac.utils import atomic_write_json, machine_info, sha256_file

MANIFEST = "manifest.json"
SUMMARY = "summary.json"
FINISHED, INTERRUPTED, FRESH = "finished", "interrupted", "fresh"
PACKAGES = ("super_sac", "torch", "numpy", "gymnasium", "gin-config", "mujoco", "ray")


class GridMismatchError(ValueError):
    """The sweep folder already holds a manifest of a different grid."""


def parse_seeds(text: str | int | Iterable[int]) -> list[int]:
    """Seeds from ``"0-4"`` (inclusive range), ``"0,2,5"``, a mix (``"0-2,7"``), one integer or a
    list of integers. :raises ValueError: for malformed, negative, empty or repeated seeds."""
    if isinstance(text, int):
        seeds = [text]
    elif not isinstance(text, str):
        seeds = [int(s) for s in text]
    else:
        seeds = []
        for part in text.replace(" ", "").split(","):
            if not part:
                raise ValueError(f"seeds {text!r}: empty item (write e.g. '0-4' or '0,2,5')")
            lo, dash, hi = part.partition("-")
            try:
                if dash:
                    first, last = int(lo), int(hi)
                    if last < first:
                        raise ValueError
                    seeds += range(first, last + 1)
                else:
                    seeds.append(int(part))
            except ValueError:
                raise ValueError(
                    f"seeds {text!r}: cannot read {part!r} (write e.g. '0-4' or '0,2,5'; ranges "
                    "are inclusive and go upwards)"
                ) from None
    if not seeds:
        raise ValueError("no seeds given")
    if any(s < 0 for s in seeds):
        raise ValueError(f"seeds must be non-negative, got {seeds}")
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise ValueError(f"seeds {text!r} repeat {repeated}")
    return seeds


def env_folder(env: str) -> str:
    """The folder name of an env id (``ALE/Pong-v5`` -> ``ALE_Pong-v5``)."""
    return env.replace("/", "_").replace(os.sep, "_")


@dataclasses.dataclass(frozen=True)
class Trial:
    """One run of the grid: a config file, an env id and a seed, in its own run directory."""

    config: str
    env: str
    seed: int
    folder: Path

    @property
    def key(self) -> str:
        """``<config stem>/<env>/seed_<k>``, the trial's folder relative to the sweep."""
        return f"{Path(self.config).stem}/{env_folder(self.env)}/seed_{self.seed}"

    def state(self) -> str:
        """``finished`` (``summary.json`` written), ``interrupted`` (a checkpoint but no summary:
        resume it with ``--resume <folder>``) or ``fresh`` (nothing to continue from; the folder
        may hold the files of a run that died before its first checkpoint)."""
        return trial_state(self.folder)


def trial_state(folder: str | os.PathLike) -> str:
    """:data:`FINISHED`, :data:`INTERRUPTED` or :data:`FRESH` (see :meth:`Trial.state`)."""
    folder = Path(folder)
    if (folder / SUMMARY).is_file():
        return FINISHED
    if list_checkpoints(folder):
        return INTERRUPTED
    return FRESH


# the options the sweep gives every trial itself, and the sweep option that sets each
_SWEEP_SET = {
    "--config": "--configs",
    "--env": "--envs",
    "--game": "--envs",
    "--domain": "--envs",
    "--task": "--envs",
    "--seed": "--seeds",
    "--steps": "--steps",
    "--run_dir": "--root and --name (each trial runs in its own folder)",
    "--resume": "sweep.py run again (it resumes interrupted trials)",
    "--threads": "--cpus_per_trial",
}


def check_script_args(script_args: Sequence[str]) -> None:
    """Refuse script options that the sweep sets for each trial: the script would take whichever
    comes last, so every trial would share one seed, folder or task. Checked when a sweep is
    created (an existing manifest stays readable and its sweep can be finished).

    An abbreviation of one of them (``--see 3``, which argparse reads as ``--seed 3``) is
    refused the same way.

    :raises ValueError: naming the option and the sweep option to use instead.
    """
    for arg in script_args:
        flag = arg.split("=", 1)[0]
        if not flag.startswith("--"):
            continue
        for option, fix in _SWEEP_SET.items():
            if option.startswith(flag) and len(flag) > 2:
                spelled = flag if flag == option else f"{flag} (argparse reads it as {option})"
                raise ValueError(
                    f"script_args {arg!r}: the sweep sets {option} for each trial, and "
                    f"{spelled} would override it. Fix: use {fix} instead"
                )


@dataclasses.dataclass(frozen=True)
class Grid:
    """What a sweep runs: every config on every env with every seed, and the shared options."""

    configs: tuple[str, ...]
    envs: tuple[str, ...]
    seeds: tuple[int, ...]
    steps: int | None = None
    gin_bindings: tuple[str, ...] = ()
    script: str | None = None
    script_args: tuple[str, ...] = ()  # further options of the script, passed to every trial

    @classmethod
    def make(
        cls,
        configs: Sequence[str],
        envs: Sequence[str],
        seeds: str | int | Iterable[int],
        steps: int | None = None,
        gin_bindings: Sequence[str] = (),
        script: str | None = None,
        script_args: Sequence[str] = (),
    ) -> Grid:
        """Check and build a grid (``seeds`` as for :func:`parse_seeds`).

        :param script_args: options of the training script given to every trial, e.g.
            ``["--action_repeat", "8", "--fast_render"]`` (a resumed trial takes its env options
            from its run directory, so the script may ignore them there).

        :raises ValueError: for an empty list, a repeated entry, or two configs (or envs) that
            would share a folder.
        """
        if not configs or not envs:
            raise ValueError("a sweep needs at least one config and one env")
        for what, items, folder in (
            ("configs", configs, lambda c: Path(c).stem),
            ("envs", envs, env_folder),
        ):
            seen: dict[str, str] = {}
            for item in items:
                name = folder(item)
                if name in seen:
                    raise ValueError(
                        f"{what} {seen[name]!r} and {item!r} would share the folder {name!r}"
                        + (" (give the config files different names)" if what == "configs" else "")
                    )
                seen[name] = item
        return cls(
            tuple(str(c) for c in configs),
            tuple(envs),
            tuple(parse_seeds(seeds)),
            steps,
            tuple(gin_bindings),
            script,
            tuple(script_args),
        )

    def trials(self, sweep_dir: str | os.PathLike) -> list[Trial]:
        """The trials, config-major then env then seed, with their folders under ``sweep_dir``."""
        root = Path(sweep_dir)
        out = []
        for config in self.configs:
            for env in self.envs:
                for seed in self.seeds:
                    trial = Trial(config, env, seed, root)
                    out.append(dataclasses.replace(trial, folder=root / trial.key))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "configs": list(self.configs),
            "envs": list(self.envs),
            "seeds": list(self.seeds),
            "steps": self.steps,
            "gin_bindings": list(self.gin_bindings),
            "script": self.script,
            **({"script_args": list(self.script_args)} if self.script_args else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Grid:
        return cls.make(
            data["configs"],
            data["envs"],
            data["seeds"],
            data.get("steps"),
            data.get("gin_bindings", ()),
            data.get("script"),
            data.get("script_args", ()),
        )


# ------------------------------------------------------------------------------ manifest
def code_version(
    where: str | os.PathLike | None = None, files: Sequence[str | os.PathLike] = ()
) -> dict[str, Any]:
    """The git commit of the library's checkout (``None`` outside a git checkout or without
    git), whether it had uncommitted changes to tracked files, and, of ``files`` (e.g. a sweep's
    script, config files and their includes), which the commit does not hold (``not_in_commit``:
    untracked, only staged, or outside the repository, e.g. in another repository) and which
    differ from it (``changed_since_commit``), so that the commit alone does not pin them."""
    where = Path(where) if where is not None else Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "-C", str(where), *args], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    out: dict[str, Any] = {"git_commit": commit, "git_dirty": bool(status) if commit else None}
    top = git("rev-parse", "--show-toplevel") if commit else None
    committed = git("ls-tree", "-r", "--full-tree", "--name-only", "-z", "HEAD") if top else None
    if top is None or committed is None or not files:
        return out
    held = set(committed.split("\0"))
    changed = set((git("diff", "--name-only", "-z", "HEAD") or "").split("\0"))
    root = Path(top).resolve()
    relative: dict[str, str | None] = {}
    for f in files:
        try:
            relative[str(f)] = Path(f).resolve().relative_to(root).as_posix()
        except ValueError:  # outside the repository
            relative[str(f)] = None
    out["not_in_commit"] = [f for f, rel in relative.items() if rel not in held]
    out["changed_since_commit"] = [f for f, rel in relative.items() if rel in held & changed]
    return out


def grid_files(grid: Grid, script: str | os.PathLike | None = None) -> list[Path]:
    """The files a sweep's trials read besides the library: the training script, every config
    file and every file they include (those that exist), each once."""
    script = script if script is not None else grid.script
    found: list[Path] = [Path(script).resolve()] if script is not None else []
    for config in grid.configs:
        path = resolve_config(config, script)
        if path is not None:
            found += [path, *(t for t in included_files(path, script).values() if t)]
    return list(dict.fromkeys(found))


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """Installed versions of ``names`` (``None`` where one is not installed), and Python's."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def grid_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable differences between two grids (``Grid.to_json`` form)."""
    diffs = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, list) and isinstance(b, list):
            gone = [x for x in a if x not in b]
            added = [x for x in b if x not in a]
            parts = [f"removed {gone}" if gone else "", f"added {added}" if added else ""]
            detail = "; ".join(p for p in parts if p) or f"reordered: was {a}, now {b}"
            diffs.append(f"{key}: {detail}")
        else:
            diffs.append(f"{key}: was {a!r}, now {b!r}")
    return diffs


def resolve_config(config: str, script: str | os.PathLike | None = None) -> Path | None:
    """Where the training script will find ``config``: the path itself when it names a file,
    else the file of that name next to ``script`` (how the scripts look up a bare name); ``None``
    when neither exists (the script then reports the missing file)."""
    candidates = [Path(config)]
    if script is not None:
        candidates.append(Path(script).resolve().parent / config)
    return next((c.resolve() for c in candidates if c.is_file()), None)


def config_digests(grid: Grid, script: str | os.PathLike | None = None) -> dict[str, str | None]:
    """The sha256 of every config file of ``grid`` (``None`` where it cannot be found), so a
    sweep records exactly what its trials ran. Files pulled in by a gin ``include`` are in
    :func:`included_digests`."""
    out: dict[str, str | None] = {}
    for config in grid.configs:
        path = resolve_config(config, script if script is not None else grid.script)
        out[config] = sha256_file(path) if path else None
    return out


def _include_name(line: str) -> str | None:
    """The file name of a gin ``include`` line (a Python string literal, then an optional
    comment), or None for any other line."""
    match = re.match(r"\s*include(?=[\s'\"rRbBuU])\s*(.*)$", line)
    if match is None:
        return None
    rest = match.group(1)
    cuts = [len(rest)] + [k for k in range(len(rest) - 1, -1, -1) if rest[k] == "#"]
    for cut in cuts:  # the literal may itself hold a "#": try the longest prefix first
        try:
            name = ast.literal_eval(rest[:cut].strip())
        except (SyntaxError, ValueError):
            continue
        return name if isinstance(name, str) else None
    return None


def included_files(config: Path, script: str | os.PathLike | None = None) -> dict[str, Path | None]:
    """Every file ``config`` pulls in through gin ``include`` lines, transitively, in the order
    gin reads them.

    Gin looks an include up under its search prefixes, not next to the including file; the
    training scripts put the config's folder first, then their own search folders (their
    script's folder, and ``experiments/gym`` for the offline and pixel scripts). This follows
    that order as far as a sweep can know it: the config's folder, the script's folder, the
    including file's folder (where this repository's shared bases sit), the working directory.

    :return: ``{key: resolved path or None}``; the key is the path relative to the config's
        folder (``../gym/base.gin``), or ``"<name as written> (not found)"``.
    """
    config = config.resolve()
    first = [config.parent] + ([Path(script).resolve().parent] if script is not None else [])
    found: dict[str, Path | None] = {}
    seen: set[Path] = {config}

    def visit(path: Path) -> None:
        for line in path.read_text().splitlines():
            name = _include_name(line)
            if name is None:
                continue
            folders = [*first, path.parent, Path.cwd()]
            candidates = [Path(name)] if Path(name).is_absolute() else [d / name for d in folders]
            target = next((c.resolve() for c in candidates if c.is_file()), None)
            if target is None:
                found[f"{name} (not found)"] = None
                continue
            found[os.path.relpath(target, config.parent)] = target
            if target not in seen:
                seen.add(target)
                visit(target)

    visit(config)
    return found


def included_digests(
    grid: Grid, script: str | os.PathLike | None = None
) -> dict[str, dict[str, str | None]]:
    """``{config: {included file: sha256 or None}}`` over :func:`included_files` of every
    config file of ``grid``, so a change to an included base file is caught too."""
    script = script if script is not None else grid.script
    out: dict[str, dict[str, str | None]] = {}
    for config in grid.configs:
        path = resolve_config(config, script)
        if path is None:
            continue
        out[config] = {
            name: sha256_file(target) if target else None
            for name, target in included_files(path, script).items()
        }
    return out


# tokens that carry no setting: comments, line breaks inside brackets or of blank lines
_LAYOUT_TOKENS = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.ENDMARKER})
# tokens whose kind matters but not their text: the end of a binding (the file's last may be
# "" or "\n") and a change of indentation (which ends or opens a gin binding block, whatever the
# width)
_MARKER_TOKENS = frozenset({tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT})


def gin_settings_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a gin file's settings: its tokens (gin reads Python's), by kind name and
    text, without comments or blank lines; indentation counts as a change of level, not a width.
    An edited comment or re-wrapped bracket leaves it unchanged; any changed name, value, string,
    include, macro or block changes it. A file Python's tokenizer cannot read is identified by
    its bytes (:func:`~super_sac.utils.sha256_file`)."""
    text = Path(path).read_text()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return sha256_file(path)
    if any(tok.type == tokenize.ERRORTOKEN for tok in tokens):  # older Pythons do not raise
        return sha256_file(path)
    kept = [
        # kinds by name: their numbers differ between Python versions
        f"{tokenize.tok_name[tok.type]} {tok.string if tok.type not in _MARKER_TOKENS else ''}"
        for tok in tokens
        if tok.type not in _LAYOUT_TOKENS
    ]
    return hashlib.sha256("\n".join(kept).encode()).hexdigest()


def settings_digests(grid: Grid, script: str | os.PathLike | None = None) -> dict[str, str | None]:
    """``{config: digest}`` of what each config of ``grid`` sets: the
    :func:`gin_settings_sha256` of the file and of every file it includes
    (:func:`included_files`, by name, in gin's reading order), so two sweeps whose configs
    differ in comments only are the same experiment (``None`` where the config is not found)."""
    script = script if script is not None else grid.script
    out: dict[str, str | None] = {}
    for config in grid.configs:
        path = resolve_config(config, script)
        if path is None:
            out[config] = None
            continue
        parts = [gin_settings_sha256(path)]
        for name, target in included_files(path, script).items():
            parts.append(f"{name}={gin_settings_sha256(target) if target else 'missing'}")
        out[config] = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    return out


def _changed_digests(
    old: dict[str, str | None], new: dict[str, str | None], what: str, digest: str
) -> list[str]:
    """A line per config whose recorded ``digest`` changed (unrecorded or unfound ones aside)."""
    return [
        f"{config}: {what} changed since the sweep started ({digest} {old[config][:12]}... "
        f"now {new[config][:12]}...)"
        for config in sorted(set(old) & set(new))
        if old[config] and new[config] and old[config] != new[config]
    ]


def _changed_includes(
    old: dict[str, dict[str, str | None]], new: dict[str, dict[str, str | None]]
) -> list[str]:
    out = []
    for config in sorted(set(old) & set(new)):
        before, after = old[config], new[config]
        for name in sorted(set(before) | set(after)):
            if before.get(name) != after.get(name):
                was = (before.get(name) or "missing")[:12]
                now = (after.get(name) or "missing")[:12]
                out.append(
                    f"{config}: its include {name} changed since the sweep started "
                    f"(sha256 {was} now {now})"
                )
    return out


def write_manifest(
    sweep_dir: str | os.PathLike, grid: Grid, script: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Create ``<sweep_dir>/manifest.json`` or check the one there.

    A new manifest records the grid, the sha256 of each config file (:func:`config_digests`), of
    every file it includes (:func:`included_digests`) and of their settings with comments left
    out (:func:`settings_digests`), the code version (:func:`code_version`, with the files of
    :func:`grid_files` that its commit does not hold), the training script's sha256, the package
    versions, the machine (:func:`~super_sac.utils.machine_info`; runs repeat to the digit on
    one processor model only) and the creation time. A rerun with the same grid and the same
    settings keeps it and appends the code version and machine of this run to ``reruns``
    (with the files' sha256 where a comment changed), so a sweep finished with changed code
    or on another machine shows it. A manifest from before settings digests holds a rerun to
    the files' bytes, and gains the digests when they match.

    :param script: the training script (bare config names are looked up next to it); default
        ``grid.script``.
    :raises GridMismatchError: when the folder holds a manifest of a different grid, or a
        config file's or an included file's settings changed (the sweep's trials would mix two
        configurations); the message lists the differences.
    :return: the manifest as written.
    """
    sweep_dir = Path(sweep_dir)
    path = sweep_dir / MANIFEST
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    machine = machine_info()
    del machine["torch_threads"]  # the driver's, not the trials' (each trial sets its own)
    current = {
        "time": now,
        "code": code_version(files=grid_files(grid, script)),
        "packages": package_versions(),
        "machine": machine,
    }
    trainer = script if script is not None else grid.script
    if trainer is not None:  # None: the script is not there (the trials will say so)
        current["script_sha256"] = sha256_file(trainer) if Path(trainer).is_file() else None
    digests = config_digests(grid, script)
    includes = included_digests(grid, script)
    settings = settings_digests(grid, script)
    if path.is_file():
        manifest = json.loads(path.read_text())
        diffs = grid_differences(manifest["grid"], grid.to_json())
        exact = digests == manifest.get("config_sha256") and includes == manifest.get(
            "include_sha256"
        )
        # comments may change between a sweep's sessions, settings may not; a manifest from
        # before settings digests holds the files to their bytes
        settings_changed = (
            []
            if exact
            else _changed_digests(
                manifest.get("settings_sha256", {}),
                settings,
                "its settings or its includes'",
                "comments aside; settings sha256",
            )
        )
        if settings_changed or (not exact and "settings_sha256" not in manifest):
            # name the files whose bytes changed (manifests from before includes were recorded
            # have no include entry)
            diffs += settings_changed
            diffs += _changed_digests(
                manifest.get("config_sha256", {}), digests, "its contents", "sha256"
            )
            diffs += _changed_includes(manifest.get("include_sha256", {}), includes)
        if diffs:
            raise GridMismatchError(
                f"{sweep_dir} holds a sweep of a different grid (see {path}):\n  "
                + "\n  ".join(diffs)
                + "\nRun the same grid with the same config files to finish that sweep, or "
                "choose another --name."
            )
        if exact and "settings_sha256" not in manifest:
            # the files are byte for byte the ones the sweep started with: record their settings
            manifest["settings_sha256"] = settings
        if not exact:  # a comment changed (or an older manifest): record the files this run read
            current.update(config_sha256=digests, include_sha256=includes)
        manifest.setdefault("reruns", []).append(current)
    else:
        sweep_dir.mkdir(parents=True, exist_ok=True)
        manifest = {
            "grid": grid.to_json(),
            "config_sha256": digests,
            "include_sha256": includes,
            "settings_sha256": settings,
            "created": now,
            **current,
        }
        del manifest["time"]
    atomic_write_json(path, manifest)
    return manifest


def read_manifest(sweep_dir: str | os.PathLike) -> dict[str, Any]:
    """The manifest of a sweep folder. :raises FileNotFoundError: when there is none."""
    path = Path(sweep_dir) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{sweep_dir} has no {MANIFEST}; is it a sweep folder?")
    return json.loads(path.read_text())
