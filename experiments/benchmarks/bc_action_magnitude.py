"""How large are a BC policy's actions, against the dataset's, on the dataset's states?

A diagnostic of issue 18's offline BC comparison. On a mixed dataset the actions taken in similar
states disagree; a squared error on ``a`` fits their average, which shrinks towards 0 when they
disagree in sign, while a squared error on ``atanh(a)`` (our tanh-Gaussian log-likelihood at a
fixed std) averages before the ``tanh`` and shrinks less. This script measures both halves of
that story on ``--states`` random dataset states:

* the data: the mean ``|a|``, the spread (per-dimension std, averaged) of the actions of each
  state's ``--k`` nearest neighbours (Euclidean, on standardised observations), and the mean
  ``|.|`` of their average taken on ``a`` and on ``atanh(a)``;
* each trained run (a folder with ``agent.pt`` and ``config.gin``): the mean ``|mu(s)|`` of its
  deterministic action (a deterministic actor's output, ``tanh`` of a Gaussian actor's mean).

With ``--by_position Q`` it also splits the whole dataset, in its stored order, into ``Q`` equal
slices (for a replay dataset: from the warm-up to the end of training) and prints, per slice,
the mean reward, the share of near-saturated and saturated action entries (``|a| > 0.9`` and
``|a| > 0.99``) and each run's mean squared error ``(mu(s) - a)^2`` and sign agreement with the
data's actions. It also prints the share of the data's ``sum atanh(a)^2`` that the saturated
entries hold: their pull on a regression before the ``tanh`` (``tuning/offline/bc_loss_probe.py``).

Usage::

    python experiments/benchmarks/bc_action_magnitude.py \\
        --dataset offline_data/npz/halfcheetah-medium-replay.npz --env HalfCheetah-v5 RUN_DIR ...
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from super_sac import datasets
from super_sac.cli.factories import make_env
from super_sac.cli.recording import load_agent
from super_sac.nets.distributions import preimage

ATANH_CLIP = 0.999  # actions at the bounds would give atanh = +-inf


def pretanh_share(action: np.ndarray, bound: float = 0.99) -> float:
    """The share of ``sum atanh(a)^2`` (over every entry, ``a`` kept ``ATANH_EDGE`` inside the
    bounds as the pre-tanh losses keep it: :func:`super_sac.nets.distributions.preimage`) held by
    the entries with ``|a| > bound``."""
    pre = preimage(torch.as_tensor(action, dtype=torch.float64)).numpy() ** 2
    total = pre.sum()
    return float(pre[np.abs(action) > bound].sum() / total) if total > 0 else 0.0


def neighbour_averages(
    obs: np.ndarray, action: np.ndarray, idx: np.ndarray, k: int
) -> dict[str, float]:
    """Statistics of the actions of the ``k`` nearest other states of each ``obs[idx]``.

    :param obs: ``(N, D)`` observations (standardised here by their own mean and std).
    :param action: ``(N, A)`` actions in ``[-1, 1]``.
    :param idx: the query states' indices.
    :param k: neighbours per state (the state itself excluded).
    :return: ``spread`` (std over the neighbours, averaged over states and dimensions),
        ``mean_abs_linear`` (mean ``|.|`` of the neighbours' mean action) and
        ``mean_abs_pretanh`` (mean ``|tanh(mean atanh(a))|``).
    """
    if not 1 <= k < len(obs):
        raise ValueError(f"k = {k}: expected 1 <= k < {len(obs)} (the dataset's size)")
    z = torch.as_tensor((obs - obs.mean(0)) / (obs.std(0) + 1e-6), dtype=torch.float32)
    dist = torch.cdist(z[idx], z)
    dist[torch.arange(len(idx)), torch.as_tensor(idx)] = float("inf")  # not its own neighbour
    near = action[dist.topk(k, largest=False).indices.numpy()]  # (n, k, A)
    pretanh = np.arctanh(np.clip(near, -ATANH_CLIP, ATANH_CLIP)).mean(axis=1)
    return {
        "spread": float(near.std(axis=1).mean()),
        "mean_abs_linear": float(np.abs(near.mean(axis=1)).mean()),
        "mean_abs_pretanh": float(np.abs(np.tanh(pretanh)).mean()),
    }


@torch.no_grad()
def policy_actions(run_dir: Path, env_id: str, obs: np.ndarray) -> np.ndarray:
    """The run's deterministic actions ``(n, A)`` on ``obs`` (``(n, D)``):
    :meth:`super_sac.Agent.mean_action` (a deterministic actor's output, ``tanh`` of a Gaussian
    actor's mean)."""
    agent = load_agent(run_dir / "agent.pt", run_dir / "config.gin", make_env(env_id))
    rep = agent.encoder({"obs": torch.as_tensor(obs, dtype=torch.float32)})
    return agent.mean_action(rep).numpy()


def slice_bounds(n: int, slices: int) -> list[tuple[int, int]]:
    """``(start, end)`` of ``slices`` near-equal consecutive parts of ``range(n)``."""
    bounds = np.linspace(0, n, slices + 1).astype(int)
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def slice_fits(pred: np.ndarray, action: np.ndarray, slices: int) -> list[dict[str, float]]:
    """Per slice of the dataset's order (:func:`slice_bounds`): ``mse``, the mean of
    ``(pred - a)^2``, and ``sign``, the share of entries where ``pred`` and ``a`` have the same
    sign."""
    return [
        {
            "mse": float(((pred[lo:hi] - action[lo:hi]) ** 2).mean()),
            "sign": float((np.sign(pred[lo:hi]) == np.sign(action[lo:hi])).mean()),
        }
        for lo, hi in slice_bounds(len(action), slices)
    ]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="*", help="run folders with agent.pt and config.gin")
    p.add_argument("--dataset", required=True, help=".npz dataset (datasets.save_npz)")
    p.add_argument("--env", default="HalfCheetah-v5")
    p.add_argument("--states", type=int, default=1500, help="random dataset states measured")
    p.add_argument("--k", type=int, default=10, help="neighbours per state")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--by_position", type=int, default=0, help="slices of the dataset's order")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    data, _ = datasets.load_npz(args.dataset)  # actions rescaled to [-1, 1], as training saw them
    obs = np.asarray(data.obs["obs"], dtype=np.float32)
    action = np.asarray(data.action, dtype=np.float32)
    idx = np.random.default_rng(args.seed).choice(len(obs), min(args.states, len(obs)), False)
    stats = neighbour_averages(obs, action, idx, args.k)
    print(f"{args.dataset}: {len(obs)} transitions, {len(idx)} states, k = {args.k}")
    print("| what | mean abs action |")
    print("| --- | --- |")
    print(f"| data | {np.abs(action).mean():.3f} |")
    print(f"| data, spread of the neighbours' actions | {stats['spread']:.3f} |")
    print(f"| data, neighbours' mean of a | {stats['mean_abs_linear']:.3f} |")
    print(f"| data, neighbours' mean of atanh(a), through tanh | {stats['mean_abs_pretanh']:.3f} |")
    preds = {run: policy_actions(Path(run), args.env, obs) for run in args.runs}
    for run, pred in preds.items():
        print(f"| policy {run} | {np.abs(pred[idx]).mean():.3f} |")
    saturated = (np.abs(action) > 0.99).mean()
    print(
        f"\nThe data: {saturated:.3f} of the action entries have abs(a) > 0.99 and hold "
        f"{pretanh_share(action):.3f} of sum atanh(a)^2."
    )
    if args.by_position > 0:
        q = args.by_position
        reward = np.asarray(data.reward, dtype=np.float64)
        print(f"\nBy position in the dataset ({q} slices, first to last):")
        header = ["slice", "reward", "share of abs(a) > 0.9", "share of abs(a) > 0.99"]
        header += [f"{run}: squared error, sign agreement" for run in preds]
        print("| " + " | ".join(header) + " |")
        print("| --- " * len(header) + "|")
        fits = {run: slice_fits(pred, action, q) for run, pred in preds.items()}
        for i, (lo, hi) in enumerate(slice_bounds(len(action), q)):
            near = (np.abs(action[lo:hi]) > 0.9).mean()
            saturated = (np.abs(action[lo:hi]) > 0.99).mean()
            cells = [f"{i + 1}", f"{reward[lo:hi].mean():.2f}", f"{near:.3f}", f"{saturated:.3f}"]
            cells += [f"{fits[run][i]['mse']:.3f}, {fits[run][i]['sign']:.3f}" for run in preds]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
