"""Two independent groups of runs (ours against a paper's published seeds): the permutation
test and the bootstrap interval of the difference, checked on values small enough to count by
hand, and the script that compares a report folder with a published per-seed curve."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from script_loader import load_script

from super_sac.sweep.stats import permutation_test, two_group_entry

_BENCH = Path(__file__).resolve().parents[1] / "experiments" / "benchmarks"


def _script():
    return load_script(_BENCH / "published_difference.py")


def test_exact_permutation_test_counts_every_split_by_hand():
    # pooled {1,..,5}; the C(5,2) = 10 choices of group a have sums 3,4,5,6,5,6,7,7,8,9 and
    # difference (5s - 30) / 6. Observed: a = {1, 2}, s = 3, d = -2.5. Only s = 3 is as low;
    # |d'| >= 2.5 for s = 3 and s = 9; every split has d' >= -2.5.
    out = permutation_test([1.0, 2.0], [3.0, 4.0, 5.0])
    assert out["exact"] and out["splits"] == 10
    assert out["difference"] == pytest.approx(-2.5)
    assert out["p_lower"] == pytest.approx(0.1)
    assert out["p_two_sided"] == pytest.approx(0.2)
    assert out["p_higher"] == pytest.approx(1.0)


def test_equal_groups_are_ties_everywhere():
    out = permutation_test([1.0, 1.0], [1.0, 1.0, 1.0])
    assert out["difference"] == 0.0
    assert out["p_lower"] == out["p_higher"] == out["p_two_sided"] == 1.0


def test_sampled_permutation_test_is_seeded_and_near_the_exact_value():
    a, b = [1.0, 2.0], [3.0, 4.0, 5.0]
    first = permutation_test(a, b, exact_limit=1, permutations=20_000, seed=3)
    again = permutation_test(a, b, exact_limit=1, permutations=20_000, seed=3)
    assert not first["exact"] and first["splits"] == 20_000
    assert first == again
    # (hits + 1) / (m + 1) around the exact 0.1; the binomial sd is 0.002
    assert abs(first["p_lower"] - 0.1) < 0.01
    assert first["p_lower"] > 0


def test_exact_test_matches_a_plain_enumeration():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 4).tolist(), rng.normal(1, 1, 6).tolist()
    pooled = a + b
    d = np.mean(a) - np.mean(b)
    lower = total = 0
    for chosen in itertools.combinations(range(10), 4):
        x = [pooled[i] for i in chosen]
        y = [pooled[i] for i in range(10) if i not in chosen]
        lower += np.mean(x) - np.mean(y) <= d + 1e-12
        total += 1
    assert permutation_test(a, b)["p_lower"] == pytest.approx(lower / total)


def test_difference_interval_by_hand():
    # b is constant, so a resampled difference is the mean of two draws from {0, 1} minus 5:
    # -5 (1/4), -4.5 (1/2), -4 (1/4); the 2.5 and 97.5 percentiles are -5 and -4.
    out = two_group_entry([0.0, 1.0], [5.0])
    assert out["difference"] == {"value": -4.5, "ci_low": -5.0, "ci_high": -4.0}
    assert out["a"]["mean"] == {"value": 0.5, "ci_low": 0.0, "ci_high": 1.0}
    assert out["b"] == {"n": 1, "mean": {"value": 5.0, "ci_low": 5.0, "ci_high": 5.0}}
    assert out["permutation"]["splits"] == 3
    # the other way round: b is resampled too, so its spread reaches the difference
    swapped = two_group_entry([5.0], [0.0, 1.0])
    assert swapped["difference"] == {"value": 4.5, "ci_low": 4.0, "ci_high": 5.0}


def test_groups_must_hold_scores():
    with pytest.raises(ValueError, match="group a is empty"):
        two_group_entry([], [1.0])
    with pytest.raises(ValueError, match="group b holds a NaN"):
        permutation_test([1.0], [float("nan")])


def _write(path, rows, columns=("seed", "frame", "episode_reward")):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        writer.writerows(rows)
    return path


def test_script_reads_a_published_csv_and_names_bad_input(tmp_path):
    mod = _script()
    path = _write(tmp_path / "p.csv", [(1, 0, 1.5), (2, 0, 2.5), (1, 10, 3.0)])
    assert mod.read_published(path) == {0: {1: 1.5, 2: 2.5}, 10: {1: 3.0}}
    with pytest.raises(SystemExit, match="no column 'episode_reward'.*--value_column"):
        mod.read_published(_write(tmp_path / "q.csv", [(1, 0, 1.0)], ("seed", "frame", "r")))
    with pytest.raises(SystemExit, match="seed 1 has two values at frame 0"):
        mod.read_published(_write(tmp_path / "d.csv", [(1, 0, 1.0), (1, 0, 2.0)]))
    with pytest.raises(SystemExit, match="line 2"):
        mod.read_published(_write(tmp_path / "x.csv", [(1, 0, "high")]))
    with pytest.raises(SystemExit, match="no evaluation at 5 frames.*--frames_per_step"):
        mod.compare({0: {0: 1.0}}, {0: {1: 1.5}, 5: {1: 2.0}}, [5])


def test_script_on_the_committed_drqv2_table(tmp_path, capsys):
    """The DrQ-v2 README row: the committed evaluations against the committed published
    curve, checked against the CSVs read here directly."""
    mod = _script()
    folder = _BENCH / "results" / "dmc_cartpole_pixels_drqv2"
    published = _BENCH / "peers" / "published" / "drqv2_cartpole_swingup.csv"
    out = tmp_path / "diff.json"
    mod.main(
        [
            str(folder),
            "--published",
            str(published),
            "--frames_per_step",
            "2",
            "--at",
            "40000",
            "--above",
            "100",
            "--out",
            str(out),
        ]
    )
    ours = []
    for seed in range(5):
        with open(folder / "evaluations" / f"drqv2_cartpole-swingup_seed{seed}.csv") as f:
            rows = [r for r in csv.DictReader(f) if int(r["env_steps"]) == 20_000]
        ours.append(float(rows[0]["return_mean"]))
    with open(published) as f:
        theirs = [float(r["episode_reward"]) for r in csv.DictReader(f) if r["frame"] == "40000"]
    assert len(theirs) == 10
    row = json.loads(out.read_text())["rows"][0]
    assert row["difference"]["value"] == pytest.approx(np.mean(ours) - np.mean(theirs))
    assert row["above"] == {"threshold": 100.0, "a": 2, "b": 7}
    assert row["permutation"]["splits"] == 3003
    assert row["difference"]["ci_low"] < row["difference"]["value"] < row["difference"]["ci_high"]
    assert "| 40,000 | 107.9" in capsys.readouterr().out
