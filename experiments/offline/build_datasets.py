"""Build D4RL-style datasets locally (D4RL's servers cannot be reached here): for each env, a
"random" (uniform random policy), "medium" (a partially trained SAC agent), "medium-replay"
(the whole replay of that agent's training run) and "expert" (the final SAC agent) dataset, in
Minari's format and as ``.npz``, plus the reference returns of the D4RL normalized score
``100 * (return - random) / (expert - random)``.

    # 1. train the SAC agents (checkpoints every few thousand steps become "medium" candidates)
    python experiments/offline/build_datasets.py --stage train --out offline_data
    # 2. record the datasets, measure the reference returns, write the checksums
    python experiments/offline/build_datasets.py --stage record --out offline_data
    # later: check the files on disk against the recorded checksums (rebuilds nothing)
    python experiments/offline/build_datasets.py --verify --out offline_data
    # on a new machine: only medium and medium-replay of a committed build, checked against it
    python experiments/offline/build_datasets.py --envs HalfCheetah-v5 --out offline_data \\
        --medium_only_from experiments/benchmarks/results/offline18_portable/reference_returns.json
    # rebuild with an earlier medium choice (the step, or the folder, reference_returns.json names)
    python experiments/offline/build_datasets.py --stage record --out offline_data --overwrite \\
        --medium_checkpoint HalfCheetah-v5=35000

As in D4RL (Fu et al. 2020, "D4RL: Datasets for Deep Data-Driven Reinforcement Learning",
arXiv:2004.07219): the expert and medium datasets sample the SAC policy; "medium" is the saved
agent whose evaluation return is closest to 40% of the way from random to expert (D4RL's
medium agents reach about a third to a half of the expert's); "medium-replay" is every
transition the agent saw while training up to that checkpoint (its replay buffer, warm-up
included); the reference returns are the mean returns of complete episodes of our own random and
expert datasets. Our datasets are smaller than D4RL's (1M transitions) and come from shorter SAC
runs: see ``ENVS``.

Reproducibility: training and recording use fixed seeds (``--seed``, ``--record_seed``), a fixed
torch thread count (``--threads``), the CPU and, by default, portable numerics (``--numerics
portable``): MKL's conditional numerical reproducibility on its SSE2 code path
(``MKL_CBWR=COMPATIBLE,STRICT``, the one branch MKL keeps identical on Intel and AMD processors)
and torch's AVX2 kernels (``ATEN_CPU_CAPABILITY=avx2``). Without them (``--numerics native``) MKL
picks its matrix kernels by processor, and a SAC run of 100,000 steps on another CPU ends in
other weights: the datasets of the first issue-18 build, made that way, could not be rebuilt on
the next machine (the random dataset matched; every dataset a network produced differed). The
portable build trains about 2-3 times slower. numpy's, oneDNN's and the C library's own
processor dispatch are not pinned (no difference from them was seen), and that a portable build
on a second processor writes the same bytes is still to be checked (``--verify --expect`` on the
next machine). ``reference_returns.json`` records the seeds, the
thread count, the numerics, the processor, the versions, the medium checkpoint (path, step,
evaluation return, how it was chosen) and the SHA-256 of every written file, which ``--verify``
checks (against another machine's file with ``--expect``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from super_sac import cli, datasets
from super_sac.checkpoint import checkpoint_episodes
from super_sac.cli import dataset_id, normalized_score
from super_sac.utils import sha256_file

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GYM = HERE.parent / "gym"

# env id -> SAC training steps, checkpoint (and evaluation) interval, transitions per recorded
# dataset; optional: "warmup_steps" (super_sac.random_warmup_steps, default the gin file's) and
# "eval_episodes" (per evaluation during training, default 3)
ENVS: dict[str, dict[str, int]] = {
    "Pendulum-v1": {"train_steps": 10_000, "interval": 1_000, "transitions": 50_000},
    "HalfCheetah-v5": {"train_steps": 100_000, "interval": 5_000, "transitions": 100_000},
}
QUALITIES = ("random", "medium", "medium-replay", "expert")
MEDIUM_FRACTION = 0.4
REFERENCE_FILE = "reference_returns.json"
NUMERICS_FILE = "numerics.json"  # in a training run's folder: set_numerics' record
# the settings that fix MKL's code branch and torch's kernel level for this process's training
# and recording (see the module docstring and set_numerics)
PORTABLE_NUMERICS = {"MKL_CBWR": "COMPATIBLE,STRICT", "ATEN_CPU_CAPABILITY": "avx2"}


class ChecksumError(ValueError):
    """Dataset files that differ from (or lack) the checksums ``reference_returns.json`` holds."""


# ------------------------------------------------------------------------------ paths
def npz_path(out: Path, env_id: str, quality: str) -> Path:
    """``<out>/npz/<env>-<quality>.npz``, e.g. ``npz/halfcheetah-medium-replay.npz``."""
    return out / "npz" / f"{env_id.split('-')[0].lower()}-{quality}.npz"


def run_dir(out: Path, env_id: str) -> Path:
    """The SAC training run of ``env_id``: ``<out>/agents/sac_<env>_0``."""
    return out / "agents" / f"sac_{env_id}_0"


def relative_to(path: Path, out: Path) -> str:
    """``path`` relative to the build folder when inside it, else absolute."""
    return str(path.relative_to(out)) if path.is_relative_to(out) else str(path)


# ------------------------------------------------------------------------------ numerics
MKL_CBWR_BRANCH, MKL_CBWR_COMPATIBLE, MKL_CBWR_STRICT = 1, 3, 0x10000  # MKL's CNR constants


def _mkl_service():
    """MKL's CNR service functions inside torch's CPU library (``None`` without MKL)."""
    import ctypes

    import torch

    folder = Path(torch.__file__).parent / "lib"
    for lib in sorted([*folder.glob("libtorch_cpu*"), *folder.glob("torch_cpu*.dll")]):
        try:
            handle = ctypes.CDLL(str(lib))
        except OSError:
            continue
        if hasattr(handle, "mkl_serv_cbwr_set"):
            return handle
    return None


def set_numerics(mode: str) -> dict[str, Any]:
    """Fix (``portable``) or leave (``native``) the processor-dependent numerics of this process
    before it computes anything: MKL's code branch (``MKL_CBWR``, also set through MKL's
    ``mkl_cbwr_set``, which fails once MKL has computed) and torch's kernel level
    (``ATEN_CPU_CAPABILITY``, read at the first computation).

    :raises SystemExit: when a portable build cannot be had: one of the variables is already set
        to another value, MKL computed before the call (run the script in a fresh process), or
        torch has no MKL or the CPU no AVX2 (build with ``--numerics native``).
    :return: what the build ran with, for ``reference_returns.json``.
    """
    import torch

    mkl = _mkl_service()
    if mode == "portable":
        clash = {
            k: os.environ[k] for k, v in PORTABLE_NUMERICS.items() if os.environ.get(k, v) != v
        }
        if clash:
            raise SystemExit(
                f"error: --numerics portable sets {PORTABLE_NUMERICS}, but the environment "
                f"already has {clash}. Fix: unset them, or pass --numerics native"
            )
        if mkl is None:
            raise SystemExit(
                "error: --numerics portable fixes MKL's code branch, and this torch has no MKL "
                "(not an x86-64 build?). Fix: pass --numerics native"
            )
        code = mkl.mkl_serv_cbwr_set(MKL_CBWR_COMPATIBLE | MKL_CBWR_STRICT)
        if code != 0 and mkl.mkl_serv_cbwr_get(MKL_CBWR_BRANCH) != MKL_CBWR_COMPATIBLE:
            raise SystemExit(
                f"error: MKL's code branch could not be fixed (mkl_cbwr_set returned {code}): "
                "this process computed with MKL before. Fix: run build_datasets.py in a fresh "
                "process, or pass --numerics native"
            )
        before = {k: os.environ.get(k) for k in PORTABLE_NUMERICS}
        os.environ.update(PORTABLE_NUMERICS)
        if torch.backends.cpu.get_cpu_capability() != "AVX2":
            for k, v in before.items():
                if v is None:
                    os.environ.pop(k, None)
            raise SystemExit(
                "error: --numerics portable runs torch's AVX2 kernels, but torch uses "
                f"{torch.backends.cpu.get_cpu_capability()} here (a CPU without AVX2, or torch "
                "computed before the call). Fix: a fresh process on an AVX2 CPU, or --numerics "
                "native"
            )
    return {
        "mode": mode,
        **{k: os.environ.get(k) for k in PORTABLE_NUMERICS},
        "mkl_branch": None if mkl is None else mkl.mkl_serv_cbwr_get(MKL_CBWR_BRANCH),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def host_processor() -> str:
    """The CPU's model name with its family, model and stepping (``/proc/cpuinfo`` on Linux:
    virtual machines often show a bare name such as ``AMD EPYC`` for several generations), else
    :func:`platform.processor`."""
    try:
        fields: dict[str, str] = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if not key.strip():
                break  # the first processor's block only
            fields.setdefault(key.strip(), value.strip())
        if "model name" in fields:
            ids = [f"{k} {fields[k]}" for k in ("cpu family", "model", "stepping") if k in fields]
            return fields["model name"] + (f" ({', '.join(ids)})" if ids else "")
    except OSError:
        pass
    return platform.processor() or platform.machine()


# ------------------------------------------------------------------------------ training
def train_agent(
    out: Path,
    env_id: str,
    seed: int,
    threads: int,
    numerics: dict[str, Any] | None = None,
    stop_at: int | None = None,
) -> Path:
    """Train SAC on ``env_id`` on the CPU with ``threads`` torch threads, a checkpoint and an
    evaluation at every interval, all checkpoints kept (each holds the replay buffer up to its
    step) and a replay buffer larger than the run, so no transition is overwritten.

    :param out: the build folder; the run goes to :func:`run_dir`.
    :param seed: the run's seed (env, networks, sampling).
    :param threads: torch CPU threads.
    :param numerics: :func:`set_numerics`'s record, written beside the run (``numerics.json``).
    :param stop_at: end the run after this many steps (a checkpoint step), with every setting
        of the full run (the replay buffer's size included), so its checkpoints up to there are
        the full run's (:func:`rebuild_medium`; a schedule over the run's length, such as
        prioritized replay's beta anneal, would break this; ``sac.gin`` has none).
    :return: the run directory.
    """
    import gin

    spec = ENVS[env_id]
    steps, interval = spec["train_steps"], spec["interval"]
    run_steps = steps if stop_at is None else stop_at
    bindings = [
        f"ReplayBuffer.size = {steps + 1}",
        f"super_sac.checkpoint_interval = {interval}",
        f"super_sac.keep_checkpoints = {steps // interval + 1}",
        f"super_sac.eval_interval = {interval}",
        f"super_sac.eval_episodes = {spec.get('eval_episodes', 3)}",
        "super_sac.n_step = 1",
    ]
    if "warmup_steps" in spec:
        bindings.append(f"super_sac.random_warmup_steps = {spec['warmup_steps']}")
    folder = run_dir(out, env_id)
    argv = [
        "--env", env_id, "--config", "sac.gin", "--seed", str(seed), "--steps", str(run_steps),
        "--threads", str(threads), "--device", "cpu", "--name", f"sac_{env_id}",
        "--run_dir", str(folder), "--logging", "none",
    ]  # fmt: skip
    gin.clear_config()
    cli.train_gym(argv + [x for b in bindings for x in ("--gin_bindings", b)], search_dirs=[GYM])
    gin.clear_config()
    if numerics is not None:
        (folder / NUMERICS_FILE).write_text(json.dumps(numerics, indent=1) + "\n")
    return folder


def check_numerics(folder: Path, numerics: dict[str, Any]) -> dict[str, Any] | None:
    """The numerics the agents in ``folder`` were trained with (``None``: not recorded, a run
    trained before they were).

    :raises SystemExit: when they differ from the record stage's (``numerics``): the datasets
        would mix two numerics and match neither build.
    """
    path = folder / NUMERICS_FILE
    if not path.is_file():
        return None
    trained = json.loads(path.read_text())
    if trained["mode"] != numerics["mode"]:
        raise SystemExit(
            f"error: the agents in {folder} were trained with --numerics {trained['mode']}, and "
            f"this record stage runs --numerics {numerics['mode']}. Fix: record with "
            f"--numerics {trained['mode']}"
        )
    return trained


def training_settings(folder: Path) -> dict[str, Any]:
    """The seed, threads and device the run in ``folder`` was started with (its
    ``hparams.json``)."""
    hparams = json.loads((folder / "hparams.json").read_text())
    args = (hparams.get("run_info") or {}).get("args") or {}
    return {k: args.get(k) for k in ("seed", "threads", "device", "steps")}


# ------------------------------------------------------------------------------ medium choice
def eval_history(folder: Path) -> list[dict[str, Any]]:
    """The evaluations of the training run (``summary.json``)."""
    return json.loads((folder / "summary.json").read_text())["eval_history"]


def pick_medium(folder: Path, random_return: float) -> dict[str, Any]:
    """The checkpoint whose evaluation return is closest to ``MEDIUM_FRACTION`` of the way from
    the random return to the final agent's, ``random + 0.4 (expert - random)``.

    :return: ``{"path", "env_steps", "eval_return", "chosen_by"}``.
    """
    history = eval_history(folder)
    expert = history[-1]["return_mean"]
    target = random_return + MEDIUM_FRACTION * (expert - random_return)
    candidates = [
        (abs(e["return_mean"] - target), e)
        for e in history[:-1]
        if (folder / "checkpoints" / f"ckpt_{e['env_steps']}").exists()
    ]
    if not candidates:
        raise FileNotFoundError(
            f"{folder}: no checkpoint beside an evaluation before the last; train again with "
            "--stage train (checkpoints are kept at every interval)"
        )
    _, best = min(candidates, key=lambda c: c[0])
    return {
        "path": folder / "checkpoints" / f"ckpt_{best['env_steps']}",
        "env_steps": int(best["env_steps"]),
        "eval_return": float(best["return_mean"]),
        "chosen_by": f"evaluation return closest to {target:.1f} (random + {MEDIUM_FRACTION} "
        f"(final {expert:.1f} - random))",
    }


def forced_medium(out: Path, folder: Path, choice: str) -> dict[str, Any]:
    """The checkpoint ``--medium_checkpoint`` names: an env step (``35000``) or a checkpoint
    folder (absolute, or relative to ``out`` as ``reference_returns.json`` writes it).

    :raises FileNotFoundError: naming the checkpoints the run has.
    """
    path = folder / "checkpoints" / f"ckpt_{choice}" if choice.isdigit() else Path(choice)
    if not path.is_absolute():
        path = out / path
    if not (path / "state.pt").exists():
        have = sorted(p.name for p in (folder / "checkpoints").glob("ckpt_*"))
        raise FileNotFoundError(
            f"--medium_checkpoint {choice}: no checkpoint at {path} (the run has {have or 'none'})."
            " Fix: give one of its steps, or train with --stage train first"
        )
    steps = int(path.name.removeprefix("ckpt_"))
    evals = [e["return_mean"] for e in eval_history(folder) if e["env_steps"] == steps]
    return {
        "path": path,
        "env_steps": steps,
        "eval_return": float(evals[-1]) if evals else None,
        "chosen_by": "--medium_checkpoint",
    }


def parse_medium_choices(values: list[str], envs: list[str]) -> dict[str, str]:
    """``--medium_checkpoint`` values ``[ENV=]CHECKPOINT`` -> ``{env: checkpoint}``; the env may
    be left out when one env is built."""
    choices = {}
    for value in values:
        env_id, sep, choice = value.rpartition("=")
        if not sep:
            if len(envs) != 1:
                raise SystemExit(
                    f"error: --medium_checkpoint {value}: name the env (ENV=CHECKPOINT) when "
                    f"building several envs ({', '.join(envs)})"
                )
            env_id = envs[0]
        if env_id not in envs:
            raise SystemExit(f"error: --medium_checkpoint {value}: {env_id} is not in --envs")
        choices[env_id] = choice
    return choices


# ------------------------------------------------------------------------------ recording
def record_quality(
    out: Path, env_id: str, quality: str, policy: str, seed: int, threads: int, overwrite: bool
) -> dict[str, Any]:
    """Record ``ENVS[env_id]["transitions"]`` transitions of ``policy`` as the ``quality``
    dataset (Minari + ``.npz``) with :func:`super_sac.cli.record_dataset`."""
    import gin

    argv = [
        "--env", env_id, "--policy", policy, "--transitions", str(ENVS[env_id]["transitions"]),
        "--dataset_id", dataset_id(env_id, quality), "--datasets_path", str(out / "minari"),
        "--npz", str(npz_path(out, env_id, quality)), "--seed", str(seed),
        "--threads", str(threads), "--label", relative_to(Path(policy), out),
    ] + (["--overwrite"] if overwrite else [])  # fmt: skip
    gin.clear_config()
    summary = cli.record_dataset(argv, search_dirs=[HERE, GYM])
    gin.clear_config()
    return summary


def record_replay(out: Path, env_id: str, checkpoint: Path, overwrite: bool) -> dict[str, Any]:
    """Write the replay buffer of ``checkpoint`` (every transition of the training run up to
    it) as the "medium-replay" dataset, Minari + ``.npz``, like :func:`record_quality`.

    :raises datasets.DatasetError: when the buffer does not fit the env or its episodes disagree
        with the checkpoint's counters (env steps, finished episodes).
    """
    env = cli.make_env(env_id, None)
    act_space = datasets.raw_action_space(env)
    episodes = checkpoint_episodes(checkpoint, act_space, observation_space=env.observation_space)
    quality = "medium-replay"
    label = relative_to(checkpoint, out)
    datasets.save_minari(
        dataset_id(env_id, quality),
        episodes,
        datasets.raw_observation_space(env),
        act_space,
        datasets_path=out / "minari",
        overwrite=overwrite,
        algorithm_name=f"super_sac replay of the SAC run up to {label}",
        description=f"{env_id}, every transition of a SAC run up to {label}",
    )
    datasets.save_npz(npz_path(out, env_id, quality), episodes, act_space)
    limit = env.spec.max_episode_steps if env.spec is not None else None
    env.close()
    returns = [
        float(np.sum(ep.rewards))
        for ep in episodes
        if ep.terminations[-1] or (limit is not None and len(ep.rewards) == limit)
    ]
    return {
        "transitions": int(sum(len(ep.rewards) for ep in episodes)),
        "episodes": len(episodes),
        "return_mean": float(np.mean(returns)) if returns else float("nan"),
    }


def dataset_files(out: Path, env_id: str, quality: str) -> list[Path]:
    """The files a dataset consists of: its ``.npz`` and every file of its Minari folder."""
    minari = out / "minari" / dataset_id(env_id, quality)
    return [npz_path(out, env_id, quality)] + sorted(p for p in minari.rglob("*") if p.is_file())


def checksums(out: Path, env_id: str, quality: str) -> dict[str, str]:
    """``{path relative to out: sha256}`` of :func:`dataset_files`."""
    return {str(p.relative_to(out)): sha256_file(p) for p in dataset_files(out, env_id, quality)}


class ChecksumCheck(NamedTuple):
    """What :func:`compare_checksums` found: one line per missing or differing file, the
    matching paths, and the differing ones (relative to the build folder)."""

    problems: list[str]
    good: list[str]
    differing: list[str]


def compare_checksums(
    out: Path, expected: dict[str, str], label: str, actual: dict[str, str] | None = None
) -> ChecksumCheck:
    """Hold the files under ``out`` to the recorded ``{path relative to out: sha256}``.

    :param label: names the dataset in each problem, e.g. ``"HalfCheetah-v5 medium"``.
    :param actual: checksums already computed (:func:`checksums`); files not in it are hashed.
    """
    problems, good, differing = [], [], []
    for rel, sha in expected.items():
        path = out / rel
        if actual is None or rel not in actual:
            if not path.is_file():
                problems.append(f"{path}: missing ({label})")
                continue
            digest = sha256_file(path)
        else:
            digest = actual[rel]
        if digest != sha:
            problems.append(f"{path}: sha256 {digest} differs from the recorded {sha} ({label})")
            differing.append(rel)
        else:
            good.append(rel)
    return ChecksumCheck(problems, good, differing)


def refuse_existing(out: Path, env_id: str, qualities: tuple[str, ...], overwrite: bool) -> None:
    """Stop before any work when a dataset file to write exists and ``--overwrite`` is not given
    (the recorders would refuse it only after training or recording)."""
    there = [str(npz_path(out, env_id, q)) for q in qualities if npz_path(out, env_id, q).exists()]
    if there and not overwrite:
        raise SystemExit(
            f"error: {', '.join(there)} exist, and a build replaces datasets only with "
            "--overwrite. Fix: pass --overwrite, or build into another --out"
        )


def record_env(
    out: Path, env_id: str, args: argparse.Namespace, medium_choice: str | None
) -> dict[str, Any]:
    """Record the four datasets of ``env_id``; :return: its entry of ``reference_returns.json``."""
    refuse_existing(out, env_id, QUALITIES, args.overwrite)
    folder = run_dir(out, env_id)
    seed, threads = args.record_seed, args.threads
    trained_steps = training_settings(folder).get("steps")
    if trained_steps is not None and int(trained_steps) < ENVS[env_id]["train_steps"]:
        raise SystemExit(
            f"error: {folder} trained {trained_steps} of {ENVS[env_id]['train_steps']} steps (a "
            "--medium_only_from rebuild): its agent is not the expert. Fix: build into another "
            "--out with --stage all"
        )
    trained_numerics = check_numerics(folder, args.numerics_record)
    summaries = {
        "random": record_quality(out, env_id, "random", "random", seed, threads, args.overwrite)
    }
    random_ret = summaries["random"]["return_mean"]
    medium = (
        forced_medium(out, folder, medium_choice)
        if medium_choice is not None
        else pick_medium(folder, random_ret)
    )
    for quality, policy in (("medium", str(medium["path"])), ("expert", str(folder / "agent.pt"))):
        summaries[quality] = record_quality(
            out, env_id, quality, policy, seed, threads, args.overwrite
        )
    summaries["medium-replay"] = record_replay(out, env_id, medium["path"], args.overwrite)
    expert_ret = summaries["expert"]["return_mean"]
    medium_rel = relative_to(Path(medium["path"]), out)
    return {
        "random_return": random_ret,
        "expert_return": expert_ret,
        "medium_agent": medium_rel,
        "medium_agent_eval_return": medium["eval_return"],
        "medium_checkpoint": {**medium, "path": medium_rel},
        "build": {
            "train": {
                **training_settings(folder),
                **ENVS[env_id],
                "numerics": trained_numerics or "not recorded",
            },
            "record_seed": seed,
            "record_threads": threads,
            "numerics": args.numerics_record,
            "processor": host_processor(),
            "versions": library_versions(),
        },
        "datasets": {
            q: {
                "minari_id": dataset_id(env_id, q),
                "npz": str(npz_path(out, env_id, q).relative_to(out)),
                "transitions": summaries[q]["transitions"],
                "episodes": summaries[q]["episodes"],
                "return_mean": summaries[q]["return_mean"],
                "normalized_score": normalized_score(
                    summaries[q]["return_mean"], random_ret, expert_ret
                ),
                "sha256": checksums(out, env_id, q),
            }
            for q in QUALITIES
        },
    }


def rebuild_medium(out: Path, envs: list[str] | None, args: argparse.Namespace) -> dict[str, Any]:
    """Rebuild only the medium and medium-replay datasets of a recorded build (``args.
    medium_only_from``, a ``reference_returns.json``) and check them against its checksums: the
    SAC run stops at the recorded medium checkpoint (a quarter of the training for HalfCheetah)
    and the random and expert datasets, which set the reference returns, are not rebuilt. Only
    when every file matches does the build folder get a ``reference_returns.json`` entry (merged
    into one already there) with the two datasets, the record's reference returns and what this
    rebuild ran with, so ``--verify`` checks them later.

    :param envs: the envs to rebuild (``None``: every env of the record).
    :raises SystemExit: when the record is missing or lacks an env, its seeds, threads,
        numerics or training settings (``ENVS``) are not this command's (the files could not
        match), or the build folder already holds a training run of the env.
    :raises ChecksumError: naming each rebuilt file that differs from the record (nothing is
        recorded then).
    """
    record_path = Path(args.medium_only_from)
    if not record_path.is_file():
        raise SystemExit(
            f"error: --medium_only_from {record_path}: no such file. Fix: name a committed "
            "reference_returns.json (e.g. experiments/benchmarks/results/offline18_portable/)"
        )
    record = json.loads(record_path.read_text())
    refs, problems = {}, []
    for env_id in envs or list(record):
        if env_id not in record:
            raise SystemExit(f"error: {record_path} has no {env_id} (it holds {sorted(record)})")
        if env_id not in ENVS:
            raise SystemExit(f"error: no build settings for {env_id}; known: {list(ENVS)}")
        ref = record[env_id]
        build = ref["build"]
        wanted = {
            "--seed": (build["train"]["seed"], args.seed),
            "--threads": (build["train"]["threads"], args.threads),
            "--record_seed": (build["record_seed"], args.record_seed),
            "--numerics": (build.get("numerics", {}).get("mode", "native"), args.numerics),
        }
        wanted.update(
            {
                f"ENVS[{env_id!r}][{k!r}]": (build["train"].get(k), v)
                for k, v in ENVS[env_id].items()
            }
        )
        clash = [f"{k} {mine} (the record: {theirs})" for k, (theirs, mine) in wanted.items()
                 if theirs != mine]  # fmt: skip
        if clash:
            raise SystemExit(
                f"error: {env_id} in {record_path} was built with other settings: "
                + ", ".join(clash)
                + ". Fix: pass the record's values (build settings live in ENVS)"
            )
        if run_dir(out, env_id).exists():
            raise SystemExit(
                f"error: {run_dir(out, env_id)} exists (an earlier build or rebuild). Fix: "
                "remove it, or rebuild into another --out"
            )
        step = int(ref["medium_checkpoint"]["env_steps"])
        refuse_existing(out, env_id, ("medium", "medium-replay"), args.overwrite)
        folder = train_agent(out, env_id, args.seed, args.threads, args.numerics_record, step)
        medium = forced_medium(out, folder, str(step))
        summaries = {
            "medium": record_quality(
                out, env_id, "medium", str(medium["path"]), args.record_seed, args.threads,
                args.overwrite,
            ),
            "medium-replay": record_replay(out, env_id, medium["path"], args.overwrite),
        }  # fmt: skip
        datasets_ = {}
        for quality, summary in summaries.items():
            sums = checksums(out, env_id, quality)
            expected = ref["datasets"][quality]["sha256"]
            problems += compare_checksums(out, expected, f"{env_id} {quality}", sums).problems
            datasets_[quality] = {
                "minari_id": dataset_id(env_id, quality),
                "npz": str(npz_path(out, env_id, quality).relative_to(out)),
                **{k: summary[k] for k in ("transitions", "episodes", "return_mean")},
                "normalized_score": normalized_score(
                    summary["return_mean"], ref["random_return"], ref["expert_return"]
                ),
                "sha256": sums,
            }
        refs[env_id] = {
            "random_return": ref["random_return"],
            "expert_return": ref["expert_return"],
            "medium_agent": relative_to(Path(medium["path"]), out),
            "medium_checkpoint": {**medium, "path": relative_to(Path(medium["path"]), out)},
            "rebuilt_from": str(record_path),
            "build": {
                "train": {
                    **training_settings(folder),
                    **ENVS[env_id],
                    "stopped_at": step,
                    "numerics": args.numerics_record,
                },
                "record_seed": args.record_seed,
                "record_threads": args.threads,
                "numerics": args.numerics_record,
                "processor": host_processor(),
                "versions": library_versions(),
            },
            "datasets": datasets_,
        }
    if problems:
        differing = sorted({line.rsplit("(", 1)[1].split()[0] for line in problems})
        raise ChecksumError(
            f"{len(problems)} rebuilt file(s) do not match {record_path}:\n  "
            + "\n  ".join(problems)
            + "\nNothing was recorded; the rebuilt files are left for inspection."
            + "".join(_numerics_hints(record, out, differing, local=refs))
        )
    ref_file = out / REFERENCE_FILE
    existing = json.loads(ref_file.read_text()) if ref_file.exists() else {}
    existing.update(refs)
    ref_file.write_text(json.dumps(existing, indent=1) + "\n")
    return refs


def library_versions() -> dict[str, str]:
    """Versions of the libraries whose numbers a rebuild depends on."""
    import gymnasium
    import minari
    import torch

    return {
        "torch": torch.__version__,
        "numpy": np.__version__,
        "gymnasium": gymnasium.__version__,
        "minari": minari.__version__,
    }


# ------------------------------------------------------------------------------ verification
def verify(out: Path, envs: list[str] | None = None, expect: Path | None = None) -> list[str]:
    """Check every dataset file against the SHA-256 ``reference_returns.json`` records.

    :param out: the build folder.
    :param envs: the envs to check (None: every env of the file).
    :param expect: check against this ``reference_returns.json`` instead of the build folder's
        own, e.g. the committed record of the build a benchmark table used.
    :return: one line per file checked.
    :raises ChecksumError: naming each file that is missing or differs, and the fix (with the
        recorded numerics and processor when those explain a difference).
    """
    ref_file = expect if expect is not None else out / REFERENCE_FILE
    if not ref_file.exists():
        raise ChecksumError(f"no {ref_file}. Fix: build the datasets first (--stage all)")
    refs = json.loads(ref_file.read_text())
    own_file = out / REFERENCE_FILE
    own = json.loads(own_file.read_text()) if expect is not None and own_file.is_file() else {}
    lines, problems, differing = [], [], []
    for env_id in envs or list(refs):
        if env_id not in refs:
            problems.append(f"{env_id}: not in {ref_file} (it holds {sorted(refs)})")
            continue
        for quality, entry in refs[env_id]["datasets"].items():
            rebuilt = own.get(env_id, {})
            if "rebuilt_from" in rebuilt and quality not in rebuilt["datasets"]:
                lines.append(f"skipped {env_id} {quality} (not rebuilt: --medium_only_from)")
                continue
            if "sha256" not in entry:
                problems.append(f"{env_id} {quality}: no checksums recorded (an older build)")
                continue
            check = compare_checksums(out, entry["sha256"], f"{env_id} {quality}")
            problems += check.problems
            lines += [f"ok {rel}" for rel in check.good]
            if check.differing:
                differing.append(env_id)
    if problems:
        raise ChecksumError(
            f"{len(problems)} dataset file(s) do not match {ref_file}:\n  "
            + "\n  ".join(problems)
            + "\nFix: restore the files, or rebuild them with --stage record --overwrite "
            "(with the recorded --medium_checkpoint to reproduce the same choice)"
            + "".join(_numerics_hints(refs, out, sorted(set(differing))))
        )
    return lines


def _numerics_hints(
    refs: dict[str, Any], out: Path, envs: list[str], local: dict[str, Any] | None = None
) -> list[str]:
    """Why the files of ``envs`` may differ from the record ``refs``: the numerics and processor
    it was built with, against those of the files on disk (``local``, default ``out``'s own
    record, when there is one), when either build was not portable or they differ."""
    if local is None:
        local_file = out / REFERENCE_FILE
        local = json.loads(local_file.read_text()) if local_file.is_file() else {}

    def describe(build: dict[str, Any]) -> tuple[str, str]:
        mode = build.get("numerics", {}).get("mode", "native (not recorded)")
        return mode, build.get("processor", "an unrecorded processor")

    hints = []
    for env_id in envs:
        expected = describe(refs[env_id].get("build", {}))
        here = describe(local[env_id].get("build", {})) if env_id in local else None
        if here is not None and expected[0] == here[0] == "portable":
            hints.append(
                f"\n{env_id}: both builds used portable numerics ({expected[1]}; {here[1]}): "
                "compare the library versions the two records hold"
            )
            continue
        hints.append(
            f"\n{env_id}: the record was built with {expected[0]} numerics on {expected[1]}"
            + (f", the files here with {here[0]} numerics on {here[1]}" if here else "")
            + f" (this machine: {host_processor()}). Native numerics make the networks' floats "
            "depend on the processor, so a rebuild elsewhere writes other files; a --numerics "
            "portable build does not"
        )
    return hints


# ------------------------------------------------------------------------------ command line
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--stage", choices=["train", "record", "all"], default="all")
    p.add_argument("--out", default=str(ROOT / "offline_data"))
    p.add_argument(
        "--envs", nargs="+", default=None, help=f"default: {' '.join(ENVS)} (--verify: all built)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace existing datasets")
    p.add_argument("--seed", type=int, default=0, help="seed of the SAC training runs")
    p.add_argument("--record_seed", type=int, default=0, help="seed of the recorded episodes")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (train and record)")
    p.add_argument(
        "--medium_checkpoint",
        action="append",
        default=[],
        metavar="[ENV=]CHECKPOINT",
        help="use this checkpoint as the medium agent instead of choosing one: an env step "
        "(35000) or a checkpoint folder (as reference_returns.json records it); repeatable",
    )
    p.add_argument(
        "--numerics",
        choices=["portable", "native"],
        default="portable",
        help="portable: fix the processor-dependent kernels (MKL's COMPATIBLE,STRICT branch, "
        "torch's AVX2 kernels; 2-3x slower training), so that another x86-64 CPU with AVX2 can "
        "rebuild the same files; native: the fastest kernels of this CPU",
    )
    p.add_argument(
        "--medium_only_from",
        default=None,
        metavar="REFERENCE_JSON",
        help="rebuild only the medium and medium-replay datasets of this recorded build "
        "(training stops at its medium checkpoint) and check them against its checksums",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="rebuild nothing: check the files against the recorded checksums",
    )
    p.add_argument(
        "--expect",
        default=None,
        metavar="REFERENCE_JSON",
        help="with --verify: check against this reference_returns.json (e.g. a committed one) "
        "instead of the build folder's own",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    out = Path(args.out).resolve()
    if args.expect and not args.verify:
        raise SystemExit("error: --expect goes with --verify (it names the record to check)")
    if args.verify:
        expect = Path(args.expect) if args.expect else None
        lines = verify(out, args.envs, expect)
        print("\n".join(lines) + f"\nall {len(lines)} files match {expect or out / REFERENCE_FILE}")
        return {}
    args.numerics_record = set_numerics(args.numerics)
    if args.medium_only_from:
        if args.stage != "all" or args.medium_checkpoint:
            raise SystemExit("error: --medium_only_from takes the stage and checkpoint it records")
        refs = rebuild_medium(out, args.envs, args)
        print(f"medium and medium-replay of {', '.join(refs)} match {args.medium_only_from}")
        return refs
    envs = args.envs or list(ENVS)
    unknown = [e for e in envs if e not in ENVS]
    if unknown:
        raise SystemExit(f"error: no build settings for {unknown}; known: {list(ENVS)}")
    medium_choices = parse_medium_choices(args.medium_checkpoint, envs)
    if args.stage in ("train", "all"):
        for env_id in envs:
            train_agent(out, env_id, args.seed, args.threads, args.numerics_record)
    if args.stage not in ("record", "all"):
        return {}
    refs = {e: record_env(out, e, args, medium_choices.get(e)) for e in envs}
    ref_file = out / REFERENCE_FILE
    existing = json.loads(ref_file.read_text()) if ref_file.exists() else {}
    existing.update(refs)
    ref_file.write_text(json.dumps(existing, indent=1) + "\n")
    for env_id, ref in refs.items():
        print(
            f"{env_id}: random {ref['random_return']:.1f}, expert {ref['expert_return']:.1f}, "
            f"medium agent {ref['medium_agent']}; "
            + ", ".join(
                f"{q} {d['return_mean']:.1f} ({d['normalized_score']:.1f})"
                for q, d in ref["datasets"].items()
            )
        )
    print(f"reference returns and checksums written to {ref_file}")
    return refs


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    cli.cli(main, extra_errors=(ChecksumError,))
