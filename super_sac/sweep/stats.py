"""Statistics for reports over many seeds (Agarwal et al. 2021, "Deep RL at the Edge of the
Statistical Precipice"): the interquartile mean, stratified bootstrap confidence intervals and the
area under a learning curve. Plain numpy, seeded, no rliable dependency."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "area_under_curve",
    "iqm",
    "permutation_test",
    "stratified_bootstrap_ci",
    "two_group_entry",
]


def iqm(values: Any, fractional: bool = True) -> float:
    """Interquartile mean: the mean of the middle 50% of the sorted values.

    Definition used here (``fractional=True``): sort the ``n`` values and give the ``i``-th
    (0-based) the unit interval ``[i, i + 1)`` of "sample mass"; keep the mass that lies in
    ``[n/4, 3n/4]``. Each value is weighted by the length of its interval inside that window (1
    inside, 0 outside, a fraction at the two cut points) and the weights sum to ``n/2``. For ``n``
    divisible by 4 this is the plain mean of the middle half; otherwise the values that straddle
    a quartile count partly. Example: ``[0, 1, 2, 6, 7]`` gives ``(0.75*1 + 2 + 0.75*6) / 2.5 =
    2.9``.

    ``fractional=False`` is the 25%-trimmed mean that rliable computes
    (``scipy.stats.trim_mean(x, 0.25)``: drop ``floor(n/4)`` values at each end, then average),
    which gives 3.0 for the example. Both agree when ``n`` is divisible by 4.

    :param values: any array-like; flattened. NaNs are not allowed.
    :raises ValueError: for an empty input or a NaN.
    """
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    n = x.size
    if n == 0:
        raise ValueError("iqm of an empty set of values")
    if np.isnan(x).any():
        raise ValueError("iqm of values containing NaN")
    if not fractional:
        cut = n // 4
        return float(x[cut : n - cut].mean())
    weights = _iqm_weights(n)
    return float(np.dot(weights, x) / weights.sum())


def _iqm_weights(n: int) -> np.ndarray:
    """The weight of each of ``n`` sorted values in the fractional :func:`iqm`: the length of
    its unit interval ``[i, i + 1)`` inside ``[n/4, 3n/4]``."""
    lo, hi = n / 4, 3 * n / 4
    starts = np.arange(n, dtype=np.float64)
    return np.clip(np.minimum(starts + 1, hi) - np.maximum(starts, lo), 0.0, 1.0)


def stratified_bootstrap_ci(
    scores_by_task: Mapping[Any, Sequence[float]] | Sequence[Sequence[float]],
    statistic: Callable[[np.ndarray], float],
    reps: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float, float]:
    """A percentile bootstrap interval for ``statistic`` of scores from several tasks.

    Each task (stratum) is resampled separately: its runs are drawn with replacement, as many as
    it has, so every bootstrap sample keeps the same number of runs per task. ``statistic`` gets
    the concatenation of all tasks' (resampled) scores as one 1-D array, in the order the tasks
    are given (e.g. ``np.mean``, :func:`iqm`; with one task this is an ordinary bootstrap).

    :param scores_by_task: ``{task: run scores}`` or a list of run-score sequences.
    :param reps: bootstrap samples.
    :param alpha: ``1 - alpha`` is the coverage (0.05 for a 95% interval).
    :param seed: seeds the resampling, so a report is reproducible.
    :return: ``(point estimate on the original scores, lower bound, upper bound)``; the bounds
        are the ``alpha/2`` and ``1 - alpha/2`` percentiles of the bootstrap statistics.
    """
    tasks = list(scores_by_task.values()) if isinstance(scores_by_task, Mapping) else scores_by_task
    strata = [np.asarray(t, dtype=np.float64).ravel() for t in tasks]
    if not strata or any(s.size == 0 for s in strata):
        raise ValueError("stratified_bootstrap_ci needs at least one score in every task")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    rng = np.random.default_rng(seed)
    point = float(statistic(np.concatenate(strata)))
    # one (reps, n_task) index matrix per task, drawn in task order
    samples = np.concatenate(
        [s[rng.integers(0, s.size, size=(reps, s.size))] for s in strata], axis=1
    )
    stats = _statistic_of_rows(statistic, samples)
    low, high = np.percentile(stats, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return point, float(low), float(high)


def iqm_of_rows(matrix: np.ndarray) -> np.ndarray:
    """:func:`iqm` (fractional) of every row of a ``(rows, n)`` matrix at once (no NaN check:
    the bootstrap resamples scores that :func:`iqm` has checked)."""
    x = np.sort(matrix, axis=1)
    weights = _iqm_weights(x.shape[1])
    return x @ weights / weights.sum()


# statistics whose value on every row of a matrix numpy computes in one call; the bootstrap's
# 2,000 resamples otherwise cost one Python call each (most of a report's time)
_ROWWISE: dict[Callable[..., Any], Callable[[np.ndarray], np.ndarray]] = {
    np.mean: lambda m: m.mean(axis=1),
    np.median: lambda m: np.median(m, axis=1),
    iqm: iqm_of_rows,
}


def _statistic_of_rows(statistic: Callable[[np.ndarray], float], samples: np.ndarray) -> np.ndarray:
    """``statistic`` of each row of ``samples``: vectorised for the statistics numpy reduces
    along an axis (:data:`_ROWWISE`), one call per row for any other."""
    try:
        rowwise = _ROWWISE.get(statistic)
    except TypeError:  # an unhashable callable: not one of them
        rowwise = None
    if rowwise is not None:
        return np.asarray(rowwise(samples), dtype=np.float64)
    return np.array([statistic(row) for row in samples], dtype=np.float64)


def area_under_curve(steps: Sequence[float], values: Sequence[float]) -> float:
    """The trapezoid area under ``values`` over ``steps``, divided by the step span
    (``steps[-1] - steps[0]``): the curve's average height, in the units of ``values``, so runs of
    different lengths stay comparable. One point gives its value.

    :raises ValueError: for empty or unequal inputs, or steps that decrease.
    """
    s = np.asarray(steps, dtype=np.float64).ravel()
    v = np.asarray(values, dtype=np.float64).ravel()
    if s.size == 0 or s.size != v.size:
        raise ValueError(f"area_under_curve needs equal, non-empty inputs ({s.size}, {v.size})")
    if np.any(np.diff(s) < 0):
        raise ValueError("area_under_curve needs non-decreasing steps")
    span = s[-1] - s[0]
    if s.size == 1 or span == 0:
        return float(v.mean())
    return float(np.sum(np.diff(s) * (v[1:] + v[:-1]) / 2) / span)


SCORES = ("final", "last", "auc")


def run_scores(steps: np.ndarray, values: np.ndarray, last: int) -> dict[str, float]:
    """One run's scores: its final evaluation, the mean of its last ``last`` evaluations and
    the area under its curve (:func:`area_under_curve`)."""
    return {
        "final": float(values[-1]),
        "last": float(np.mean(values[-last:])),
        "auc": area_under_curve(steps, values),
    }


def paired_entry(diffs: dict[int, float], seed: int = 0) -> dict[str, Any]:
    """Seed-matched differences ``{seed: difference}``: their mean with a 95% bootstrap interval
    over the seeds (``seed`` seeds the resampling), and how many seeds are above and below zero.

    :return: ``n``, ``per_seed`` (keys as strings, for JSON), ``mean`` (``value``, ``ci_low``,
        ``ci_high``), ``higher`` and ``lower`` (the counts).
    """
    pooled = pooled_paired_entry([diffs], seed)
    per_seed = {str(k): v for k, v in diffs.items()}
    return {
        "n": pooled["n"],
        "per_seed": per_seed,
        "mean": pooled["mean"],
        "higher": pooled["higher"],
        "lower": pooled["lower"],
    }


def pooled_paired_entry(strata: list[dict[int, float]], seed: int = 0) -> dict[str, Any]:
    """Seed-matched differences from several groups of runs (e.g. the same pair of configs on
    several machines), pooled: the mean over every difference with a stratified 95% bootstrap
    interval (each group's seeds resampled within it, :func:`stratified_bootstrap_ci`), and how
    many are above and below zero. One group gives :func:`paired_entry`'s numbers.

    :return: ``n``, ``mean`` (``value``, ``ci_low``, ``ci_high``), ``higher``, ``lower``.
    """
    values = [list(d.values()) for d in strata]
    point, low, high = stratified_bootstrap_ci(values, np.mean, seed=seed)
    flat = [v for group in values for v in group]
    return {
        "n": len(flat),
        "mean": {"value": point, "ci_low": low, "ci_high": high},
        "higher": sum(v > 0 for v in flat),
        "lower": sum(v < 0 for v in flat),
    }


def first_reach(steps: np.ndarray, values: np.ndarray, threshold: float) -> float | None:
    """The steps of the first evaluation at or above ``threshold`` (``None``: never)."""
    hits = np.flatnonzero(values >= threshold)
    return float(steps[hits[0]]) if hits.size else None


def permutation_test(
    a: Sequence[float],
    b: Sequence[float],
    exact_limit: int = 200_000,
    permutations: int = 20_000,
    seed: int = 0,
) -> dict[str, Any]:
    """A permutation test of ``mean(a) - mean(b)`` for two independent groups of runs (e.g. our
    seeds against a paper's published seeds, which share no seed to pair by).

    Under the null hypothesis the group labels are exchangeable: every way of choosing ``len(a)``
    of the pooled values as group ``a`` is equally likely. The p-values are the fractions of
    those splits whose difference is at least as extreme as the observed one ``d``:

    * ``p_lower``: ``d' <= d`` (the evidence that ``a`` is below ``b``);
    * ``p_higher``: ``d' >= d``;
    * ``p_two_sided``: ``|d'| >= |d|``.

    When the number of splits ``C(n_a + n_b, n_a)`` is at most ``exact_limit`` every split is
    enumerated (an exact test, no randomness; 3,003 splits for 5 against 10 seeds). Otherwise
    ``permutations`` random shuffles are drawn (numpy generator ``seed``) and each p-value is
    ``(hits + 1) / (permutations + 1)`` (Phipson and Smyth 2010), which never reports zero.
    Differences within ``1e-9`` (relative) of ``d`` count as ties, i.e. as extreme.

    :return: ``difference``, ``p_lower``, ``p_higher``, ``p_two_sided``, ``splits`` (how many
        were evaluated) and ``exact`` (whether they were all of them).
    :raises ValueError: when a group is empty or holds a NaN.
    """
    x, y = _group(a, "a"), _group(b, "b")
    pooled = np.concatenate([x, y])
    n, k = pooled.size, x.size
    observed = float(x.mean() - y.mean())
    total = pooled.sum()
    n_splits = math.comb(n, k)
    exact = n_splits <= exact_limit
    if exact:
        index = np.fromiter(
            itertools.chain.from_iterable(itertools.combinations(range(n), k)),
            dtype=np.int64,
            count=n_splits * k,
        ).reshape(n_splits, k)
    else:
        rng = np.random.default_rng(seed)
        index = np.argsort(rng.random((permutations, n)), axis=1)[:, :k]
    sums = pooled[index].sum(axis=1)
    diffs = sums / k - (total - sums) / (n - k)
    tol = 1e-9 * max(1.0, abs(observed))
    hits = {
        "p_lower": int(np.sum(diffs <= observed + tol)),
        "p_higher": int(np.sum(diffs >= observed - tol)),
        "p_two_sided": int(np.sum(np.abs(diffs) >= abs(observed) - tol)),
    }
    m = diffs.size
    ps = {name: (h / m if exact else (h + 1) / (m + 1)) for name, h in hits.items()}
    return {"difference": observed, **ps, "splits": int(m), "exact": exact}


def two_group_entry(
    a: Sequence[float],
    b: Sequence[float],
    reps: int = 2000,
    seed: int = 0,
    **permutation_kwargs: Any,
) -> dict[str, Any]:
    """Two independent groups of runs compared by their means: each group's mean with the same
    95% bootstrap interval a sweep report gives (:func:`stratified_bootstrap_ci`, ``reps``
    resamples, generator ``seed``), the difference ``mean(a) - mean(b)`` with a 95% bootstrap
    interval, and :func:`permutation_test`'s p-values.

    The difference's interval resamples the two groups independently, each with replacement and
    as many runs as it has: one generator of ``seed`` draws a ``(reps, n_a)`` index matrix for
    ``a`` and then a ``(reps, n_b)`` one for ``b``; the bounds are the 2.5 and 97.5 percentiles
    of the ``reps`` differences of resampled means. (A percentile bootstrap on few runs is
    optimistic; the permutation test is the check on it.)

    :param permutation_kwargs: passed to :func:`permutation_test` (``exact_limit``,
        ``permutations``).
    :return: ``a`` and ``b`` (``n``, ``mean``: ``value``, ``ci_low``, ``ci_high``),
        ``difference`` (``value``, ``ci_low``, ``ci_high``) and ``permutation``.
    """
    x, y = _group(a, "a"), _group(b, "b")
    rng = np.random.default_rng(seed)
    means_x = x[rng.integers(0, x.size, size=(reps, x.size))].mean(axis=1)
    means_y = y[rng.integers(0, y.size, size=(reps, y.size))].mean(axis=1)
    low, high = np.percentile(means_x - means_y, [2.5, 97.5])

    def group(values: np.ndarray) -> dict[str, Any]:
        point, lo, hi = stratified_bootstrap_ci([values], np.mean, reps=reps, seed=seed)
        return {"n": int(values.size), "mean": {"value": point, "ci_low": lo, "ci_high": hi}}

    return {
        "a": group(x),
        "b": group(y),
        "difference": {
            "value": float(x.mean() - y.mean()),
            "ci_low": float(low),
            "ci_high": float(high),
        },
        "permutation": permutation_test(x, y, seed=seed, **permutation_kwargs),
    }


def _group(values: Sequence[float], name: str) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError(f"group {name} is empty: each group needs at least one run's score")
    if np.isnan(x).any():
        raise ValueError(f"group {name} holds a NaN score")
    return x
