"""Small helpers: seeding, devices, matmul precision, run directories, atomic writes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import pickle
import platform
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch


def set_seed(seed: int) -> None:
    """Seed Python's, numpy's and torch's global random number generators."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def flush_denormals() -> None:
    """Treat denormal floats as zero in CPU arithmetic (a process-wide setting).

    Adam's moment estimates of weights whose gradient stays exactly zero (units behind a dead
    ReLU) decay geometrically into the denormal range, where x86 arithmetic is tens of times
    slower; measured here, flushing them made SAC's update about 10% faster. The values
    affected are below 1e-38, far under anything that changes a parameter.
    """
    torch.set_flush_denormal(True)


def get_device(spec: str | torch.device = "auto") -> torch.device:
    """``"auto"`` picks CUDA when available, else the CPU; ``"cuda"`` without a GPU is an error."""
    if isinstance(spec, torch.device):
        return spec
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if str(spec).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(
            f"device {spec!r} was asked for but torch sees no GPU. Fix: use the device 'cpu' "
            "(or 'auto'; --device cpu on the command line)"
        )
    try:
        return torch.device(spec)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"unknown device {spec!r}. Fix: use 'cpu', 'cuda', 'cuda:<index>' or 'auto'"
        ) from err


def try_lock(path: str | os.PathLike) -> IO[str] | None:
    """Open ``path`` and take an exclusive advisory ``flock`` on it without waiting; the lock
    holds until the returned file is closed (or the process dies, even by SIGKILL).

    :return: the open file, or ``None`` where no lock can be taken: no ``fcntl`` (Windows), or
        a file system without locks (some network mounts), where nothing is locked.
    :raises BlockingIOError: when another open file (another process, or another open of the
        same path in this one) holds the lock.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    f = open(path, "a+")  # noqa: SIM115 - the caller closes it to release the lock
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise
    except OSError:  # pragma: no cover - e.g. ENOLCK on a network file system
        f.close()
        return None
    return f


def make_run_dir(base_save_path: str | os.PathLike, name: str) -> Path:
    """Create and return ``base_save_path/<name>_<i>`` for the first free ``i`` (race-free)."""
    base = Path(base_save_path)
    i = 0
    while True:
        run_dir = base / f"{name}_{i}"
        try:
            run_dir.mkdir(parents=True)
            return run_dir
        except FileExistsError:
            i += 1
        except OSError as err:
            raise PermissionError(
                f"cannot create the run directory {run_dir} ({err}); set SSAC_SAVE or "
                "base_save_path to a writable folder"
            ) from err


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, fsync and rename."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes, read in 4 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def cpuinfo_fields(text: str) -> dict[str, str]:
    """The ``key: value`` fields of the first processor block of Linux's ``/proc/cpuinfo``
    text (every logical CPU repeats the block; the first stands for the machine)."""
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _macos_cpu_name() -> str | None:
    try:
        out = subprocess.run(
            ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def machine_info(device: str | torch.device | None = None) -> dict[str, Any]:
    """What a run computes on, for the records of its results: runs repeat to the digit on one
    processor model and thread count, but not across processor models (their vector kernels
    round differently), so a result that may be compared later names its machine.

    :param device: the torch device the run uses; a CUDA device adds its name. Without one no
        CUDA context is opened (a sweep driver starts its trials afterwards).
    :return: ``cpu`` (the model name: ``/proc/cpuinfo``'s on Linux, ``sysctl``'s on macOS, else
        :func:`platform.processor` or the architecture), ``cpu_family`` and ``cpu_model`` (x86
        Linux: the family and model numbers; ARM Linux: the implementer and part codes; else
        ``None``), ``cpu_count`` (logical CPUs), ``torch_threads``, ``torch_cpu_capability``
        (the instruction set torch's CPU kernels dispatch to, e.g. ``AVX512``) and ``gpu`` (the
        CUDA device's name, or ``None``).
    """
    try:
        fields = cpuinfo_fields(Path("/proc/cpuinfo").read_text())
    except OSError:
        fields = {}
    name = fields.get("model name")
    if name is None and platform.system() == "Darwin":
        name = _macos_cpu_name()
    capability = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    device = torch.device(device) if device is not None else None
    return {
        "cpu": name or platform.processor() or platform.machine() or None,
        "cpu_family": fields.get("cpu family", fields.get("CPU implementer")),
        "cpu_model": fields.get("model", fields.get("CPU part")),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_cpu_capability": capability() if capability is not None else None,
        "gpu": torch.cuda.get_device_name(device)
        if device is not None and device.type == "cuda"
        else None,
    }


def load_torch_file(file: str | os.PathLike, device: str | torch.device = "cpu") -> Any:
    """``torch.load(file, weights_only=True)``, with a damaged file (empty, truncated, not a
    torch file) reported as a ``ValueError`` that names it (torch's own errors do not, and an
    empty file raises a bare ``EOFError``).

    :raises ValueError: naming the file and the fix.
    """
    try:
        return torch.load(file, map_location=device, weights_only=True)
    except (EOFError, RuntimeError, pickle.UnpicklingError, OSError) as err:
        raise ValueError(
            f"{file} could not be read ({type(err).__name__}: {err or 'empty file'}); it is "
            "damaged or not a torch file written by super_sac. Fix: load another copy, or "
            "write it again"
        ) from err


def atomic_write_json(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as indented JSON, atomically."""
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def json_list(record: Any, key: str) -> list[Any]:
    """``record[key]`` as a new list when ``record`` is a dict holding a list there, else ``[]``
    (for optional list fields of JSON records that older or hand-edited files may lack)."""
    value = record.get(key) if isinstance(record, dict) else None
    return list(value) if isinstance(value, list) else []


def nan_to_none(data: Any) -> Any:
    """``data`` with every NaN or infinite float (in nested dicts, lists and tuples) replaced by
    ``None``, so that its JSON is standard (``null``, not the bare ``NaN`` that strict parsers
    refuse)."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: nan_to_none(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [nan_to_none(v) for v in data]
    return data


MATMUL_PRECISIONS = ("highest", "high", "medium")


@contextlib.contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    """Run a block with :func:`torch.set_float32_matmul_precision` set to ``precision`` and
    restore the previous setting afterwards (it is process-wide).

    ``"highest"``: exact float32 products. ``"high"``: TF32 on NVIDIA GPUs (Ampere and
    newer). ``"medium"``: bfloat16 inputs with float32 accumulation, on GPUs and on CPUs with
    AMX or AVX512-BF16 (oneDNN), about 3x faster 256x256 products on this project's Xeon.
    Reduced precision changes the numbers a run produces; "highest" is the default.
    """
    if precision not in MATMUL_PRECISIONS:
        raise ValueError(f"matmul_precision must be one of {MATMUL_PRECISIONS}, got {precision!r}")
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)
