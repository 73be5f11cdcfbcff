"""Does ``super_sac.compile = True`` pay off? SAC update time, eager against ``torch.compile``.

One SAC update (critic, target update, actor, alpha) at HalfCheetah's sizes (17-dim
observations, 6-dim actions), hidden 256x256, batch 256, on a fixed batch, timed after the
compiled networks have been built and warmed up (compilation itself takes minutes on a
2-core CPU and is reported separately). Rounds alternate eager and compiled agents; the report
gives each side's median milliseconds per update and the ratio eager / compiled (above 1 means
compile helps). ``--what losses`` compiles the whole critic and actor loss computations instead
(one graph each), to see whether larger graphs pay off where per-network ones do not.

    python experiments/benchmarks/compile_speed.py
    python experiments/benchmarks/compile_speed.py --what losses
    python experiments/benchmarks/compile_speed.py --updates 100 --repeats 3 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import bench_utils
import numpy as np
import torch

from super_sac import Agent, learning, nets, optim
from super_sac import learning_utils as lu
from super_sac.replay import Batch
from super_sac.utils import flush_denormals

OBS_DIM, ACT_DIM, BATCH, HIDDEN = 17, 6, 256, 256


def _batch() -> Batch:
    gen = torch.Generator().manual_seed(0)
    return Batch(
        obs={"obs": torch.randn(BATCH, OBS_DIM, generator=gen)},
        action=torch.rand(BATCH, ACT_DIM, generator=gen) * 2 - 1,
        reward=torch.randn(BATCH, 1, generator=gen),
        next_obs={"obs": torch.randn(BATCH, OBS_DIM, generator=gen)},
        done=torch.zeros(BATCH, 1),
        discount=torch.full((BATCH, 1), 0.99),
        weights=torch.ones(BATCH, 1),
        idxs=np.arange(BATCH),
    )


class SacUpdate:
    """The four parts of one SAC update on a fixed batch, as the loop runs them."""

    def __init__(self, compiled: bool) -> None:
        torch.manual_seed(0)
        self.agent = Agent(ACT_DIM, nets.FlatEncoder(OBS_DIM), hidden_size=HIDDEN)
        self.target = learning.make_target_agent(self.agent)
        self.compile_seconds = 0.0
        if compiled:
            self.agent.compile_networks()
            self.target.compile_networks()
        self.critic_opt = optim.build_optimizer(
            optim.ParamGroup(list(self.agent.critic.parameters()), 3e-4))
        self.actor_opt = optim.build_optimizer(
            optim.ParamGroup(list(self.agent.actor.parameters()), 3e-4))
        self.log_alpha = torch.zeros((), requires_grad=True)
        self.alpha_opt = optim.build_optimizer(optim.ParamGroup([self.log_alpha], 3e-4))
        self.pairs = (lu.params_of(self.target.critic), lu.params_of(self.agent.critic))
        self.batch = _batch()
        if compiled:  # the first calls trace and compile every graph
            start = time.perf_counter()
            for _ in range(3):
                self()
            self.compile_seconds = time.perf_counter() - start

    def __call__(self) -> None:
        alpha = self.log_alpha.detach().exp()
        learning.critic_update(self.agent, self.target, self.batch, self.critic_opt,
                               alpha=alpha, target_critic_ensemble_n=2)
        lu.soft_update(*self.pairs, 0.005)
        logs = learning.online_actor_update(self.agent, self.batch, self.actor_opt, alpha=alpha)
        learning.alpha_update(self.log_alpha, self.alpha_opt, logs["actor/log_prob"],
                              -float(ACT_DIM))


class LossCompiledUpdate(SacUpdate):
    """The same update with ``torch.compile`` applied to whole loss computations instead of the
    networks: the critic's (TD target, critic forward, loss) and the actor's (policy sample,
    critic forward, loss) each become one graph; the backward passes and optimizer steps stay
    eager."""

    def __init__(self) -> None:
        super().__init__(compiled=False)
        self.critic_loss = torch.compile(self._critic_loss)
        self.actor_loss = torch.compile(self._actor_loss)
        start = time.perf_counter()
        for _ in range(3):
            self()
        self.compile_seconds = time.perf_counter() - start

    def _critic_loss(self, batch: Batch, alpha: torch.Tensor) -> torch.Tensor:
        target = learning.compute_td_target(
            self.agent, self.target, batch, alpha=alpha, target_critic_ensemble_n=2)
        q = self.agent.critic(self.agent.encoder(batch.obs), batch.action)
        return lu.critic_loss(q, target, batch.weights)

    def _actor_loss(self, batch: Batch, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            rep = self.agent.encoder(batch.obs)
        action, log_prob = self.agent.actor(rep).rsample_with_log_prob()
        q = lu.reduce_critics(self.agent.critic(rep, action, detach_params=True), "min")
        return lu.sac_actor_loss(q, log_prob, alpha), log_prob.detach().mean()

    def __call__(self) -> None:
        alpha = self.log_alpha.detach().exp()
        optim.optimizer_step(self.critic_opt, self.critic_loss(self.batch, alpha))
        lu.soft_update(*self.pairs, 0.005)
        loss, log_prob = self.actor_loss(self.batch, alpha)
        optim.optimizer_step(self.actor_opt, loss)
        learning.alpha_update(self.log_alpha, self.alpha_opt, log_prob, -float(ACT_DIM))


def ms_per_update(update: SacUpdate, updates: int) -> float:
    for _ in range(5):
        update()
    start = time.perf_counter()
    for _ in range(updates):
        update()
    return 1000.0 * (time.perf_counter() - start) / updates


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--updates", type=int, default=100, help="timed updates per round")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--what", choices=["networks", "losses"], default="networks",
                   help="compile the networks (super_sac.compile = True) or, as an experiment, "
                   "the whole critic and actor loss computations")
    p.add_argument("--name", default=None,
                   help="result basename (default: compile_speed, compile_speed_losses)")
    args = p.parse_args(argv)
    if args.name is None:
        args.name = "compile_speed" if args.what == "networks" else "compile_speed_losses"
    torch.set_num_threads(args.threads)
    flush_denormals()
    # built once: compiling again per round costs minutes
    compiled = SacUpdate(compiled=True) if args.what == "networks" else LossCompiledUpdate()
    rounds = []
    for r in range(args.repeats):
        order = ("eager", "compiled") if r % 2 == 0 else ("compiled", "eager")
        timing = {}
        for side in order:
            timing[side] = ms_per_update(
                compiled if side == "compiled" else SacUpdate(compiled=False), args.updates)
        timing["ratio"] = timing["eager"] / timing["compiled"]
        rounds.append(timing)
        print(f"round {r}: eager {timing['eager']:.2f} ms, compiled {timing['compiled']:.2f} ms,"
              f" eager/compiled {timing['ratio']:.2f}", flush=True)
    eager = statistics.median(t["eager"] for t in rounds)
    comp = statistics.median(t["compiled"] for t in rounds)
    table = bench_utils.markdown_table(
        ["mode", "median ms / SAC update", *[f"round {i}" for i in range(len(rounds))]],
        [["eager", f"{eager:.2f}", *[f"{t['eager']:.2f}" for t in rounds]],
         ["torch.compile", f"{comp:.2f}", *[f"{t['compiled']:.2f}" for t in rounds]]])
    table += (f"\n\nSpeed-up from compile (eager / compiled): **{eager / comp:.2f}**; "
              "per-round ratios: mean [95% bootstrap interval over rounds] "
              f"{bench_utils.format_ratio_interval([t['ratio'] for t in rounds])}; "
              f"compilation took {compiled.compile_seconds:.0f} s.")
    print("\n" + table, flush=True)
    header = (f"# torch.compile on the SAC update ({args.what})\n\n"
              f"HalfCheetah sizes, hidden {HIDDEN}, batch {BATCH}, {args.threads} torch threads, "
              f"CPU, {args.updates} updates per round, {args.repeats} alternating rounds.\n\n")
    payload = {"benchmark": "compile_speed", "versions": bench_utils.versions(),
               "settings": vars(args), "eager_median_ms": eager, "compiled_median_ms": comp,
               "speedup": eager / comp, "compile_seconds": compiled.compile_seconds,
               "round_ratio_interval": bench_utils.ratio_interval([t["ratio"] for t in rounds]),
               "rounds": rounds}
    md, js = bench_utils.write_results(args.name, header + table, payload)
    print(f"\nwrote {md} and {js}", flush=True)
    return payload


if __name__ == "__main__":
    main()
