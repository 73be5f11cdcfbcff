"""Benchmarks (b) and (c): REDQ and SUNRISE per env step, our vectorized ensembles against the
same algorithms written as Python loops over separate modules.

What is timed is the learning work of one env step, with HalfCheetah-v5's sizes (17-dim
observations, 6-dim actions), hidden 256x256, batch 256, on the CPU:

* REDQ (Chen et al. 2021): N = 10 critics, target min over M = 2, G = 20 critic updates per env
  step, one actor and alpha update, action sampling. Ours: ``Trainer.update`` with
  ``Agent(num_critics=10)``; reference: the structure of the authors' code (a list of
  ``nn.Sequential`` critics and one Adam per critic, the target subset evaluated member by
  member, Polyak averaging parameter by parameter, critics frozen with ``requires_grad_`` during
  the policy loss).
* SUNRISE (Lee et al. 2021): E = 5 SAC agents with 2 critics each, weighted Bellman backups
  (T = 20), UCB action choice (lambda = 1) for one env. Ours: ``Trainer.update`` and
  ``Agent.sample_action`` with ``Agent(ensemble_size=5)``; reference: five agents of separate
  modules and optimizers (as in the authors' code), looped; the next actions are computed once
  per member and shared by the weights and the targets, as ours does (no strawman recompute).

Both sides draw their batches from the same ``ReplayBuffer`` of random transitions, so the
buffer's cost is in both. Rounds alternate which side goes first; the report gives each side's
median milliseconds per env step and the ratio reference / ours.

    python experiments/benchmarks/ensemble_speed.py
    python experiments/benchmarks/ensemble_speed.py --algos redq --steps 20 --repeats 3
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time
from typing import Any

import bench_utils
import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from super_sac import Agent, nets
from super_sac.main import TrainConfig, Trainer
from super_sac.replay import ReplayBuffer

OBS_DIM, ACT_DIM = 17, 6  # HalfCheetah-v5
BATCH = 256
LR = 3e-4
GAMMA, TAU = 0.99, 0.005
SETTINGS = {
    "redq": {"agent": {"num_critics": 10},
             "loop": {"critic_updates_per_step": 20, "target_critic_ensemble_n": 2,
                      "actor_q_reduction": "mean"}},
    "sunrise": {"agent": {"ensemble_size": 5, "ucb_bonus": 1.0},
                "loop": {"weighted_bellman_temp": 20.0}},
}


class _SpacesOnly(gym.Env):
    """An env that only declares HalfCheetah's spaces (the benchmark never steps it)."""

    observation_space = gym.spaces.Dict(
        {"obs": gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)}
    )
    action_space = gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)


def filled_buffer(size: int, seed: int) -> ReplayBuffer:
    rng = np.random.default_rng(seed)
    buffer = ReplayBuffer(size, verbose=False)
    env = _SpacesOnly()
    buffer.allocate(env.observation_space, env.action_space)
    buffer.push(
        obs={"obs": rng.standard_normal((size, OBS_DIM), dtype=np.float32)},
        action=rng.uniform(-1, 1, (size, ACT_DIM)).astype(np.float32),
        reward=rng.standard_normal(size).astype(np.float32),
        next_obs={"obs": rng.standard_normal((size, OBS_DIM), dtype=np.float32)},
        done=(rng.random(size) < 0.01).astype(np.float32),
        discount=np.full(size, GAMMA, np.float32),
    )
    return buffer


# ---------------------------------------------------------------------------------- ours
class Ours:
    def __init__(self, algo: str, buffer: ReplayBuffer, hidden: int) -> None:
        settings = SETTINGS[algo]
        agent = Agent(ACT_DIM, nets.FlatEncoder(OBS_DIM), hidden_size=hidden,
                      **settings["agent"])
        cfg = TrainConfig(batch_size=BATCH, actor_lr=LR, critic_lr=LR, alpha_lr=LR,
                          mlp_tau=TAU, gamma=GAMMA, seed=0, verbosity=0, **settings["loop"])
        self.trainer = Trainer(agent, buffer, _SpacesOnly(), _SpacesOnly(), cfg)
        self.obs = {"obs": np.zeros((1, OBS_DIM), np.float32)}

    def env_step(self) -> None:
        self.trainer.agent.sample_action(self.obs, batched=True)
        self.trainer.step += 1
        self.trainer.update()


# ---------------------------------------------------------------------------------- references
def _mlp(inp: int, out: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, out))


class RefPolicy(nn.Module):
    """A tanh-Gaussian policy (log-std squashed into [-5, 2]) with its log-probability."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.net = _mlp(OBS_DIM, 2 * ACT_DIM, hidden)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mu, raw = self.net(obs).chunk(2, dim=-1)
        log_std = -5.0 + 3.5 * (torch.tanh(raw) + 1.0)
        std = log_std.exp()
        eps = torch.randn_like(mu)
        u = mu + std * eps
        log_prob = (-0.5 * eps.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1, True)
        log_prob = log_prob - (2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1, True)
        return torch.tanh(u), log_prob


def _soft_update(target: nn.Module, online: nn.Module) -> None:
    with torch.no_grad():
        for tp, p in zip(target.parameters(), online.parameters()):
            tp.data.copy_(tp.data * (1.0 - TAU) + p.data * TAU)


def _unpack(batch) -> tuple[torch.Tensor, ...]:
    return (batch.obs["obs"], batch.action, batch.reward, batch.next_obs["obs"], batch.done,
            batch.discount)


class LoopedREDQ:
    """REDQ as the authors wrote it: lists of critic modules, one optimizer each."""

    def __init__(self, buffer: ReplayBuffer, hidden: int, n: int = 10, m: int = 2,
                 g: int = 20) -> None:
        self.buffer, self.n, self.m, self.g = buffer, n, m, g
        self.policy = RefPolicy(hidden)
        self.q_list = [_mlp(OBS_DIM + ACT_DIM, 1, hidden) for _ in range(n)]
        self.q_target_list = [copy.deepcopy(q).requires_grad_(False) for q in self.q_list]
        self.q_opts = [torch.optim.Adam(q.parameters(), lr=LR) for q in self.q_list]
        self.policy_opt = torch.optim.Adam(self.policy.parameters(), lr=LR)
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=LR)
        self.obs = torch.zeros(1, OBS_DIM)

    def critic_step(self) -> None:
        obs, act, rew, next_obs, done, disc = _unpack(self.buffer.sample(BATCH))
        alpha = self.log_alpha.detach().exp()
        with torch.no_grad():
            next_act, next_logp = self.policy(next_obs)
            idx = np.random.choice(self.n, self.m, replace=False)
            sa2 = torch.cat([next_obs, next_act], 1)
            q_next = torch.cat([self.q_target_list[i](sa2) for i in idx], 1).min(1, True)[0]
            y = rew + disc * (1.0 - done) * (q_next - alpha * next_logp)
        sa = torch.cat([obs, act], 1)
        q_pred = torch.cat([q(sa) for q in self.q_list], 1)
        loss = F.mse_loss(q_pred, y.expand(-1, self.n)) * self.n
        for opt in self.q_opts:
            opt.zero_grad()
        loss.backward()
        for opt in self.q_opts:
            opt.step()
        for q, qt in zip(self.q_list, self.q_target_list):
            _soft_update(qt, q)

    def actor_step(self) -> None:
        obs = self.buffer.sample(BATCH).obs["obs"]
        for q in self.q_list:
            q.requires_grad_(False)
        act, logp = self.policy(obs)
        sa = torch.cat([obs, act], 1)
        q_mean = torch.cat([q(sa) for q in self.q_list], 1).mean(1, True)
        loss = (self.log_alpha.detach().exp() * logp - q_mean).mean()
        self.policy_opt.zero_grad()
        loss.backward()
        self.policy_opt.step()
        for q in self.q_list:
            q.requires_grad_(True)
        alpha_loss = -(self.log_alpha * (logp.detach() - ACT_DIM)).mean()
        self.alpha_opt.zero_grad()
        alpha_loss.backward()
        self.alpha_opt.step()

    def env_step(self) -> None:
        with torch.no_grad():
            self.policy(self.obs)
        for _ in range(self.g):
            self.critic_step()
        self.actor_step()


class _SacMember:
    def __init__(self, hidden: int) -> None:
        self.policy = RefPolicy(hidden)
        self.qf1 = _mlp(OBS_DIM + ACT_DIM, 1, hidden)
        self.qf2 = _mlp(OBS_DIM + ACT_DIM, 1, hidden)
        self.tqf1 = copy.deepcopy(self.qf1).requires_grad_(False)
        self.tqf2 = copy.deepcopy(self.qf2).requires_grad_(False)
        self.policy_opt = torch.optim.Adam(self.policy.parameters(), lr=LR)
        self.qf1_opt = torch.optim.Adam(self.qf1.parameters(), lr=LR)
        self.qf2_opt = torch.optim.Adam(self.qf2.parameters(), lr=LR)
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=LR)


class LoopedSUNRISE:
    """SUNRISE as the authors wrote it: E SAC agents of separate modules, looped."""

    def __init__(self, buffer: ReplayBuffer, hidden: int, e: int = 5, temperature: float = 20.0,
                 ucb: float = 1.0) -> None:
        self.buffer, self.temperature, self.ucb = buffer, temperature, ucb
        self.members = [_SacMember(hidden) for _ in range(e)]
        self.obs = torch.zeros(1, OBS_DIM)

    def act(self) -> torch.Tensor:
        with torch.no_grad():
            proposals = [m.policy(self.obs)[0] for m in self.members]
            scores = []
            for a in proposals:
                sa = torch.cat([self.obs, a], 1)
                qs = torch.cat([q(sa) for m in self.members for q in (m.qf1, m.qf2)], 1)
                scores.append(qs.mean(1) + self.ucb * qs.std(1, correction=0))
            return proposals[int(torch.stack(scores).argmax(0)[0])]

    def update(self) -> None:
        obs, act, rew, next_obs, done, disc = _unpack(self.buffer.sample(BATCH))
        with torch.no_grad():  # each member's next action, and the ensemble's target spread
            nexts = [m.policy(next_obs) for m in self.members]
            target_qs = []
            for m, (a2, _) in zip(self.members, nexts):
                sa2 = torch.cat([next_obs, a2], 1)
                target_qs.append((m.tqf1(sa2), m.tqf2(sa2)))
            spread = torch.cat([q for pair in target_qs for q in pair], 1).std(
                1, keepdim=True, correction=0
            )
            weight = torch.sigmoid(-spread * self.temperature) + 0.5
        sa = torch.cat([obs, act], 1)
        for m, (_, logp2), (tq1, tq2) in zip(self.members, nexts, target_qs):
            alpha = m.log_alpha.detach().exp()
            # policy and alpha
            m.qf1.requires_grad_(False)
            m.qf2.requires_grad_(False)
            new_act, logp = m.policy(obs)
            sa_new = torch.cat([obs, new_act], 1)
            policy_loss = (alpha * logp - torch.min(m.qf1(sa_new), m.qf2(sa_new))).mean()
            m.policy_opt.zero_grad()
            policy_loss.backward()
            m.policy_opt.step()
            m.qf1.requires_grad_(True)
            m.qf2.requires_grad_(True)
            alpha_loss = -(m.log_alpha * (logp.detach() - ACT_DIM)).mean()
            m.alpha_opt.zero_grad()
            alpha_loss.backward()
            m.alpha_opt.step()
            # critics, weighted backup
            y = rew + disc * (1.0 - done) * (torch.min(tq1, tq2) - alpha * logp2)
            for qf, opt in ((m.qf1, m.qf1_opt), (m.qf2, m.qf2_opt)):
                loss = 0.5 * (weight * (qf(sa) - y).pow(2)).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            _soft_update(m.tqf1, m.qf1)
            _soft_update(m.tqf2, m.qf2)

    def env_step(self) -> None:
        self.act()
        self.update()


# ---------------------------------------------------------------------------------- timing
def ms_per_env_step(impl: Any, steps: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        impl.env_step()
    start = time.perf_counter()
    for _ in range(steps):
        impl.env_step()
    return 1000.0 * (time.perf_counter() - start) / steps


MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def matmul_share(impl: Any, steps: int) -> float:
    """Fraction of the profiled CPU time spent inside matrix products (self time of the
    ``aten`` matmul kernels), over ``steps`` env steps: what bounds a side that is no longer
    slowed by Python overhead."""
    from torch.profiler import ProfilerActivity, profile

    impl.env_step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            impl.env_step()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    matmul = sum(e.self_cpu_time_total for e in events if e.key in MATMUL_OPS)
    return matmul / max(total, 1e-9)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algos", nargs="+", default=["redq", "sunrise"], choices=list(SETTINGS))
    p.add_argument("--steps", type=int, default=None,
                   help="timed env steps per round (default: 20 for REDQ, 100 for SUNRISE)")
    p.add_argument("--repeats", type=int, default=3, help="rounds of ours + reference")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--profile", action="store_true",
                   help="also report the share of time each side spends in matrix products")
    p.add_argument("--name", default="ensemble_speed",
                   help="basename of the result files in experiments/benchmarks/results/")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    np.random.seed(0)
    buffer = filled_buffer(20_000, seed=0)
    refs = {"redq": LoopedREDQ, "sunrise": LoopedSUNRISE}
    results: dict[str, Any] = {}
    rows = []
    for algo in args.algos:
        steps = args.steps or (20 if algo == "redq" else 100)
        rounds = []
        for r in range(args.repeats):
            order = ("ours", "loop") if r % 2 == 0 else ("loop", "ours")
            timing = {}
            for side in order:
                impl = (Ours(algo, buffer, args.hidden) if side == "ours"
                        else refs[algo](buffer, args.hidden))
                timing[side] = ms_per_env_step(impl, steps)
            timing["ratio"] = timing["loop"] / timing["ours"]
            rounds.append(timing)
            print(f"{algo} round {r}: ours {timing['ours']:.1f} ms/env step, looped "
                  f"{timing['loop']:.1f} ms, ratio {timing['ratio']:.2f}", flush=True)
        ours_med = statistics.median(t["ours"] for t in rounds)
        loop_med = statistics.median(t["loop"] for t in rounds)
        ratios = [t["ratio"] for t in rounds]
        results[algo] = {"steps": steps, "rounds": rounds, "ours_median_ms": ours_med,
                         "loop_median_ms": loop_med, "ratio": loop_med / ours_med,
                         "median_round_ratio": statistics.median(ratios),
                         "round_ratio_interval": bench_utils.ratio_interval(ratios)}
        row = [algo, f"{ours_med:.1f}", f"{loop_med:.1f}", f"{loop_med / ours_med:.2f}",
               bench_utils.format_ratio_interval(ratios),
               ", ".join(f"{t['ratio']:.2f}" for t in rounds)]
        if args.profile:
            share_steps = max(1, steps // 4)
            shares = {"ours": matmul_share(Ours(algo, buffer, args.hidden), share_steps),
                      "loop": matmul_share(refs[algo](buffer, args.hidden), share_steps)}
            results[algo]["matmul_share"] = shares
            row += [f"{100 * shares['ours']:.0f}%", f"{100 * shares['loop']:.0f}%"]
        rows.append(row)
    headers = ["algorithm", "ours ms/env step", "looped ms/env step", "speed-up",
               "per-round ratios: mean [95% CI]", "per-round ratios"]
    if args.profile:
        headers += ["ours: matmul share", "looped: matmul share"]
    table = bench_utils.markdown_table(headers, rows)
    print("\n" + table, flush=True)
    header = (
        "# Ensemble speed: vectorized against looped REDQ and SUNRISE\n\n"
        f"Milliseconds of learning work per env step (action choice and every update), "
        f"HalfCheetah sizes ({OBS_DIM}-dim obs, {ACT_DIM}-dim actions), hidden {args.hidden}, "
        f"batch {BATCH}, {args.threads} torch threads, CPU, median of {args.repeats} "
        "alternating rounds. See ensemble_speed.py.\n\n")
    payload = {"benchmark": "ensemble_speed",
               "settings": {"threads": args.threads, "hidden": args.hidden, "batch": BATCH,
                            "repeats": args.repeats},
               "versions": bench_utils.versions(), "results": results}
    md, js = bench_utils.write_results(args.name, header + table, payload)
    print(f"\nwrote {md} and {js}", flush=True)
    return payload


if __name__ == "__main__":
    main()
