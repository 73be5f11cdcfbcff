"""Augmentation in the training loop: aug_mix, DrQ's K and M, the invariance losses, validation,
training and exact resume with an augmenter, and the unchanged path without one."""

import copy
import dataclasses
import math
import warnings
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from super_sac import Agent, ReplayBuffer, learning, nets
from super_sac import learning_utils as lu
from super_sac.augmentations import AugmentationSequence, Drqv2Aug, RadAug
from super_sac.augmented_batch import augment_batch, augmented_rows, fresh_view
from super_sac.main import TrainConfig, Trainer
from super_sac.nets.cnns import DrQPixelEncoder
from super_sac.nets.mlps import ContinuousDeterministicActor
from super_sac.replay import Batch
from super_sac.validation import ConfigError, ConfigWarning, validate_config
from super_sac.wrappers import make_gym_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SIZE = 16


# ----------------------------------------------------------------------------- fakes


class FakeShift:
    """Follows the augmentation interface: adds a random integer in [1, 9] per sample to every
    4-d image key (float32 out), one draw shared by obs and next_obs; other keys pass through."""

    def _draw(self, obs):
        batch = next(iter(obs.values())).shape[0]
        return torch.randint(1, 10, (batch, 1, 1, 1)).float()

    def _apply(self, obs, shift):
        return {k: v.float() + shift if v.ndim == 4 else v for k, v in obs.items()}

    def __call__(self, obs, next_obs=None):
        shift = self._draw(obs)
        if next_obs is None:
            return self._apply(obs, shift)
        return self._apply(obs, shift), self._apply(next_obs, shift)


class FakeCrop(FakeShift):
    """RAD-like: a random 2-pixel-smaller window (one offset per call), float32 out."""

    def __call__(self, obs, next_obs=None):
        top, left = (int(x) for x in torch.randint(0, 3, (2,)))

        def crop(d):
            return {
                k: v[..., top : top + SIZE - 2, left : left + SIZE - 2].float()
                if v.ndim == 4
                else v
                for k, v in d.items()
            }

        return crop(obs) if next_obs is None else (crop(obs), crop(next_obs))


class TinyPixelEncoder(nets.Encoder):
    """conv 3->4, average-pooled to 2x2, linear to 8 features: any image size works."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(16, 8)

    @property
    def embedding_dim(self):
        return 8

    def forward(self, obs_dict):
        x = obs_dict["image"].float() / 255.0
        return torch.tanh(self.fc(self.pool(torch.relu(self.conv(x))).flatten(1)))


class PixelEnv(gym.Env):
    """Dict(image=uint8 (3, 16, 16)): a bright column at the position of a 1-d point that the
    action moves; reward -|x|; 12-step episodes (truncated)."""

    def __init__(self):
        self.observation_space = spaces.Dict(
            {"image": spaces.Box(0, 255, (3, SIZE, SIZE), np.uint8)}
        )
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.x, self.t = 0.0, 0

    def _obs(self):
        img = np.zeros((3, SIZE, SIZE), np.uint8)
        img[:, :, int(np.clip((self.x + 1) / 2 * (SIZE - 1), 0, SIZE - 1))] = 200
        return {"image": img}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = float(self.np_random.uniform(-1, 1)), 0
        return self._obs(), {}

    def step(self, action):
        self.x = float(np.clip(self.x + 0.3 * float(action[0]), -1, 1))
        self.t += 1
        return self._obs(), -abs(self.x), False, self.t >= 12, {}


def _image_buffer(n=6):
    buffer = ReplayBuffer(50, seed=0, verbose=False)
    rng = np.random.default_rng(0)
    for _ in range(n):
        buffer.push(
            {"image": rng.integers(0, 200, (1, 3, SIZE, SIZE), dtype=np.uint8),
             "state": rng.normal(size=(1, 2)).astype(np.float32)},
            rng.uniform(-1, 1, (1, 1)).astype(np.float32),
            np.ones(1, np.float32),
            {"image": rng.integers(0, 200, (1, 3, SIZE, SIZE), dtype=np.uint8),
             "state": rng.normal(size=(1, 2)).astype(np.float32)},
            np.zeros(1, np.float32),
            np.full(1, 0.99, np.float32),
        )  # fmt: skip
    return buffer


# ----------------------------------------------------------------------------- mixing


def test_aug_mix_augments_exactly_the_first_rows_and_leaves_the_buffer_untouched():
    buffer = _image_buffer()
    stored = copy.deepcopy(buffer._obs), copy.deepcopy(buffer._next_obs)
    batch = buffer.sample(8)
    before = {k: v.clone() for k, v in batch.obs.items()}
    out = augment_batch(batch, FakeShift(), aug_mix=0.5)
    assert augmented_rows(8, 0.5) == out.views.rows == 4
    # the samples were shuffled first (all fields alike), so the first rows are a random subset
    order = [int(np.flatnonzero((batch.obs["state"] == row).all(1))[0]) for row in out.obs["state"]]
    assert sorted(out.idxs) == sorted(batch.idxs)  # the same samples (a few drawn twice)
    assert np.array_equal(out.idxs, batch.idxs[order])
    assert torch.equal(out.action, batch.action[order])
    image, clean = out.obs["image"], batch.obs["image"][order].float()
    assert image.dtype == torch.float32 and image.shape == clean.shape
    shift = image - clean  # rows 0-3 shifted by 1..9 everywhere, rows 4-7 clean
    assert (shift[:4] >= 1).all() and (shift[:4] <= 9).all() and (shift[4:] == 0).all()
    clean_next = batch.next_obs["image"][order].float()
    assert torch.equal(out.next_obs["image"][:4] - clean_next[:4], shift[:4])
    assert torch.equal(out.next_obs["image"][4:], clean_next[4:])
    # the views: the whole batch augmented, and the clean batch
    assert torch.equal(out.views.aug_obs["image"][:4], image[:4])
    assert (out.views.aug_obs["image"][4:] > clean[4:]).all()
    assert torch.equal(out.views.clean_obs["image"], clean)
    # nothing was modified in place: the batch as sampled, and the buffer's storage
    assert batch.views is None and batch.obs["image"].dtype == torch.uint8
    assert all(torch.equal(before[k], batch.obs[k]) for k in before)
    for saved, now in zip(stored, (buffer._obs, buffer._next_obs)):
        assert all(np.array_equal(saved[k], now[k]) for k in saved)
    # None: every row; 0: none (still float, the augmented dtype)
    every = augment_batch(batch, FakeShift(), aug_mix=None)
    clean = batch.obs["image"].float()  # all rows or none: the order as sampled
    assert (every.obs["image"] > clean).all() and every.obs is every.views.aug_obs
    assert every.obs["state"] is batch.obs["state"]  # other keys pass through
    none = augment_batch(batch, FakeShift(), aug_mix=0.0)
    assert torch.equal(none.obs["image"], clean)


def test_the_augmented_rows_of_a_prioritized_batch_are_a_random_subset():
    """Prioritized replay returns one sample per priority segment, in slot order; with aug_mix
    the augmented rows must not be the oldest slots every time."""
    buffer = ReplayBuffer(16, seed=0, verbose=False, prioritized=True)
    for slot in range(16):
        obs = {"image": np.full((1, 3, SIZE, SIZE), slot, np.uint8)}
        buffer.push(obs, np.zeros((1, 1), np.float32), np.full(1, slot, np.float32), obs,
                    np.zeros(1, np.float32), np.full(1, 0.99, np.float32))  # fmt: skip
    torch.manual_seed(0)
    first_half = []
    for _ in range(50):
        sampled = buffer.sample(8)
        assert np.all(np.diff(sampled.idxs) >= 0)  # as sampled: in slot order
        out = augment_batch(sampled, FakeShift(), aug_mix=0.5)
        # every row keeps its own slot's data
        assert np.array_equal(out.reward[:, 0].numpy(), out.idxs.astype(np.float32))
        assert np.array_equal(out.views.clean_obs["image"][:, 0, 0, 0].numpy(), out.idxs)
        first_half.append(np.mean(out.idxs[:4] < 8))
    assert 0.3 < np.mean(first_half) < 0.7  # in slot order it would be 1.0


def test_cropping_augmenter_centre_crops_the_clean_rows():
    batch = _image_buffer().sample(6)
    out = augment_batch(batch, FakeCrop(), aug_mix=0.5)
    order = [int(np.flatnonzero((batch.obs["state"] == row).all(1))[0]) for row in out.obs["state"]]
    assert out.obs["image"].shape == (6, 3, SIZE - 2, SIZE - 2)
    centre = batch.obs["image"][order][..., 1 : SIZE - 1, 1 : SIZE - 1].float()
    assert torch.equal(out.obs["image"][3:], centre[3:])
    assert torch.equal(out.views.clean_obs["image"], centre)
    assert torch.equal(
        out.next_obs["image"][3:], batch.next_obs["image"][order][3:, :, 1:-1, 1:-1].float()
    )


def test_fresh_views_draw_again_and_keep_the_clean_rows():
    batch = augment_batch(_image_buffer().sample(8), FakeShift(), aug_mix=0.25)
    torch.manual_seed(1)
    views = [fresh_view(batch.views, FakeShift(), "next_obs") for _ in range(20)]
    clean = batch.views.clean_next_obs["image"]
    for view in views:
        assert (view["image"][:2] > clean[:2]).all() and torch.equal(view["image"][2:], clean[2:])
    assert any(not torch.equal(v["image"][:2], batch.next_obs["image"][:2]) for v in views)
    with pytest.raises(ValueError, match="'obs' or 'next_obs'"):
        fresh_view(batch.views, FakeShift(), "action")


# ----------------------------------------------------------------------------- DrQ's K and M


class LinearCritic(nn.Module):
    """Q_i(s, a) = s . w_i + sum(a), two critics with w_1 = (1, 0), w_2 = (0, 1)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))

    def forward(self, state, action, detach_params=False):
        return (state @ self.w.T).T.unsqueeze(-1) + action.sum(-1).view(1, -1, 1)


def _stub(critic, actor=None):
    return SimpleNamespace(
        encoder=lambda o: o["obs"], actor=actor, critic=critic, stochastic=False,
        discrete=False, num_critics=2,
    )  # fmt: skip


def test_drq_averages_k_targets_and_m_critic_losses_by_hand():
    critic = LinearCritic()
    agent = _stub(critic, actor=lambda rep: torch.full((rep.shape[0], 1), 0.5))
    target_agent = _stub(LinearCritic())
    row = lambda *v: {"obs": torch.tensor([v])}  # noqa: E731
    one = torch.ones(1, 1)
    batch = Batch(row(2.0, 0.0), torch.zeros(1, 1), one, row(1.0, 2.0), 0 * one, 0.5 * one, one,
                  np.zeros(1, np.int64))  # fmt: skip
    opt = torch.optim.SGD(critic.parameters(), lr=0.0)
    kw = dict(alpha=torch.tensor(0.0), target_critic_ensemble_n=2)
    # K = 1: next obs (1, 2): min(1.5, 2.5) = 1.5 -> y = 1 + 0.5 * 1.5 = 1.75
    logs = learning.critic_update(agent, target_agent, batch, opt, **kw)
    assert torch.isclose(logs["critic/target_mean"], torch.tensor(1.75))
    # K = 2 with a second next obs (4, 3): min(4.5, 3.5) = 3.5 -> y = 2.75; mean 2.25.
    # M = 1: obs (2, 0) gives Q = (2, 0): ((2 - 2.25)^2 + (0 - 2.25)^2) / 2 = 2.5625
    logs = learning.critic_update(agent, target_agent, batch, opt, extra_next_obs=[row(4.0, 3.0)],
                                  **kw)  # fmt: skip
    assert torch.isclose(logs["critic/target_mean"], torch.tensor(2.25))
    assert torch.isclose(logs["critic/loss"], torch.tensor(2.5625))
    # M = 2 with a second obs (0, 1), Q = (0, 1): (0.0625 + 5.0625 + 5.0625 + 1.5625) / 4
    logs = learning.critic_update(agent, target_agent, batch, opt, extra_next_obs=[row(4.0, 3.0)],
                                  extra_obs=[row(0.0, 1.0)], **kw)  # fmt: skip
    assert torch.isclose(logs["critic/loss"], torch.tensor(2.9375))
    # the logs stay those of the batch's own observations: Q = (2, 0)
    assert torch.isclose(logs["critic/q_mean"], torch.tensor(1.0))
    assert logs["critic/abs_td_error"].shape == (1,)
    assert torch.isclose(logs["critic/abs_td_error"][0], torch.tensor((0.25 + 2.25) / 2))
    assert lu.averaged_td_target([torch.ones(2, 1)]).shape == (2, 1)


# ----------------------------------------------------------------------------- invariance


def test_invariance_losses_by_hand():
    aug = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    clean = torch.tensor([[1.0, 0.0], [0.0, 0.0]], requires_grad=True)
    loss = lu.encoder_invariance_loss(aug, clean)  # Frobenius norm over the batch
    assert torch.isclose(loss, torch.tensor(math.sqrt(0 + 4 + 9 + 16)))
    loss.backward()
    assert clean.grad is None and aug.grad is not None
    aug_lp, clean_lp = torch.tensor([[1.0], [-2.0]]), torch.tensor([[0.0], [0.0]])
    assert torch.isclose(lu.action_invariance_loss(aug_lp, clean_lp), torch.tensor(2.5))
    actions = torch.tensor([[1.0, 1.0], [0.0, 2.0]]), torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    assert torch.isclose(lu.deterministic_action_invariance_loss(*actions), torch.tensor(3.0))


def _pixel_agent(**kwargs):
    torch.manual_seed(0)
    return Agent(1, TinyPixelEncoder(), hidden_size=16, **kwargs)


def _augmented_batch(aug_mix=None):
    torch.manual_seed(3)
    return augment_batch(_image_buffer().sample(8), FakeShift(), aug_mix)


def _grads(module):
    return [p.grad for p in module.parameters()]


def test_encoder_invariance_reaches_the_encoder_and_action_invariance_only_the_actor():
    agent, batch = _pixel_agent(), _augmented_batch()
    learning.encoder_invariance(agent, batch.views).backward()
    assert all(g is not None and g.abs().sum() > 0 for g in _grads(agent.encoder))
    assert all(g is None for g in _grads(agent.actor) + _grads(agent.critic))
    agent.zero_grad(set_to_none=True)
    learning.action_invariance(agent, batch.views).backward()
    assert all(g is None for g in _grads(agent.encoder) + _grads(agent.critic))
    assert any(g is not None and g.abs().sum() > 0 for g in _grads(agent.actor))
    # identical views give zero, for stochastic and deterministic actors
    same = copy.copy(batch.views)
    same.aug_obs = same.clean_obs
    assert learning.action_invariance(agent, same) == 0
    assert learning.encoder_invariance(agent, same) == 0
    det = _pixel_agent(actor_network_cls=ContinuousDeterministicActor)
    assert learning.action_invariance(det, same) == 0
    assert learning.action_invariance(det, batch.views) > 0


def _seeded(fn, *args, **kwargs):
    torch.manual_seed(7)
    return fn(*args, **kwargs)


@pytest.mark.parametrize("aug_mix", [None, 0.5])
def test_the_updates_add_lambda_times_the_invariance_terms(aug_mix):
    batch = _augmented_batch(aug_mix)
    losses, encoders = {}, {}
    for lam in (0.0, 2.0):
        agent = _pixel_agent()
        target = learning.make_target_agent(agent)
        opt = torch.optim.SGD(list(agent.critic.parameters()) + list(agent.encoder.parameters()),
                              lr=0.1)  # fmt: skip
        kw = dict(alpha=torch.tensor(0.1), target_critic_ensemble_n=2, encoder_lambda=lam)
        logs = _seeded(learning.critic_update, agent, target, batch, opt, **kw)
        losses[lam], encoders[lam] = logs, copy.deepcopy(agent.encoder.state_dict())
    inv = losses[2.0]["critic/encoder_invariance"]
    assert inv > 0 and "critic/encoder_invariance" not in losses[0.0]
    assert torch.isclose(losses[2.0]["critic/loss"], losses[0.0]["critic/loss"] + 2.0 * inv)
    assert not torch.equal(encoders[0.0]["fc.weight"], encoders[2.0]["fc.weight"])
    # the actor: the term is added, the encoder does not move
    for update in ("pg", "afbc"):
        out = {}
        for lam in (0.0, 2.0):
            agent = _pixel_agent()
            encoder_before = copy.deepcopy(agent.encoder.state_dict())
            opt = torch.optim.SGD(agent.actor.parameters(), lr=0.1)
            if update == "pg":
                out[lam] = _seeded(learning.online_actor_update, agent, batch, opt,
                                   alpha=torch.tensor(0.1), actor_lambda=lam)  # fmt: skip
                key = "actor/loss"
            else:
                out[lam] = _seeded(learning.offline_actor_update, agent, batch, opt,
                                   actor_lambda=lam)  # fmt: skip
                key = "actor/afbc_loss"
            after = agent.encoder.state_dict()
            assert all(torch.equal(encoder_before[k], after[k]) for k in after)
        inv = out[2.0]["actor/action_invariance"]
        assert inv > 0 and "actor/action_invariance" not in out[0.0]
        assert torch.isclose(out[2.0][key], out[0.0][key] + 2.0 * inv, atol=1e-5)


# ----------------------------------------------------------------------------- validation


def _validate(agent=None, **settings):
    env = make_gym_env("Pendulum-v1")
    agent = agent or Agent(1, nets.FlatEncoder(3), hidden_size=8)
    cfg = TrainConfig(**{"random_warmup_steps": 0, **settings})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        validate_config(cfg, agent, ReplayBuffer(100, verbose=False), env, copy.deepcopy(env))


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"encoder_lambda": 0.1}, r"encoder_lambda = 0.1: .*no augmenter is set.*Fix: set an "
                                  r"augmenter \(super_sac.augmenter = "),
        ({"actor_lambda": 1.0}, r"actor_lambda = 1.0: .*no augmenter"),
        ({"aug_target_samples": 2, "aug_critic_samples": 2},
         r"aug_target_samples = 2, aug_critic_samples = 2: .*no augmenter"),
        ({"augmenter": FakeShift(), "encoder_lambda": -1.0}, r"encoder_lambda = -1.0: .*>= 0"),
        ({"augmenter": FakeShift(), "actor_lambda": -0.5}, r"actor_lambda = -0.5: .*>= 0"),
        ({"augmenter": FakeShift(), "actor_lambda": float("nan")}, r"actor_lambda = nan: .*>= 0"),
        ({"augmenter": FakeShift(), "aug_critic_samples": 0}, r"aug_critic_samples = 0: .*>= 1"),
        ({"augmenter": "DrqAug"}, r"augmenter = 'DrqAug': .*callable.*parentheses"),
    ],
)  # fmt: skip
def test_bad_augmentation_settings_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        _validate(**settings)


def test_sunrise_refuses_invariance_and_drq_samples_but_takes_an_augmenter():
    sunrise = Agent(1, nets.FlatEncoder(3), hidden_size=8, ensemble_size=2)
    with pytest.raises(ConfigError, match=r"actor_lambda = 0.1: SUNRISE ensembles .*Fix: "):
        _validate(sunrise, augmenter=FakeShift(), actor_lambda=0.1)
    _validate(sunrise, augmenter=FakeShift(), aug_mix=0.5)
    _validate(augmenter=FakeShift(), encoder_lambda=0.1, actor_lambda=0.1, aug_target_samples=2,
              aug_critic_samples=2)  # fmt: skip


# ----------------------------------------------------------------------------- the loop


def _pixel_trainer(tmp_path, steps, resume=False, augmenter=None, agent_kwargs=None, **loop):
    venv = gym.vector.SyncVectorEnv(
        [PixelEnv] * 2, autoreset_mode=gym.vector.AutoresetMode.DISABLED
    )
    agent = _pixel_agent(**(agent_kwargs or {}))
    settings = dict(
        random_warmup_steps=10, batch_size=8, verbosity=0, eval_episodes=1, eval_interval=1000,
        base_save_path=str(tmp_path), name="pix", logging_method="none", seed=5,
        checkpoint_interval=10, num_steps_online=steps, transitions_per_online_step=2,
        augmenter=augmenter, resume=resume,
    )  # fmt: skip
    settings.update(loop)
    cfg = TrainConfig(**settings)
    test_env = gym.wrappers.TimeLimit(PixelEnv(), 12)
    return Trainer(agent, ReplayBuffer(500, verbose=False), venv, test_env, cfg)


DRQ = {
    "aug_mix": 0.75,
    "encoder_lambda": 0.1,
    "actor_lambda": 0.1,
    "aug_target_samples": 2,
    "aug_critic_samples": 2,
}


def test_short_pixel_runs_with_an_augmenter_give_finite_logs(tmp_path):
    trainer = _pixel_trainer(tmp_path / "drq", 20, augmenter=FakeShift(), **DRQ)
    trainer.run()
    logs = trainer.last_logs
    for key in ("critic/loss", "critic/encoder_invariance", "actor/action_invariance"):
        assert torch.isfinite(logs[key]).all() and logs[key] > 0, key
    # RAD-like crops, AFBC online, a deterministic-free stochastic agent; and TD3 with crops
    trainer = _pixel_trainer(tmp_path / "rad", 16, augmenter=FakeCrop(), aug_mix=0.5,
                             actor_lambda=0.1, use_afbc_update_online=True)  # fmt: skip
    trainer.run()
    assert torch.isfinite(trainer.last_logs["actor/afbc_loss"])
    assert torch.isfinite(trainer.last_logs["actor/action_invariance"])
    td3 = {"init_alpha": 0.0, "alpha_lr": 0.0, "use_exploration_process": True,
           "use_target_actor": True, "target_noise_std": 0.2}  # fmt: skip
    trainer = _pixel_trainer(tmp_path / "td3", 16, augmenter=FakeCrop(), actor_lambda=0.1,
                             agent_kwargs={"actor_network_cls": ContinuousDeterministicActor},
                             **td3)  # fmt: skip
    trainer.run()
    assert torch.isfinite(trainer.last_logs["actor/action_invariance"])


def test_pixel_run_with_an_augmenter_resumes_exactly(tmp_path):
    kw = {"augmenter": FakeShift(), **DRQ}
    full = _pixel_trainer(tmp_path / "a", 30, **kw)
    full.run()
    part = _pixel_trainer(tmp_path / "b", 15, **kw)  # its last checkpoint: step 15 (the end)
    part.run()
    resumed = _pixel_trainer(tmp_path / "b", 30, resume=True, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed.run()
    assert resumed.env_steps == full.env_steps == 60
    for (k, a), b in zip(full.agent.state_dict().items(), resumed.agent.state_dict().values()):
        assert torch.equal(a, b), k
    assert torch.equal(full.log_alpha, resumed.log_alpha)


def test_without_an_augmenter_batches_are_the_buffers_own(tmp_path):
    trainer = _pixel_trainer(tmp_path, 4)
    trainer.collect(20)
    raw = trainer.buffer.sample(8)
    assert trainer.learner.augment(raw) is raw
    batch = trainer._sample()
    assert batch.views is None and batch.obs["image"].dtype == torch.uint8
    assert learning.critic_update_with_features.__kwdefaults__["encoder_lambda"] == 0.0
    assert learning.critic_update_with_features.__kwdefaults__["extra_obs"] == ()
    assert trainer.learner.extra_views(batch, "obs", 4) == []


# ----------------------------------------------------------------------------- review fixes


def test_clean_views_are_built_only_when_a_row_stays_clean_or_they_are_read():
    every = augment_batch(_image_buffer().sample(8), FakeShift(), aug_mix=None)
    assert "clean_obs" not in vars(every.views) and "clean_next_obs" not in vars(every.views)
    fresh_view(every.views, FakeShift(), "obs")  # DrQ's extra views: all rows augmented too
    assert "clean_obs" not in vars(every.views)
    clean = every.views.clean_obs  # built on first read (an invariance loss), then kept
    assert clean["image"].dtype == torch.float32 and every.views.clean_obs is clean
    assert torch.equal(clean["image"], every.views.source_obs["image"].float())
    half = augment_batch(_image_buffer().sample(8), FakeShift(), aug_mix=0.5)
    assert "clean_obs" in vars(half.views) and "clean_next_obs" in vars(half.views)


def _learner_with_a_batch(aug_critic_samples=1):
    trainer = _pixel_trainer(
        "/tmp/unused", 4, augmenter=FakeShift(), aug_critic_samples=aug_critic_samples,
        save_to_disk=False, log_to_disk=False,
    )  # fmt: skip
    torch.manual_seed(2)
    trainer.collect(20)
    return trainer.learner, trainer._sample()


@pytest.mark.parametrize("aug_critic_samples", [1, 2])
def test_the_actor_reads_the_critic_updates_pre_step_features(aug_critic_samples):
    learner, batch = _learner_with_a_batch(aug_critic_samples)
    agent = learner.agent
    with torch.no_grad():
        before = agent.encoder(batch.obs)  # the encoder before the critic's step
    learner.critic_step(batch, learner.alpha, 0.0)
    with torch.no_grad():
        after = agent.encoder(batch.obs)
    assert not torch.allclose(before, after)  # the critic step moved the encoder
    assert torch.equal(learner.critic_features(batch), before)
    seen = []
    hook = agent.actor.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    learner.pg_actor_step(batch, learner.alpha)
    assert torch.equal(seen[0], before)
    # another batch object is encoded afresh, with the current encoder
    seen.clear()
    other = dataclasses.replace(batch)
    assert learner.critic_features(other) is None
    learner.pg_actor_step(other, learner.alpha)
    assert torch.equal(seen[0], after)
    seen.clear()
    learner.afbc_step(batch)  # AFBC on the critic batch reads the same features
    assert torch.equal(seen[-1], before)  # (the earlier calls estimate V(s) on repeated rows)
    hook.remove()


def test_the_loop_passes_the_exploration_std_to_a_noisy_deterministic_actor_update(tmp_path):
    det = {"init_alpha": 0.0, "alpha_lr": 0.0, "use_exploration_process": True,
           "exploration_param_init": 0.7, "exploration_param_final": 0.7}  # fmt: skip
    stds = []
    for noisy in (False, True):
        trainer = _pixel_trainer(
            tmp_path / str(noisy), 12, augmenter=FakeShift(), actor_update_noise=noisy,
            agent_kwargs={"actor_network_cls": ContinuousDeterministicActor}, **det,
        )  # fmt: skip
        step = trainer.learner.pg_actor_step
        trainer.learner.pg_actor_step = lambda b, a, std=0.0, _s=step: (
            stds.append(std) or _s(b, a, std)
        )
        trainer.run()
    assert stds[0] == 0.0 and stds[-1] == 0.7


def test_the_noisy_actor_loss_scores_the_clipped_noisy_action():
    agent = _pixel_agent(actor_network_cls=ContinuousDeterministicActor)
    batch = _augmented_batch()
    opt = torch.optim.SGD(agent.actor.parameters(), lr=0.0)
    logs = _seeded(learning.online_actor_update, agent, batch, opt, alpha=torch.tensor(0.0),
                   actor_noise_std=0.5, actor_noise_clip=0.3)  # fmt: skip
    torch.manual_seed(7)
    with torch.no_grad():
        rep = agent.encoder(batch.obs)
        mu = agent.actor(rep)
        action = (mu + (torch.randn_like(mu) * 0.5).clamp(-0.3, 0.3)).clamp(-1.0, 1.0)
        q = agent.critic(rep, action).amin(dim=0)
    assert torch.isclose(logs["actor/loss"], -q.mean(), atol=1e-6)
    plain = learning.online_actor_update(agent, batch, opt, alpha=torch.tensor(0.0))
    assert not torch.isclose(plain["actor/loss"], logs["actor/loss"])


def _validate_pixels(encoder_size, augmenter, **settings):
    torch.manual_seed(0)
    agent = Agent(1, DrQPixelEncoder(3, emb_dim=8, image_key="image", image_size=encoder_size),
                  hidden_size=8)  # fmt: skip
    env = gym.wrappers.TimeLimit(PixelEnv(), 12)
    cfg = TrainConfig(random_warmup_steps=0, augmenter=augmenter, **settings)
    state = torch.get_rng_state()
    try:
        validate_config(cfg, agent, ReplayBuffer(100, verbose=False), env, copy.deepcopy(env))
    finally:
        assert torch.equal(state, torch.get_rng_state())  # the probe draws leave no trace


def test_a_rad_crop_the_encoder_cannot_read_fails_before_training():
    rad = AugmentationSequence([RadAug(crop=1)], shared_draw=False)  # 16 -> 15
    with pytest.raises(ConfigError, match=r"(?s)cannot read.*15, 15.*DrQPixelEncoder.image_size"
                                          r".*RadAug.crop.*--image_size"):  # fmt: skip
        _validate_pixels(16, rad)
    _validate_pixels(15, rad)  # built for the crops: fine


def test_the_encoder_names_rads_crop_for_too_small_images():
    with pytest.raises(ValueError, match=r"(?s)12x12 are smaller.*RadAug.crop.*--image_size"):
        DrQPixelEncoder(3, image_key="image", image_size=16)(
            {"image": torch.zeros(1, 3, 12, 12, dtype=torch.uint8)}
        )


class PairOnly(FakeShift):
    """An augmenter that only takes (obs, next_obs)."""

    def __call__(self, obs, next_obs):
        return super().__call__(obs, next_obs)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"augmenter": FakeShift(), "aug_target_samples": 2.5}, r"aug_target_samples = 2.5"),
        ({"augmenter": PairOnly(), "aug_critic_samples": 2},
         r"aug_critic_samples = 2: DrQ's extra augmentations call augmenter\(obs\)"),
        ({"augmenter": AugmentationSequence([Drqv2Aug()], generator=torch.Generator())},
         r"own torch.Generator.*Fix: leave its generator = None"),
    ],
)  # fmt: skip
def test_more_bad_augmentation_settings_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        _validate(**settings)


def test_pair_only_augmenters_pass_without_drq_samples_and_aug_mix_0_warns():
    _validate(augmenter=PairOnly())
    env = make_gym_env("Pendulum-v1")
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    cfg = TrainConfig(random_warmup_steps=0, augmenter=FakeShift(), aug_mix=0.0)
    with pytest.warns(ConfigWarning, match=r"aug_mix = 0: .*buys nothing"):
        validate_config(cfg, agent, ReplayBuffer(100, verbose=False), env, copy.deepcopy(env))


def test_actor_update_noise_warns_for_stochastic_actors():
    env = make_gym_env("Pendulum-v1")
    cfg = TrainConfig(random_warmup_steps=0, actor_update_noise=True)
    with pytest.warns(ConfigWarning, match=r"actor_update_noise = True: it has no effect"):
        validate_config(cfg, Agent(1, nets.FlatEncoder(3), hidden_size=8),
                        ReplayBuffer(100, verbose=False), env, copy.deepcopy(env))  # fmt: skip


def test_per_network_trunks_train_by_their_own_losses_and_the_critics_is_averaged():
    """The papers' layout (DrQ-v2's trunks): the critic step moves the encoder and the critic's
    trunk and Polyak-averages the target trunk; the actor step moves only the actor's trunk."""
    import functools

    from super_sac.nets.mlps import ContinuousCritic, ContinuousStochasticActor

    trainer = _pixel_trainer(
        "/tmp/unused", 4, augmenter=FakeShift(), save_to_disk=False, log_to_disk=False,
        mlp_tau=0.25, target_delay=1,
        agent_kwargs={
            "actor_network_cls": functools.partial(ContinuousStochasticActor, trunk_dim=6),
            "critic_network_cls": functools.partial(ContinuousCritic, trunk_dim=6),
        },
    )  # fmt: skip
    torch.manual_seed(2)
    trainer.collect(20)
    learner, batch = trainer.learner, trainer._sample()
    agent = learner.agent

    def snap(module):
        return [p.detach().clone() for p in module.parameters()]

    enc, actor_trunk = snap(agent.encoder), snap(agent.actor.trunk)
    critic_trunk, target_trunk = snap(agent.critic.trunk), snap(learner.target_agent.critic.trunk)
    learner.critic_step(batch, learner.alpha, 0.0)
    moved = [not torch.equal(a, b) for a, b in zip(enc, snap(agent.encoder))]
    assert any(moved)
    assert all(torch.equal(a, b) for a, b in zip(actor_trunk, snap(agent.actor.trunk)))
    new_trunk = snap(agent.critic.trunk)
    assert any(not torch.equal(a, b) for a, b in zip(critic_trunk, new_trunk))
    for old, new, target in zip(target_trunk, new_trunk, snap(learner.target_agent.critic.trunk)):
        assert torch.allclose(target, 0.75 * old + 0.25 * new, atol=1e-6)
    enc, critic_trunk = snap(agent.encoder), snap(agent.critic.trunk)
    learner.pg_actor_step(batch, learner.alpha)
    assert any(not torch.equal(a, b) for a, b in zip(actor_trunk, snap(agent.actor.trunk)))
    assert all(torch.equal(a, b) for a, b in zip(enc, snap(agent.encoder)))
    assert all(torch.equal(a, b) for a, b in zip(critic_trunk, snap(agent.critic.trunk)))


def test_next_action_encoder_takes_two_values_and_only_single_continuous_agents():
    env = make_gym_env("Pendulum-v1")
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    buffer = ReplayBuffer(100, verbose=False)
    validate_config(TrainConfig(random_warmup_steps=0, next_action_encoder="online"),
                    agent, buffer, env, copy.deepcopy(env))  # fmt: skip
    with pytest.raises(ConfigError, match=r"next_action_encoder = 'onlin': must be \"target\""):
        validate_config(TrainConfig(random_warmup_steps=0, next_action_encoder="onlin"),
                        agent, buffer, env, copy.deepcopy(env))  # fmt: skip
    ensemble = Agent(1, nets.FlatEncoder(3), hidden_size=8, ensemble_size=2)
    with pytest.raises(ConfigError, match=r"this agent is ensemble_size = 2"):
        validate_config(TrainConfig(random_warmup_steps=0, next_action_encoder="online"),
                        ensemble, buffer, env, copy.deepcopy(env))  # fmt: skip
