"""Plot the evaluation curves of one or a few runs (their evaluations.csv files) into a PNG.

python experiments/plot.py saves/sac_Pendulum-v1_0 saves/td3_Pendulum-v1_0 --out curves.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from super_sac.sweep.plots import plot_runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("run_dirs", nargs="+", help="run directories holding evaluations.csv")
    p.add_argument("--metric", default="return_mean", help="a column of evaluations.csv")
    p.add_argument("--out", default="curves.png", help="the PNG to write")
    args = p.parse_args(argv)
    path = plot_runs(args.run_dirs, args.out, args.metric)
    print(f"wrote {Path(path)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ValueError, FileNotFoundError) as err:
        sys.exit(f"error: {err}")
