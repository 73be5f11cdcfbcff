"""Two configs paired by seed within each of several report folders, and pooled over the folders.

Runs repeat to the digit on one processor and differ between processors (the MinAtar section of
``experiments/benchmarks/README.md``), so the seeds of one comparison run on another machine are
another draw of the same experiment. ``sweep.py report --paired`` pairs two configs within one
sweep; this script takes report folders written with ``sweep.py report --evaluations`` on
different machines, each holding both configs, and prints for each folder and pooled over all:

* the seed-by-seed differences ``NEW - BASE`` of the sweep report's three scores (the final
  evaluation, the mean of the last ``--last`` and the area under the curve), paired as
  ``sweep.py report --paired`` pairs them (:func:`paired_differences`);
* their mean with a 95% bootstrap interval, and how many are above and below zero. The pooled
  interval resamples each folder's seeds within that folder (:func:`pooled_paired_entry`), so
  every resample keeps as many seeds per machine as the data has.

Usage::

    python experiments/benchmarks/pooled_paired.py \\
        experiments/benchmarks/results/markov_minatar_breakout_5seeds \\
        experiments/benchmarks/results/markov_minatar_breakout_weights \\
        --base basic_online --new markov_online

With ``--base_folder DIR`` the base runs come from ``DIR`` instead, so two report folders that
ran the same gin file under different bindings (the config names are equal) pair by seed: the
``--base`` config of ``DIR`` against the ``--new`` config of each folder, e.g.::

    python experiments/benchmarks/pooled_paired.py \\
        experiments/benchmarks/results/dmc_cartpole_pixels_default_encoder \\
        --base_folder experiments/benchmarks/results/dmc_cartpole_pixels_drq_init \\
        --base drqv1 --new drqv1
"""

from __future__ import annotations

import argparse
from pathlib import Path

from super_sac.sweep.report import paired_cell, paired_differences
from super_sac.sweep.runs import collect
from super_sac.sweep.stats import SCORES, paired_entry, pooled_paired_entry

Differences = dict[str, dict[int, float]]  # score -> seed -> NEW - BASE


_BASE_LABEL = "base folder's "  # the prefix that keeps --base_folder's config apart


def _with_base_from(data: dict, base_data: dict, base: str) -> tuple[dict, str]:
    """``data`` with the runs of ``base_data``'s config ``base`` added under a label of their
    own (the folders may name their configs alike), and that label."""
    label = _BASE_LABEL + base
    data = dict(data, curves=dict(data["curves"]), seeds=dict(data["seeds"]))
    for (config, env), curves in base_data["curves"].items():
        if config == base:
            data["curves"][(label, env)] = curves
            data["seeds"][(label, env)] = base_data["seeds"][(config, env)]
    data["envs"] = list(dict.fromkeys([*data["envs"], *base_data["envs"]]))
    data["configs"] = [*data["configs"], label]
    return data, label


def paired_scores(
    folder: str | Path,
    base: str,
    new: str,
    env: str | None = None,
    last: int = 3,
    base_folder: str | Path | None = None,
) -> Differences:
    """``{score: {seed: new - base}}`` over the seeds at which the report folder holds both
    configs on ``env`` (default: the folder's only env): the sweep report's own pairing
    (:func:`paired_differences`) of the folder's archived runs.

    :param base_folder: a report folder to read the ``base`` config's runs from instead of
        ``folder`` (e.g. the same gin file run under other bindings).
    :raises SystemExit: when a config is missing, the env is ambiguous or no seed is shared.
    """
    data = collect([], archives=[folder])
    base_source = folder
    if base_folder is not None:
        base_data = collect([], archives=[base_folder])
        if not any(config == base for config, _ in base_data["curves"]):
            have = sorted({c for c, _ in base_data["curves"]})
            raise SystemExit(
                f"error: {base_folder} has no run of {base!r} (it has {', '.join(have)})"
            )
        data, base = _with_base_from(data, base_data, base)
        base_source = base_folder
    if env is None:
        if len(data["envs"]) != 1:
            raise SystemExit(f"error: {folder} holds runs on {data['envs']}: name one with --env")
        env = data["envs"][0]
    for config, source in ((base, base_source), (new, folder)):
        if not data["curves"].get((config, env)):
            have = sorted(
                c for c, e in data["curves"] if e == env and not c.startswith(_BASE_LABEL)
            )
            name = config.removeprefix(_BASE_LABEL)
            raise SystemExit(
                f"error: {source} has no run of {name!r} on {env} (it has {', '.join(have)})"
            )
    pairs = [
        p
        for p in paired_differences(data, base, last=last)
        if (p["config"], p["env"]) == (new, env)
    ]
    if not pairs:
        raise SystemExit(f"error: {folder}: {base} and {new} share no seed")
    return {score: {int(k): v for k, v in pairs[0][score]["per_seed"].items()} for score in SCORES}


def table(
    folders: list[str | Path],
    base: str,
    new: str,
    env: str | None = None,
    last: int = 3,
    base_folder: str | Path | None = None,
) -> str:
    """The Markdown table: a row per folder, then the pooled row when there are several."""
    diffs = [paired_scores(folder, base, new, env, last, base_folder) for folder in folders]
    base_name = base if base_folder is None else f"{base} of {base_folder}"
    lines = [
        f"{new} minus {base_name}, paired by seed: the mean difference with a 95% bootstrap "
        "interval and the seeds above (up) and below (down) zero",
        "",
        f"| report folder | seeds | final | last-{last} mean | AUC |",
        "|---|---|---|---|---|",
    ]
    for folder, d in zip(folders, diffs):
        seeds = ", ".join(str(k) for k in d["final"])
        cells = " | ".join(paired_cell(paired_entry(d[score])) for score in SCORES)
        lines.append(f"| {folder} | {seeds} | {cells} |")
    if len(folders) > 1:
        cells = " | ".join(
            paired_cell(pooled_paired_entry([d[score] for d in diffs])) for score in SCORES
        )
        total = sum(len(d["final"]) for d in diffs)
        lines.append(f"| pooled, by folder | {total} pairs | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="+", help="report folders with evaluations/")
    parser.add_argument("--base", required=True, help="the config subtracted (gin stem)")
    parser.add_argument("--new", required=True, help="the config compared (gin stem)")
    parser.add_argument("--env", default=None, help="default: the folders' only env")
    parser.add_argument("--last", type=int, default=3, help="evaluations in the last-k mean")
    parser.add_argument(
        "--base_folder",
        default=None,
        help="read the --base config's runs from this report folder instead (the same gin "
        "file run under other bindings)",
    )
    args = parser.parse_args(argv)
    print(table(args.folder, args.base, args.new, args.env, args.last, args.base_folder), end="")


if __name__ == "__main__":
    main()
