"""PopArt: statistics by hand, outputs preserved across a statistics update, training."""

import math

import pytest
import torch

from super_sac import Agent, learning, nets, optim
from super_sac.nets.mlps import ContinuousCritic
from super_sac.popart import PopArt
from super_sac.replay import Batch


def test_statistics_by_hand():
    stats = PopArt(2, beta=0.5)
    stats.update(torch.tensor([[2.0], [4.0]]))
    # mu: 0 -> 0 + 0.5 (3 - 0) = 1.5; nu: 1 -> 1 + 0.5 (10 - 1) = 5.5; sigma = sqrt(5.5 - 2.25)
    assert torch.allclose(stats.mu, torch.full((2, 1, 1), 1.5))
    assert torch.allclose(stats.nu, torch.full((2, 1, 1), 5.5))
    assert torch.allclose(stats.sigma, torch.full((2, 1, 1), math.sqrt(3.25)))
    y = torch.tensor([[1.5 + math.sqrt(3.25)]])
    assert torch.allclose(stats.normalize(y), torch.ones(2, 1, 1))


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


def test_critic_update_with_popart_shares_statistics_and_preserves_target_values():
    agent = Agent(2, nets.FlatEncoder(3), hidden_size=16, auto_rescale_targets=True)
    target_agent = learning.make_target_agent(agent)
    opt = optim.build_optimizer(optim.ParamGroup(list(agent.critic.parameters()), 1e-3))
    batch = _batch()
    rep = batch.next_obs["obs"]
    target_q_before = target_agent.critic(rep, batch.action)
    agent.critic.popart.beta = 0.1
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
    assert agent.critic.popart.mu.mean() > 10  # moved towards targets of about 500
    assert torch.allclose(target_agent.critic(rep, batch.action), target_q_before, atol=1e-2)


def test_popart_needs_a_critic_that_has_it():
    class PlainCritic(torch.nn.Module):
        def __init__(self, state_space_size, act_space_size, num_critics=2, hidden_size=256):
            super().__init__()

    with pytest.raises(ValueError, match="no PopArt layer"):
        Agent(2, nets.FlatEncoder(3), critic_network_cls=PlainCritic, auto_rescale_targets=True)
    agent = Agent(2, nets.FlatEncoder(3), hidden_size=8, auto_rescale_targets=True)
    assert "critic.popart.mu" in agent.state_dict()
