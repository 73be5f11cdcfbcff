"""Checks of each setting's value against its annotation in
:class:`~super_sac.config.TrainConfig`."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import numbers
import os
import types
import typing
from typing import Any, Literal

import numpy as np

from super_sac.config import TrainConfig, format_type
from super_sac.validation.common import _a, _err

# ------------------------------------------------------------------ types of the values


@functools.cache
def _setting_types() -> dict[str, Any]:
    return typing.get_type_hints(TrainConfig)


def _alternatives(tp: Any) -> tuple[Any, ...]:
    """The members of a union annotation (``int | None`` -> ``(int, NoneType)``), else ``(tp,)``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return (tp,)


def _choices(tp: Any) -> list[Any]:
    """The values a ``Literal`` annotation (possibly inside a union) accepts."""
    return [
        value
        for alt in _alternatives(tp)
        if typing.get_origin(alt) is Literal
        for value in typing.get_args(alt)
    ]


def value_matches(value: Any, tp: Any) -> bool:
    """Whether ``value`` is acceptable for a setting annotated ``tp``.

    Integers are accepted for ``float`` (gin reads ``init_alpha = 1`` as an int) and numpy
    scalars count as Python numbers, but ``bool`` and ``int`` stay apart: ``batch_size = True``
    and ``render = 1`` are rejected, although Python's bool is a subclass of int.
    """
    if tp is Any:
        return True
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return any(value_matches(value, alt) for alt in typing.get_args(tp))
    if typing.get_origin(tp) is Literal:
        return any(isinstance(value, type(c)) and value == c for c in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, (bool, np.bool_))
    if tp is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    return isinstance(value, typing.get_origin(tp) or tp)


def describe_type(tp: Any) -> str:
    """An annotation in words: ``an integer or None``, ``one of 'min', 'mean', 'first'``."""
    words = {
        bool: "True or False",
        int: "an integer",
        float: "a number",
        str: "a string",
        dict: "a dict",
        os.PathLike: "a path",
        type(None): "None",
    }
    parts = []
    if _choices(tp):
        parts.append("one of " + ", ".join(repr(c) for c in _choices(tp)))
    for alt in _alternatives(tp):
        if typing.get_origin(alt) is not Literal:
            key = typing.get_origin(alt) or alt
            parts.append(words.get(key, f"a {format_type(alt)}"))
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _example(value: Any, tp: Any, default: Any) -> tuple[Any, str]:
    """A value that fits ``tp``, as close to the bound ``value`` as possible, and where it came
    from: the bound text read as a literal (``'256'`` -> 256), a whole float as an integer
    (``1e6`` -> 1000000), 0/1 as a bool, the closest accepted string, or else the default."""
    seen = [value]
    if isinstance(value, str):
        try:
            seen.append(ast.literal_eval(value.strip()))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    converted = []
    for v in seen:
        if isinstance(v, float) and v.is_integer():
            converted.append(int(v))
        if isinstance(v, int) and not isinstance(v, bool) and v in (0, 1):
            converted.append(bool(v))
    for candidate in seen[1:] + converted:
        if value_matches(candidate, tp):
            return candidate, ""
    strings = [c for c in _choices(tp) if isinstance(c, str)]
    if isinstance(value, str) and strings:
        lowered = {c.lower(): c for c in strings}
        close = difflib.get_close_matches(value.lower(), list(lowered), n=1, cutoff=0.6)
        if close:
            return lowered[close[0]], " (the closest accepted value)"
    return default, " (the default)"


def check_setting_types(cfg: TrainConfig) -> None:
    """Check every setting's value against its annotation in :class:`TrainConfig`.

    :raises ConfigError: one line naming the binding, the value and its type, the expected type
        and a value that would fit, e.g. ``super_sac.batch_size = 'abc': got a str, expected an
        integer. Fix: bind an integer, e.g. super_sac.batch_size = 256 (the default)``.
    """
    hints = _setting_types()
    for field in dataclasses.fields(TrainConfig):
        value, tp = getattr(cfg, field.name), hints[field.name]
        if value_matches(value, tp):
            continue
        expected = describe_type(tp)
        example, source = _example(value, tp, field.default)
        kind = "one of them" if _choices(tp) and isinstance(value, str) else expected
        raise _err(
            f"{field.name} = {value!r}",
            f"got {'None' if value is None else _a(type(value).__name__)}, expected {expected}",
            f"bind {kind}, e.g. super_sac.{field.name} = {example!r}{source}",
        )
