"""The pure pieces of the updates: targets, losses, critic reductions, target-network updates and
exploration schedules. Each is a small function of tensors that tests check by hand."""

from __future__ import annotations

from collections.abc import Iterable

import torch

CRITIC_REDUCTIONS = ("min", "mean", "first")


def reduce_critics(q: torch.Tensor, reduction: str) -> torch.Tensor:
    """Collapse an ensemble of critic outputs ``(N, B, 1)`` into ``(B, 1)``.

    ``"min"``: clipped double-Q generalised to N critics (Fujimoto et al. 2018);
    ``"mean"``: the ensemble average (REDQ's actor objective, Chen et al. 2021);
    ``"first"``: ``Q_1`` alone (TD3's actor objective).
    """
    if reduction == "min":
        return q.amin(dim=0)
    if reduction == "mean":
        return q.mean(dim=0)
    if reduction == "first":
        return q[0]
    raise ValueError(f"unknown critic reduction {reduction!r}; choose one of {CRITIC_REDUCTIONS}")


def random_subset_min(
    q: torch.Tensor, subset_size: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Minimum over a fresh random subset of ``subset_size`` of the ``N`` critics (REDQ's target).

    ``q`` is ``(N, B, 1)``; the subset is an index into the member dimension, drawn once per call
    (shared by the whole batch, as in Chen et al. 2021, Algorithm 1). With ``subset_size >= N``
    this is the plain minimum and draws no random numbers.
    """
    num_critics = q.shape[0]
    if subset_size >= num_critics:
        return q.amin(dim=0)
    idx = torch.randperm(num_critics, generator=generator, device="cpu")[:subset_size]
    return q.index_select(0, idx.to(q.device)).amin(dim=0)


def td_target(
    reward: torch.Tensor, done: torch.Tensor, discount: torch.Tensor, next_value: torch.Tensor
) -> torch.Tensor:
    """N-step TD target ``y = R + discount * (1 - done) * V(s')``.

    ``R`` is the discounted sum of the (up to) n rewards, ``discount = gamma ** k`` for the k steps
    summed, ``done`` is 1 only when the episode *terminated* (a truncated episode still
    bootstraps from its final observation).
    """
    return reward + discount * (1.0 - done) * next_value


def soft_value(
    next_q: torch.Tensor, next_log_prob: torch.Tensor, alpha: torch.Tensor
) -> torch.Tensor:
    """SAC's soft state value ``V(s') = Q(s', a') - alpha * log pi(a'|s')``, ``a' ~ pi``."""
    return next_q - alpha * next_log_prob


def clipped_gaussian_noise(like: torch.Tensor, std: float, clip: float | None) -> torch.Tensor:
    """``clip(N(0, std^2), -clip, clip)`` shaped like ``like`` (TD3's target smoothing noise)."""
    noise = torch.randn_like(like) * std
    if clip is not None:
        noise = noise.clamp(-clip, clip)
    return noise


def smoothed_target_action(action: torch.Tensor, std: float, clip: float | None) -> torch.Tensor:
    """TD3 target policy smoothing: ``clip(mu'(s') + clip(eps, -c, c), -1, 1)``."""
    if std <= 0.0:
        return action
    return (action + clipped_gaussian_noise(action, std, clip)).clamp(-1.0, 1.0)


def critic_loss(
    q: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """``sum_i 0.5 * mean_b w_b (Q_i(s_b, a_b) - y_b)^2`` over the N critics in ``q`` ``(N, B, 1)``.

    Each critic regresses on the same target (Haarnoja et al. 2018, eq. 5); ``weights`` are the
    importance-sampling weights of prioritized replay (all ones for uniform replay). ``target`` is
    ``(B, 1)``, or ``(N, B, 1)`` when each critic has its own (PopArt-normalised) target.
    """
    if target.dim() == 2:  # one target for every critic
        target = target.unsqueeze(0)
    sq_err = (q - target).pow(2)
    if weights is not None:
        sq_err = sq_err * weights.unsqueeze(0)
    return 0.5 * sq_err.mean(dim=(1, 2)).sum()


def sac_actor_loss(q: torch.Tensor, log_prob: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """SAC's policy objective ``E[alpha * log pi(a|s) - Q(s, a)]``, ``a ~ pi`` reparameterised."""
    return (alpha * log_prob - q).mean()


def afbc_actor_loss(log_prob: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Advantage-filtered behavioral cloning objective ``-E[w * log pi(a_data|s)]``.

    ``w`` is the filter weight of each dataset action (times an importance weight when the
    batch was drawn by priority); ``w = 1`` is plain behavioral cloning.

    :param log_prob: ``(B, 1)`` log-probabilities of the dataset actions.
    :param weights: ``(B, 1)`` per-sample weights (no gradient flows through them).
    """
    return -(weights.detach() * log_prob).mean()


def deterministic_actor_loss(q: torch.Tensor) -> torch.Tensor:
    """Deterministic policy gradient objective ``-E[Q(s, mu(s))]`` (Silver et al. 2014)."""
    return -q.mean()


def alpha_loss(
    log_alpha: torch.Tensor, log_prob_mean: torch.Tensor, target_entropy: float
) -> torch.Tensor:
    """Automatic entropy tuning: ``L(log alpha) = -log_alpha * (E[log pi] + H_target)``.

    The loss is written in ``log alpha`` (as in softlearning and SB3) rather than in alpha
    (Haarnoja et al. 2018b, eq. 18): both have the same fixed point, ``E[-log pi] = H_target``, but
    the gradient ``-(E[log pi] + H_target)`` does not shrink as alpha approaches zero.
    """
    return -(log_alpha * (log_prob_mean.detach() + target_entropy))


def continuous_target_entropy(act_space_size: int, target_entropy_mul: float) -> float:
    """The usual target entropy for continuous actions, ``-|A| * target_entropy_mul``."""
    return -float(act_space_size) * float(target_entropy_mul)


@torch.no_grad()
def soft_update(
    target_params: list[torch.Tensor], online_params: list[torch.Tensor], tau: float
) -> None:
    """Polyak averaging ``theta' <- (1 - tau) theta' + tau theta`` as one fused ``lerp_`` call."""
    if target_params:
        torch._foreach_lerp_(target_params, online_params, tau)


@torch.no_grad()
def hard_update(target_params: list[torch.Tensor], online_params: list[torch.Tensor]) -> None:
    """Copy the online parameters into the target ones."""
    if target_params:
        torch._foreach_copy_(target_params, online_params)


def params_of(*modules: torch.nn.Module) -> list[torch.Tensor]:
    """Every parameter of the given modules, in a stable order, as one flat list."""
    out: list[torch.Tensor] = []
    for m in modules:
        out.extend(m.parameters())
    return out


def linear_schedule(init: float, final: float, anneal_steps: int, step: int) -> float:
    """Linear interpolation from ``init`` to ``final`` over ``anneal_steps``, then constant."""
    if anneal_steps <= 0:
        return float(final)
    frac = min(max(step, 0) / anneal_steps, 1.0)
    return float(init + frac * (final - init))


class GaussianExplorationNoise:
    """Additive Gaussian action noise whose std follows a linear schedule (DDPG/TD3 exploration).

    The schedule advances by the number of *environment transitions* (``exploration_param_anneal``
    in the loop's settings).

    :param init: initial standard deviation.
    :param final: final standard deviation.
    :param anneal: transitions over which the std moves from ``init`` to ``final``.
    """

    def __init__(self, init: float, final: float, anneal: int) -> None:
        self.init, self.final, self.anneal = float(init), float(final), int(anneal)
        self.transitions = 0

    @property
    def std(self) -> float:
        """The current standard deviation."""
        return linear_schedule(self.init, self.final, self.anneal, self.transitions)

    def advance(self, transitions: int) -> None:
        """Move the schedule forward by ``transitions`` environment transitions."""
        self.transitions += int(transitions)

    def perturb(self, action: torch.Tensor) -> torch.Tensor:
        """``clip(a + N(0, std^2), -1, 1)``."""
        return (action + torch.randn_like(action) * self.std).clamp(-1.0, 1.0)

    def state_dict(self) -> dict[str, int]:
        return {"transitions": self.transitions}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.transitions = int(state["transitions"])


def grad_norm(params: Iterable[torch.Tensor]) -> torch.Tensor:
    """Total L2 norm of the gradients of ``params`` (no host sync)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(())
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
