"""Markov state abstraction (super_sac/markov.py; Allen et al. 2021, arXiv:2106.04379): the losses
against hand-computed values, where their gradients go, the heads on the agent and in its files,
the settings' checks, exact resume, and short runs (MinAtar; the original's drqv2_markov.gin)."""

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from test_augmented_updates import FakeShift
from test_augmented_updates import _pixel_trainer as augmented_pixel_trainer
from torch import nn

from super_sac import Agent, ReplayBuffer, cli, learning, markov, nets
from super_sac.learner import Learner
from super_sac.main import TrainConfig
from super_sac.replay import Batch
from super_sac.validation import ConfigError, ConfigWarning, validate_config
from super_sac.wrappers import make_gym_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]
ORIGINAL_DMC = ROOT / "tests" / "data" / "original_gin" / "dmc"

MARKOV = {
    "inverse_markov_coeff": 1.0,
    "contrastive_markov_coeff": 1.0,
    "smoothness_markov_coeff": 10.0,
    "smoothness_markov_max_dist": 0.01,
    "markov_abstraction_updates_per_step": 1,
}


# ----------------------------------------------------------------------------- the pure losses


def test_continuous_inverse_loss_is_the_tanh_gaussian_nll():
    # u = atanh(a) = 1, loc 0.5, scale 2: log N(1; 0.5, 2) = -0.5 (0.25)^2 - log 2 - log sqrt(2 pi)
    # and the tanh correction -log(1 - tanh(1)^2) = -log(0.4199743)
    dist = markov.SquashedNormal(torch.tensor([[0.5]]), torch.tensor([[2.0]]))
    action = torch.tanh(torch.tensor([[1.0]]))
    gaussian = -0.5 * 0.25**2 - math.log(2.0) - 0.5 * math.log(2 * math.pi)
    expected = -(gaussian - math.log(0.4199743))  # 0.77573
    assert math.isclose(markov.inverse_loss(dist, action).item(), expected, rel_tol=1e-5)
    assert math.isclose(expected, 0.77573, abs_tol=1e-4)


def test_discrete_inverse_loss_is_the_cross_entropy():
    # logits (0, log 3): p(1) = 3/4, p(0) = 1/4; actions 1 and 0
    dist = torch.distributions.Categorical(logits=torch.tensor([[0.0, math.log(3.0)]] * 2))
    loss = markov.inverse_loss(dist, torch.tensor([1, 0]))
    assert math.isclose(loss.item(), (-math.log(0.75) - math.log(0.25)) / 2, rel_tol=1e-6)


def test_contrastive_loss_and_accuracy_by_hand():
    real, fake = torch.tensor([0.0, 2.0]), torch.tensor([0.0, -1.0])
    loss, accuracy = markov.contrastive_loss(real, fake)
    # -log sigmoid(0), -log sigmoid(2), -log(1 - sigmoid(0)), -log(1 - sigmoid(-1))
    terms = [math.log(2), math.log(1 + math.exp(-2)), math.log(2), math.log(1 + math.exp(-1))]
    assert math.isclose(loss.item(), sum(terms) / 4, rel_tol=1e-6)  # 0.5611
    # right: real 2 (> 0), fake 0 and fake -1 (not > 0); wrong: real 0
    assert accuracy.item() == 0.75 and not accuracy.requires_grad


def test_smoothness_loss_by_hand():
    z = torch.zeros(2, 2)
    next_z = torch.tensor([[0.3, 0.4], [0.0, 0.05]])
    # distances / sqrt(2): 0.5 / 1.41421 = 0.353553 and 0.05 / 1.41421 = 0.035355 (< 0.1)
    expected = (0.5 / math.sqrt(2) - 0.1) ** 2 / 2  # 0.032144
    loss = markov.smoothness_loss(z, next_z, max_dist=0.1)
    assert math.isclose(loss.item(), expected, rel_tol=1e-5)
    assert markov.smoothness_loss(z, next_z, max_dist=0.5).item() == 0.0


def test_shuffled_permutes_the_rows():
    x = torch.arange(10.0).reshape(5, 2)
    y = markov.shuffled(x)
    assert sorted(y[:, 0].tolist()) == x[:, 0].tolist() and torch.equal(
        y[:, 1] - y[:, 0], torch.ones(5)
    )


# ----------------------------------------------------------------------------- heads on a tiny net


class LinearEncoder(nets.Encoder):
    """z = W obs (2 -> 2), W initialised to the identity."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2, bias=False)
        with torch.no_grad():
            self.fc.weight.copy_(torch.eye(2))

    @property
    def embedding_dim(self):
        return 2

    def forward(self, obs_dict):
        return self.fc(obs_dict["obs"].float())


def _batch(discrete=False):
    obs = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    next_obs = torch.tensor([[0.3, 0.4], [1.0, 0.0], [0.0, 1.5]])
    action = torch.tensor([0, 1, 2]) if discrete else torch.tensor([[0.5], [-0.5], [0.0]])
    ones = torch.ones(3, 1)
    return Batch({"obs": obs}, action, ones, {"obs": next_obs}, 0 * ones, ones, ones, np.arange(3))


def _agent(discrete=False, encoder=None):
    torch.manual_seed(0)
    return Agent(3 if discrete else 1, encoder or LinearEncoder(), hidden_size=8, discrete=discrete)


@pytest.mark.parametrize("discrete", [False, True])
def test_zeroed_heads_give_the_losses_computed_by_hand(discrete):
    agent = _agent(discrete)
    heads = agent.attach_markov_heads()
    with torch.no_grad():  # output layers 0: logits 0, Gaussian mean 0 and mid log-std -1.5
        for net in (heads.inverse, heads.contrastive):
            net[-1].weight.zero_()
            net[-1].bias.zero_()
    parts = markov.markov_losses(agent.encoder, heads, _batch(discrete), max_dist=0.1)
    if discrete:
        expected_inverse = math.log(3.0)  # uniform over 3 actions
    else:
        log_std = -1.5
        nll = []
        for a in (0.5, -0.5, 0.0):
            u = math.atanh(a)
            log_n = -0.5 * (u / math.exp(log_std)) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
            nll.append(-(log_n - math.log(1 - a**2)))
        expected_inverse = sum(nll) / 3
    assert math.isclose(parts["inverse_loss"].item(), expected_inverse, rel_tol=1e-5)
    assert math.isclose(parts["contrastive_loss"].item(), math.log(2.0), rel_tol=1e-6)
    # identity encoder: distances 0.5, 0, 0.5 over sqrt(2)
    expected_smooth = 2 * (0.5 / math.sqrt(2) - 0.1) ** 2 / 3
    assert math.isclose(parts["smoothness_loss"].item(), expected_smooth, rel_tol=1e-5)
    assert parts["contrastive_accuracy"].item() == 0.5  # logit 0: every real pair is "fake"


@pytest.mark.parametrize("discrete", [False, True])
def test_gradients_reach_the_encoder_and_heads_not_the_actor_or_critics(discrete):
    agent = _agent(discrete)
    heads = agent.attach_markov_heads()
    parts = markov.markov_losses(agent.encoder, heads, _batch(discrete), max_dist=0.0)
    (parts["inverse_loss"] + parts["contrastive_loss"] + parts["smoothness_loss"]).backward()
    for module in (agent.encoder, heads.inverse, heads.contrastive):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters())
    assert all(p.grad is None for p in [*agent.actor.parameters(), *agent.critic.parameters()])


def test_each_loss_alone_trains_the_encoder():
    for key in ("inverse_loss", "contrastive_loss", "smoothness_loss"):
        agent = _agent()
        heads = agent.attach_markov_heads()
        markov.markov_losses(agent.encoder, heads, _batch(), max_dist=0.0)[key].backward()
        assert agent.encoder.fc.weight.grad.abs().sum() > 0, key


def test_learner_step_moves_encoder_and_heads_only_and_logs_the_weighted_sum():
    agent = _agent()
    learner = Learner(agent, TrainConfig(**MARKOV, encoder_lr=1e-2))
    before = {k: v.clone() for k, v in agent.state_dict().items()}
    torch.manual_seed(1)
    logs = learner.markov_step(_batch())
    expected = (
        logs["markov/inverse_loss"]
        + logs["markov/contrastive_loss"]
        + 10.0 * logs["markov/smoothness_loss"]
    )
    assert torch.isclose(logs["markov/loss"], expected)
    for key in (
        "inverse_loss",
        "contrastive_loss",
        "smoothness_loss",
        "contrastive_accuracy",
        "embedding_distance",
        "loss",
    ):
        assert logs[f"markov/{key}"].ndim == 0 and not logs[f"markov/{key}"].requires_grad
    after = agent.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert "encoder.fc.weight" in changed and any(k.startswith("markov_heads.") for k in changed)
    assert not any(k.startswith(("actor.", "critic.")) for k in changed)
    # the optimizer has two groups (encoder, heads), both at encoder_lr
    groups = learner.markov_optimizer.param_groups
    assert [g["lr"] for g in groups] == [1e-2, 1e-2]
    assert sum(len(g["params"]) for g in groups) == len(list(agent.encoder.parameters())) + len(
        list(agent.markov_heads.parameters())
    )


def test_a_markov_step_makes_the_actor_encode_afresh():
    # the critic's pre-step features are what a reusing actor reads (DrQ-v2); a Markov step moves
    # the encoder again, so they must not be handed on
    agent = _agent()
    learner = Learner(agent, TrainConfig(**MARKOV))
    batch = _batch()
    alpha = learner.alpha
    learner.critic_step(batch, alpha, target_noise_std=0.0)
    assert learner.critic_features(batch) is not None
    learner.markov_step(batch)
    assert learner.critic_features(batch) is None


def test_no_heads_and_no_optimizer_without_updates():
    agent = _agent()
    learner = Learner(agent, TrainConfig())
    assert agent.markov_heads is None and learner.markov_optimizer is None
    assert not any("markov" in k for k in agent.state_dict())
    with pytest.raises(RuntimeError, match="markov_abstraction_updates_per_step > 0"):
        learner.markov_step(_batch())


def test_heads_are_saved_with_the_agent_but_not_in_the_target(tmp_path):
    agent = _agent(discrete=True)
    heads = agent.attach_markov_heads()
    assert agent.attach_markov_heads() is heads  # attached once
    assert isinstance(heads.inverse, nn.Module) and heads.discrete
    assert learning.make_target_agent(agent).markov_heads is None
    agent.save(tmp_path)
    fresh = _agent(discrete=True)
    fresh.load(tmp_path)  # attaches the heads it finds in the file
    for (k, a), b in zip(agent.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), k
    assert fresh.signature()["markov_heads"]["hidden_size"] == 8
    # an agent saved without heads still loads into one without heads
    plain = _agent(discrete=True)
    plain.save(tmp_path / "plain")
    _agent(discrete=True).load(tmp_path / "plain")


# ----------------------------------------------------------------------------- settings


def _validate(agent=None, **settings):
    env = make_gym_env("Pendulum-v1")
    agent = agent or Agent(1, LinearEncoderObs3(), hidden_size=8)
    cfg = TrainConfig(**{"random_warmup_steps": 0, **settings})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        test_env = make_gym_env("Pendulum-v1")
        validate_config(cfg, agent, ReplayBuffer(100, verbose=False), env, test_env)
    return [str(w.message) for w in caught if issubclass(w.category, ConfigWarning)]


class LinearEncoderObs3(nets.Encoder):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)

    @property
    def embedding_dim(self):
        return 4

    def forward(self, obs_dict):
        return self.fc(obs_dict["obs"].float())


def test_weights_without_updates_are_refused_with_the_fix():
    fix = r"Fix: set super_sac.markov_abstraction_updates_per_step = 1"
    with pytest.raises(ConfigError, match=r"inverse_markov_coeff = 1.0: .*never run.*" + fix):
        _validate(inverse_markov_coeff=1.0)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"contrastive_markov_coeff": -1.0}, r"contrastive_markov_coeff = -1.0: must be >= 0"),
        ({"smoothness_markov_max_dist": -0.1}, r"smoothness_markov_max_dist = -0.1: must be >= 0"),
        ({"smoothness_markov_max_dist": float("nan")}, r"smoothness_markov_max_dist = nan: must"),
        (
            {"markov_abstraction_updates_per_step": -1},
            r"markov_abstraction_updates_per_step = -1: must be >= 0",
        ),
    ],
)
def test_negative_markov_settings_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        _validate(**settings)


def test_updates_without_weights_or_without_a_trainable_encoder_warn():
    (message,) = _validate(markov_abstraction_updates_per_step=1)
    assert message.startswith("super_sac.markov_abstraction_updates_per_step = 1: every Markov")
    assert "Fix: set the coefficients" in message
    flat = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    (message,) = _validate(flat, **MARKOV)
    assert "FlatEncoder has no parameters" in message
    assert _validate(**MARKOV) == []
    # an encoder without its head (DrQPixelEncoder(trunk=False)): z would be raw conv features
    headless = LinearEncoderObs3()
    headless.trunk = False
    (message,) = _validate(Agent(1, headless, hidden_size=8), **MARKOV)
    assert "LinearEncoderObs3(trunk=False) gives the raw convolutional features (4 of" in message
    assert "DrQPixelEncoder.trunk = True" in message
    # max_dist without the penalty running: no effect
    (message,) = _validate(
        inverse_markov_coeff=1.0,
        smoothness_markov_max_dist=0.5,
        markov_abstraction_updates_per_step=1,
    )
    assert message.startswith("super_sac.smoothness_markov_max_dist = 0.5: it has no effect")


# ----------------------------------------------------------------------------- the loop


def _pixel_trainer(tmp_path, steps, resume=False, **loop):
    return augmented_pixel_trainer(
        tmp_path, steps, resume=resume, augmenter=FakeShift(), aug_mix=0.5, **MARKOV, **loop
    )


def test_pixel_run_with_the_heads_logs_and_resumes_exactly(tmp_path):
    full = _pixel_trainer(tmp_path / "a", 24)
    full.run()
    logs = full.last_logs
    for key in (
        "loss",
        "inverse_loss",
        "contrastive_loss",
        "smoothness_loss",
        "contrastive_accuracy",
    ):
        assert torch.isfinite(logs[f"markov/{key}"]), key
    assert full.learner.markov_optimizer.state  # it stepped
    part = _pixel_trainer(tmp_path / "b", 12)  # its last checkpoint: step 12 (the end)
    part.run()
    resumed = _pixel_trainer(tmp_path / "b", 24, resume=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed.run()
    assert resumed.env_steps == full.env_steps
    state, other = full.agent.state_dict(), resumed.agent.state_dict()
    assert state.keys() == other.keys() and any(k.startswith("markov_heads.") for k in state)
    for key in state:
        assert torch.equal(state[key], other[key]), key
    a, b = (t.learner.markov_optimizer.state_dict()["state"] for t in (full, resumed))
    for i in a:
        assert torch.equal(a[i]["exp_avg_sq"], b[i]["exp_avg_sq"]), i


def test_minatar_run_with_the_markov_losses(tmp_path):
    config = str(ROOT / "experiments" / "minatar" / "basic_online.gin")
    argv = ["--game", "breakout", "--config", config, "--steps", "60", "--seed", "0"]
    bindings = [
        "super_sac.random_warmup_steps = 40",
        "super_sac.batch_size = 16",
        "super_sac.eval_episodes = 1",
        "Agent.hidden_size = 16",
        "ReplayBuffer.size = 500",
        "MinAtarEncoder.emb_dim = 16",
        *(f"super_sac.{k} = {v}" for k, v in MARKOV.items()),
    ]
    argv += [x for b in bindings for x in ("--gin_bindings", b)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigWarning)
        summary = cli.train_minatar(argv)
    assert summary["critic_updates"] == 20 and np.isfinite(summary["final_eval_return"])
    _assert_saved_with_heads(summary, discrete=True)


def _assert_saved_with_heads(summary, discrete):
    saved = torch.load(Path(summary["run_dir"]) / "agent.pt", weights_only=True)
    assert saved["signature"]["markov_heads"]["discrete"] is discrete
    assert any(k.startswith("markov_heads.inverse.") for k in saved["state_dict"])


def test_original_drqv2_markov_gin_runs_unchanged(tmp_path):
    pytest.importorskip("dm_control")
    import test_dmc  # the tests folder is importable, as for test_compat's import of test_main

    summary = test_dmc.train_cartpole_from_pixels(
        ORIGINAL_DMC / "drqv2_markov.gin", tmp_path, bindings=["super_sac.max_episode_steps = 20"]
    )
    assert np.isfinite(summary["final_eval_return"])
    assert summary["critic_updates"] == 20  # 30 steps x 2 transitions, 20 warm-up transitions
    _assert_saved_with_heads(summary, discrete=False)


def test_offline_updates_and_sunrise_ensembles_run_the_abstraction(tmp_path):
    trainer = _pixel_trainer(tmp_path / "offline", 4)
    trainer.collect(20)
    trainer.update(phase="offline")
    assert torch.isfinite(trainer.last_logs["markov/loss"])
    assert "actor/afbc_loss" in trainer.last_logs  # an offline step, with the abstraction's update
    sunrise = Agent(1, LinearEncoder(), hidden_size=8, ensemble_size=2)
    learner = Learner(sunrise, TrainConfig(**MARKOV))
    encoder_before = sunrise.encoder.fc.weight.clone()
    assert torch.isfinite(learner.markov_step(_batch())["markov/loss"])
    assert not torch.equal(encoder_before, sunrise.encoder.fc.weight)  # the shared encoder
