"""Does averaging a mixture of policies' actions before the ``tanh`` give a better policy?

A training-free probe of issue 18's BC question. On medium-replay a regression before the
``tanh`` (``bc_loss_probe.py --bc_loss preimage``, minimiser ``tanh(E[atanh a | s])``) beats the
squared error on ``a`` (minimiser ``E[a | s]``) by 4.3 points, and loses by 1.8 on medium. A
trained BC policy mixes the estimation error of a network with the choice of the minimiser; this
probe keeps only the second. It loads the behaviour agent's training checkpoints (the policies
whose samples make up the replay) and acts, at every state it meets, with one aggregate of their
actions, computed directly (from ``--samples`` draws of each checkpoint) instead of learned:

* ``a_mean``: ``mean_{c, eps} tanh(mu_c + sigma_c eps)``, the squared error on ``a``'s minimiser;
* ``u_mean``: ``tanh(mean_{c, eps} (mu_c + sigma_c eps))``, the regression before the ``tanh``;
* ``a_det``, ``u_det``: the same over the checkpoints' deterministic actions ``tanh(mu_c)`` only
  (no sampling noise), which separates the mixture's part from the noise's part;
* ``a_clip09``, ``u_clip09``: ``a_mean`` and ``u_mean`` with every sampled action first clipped
  to [-0.9, 0.9], as ``--target_clip 0.9`` clips the regression's targets.

The checkpoints weigh equally at every state, where in the data each state's actions come from
the policies that visited it; the probe shows what each minimiser does with a given mixture, not
what a network fitted to the replay learns (on medium-replay the equal-weight mixture shrinks the
actions far more than the trained BC policies do, so its gap is not theirs). ``--checkpoints
35000`` gives the single-policy case (the medium dataset's behaviour policy).

Usage::

    python experiments/benchmarks/tuning/offline/aggregation_probe.py \\
        --agent offline_data/agents/sac_HalfCheetah-v5_0 --episodes 5
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from super_sac import datasets
from super_sac.cli.factories import make_env
from super_sac.cli.recording import load_agent
from super_sac.nets.distributions import preimage
from super_sac.sweep.stats import stratified_bootstrap_ci

AGGREGATES = ("a_mean", "u_mean", "a_det", "u_det", "a_clip09", "u_clip09")


def aggregate(loc: torch.Tensor, scale: torch.Tensor, eps: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every aggregate's action ``(A,)`` from the checkpoints' Gaussians before the ``tanh``.

    :param loc: ``(C, A)`` means ``mu_c`` of the ``C`` checkpoints at one state.
    :param scale: ``(C, A)`` their stds ``sigma_c``.
    :param eps: ``(K, C, A)`` standard normal noise, ``K`` samples per checkpoint.
    """
    action = torch.tanh(loc + scale * eps)  # (K, C, A): the samples the data would hold
    pre = preimage(action)
    clipped = action.clamp(-0.9, 0.9)
    return {
        "a_mean": action.mean(dim=(0, 1)),
        "u_mean": torch.tanh(pre.mean(dim=(0, 1))),
        "a_det": torch.tanh(loc).mean(dim=0),
        "u_det": torch.tanh(loc.mean(dim=0)),
        "a_clip09": clipped.mean(dim=(0, 1)),
        "u_clip09": torch.tanh(torch.atanh(clipped).mean(dim=(0, 1))),
    }


def episode(agents: list, name: str, env_name: str, seed: int, samples: int) -> float:
    """One episode's return acting with aggregate ``name`` (noise drawn from ``seed``)."""
    env = make_env(env_name)
    gen = torch.Generator().manual_seed(seed)
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        state = {"obs": torch.as_tensor(obs["obs"], dtype=torch.float32)[None]}
        with torch.no_grad():
            dists = [agent.actor(agent.encoder(state)) for agent in agents]
            loc = torch.cat([d.loc for d in dists])
            scale = torch.cat([d.scale for d in dists])
            eps = torch.randn((samples, *loc.shape), generator=gen)
            action = aggregate(loc, scale, eps)[name]
        obs, reward, terminated, truncated, _ = env.step(action.numpy())
        total += float(reward)
        done = terminated or truncated
    env.close()
    return total


def tilt(agents: list, steps: list[str], obs: np.ndarray, action: np.ndarray, samples: int) -> None:
    """Print, on dataset states ``obs``, each checkpoint's mean ``|mu_c|`` (before the ``tanh``)
    and ``|tanh(mu_c)|``, then for each aggregate its mean ``|a|``, its share of entries with
    ``|a| > 0.9`` (the data's ``action`` on the same states for comparison) and its mean squared
    distance to every checkpoint's deterministic action: which policies of the mixture it
    follows, and how large it acts."""
    state = {"obs": torch.as_tensor(obs, dtype=torch.float32)}
    with torch.no_grad():
        dists = [agent.actor(agent.encoder(state)) for agent in agents]
        loc = torch.stack([d.loc for d in dists], dim=1)  # (B, C, A)
        scale = torch.stack([d.scale for d in dists], dim=1)
        eps = torch.randn((samples, *loc.shape), generator=torch.Generator().manual_seed(0))
        per_state = [aggregate(loc[i], scale[i], eps[:, i]) for i in range(len(obs))]
    det = torch.tanh(loc)
    print("checkpoint         " + " ".join(f"{s:>7s}" for s in steps))
    print(
        "mean |mu| pre-tanh " + " ".join(f"{v:7.2f}" for v in loc.abs().mean(dim=(0, 2)).tolist())
    )
    print(
        "mean |tanh(mu)|    " + " ".join(f"{v:7.2f}" for v in det.abs().mean(dim=(0, 2)).tolist())
    )
    print("mean sigma         " + " ".join(f"{v:7.2f}" for v in scale.mean(dim=(0, 2)).tolist()))
    data = np.abs(action)
    print(f"data      mean |a| {data.mean():.3f}, share |a| > 0.9 {(data > 0.9).mean():.3f}")
    for name in AGGREGATES:
        agg = torch.stack([p[name] for p in per_state])  # (B, A)
        size = agg.abs()
        large = (size > 0.9).float().mean()
        print(f"{name:9s} mean |a| {size.mean():.3f}, share |a| > 0.9 {large:.3f}")
        dist = ((agg[:, None] - det) ** 2).mean(dim=(0, 2))
        print(f"{name:9s} sq dist  " + " ".join(f"{v:7.3f}" for v in dist.tolist()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--agent", type=Path, default=Path("offline_data/agents/sac_HalfCheetah-v5_0")
    )
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument(
        "--checkpoints",
        default="5000,10000,15000,20000,25000,30000,35000",
        help="comma-separated steps of the agent's checkpoints/ckpt_STEP to mix",
    )
    parser.add_argument("--aggregates", default=",".join(AGGREGATES))
    parser.add_argument(
        "--episodes", type=int, default=5, help="episodes per aggregate, seeds 0..N-1"
    )
    parser.add_argument("--samples", type=int, default=32, help="noise samples per checkpoint")
    parser.add_argument("--reference", default="-274.8601:4746.3210", help="random:expert returns")
    parser.add_argument(
        "--tilt_dataset",
        type=Path,
        default=None,
        help="an .npz dataset: print which checkpoints each aggregate follows on its states",
    )
    parser.add_argument(
        "--tilt_states", type=int, default=2000, help="random states for --tilt_dataset"
    )
    parser.add_argument("--out", type=Path, default=None, help="write the returns here as JSON")
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = args.aggregates.split(",")
    unknown = sorted(set(names) - set(AGGREGATES))
    if unknown:
        parser.error(f"unknown --aggregates {unknown}; choose from {list(AGGREGATES)}")
    env = make_env(args.env)
    agents = [
        load_agent(args.agent / "checkpoints" / f"ckpt_{step}", args.agent / "config.gin", env)
        for step in args.checkpoints.split(",")
    ]
    if args.tilt_dataset is not None:
        data, _ = datasets.load_npz(args.tilt_dataset)
        obs = np.asarray(data.obs["obs"], dtype=np.float32)
        act = np.asarray(data.action, dtype=np.float32)
        idx = np.random.default_rng(0).choice(
            len(obs), min(args.tilt_states, len(obs)), replace=False
        )
        tilt(agents, args.checkpoints.split(","), obs[idx], act[idx], args.samples)
    low, high = (float(x) for x in args.reference.split(":"))
    results: dict[str, dict[str, list[float]]] = {}
    for name in names if args.episodes > 0 else ():
        returns = [
            episode(agents, name, args.env, seed, args.samples) for seed in range(args.episodes)
        ]
        norm = [100 * (r - low) / (high - low) for r in returns]
        results[name] = {"returns": returns, "normalized": norm}
        mean, lo, hi = stratified_bootstrap_ci([norm], np.mean)
        print(
            f"{name:9s} normalized {mean:5.1f} [{lo:5.1f}, {hi:5.1f}]",
            f" per episode {np.round(norm, 1)}",
            flush=True,
        )
    for a_name, u_name in (("a_mean", "u_mean"), ("a_det", "u_det"), ("a_clip09", "u_clip09")):
        if a_name in results and u_name in results:
            diff = np.subtract(results[u_name]["normalized"], results[a_name]["normalized"])
            mean, lo, hi = stratified_bootstrap_ci([diff], np.mean)
            print(
                f"paired by episode seed, {u_name} minus {a_name}:",
                f"{mean:+.1f} [{lo:+.1f}, {hi:+.1f}]",
            )
    if args.out is not None:
        args.out.write_text(
            json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, **results}, indent=1)
        )


if __name__ == "__main__":
    main()
