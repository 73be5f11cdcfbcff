"""Import the repository's scripts (files under ``experiments/``, which are not package modules)
so that tests can call their functions directly.

Test modules import it as ``from script_loader import load_script``: pytest puts ``tests/`` on
``sys.path`` (its default ``prepend`` import mode, no ``__init__.py`` here).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_script(
    path: str | Path,
    *,
    name: str | None = None,
    register: bool = False,
    monkeypatch: pytest.MonkeyPatch | None = None,
) -> ModuleType:
    """A freshly executed module of the script at ``path``.

    :param path: the script, relative to the repository root (or absolute).
    :param name: the module's name; the file's stem by default.
    :param register: also enter the module in ``sys.modules`` under ``name`` unless a module
        already holds that name (dataclasses and pickling look a class's module up there).
    :param monkeypatch: the test's ``monkeypatch``, for a script that imports its siblings
        (``import bench_utils``, ``import pooled_paired``): the script's folder goes on
        ``sys.path`` for the rest of the test, as when the script runs from the command line.
    :return: the module.
    """
    path = Path(path)
    path = path if path.is_absolute() else ROOT / path
    if not path.is_file():
        raise FileNotFoundError(f"no script at {path}: is the path relative to the repo root?")
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules.setdefault(spec.name, module)
    if monkeypatch is not None:
        monkeypatch.syspath_prepend(str(path.parent))
    spec.loader.exec_module(module)
    return module
