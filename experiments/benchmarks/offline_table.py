"""The offline tables of ``experiments/benchmarks/README.md``: per method, each seed's mean of
its last evaluations as a D4RL normalized score, and the mean over seeds with a 95% bootstrap
interval, from a report folder written with ``sweep.py report --evaluations``.

    cd experiments/benchmarks/results
    python ../offline_table.py offline18_medium --title "medium (dataset 33.5)" \\
        --extra "without standardisation (seed 0)=offline18_nostd_seed0/medium"

The normalized score is ``100 * (return - random) / (expert - random)`` with the reference
returns of the dataset build (``--reference``, default HalfCheetah-v5's of
``results/offline18/reference_returns.json``). ``--extra LABEL=FOLDER`` adds a column with the
seed-0 score of each of our methods in another report folder (blank where it has none, and for
the peers, whose settings such a variant does not change). ``--from_step N`` scores each seed by
the mean of all its evaluations at phase step ``N`` or later instead (the plateau statistic the
README quotes with ``--from_step 15000``: 18 evaluations of a 100,000-step run).
``--paired FOLDER[:CONFIG]`` adds, under the table, each config's seed-by-seed difference from
the same config (or ``CONFIG``) in another report folder: the per-seed differences, their mean
with a 95% bootstrap interval over the seeds both have, and how many are above and below zero
(variants of one gin file that differ in their script's arguments are separate sweeps, so
``sweep.py report --paired`` cannot pair them):

    python ../offline_table.py offline18p_replay_bcloss/preimage --reference=-274.8601:4746.3210 \
        --paired offline18p_replay_bcdet
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from super_sac.sweep.archive import archived_runs
from super_sac.sweep.stats import paired_entry, stratified_bootstrap_ci

# config stem -> row label, in table order
LABELS = {
    "bc": "ours BC",
    "awac": "ours AWAC-style AFBC",
    "crr": "ours CRR-style AFBC",
    "awac_per": "ours AWAC-style AFBC + afbc_per",
    "crr_per": "ours CRR-style AFBC + afbc_per",
    "d3rlpy_bc": "d3rlpy BC",
    "d3rlpy_iql": "d3rlpy IQL",
    "d3rlpy_td3bc": "d3rlpy TD3+BC",
    "d3rlpy_awac": "d3rlpy AWAC (temperature neutralised)",
    "d3rlpy_awac_stock": "d3rlpy AWAC (stock)",
}


def last_means(
    folder: str | Path, last: int, low: float, high: float, from_step: int | None = None
) -> dict[str, dict[int, float]]:
    """``{config: {seed: normalized mean of the last ``last`` evaluations}}`` of a report folder,
    or, with ``from_step``, of every evaluation at that phase step or later."""
    if last < 1:
        raise SystemExit(f"error: --last {last}: average at least the final evaluation")
    runs = archived_runs(folder)
    envs = sorted({run.env for run in runs})
    if len(envs) > 1:
        raise SystemExit(f"error: {folder} holds runs on {envs}: a table is of one env")
    out: dict[str, dict[int, float]] = {}
    for run in runs:
        returns = [float(r["return_mean"]) for r in run.rows]
        if from_step is None:
            returns = returns[-last:]
        else:
            returns = [x for x, r in zip(returns, run.rows) if int(r["phase_step"]) >= from_step]
            if not returns:
                raise SystemExit(
                    f"error: --from_step {from_step}: {run.config} seed {run.seed} has no "
                    "evaluation at that phase step or later; lower it or use --last"
                )
        score = 100 * (float(np.mean(returns)) - low) / (high - low)
        out.setdefault(run.config, {})[run.seed] = score
    return out


def table(
    folder: str | Path,
    title: str,
    last: int = 5,
    reference: tuple[float, float] = (-274.8601, 4412.4562),
    extras: list[tuple[str, str]] | None = None,
    from_step: int | None = None,
    paired: list[str] | None = None,
) -> str:
    """The Markdown table of one report folder, and with ``paired`` (``FOLDER`` or
    ``FOLDER:CONFIG`` each) the seed-by-seed differences (see the module docstring)."""
    scores = last_means(folder, last, *reference, from_step)
    extra = [(label, last_means(path, last, *reference, from_step)) for label, path in extras or []]
    seeds = sorted({s for by_seed in scores.values() for s in by_seed})
    header = [title, *(f"seed {s}" for s in seeds), "mean [95% CI]", *(e[0] for e in extra)]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    order = [c for c in LABELS if c in scores] + sorted(c for c in scores if c not in LABELS)
    for config in order:
        values = [scores[config][s] for s in seeds if s in scores[config]]
        cells = [f"{scores[config][s]:.1f}" if s in scores[config] else "-" for s in seeds]
        cells.append(mean_with_interval(values))
        for _, by_config in extra:
            value = None if config.startswith("d3rlpy") else by_config.get(config, {}).get(0)
            cells.append("" if value is None else f"{value:.1f}")
        lines.append("| " + " | ".join([LABELS.get(config, config), *cells]) + " |")
    if paired:
        lines += [
            "",
            "| config | minus the same in | per seed | mean [95% CI] | seeds |",
            "| --- | --- | --- | --- | --- |",
        ]
        for spec in paired:
            path, config = _paired_spec(spec)
            base = last_means(path, last, *reference, from_step)
            lines += paired_lines(scores, spec, base, config)
    return "\n".join(lines) + "\n"


def _paired_spec(spec: str) -> tuple[str, str | None]:
    """``FOLDER`` or ``FOLDER:CONFIG`` (split at the last colon, so a folder's path may hold
    one) as the folder and the config (``None``: the same config)."""
    if Path(spec).is_dir():
        return spec, None
    path, _, config = spec.rpartition(":")
    if path and Path(path).is_dir() and config:
        return path, config
    raise SystemExit(
        f"error: --paired {spec}: no such report folder (give FOLDER or FOLDER:CONFIG)"
    )


def paired_lines(
    scores: dict[str, dict[int, float]],
    base_label: str,
    base: dict[str, dict[int, float]],
    base_config: str | None = None,
) -> list[str]:
    """Markdown rows of each config's seed-by-seed difference from ``base``'s config of the same
    name (or ``base_config``), over the seeds both have."""
    lines = []
    for config in sorted(scores):
        other = base.get(base_config or config)
        if other is None:
            raise SystemExit(
                f"error: --paired {base_label}: it has no config {base_config or config!r} "
                f"(it has {', '.join(sorted(base))}); name one as FOLDER:CONFIG"
            )
        seeds = sorted(set(scores[config]) & set(other))
        if not seeds:
            raise SystemExit(f"error: --paired {base_label}: no seed in common with {config}")
        entry = paired_entry({s: scores[config][s] - other[s] for s in seeds})
        per_seed = ", ".join(f"{s}: {d:+.1f}" for s, d in entry["per_seed"].items())
        mean = entry["mean"]
        cell = _cell(mean["value"], mean["ci_low"], mean["ci_high"], entry["n"], signed=True)
        lines.append(
            f"| {LABELS.get(config, config)} | {base_label} | {per_seed} | {cell} | "
            f"{entry['higher']} up, {entry['lower']} down |"
        )
    return lines


def mean_with_interval(values: list[float], signed: bool = False) -> str:
    """The mean over seeds with its 95% bootstrap interval; one seed gets the mean alone (a
    bootstrap over one value is ``[x, x]``, which would read as no spread at all)."""
    if len(values) < 2:
        return _cell(float(np.mean(values)), 0.0, 0.0, len(values), signed)
    return _cell(*stratified_bootstrap_ci({"runs": values}, np.mean, seed=0), len(values), signed)


def _cell(mean: float, low: float, high: float, n: int, signed: bool = False) -> str:
    """``mean [low, high]`` to one decimal (``+`` shown when ``signed``); the mean alone for one
    seed, whose bootstrap interval ``[x, x]`` would read as no spread at all."""
    sign = "+" if signed else ""
    return f"{mean:{sign}.1f}" if n < 2 else f"{mean:{sign}.1f} [{low:.1f}, {high:.1f}]"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "folder", help="a report folder with evaluations/ (sweep.py report --evaluations)"
    )
    p.add_argument("--title", default="dataset", help="the first header cell")
    p.add_argument("--last", type=int, default=5, help="evaluations averaged per seed")
    p.add_argument(
        "--reference",
        default="-274.8601:4412.4562",
        metavar="RANDOM:EXPERT",
        help="the returns that normalise to 0 and 100",
    )
    p.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="LABEL=FOLDER",
        help="add a column of each of our methods' seed-0 score in another report folder",
    )
    p.add_argument(
        "--from_step",
        type=int,
        default=None,
        help="score each seed by its evaluations at this phase step or later (not --last)",
    )
    p.add_argument(
        "--paired",
        action="append",
        default=[],
        metavar="FOLDER[:CONFIG]",
        help="print each config's seed-by-seed difference from the same config (or CONFIG) in "
        "another report folder (repeatable)",
    )
    args = p.parse_args(argv)
    low, _, high = args.reference.partition(":")
    if any("=" not in e for e in args.extra):
        p.error("--extra takes LABEL=FOLDER")
    extras = [tuple(e.split("=", 1)) for e in args.extra]
    reference = (float(low), float(high))
    print(
        table(args.folder, args.title, args.last, reference, extras, args.from_step, args.paired),
        end="",
    )


if __name__ == "__main__":
    main()
