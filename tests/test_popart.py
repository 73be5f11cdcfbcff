"""PopArt: statistics by hand, outputs preserved across a statistics update, training."""

import math

import pytest
import torch

from super_sac import Agent, learning, nets, optim
from super_sac.nets.mlps import ContinuousCritic
from super_sac.popart import PopArt
from super_sac.replay import Batch


def test_statistics_by_hand_with_the_bias_corrected_step():
    stats = PopArt(2, beta=0.5)
    # update 1: step 0.5 / (1 - 0.5) = 1, so the statistics are the batch's moments whatever
    # their initial values: mu = 3, nu = (4 + 16) / 2 = 10, sigma = 1
    stats.update(torch.tensor([[2.0], [4.0]]))
    assert torch.allclose(stats.mu, torch.full((2, 1, 1), 3.0))
    assert torch.allclose(stats.nu, torch.full((2, 1, 1), 10.0))
    assert torch.allclose(stats.sigma, torch.ones(2, 1, 1))
    # update 2: step 0.5 / (1 - 0.25) = 2/3; batch mean 7, mean square 50
    stats.update(torch.tensor([[6.0], [8.0]]))
    mu, nu = 3.0 + 2.0 / 3.0 * (7.0 - 3.0), 10.0 + 2.0 / 3.0 * (50.0 - 10.0)  # 17/3, 110/3
    assert torch.allclose(stats.mu, torch.full((2, 1, 1), mu))
    assert torch.allclose(stats.nu, torch.full((2, 1, 1), nu))
    assert torch.allclose(stats.sigma, torch.full((2, 1, 1), math.sqrt(nu - mu**2)))
    y = torch.tensor([[mu + math.sqrt(nu - mu**2)]])
    assert torch.allclose(stats.normalize(y), torch.ones(2, 1, 1))
    assert stats.count.item() == 2


def test_step_size_falls_to_beta():
    stats = PopArt(1, beta=1e-4)
    assert stats.step_size().item() == pytest.approx(1.0)
    stats.count.fill_(1)
    assert stats.step_size().item() == pytest.approx(1e-4 / (1 - (1 - 1e-4) ** 2))  # ~0.5
    stats.count.fill_(100_000)
    assert stats.step_size().item() == pytest.approx(1e-4, rel=1e-3)
    with pytest.raises(ValueError, match="beta"):
        PopArt(1, beta=0.0)


def test_targets_near_100_are_normalised_after_one_batch():
    """The fixed-step version left mu at 0.03 after a batch of targets around 100."""
    stats = PopArt(1)
    targets = torch.randn(256, 1, generator=torch.Generator().manual_seed(0)) * 5 + 100
    stats.update(targets)
    assert stats.mu.item() == pytest.approx(targets.mean().item(), rel=1e-5)
    assert stats.sigma.item() == pytest.approx(targets.std(correction=0).item(), rel=1e-3)


def test_saves_without_an_update_count_still_load():
    critic = ContinuousCritic(4, 2, num_critics=2, hidden_size=8, popart=True)
    state = critic.state_dict()
    del state["popart.count"]
    fresh = ContinuousCritic(4, 2, num_critics=2, hidden_size=8, popart=True)
    fresh.load_state_dict(state)
    assert fresh.popart.count.item() == 0  # statistics that never moved start afresh
    critic.popart.update(torch.randn(8, 1) + 3)
    state = critic.state_dict()
    del state["popart.count"]
    fresh.load_state_dict(state)
    assert fresh.popart.count.item() == 1e9  # moved statistics count as mature: the step is beta


def test_per_member_targets():
    stats = PopArt(2, beta=1.0)
    stats.update(torch.tensor([[[1.0], [3.0]], [[10.0], [10.0]]]))
    assert stats.mu.flatten().tolist() == [2.0, 10.0]
    assert stats.sigma.flatten()[0].item() == pytest.approx(1.0)
    assert stats.sigma.flatten()[1].item() == pytest.approx(1e-4)  # constant targets: min_scale


def test_pop_preserves_outputs_across_a_statistics_update():
    torch.manual_seed(0)
    critic = ContinuousCritic(4, 2, num_critics=3, hidden_size=16, popart=True)
    s, a = torch.randn(32, 4), torch.randn(32, 2)
    before = critic(s, a)
    normalized_before = critic(s, a, normalized=True)
    critic.popart.beta = 0.3
    critic.popart.update(torch.randn(64, 1) * 50 + 200, preserve=[critic.output_layer])
    assert torch.allclose(critic(s, a), before, atol=1e-3)
    assert not torch.allclose(critic(s, a, normalized=True), normalized_before, atol=1e-2)
    # without POP the same update changes the values (ART alone)
    critic.popart.update(torch.randn(64, 1) * 50 + 200)
    assert not torch.allclose(critic(s, a), before, atol=1e-1)


def _batch(b=16):
    torch.manual_seed(1)
    return Batch(
        obs={"obs": torch.randn(b, 3)},
        action=torch.rand(b, 2) * 2 - 1,
        reward=torch.randn(b, 1) * 100 + 500,
        next_obs={"obs": torch.randn(b, 3)},
        done=torch.zeros(b, 1),
        discount=torch.full((b, 1), 0.99),
        weights=torch.ones(b, 1),
        idxs=None,
    )


def test_critic_update_with_popart_shares_statistics_and_preserves_target_values(monkeypatch):
    agent = Agent(2, nets.FlatEncoder(3), hidden_size=16, auto_rescale_targets=True)
    target_agent = learning.make_target_agent(agent)
    opt = optim.build_optimizer(optim.ParamGroup(list(agent.critic.parameters()), 1e-3))
    batch = _batch()
    rep = batch.next_obs["obs"]
    target_q_before = target_agent.critic(rep, batch.action)
    targets = batch.reward  # about 500 +- 100
    backup = learning.Backup(targets, rep, batch.action)
    monkeypatch.setattr(learning, "td_backup", lambda *a, **k: backup)
    logs = learning.critic_update(
        agent,
        target_agent,
        batch,
        opt,
        alpha=torch.tensor(0.0),
        target_critic_ensemble_n=2,
        pop=True,
    )
    assert torch.isfinite(logs["critic/loss"])
    assert torch.equal(agent.critic.popart.mu, target_agent.critic.popart.mu)
    # the first bias-corrected step is 1: each critic's statistics are the targets' moments
    assert torch.allclose(agent.critic.popart.mu, targets.mean().expand(2, 1, 1))
    assert torch.allclose(agent.critic.popart.sigma, targets.std(correction=0).expand(2, 1, 1))
    assert torch.allclose(target_agent.critic(rep, batch.action), target_q_before, atol=1e-2)


def test_popart_needs_a_critic_that_has_it():
    class PlainCritic(torch.nn.Module):
        def __init__(self, state_space_size, act_space_size, num_critics=2, hidden_size=256):
            super().__init__()

    with pytest.raises(ValueError, match="no PopArt layer"):
        Agent(2, nets.FlatEncoder(3), critic_network_cls=PlainCritic, auto_rescale_targets=True)
    agent = Agent(2, nets.FlatEncoder(3), hidden_size=8, auto_rescale_targets=True)
    assert "critic.popart.mu" in agent.state_dict()


def test_sunrise_ensemble_update_moves_every_critics_statistics_to_its_members_targets(
    monkeypatch,
):
    """Issue 13, defect 1: the ensemble critic update never updated PopArt statistics."""
    from super_sac import sunrise

    torch.manual_seed(0)
    agent = Agent(
        2, nets.FlatEncoder(3), ensemble_size=2, hidden_size=16, auto_rescale_targets=True
    )
    target_agent = learning.make_target_agent(agent)
    batch = _batch(b=4)
    # member 0's targets 1, 2, 3, 4; member 1's 10, 20, 30, 40
    targets = torch.tensor([[1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0]]).unsqueeze(-1)
    backup = learning.Backup(targets, batch.next_obs["obs"], None)
    monkeypatch.setattr(sunrise, "ensemble_td_backup", lambda *a, **k: (backup, None))
    opt = optim.build_optimizer(optim.ParamGroup(list(agent.critic.parameters()), 1e-3))
    rep = batch.obs["obs"]
    target_q_before = target_agent.critic(rep, batch.action)
    sunrise.ensemble_critic_update(
        agent,
        target_agent,
        batch,
        opt,
        alpha=torch.zeros(2),
        target_critic_ensemble_n=2,
        pop=True,
    )
    # first update: step 1, so each critic's statistics are its member's targets' moments;
    # critics 0, 1 belong to member 0 and critics 2, 3 to member 1
    mu = torch.tensor([2.5, 2.5, 25.0, 25.0]).view(4, 1, 1)
    nu = torch.tensor([7.5, 7.5, 750.0, 750.0]).view(4, 1, 1)  # (1 + 4 + 9 + 16) / 4, x100
    assert torch.allclose(agent.critic.popart.mu, mu)
    assert torch.allclose(agent.critic.popart.nu, nu)
    assert torch.allclose(
        agent.critic.popart.sigma.flatten(), torch.tensor([1.25**0.5] * 2 + [125**0.5] * 2)
    )
    assert torch.equal(target_agent.critic.popart.mu, agent.critic.popart.mu)
    assert target_agent.critic.popart.count.item() == 1
    # POP: the target critics' values survived the move of the statistics
    assert torch.allclose(target_agent.critic(rep, batch.action), target_q_before, atol=1e-4)


def test_critic_loss_is_on_normalised_values():
    """With PopArt the ensemble loss is the mean squared error of normalised values."""
    from super_sac import sunrise

    torch.manual_seed(0)
    agent = Agent(2, nets.FlatEncoder(3), ensemble_size=2, hidden_size=8, auto_rescale_targets=True)
    target_agent = learning.make_target_agent(agent)
    batch = _batch(b=4)
    targets = torch.tensor([[1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0]]).unsqueeze(-1)
    sunrise_td = sunrise.ensemble_td_backup
    backup = learning.Backup(targets, batch.next_obs["obs"], None)
    try:
        sunrise.ensemble_td_backup = lambda *a, **k: (backup, None)
        normalized_before = agent.critic(batch.obs["obs"], batch.action, normalized=True)
        opt = optim.build_optimizer(optim.ParamGroup(list(agent.critic.parameters()), 1e-3))
        logs = sunrise.ensemble_critic_update(
            agent, target_agent, batch, opt, alpha=torch.zeros(2), target_critic_ensemble_n=2
        )
    finally:
        sunrise.ensemble_td_backup = sunrise_td
    stats = agent.critic.popart
    per_critic = targets.repeat_interleave(2, dim=0)
    expected = ((normalized_before - (per_critic - stats.mu) / stats.sigma) ** 2).mean()
    assert logs["critic/loss"].item() == pytest.approx(expected.item(), rel=1e-5)
