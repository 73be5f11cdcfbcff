"""How many dataset transitions an AFBC filter keeps: a diagnostic for the offline tables.

For a trained offline run, the share of ``n`` random dataset transitions whose advantage
``A(s, a) = Q(s, a) - V(s)`` is ``>= 0`` (the binary filter of CRR, Wang et al. 2020,
arXiv:2006.15134) with ``V`` the "max" and the "mean" of Q over k policy samples, for several k.
With the "max" estimator the share falls as k grows, and it is the share of a uniform actor
batch that the update clones; ``afbc_per`` (Grigsby & Qi 2021, arXiv:2110.04698) draws the
actor's batches by advantage priority so that they hold mostly kept transitions: the row
"max, by priority" is the kept share of a batch drawn with the priorities
``(max(A, 0) + 1e-4)^0.6`` of these advantages (fresh priorities, where training uses the last
score of each slot).

    python experiments/benchmarks/afbc_kept_fraction.py RUN_DIR \\
        --dataset offline_data/npz/halfcheetah-medium.npz --samples 1 4 16 64

``RUN_DIR`` is a run folder of ``train_offline.py`` (its ``config.gin`` and ``agent.pt``); the
critic ensemble is reduced by its minimum, as the offline configs do.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import torch

from super_sac import adv_estimator, datasets
from super_sac.cli.factories import make_env
from super_sac.cli.recording import load_agent


def kept_fractions(
    run_dir: str | Path,
    dataset: str | Path,
    env_id: str,
    samples: list[int],
    n: int = 8192,
    seed: int = 0,
) -> dict[str, dict[int, float]]:
    """``{"max" | "mean": {k: share of A >= 0}}`` over ``n`` random transitions of ``dataset``,
    and ``"max, by priority"``: the kept share of the priority mass of the "max" advantages.

    :param run_dir: the run folder (``config.gin``, ``agent.pt``).
    :param dataset: a ``.npz`` dataset written by ``record_replay.py``/``build_datasets.py``.
    :param env_id: the env the agent was trained for.
    :param samples: the numbers of policy samples k behind ``V``.
    :param n: transitions drawn without replacement (all of them if the dataset is smaller).
    :param seed: seed of the draw and of the policy samples.
    """
    run_dir = Path(run_dir)
    agent = load_agent(run_dir / "agent.pt", run_dir / "config.gin", make_env(env_id))
    data, _ = datasets.load_npz(dataset)  # actions rescaled to [-1, 1], as training saw them
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(data), min(n, len(data)), replace=False)
    obs = {k: torch.as_tensor(v[idx], dtype=torch.float32) for k, v in data.obs.items()}
    action = torch.as_tensor(data.action[idx], dtype=torch.float32)
    torch.manual_seed(seed)
    out: dict[str, dict[int, float]] = {"max": {}, "mean": {}, "max, by priority": {}}
    with torch.no_grad():
        rep = agent.encoder(obs)
        for method in ("max", "mean"):
            for k in samples:
                adv = adv_estimator.estimate_advantage(
                    agent, rep, action, method=method, num_samples=k, critic_reduction="min"
                )
                kept = (adv >= 0).reshape(-1)
                out[method][k] = float(kept.float().mean())
                if method == "max":
                    priority = adv_estimator.advantage_priorities(adv)
                    out["max, by priority"][k] = float(priority[kept].sum() / priority.sum())
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", help="a train_offline.py run folder (config.gin, agent.pt)")
    p.add_argument("--dataset", required=True, help="the .npz dataset it was trained on")
    p.add_argument("--env", default="HalfCheetah-v5")
    p.add_argument("--samples", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--n", type=int, default=8192, help="dataset transitions drawn")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    shares = kept_fractions(args.run_dir, args.dataset, args.env, args.samples, args.n, args.seed)
    print("| V over k policy samples | " + " | ".join(f"k = {k}" for k in args.samples) + " |")
    print("|" + " --- |" * (len(args.samples) + 1))
    for method, by_k in shares.items():
        print(f"| {method} | " + " | ".join(f"{by_k[k]:.3f}" for k in args.samples) + " |")


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    main()
