"""Probe (issue 18): what the trained offline MinAtar agents know about the dataset's actions.

For each run folder of ``train_minatar.py`` (its ``agent.pt`` and ``config.gin``), on every
transition of the dataset it was trained on:

- ``log_lik``: mean ``log pi(a|s)`` of the dataset's actions under the actor;
- ``actor_agree``: how often the actor's most likely action is the dataset's;
- ``critic_agree``: the same for the critics' greedy action ``argmax_a min_i Q_i(s, a)``;
- ``kept``: the fraction CRR's binary filter keeps, ``1[Q(s, a) - sum_b pi(b|s) Q(s, b) >= 0]``
  (the "indirect" advantage);
- ``action_gap``: mean over states of ``max_a Q(s, a) - min_a Q(s, a)``, against ``v_spread``,
  the standard deviation over states of ``V(s) = sum_a pi(a|s) Q(s, a)``: how much the critics
  tell actions apart, next to how much they tell states apart;

then the return of ``--episodes`` greedy episodes of the actor and of the critics (seeded).

    python experiments/benchmarks/tuning/minatar/offline_probe.py \\
        --dataset offline_data/npz/breakout-medium.npz RUN_DIR [RUN_DIR ...]

A diagnostic, not part of the library.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from super_sac import adv_estimator, datasets, evaluation, set_seed
from super_sac import learning_utils as lu
from super_sac.cli.factories import minatar_agent
from super_sac.cli.recording import load_agent
from super_sac.wrappers import make_minatar_env


class CriticGreedy:
    """Acts with ``argmax_a min_i Q_i(s, a)`` (for :func:`super_sac.evaluation.evaluate_agent`)."""

    def __init__(self, agent) -> None:
        self.agent, self.training = agent, False

    def eval(self) -> None:
        pass

    def train(self, mode: bool = True) -> None:
        pass

    @torch.no_grad()
    def forward(self, obs) -> int:
        rep = self.agent.encoder({k: torch.as_tensor(v)[None] for k, v in obs.items()})
        return int(lu.reduce_critics(self.agent.critic(rep), "min").argmax(-1))


@torch.no_grad()
def dataset_scores(agent, transitions, batch: int = 2048) -> dict[str, float]:
    sums = dict.fromkeys(("log_lik", "actor_agree", "critic_agree", "kept", "action_gap"), 0.0)
    values = []
    n = len(transitions.action)
    for start in range(0, n, batch):
        obs = {k: torch.as_tensor(v[start : start + batch]) for k, v in transitions.obs.items()}
        action = torch.as_tensor(transitions.action[start : start + batch]).long()
        rep = agent.encoder(obs)
        dist = agent.actor(rep)
        q = lu.reduce_critics(agent.critic(rep), "min")
        # V and the filter as the offline actor update computes them
        v = adv_estimator.estimate_value(agent, rep, "indirect").squeeze(1)
        kept = adv_estimator.filter_weights(q.gather(1, action[:, None]).squeeze(1) - v, "binary")
        sums["log_lik"] += float(dist.log_prob(action).sum())
        sums["actor_agree"] += float((dist.probs.argmax(-1) == action).sum())
        sums["critic_agree"] += float((q.argmax(-1) == action).sum())
        sums["kept"] += float(kept.sum())
        sums["action_gap"] += float((q.amax(-1) - q.amin(-1)).sum())
        values.append(v)
    out = {k: s / n for k, s in sums.items()}
    out["v_spread"] = float(torch.cat(values).std())
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="run folders of train_minatar.py")
    p.add_argument("--dataset", required=True, help="the .npz the runs were trained on")
    p.add_argument("--game", default="breakout")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args()
    torch.set_num_threads(1)
    transitions, _ = datasets.load_npz(args.dataset)
    rows = []
    for run in args.runs:
        env = make_minatar_env(args.game)
        agent = load_agent(run, Path(run) / "config.gin", env, agent_builder=minatar_agent)
        row = {"run": run, **dataset_scores(agent, transitions)}
        for name, policy in (("actor_return", agent), ("critic_return", CriticGreedy(agent))):
            set_seed(args.seed)
            env.reset(seed=args.seed)
            row[name] = evaluation.evaluate_agent(policy, env, args.episodes)["return_mean"]
        rows.append(row)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    keys = [k for k in rows[0] if k != "run"]
    print("\n| run | " + " | ".join(keys) + " |\n| --- |" + " --- |" * len(keys))
    for row in rows:
        print(f"| {row['run']} | " + " | ".join(f"{row[k]:.3g}" for k in keys) + " |")
    means = {k: round(float(np.mean([r[k] for r in rows])), 4) for k in keys}
    print(f"\nmeans: {json.dumps(means)}")


if __name__ == "__main__":
    main()
