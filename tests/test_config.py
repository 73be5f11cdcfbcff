"""TrainConfig: it agrees with super_sac()'s gin parameters, its values are type-checked before
training, and docs/settings.md is generated from it."""

import ast
import dataclasses
import inspect
import logging
import subprocess
import sys
import typing
from pathlib import Path

import gin
import numpy as np
import pytest

import super_sac
from super_sac import Agent, ReplayBuffer, adv_estimator, config, learning_utils, loggers, nets
from super_sac.config import TrainConfig, parse_gin, settings_reference
from super_sac.utils import MATMUL_PRECISIONS
from super_sac.validation import ConfigError, check_setting_types, describe_type, value_matches
from super_sac.wrappers import make_gym_env

ROOT = Path(__file__).resolve().parents[1]
OBJECTS = ("agent", "buffer", "train_env", "test_env")


def _signature_settings() -> dict[str, inspect.Parameter]:
    params = inspect.signature(super_sac.main.super_sac).parameters
    return {name: p for name, p in params.items() if name not in OBJECTS}


# ----------------------------------------------------------------------------- one source


def test_fields_match_the_gin_parameters_of_super_sac():
    settings = _signature_settings()
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    missing, extra = set(settings) - set(fields), set(fields) - set(settings)
    assert not missing, f"super_sac() settings missing from TrainConfig: {sorted(missing)}"
    assert not extra, f"TrainConfig fields that super_sac() does not take: {sorted(extra)}"
    wrong = {
        name: (settings[name].default, field.default)
        for name, field in fields.items()
        if settings[name].default != field.default
        or type(settings[name].default) is not type(field.default)
    }
    assert not wrong, f"defaults differ (super_sac(), TrainConfig): {wrong}"
    # gin sees exactly these parameters
    registered = gin.config._REGISTRY.get_match("super_sac.main.super_sac")
    gin_params = set(inspect.signature(registered.wrapped).parameters) - set(OBJECTS)
    assert gin_params == set(fields)


def test_the_objects_have_no_defaults_and_every_field_has_one():
    params = inspect.signature(super_sac.main.super_sac).parameters
    assert all(params[name].default is inspect.Parameter.empty for name in OBJECTS)
    assert all(f.default is not dataclasses.MISSING for f in dataclasses.fields(TrainConfig))


def test_literal_choices_are_the_values_the_code_accepts():
    hints = typing.get_type_hints(TrainConfig)
    expected = {
        "actor_q_reduction": learning_utils.CRITIC_REDUCTIONS,
        "weight_type": learning_utils.BACKUP_WEIGHT_TYPES,
        "afbc_filter": adv_estimator.ADV_FILTERS,
        "logging_method": loggers.LOGGING_METHODS,
        "matmul_precision": MATMUL_PRECISIONS,
    }
    for name, values in expected.items():
        literals = [a for a in typing.get_args(hints[name]) if a is not type(None)]
        if typing.get_origin(hints[name]) is typing.Literal:
            literals = [hints[name]]
        (literal,) = literals
        assert typing.get_args(literal) == values, name


def _imports(module: str) -> set[str]:
    """The modules that ``super_sac.<module>`` imports (over every file of a package)."""
    path = ROOT / "super_sac" / module
    files = sorted(path.glob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    assert files, f"no source for super_sac.{module}"
    names = set()
    for node in (n for f in files for n in ast.walk(ast.parse(f.read_text()))):
        if isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_config_imports_no_other_module_and_validation_not_the_loop():
    assert {n for n in _imports("config") if n.startswith("super_sac")} <= {"super_sac.config"}
    assert not {"super_sac.main", "super_sac.trainer"} & _imports("validation")


# ----------------------------------------------------------------------------- documentation


def test_every_setting_has_a_group_and_a_meaning():
    docs = config.setting_docs()
    assert [d.name for d in docs] == [f.name for f in dataclasses.fields(TrainConfig)]
    assert all(d.meaning and len(d.meaning) < 100 for d in docs)
    groups = list(dict.fromkeys(d.group for d in docs))
    assert len(groups) == 10
    assert groups[0].startswith("Schedule") and groups[-1] == "Run control"


def test_docs_settings_md_is_generated_from_the_dataclass():
    text = (ROOT / "docs" / "settings.md").read_text()
    assert text == settings_reference(), (
        "docs/settings.md is stale: regenerate it with "
        "`python -m super_sac.config > docs/settings.md`"
    )
    assert "| `batch_size` | `int` | `256` | transitions per update |" in text
    assert '`"min" \\| "mean" \\| "first"`' in text  # pipes escaped inside table cells


def test_module_entry_point_prints_the_reference():
    out = subprocess.run(
        [sys.executable, "-m", "super_sac.config"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert out.stdout == settings_reference()


def test_format_helpers():
    assert config.format_value(1_000_000) == "1_000_000"
    assert config.format_value("min") == '"min"'
    assert config.format_value(None) == "None"
    hints = typing.get_type_hints(TrainConfig)
    assert config.format_type(hints["seed"]) == "int | None"
    assert config.format_type(hints["resume"]) == "bool | str | path"
    assert config.format_type(hints["run_info"]) == "dict | None"
    assert config.format_type(hints["weight_type"]) == '"sunrise" | "softmax" | None'


# ----------------------------------------------------------------------------- type checks


def test_defaults_pass_the_type_check():
    check_setting_types(TrainConfig())
    defaults = {name: p.default for name, p in _signature_settings().items()}
    check_setting_types(TrainConfig(**defaults))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"batch_size": "abc"},
            "super_sac.batch_size = 'abc': got a str, expected an integer. Fix: bind an "
            "integer, e.g. super_sac.batch_size = 256 \\(the default\\)$",
        ),
        (
            {"batch_size": "256"},
            "super_sac.batch_size = '256': got a str, expected an integer. Fix: bind an "
            "integer, e.g. super_sac.batch_size = 256",
        ),
        (
            {"num_steps_online": 1e6},
            "super_sac.num_steps_online = 1000000.0: got a float, expected an integer. Fix: "
            "bind an integer, e.g. super_sac.num_steps_online = 1000000",
        ),
        ({"batch_size": True}, "batch_size = True: got a bool, expected an integer"),
        (
            {"render": 1},
            "super_sac.render = 1: got an int, expected True or False. Fix: bind True or "
            "False, e.g. super_sac.render = True",
        ),
        ({"gamma": "0.9"}, "gamma = '0.9': got a str, expected a number.*gamma = 0.9"),
        ({"gamma": False}, "gamma = False: got a bool, expected a number"),
        ({"seed": 1.5}, "seed = 1.5: got a float, expected an integer or None"),
        (
            {"actor_clip": "none"},
            "actor_clip = 'none': got a str, expected a number or None.*actor_clip = None",
        ),
        ({"name": None}, "name = None: got None, expected a string"),
        ({"run_info": ["x"]}, "run_info = \\['x'\\]: got a list, expected a dict or None"),
        ({"resume": 3}, "resume = 3: got an int, expected True or False, a string or a path"),
        (
            {"logging_method": "tensorbord"},
            "super_sac.logging_method = 'tensorbord': got a str, expected one of "
            "'tensorboard', 'wandb', 'none'. Fix: bind one of them, e.g. "
            "super_sac.logging_method = 'tensorboard' \\(the closest accepted value\\)",
        ),
        ({"actor_q_reduction": "Mean"}, "actor_q_reduction = 'mean' \\(the closest"),
        (
            {"afbc_filter": "soft"},
            "expected one of 'binary', 'exp', 'none'.*afbc_filter = 'binary' \\(the default\\)",
        ),
        (
            {"weight_type": "sigmoid"},
            "weight_type = 'sigmoid': got a str, expected one of 'sunrise', 'softmax' or None",
        ),
        ({"matmul_precision": "low"}, "matmul_precision = 'low'.*'highest', 'high', 'medium'"),
    ],
)
def test_each_kind_of_type_violation_names_binding_value_type_and_fix(kwargs, message):
    with pytest.raises(ConfigError, match=message) as info:
        check_setting_types(TrainConfig(**kwargs))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"init_alpha": 1},  # an int where a float is expected
        {"alpha_lr": 0, "encoder_lr": 0, "aug_mix": 0},
        {"actor_clip": 40, "critic_clip": None, "encoder_clip": 40.0},
        {"weighted_bellman_temp": 20, "weight_type": "softmax"},
        {"weighted_bellman_temp": None, "weight_type": None},
        {"exploration_update_clip": None, "target_noise_std": 0.2},
        {"max_episode_steps": 1000, "seed": np.int64(3)},
        {"gamma": np.float32(0.9), "render": np.bool_(False)},
        {"resume": True},
        {"resume": "saves/run_0", "base_save_path": "saves"},
        {"resume": Path("saves/run_0"), "base_save_path": Path("saves")},
        {"run_info": {"argv": ["--seed", "0"]}, "wandb_entity": "me"},
        {"augmenter": object()},
    ],
)
def test_valid_values_pass(kwargs):
    check_setting_types(TrainConfig(**kwargs))


ORIGINAL_GIN_BINDINGS = [  # values as the original library's gin files write them
    "super_sac.num_steps_online = 1_000_000",
    "super_sac.num_steps_offline = 0",
    "super_sac.eval_interval = 10_000",
    "super_sac.eval_episodes = 10",
    "super_sac.max_episode_steps = 1000",
    "super_sac.batch_size = 512",
    "super_sac.init_alpha = 0",
    "super_sac.alpha_lr = 1e-4",
    "super_sac.target_entropy_mul = .5",
    "super_sac.actor_clip = 40",
    "super_sac.critic_clip = None",
    "super_sac.encoder_clip = None",
    "super_sac.exploration_update_clip = None",
    "super_sac.exploration_param_init = 1.",
    "super_sac.exploration_param_final = 0",
    "super_sac.exploration_param_anneal = 250_000",
    "super_sac.target_noise_std = None",
    "super_sac.weighted_bellman_temp = None",
    "super_sac.weight_type = None",
    "super_sac.aug_mix = 0",
    "super_sac.augmenter = None",
    "super_sac.encoder_lambda = 0",
    "super_sac.gamma = .99",
    "super_sac.mlp_tau = .005",
    "super_sac.infinite_bootstrap = True",
    "super_sac.use_exploration_process = False",
    "super_sac.reuse_replay_dicts = False",
    "super_sac.verbosity = 1",
]


def test_values_written_as_in_the_original_gin_files_pass():
    parse_gin(bindings=ORIGINAL_GIN_BINDINGS)
    names = [b.split("=")[0].strip().removeprefix("super_sac.") for b in ORIGINAL_GIN_BINDINGS]
    values = {name: gin.query_parameter(f"super_sac.{name}") for name in names}
    assert values["init_alpha"] == 0 and isinstance(values["init_alpha"], int)
    check_setting_types(TrainConfig(**values))


def test_value_matches_and_describe_type():
    assert value_matches(1, float) and not value_matches(True, float)
    assert value_matches(np.int32(2), int) and not value_matches(2.0, int)
    assert not value_matches(0, bool) and value_matches(np.bool_(True), bool)
    assert describe_type(int | None) == "an integer or None"
    assert describe_type(typing.Literal["a", "b"]) == "one of 'a', 'b'"


# ----------------------------------------------------------------------------- in the loop


def _small_run(agent=None, **kwargs):
    env = make_gym_env("Pendulum-v1")
    settings = {
        "num_steps_online": 1,
        "save_to_disk": False,
        "log_to_disk": False,
        "verbosity": 0,
        "random_warmup_steps": 0,
        **kwargs,
    }
    agent = agent or Agent(1, nets.FlatEncoder(3), hidden_size=8)
    test_env = make_gym_env("Pendulum-v1")
    return super_sac.super_sac(agent, ReplayBuffer(100, verbose=False), env, test_env, **settings)


def test_a_gin_binding_of_the_wrong_type_fails_before_training(monkeypatch):
    started = []
    monkeypatch.setattr(super_sac.main.Trainer, "run", lambda self: started.append(1))
    parse_gin(bindings=["super_sac.batch_size = 'abc'"])
    with pytest.raises(ConfigError, match="^super_sac.batch_size = 'abc': got a str"):
        _small_run()
    assert not started


def test_weight_type_none_is_accepted_without_weighted_backups():
    ensemble = Agent(1, nets.FlatEncoder(3), hidden_size=8, ensemble_size=2)
    summary = _small_run(ensemble, weight_type=None, weighted_bellman_temp=None)
    assert summary["critic_updates"] == 1
    with pytest.raises(ConfigError, match="weight_type = None, weighted_bellman_temp = 20"):
        _small_run(ensemble, weight_type=None, weighted_bellman_temp=20)


def test_nested_includes_parse_without_gins_search_miss_errors(caplog):
    # offline/crr.gin includes awac.gin, which includes ../gym/awac.gin, which includes
    # base.gin: gin tries experiments/offline/base.gin first and logs a miss we drop
    with caplog.at_level("INFO"):
        parse_gin(
            [ROOT / "experiments" / "offline" / "crr.gin"],
            search_dirs=[ROOT / "experiments" / "offline", ROOT / "experiments" / "gym"],
        )
    assert gin.query_parameter("super_sac.afbc_filter") == "binary"
    assert gin.query_parameter("super_sac.gamma") == 0.99  # from gym/base.gin
    assert not [r for r in caplog.records if "Path not found" in r.getMessage()]
    # the filter is gone afterwards
    assert config._drop_gin_search_misses not in logging.getLogger().filters
