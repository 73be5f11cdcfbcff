"""The pure pieces of the updates: targets, losses, critic reductions, target-network updates and
exploration schedules. Each is a small function of tensors that tests check by hand."""

from __future__ import annotations

import math

import numpy as np
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
    idx = random_subset(q.shape[0], subset_size, q.device, generator)
    return (q if idx is None else q.index_select(0, idx)).amin(dim=0)


def random_subset(
    num_critics: int,
    subset_size: int,
    device: torch.device | str = "cpu",
    generator: torch.Generator | None = None,
) -> torch.Tensor | None:
    """Indices of a fresh random subset of ``subset_size`` of ``num_critics`` critics, or
    ``None`` (every critic) when ``subset_size >= num_critics``. Passed as ``members`` to a
    critic ensemble, only the chosen critics are evaluated (REDQ, Chen et al. 2021)."""
    if subset_size >= num_critics:
        return None
    idx = torch.randperm(num_critics, generator=generator, device="cpu")[:subset_size]
    return idx.to(device)


def member_subset(
    num_members: int, num_critics: int, subset: torch.Tensor | None
) -> torch.Tensor | None:
    """The same per-member critic ``subset`` inside each of ``num_members`` ensemble members
    whose critics are stored consecutively (member ``e`` owns critics ``e*N .. e*N + N - 1``)."""
    if subset is None:
        return None
    offsets = torch.arange(num_members, device=subset.device) * num_critics
    return (offsets[:, None] + subset[None, :]).reshape(-1)


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


def discrete_soft_value(
    next_q: torch.Tensor,
    next_probs: torch.Tensor,
    next_log_probs: torch.Tensor,
    alpha: torch.Tensor,
) -> torch.Tensor:
    """SAC-Discrete's soft state value, an exact expectation over the ``A`` actions
    (Christodoulou 2019, eq. 10): ``V(s') = sum_a pi(a|s') [Q(s', a) - alpha log pi(a|s')]``.

    :param next_q: ``(B, A)`` target Q-values (already reduced over the critic ensemble).
    :param next_probs: ``(B, A)`` action probabilities ``pi(.|s')``.
    :param next_log_probs: ``(B, A)`` their logarithms.
    :param alpha: entropy coefficient.
    :return: ``(B, 1)``.
    """
    return (next_probs * (next_q - alpha * next_log_probs)).sum(dim=-1, keepdim=True)


def gather_actions(q: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """Pick ``Q_i(s_b, a_b)`` out of discrete critic outputs.

    :param q: ``(N, B, A)`` values of every action for each of the N critics.
    :param action: ``(B,)`` or ``(B, 1)`` integer actions.
    :return: ``(N, B, 1)``, the layout of continuous critics.
    """
    idx = action.reshape(1, -1, 1).long().expand(q.shape[0], -1, 1)
    return q.gather(-1, idx)


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


def straight_through_clamp(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """``clamp(x, low, high)`` in the forward pass with the gradient of the identity: ``x -
    sg(x) + sg(clamp(x))`` (DrQ-v2's truncated normal, Yarats et al. 2021)."""
    return x + (x.clamp(low, high) - x).detach()


def noisy_actor_action(
    action: torch.Tensor,
    std: float | torch.Tensor,
    clip: float | None,
    noise: torch.Tensor | None = None,
) -> torch.Tensor:
    """DrQ-v2's actor-update action (Yarats et al. 2021, ``update_actor``):
    ``a = clamp_st(mu(s) + clip(eps, -c, c), -1, 1)`` with ``eps ~ N(0, std^2)``.

    ``clamp_st`` is :func:`straight_through_clamp`: the action stays in ``[-1, 1]`` but its
    gradient with respect to ``mu(s)`` is 1 everywhere, also where the clamp binds.

    :param action: the deterministic actor's ``mu(s)``, ``(B, A)`` (with gradient).
    :param std: the current exploration std (``0``: ``mu(s)`` itself).
    :param clip: ``c`` (DrQ-v2's ``stddev_clip`` 0.3); ``None``: no clip of the noise.
    :param noise: a standard-normal draw shaped like ``action`` (scaled by ``std`` here);
        ``None``: drawn from the global torch RNG.
    """
    if noise is None:
        if isinstance(std, (int, float)) and std <= 0.0:
            return action
        noise = torch.randn_like(action)
    eps = noise * std
    if clip is not None:
        eps = eps.clamp(-clip, clip)
    return straight_through_clamp(action + eps.detach(), -1.0, 1.0)


def critic_loss(
    q: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """``mean_i mean_b w_b (Q_i(s_b, a_b) - y_b)^2``: the N critics' weighted mean squared TD
    errors, averaged over the critics in ``q`` ``(N, B, 1)``.

    Each critic regresses on the same target (Haarnoja et al. 2018, eq. 5). Averaging over the
    critics (and over SUNRISE's members, stacked in the same dimension) follows the original
    super_sac: the loss, and so the gradient norm that ``critic_clip`` and ``encoder_clip`` bound,
    does not grow with the ensemble size (a sum would make REDQ's ten critics bind a clip at a
    fifth of the threshold). For two critics it equals SAC's ``sum_i 0.5 * MSE_i``.

    ``weights`` are the importance-sampling weights of prioritized replay (all ones for uniform
    replay), ``(B, 1)``, or ``(N, B, 1)`` per critic (SUNRISE's backup weights and bootstrap
    masks). ``target`` is ``(B, 1)``, or ``(N, B, 1)`` when each critic has its own target
    (PopArt-normalised, or an ensemble member's).
    """
    if target.dim() == 2:  # one target for every critic
        target = target.unsqueeze(0)
    sq_err = (q - target).pow(2)
    if weights is not None:
        sq_err = sq_err * (weights.unsqueeze(0) if weights.dim() == 2 else weights)
    return sq_err.mean()


def averaged_td_target(targets: list[torch.Tensor]) -> torch.Tensor:
    """DrQ's target (Kostrikov et al. 2020, eq. 3): the mean of the TD targets ``(B, 1)`` computed
    from ``K = len(targets)`` independently augmented next observations,
    ``y = 1/K sum_k [R + gamma^n (1 - done) V(aug_k(s'))]``; ``K = 1`` is the plain target."""
    if len(targets) == 1:
        return targets[0]
    return torch.stack(targets).mean(dim=0)


def encoder_invariance_loss(aug_rep: torch.Tensor, clean_rep: torch.Tensor) -> torch.Tensor:
    """Encoder invariance to augmentation: ``||phi(aug(s)) - sg(phi(s))||``, the Frobenius norm
    of the whole ``(B, D)`` difference of the features of augmented and clean observations,
    the clean ones detached (Raileanu et al. 2021's DrAC regularises the same way; the scale --
    a norm over the batch, neither squared nor averaged -- is the original super_sac's, so its
    ``encoder_lambda`` values keep their meaning).

    :param aug_rep: ``(B, D)`` features of the augmented observations (gradients flow).
    :param clean_rep: ``(B, D)`` features of the clean observations (treated as constants).
    """
    return torch.linalg.vector_norm(aug_rep - clean_rep.detach())


def feature_dot(features: torch.Tensor, next_features: torch.Tensor) -> torch.Tensor:
    """DR3's feature co-adaptation of each critic (Kumar et al. 2021, arXiv 2112.04716, eq. 5):
    ``mean_b phi_k(s_b, a_b) . phi_k(s'_b, a'_b)``, the batch mean of the dot products of each
    critic's penultimate features at a transition's state-action pair and at its next pair.

    :param features: ``(K, B, H)`` features ``phi_k(s, a)`` of ``K`` critics.
    :param next_features: ``(K, B, H)`` features ``phi_k(s', a')``.
    :return: ``(K,)``, one value per critic. DR3's regulariser over an ensemble is their mean
        (each critic regularised by its own term, averaged like the critics' TD losses).
    """
    return (features * next_features).sum(dim=-1).mean(dim=-1)


def action_invariance_loss(
    aug_log_prob: torch.Tensor, clean_log_prob: torch.Tensor
) -> torch.Tensor:
    """Policy invariance to augmentation (the original super_sac's ``actor_lambda`` term, in the
    spirit of DrAC, Raileanu et al. 2021): ``mean_b (log pi(a_b|phi(aug(s_b)))
    - sg(log pi(a_b|phi(s_b))))^2`` for actions ``a_b`` drawn from the clean policy.

    :param aug_log_prob: ``(B, 1)`` log-probabilities under the augmented observations.
    :param clean_log_prob: ``(B, 1)`` log-probabilities under the clean ones (detached).
    """
    return (aug_log_prob - clean_log_prob.detach()).pow(2).mean()


def deterministic_action_invariance_loss(
    aug_action: torch.Tensor, clean_action: torch.Tensor
) -> torch.Tensor:
    """Action invariance of a deterministic actor: the squared distance
    ``mean_b ||mu(phi(aug(s_b))) - sg(mu(phi(s_b)))||^2`` between its actions ``(B, A)`` on
    augmented and clean observations."""
    return (aug_action - clean_action.detach()).pow(2).sum(dim=-1).mean()


BACKUP_WEIGHT_TYPES = ("sunrise", "softmax")


def backup_weights(q_std: torch.Tensor, temperature: float, weight_type: str) -> torch.Tensor:
    """Weights of SUNRISE's weighted Bellman backup from the ensemble's target-Q spread.

    ``q_std`` ``(B, 1)`` is the standard deviation of the target critics' values at ``(s', a')``.
    ``"sunrise"``: ``w = sigmoid(-std * T) + 0.5``, in ``(0.5, 1]`` (Lee et al. 2021, eq. 5);
    ``"softmax"``: ``w = B * softmax_b(-std_b * T)``: the batch's weights sum to ``B`` (mean 1)
    and move towards the most certain targets as ``T`` grows. No gradient flows through them.
    """
    scaled = -q_std.detach() * temperature
    if weight_type == "sunrise":
        return torch.sigmoid(scaled) + 0.5
    if weight_type == "softmax":
        return torch.softmax(scaled, dim=0) * scaled.shape[0]
    raise ValueError(f"unknown weight_type {weight_type!r}; choose one of {BACKUP_WEIGHT_TYPES}")


_HASH_MUL = (0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D)


def bootstrap_masks(
    idxs: torch.Tensor, num_members: int, prob: float, seed: int = 0
) -> torch.Tensor:
    """SUNRISE's bootstrap masks ``m_{e,i} ~ Bernoulli(prob)``, fixed per stored transition.

    Each replay slot ``i`` and member ``e`` get a pseudo-random number from an integer hash of
    ``(seed, e, i)``; the mask is that number ``< prob``. Masks are therefore the same every time
    a slot is sampled (as if drawn once when the transition was stored) without storing them.
    :return: float masks ``(num_members, B, 1)``.
    """
    i = idxs.to(torch.int64).reshape(1, -1)
    e = torch.arange(num_members, device=idxs.device, dtype=torch.int64).reshape(-1, 1)
    h = (i * _HASH_MUL[0] + e * _HASH_MUL[1] + seed * _HASH_MUL[2]) & 0xFFFFFFFF
    h = ((h ^ (h >> 15)) * 0x2C1B3C6D) & 0xFFFFFFFF
    h = ((h ^ (h >> 12)) * 0x297A2D39) & 0xFFFFFFFF
    h = h ^ (h >> 15)
    uniform = h.to(torch.float64) / 2**32
    return (uniform < prob).to(torch.float32).unsqueeze(-1)


def ucb_choice(q: torch.Tensor, bonus: float) -> torch.Tensor:
    """SUNRISE's optimistic action choice among candidate actions.

    ``q`` ``(K, C, B)`` holds the values of ``C`` candidate actions (one per actor) for ``B``
    states under ``K`` critics; the score is ``mean_K Q + bonus * std_K Q`` (population std)
    and the result is the index of the best candidate for each state, ``(B,)``.
    """
    score = q.mean(dim=0) + bonus * q.std(dim=0, correction=0)
    return score.argmax(dim=0)


def weighted_mean(x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """``mean_b w_b x_b`` (the plain mean without ``weights``): a batch average under prioritized
    replay's importance weights ``(B, 1)``, which are ones for uniform batches."""
    return x.mean() if weights is None else (x * weights).mean()


def normalized_weighted_mean(x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """``sum_b w_b x_b / sum_b w_b`` over the last two dimensions (the plain mean without
    ``weights``): a consistent estimate of the uniform mean from a prioritized batch, whatever the
    scale of the weights. Alpha's input uses it: unlike a loss, whose gradient a common factor on
    the weights only rescales, alpha balances ``E[log pi]`` against a fixed target, so the scale
    of ``mean_b w_b`` (below 1 for prioritized replay's weights) would move its fixed point."""
    if weights is None:
        return x.mean(dim=(-2, -1))
    return (x * weights).sum(dim=(-2, -1)) / weights.sum(dim=(-2, -1)).clamp_min(1e-12)


def sac_actor_loss(
    q: torch.Tensor,
    log_prob: torch.Tensor,
    alpha: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """SAC's policy objective ``E[alpha * log pi(a|s) - Q(s, a)]``, ``a ~ pi`` reparameterised;
    each sample weighted by ``weights`` ``(B, 1)`` when given."""
    return weighted_mean(alpha * log_prob - q, weights)


def discrete_actor_loss(
    q: torch.Tensor,
    probs: torch.Tensor,
    log_probs: torch.Tensor,
    alpha: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """SAC-Discrete's policy objective, exact over actions (Christodoulou 2019, eq. 12):
    ``E_s[sum_a pi(a|s) (alpha log pi(a|s) - Q(s, a))]``.

    :param q: ``(B, A)`` critic values (reduced over the ensemble, no gradient needed).
    :param probs: ``(B, A)`` action probabilities.
    :param log_probs: ``(B, A)`` their logarithms.
    :param alpha: entropy coefficient.
    :param weights: ``(B, 1)`` per-state weights, or ``None``.
    """
    per_state = (probs * (alpha * log_probs - q)).sum(dim=-1, keepdim=True)
    return weighted_mean(per_state, weights)


def expected_log_prob(
    probs: torch.Tensor, log_probs: torch.Tensor, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """``E_s[sum_a pi(a|s) log pi(a|s)]``, minus the mean exact entropy of categorical policies
    (states weighted by ``weights`` ``(B, 1)``, self-normalised, when given).

    This is what :func:`alpha_loss` takes as ``log_prob_mean`` for discrete actions
    (Christodoulou 2019, eq. 11: the entropy is computed exactly instead of from a sample).
    """
    return normalized_weighted_mean((probs * log_probs).sum(dim=-1, keepdim=True), weights)


def afbc_actor_loss(log_prob: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Advantage-filtered behavioral cloning objective ``-E[w * log pi(a_data|s)]``.

    ``w`` is the filter weight of each dataset action (times an importance weight when the
    batch was drawn by TD priority); ``w = 1`` is plain behavioral cloning.

    :param log_prob: ``(B, 1)`` log-probabilities of the dataset actions.
    :param weights: ``(B, 1)`` per-sample weights (no gradient flows through them).
    """
    return -(weights.detach() * log_prob).mean()


def deterministic_bc_error(action_pred: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """Per-sample squared error ``mean_j (mu(s)_j - a_j)^2`` of a deterministic actor's actions
    against the dataset's, ``(B, 1)``.

    Behavioral cloning of a deterministic policy minimises its batch mean (d3rlpy's BC and the BC
    term of TD3+BC, Fujimoto & Gu 2021): the negative log-likelihood of ``a`` under a Gaussian of
    fixed standard deviation around ``mu(s)``, up to a scale and constants.

    :param action_pred: ``(B, A)`` the actor's actions ``mu(s)``.
    :param action: ``(B, A)`` the dataset's actions.
    """
    return (action_pred - action).pow(2).mean(dim=-1, keepdim=True)


def deterministic_actor_loss(q: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Deterministic policy gradient objective ``-E[Q(s, mu(s))]`` (Silver et al. 2014); each
    sample weighted by ``weights`` ``(B, 1)`` when given."""
    return -weighted_mean(q, weights)


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


def discrete_target_entropy(num_actions: int, target_entropy_mul: float) -> float:
    """SAC-Discrete's target entropy ``target_entropy_mul * 0.98 * log |A|`` (Christodoulou 2019:
    98% of the uniform policy's entropy ``-log(1/|A|)``).

    The 0.98 factor comes from Atari-sized action sets. With few actions it is known to be too
    high: for two actions (CartPole) an entropy of ``0.98 log 2`` means ``pi = (0.42, 0.58)`` in
    every state, a policy that can barely commit to an action, so alpha keeps growing. Lower it
    with ``target_entropy_mul`` (0.3 gives ``pi = (0.05, 0.95)`` for two actions).
    """
    return float(target_entropy_mul) * 0.98 * math.log(int(num_actions))


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

    def state_dict(self) -> dict[str, int]:
        return {"transitions": self.transitions}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.transitions = int(state["transitions"])


def epsilon_greedy(
    greedy: np.ndarray, epsilon: float, num_actions: int, rng: np.random.Generator
) -> np.ndarray:
    """Epsilon-greedy exploration for discrete actions (Mnih et al. 2015): each action is
    replaced, with probability ``epsilon``, by one drawn uniformly from ``[0, num_actions)``.

    :param greedy: ``(B,)`` integer actions (the greedy or sampled choice).
    :param epsilon: probability of a random action.
    :param num_actions: size of the action set.
    :param rng: the random generator (the loop's, so that checkpoints keep its state).
    :return: ``(B,)`` int64 actions.
    """
    greedy = np.asarray(greedy, dtype=np.int64)
    explore = rng.random(greedy.shape) < epsilon
    random_actions = rng.integers(0, num_actions, size=greedy.shape, dtype=np.int64)
    return np.where(explore, random_actions, greedy)
