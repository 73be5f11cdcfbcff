"""The pure pieces of the updates, checked against numbers computed by hand."""

import math

import pytest
import torch

from super_sac import learning_utils as lu


def test_td_target_terminated_vs_truncated_and_nstep_discount():
    reward = torch.tensor([[1.0], [1.0], [2.75]])
    next_value = torch.tensor([[10.0], [10.0], [4.0]])
    # row 0 terminated: no bootstrap; row 1 truncated (done=0): bootstraps with gamma=0.9;
    # row 2 a 3-step transition with gamma=0.5 -> discount 0.125
    done = torch.tensor([[1.0], [0.0], [0.0]])
    discount = torch.tensor([[0.9], [0.9], [0.125]])
    y = lu.td_target(reward, done, discount, next_value)
    assert torch.allclose(y, torch.tensor([[1.0], [1.0 + 0.9 * 10.0], [2.75 + 0.125 * 4.0]]))


def test_soft_value_subtracts_entropy_term():
    v = lu.soft_value(torch.tensor([[3.0]]), torch.tensor([[-2.0]]), torch.tensor(0.5))
    assert v.item() == pytest.approx(3.0 - 0.5 * -2.0)


def test_critic_loss_sums_over_critics_and_applies_weights():
    q = torch.tensor([[[1.0], [2.0]], [[0.0], [4.0]]])  # 2 critics x 2 samples
    y = torch.tensor([[1.0], [1.0]])
    # critic 0 errors: 0, 1 -> mean 0.5; critic 1 errors: 1, 9 -> mean 5; 0.5 * (0.5 + 5)
    assert lu.critic_loss(q, y).item() == pytest.approx(2.75)
    w = torch.tensor([[2.0], [0.0]])
    # weighted: critic 0: (0*2 + 1*0)/2 = 0; critic 1: (1*2 + 9*0)/2 = 1; 0.5 * 1
    assert lu.critic_loss(q, y, w).item() == pytest.approx(0.5)


def test_reductions():
    q = torch.tensor([[[3.0]], [[1.0]], [[2.0]]])
    assert lu.reduce_critics(q, "min").item() == 1.0
    assert lu.reduce_critics(q, "mean").item() == 2.0
    assert lu.reduce_critics(q, "first").item() == 3.0
    with pytest.raises(ValueError, match="unknown critic reduction"):
        lu.reduce_critics(q, "max")


def test_random_subset_min_uses_the_drawn_subset():
    # critic i predicts i for every sample, so the subset minimum is the smallest drawn index
    q = torch.arange(5.0).view(5, 1, 1).expand(5, 3, 1)
    gen = torch.Generator().manual_seed(3)
    expected_idx = torch.randperm(5, generator=torch.Generator().manual_seed(3))[:2]
    out = lu.random_subset_min(q, 2, generator=gen)
    assert out.shape == (3, 1)
    assert torch.all(out == expected_idx.min().float())


def test_random_subset_min_draws_every_pair_uniformly():
    q = torch.arange(4.0).view(4, 1, 1)
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(4)
    n = 6000
    for _ in range(n):
        counts[int(lu.random_subset_min(q, 2, generator=gen))] += 1
    # P(min = k) for 2 of 4 without replacement: pairs with min 0: 3/6, 1: 2/6, 2: 1/6, 3: 0
    freq = counts / n
    assert torch.allclose(freq, torch.tensor([3 / 6, 2 / 6, 1 / 6, 0.0]), atol=0.02)


def test_random_subset_min_full_set_is_plain_min():
    q = torch.tensor([[[2.0], [5.0]], [[3.0], [1.0]]])
    assert torch.equal(lu.random_subset_min(q, 2), torch.tensor([[2.0], [1.0]]))


def test_alpha_loss_and_gradient_by_hand():
    log_alpha = torch.tensor(math.log(0.5), requires_grad=True)
    log_prob_mean = torch.tensor(-0.3)
    target_entropy = -1.0
    loss = lu.alpha_loss(log_alpha, log_prob_mean, target_entropy)
    # -log(0.5) * (-0.3 - 1.0) = 0.6931 * -1.3
    assert loss.item() == pytest.approx(-math.log(0.5) * 1.3 * -1.0)
    loss.backward()
    # d/dlog_alpha = -(E[log pi] + H) = 1.3: entropy (0.3) is above target (-1) -> alpha decreases
    assert log_alpha.grad.item() == pytest.approx(1.3)


def test_target_entropy():
    assert lu.continuous_target_entropy(6, 1.0) == -6.0
    assert lu.continuous_target_entropy(4, 0.5) == -2.0


def test_soft_update_by_hand():
    target = [torch.tensor([0.0, 10.0]), torch.tensor([1.0])]
    online = [torch.tensor([1.0, 0.0]), torch.tensor([3.0])]
    lu.soft_update(target, online, 0.1)
    assert torch.allclose(target[0], torch.tensor([0.1, 9.0]))
    assert torch.allclose(target[1], torch.tensor([1.2]))
    lu.hard_update(target, online)
    assert torch.equal(target[0], online[0])


def test_smoothed_target_action_clips_noise_and_action():
    torch.manual_seed(0)
    a = torch.full((10000, 1), 0.9)
    out = lu.smoothed_target_action(a, std=1.0, clip=0.5)
    assert out.max() <= 1.0
    assert out.min() >= 0.4 - 1e-6
    assert (out == 1.0).any()  # clipped at the action bound
    assert torch.equal(lu.smoothed_target_action(a, std=0.0, clip=0.5), a)


def test_linear_schedule_and_gaussian_noise_schedule():
    assert lu.linear_schedule(1.0, 0.1, 100, 0) == 1.0
    assert lu.linear_schedule(1.0, 0.1, 100, 50) == pytest.approx(0.55)
    assert lu.linear_schedule(1.0, 0.1, 100, 500) == pytest.approx(0.1)
    noise = lu.GaussianExplorationNoise(1.0, 0.0, 10)
    noise.advance(4)
    assert noise.std == pytest.approx(0.6)
    state = noise.state_dict()
    other = lu.GaussianExplorationNoise(1.0, 0.0, 10)
    other.load_state_dict(state)
    assert other.std == pytest.approx(0.6)


def test_noisy_actor_action_by_hand_with_a_straight_through_clamp():
    mu = torch.tensor([[0.5, 0.9, -0.95]], requires_grad=True)
    noise = torch.tensor([[1.0, 1.0, -2.0]])
    # eps = clip(0.2 * noise, -0.3, 0.3) = (0.2, 0.2, -0.3); mu + eps = (0.7, 1.1, -1.25)
    action = lu.noisy_actor_action(mu, 0.2, 0.3, noise=noise)
    assert torch.allclose(action, torch.tensor([[0.7, 1.0, -1.0]]))
    weights = torch.tensor([[1.0, 2.0, 3.0]])
    (action * weights).sum().backward()
    # the gradient of the identity, also where the clamp binds (1.1 -> 1, -1.25 -> -1)
    assert torch.equal(mu.grad, weights)
    # unclipped noise: -0.95 - 0.4 still clamps to -1
    assert torch.allclose(
        lu.noisy_actor_action(mu, 0.2, None, noise=noise), torch.tensor([[0.7, 1.0, -1.0]])
    )
    # std 0 without a draw: mu itself, and no random number is drawn
    state = torch.get_rng_state()
    assert lu.noisy_actor_action(mu, 0.0, 0.3) is mu
    assert torch.equal(state, torch.get_rng_state())


def test_straight_through_clamp_values_and_gradient():
    x = torch.tensor([-2.0, 0.5, 3.0], requires_grad=True)
    y = lu.straight_through_clamp(x, -1.0, 1.0)
    assert torch.equal(y, torch.tensor([-1.0, 0.5, 1.0]))
    y.sum().backward()
    assert torch.equal(x.grad, torch.ones(3))
