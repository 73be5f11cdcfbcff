"""The Agent: construction, acting on dict observations, save/load, unimplemented features."""

import numpy as np
import pytest
import torch

from super_sac import Agent, nets
from super_sac.nets.mlps import ContinuousDeterministicActor


def _agent(**kwargs):
    return Agent(2, nets.FlatEncoder(3), hidden_size=16, **kwargs)


def test_acts_on_single_and_batched_numpy_and_torch():
    agent = _agent()
    single = {"obs": np.zeros(3, dtype=np.float32)}
    a = agent.forward(single)
    assert isinstance(a, np.ndarray) and a.shape == (2,)
    batched = {"obs": np.zeros((4, 3), dtype=np.float32)}
    assert agent.sample_action(batched, batched=True).shape == (4, 2)
    t = agent.forward({"obs": torch.zeros(5, 3)}, batched=True)
    assert isinstance(t, torch.Tensor) and t.shape == (5, 2)
    assert np.all(np.abs(agent.sample_action(batched, batched=True)) <= 1.0)


def test_forward_is_deterministic_and_sample_is_not():
    agent = _agent()
    obs = {"obs": np.ones(3, dtype=np.float32)}
    assert np.array_equal(agent.forward(obs), agent.forward(obs))
    assert not np.array_equal(agent.sample_action(obs), agent.sample_action(obs))


def test_deterministic_actor_agent():
    agent = _agent(actor_network_cls=ContinuousDeterministicActor)
    assert not agent.stochastic
    obs = {"obs": np.ones(3, dtype=np.float32)}
    assert np.array_equal(agent.sample_action(obs), agent.forward(obs))


def test_non_dict_observation_is_rejected_with_fix():
    with pytest.raises(TypeError, match="SimpleGymWrapper"):
        _agent().forward(np.zeros(3))


def test_save_load_round_trip(tmp_path):
    agent = _agent()
    path = agent.save(tmp_path / "run")
    assert path.name == "agent.pt" and not list(tmp_path.rglob("*.tmp"))
    other = _agent()
    obs = {"obs": np.random.randn(3).astype(np.float32)}
    assert not np.array_equal(agent.forward(obs), other.forward(obs))
    other.load(tmp_path / "run")
    assert np.array_equal(agent.forward(obs), other.forward(obs))
    for p, q in zip(agent.state_dict().values(), other.state_dict().values()):
        assert torch.equal(p, q)


def test_load_refuses_a_differently_configured_agent(tmp_path):
    _agent().save(tmp_path)
    other = Agent(2, nets.FlatEncoder(3), hidden_size=32, num_critics=3)
    with pytest.raises(ValueError, match="hidden_size: saved 16, this agent 32") as info:
        other.load(tmp_path)
    assert "num_critics: saved 2, this agent 3" in str(info.value)
    with pytest.raises(FileNotFoundError):
        other.load(tmp_path / "missing")


def test_load_refuses_pickled_objects(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("code ran",))

    torch.save({"signature": Evil(), "state_dict": {}}, tmp_path / "agent.pt")
    with pytest.raises(Exception, match="Weights only load failed|Unsupported"):
        _agent().load(tmp_path)


def test_observations_of_the_wrong_shape_or_keys_are_explained():
    agent = _agent()
    with pytest.raises(RuntimeError, match=r"shapes \{'obs': \(1, 5, 3\)\}, a leading dimension "
                       r"was added: batched=False; from them the encoder FlatEncoder made "
                       r"features of shape \(1, 15\) \(torch.float32\), but the actor reads "
                       r"\(batch, embedding_dim = 3\) torch.float32.*Fix"):  # fmt: skip
        agent.forward({"obs": np.zeros((5, 3), np.float32)})
    with pytest.raises(IndexError, match=r"\{'obs': \(3,\)\}, taken as a batch: batched=True"):
        agent.sample_action({"obs": np.zeros(3, np.float32)}, batched=True)
    image_agent = Agent(2, nets.cnns.MinAtarEncoder(4, 10, image_key="image"), hidden_size=8)
    with pytest.raises(ValueError, match=r"(?s)reads the observation key 'image'.*under the keys"):
        image_agent.forward({"obs": np.zeros((4, 10, 10), np.float32)})


def test_bad_settings():
    with pytest.raises(ValueError, match="num_critics"):
        _agent(num_critics=0)
    with pytest.raises(ValueError, match="ucb_bonus must be >= 0"):
        _agent(ucb_bonus=-1.0)
    with pytest.raises(ValueError, match="cannot hold an actor ensemble"):
        _agent(ensemble_size=3, actor_network_cls=ContinuousDeterministicActor)
    with pytest.raises(ValueError, match="adv_method"):
        _agent(adv_method="median")
    with pytest.raises(TypeError, match="Encoder"):
        Agent(2, torch.nn.Identity())
    # a quoted gin value ("64") is a string: named here, not deep inside torch
    with pytest.raises(TypeError, match=r"Agent.hidden_size must be an int, got '64'.*Fix"):
        Agent(2, nets.FlatEncoder(3), hidden_size="64")
    with pytest.raises(ValueError, match=r"hidden_size and act_space_size must be >= 1, got 0"):
        Agent(2, nets.FlatEncoder(3), hidden_size=0)


def test_beta_policy_agent_acts_in_bounds_and_is_recorded():
    agent = _agent(beta_dist=True)
    obs = {"obs": np.random.randn(64, 3).astype(np.float32)}
    sampled = agent.sample_action(obs, batched=True)
    assert sampled.shape == (64, 2) and np.all(np.abs(sampled) <= 1.0)
    assert agent.signature()["beta_dist"] is True
    with pytest.raises(ValueError, match="no Beta distribution"):
        _agent(beta_dist=True, actor_network_cls=ContinuousDeterministicActor)


def test_compile_networks_keeps_parameter_names_and_outputs():
    agent = _agent()
    keys = list(agent.state_dict())
    agent.compile_networks()
    assert list(agent.state_dict()) == keys
    assert agent.actor.net._compiled_call_impl is not None
    assert agent.critic.net._compiled_call_impl is not None


@pytest.mark.slow
def test_compiled_networks_compute_the_same_values():
    agent = _agent()
    rep = torch.randn(8, 3)
    eager = agent.critic(rep, torch.zeros(8, 2))
    agent.compile_networks()
    assert torch.allclose(agent.critic(rep, torch.zeros(8, 2)), eager, atol=1e-5)
