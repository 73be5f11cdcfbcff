"""Gin configuration: parse config files and bindings with errors that say how to fix them."""

from __future__ import annotations

import difflib
import inspect
import os
import re
from collections.abc import Sequence
from pathlib import Path

import gin


class GinConfigError(ValueError):
    """A gin file or binding that does not match the library's configurables."""


def _registered() -> dict[str, object]:
    return dict(gin.config._REGISTRY.items())


def _suggest_configurable(selector: str) -> str:
    names = {full.split(".")[-1]: full for full in _registered()}
    close = difflib.get_close_matches(selector.split(".")[-1], list(names), n=3, cutoff=0.6)
    if close:
        return " Did you mean " + ", ".join(repr(names[c]) for c in close) + "?"
    return (
        " Configurables are registered when their module is imported: check the spelling, "
        "or add an `import` line for your own module at the top of the gin file."
    )


def _suggest_parameter(selector: str, param: str) -> str:
    match = gin.config._REGISTRY.get_match(selector)
    if match is None:
        return ""
    try:
        params = list(inspect.signature(match.wrapped).parameters)
    except (TypeError, ValueError):
        return ""
    close = difflib.get_close_matches(param, params, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return hint + f" Its parameters are: {', '.join(p for p in params if p != 'self')}."


def explain_gin_error(err: Exception) -> str:
    """Add a 'did you mean' hint to gin's message for an unknown name."""
    msg = str(err)
    m = re.search(r"No configurable matching (?:reference )?'@?([\w.]+)", msg)
    if m:
        return msg + "\n" + _suggest_configurable(m.group(1)).lstrip()
    m = re.search(r"Configurable '([\w.]+)' doesn't have a parameter named '(\w+)'", msg)
    if m:
        return msg + "\n" + _suggest_parameter(m.group(1), m.group(2)).lstrip()
    return msg


def parse_gin(
    config_files: Sequence[str | os.PathLike] = (),
    bindings: Sequence[str] = (),
    search_dirs: Sequence[str | os.PathLike] = (),
) -> None:
    """Parse gin files and bindings; a file's ``include`` lines resolve next to it.

    :param config_files: gin files; a bare name is looked up in ``search_dirs`` too.
    :param bindings: extra bindings such as ``"super_sac.batch_size = 512"`` (applied last).
    :param search_dirs: folders searched for config files and includes.
    :raises GinConfigError: for an unknown configurable or parameter, with suggestions.
    :raises FileNotFoundError: for a config file that exists nowhere it was looked for.
    """
    resolved = [str(_locate(Path(file), search_dirs)) for file in config_files]
    # Includes resolve through gin's search path: put each file's folder and the search dirs
    # first for the duration of the parse (gin logs an error line for every prefix that misses).
    folders = [str(Path(f).parent) for f in resolved] + [
        str(Path(d).resolve()) for d in search_dirs
    ]
    prefixes = gin.config._LOCATION_PREFIXES
    saved = list(prefixes)
    prefixes[:] = list(dict.fromkeys(folders + saved))
    try:
        with gin.unlock_config():
            gin.parse_config_files_and_bindings(resolved, list(bindings), finalize_config=False)
    except ValueError as err:
        raise GinConfigError(explain_gin_error(err)) from err
    finally:
        prefixes[:] = saved


def _locate(path: Path, search_dirs: Sequence[str | os.PathLike]) -> Path:
    candidates = [path] + ([] if path.is_absolute() else [Path(d) / path for d in search_dirs])
    for candidate in candidates:
        if candidate.exists():
            return candidate.resolve()
    raise FileNotFoundError(
        f"gin config {path} not found; looked in {[str(c) for c in candidates]}"
    )
