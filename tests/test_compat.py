"""The original super_sac's meanings of settings, and the settings that would do nothing.

``None`` and ``0`` as the original gin files write them (``Agent.adv_method = None``, update
counts of 0, ``init_alpha = 0`` with tuning), ``max_episode_steps`` cutting training episodes,
``save_best`` naming a metric, exploration noise added to policy samples, and the errors and
warnings (naming the binding and the fix) for settings that would otherwise be ignored.
"""

import copy
import json
import math
import warnings
from pathlib import Path

import gin
import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from test_main import SMALL, _counting_trainer, _stored, _train

from super_sac import Agent, ReplayBuffer, nets, reporting
from super_sac import learning_utils as lu
from super_sac.agent import default_adv_method
from super_sac.collector import Collector
from super_sac.config import TrainConfig, parse_gin
from super_sac.evaluation import EVAL_METRICS, evaluate_agent, save_best_metric
from super_sac.learner import Learner
from super_sac.main import Trainer
from super_sac.nets.mlps import ContinuousDeterministicActor
from super_sac.validation import ConfigError, ConfigWarning, validate_config
from super_sac.validation.settings import _validate_update_counts
from super_sac.wrappers import SimpleGymWrapper, make_gym_env

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _validate(agent=None, train_env=None, **settings):
    """Validate ``settings`` for a small Pendulum run; return the ConfigWarnings' messages."""
    env = make_gym_env("Pendulum-v1")
    agent = agent or Agent(1, nets.FlatEncoder(3), hidden_size=8)
    cfg = TrainConfig(**{"random_warmup_steps": 0, **settings})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        test_env = make_gym_env("Pendulum-v1")
        validate_config(cfg, agent, ReplayBuffer(100, verbose=False), train_env or env, test_env)
    return [str(w.message) for w in caught if issubclass(w.category, ConfigWarning)]


def _deterministic_agent():
    return Agent(
        1, nets.FlatEncoder(3), hidden_size=8, actor_network_cls=ContinuousDeterministicActor
    )


DETERMINISTIC = {"init_alpha": 0.0, "alpha_lr": 0.0, "use_exploration_process": True}


# ----------------------------------------------------------------------------- Agent.adv_method


def test_adv_method_none_is_the_action_types_default():
    assert Agent(1, nets.FlatEncoder(3)).adv_method == "mean"
    assert Agent(2, nets.FlatEncoder(4), discrete=True).adv_method == "indirect"
    assert Agent(1, nets.FlatEncoder(3), adv_method="max").adv_method == "max"
    assert (default_adv_method(True), default_adv_method(False)) == ("indirect", "mean")
    # as the original files bind it
    parse_gin(bindings=["agent.Agent.adv_method = None", "agent.Agent.discrete = True"])
    agent = Agent(2, nets.FlatEncoder(4))
    assert agent.discrete and agent.adv_method == "indirect"
    gin.clear_config()
    with pytest.raises(ValueError, match=r"adv_method must be one of .* or None.*'median'"):
        Agent(1, nets.FlatEncoder(3), adv_method="median")


# ----------------------------------------------------------------------------- update counts


def test_an_update_count_of_zero_is_valid_where_that_update_never_runs():
    assert _validate(afbc_actor_updates_per_step=0) == []  # SAC: no AFBC update
    # AWAC as the original writes it: no policy-gradient update online
    awac = {"use_pg_update_online": False, "use_afbc_update_online": True}
    assert _validate(pg_actor_updates_per_step=0, **awac) == []
    # no online steps: the pg count does not matter
    _validate_update_counts(TrainConfig(num_steps_online=0, pg_actor_updates_per_step=0))


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {"pg_actor_updates_per_step": 0},
            r"super_sac.pg_actor_updates_per_step = 0: use_pg_update_online = True runs .* none "
            r"would run. Fix: set pg_actor_updates_per_step = 1 \(or more\), or "
            r"use_pg_update_online = False",
        ),
        (
            {"afbc_actor_updates_per_step": 0, "use_afbc_update_online": True},
            r"super_sac.afbc_actor_updates_per_step = 0: use_afbc_update_online = True runs .*"
            r"Fix: set afbc_actor_updates_per_step = 1 \(or more\)",
        ),
        (  # named before the empty buffer of the offline phase
            {"afbc_actor_updates_per_step": 0, "num_steps_offline": 10},
            r"afbc_actor_updates_per_step = 0: num_steps_offline = 10 runs",
        ),
        ({"pg_actor_updates_per_step": -1}, r"pg_actor_updates_per_step = -1: must be >= 0"),
    ],
)
def test_a_zero_count_of_an_update_that_runs_is_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        _validate(**settings)


def test_exploration_anneal_of_zero_needs_a_constant_noise_when_exploring():
    # as the original SAC files write it: exploration off, 0 / 0 / 0
    off = {"exploration_param_init": 0, "exploration_param_final": 0}
    assert _validate(exploration_param_anneal=0, **off) == []
    constant = {"exploration_param_init": 0.2, "exploration_param_final": 0.2}
    assert _validate(exploration_param_anneal=0, use_exploration_process=True, **constant) == []
    with pytest.raises(ConfigError, match=r"exploration_param_anneal = 0: .*init = 1.0 .*Fix"):
        _validate(
            exploration_param_anneal=0,
            use_exploration_process=True,
            exploration_param_init=1.0,
            exploration_param_final=0.1,
        )


# ----------------------------------------------------------------------------- init_alpha = 0


def test_init_alpha_zero_with_tuning_starts_at_1e_15_and_warns():
    messages = _validate(init_alpha=0, alpha_lr=1e-4)
    assert len(messages) == 1
    assert messages[0].startswith("super_sac.init_alpha = 0 with alpha_lr = 0.0001: alpha starts")
    assert "1e-15" in messages[0] and "Fix: set init_alpha > 0" in messages[0]
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    learner = Learner(agent, TrainConfig(init_alpha=0, alpha_lr=1e-4))
    assert math.isclose(learner.log_alpha.item(), math.log(1e-15), rel_tol=1e-6)  # -34.539
    assert learner.log_alpha.requires_grad and learner.alpha_optimizer is not None
    # without tuning, alpha stays exactly 0 and nothing is announced
    assert _validate(init_alpha=0, alpha_lr=0) == []
    learner = Learner(agent, TrainConfig(init_alpha=0, alpha_lr=0))
    assert learner.log_alpha.item() == -math.inf and learner.alpha_optimizer is None
    with pytest.raises(ConfigError, match="init_alpha = -0.1: must be >= 0"):
        _validate(init_alpha=-0.1, alpha_lr=0)


# ----------------------------------------------------------------------------- unused settings


def test_aug_mix_without_an_augmenter_warns():
    (message,) = _validate(aug_mix=0.9)
    assert message.startswith("super_sac.aug_mix = 0.9: it has no effect: no augmenter is set")
    assert "Fix: remove the aug_mix binding" in message
    assert "original super_sac's pixel scripts passed their own random shift" in message
    assert _validate() == [] and _validate(aug_mix=0) == []  # unset, or "augment nothing"
    with pytest.raises(ConfigError, match=r"aug_mix = 1.5: .*\[0, 1\]"):
        _validate(aug_mix=1.5)
    with pytest.raises(ConfigError, match="augmenter = <object.*must be callable"):
        _validate(aug_mix=0.9, augmenter=object())


def test_the_augmenter_bindings_the_messages_suggest_build_a_random_shift():
    import gin

    from super_sac.augmentations import AugmentationSequence, Drqv2Aug
    from super_sac.config import parse_gin
    from super_sac.validation import AUGMENTER_EXAMPLE

    bindings = AUGMENTER_EXAMPLE.split(" with ")
    gin.clear_config()
    try:
        parse_gin([], bindings)
        augmenter = gin.query_parameter("super_sac.augmenter").scoped_configurable_fn()
    finally:
        gin.clear_config()
    assert isinstance(augmenter, AugmentationSequence)
    assert [type(a) for a in augmenter.aug_list] == [Drqv2Aug]
    assert augmenter.shared_draw  # one draw for obs and next_obs, as the original drew


def test_smoothness_max_dist_without_the_smoothness_loss_warns():
    (message,) = _validate(smoothness_markov_max_dist=0.5)
    assert message.startswith("super_sac.smoothness_markov_max_dist = 0.5: it has no effect")
    assert "smoothness_markov_coeff = 0" in message and "Fix:" in message
    assert _validate(smoothness_markov_max_dist=0.1) == []  # the default


def test_target_noise_needs_a_deterministic_actor():
    with pytest.raises(ConfigError, match=r"target_noise_std = 0.2: .*stochastic.*Fix: set "):
        _validate(target_noise_std=0.2)
    assert _validate(target_noise_std=None) == [] and _validate(target_noise_std=0.0) == []
    assert _validate(_deterministic_agent(), target_noise_std=0.2, **DETERMINISTIC) == []
    with pytest.raises(ConfigError, match="target_noise_std = -0.1"):
        _validate(_deterministic_agent(), target_noise_std=-0.1, **DETERMINISTIC)


def test_infinite_bootstrap_needs_max_episode_steps():
    with pytest.raises(
        ConfigError, match=r"infinite_bootstrap = True: .*max_episode_steps is None"
    ):
        _validate(infinite_bootstrap=True)
    assert _validate(infinite_bootstrap=True, max_episode_steps=200) == []
    with pytest.raises(ConfigError, match="max_episode_steps = 0"):
        _validate(max_episode_steps=0)


def test_cutting_episodes_of_a_self_resetting_vector_env_is_refused():
    def venv(mode):
        return gym.vector.SyncVectorEnv(
            [lambda: make_gym_env("Pendulum-v1")] * 2, autoreset_mode=mode
        )

    settings = {"transitions_per_online_step": 2}
    same_step = venv(gym.vector.AutoresetMode.SAME_STEP)
    assert _validate(train_env=same_step, **settings) == []  # the envs' own limits
    with pytest.raises(
        ConfigError, match=r"max_episode_steps = 50: .*AutoresetMode.DISABLED.*TimeLimit"
    ):
        _validate(train_env=same_step, max_episode_steps=50, **settings)
    disabled = venv(gym.vector.AutoresetMode.DISABLED)
    assert _validate(train_env=disabled, max_episode_steps=50, **settings) == []


# ----------------------------------------------------------------------------- save_best


def test_save_best_names_a_metric():
    assert save_best_metric(True) == "return_mean" and save_best_metric(False) is None
    assert save_best_metric("eval/mean_return") == "return_mean"  # the original's default
    assert save_best_metric("eval/return_min") == "return_min"
    assert save_best_metric("length_mean") == "length_mean"
    for name in ("return_min", "eval/mean_return", "eval/return_max"):
        assert _validate(save_best=name) == []
    with pytest.raises(
        ConfigError, match=r"save_best = 'best_return'.*'return_mean', 'return_std'"
    ):
        _validate(save_best="best_return")
    (message,) = _validate(save_best=True, save_to_disk=False)
    assert message.startswith("super_sac.save_best = True: it has no effect with save_to_disk")


def test_eval_metrics_are_the_keys_evaluate_agent_returns():
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    result = evaluate_agent(agent, make_gym_env("Pendulum-v1"), 1, max_episode_steps=5)
    assert tuple(result) == EVAL_METRICS and result["length_mean"] == 5.0


def _scripted_evaluations(monkeypatch, results):
    queue = iter(results)

    def fake(*args, **kwargs):
        out = dict.fromkeys(EVAL_METRICS, 0.0)
        out.update(next(queue))
        return out

    monkeypatch.setattr(reporting, "evaluate_agent", fake)


@pytest.mark.parametrize("save_best, best_eval", [("return_min", 2), (True, 3)])
def test_the_best_folder_follows_the_chosen_metric(tmp_path, monkeypatch, save_best, best_eval):
    env = make_gym_env("Pendulum-v1")
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    cfg = TrainConfig(save_best=save_best, logging_method="none", verbosity=0, seed=0)
    trainer = Trainer(agent, ReplayBuffer(100, verbose=False), env, env, cfg)
    trainer.run_dir = tmp_path
    # the mean return improves every time; the worst episode's return is best at evaluation 2
    _scripted_evaluations(
        monkeypatch,
        [
            {"return_mean": 5.0, "return_min": 1.0},
            {"return_mean": 9.0, "return_min": 4.0},
            {"return_mean": 12.0, "return_min": 2.0},
        ],
    )
    name, weight = next(iter(agent.actor.named_parameters()))
    for evaluation in (1, 2, 3):
        with torch.no_grad():
            weight.fill_(float(evaluation))  # marks the weights of this evaluation
        trainer.evaluate()
    saved = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    saved.load(tmp_path / "best")
    assert torch.all(dict(saved.actor.named_parameters())[name] == float(best_eval))
    record = json.loads((tmp_path / "best" / "metric.json").read_text())
    metric = "return_min" if save_best == "return_min" else "return_mean"
    assert record["metric"] == metric
    assert record["value"] == {"return_min": 4.0, "return_mean": 12.0}[metric]
    assert trainer.best_return == 12.0  # the summary's best return is still the mean return's


def test_save_best_with_the_original_metric_name_in_a_run():
    summary = _train(
        "sac.gin",
        steps=150,
        extra=[
            'super_sac.save_best = "eval/mean_return"',
            "super_sac.eval_interval = 50",
            "super_sac.save_to_disk = True",
        ],
    )
    returns = [h["return_mean"] for h in summary["eval_history"]]
    assert len(returns) == 3
    record = json.loads((Path(summary["run_dir"]) / "best" / "metric.json").read_text())
    assert record["metric"] == "return_mean" and record["value"] == max(returns)
    assert record["env_steps"] == 50 * (1 + returns.index(max(returns)))


# ----------------------------------------------------------------------------- max_episode_steps


def test_training_episodes_are_cut_at_max_episode_steps_and_bootstrap():
    trainer = _counting_trainer(max_episode_steps=3)  # the env itself never ends
    trainer.collect(7)
    obs, next_obs, done, _, _ = _stored(trainer.buffer)
    assert obs.tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert next_obs.tolist() == [1, 2, 3, 1, 2, 3, 1]  # the cut transition keeps its final obs
    assert done.tolist() == [0] * 7  # a cut is a truncation: it bootstraps
    assert trainer.episodes == 2 and trainer.collector.episode_len.tolist() == [1]
    # a termination at the cut still stops bootstrapping
    trainer = _counting_trainer(terminate_at=3, max_episode_steps=3)
    trainer.collect(3)
    assert _stored(trainer.buffer)[2].tolist() == [0, 0, 1]


def test_from_config_cuts_at_max_episode_steps_unless_told_otherwise():
    env = SimpleGymWrapper(make_gym_env("Pendulum-v1").unwrapped)
    agent = Agent(1, nets.FlatEncoder(3), hidden_size=8)
    cfg = TrainConfig(max_episode_steps=25)
    kwargs = {"rng": np.random.default_rng(0), "seed": 0}
    buffer = ReplayBuffer(100, verbose=False)
    assert Collector.from_config(env, agent, buffer, cfg, **kwargs).cut_episodes_at == 25
    quickstart_like = Collector.from_config(env, agent, buffer, cfg, cut_episodes_at=None, **kwargs)
    assert quickstart_like.cut_episodes_at is None


def test_the_gym_script_cuts_training_episodes():
    # Pendulum's own limit is 200 steps; SMALL binds max_episode_steps = 50
    assert "super_sac.max_episode_steps = 50" in SMALL
    summary = _train("sac.gin", steps=120)
    assert summary["episodes"] == 2  # ended at steps 50 and 100
    summary = _train(
        "sac.gin",
        steps=60,
        extra=["super_sac.transitions_per_online_step = 2"],
        argv=["--parallel_envs", "2"],
    )
    assert summary["env_steps"] == 120 and summary["episodes"] == 2  # each env cut at 50


# ----------------------------------------------------------------------------- exploration


class _StillEnv(gym.Env):
    """A placeholder env: the tests below only ask the collector for actions."""

    observation_space = spaces.Dict({"obs": spaces.Box(-1.0, 1.0, (4,), np.float32)})
    action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)


def _collector(agent, num_envs=2, std=0.3):
    env = gym.vector.SyncVectorEnv(
        [_StillEnv] * num_envs, autoreset_mode=gym.vector.AutoresetMode.DISABLED
    )
    noise = lu.GaussianExplorationNoise(std, std, 1)
    return Collector(
        env,
        agent,
        ReplayBuffer(10, verbose=False),
        rng=np.random.default_rng(0),
        noise=noise,
        seed=0,
        use_exploration_process=True,
    )


class _Proposals:
    def __init__(self, actions):
        self.actions = actions
        self.mean = torch.zeros_like(actions)

    def sample(self):
        return self.actions


class _ProposingActor(torch.nn.Module):
    """Every member proposes fixed actions; their means are 0."""

    def __init__(self, proposals):
        super().__init__()
        self.proposals = proposals
        self.anchor = torch.nn.Parameter(torch.zeros(1))

    def forward(self, rep):
        return _Proposals(self.proposals)


class _LinearCritic(torch.nn.Module):
    """Q_k(s, a) = c_k * a_0."""

    def __init__(self, c):
        super().__init__()
        self.c = c.view(-1, 1, 1)

    def forward(self, rep, action):
        return self.c * action[:, :1].unsqueeze(0)


def test_exploration_noise_is_added_to_the_ucb_members_sample():
    torch.manual_seed(0)
    agent = Agent(2, nets.FlatEncoder(4), ensemble_size=3, ucb_bonus=10.0, hidden_size=8)
    # the proposals and critics of test_sunrise's UCB test: env 0 takes -0.5, env 1 takes 0.4
    agent.actor = _ProposingActor(
        torch.tensor(
            [[[-0.5, 0.0], [0.4, 0.0]], [[0.1, 0.0], [0.2, 0.0]], [[0.05, 0.0], [-0.1, 0.0]]]
        )
    )
    agent.critic = _LinearCritic(torch.tensor([1.0, 3.0, 1.0, 3.0, 1.0, 3.0]))
    collector = _collector(agent)
    noise = copy.deepcopy(collector.rng).normal(0.0, 0.3, size=(2, 2)).astype(np.float32)
    action = collector.choose_actions({"obs": np.zeros((2, 4), np.float32)})
    expected = np.clip(np.array([[-0.5, 0.0], [0.4, 0.0]], np.float32) + noise, -1.0, 1.0)
    assert np.allclose(action, expected)
    assert not np.allclose(action, np.clip(noise, -1.0, 1.0))  # not the (zero) mean + noise


def test_exploration_noise_is_added_to_a_policy_sample():
    torch.manual_seed(0)
    agent = Agent(2, nets.FlatEncoder(4), hidden_size=8)
    collector = _collector(agent, num_envs=3)
    obs = {"obs": np.random.default_rng(1).uniform(-1, 1, (3, 4)).astype(np.float32)}
    noise = copy.deepcopy(collector.rng).normal(0.0, 0.3, size=(3, 2)).astype(np.float32)
    torch.manual_seed(5)
    action = collector.choose_actions(obs)
    torch.manual_seed(5)
    sample = agent.sample_action(obs, batched=True)
    assert np.allclose(action, np.clip(sample + noise, -1.0, 1.0))
    mean_plus_noise = np.clip(agent.forward(obs, batched=True) + noise, -1.0, 1.0)
    assert np.abs(action - mean_plus_noise).max() > 1e-3


def test_a_deterministic_actor_explores_around_its_action():
    torch.manual_seed(0)
    agent = Agent(
        2, nets.FlatEncoder(4), hidden_size=8, actor_network_cls=ContinuousDeterministicActor
    )
    collector = _collector(agent)
    obs = {"obs": np.ones((2, 4), np.float32)}
    noise = copy.deepcopy(collector.rng).normal(0.0, 0.3, size=(2, 2)).astype(np.float32)
    action = collector.choose_actions(obs)
    assert np.allclose(action, np.clip(agent.forward(obs, batched=True) + noise, -1.0, 1.0))
