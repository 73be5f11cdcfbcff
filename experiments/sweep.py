"""Run a grid of training runs (configs x envs x seeds) and report it.

    python experiments/sweep.py run --root sweeps --name pendulum --configs sac.gin td3.gin \
        --envs Pendulum-v1 --seeds 0-4 --steps 20000 --workers 2
    python experiments/sweep.py report sweeps/pendulum
    python experiments/sweep.py report sweeps/pendulum sweeps/pendulum_sb3 --out pendulum_vs_sb3
    # more seeds into a committed report whose sweep folder is gone: its copied evaluations join
    python experiments/sweep.py report sweeps/pendulum_seed4 --archive pendulum_vs_sb3 \
        --out pendulum_vs_sb3 --evaluations
    # a committed report against its own data (rebuilt from its copied evaluations)
    python experiments/sweep.py check experiments/benchmarks/results/pendulum_vs_sb3

Each trial is a normal run directory, sweeps/pendulum/<config>/<env>/seed_<k>. Running the same
command again finishes the grid: finished trials are skipped, interrupted ones resume from their
newest checkpoint. A different grid in the same folder is refused. Backends: local (a pool of
worker processes on this machine, the default) and ray (Ray Tune; pip install "super_sac[sweep]"):

    python experiments/sweep.py run ... --backend ray --cpus 8          # a local Ray, 8 CPUs
    python experiments/sweep.py run ... --backend ray --address auto    # a running Ray cluster
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from pathlib import Path

from super_sac.sweep.archive import index_evaluations
from super_sac.sweep.check import check_report
from super_sac.sweep.grid import MANIFEST, Grid, check_script_args
from super_sac.sweep.local import archived_trials, run_local
from super_sac.sweep.report import parse_references, write_report

ROOT = Path(__file__).resolve().parents[1]


def _check_backend_options(args: argparse.Namespace) -> None:
    """Refuse options of the other backend, which this one would ignore."""
    other = (
        {"--workers": args.workers != 1, "--gpus": args.gpus is not None}
        if args.backend == "ray"
        else {
            "--address": args.address is not None,
            "--cpus": args.cpus is not None,
            "--gpus_per_trial": args.gpus_per_trial != 0,
        }
    )
    given = [flag for flag, set_ in other.items() if set_]
    if given:
        backend = "local" if args.backend == "ray" else "ray"
        raise ValueError(
            f"{', '.join(given)} apply to the {backend} backend, not --backend {args.backend}. "
            f"Fix: leave them out, or run with --backend {backend}"
        )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run (or finish) a grid of trials")
    run.add_argument("--root", required=True, help="folder of the sweeps")
    run.add_argument("--name", required=True, help="the sweep's folder under --root")
    run.add_argument("--configs", nargs="+", required=True, help="gin files")
    run.add_argument("--envs", nargs="+", required=True, help="gymnasium env ids")
    run.add_argument("--seeds", default="0-4", help="'0-4' (inclusive) or '0,2,5'")
    run.add_argument("--steps", type=int, default=None, help="super_sac.num_steps_online")
    run.add_argument("--gin_bindings", action="append", default=[], help="repeatable")
    run.add_argument(
        "--script", default=None, help="training script (default: experiments/gym/train_gym.py)"
    )
    run.add_argument(
        "--script_args",
        default="",
        help="further options of the training script for every trial, one quoted string, "
        'e.g. "--action_repeat 8 --fast_render"',
    )
    run.add_argument("--backend", choices=["local", "ray"], default="local")
    run.add_argument("--workers", type=int, default=1, help="trials at a time (local backend)")
    run.add_argument(
        "--cpus_per_trial",
        type=int,
        default=1,
        help="torch threads per trial; with ray also the CPUs Tune reserves for it",
    )
    run.add_argument("--gpus_per_trial", type=float, default=0, help="GPUs per trial (ray)")
    run.add_argument(
        "--gpus",
        default=None,
        help="local: GPU ids the worker slots cycle through, e.g. '0,1' (CUDA_VISIBLE_DEVICES "
        "per trial; --workers 4 --gpus 0,1 runs two trials on each GPU)",
    )
    run.add_argument(
        "--progress_interval", type=float, default=60, help="seconds between status lines"
    )
    run.add_argument(
        "--address", default=None, help="ray: a running cluster ('auto'); default: a local Ray"
    )
    run.add_argument(
        "--cpus", type=int, default=None, help="ray: CPUs of the local Ray (default: all)"
    )
    run.add_argument(
        "--order",
        choices=["config", "seed"],
        default="config",
        help="local: start the trials config by config (default) or seed by seed (every config "
        "at seed 0 first: a sweep stopped early has the same seeds of every config)",
    )
    run.add_argument(
        "--max_trials",
        type=int,
        default=None,
        help="local: start at most this many unfinished trials, then stop (a time-boxed job "
        "runs the sweep in slices; run again for the next)",
    )
    run.add_argument("--max_failures", type=int, default=0, help="retries of a failed trial")
    run.add_argument("--no_report", action="store_true", help="skip the report at the end")
    run.add_argument(
        "--archive",
        action="append",
        default=[],
        metavar="DIR",
        help="local: a report folder whose copied evaluations hold trials of this grid that "
        "finished in an earlier sweep folder (e.g. on another machine): they are not run again "
        "(their settings must match this sweep's; repeatable)",
    )
    report = sub.add_parser(
        "report", help="tables and learning curves of a sweep folder, or of several side by side"
    )
    report.add_argument(
        "sweep_dir",
        nargs="*",
        help="sweep folders (e.g. ours and SB3's); none with --archive: a report of committed "
        "evaluations alone",
    )
    report.add_argument(
        "--out",
        default=None,
        help="folder of the report (default: the sweep; several sweeps, or archives alone: "
        "required)",
    )
    report.add_argument(
        "--last", type=int, default=3, help="score also the mean of each run's last N evaluations"
    )
    report.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="per seed, the steps of the first evaluation at or above this score (e.g. 475)",
    )
    report.add_argument("--metric", default="eval_return", help="eval_return | eval_length")
    report.add_argument("--no_plot", action="store_true", help="tables only")
    report.add_argument(
        "--evaluations",
        action="store_true",
        help="also copy every finished trial's evaluations.csv into OUT/evaluations/ "
        "(<config>_<env>_seed<k>.csv), the data behind a committed table",
    )
    report.add_argument(
        "--archive",
        action="append",
        default=[],
        metavar="DIR",
        help="a report folder written with --evaluations (or its evaluations/ folder) whose "
        "runs join the report as finished trials, e.g. the seeds of a sweep folder that is "
        "gone; may be the --out folder itself (repeatable)",
    )
    report.add_argument(
        "--replace_evaluations",
        action="store_true",
        help="with --evaluations: allow dropping runs OUT/evaluations holds and this report "
        "does not (refused without it; --archive OUT keeps them)",
    )
    report.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="ENV=LOW:HIGH",
        help="scores that normalise ENV to 0 (LOW) and 1 (HIGH), e.g. random and expert; "
        "adds an aggregate over the envs that have one (repeatable)",
    )
    report.add_argument(
        "--paired",
        default=None,
        metavar="CONFIG",
        help="also compare every other config with CONFIG (a gin file's stem, e.g. sac) seed by "
        "seed: the mean of the per-seed differences with a 95%% bootstrap interval",
    )
    check = sub.add_parser(
        "check",
        help="check committed reports against their own data: rebuild each from the "
        "evaluations copied beside it, with the settings its report.json records, and compare",
    )
    check.add_argument("folder", nargs="+", help="report folders written with --evaluations")
    index = sub.add_parser(
        "index",
        help="write the index.json of a report's evaluations/ copied before indexes existed, "
        "from the manifests of its sweeps (so --archive can check their settings)",
    )
    index.add_argument("folder", help="a report folder (or its evaluations/ folder)")
    index.add_argument(
        "--manifest", action="append", required=True, help="a sweep's manifest (repeatable)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        grid = Grid.make(
            args.configs,
            args.envs,
            args.seeds,
            args.steps,
            args.gin_bindings,
            args.script,
            shlex.split(args.script_args),
        )
        sweep_dir = Path(args.root) / args.name
        if not (sweep_dir / MANIFEST).exists():
            check_script_args(grid.script_args)
        script = args.script or ROOT / "experiments" / "gym" / "train_gym.py"
        _check_backend_options(args)
        if args.backend == "ray":
            if args.archive:
                raise ValueError("--archive applies to the local backend")
            if args.order != "config" or args.max_trials is not None:
                raise ValueError(
                    "--order seed and --max_trials apply to the local backend; Tune schedules "
                    "ray trials itself"
                )
            from super_sac.sweep.ray_backend import run_ray

            results = run_ray(
                grid,
                sweep_dir,
                script,
                address=args.address,
                num_cpus=args.cpus,
                cpus_per_trial=args.cpus_per_trial,
                gpus_per_trial=args.gpus_per_trial,
                max_failures=args.max_failures,
                threads=args.cpus_per_trial,
                progress_interval=args.progress_interval,
            )
        else:
            done = archived_trials(grid, script, args.archive) if args.archive else set()
            results = run_local(
                grid,
                sweep_dir,
                workers=args.workers,
                script=script,
                max_failures=args.max_failures,
                threads=args.cpus_per_trial,
                devices=args.gpus.split(",") if args.gpus else None,
                progress_interval=args.progress_interval,
                order=args.order,
                max_trials=args.max_trials,
                done_elsewhere=done,
            )
        left = len(grid.trials(sweep_dir)) - len(results)
        if left:
            print(f"{left} trial(s) not started (--max_trials): run the same command to go on")
        failed = [r for r in results if r.status in ("failed", "stopped")]
        for r in failed:
            print(f"{r.status.upper()} {r.trial.key}: {r.error}", file=sys.stderr)
        if not args.no_report:
            files = write_report(sweep_dir)
            print(f"report: {', '.join(str(f) for f in files.values())}")
        return 1 if failed else 0
    if args.command == "check":
        failed = 0
        for folder in args.folder:
            try:
                differences = check_report(folder)
            except (ValueError, FileNotFoundError) as err:
                failed += 1
                print(f"{folder}: cannot check: {err}")
                continue
            failed += bool(differences)
            print(f"{folder}: " + ("holds" if not differences else "DIFFERS"))
            for line in differences:
                print(f"  {line}")
        if failed:
            print(
                f"{failed} of {len(args.folder)} reports differ from their data or cannot be "
                "checked: pass report folders written with --evaluations, and rerun the report "
                "command that made a differing one (its README section names it)",
                file=sys.stderr,
            )
        return 1 if failed else 0
    if args.command == "index":
        entries = index_evaluations(args.folder, args.manifest)
        print(f"indexed {len(entries)} runs")
        return 0
    if args.replace_evaluations and not args.evaluations:
        raise ValueError(
            "--replace_evaluations replaces the runs that --evaluations copies; without "
            "--evaluations nothing is copied. Fix: add --evaluations, or leave it out"
        )
    references = parse_references(args.reference)
    files = write_report(
        args.sweep_dir,
        args.metric,
        not args.no_plot,
        references,
        out=args.out,
        last=args.last,
        threshold=args.threshold,
        evaluations=args.evaluations,
        archives=args.archive,
        replace_evaluations=args.replace_evaluations,
        paired=args.paired,
    )
    print(Path(files["markdown"]).read_text())
    print(f"report: {', '.join(str(f) for f in files.values())}")
    return 0


def cli(argv: list[str] | None = None) -> int | str:
    """:func:`main` as the command line runs it: a refused setting or a missing file becomes
    an ``error: ...`` message in place of a traceback, Ctrl-C a note on how to resume.

    :return: the exit status, or the message that ``sys.exit`` prints with status 1.
    """
    try:
        return main(argv)
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        return f"error: {err}"
    except KeyboardInterrupt:
        return (
            "stopped: the running trials were stopped at their last checkpoint; run the same "
            "command to resume them (finished trials are kept)"
        )


if __name__ == "__main__":
    # SIGTERM (a scheduler, kill) unwinds like Ctrl-C, so the running trials are stopped too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(cli())
