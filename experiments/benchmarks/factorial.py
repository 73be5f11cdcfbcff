"""Two settings crossed (a 2x2 design), paired by seed: each one's effect and their interaction.

Four report folders (written with ``sweep.py report --evaluations``) ran one config (a gin
file's stem) at the same seeds: with neither setting changed (``BASE``), with only the first
(``A``), with only the second (``B``) and with both (``AB``). Per seed ``s`` and score (the
sweep report's final evaluation, mean of the last ``--last`` and area under the curve), with
``x(s)`` that corner's score:

* the effect of A with B off, ``A(s) - BASE(s)``, and with B on, ``AB(s) - B(s)``;
* the main effect of A, the mean of the two: ``(A + AB - B - BASE) / 2`` (likewise for B);
* the interaction, ``(AB - B) - (A - BASE) = AB - A - B + BASE``: how much more A adds when B
  is on (zero when the two effects add up).

Each row is the mean over the seeds shared by all four corners, with a 95% bootstrap interval over
those seeds (:func:`~super_sac.sweep.stats.paired_entry`), and how many seeds are above and below
zero. The pairings are ``pooled_paired.py``'s (:func:`pooled_paired.paired_scores`).

Usage (the pixel cartpole_swingup runs; A is the delta-orthogonal init, B the pixel shift)::

    python experiments/benchmarks/factorial.py --config drqv1 --a_name init --b_name shift \\
        experiments/benchmarks/results/dmc_cartpole_pixels_drq_init \\
        experiments/benchmarks/results/dmc_cartpole_pixels_delta_init \\
        experiments/benchmarks/results/dmc_cartpole_pixels_shift_only \\
        experiments/benchmarks/results/dmc_cartpole_pixels_default_encoder
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pooled_paired  # the sibling script, as the other benchmarks import bench_utils

from super_sac.sweep.report import paired_cell
from super_sac.sweep.stats import SCORES, paired_entry

Effects = dict[str, dict[str, dict[int, float]]]  # row -> score -> seed -> value


def effects(
    base: str | Path,
    a: str | Path,
    b: str | Path,
    ab: str | Path,
    config: str,
    env: str | None = None,
    last: int = 3,
) -> Effects:
    """Per seed and score, the simple effects, main effects and interaction of the 2x2 design
    (module docstring), over the seeds that all four folders share.

    :param base: the report folder with neither setting; ``a``, ``b``: with one of them;
        ``ab``: with both. Each holds runs of ``config``.
    :raises SystemExit: when a folder lacks the config, or the four share no seed.
    """
    paired = pooled_paired.paired_scores
    a_off = paired(a, config, config, env, last, base_folder=base)  # A - BASE
    a_on = paired(ab, config, config, env, last, base_folder=b)  # AB - B
    b_off = paired(b, config, config, env, last, base_folder=base)  # B - BASE
    b_on = paired(ab, config, config, env, last, base_folder=a)  # AB - A
    seeds = sorted(set.intersection(*(set(d["final"]) for d in (a_off, a_on, b_off, b_on))))
    if not seeds:
        raise SystemExit("error: the four report folders share no seed")
    rows: Effects = {
        "A, B off": {},
        "A, B on": {},
        "A, main": {},
        "B, A off": {},
        "B, A on": {},
        "B, main": {},
        "interaction": {},
    }
    for score in SCORES:
        ao, an, bo, bn = (d[score] for d in (a_off, a_on, b_off, b_on))
        rows["A, B off"][score] = {s: ao[s] for s in seeds}
        rows["A, B on"][score] = {s: an[s] for s in seeds}
        rows["A, main"][score] = {s: (ao[s] + an[s]) / 2 for s in seeds}
        rows["B, A off"][score] = {s: bo[s] for s in seeds}
        rows["B, A on"][score] = {s: bn[s] for s in seeds}
        rows["B, main"][score] = {s: (bo[s] + bn[s]) / 2 for s in seeds}
        rows["interaction"][score] = {s: an[s] - ao[s] for s in seeds}
    return rows


def table(
    folders: list[str | Path],
    config: str,
    a_name: str = "A",
    b_name: str = "B",
    env: str | None = None,
    last: int = 3,
) -> str:
    """The Markdown table of :func:`effects`, with the settings named ``a_name`` and ``b_name``."""
    if len(folders) != 4:
        raise SystemExit(f"error: give four report folders (BASE A B AB), not {len(folders)}")
    rows = effects(*folders, config=config, env=env, last=last)
    seeds = ", ".join(str(s) for s in rows["interaction"]["final"])
    a, b = a_name, b_name
    labels = {
        "A, B off": f"{a}, with {b} off",
        "A, B on": f"{a}, with {b} on",
        "A, main": f"{a}, main effect (mean of the two)",
        "B, A off": f"{b}, with {a} off",
        "B, A on": f"{b}, with {a} on",
        "B, main": f"{b}, main effect (mean of the two)",
        "interaction": f"interaction (what {a} adds with {b} on, minus with {b} off)",
    }
    lines = [
        f"{config}: {a_name} and {b_name} crossed, paired by seed (seeds {seeds}): the mean "
        "effect with a 95% bootstrap interval and the seeds above (up) and below (down) zero",
        "",
        *(f"- {key}: {folder}" for key, folder in zip(("BASE", "A", "B", "AB"), folders)),
        "",
        f"| effect | final | last-{last} mean | AUC |",
        "|---|---|---|---|",
    ]
    for row, by_score in rows.items():
        cells = " | ".join(paired_cell(paired_entry(by_score[score])) for score in SCORES)
        lines.append(f"| {labels[row]} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folder", nargs=4, help="report folders with evaluations/, in the order BASE A B AB"
    )
    parser.add_argument("--config", required=True, help="the config all four ran (gin stem)")
    parser.add_argument("--a_name", default="A", help="what the first setting is called")
    parser.add_argument("--b_name", default="B", help="what the second setting is called")
    parser.add_argument("--env", default=None, help="default: the folders' only env")
    parser.add_argument("--last", type=int, default=3, help="evaluations in the last-k mean")
    args = parser.parse_args(argv)
    print(table(args.folder, args.config, args.a_name, args.b_name, args.env, args.last), end="")


if __name__ == "__main__":
    main()
