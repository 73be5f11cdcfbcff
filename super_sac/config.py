"""The training loop's settings and their gin configuration.

:class:`TrainConfig` holds every setting of :func:`super_sac.main.super_sac`, one typed field each,
with a one-line comment stating its meaning; :func:`settings_reference` turns those comments into
the Markdown reference in ``docs/settings.md`` (``python -m super_sac.config`` prints it).
:func:`parse_gin` parses config files and bindings with errors that say how to fix them.

This module imports nothing else from super_sac, so every other module may import it.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import logging
import os
import re
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import gin


class GinConfigError(ValueError):
    """A gin file or binding that does not match the library's configurables."""


def _registered() -> dict[str, object]:
    return dict(gin.config._REGISTRY.items())


def _suggest_configurable(selector: str) -> str:
    names = {full.split(".")[-1]: full for full in _registered()}
    close = difflib.get_close_matches(selector.split(".")[-1], list(names), n=3, cutoff=0.6)
    if close:
        return " Did you mean " + ", ".join(repr(names[c]) for c in close) + "?"
    return (
        " Configurables are registered when their module is imported: check the spelling, "
        "or add an `import` line for your own module at the top of the gin file."
    )


def _suggest_parameter(selector: str, param: str) -> str:
    match = gin.config._REGISTRY.get_match(selector)
    if match is None:
        return ""
    try:
        params = list(inspect.signature(match.wrapped).parameters)
    except (TypeError, ValueError):
        return ""
    close = difflib.get_close_matches(param, params, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return hint + f" Its parameters are: {', '.join(p for p in params if p != 'self')}."


def explain_gin_error(err: Exception) -> str:
    """Add a 'did you mean' hint to gin's message for an unknown name."""
    msg = str(err)
    m = re.search(r"No configurable matching (?:reference )?'@?([\w.]+)", msg)
    if m:
        return msg + "\n" + _suggest_configurable(m.group(1)).lstrip()
    m = re.search(r"Configurable '([\w.]+)' doesn't have a parameter named '(\w+)'", msg)
    if m:
        return msg + "\n" + _suggest_parameter(m.group(1), m.group(2)).lstrip()
    return msg


def parse_gin(
    config_files: Sequence[str | os.PathLike] = (),
    bindings: Sequence[str] = (),
    search_dirs: Sequence[str | os.PathLike] = (),
) -> None:
    """Parse gin files and bindings. ``include`` lines (at any depth) resolve under the
    top-level files' folders first, then ``search_dirs``, then the working directory.

    :param config_files: gin files; a bare name is looked up in ``search_dirs`` too.
    :param bindings: extra bindings such as ``"super_sac.batch_size = 512"`` (applied last).
    :param search_dirs: folders searched for config files and includes.
    :raises GinConfigError: for an unknown configurable or parameter, with suggestions.
    :raises FileNotFoundError: for a config file that exists nowhere it was looked for.
    """
    resolved = [str(_locate(Path(file), search_dirs)) for file in config_files]
    # Includes resolve through gin's search path: put each file's folder and the search dirs
    # first for the duration of the parse. Gin logs "ERROR:root:Path not found" for every prefix
    # that misses on the way to the one that holds the file: those lines are dropped (a file
    # found nowhere still raises).
    folders = [str(Path(f).parent) for f in resolved] + [
        str(Path(d).resolve()) for d in search_dirs
    ]
    prefixes = gin.config._LOCATION_PREFIXES
    saved = list(prefixes)
    prefixes[:] = list(dict.fromkeys(folders + saved))
    root = logging.getLogger()
    root.addFilter(_drop_gin_search_misses)
    try:
        with gin.unlock_config():
            gin.parse_config_files_and_bindings(resolved, list(bindings), finalize_config=False)
    except ValueError as err:
        raise GinConfigError(explain_gin_error(err)) from err
    finally:
        prefixes[:] = saved
        root.removeFilter(_drop_gin_search_misses)


def _drop_gin_search_misses(record: logging.LogRecord) -> bool:
    """False for gin's "Path not found" log line of an include search prefix that misses."""
    return not str(record.msg).startswith("Path not found:")


def _locate(path: Path, search_dirs: Sequence[str | os.PathLike]) -> Path:
    candidates = [path] + ([] if path.is_absolute() else [Path(d) / path for d in search_dirs])
    for candidate in candidates:
        if candidate.exists():
            return candidate.resolve()
    raise FileNotFoundError(
        f"gin config {path} not found; looked in {[str(c) for c in candidates]}"
    )


# ---------------------------------------------------------------------------- the settings

CriticReduction = Literal["min", "mean", "first"]
BackupWeightType = Literal["sunrise", "softmax"]
AdvantageFilter = Literal["binary", "exp", "none"]
LoggingMethod = Literal["tensorboard", "wandb", "none"]
MatmulPrecision = Literal["highest", "high", "medium"]


@dataclasses.dataclass(kw_only=True)
class TrainConfig:
    """Every setting of :func:`super_sac.main.super_sac`: same names and defaults, bound in gin
    as ``super_sac.<name> = <value>``.

    Each field's meaning is the ``#:`` comment above it and each group starts with a
    ``# --- title ---`` comment; :func:`settings_reference` reads both, so keep that layout.
    :func:`super_sac.validation.validate_config` checks every value against its annotation
    before training.
    """

    # --- Schedule: the phases and the updates in each step ---
    #: phase 1: behavioral cloning (squared error if deterministic); targets are re-copied after it
    bc_warmup_steps: int = 0
    #: phase 2: offline steps of critic and AFBC actor updates on the buffer's data, no env steps
    num_steps_offline: int = 0
    #: phase 3: online steps; each collects `transitions_per_online_step` transitions, then learns
    num_steps_online: int = 1_000_000
    #: the first transitions use uniform random actions; no update runs before they are collected
    random_warmup_steps: int = 1_000
    #: env transitions per online step (a multiple of the parallel envs); sets the replay ratio
    transitions_per_online_step: int = 1
    #: critic updates per offline or online step (REDQ's update-to-data ratio G)
    critic_updates_per_step: int = 1
    #: policy-gradient actor updates per online step, each followed by an alpha update
    pg_actor_updates_per_step: int = 1
    #: AFBC actor updates per offline step (and per online step with `use_afbc_update_online`)
    afbc_actor_updates_per_step: int = 1
    #: the actor updates on every this-many-th step of updates (TD3's d = 2)
    actor_delay: int = 1
    #: run the policy-gradient actor update (SAC, TD3, DDPG) in the online phase
    use_pg_update_online: bool = True
    #: also run AFBC actor updates in the online phase (AWAC-style fine-tuning; Nair et al. 2020)
    use_afbc_update_online: bool = False

    # --- Optimization ---
    #: transitions per update
    batch_size: int = 256
    #: prioritized replay: beta moves linearly to this over each phase (Schaul 2016: 1); None: fixed
    per_beta_final: float | None = 1.0
    #: a step's first actor update reuses the last critic batch instead of sampling a new one
    reuse_replay_dicts: bool = True
    #: Adam learning rate of the actor
    actor_lr: float = 3e-4
    #: Adam learning rate of the critics
    critic_lr: float = 3e-4
    #: Adam learning rate of the encoder (a second parameter group of the critics' optimizer)
    encoder_lr: float = 3e-4
    #: largest gradient norm of the actor's parameters; None: no clipping
    actor_clip: float | None = None
    #: largest gradient norm of the critics' parameters; None: no clipping
    critic_clip: float | None = None
    #: largest gradient norm of the encoder's parameters; None: no clipping
    encoder_clip: float | None = None
    #: L2 coefficient of the actor's parameters (Adam's `weight_decay`)
    actor_l2: float = 0.0
    #: L2 coefficient of the critics' parameters (Adam's `weight_decay`)
    critic_l2: float = 0.0
    #: L2 coefficient of the encoder's parameters (Adam's `weight_decay`)
    encoder_l2: float = 0.0

    # --- Exploration and entropy ---
    #: initial entropy coefficient alpha; 0: max-entropy off (`alpha_lr = 0`) or tuned from 1e-15
    init_alpha: float = 1.0
    #: learning rate of log(alpha) (0: fixed); tuned after each PG actor update, else once per step
    alpha_lr: float = 3e-4
    #: Adam's (beta1, beta2) for log(alpha): SAC's (Adam's defaults); the original used (0.5, 0.999)
    alpha_betas: tuple[float, float] = (0.9, 0.999)
    #: target entropy: `-|A| * target_entropy_mul` (continuous), `0.98 log|A| * target_entropy_mul`
    target_entropy_mul: float = 1.0
    #: add Gaussian noise to the policy's sample or deterministic action; discrete: eps-greedy
    use_exploration_process: bool = False
    #: exploration noise std (discrete: epsilon) at the start of the schedule
    exploration_param_init: float = 0.1
    #: exploration noise std (discrete: epsilon) at the end of the schedule
    exploration_param_final: float = 0.1
    #: env transitions over which the noise std moves linearly from its initial to its final value
    exploration_param_anneal: int = 1

    # --- Targets and TD learning ---
    #: discount factor
    gamma: float = 0.99
    #: n-step TD targets, bootstrapped with discount `gamma ** k`
    n_step: int = 1
    #: next actions come from a target actor (TD3, DDPG) instead of the online actor (SAC)
    use_target_actor: bool = False
    #: TD3's target policy smoothing std; None: the exploration noise's current std, 0: no noise
    target_noise_std: float | None = None
    #: clip c of the target smoothing noise (TD3's c = 0.5); None: no clip
    exploration_update_clip: float | None = 0.5
    #: DrQ-v2: deterministic actor loss at mu(s) + clipped noise of the current exploration std
    actor_update_noise: bool = False
    #: encoder of s' for the TD target's next action: "target", or "online" (DrQ, RAD, SAC-AE)
    next_action_encoder: str = "target"
    #: Polyak rate of the target actor and critic networks
    mlp_tau: float = 0.005
    #: Polyak rate of the target encoder
    encoder_tau: float = 0.01
    #: critic updates between target-network updates (TD3: 2)
    target_delay: int = 1
    #: bootstrap through a `terminated` at exactly `max_episode_steps` (time limits as terminations)
    infinite_bootstrap: bool = False
    #: never stop bootstrapping, whatever ends an episode
    ignore_all_dones: bool = False
    #: store collected rewards clipped to [-c, c] (DQN's Atari: 1; datasets unclipped); None: off
    reward_clip: float | None = None
    #: training and evaluation episodes end (truncated) at this step; None: the env's own limit
    max_episode_steps: int | None = None
    #: with `Agent.auto_rescale_targets`: keep critic outputs when PopArt statistics move ("POP")
    pop: bool = False
    #: PopArt's step size beta, bias-corrected as `beta / (1 - (1 - beta)^t)` at update t
    popart_beta: float = 1e-4

    # --- Ensembles (REDQ, SUNRISE) ---
    #: size of the random critic subset whose minimum is the TD target (REDQ's M; 2 of 2: double-Q)
    target_critic_ensemble_n: int = 2
    #: how the actor's loss combines critics: "min" (SAC), "mean" (REDQ), "first" (TD3's Q1)
    actor_q_reduction: CriticReduction = "min"
    #: SUNRISE's weighted Bellman backup temperature T (Lee et al. 2021); None or 0: unweighted
    weighted_bellman_temp: float | None = None
    #: backup weights: "sunrise" `sigmoid(-std T) + 0.5`, "softmax" `B softmax(-std T)`, None: off
    weight_type: BackupWeightType | None = "sunrise"
    #: SUNRISE's beta: probability that a member trains on a stored transition (1: on every one)
    bootstrap_mask_prob: float = 1.0

    # --- Offline learning: advantage-filtered behavioral cloning (AFBC) ---
    #: "binary" `1[A >= 0]` (CRR), "exp" `min(exp(A / T), afbc_max_weight)` (AWAC), "none" (BC)
    afbc_filter: AdvantageFilter = "binary"
    #: temperature T of the "exp" filter
    afbc_temperature: float = 1.0
    #: largest weight of the "exp" filter
    afbc_max_weight: float = 20.0
    #: policy samples behind the "mean"/"max" estimate of V(s) (`Agent.adv_method`)
    afbc_adv_samples: int = 4
    #: Q in the advantage `A = Q(s, a) - V(s)`: "min" over the critics (the original's) or "mean"
    afbc_critic_reduction: Literal["min", "mean"] = "min"
    #: draw AFBC batches with priority `(max(A, 0) + 1e-4)^0.6`, re-scored on every critic batch
    afbc_per: bool = False
    #: AFBC's actor loss trains the encoder too, as in BC; False: only the critic's (the original's)
    afbc_update_encoder: bool = False

    # --- Representation learning: DR3 and Markov state abstraction ---
    #: weight of DR3's critic-feature penalty `mean phi(s, a) . phi(s', a')` (Kumar et al. 2021)
    dr3_coeff: float = 0.0
    #: DR3's s' through the online encoder with gradient (the paper); False: target encoder's
    dr3_online_next: bool = False
    #: log `critic/feature_dot` also when `dr3_coeff = 0` (one more critic forward per update)
    log_feature_dot: bool = False
    #: Markov state abstraction (Allen et al. 2021): weight of the inverse model's NLL of a (z, z')
    inverse_markov_coeff: float = 0.0
    #: Markov state abstraction: weight of the logistic loss, real (z, z') vs. z' shuffled in batch
    contrastive_markov_coeff: float = 0.0
    #: Markov state abstraction: weight of `mean relu(norm(z' - z) / sqrt(d) - max_dist)^2`
    smoothness_markov_coeff: float = 0.0
    #: the smoothness penalty's max_dist: consecutive embeddings closer than this are not penalised
    smoothness_markov_max_dist: float = 0.1
    #: Markov abstraction updates (encoder + heads, lr encoder_lr) per offline/online step; 0: off
    markov_abstraction_updates_per_step: int = 0

    # --- Data augmentation (DrQ, DrQ-v2, RAD) ---
    #: augmenter of every sampled batch's obs/next_obs, e.g. an `AugmentationSequence`; None: none
    augmenter: Any = None
    #: fraction of each batch whose obs/next_obs are augmented (the first rows); None: all of it
    aug_mix: float | None = None
    #: weight of the encoder invariance `||phi(aug(s)) - sg(phi(s))||` added to the critic loss
    encoder_lambda: float = 0.0
    #: weight of `(log pi(a|aug) - sg log pi(a|s))^2` (deterministic: `||mu(aug) - sg mu(s)||^2`)
    actor_lambda: float = 0.0
    #: DrQ's K: TD target averaged over this many independent augmentations of next_obs
    aug_target_samples: int = 1
    #: DrQ's M: critic loss averaged over this many independent augmentations of obs
    aug_critic_samples: int = 1

    # --- Evaluation, logging and saving ---
    #: evaluate the deterministic policy every this many steps of each phase (and at its end)
    eval_interval: int = 5_000
    #: episodes per evaluation; 0: no evaluation
    eval_episodes: int = 10
    #: render the evaluation episodes
    render: bool = False
    #: video of the first episode of every k-th evaluation (`<run_dir>/videos`, the logger); 0: none
    video_interval: int = 0
    #: metric logger: "tensorboard", "wandb" or "none"
    logging_method: LoggingMethod = "tensorboard"
    #: wandb account; None: `$SSAC_WANDB_ACCOUNT`
    wandb_entity: str | None = None
    #: wandb project; None: `$SSAC_WANDB_PROJECT`
    wandb_project: str | None = None
    #: folder of the run directories; None: `$SSAC_SAVE`, else `./saves`
    base_save_path: str | os.PathLike[str] | None = None
    #: run name: the run directory is `<base_save_path>/<name>_<i>` for the first free i
    name: str = "ssac_run"
    #: the exact run directory (created if missing, must hold no run yet); None: `<name>_<i>`
    run_dir: str | os.PathLike[str] | None = None
    #: write weights and checkpoints to the run directory
    save_to_disk: bool = True
    #: save the agent's weights every this many steps
    save_interval: int = 10_000
    #: keep the best evaluation's weights in `<run_dir>/best`: True (mean return) or a metric name
    save_best: bool | str = False
    #: write metrics with `logging_method`
    log_to_disk: bool = True
    #: log metrics every this many steps (the only time they are read from the device)
    log_interval: int = 1_000
    #: 0: print nothing (buffer included); above: settings, progress bar, summary
    verbosity: int = 1
    #: write the whole training state atomically every this many steps of each phase and at the end
    checkpoint_interval: int = 10_000
    #: number of newest checkpoints kept
    keep_checkpoints: int = 2

    # --- Run control ---
    #: seeds Python, numpy, torch, envs and replay sampling; call set_seed before building the Agent
    seed: int | None = None
    #: a run directory: continue from its newest intact checkpoint; True: the newest run `name`
    resume: bool | str | os.PathLike[str] = False
    #: `torch.compile` the networks of the agent and its target copy; for GPUs (slower on CPUs)
    compile: bool = False
    #: float32 matmul precision for the run: "highest" (exact), "high" (TF32), "medium" (bfloat16)
    matmul_precision: MatmulPrecision = "highest"
    #: free-form facts stored in `hparams.json` (the training scripts store their command line)
    run_info: dict[str, Any] | None = None


def setting_hints() -> dict[str, Any]:
    """Each setting's annotation, resolved to a typing object (``int | None``, ``Literal[...]``)."""
    return typing.get_type_hints(TrainConfig)


@dataclasses.dataclass(frozen=True)
class SettingDoc:
    """A setting as documented: its group, type, default and the meaning from its comment."""

    name: str
    group: str
    type: Any
    default: Any
    meaning: str


_GROUP = re.compile(r"^\s*# --- (?P<title>.+?) ---$")
_MEANING = re.compile(r"^\s*#: ?(?P<text>.*)$")
_FIELD = re.compile(r"^\s*(?P<name>\w+)\s*:")


def setting_docs() -> list[SettingDoc]:
    """The settings in source order, read from :class:`TrainConfig`'s comments.

    :raises ValueError: when a field has no ``#:`` comment or stands before the first group.
    """
    hints = setting_hints()
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    group, meaning, docs = None, [], []
    for line in inspect.getsource(TrainConfig).splitlines():
        if m := _GROUP.match(line):
            group = m["title"]
        elif m := _MEANING.match(line):
            meaning.append(m["text"].strip())
        elif (m := _FIELD.match(line)) and m["name"] in fields:
            if group is None or not meaning:
                raise ValueError(f"TrainConfig.{m['name']} needs a group and a '#:' comment")
            field = fields[m["name"]]
            docs.append(
                SettingDoc(field.name, group, hints[field.name], field.default, " ".join(meaning))
            )
            meaning = []
        elif line.strip() and not line.lstrip().startswith("#"):
            meaning = []  # a comment belongs to the field right below it only
    return docs


def format_type(tp: Any) -> str:
    """A short readable form of an annotation: ``int | None``, ``"min" | "mean"``, ``path``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return "any"
    if tp is type(None):
        return "None"
    if origin is Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(format_type(a) for a in args)
    if origin is os.PathLike or tp is os.PathLike:
        return "path"
    if origin is not None:
        return getattr(origin, "__name__", str(origin))
    return getattr(tp, "__name__", str(tp))


def format_value(value: Any) -> str:
    """A value as it is written in a gin file (``1_000_000``, ``"tensorboard"``, ``None``)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return f"{value:_}"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def settings_reference() -> str:
    """The Markdown reference of the loop's settings, one table per group (``docs/settings.md``)."""
    lines = [
        "# Settings of the training loop",
        "",
        "<!-- Generated from super_sac/config.py (TrainConfig) by `python -m super_sac.config`;",
        "     edit the comments there and regenerate: tests/test_config.py checks this file. -->",
        "",
        "Every setting of `super_sac.main.super_sac` is a field of `super_sac.config.TrainConfig`",
        "and a gin binding `super_sac.<name> = <value>`. Values are checked against the types",
        "below before training starts (an integer is accepted where a float is expected).",
    ]
    group = None
    for doc in setting_docs():
        if doc.group != group:
            group = doc.group
            lines += ["", f"## {group}", "", "| name | type | default | meaning |"]
            lines.append("| --- | --- | --- | --- |")
        cells = (
            f"`{doc.name}`",
            f"`{format_type(doc.type)}`",
            f"`{format_value(doc.default)}`",
            doc.meaning,
        )
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    # Use the package's module, not this __main__ copy, so the classes are the library's own.
    from super_sac.config import settings_reference as _reference

    print(_reference(), end="")
