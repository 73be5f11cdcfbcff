"""Adam with a short hot path.

An RL update takes three optimizer steps (critic, actor, entropy coefficient) on small
networks. On a CPU, :class:`torch.optim.Adam`'s generic machinery around the fused kernel (step
hooks, a profiler range, rebuilding the tensor lists and grouping them by device on every call)
then costs several times the kernel itself. :class:`LeanAdam` keeps Adam's maths, state format
and ``state_dict`` and only shortens the path: the first step runs torch's own implementation
(which creates the state), later steps call the same fused kernel on tensor lists cached from
that state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

_FUSED_KERNEL = getattr(torch, "_fused_adam_", None)


class LeanAdam(torch.optim.Adam):
    """:class:`torch.optim.Adam` with ``fused=True`` whose ``step`` skips the optimizer hooks.

    The update is Kingma & Ba (2015), with ``weight_decay`` added to the gradient (L2, not
    AdamW): ``m <- b1 m + (1 - b1) g``, ``v <- b2 v + (1 - b2) g^2``,
    ``theta <- theta - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)``.

    Differences from the base class, all on the hot path: step pre/post hooks registered with
    ``register_step_pre_hook``/``register_step_post_hook`` are not run and no profiler range is
    recorded around ``step`` and ``zero_grad``. Steps in which some parameter has no gradient, steps
    with a ``closure`` and the first step go through the base class unchanged.

    :param params: parameters or parameter groups, as for :class:`torch.optim.Adam`.
    :param kwargs: Adam's settings (``lr``, ``betas``, ``eps``, ``weight_decay``); ``fused``
        is always on.
    """

    def __init__(self, params: Iterable[Any], **kwargs: Any) -> None:
        kwargs["fused"] = True
        kwargs.pop("foreach", None)
        super().__init__(params, **kwargs)
        self._cache: list[tuple[list, list, list, torch.Tensor]] | None = None

    def _build_cache(self) -> list[tuple[list, list, list, torch.Tensor]] | None:
        """The tensor lists of every group, or ``None`` while the short path does not apply
        (some parameter has no state yet, the parameters of a group have taken different numbers
        of steps or mix devices or dtypes, or a setting the short path does not implement is
        on).

        The parameters of a group then share one step-count tensor (the fused kernel reads a
        list of them; one shared tensor is incremented by one call instead of one per
        parameter). ``state[p]["step"]`` stays correct for every parameter.
        """
        eligible = []
        for group in self.param_groups:
            if group["amsgrad"] or group["maximize"] or group.get("decoupled_weight_decay"):
                return None
            params = list(group["params"])
            if any(p.device != params[0].device or p.dtype != params[0].dtype for p in params):
                return None  # one kernel call per group needs one device and one dtype
            states = [self.state.get(p) for p in params]
            if any(not s for s in states):
                return None
            if any(
                s["step"] is not states[0]["step"] and not torch.equal(s["step"], states[0]["step"])
                for s in states
            ):
                return None
            eligible.append((params, states))
        # every group qualifies: only now share the step tensors (a group left shared while the
        # optimizer stays on torch's path would have its counter incremented once per parameter)
        cache = []
        for params, states in eligible:
            shared = states[0]["step"] if states else torch.zeros(())
            for s in states:
                s["step"] = shared
            cache.append(
                (params, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states], shared)
            )
        return cache

    def _unshare_steps(self) -> None:
        """Give every parameter its own step tensor again (torch's step increments each)."""
        cache = getattr(self, "_cache", None)  # ``add_param_group`` runs inside ``__init__``
        if cache is None:
            return
        for params, _, _, shared in cache:
            for p in params:
                self.state[p]["step"] = shared.clone()
        self._cache = None

    @torch.no_grad()
    def _lean_step(self) -> bool:
        """One Adam step on the cached lists; ``False`` (nothing done) when it does not apply."""
        if self._cache is None or _FUSED_KERNEL is None:
            return False
        grads_of_groups = []
        for params, *_ in self._cache:
            grads = [p.grad for p in params]
            if any(g is None for g in grads):
                return False
            grads_of_groups.append(grads)
        for group, (params, exp_avgs, exp_avg_sqs, step), grads in zip(
            self.param_groups, self._cache, grads_of_groups
        ):
            if not params:
                continue
            step.add_(1)
            beta1, beta2 = group["betas"]
            _FUSED_KERNEL(
                params,
                grads,
                exp_avgs,
                exp_avg_sqs,
                [],
                [step] * len(params),
                amsgrad=False,
                lr=group["lr"],
                beta1=beta1,
                beta2=beta2,
                weight_decay=group["weight_decay"],
                eps=group["eps"],
                maximize=False,
                grad_scale=None,
                found_inf=None,
            )
        return True

    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """One Adam step (see the class docstring for the path it takes)."""
        if closure is None and self._lean_step():
            return None
        self._unshare_steps()
        loss = super().step(closure)
        self._cache = self._build_cache()
        return loss

    # torch wraps ``step`` with its hook-and-profiler wrapper unless it is marked as wrapped
    step.hooked = True  # type: ignore[attr-defined]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every gradient (or zero it in place when ``set_to_none`` is false)."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.zero_()

    def state_dict(self) -> dict[str, Any]:
        """As the base class, with a step tensor of its own per parameter (no sharing survives
        into a checkpoint, so any Adam implementation reads it correctly)."""
        out = super().state_dict()
        out["state"] = {
            k: {**v, "step": v["step"].clone()} if "step" in v else dict(v)
            for k, v in out["state"].items()
        }
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load as the base class does; the cached tensor lists are rebuilt from the new state."""
        self._cache = None
        super().load_state_dict(state_dict)
        self._cache = self._build_cache()

    def __setstate__(self, state: dict[str, Any]) -> None:
        """After ``pickle`` or ``copy.deepcopy`` (torch's optimizer copies only its state and
        groups): every parameter gets its own step tensor, as in :meth:`state_dict`, and the
        cached lists are rebuilt over the copied tensors."""
        super().__setstate__(state)
        for s in self.state.values():
            if "step" in s:
                s["step"] = s["step"].clone()
        self._cache = self._build_cache()

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group as the base class does; the next step rebuilds the cache."""
        self._unshare_steps()
        super().add_param_group(param_group)


@dataclass(frozen=True)
class ParamGroup:
    """Parameters that share a learning rate, an L2 coefficient and a gradient-norm clip.

    :param params: the parameters.
    :param lr: Adam learning rate.
    :param l2: L2 coefficient (Adam's ``weight_decay``: ``l2 * theta`` is added to the gradient).
    :param clip: maximum gradient norm of the group, or ``None`` for no clipping.
    :param betas: Adam's ``(beta1, beta2)``.
    """

    params: Sequence[torch.Tensor]
    lr: float
    l2: float = 0.0
    clip: float | None = None
    betas: tuple[float, float] = (0.9, 0.999)


def build_optimizer(*groups: ParamGroup) -> torch.optim.Adam | None:
    """One Adam optimizer over the non-empty groups; each group keeps its own clip.

    Uses the fused Adam kernel through :class:`super_sac.optim.LeanAdam` (or torch's foreach
    Adam on devices without the fused kernel), so that a step is a handful of calls whatever the
    number of parameter tensors. :return: ``None`` when no group has parameters.
    """
    param_groups = [
        {
            "params": list(g.params),
            "lr": g.lr,
            "betas": tuple(g.betas),
            "weight_decay": g.l2,
            "max_grad_norm": g.clip,
        }
        for g in groups
        if len(g.params) > 0
    ]
    if not param_groups:
        return None
    fused = all(
        p.is_floating_point() and p.device.type in ("cpu", "cuda")
        for g in param_groups
        for p in g["params"]
    )
    if fused:
        try:
            return LeanAdam(param_groups)
        except RuntimeError:  # a torch version without a fused Adam kernel for this device
            pass
    return torch.optim.Adam(param_groups, foreach=True)


def optimizer_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """Zero the gradients, backpropagate ``loss``, clip each group's gradient norm, step."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    for group in optimizer.param_groups:
        clip = group.get("max_grad_norm")
        if clip is not None and clip > 0:
            torch.nn.utils.clip_grad_norm_(group["params"], clip, foreach=True)
    optimizer.step()
