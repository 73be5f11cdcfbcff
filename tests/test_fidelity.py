"""The update maths as the papers and the original super_sac have them (issue 13): the loss scale,
importance weights in every loss of a prioritized batch, alpha tuned without policy-gradient
updates, the AFBC trick's priorities and re-scoring, prioritized replay's beta schedule and the
entropy optimizer's Adam betas. Numbers are computed by hand."""

import math

import numpy as np
import pytest
import torch

from super_sac import Agent, learning, nets, optim, sunrise
from super_sac import learning_utils as lu
from super_sac.adv_estimator import advantage_priorities
from super_sac.config import TrainConfig
from super_sac.learner import Learner
from super_sac.main import Trainer
from super_sac.nets.mlps import ContinuousDeterministicActor
from super_sac.replay import Batch, ReplayBuffer
from super_sac.wrappers import make_gym_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WEIGHTS = torch.tensor([[2.0], [0.0], [1.0], [0.5]])


def _batch(weights=WEIGHTS, discrete=False, obs_dim=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    b = weights.shape[0]
    if discrete:
        action = torch.randint(0, 3, (b,), generator=g)
    else:
        action = torch.rand(b, 2, generator=g) * 1.6 - 0.8
    return Batch(
        obs={"obs": torch.randn(b, obs_dim, generator=g)},
        action=action,
        reward=torch.randn(b, 1, generator=g),
        next_obs={"obs": torch.randn(b, obs_dim, generator=g)},
        done=torch.zeros(b, 1),
        discount=torch.full((b, 1), 0.99),
        weights=weights,
        idxs=np.arange(b),
    )


def _sgd(module):
    return torch.optim.SGD(module.parameters(), lr=0.0)  # the losses are what is compared


# ------------------------------------------------------------------------ loss scale
def test_critic_loss_is_the_mean_over_critics_as_in_the_original():
    q = torch.tensor([[1.0, 2.0], [0.0, 4.0], [3.0, 3.0]]).unsqueeze(-1)  # 3 critics, 2 samples
    y = torch.tensor([[1.0], [2.0]])
    w = torch.tensor([[1.0], [0.5]])
    # squared errors: (0, 0), (1, 4), (4, 1); weighted means 0, (1 + 2) / 2, (4 + 0.5) / 2
    # the original: sum over critics of mean(w * err^2), divided by the number of critics
    assert lu.critic_loss(q, y, w).item() == pytest.approx((0.0 + 1.5 + 2.25) / 3)
    # ten identical critics cost what one does, so a critic_clip binds where it did before
    one = q[1:2]
    assert lu.critic_loss(one.expand(10, -1, -1), y, w).item() == pytest.approx(1.5)


def test_ensemble_actor_loss_is_the_mean_over_members():
    torch.manual_seed(0)
    agent = Agent(2, nets.FlatEncoder(3), ensemble_size=3, hidden_size=16)
    batch = _batch(weights=torch.ones(4, 1))
    alpha = torch.tensor([0.1, 0.2, 0.3])
    with torch.no_grad():
        rep = batch.obs["obs"]
        torch.manual_seed(7)
        action, log_prob = agent.actor(rep).rsample_with_log_prob()  # (3, B, *)
        q = agent.critic(rep, action).view(3, 2, 4, 1).amin(dim=1)
        per_member = (alpha.view(3, 1, 1) * log_prob - q).mean(dim=(1, 2))
    torch.manual_seed(7)
    logs = sunrise.ensemble_actor_update(agent, batch, _sgd(agent.actor), alpha=alpha)
    assert logs["actor/loss"].item() == pytest.approx(per_member.mean().item(), rel=1e-5)


# ------------------------------------------------------------- importance weights in every loss
def test_deterministic_actor_loss_is_importance_weighted():
    torch.manual_seed(0)
    agent = Agent(
        2, nets.FlatEncoder(3), actor_network_cls=ContinuousDeterministicActor, hidden_size=16
    )
    batch = _batch()
    with torch.no_grad():
        rep = batch.obs["obs"]
        q = agent.critic(rep, agent.actor(rep)).amin(dim=0)
    logs = learning.online_actor_update(agent, batch, _sgd(agent.actor), alpha=torch.tensor(0.0))
    assert logs["actor/loss"].item() == pytest.approx(-(WEIGHTS * q).mean().item(), rel=1e-5)


def test_discrete_actor_and_alpha_inputs_are_importance_weighted():
    torch.manual_seed(0)
    agent = Agent(3, nets.FlatEncoder(3), discrete=True, hidden_size=16)
    batch = _batch(discrete=True)
    alpha = torch.tensor(0.2)
    with torch.no_grad():
        rep = batch.obs["obs"]
        dist = agent.actor(rep)
        q = agent.critic(rep).amin(dim=0)  # (B, A)
        per_state = (dist.probs * (alpha * dist.logits - q)).sum(-1, keepdim=True)
        log_prob = (dist.probs * dist.logits).sum(-1, keepdim=True)
    logs = learning.online_actor_update(agent, batch, _sgd(agent.actor), alpha=alpha)
    assert logs["actor/loss"].item() == pytest.approx((WEIGHTS * per_state).mean().item(), 1e-5)
    # alpha's input is self-normalised: sum(w log pi) / sum(w)
    expected = ((WEIGHTS * log_prob).sum() / WEIGHTS.sum()).item()
    assert logs["actor/log_prob"].item() == pytest.approx(expected, rel=1e-5)
    # the alpha update without an actor update (AWAC online) weighs the states the same way
    assert learning.policy_log_prob(agent, batch).item() == pytest.approx(expected, rel=1e-5)


def test_sac_and_sunrise_actor_losses_scale_with_the_importance_weights():
    for ensemble_size in (1, 2):
        torch.manual_seed(0)
        agent = Agent(2, nets.FlatEncoder(3), ensemble_size=ensemble_size, hidden_size=16)
        alpha = torch.full((ensemble_size,), 0.1) if ensemble_size > 1 else torch.tensor(0.1)
        update = (
            sunrise.ensemble_actor_update if ensemble_size > 1 else learning.online_actor_update
        )
        out = []
        for scale in (1.0, 2.0):
            torch.manual_seed(3)  # the same reparameterised samples
            out.append(update(agent, _batch(WEIGHTS * scale), _sgd(agent.actor), alpha=alpha))
        assert out[1]["actor/loss"].item() == pytest.approx(2 * out[0]["actor/loss"].item(), 1e-5)
        # alpha's input does not depend on the weights' scale
        assert torch.allclose(out[1]["actor/log_prob"], out[0]["actor/log_prob"], rtol=1e-5)


def test_behavioral_cloning_loss_is_importance_weighted():
    torch.manual_seed(0)
    agent = Agent(2, nets.FlatEncoder(3), hidden_size=16)
    batch = _batch()
    with torch.no_grad():
        log_prob = agent.actor(batch.obs["obs"]).log_prob(batch.action).reshape(-1, 1)
    logs = learning.offline_actor_update(agent, batch, _sgd(agent.actor), adv_filter="none")
    expected = -(WEIGHTS * log_prob).mean()
    assert logs["actor/afbc_loss"].item() == pytest.approx(expected.item(), rel=1e-5)


# ------------------------------------------------------------------- the loop's schedule
def _pendulum_trainer(buffer=None, **settings):
    torch.manual_seed(0)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=16)
    cfg = dict(
        random_warmup_steps=10,
        batch_size=8,
        verbosity=0,
        eval_episodes=0,
        logging_method="none",
        save_to_disk=False,
        log_to_disk=False,
        seed=0,
        num_steps_online=20,
    )
    cfg.update(settings)
    buffer = buffer if buffer is not None else ReplayBuffer(1000, verbose=False)
    env, test_env = make_gym_env("Pendulum-v1"), make_gym_env("Pendulum-v1")
    return Trainer(agent, buffer, env, test_env, TrainConfig(**cfg))


def test_alpha_is_tuned_online_without_policy_gradient_updates():
    """AWAC online (use_pg_update_online = False) with alpha_lr > 0: the original tuned alpha in
    every online step; before this fix it stayed at init_alpha."""
    trainer = _pendulum_trainer(
        init_alpha=0.5, alpha_lr=0.01, use_pg_update_online=False, use_afbc_update_online=True
    )
    trainer.run()
    assert "alpha/loss" in trainer.last_logs
    # 10 updates (steps 11..20), each moving log-alpha by about alpha_lr (Adam's first steps)
    moved = abs(trainer.log_alpha.item() - math.log(0.5))
    assert 0.02 < moved <= 0.1 + 1e-6
    assert trainer.actor_updates == 10  # the AFBC updates, and no policy-gradient update ran


def test_alpha_step_follows_the_exact_discrete_entropy():
    torch.manual_seed(0)
    agent = Agent(3, nets.FlatEncoder(3), discrete=True, hidden_size=16)
    learner = Learner(agent, TrainConfig(init_alpha=0.5, alpha_lr=0.1, target_entropy_mul=0.5))
    batch = _batch(discrete=True)
    gap = learning.policy_log_prob(agent, batch).item() + learner.target_entropy
    logs = learner.alpha_step(batch)
    # the loss -log_alpha * (E[log pi] + H) has gradient -gap; Adam's first step is lr * sign
    assert learner.log_alpha.item() == pytest.approx(math.log(0.5) + 0.1 * math.copysign(1, gap))
    assert logs["alpha/value"].item() == pytest.approx(learner.log_alpha.exp().item())


def test_alpha_optimizer_uses_the_configured_adam_betas():
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    assert Learner(agent, TrainConfig()).alpha_optimizer.param_groups[0]["betas"] == (0.9, 0.999)
    learner = Learner(agent, TrainConfig(alpha_betas=(0.5, 0.999)))  # the original's
    assert learner.alpha_optimizer.param_groups[0]["betas"] == (0.5, 0.999)


def test_prioritized_beta_anneals_to_its_final_value():
    buffer = ReplayBuffer(1000, prioritized=True, beta=0.4, verbose=False)
    trainer = _pendulum_trainer(buffer=buffer)
    seen = []
    sample = buffer.sample

    def spy(*args, **kwargs):
        seen.append((trainer.step, buffer.beta))
        return sample(*args, **kwargs)

    buffer.sample = spy
    trainer.run()
    # steps 11..20 update; beta = 0.4 + 0.6 * step / 20
    assert seen[0] == (11, pytest.approx(0.4 + 0.6 * 11 / 20))
    assert seen[-1] == (20, pytest.approx(1.0))
    fixed = ReplayBuffer(1000, prioritized=True, beta=0.4, verbose=False)
    _pendulum_trainer(buffer=fixed, per_beta_final=None).run()
    assert fixed.beta == 0.4


def test_afbc_trick_rescores_critic_batches_and_skips_importance_weights(monkeypatch):
    trainer = _pendulum_trainer(
        use_pg_update_online=False,
        use_afbc_update_online=True,
        afbc_per=True,
        alpha_lr=0.0,
        critic_updates_per_step=2,
    )
    trainer.reset_envs()
    trainer.collect(30)
    calls, critic_batches, advantages, afbc_batches = [], [], [], []
    index_update, sample = trainer.afbc_index.update, trainer.buffer.sample
    advantage, afbc_step = trainer.learner.advantage, trainer.learner.afbc_step

    def spy_update(idxs, priorities):
        calls.append((np.asarray(idxs).copy(), torch.as_tensor(priorities).clone()))
        index_update(idxs, priorities)

    def spy_sample(*a, **k):
        critic_batches.append(sample(*a, **k))
        return critic_batches[-1]

    def spy_advantage(batch):
        advantages.append(advantage(batch))
        return advantages[-1]

    def spy_afbc(batch, *extra):
        assert not extra  # no importance weights: the objective follows the priorities
        afbc_batches.append(batch)
        return afbc_step(batch)

    monkeypatch.setattr(trainer.afbc_index, "update", spy_update)
    monkeypatch.setattr(trainer.buffer, "sample", spy_sample)
    monkeypatch.setattr(trainer.learner, "advantage", spy_advantage)
    monkeypatch.setattr(trainer.learner, "afbc_step", spy_afbc)
    trainer.step = 1
    trainer.update()
    # two critic batches re-scored with (max(A, 0) + 1e-4)^0.6, then the AFBC batch
    assert len(critic_batches) == 2 and len(afbc_batches) == 1 and len(calls) == 3
    for (idxs, priorities), batch, adv in zip(calls[:2], critic_batches, advantages):
        assert np.array_equal(idxs, batch.idxs)
        expected = (adv.reshape(-1).clamp_min(0) + 1e-4) ** 0.6
        assert torch.allclose(priorities, expected)
    assert np.array_equal(calls[2][0], afbc_batches[0].idxs)
    assert torch.equal(afbc_batches[0].weights, torch.ones(8, 1))
    slots, counts = np.unique(calls[2][0], return_counts=True)
    once = np.isin(calls[2][0], slots[counts == 1])
    stored = trainer.afbc_index.priorities(calls[2][0][once])
    assert np.allclose(stored, calls[2][1].numpy()[once])


def test_advantage_priorities_favour_positive_advantages():
    p = advantage_priorities(torch.tensor([-5.0, 0.0, 0.5, 2.0]))
    assert p[0] == p[1] == pytest.approx(1e-4**0.6)
    assert p[3] / p[2] == pytest.approx((2.0001 / 0.5001) ** 0.6)


def test_optimizer_param_group_betas():
    w = torch.zeros(2, requires_grad=True)
    opt = optim.build_optimizer(optim.ParamGroup([w], 0.1, betas=(0.5, 0.9)))
    assert opt.param_groups[0]["betas"] == (0.5, 0.9)


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"alpha_betas": (0.9, 1.0)}, r"alpha_betas = \(0.9, 1.0\).*two numbers in \[0, 1\)"),
        ({"alpha_betas": (0.9,)}, r"alpha_betas = \(0.9,\).*Fix: use e.g. \(0.9, 0.999\)"),
        ({"popart_beta": 0.0}, r"popart_beta = 0.0.*\(0, 1\]"),
        ({"per_beta_final": 1.5}, r"per_beta_final = 1.5.*or None"),
    ],
)
def test_bad_optimizer_settings_name_the_binding(setting, message):
    from super_sac.validation import ConfigError, validate_config

    trainer_cfg = TrainConfig(
        random_warmup_steps=10, **setting, logging_method="none", log_to_disk=False
    )
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    env = make_gym_env("Pendulum-v1")
    with pytest.raises(ConfigError, match=message):
        test_env = make_gym_env("Pendulum-v1")
        validate_config(trainer_cfg, agent, ReplayBuffer(100, verbose=False), env, test_env)


def test_alpha_stays_put_at_the_target_entropy_whatever_the_importance_weights():
    """Prioritized replay's weights are at most 1; a plain weighted mean of log pi would move
    alpha's fixed point (and make a discrete alpha grow for ever)."""
    agent = Agent(4, nets.FlatEncoder(3), discrete=True, hidden_size=8)
    with torch.no_grad():
        for p in agent.actor.parameters():
            p.zero_()  # uniform policy: entropy log 4
    # target entropy 0.98 log|A| * mul = log 4, the policy's own
    learner = Learner(agent, TrainConfig(init_alpha=0.1, alpha_lr=0.1, target_entropy_mul=1 / 0.98))
    weights = torch.linspace(0.1, 1.0, 8).reshape(-1, 1)
    for _ in range(5):
        logs = learner.alpha_step(_batch(weights, discrete=True))
    assert logs["alpha/value"].item() == pytest.approx(0.1, rel=1e-5)


def test_non_finite_advantages_get_the_floor_priority():
    p = advantage_priorities(torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0]))
    assert torch.isfinite(p).all()
    assert p[:3].tolist() == pytest.approx([1e-4**0.6] * 3)


def test_popart_beta_and_the_advantage_reduction_reach_the_updates():
    torch.manual_seed(0)
    agent = Agent(2, nets.FlatEncoder(3), hidden_size=8, auto_rescale_targets=True)
    learner = Learner(agent, TrainConfig(popart_beta=0.02))
    assert agent.critic.popart.beta == learner.target_agent.critic.popart.beta == 0.02
    batch = _batch()
    advantages = {}
    for reduction in ("min", "mean"):
        learner.cfg.afbc_critic_reduction = reduction
        torch.manual_seed(4)
        advantages[reduction] = learner.advantage(batch)
        torch.manual_seed(4)
        direct = learning.batch_advantage(agent, batch, 4, reduction)
        assert torch.equal(advantages[reduction], direct)
    assert not torch.allclose(advantages["min"], advantages["mean"])


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"popart_beta": 0.01}, "popart_beta = 0.01: has no effect: the critics have no PopArt"),
        ({"per_beta_final": 0.5}, "per_beta_final = 0.5: has no effect: .*samples uniformly"),
        ({"alpha_betas": (0.5, 0.999), "alpha_lr": 0.0, "init_alpha": 0.1}, "alpha_betas"),
        ({"afbc_critic_reduction": "mean"}, "afbc_critic_reduction = 'mean': has no effect"),
    ],
)
def test_fidelity_settings_that_do_nothing_warn(setting, message):
    from super_sac.validation import ConfigWarning, validate_config

    cfg = TrainConfig(random_warmup_steps=10, logging_method="none", log_to_disk=False, **setting)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    env = make_gym_env("Pendulum-v1")
    with pytest.warns(ConfigWarning, match=message):
        test_env = make_gym_env("Pendulum-v1")
        validate_config(cfg, agent, ReplayBuffer(100, verbose=False), env, test_env)
