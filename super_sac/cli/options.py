"""The training scripts' command line and gin settings: what was given on the command line, the
options a resumed run keeps (and the changed ones it refuses), gin files and bindings with
their syntax errors explained, the loop settings gin binds, and the time-limit warning."""

from __future__ import annotations

import argparse
import inspect
import json
import os
import tokenize
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gin
import gymnasium as gym

import super_sac
from super_sac.config import GinConfigError, parse_gin
from super_sac.validation import ConfigError

PathLike = str | os.PathLike
SearchDirs = Sequence[PathLike]


def loop_setting(name: str) -> Any:
    """The value gin binds for ``super_sac.<name>`` (or the function's default).

    :param name: a parameter of :func:`super_sac.super_sac`.
    """
    try:
        return gin.query_parameter(f"super_sac.{name}")
    except ValueError:
        return inspect.signature(super_sac.super_sac).parameters[name].default


def _bound_value(name: str) -> Any:
    """The value gin binds to ``super_sac.<name>`` (a macro, ``%SEED``, resolved)."""
    value = gin.query_parameter(f"super_sac.{name}")
    if isinstance(value, gin.config.ConfigurableReference):
        value = value.scoped_configurable_fn()
    return value


def _bound(name: str) -> bool:
    """Whether a gin file or binding sets ``super_sac.<name>``."""
    try:
        gin.query_parameter(f"super_sac.{name}")
    except ValueError:
        return False
    return True


def resumed_args(
    args: argparse.Namespace,
    task_key: str = "env",
    extra_saved_args: tuple[str, ...] = (),
    given: set[str] | None = None,
) -> tuple[argparse.Namespace, list[str]]:
    """The command line of a run continued with ``--resume RUN_DIR``, and its config files.

    The task, ``config``, ``parallel_envs``, ``seed``, ``max_episode_steps``, ``name`` (or the
    name the run had) and ``extra_saved_args`` come from the run's ``hparams.json`` (what it was
    started with), and ``logging`` too unless this command line gives it; the other options are
    this command line's. The only config file is the run's ``config.gin`` (the settings it ran
    with).

    :param args: this command line (``args.resume`` names the run directory).
    :param task_key: the option naming the task ("env", "game").
    :param extra_saved_args: further options to take from the original command line.
    :param given: the options this command line gave (:func:`given_options`); with it, one the
        run keeps given with another value is refused (repeating the run's own command line
        with ``--resume`` added is fine).
    :raises FileNotFoundError: when ``args.resume`` has no ``hparams.json``.
    :raises ConfigError: when this command line changes an option the run keeps.
    """
    run_dir = Path(args.resume)
    hparams = run_dir / "hparams.json"
    if not hparams.exists():
        raise FileNotFoundError(
            f"--resume {run_dir}: no hparams.json there; is it a run directory?"
        )
    record = json.loads(hparams.read_text())
    saved = (record.get("run_info") or {}).get("args") or {}
    kept = (task_key, "config", "parallel_envs", "seed", "max_episode_steps", "name")
    kept += extra_saved_args
    if given is not None:
        _refuse_changed_options(args, saved, kept, given)
    merged = argparse.Namespace(**{**vars(args), **{k: v for k, v in saved.items() if k in kept}})
    if merged.name is None:  # the name the run had, whatever config this command line names
        merged.name = record.get("name")
    if merged.logging is None:
        merged.logging = saved.get("logging")
    return merged, [str(run_dir / "config.gin")]


def _same_option(key: str, mine: Any, theirs: Any) -> bool:
    """Whether two values of an option mean the same: paths are compared as paths (the same
    file spelled differently), a config by its file name (only the run's name uses it)."""
    if mine == theirs:
        return True
    if not isinstance(mine, str) or not isinstance(theirs, str):
        return False
    if key == "config":
        return Path(mine).name == Path(theirs).name
    if key in ("dataset", "datasets_path"):
        a, b = Path(mine), Path(theirs)
        if os.path.normpath(a) == os.path.normpath(b):
            return True
        return a.exists() and b.exists() and a.resolve() == b.resolve()
    return False


def _camera(key: str, value: Any, saved: dict[str, Any]) -> Any:
    """A DeepMind Control camera of None is the run's domain's default camera."""
    if key != "camera_id" or "domain" not in saved:
        return value
    from super_sac.envs.dmc import resolve_camera

    return resolve_camera(saved["domain"], value)


def _refuse_changed_options(
    args: argparse.Namespace, saved: dict[str, Any], kept: tuple[str, ...], given: set[str]
) -> None:
    """Raise :class:`ConfigError` naming each kept option this command line gives with another
    value than the run was started with, and a ``--run_dir`` elsewhere."""
    changed = [
        f"--{key} {getattr(args, key)!r} here, {saved[key]!r} in the run"
        for key in kept
        if key in saved
        and key in given
        and not _same_option(
            key, _camera(key, getattr(args, key), saved), _camera(key, saved[key], saved)
        )
    ]
    run_dir = getattr(args, "run_dir", None)
    if run_dir is not None and Path(run_dir).resolve() != Path(args.resume).resolve():
        changed.append(f"--run_dir {run_dir!r} here, but --resume continues {args.resume!r}")
    if changed:
        raise ConfigError(
            f"--resume {args.resume} continues that run with its own options: "
            f"{'; '.join(changed)}. Fix: leave these options out (or give the run's values), "
            "or start a new run without --resume"
        )


def given_options(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, args: argparse.Namespace
) -> set[str]:
    """The options (destinations) that ``argv`` gives, told from defaults by a second parse in
    which every default is a marker. A DeepMind Control ``--env`` gives ``domain`` and ``task``.

    :param parser: a fresh parser of the command line (it is changed).
    :param argv: the command line (None: ``sys.argv[1:]``).
    :param args: its first parse (names every destination).
    """
    # every default becomes a marker (an object, which argparse neither converts nor copies);
    # appending options keep theirs, which they extend
    unset = object()
    blanked = {dest for dest, value in vars(args).items() if not isinstance(value, list)}
    parser.set_defaults(**dict.fromkeys(blanked, unset))
    parsed = vars(parser.parse_args(argv))
    given = {dest for dest in blanked if parsed.get(dest, unset) is not unset}
    if "env" in given and "domain" in vars(args):
        given |= {"domain", "task"}
    return given


def parse_command_line(
    make_parser: Callable[[str | None], argparse.ArgumentParser],
    description: str | None,
    argv: Sequence[str] | None,
) -> tuple[argparse.ArgumentParser, argparse.Namespace, set[str]]:
    """A training script's command line: its parser, the parsed options and the options
    ``argv`` gave (:func:`given_options`, parsed again by a second parser of the same kind).

    :param make_parser: ``description -> parser`` (:func:`build_parser`, :func:`dmc_parser`, ...).
    """
    parser = make_parser(description)
    args = parser.parse_args(argv)
    return parser, args, given_options(make_parser(description), argv, args)


def warn_beyond_time_limit(env: gym.Env, max_episode_steps: int | None) -> None:
    """Warn when ``--max_episode_steps`` asks for longer episodes than the env's own time limit
    allows (a DeepMind Control task's ``time_limit_steps``): they end at that limit.

    :param env: an env of the task.
    :param max_episode_steps: the requested limit (None: nothing to check).
    """
    own = getattr(env.unwrapped, "time_limit_steps", None)
    if max_episode_steps is not None and own is not None and max_episode_steps > own:
        warnings.warn(
            f"--max_episode_steps {max_episode_steps} is above the task's own time limit of "
            f"{own} agent steps (at this action repeat): episodes end at {own}",
            stacklevel=2,
        )


def parse_gin_args(
    config_files: Sequence[PathLike], bindings: Sequence[str], search_dirs: SearchDirs
) -> None:
    """:func:`super_sac.config.parse_gin`, with gin's syntax errors (a malformed binding or
    config line) reported as :class:`super_sac.config.GinConfigError` naming the binding or line.

    :param config_files: gin files; bare names are looked up in ``search_dirs``.
    :param bindings: the ``--gin_bindings`` (and the settings other options make).
    :param search_dirs: folders searched for config files and their includes.
    """
    try:
        parse_gin(config_files, bindings, search_dirs=search_dirs)
    except (SyntaxError, tokenize.TokenError) as err:
        raise GinConfigError(gin_syntax_message(err, config_files, bindings)) from err


def gin_syntax_message(
    err: SyntaxError | tokenize.TokenError,
    config_files: Sequence[PathLike],
    bindings: Sequence[str],
) -> str:
    """One line about a gin syntax error: which binding or config line, what is wrong, the fix.

    Gin parses all bindings as one text, so the line it reports may be the binding after the
    broken one (an unclosed bracket); each binding is therefore parsed on its own to find it.

    :param err: what gin raised.
    :param config_files: the config files that were parsed.
    :param bindings: the bindings that were parsed.
    """
    cause: SyntaxError | tokenize.TokenError = err
    if isinstance(err, SyntaxError) and err.filename:  # a line of a config file
        where = f"gin file {err.filename}, line {err.lineno} ({(err.text or '').strip()!r})"
    else:
        where = f"the gin files {', '.join(str(f) for f in config_files)}"
        for binding in bindings:
            parser = gin.config_parser.ConfigParser(
                binding, gin.config.ParserDelegate(skip_unknown=True)
            )
            try:
                for _ in parser:
                    pass
            except (SyntaxError, tokenize.TokenError) as binding_err:
                where, cause = f"gin binding {binding.strip()!r}", binding_err
                break
            except Exception:  # not a syntax problem (parse_gin reports those)
                continue
    if isinstance(cause, SyntaxError):
        problem = (cause.msg or "invalid syntax").rstrip(".")
    else:
        problem = f"{cause.args[0]} (an unclosed bracket or quote?)"
    return (
        f"cannot parse {where}: {problem}. Fix: write settings as "
        "'<configurable>.<parameter> = <python literal>', e.g. 'super_sac.batch_size = 512'."
    )


def bound_setting(name: str, default: Any) -> Any:
    """The gin-bound value of the loop setting ``super_sac.<name>``, or ``default`` when unbound."""
    try:
        return gin.query_parameter(f"super_sac.{name}")
    except ValueError:
        return default
