"""Probe (issue 18): behavioral cloning of a deterministic actor ``a = tanh(f(s))`` with its
squared error taken in another space or with another gradient, to split why the squared error
on ``a`` (d3rlpy's BC loss) scores below one on ``atanh(a)`` on the mixed-policy medium-replay
dataset. Run it as ``train_offline.py`` with ``bc_deterministic.gin`` and one more argument:

    python experiments/benchmarks/tuning/offline/bc_loss_probe.py --bc_loss preimage \\
        --config experiments/benchmarks/tuning/offline/bc_deterministic.gin \\
        --dataset offline_data/npz/halfcheetah-medium-replay.npz --seed 0 --run_dir RUN

``--bc_loss``:

- ``action``: ``mean_j (tanh(f_j) - a_j)^2``, the library's loss (a control: the same runs as
  ``bc_deterministic.gin`` through ``train_offline.py``).
- ``preimage``: ``mean_j (f_j - atanh(a_j))^2``, the regression before the ``tanh`` that
  ``bc_fixed_std.gin`` does with the stochastic actor, here on the deterministic actor's network.
  Its minimiser is ``tanh(E[atanh(a) | s])``.
- ``straight_through``: the value of ``action`` with the gradient ``2 (tanh(f) - a)`` on ``f``,
  the ``tanh``'s slope ``1 - tanh(f)^2`` left out. Its minimiser is ``action``'s,
  ``E[a | s]``; only the optimisation differs (no update is damped where the actor nears the
  bounds, up to the limit below).
- ``weighted_action``: ``mean_j w(a_j) (tanh(f_j) - a_j)^2`` with ``w(a) = (1 - a^2)^-2``, the
  squared error on ``a`` weighted by ``preimage``'s local metric (to first order in the residual
  ``r``, ``atanh(a + r) - atanh(a) = r / (1 - a^2)``). It weighs each sample's error as
  ``preimage`` does near the fit, while its minimiser stays a mean on ``a``, the weighted
  ``E[w a | s] / E[w | s]``: it separates the weighting from the space of the mean. The weight
  grows without bound at the bounds, so it needs ``--target_clip`` (at 0.9, ``w <= 27.7``).

``--target_clip X`` clips the dataset's actions to ``[-X, X]`` before any loss sees them: with
``preimage`` it caps the pull of the near-saturated actions, whose ``atanh`` is large (on
medium-replay the 5.7% of entries with ``|a| > 0.99`` hold 38% of ``sum atanh(a)^2``); with
``action`` it is the control, the same clip where it moves the target by at most ``1 - X``.

The loss replaces ``super_sac.learning_utils.deterministic_bc_error`` for this process only, and
sees only the actor's action, so ``preimage`` and ``straight_through`` recover ``f`` as
``atanh(tanh(f))`` with the action kept ``1e-6`` inside the bounds: beyond ``|f|`` of about 7.25
that clamp holds and the entry gets no gradient. The trained probes put at most 0.006% of their
action entries on the dataset's states there, so the limit did not bind. Not a setting to train
with.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from super_sac import cli
from super_sac import learning_utils as lu
from super_sac.nets.distributions import ATANH_EDGE, preimage

ROOT = Path(__file__).resolve().parents[4]


def preimage_error(action_pred: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """``mean_j (f_j - atanh(a_j))^2`` with ``f = atanh(tanh(f))`` recovered from the actor's
    action (``(B, 1)``)."""
    return (preimage(action_pred) - preimage(action)).pow(2).mean(dim=-1, keepdim=True)


def straight_through_error(action_pred: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """The squared error on ``a`` in value, with the gradient ``2 (tanh(f) - a)`` on ``f``
    (``(B, 1)``)."""
    residual = (action_pred - action).detach()
    pre = preimage(action_pred)  # f, with d pre / d f = 1
    return (residual.pow(2) + 2.0 * residual * (pre - pre.detach())).mean(dim=-1, keepdim=True)


def weighted_action_error(action_pred: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """``mean_j (1 - a_j^2)^-2 (tanh(f_j) - a_j)^2`` (``(B, 1)``): the squared error on ``a``
    weighted by the pre-``tanh`` regression's local metric."""
    weight = (1.0 - action.pow(2)).clamp_min(ATANH_EDGE).pow(-2)
    return (weight * (action_pred - action).pow(2)).mean(dim=-1, keepdim=True)


Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
LOSSES: dict[str, Loss] = {
    "action": lu.deterministic_bc_error,
    "preimage": preimage_error,
    "straight_through": straight_through_error,
    "weighted_action": weighted_action_error,
}


def with_target_clip(loss: Loss, bound: float) -> Loss:
    """``loss`` against the dataset's actions clipped to ``[-bound, bound]``."""

    def clipped(action_pred: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return loss(action_pred, action.clamp(-bound, bound))

    return clipped


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(add_help=False)
    asks_help = any(a in ("-h", "--help") for a in argv or ())
    parser.add_argument("--bc_loss", choices=sorted(LOSSES), required=not asks_help)
    parser.add_argument("--target_clip", type=float, default=None)
    args, rest = parser.parse_known_args(argv)
    offline = ROOT / "experiments" / "offline"
    if args.bc_loss is None:  # --help: this probe's options, then the training script's
        print(__doc__)
        return cli.train_offline(rest, search_dirs=[offline], description="train_offline.py")
    loss = LOSSES[args.bc_loss]
    if args.bc_loss == "weighted_action" and args.target_clip is None:
        raise SystemExit(
            "--bc_loss weighted_action weighs an error by (1 - a^2)^-2, unbounded at the bounds: "
            "give --target_clip (0.9 bounds the weight at 27.7)"
        )
    if args.target_clip is not None:
        if not 0.0 < args.target_clip < 1.0:
            raise SystemExit(f"--target_clip {args.target_clip}: give a bound inside (0, 1)")
        loss = with_target_clip(loss, args.target_clip)
    lu.deterministic_bc_error = loss
    return cli.train_offline(
        rest, search_dirs=[offline, offline.parent / "gym"], description=__doc__
    )


if __name__ == "__main__":
    main(sys.argv[1:])
