"""Checks that run the encoder and the augmenter once on zero observations shaped like the env's."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from super_sac.agent import Agent
from super_sac.augmentations import AugmentationSequence
from super_sac.config import TrainConfig
from super_sac.validation.common import ConfigError, _err, _warn

_PROBE_BATCH = 2


def _zero_observations(obs_space: spaces.Dict, device: torch.device) -> dict[str, torch.Tensor]:
    """A batch of ``_PROBE_BATCH`` all-zero observations of ``obs_space`` as the replay buffer
    hands them out (float64 stored as float32), or ``{}`` when a key has no fixed shape."""
    obs = {}
    for key, space in obs_space.spaces.items():
        if space.shape is None or space.dtype is None:
            return {}
        dtype = np.float32 if space.dtype == np.float64 else space.dtype
        obs[key] = torch.as_tensor(np.zeros((_PROBE_BATCH, *space.shape), dtype), device=device)
    return obs


def _observation_space(env: Any) -> spaces.Space:
    """An env's observation space, per env for a vector env."""
    return getattr(env, "single_observation_space", env.observation_space)


def _env_zero_observations(train_env: Any, device: torch.device) -> dict[str, torch.Tensor]:
    """:func:`_zero_observations` of the training env's (single) observation space; ``{}``
    when it is not a fixed-shape ``Dict`` (the env checks report that)."""
    obs_space = _observation_space(train_env)
    if not isinstance(obs_space, spaces.Dict):
        return {}
    return _zero_observations(obs_space, device)


def _looks_channels_last(shape: tuple[int, ...]) -> bool:
    """An image of shape ``(H, W, C)``: three axes, the last smaller than both others (a
    ``(C, H, W)`` image has its channel axis first; a square one like MinAtar's ``(10, 10,
    10)`` is not judged)."""
    return len(shape) == 3 and shape[2] < min(shape[0], shape[1])


def _channels_last_keys(obs: dict[str, torch.Tensor]) -> list[str]:
    """The keys of a probe batch whose observations look ``(H, W, C)``."""
    return [k for k, v in obs.items() if _looks_channels_last(tuple(v.shape[1:]))]


def _channels_last_problem(keys: list[str]) -> tuple[str, str]:
    """What is wrong with channels-last image keys, and the fix."""
    shown = ", ".join(repr(k) for k in keys)
    return (
        f"the image key(s) {shown} look channels-last (H, W, C), but image encoders and "
        "augmentations read (C, H, W)",
        f"wrap the env with super_sac.wrappers.ChannelsFirstWrapper(env, keys={tuple(keys)!r})",
    )


def _validate_image_scale(agent: Agent, train_env: Any) -> None:
    """A built-in image encoder (``pixel_scale < 1``, made for 8-bit pixels) reading float
    images declared within ``[0, 1]`` would scale them twice, to at most 1/255."""
    encoder = agent.encoder
    scale, key = getattr(encoder, "pixel_scale", None), getattr(encoder, "image_key", None)
    obs_space = _observation_space(train_env)
    if not isinstance(scale, float) or scale >= 1.0 or not isinstance(obs_space, spaces.Dict):
        return
    space = obs_space.spaces.get(key)
    if not isinstance(space, spaces.Box) or not np.issubdtype(space.dtype, np.floating):
        return
    low, high = float(np.min(space.low)), float(np.max(space.high))
    if high <= 1.0:
        uint8 = (
            f"wrap the env with super_sac.wrappers.Uint8Wrapper(env, keys=({key!r},)) (a "
            "quarter of the replay memory), or "
            if low >= 0
            else ""
        )
        raise ConfigError(
            f"the encoder {type(encoder).__name__} multiplies its images by pixel_scale = "
            f"{scale:.6g} (made for uint8 pixels in 0..255), but {key!r} holds floats declared "
            f"in [{low:g}, {high:g}]: they would reach the network within {scale * high:.6g} "
            f"of zero. Fix: {uint8}build the encoder with pixel_scale=1.0"
        )


def _has_lazy_parameters(module: torch.nn.Module) -> bool:
    lazy = (torch.nn.parameter.UninitializedParameter, torch.nn.parameter.UninitializedBuffer)
    return any(isinstance(t, lazy) for t in (*module.parameters(), *module.buffers()))


def _validate_encoder_probe(agent: Agent, train_env: Any) -> None:
    """Run the encoder once on a zero batch of the env's observations before anything is
    allocated, so that an encoder built for other keys or sizes fails here, naming the shapes,
    and not at the first action; its output must be ``(batch, embedding_dim)`` floats, the
    features the actor and critics were built for.

    An encoder with lazy modules (``nn.LazyLinear``) is materialised by this call (the loop's
    target copy cannot be made of uninitialised parameters); it draws its initial weights from
    the global torch RNG, as building the module would. Any other encoder runs as a copy, with
    the RNG left as it was, so the agent is untouched.
    """
    obs = _env_zero_observations(train_env, agent.device)
    if not obs:
        return
    name = type(agent.encoder).__name__
    lazy = _has_lazy_parameters(agent.encoder)
    encoder = agent.encoder if lazy else copy.deepcopy(agent.encoder)
    training = encoder.training
    encoder.eval()  # a probe of zeros must not move running statistics
    devices = [agent.device] if agent.device.type == "cuda" else []
    try:
        with torch.no_grad():
            if lazy:
                out = encoder(obs)
            else:
                with torch.random.fork_rng(devices=devices):
                    out = encoder(obs)
    except Exception as exc:  # any failure of user code, reported with the observations
        layout = {k: f"{tuple(v.shape[1:])} {str(v.dtype).replace('torch.', '')}"
                  for k, v in obs.items()}  # fmt: skip
        detail = str(exc).rstrip(". ")
        hwc = _channels_last_keys(obs)
        if hwc:
            problem, how = _channels_last_problem(hwc)
            fix = f". The {problem}. Fix: {how}"
        elif "Fix:" in detail:  # the encoder's own message says what to do
            fix = ""
        else:
            fix = (". Fix: build the encoder for these keys and shapes (FlatEncoder(dim) takes "
                   "the sum of the keys' flat sizes)")  # fmt: skip
        raise ConfigError(
            f"the encoder {name} cannot read the env's observations {layout} (a batch of "
            f"{_PROBE_BATCH}; float64 arrives as float32): {type(exc).__name__}: {detail}{fix}"
        ) from exc
    finally:
        encoder.train(training)
    expected = (_PROBE_BATCH, agent.encoder.embedding_dim)
    feature_dtype = next(agent.actor.parameters()).dtype
    if not (isinstance(out, torch.Tensor) and out.dtype == feature_dtype):
        got = type(out).__name__ if not isinstance(out, torch.Tensor) else f"{out.dtype} tensor"
        dtype = str(feature_dtype).replace("torch.", "")
        raise ConfigError(
            f"the encoder {name} returns a {got}, but the actor and critics read {dtype} "
            f"features of shape (batch, embedding_dim). Fix: return {dtype} features from "
            f"forward (e.g. end it with .to(torch.{dtype}))"
        )
    if tuple(out.shape) != expected:
        flat = sum(int(np.prod(v.shape[1:])) for v in obs.values())
        raise ConfigError(
            f"the encoder {name} returns features of shape {tuple(out.shape)} for a batch of "
            f"{_PROBE_BATCH}, but its embedding_dim is {expected[1]}, the width the actor and "
            f"critics were built for. Fix: make embedding_dim the width forward returns (a "
            f"FlatEncoder(dim) of these observations needs dim = {flat}, the sum of the keys' "
            "flat sizes)"
        )


def _validate_augmenter_probe(cfg: TrainConfig, agent: Agent, train_env: Any) -> None:
    """Run the augmenter, and the encoder on its output, once on a tiny zero batch before
    training, so that a crop the encoder cannot read (RAD's sizes) fails here and not at the
    first update. The torch RNG and the agent are left as they were."""
    if cfg.augmenter is None:
        return
    obs = _env_zero_observations(train_env, agent.device)
    if not obs:
        return
    _validate_augmented_keys(cfg.augmenter, obs)
    devices = [agent.device] if agent.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        aug_obs = _probe_augmenter_call(cfg, obs)
        _probe_encoder(agent, aug_obs)


def _validate_augmented_keys(augmenter: Any, obs: dict[str, torch.Tensor]) -> None:
    """An :class:`AugmentationSequence` shifts and crops the last two axes of ``(C, H, W)``
    images: refuse channels-last images (it would shift along the colour axis), and warn when
    it finds no image to augment."""
    if not isinstance(augmenter, AugmentationSequence):
        return
    keys = augmenter.keys if augmenter.keys is not None else [
        k for k, v in obs.items() if v.dim() == 4
    ]  # fmt: skip
    hwc = _channels_last_keys({k: obs[k] for k in keys if k in obs})
    if hwc:
        problem, how = _channels_last_problem(hwc)
        raise _err(
            f"augmenter = {augmenter!r}",
            "it would shift and crop the last two axes of images it reads as (C, H, W). The "
            + problem,
            how,
        )
    if not keys:
        _warn(
            f"augmenter = {augmenter!r}",
            f"it has nothing to augment: none of the observation keys {sorted(obs)} holds "
            "(C, H, W) images, so every batch passes through unchanged",
            "remove the augmenter binding (state observations need none; a config written for "
            "pixels binds one, e.g. the DMC script's default drqv2.gin with --from_states: "
            "pass a state config such as --config sac_state.gin)",
        )


def _probe_augmenter_call(cfg: TrainConfig, obs: dict[str, torch.Tensor]) -> dict[str, Any]:
    try:
        aug_obs, _ = cfg.augmenter(obs, {k: v.clone() for k, v in obs.items()})
    except Exception as exc:  # any failure of user code, reported with the binding
        raise _err(
            f"augmenter = {cfg.augmenter!r}",
            f"calling it as augmenter(obs, next_obs) on a zero batch of the env's observations "
            f"failed with {type(exc).__name__}: {exc}",
            "bind an augmenter that takes (obs, next_obs) dicts and returns a pair of dicts",
        ) from exc
    drq_samples = max(cfg.aug_target_samples, cfg.aug_critic_samples)
    if drq_samples > 1:
        try:
            cfg.augmenter(obs)
        except Exception as exc:
            raise _err(
                f"aug_target_samples = {cfg.aug_target_samples}, aug_critic_samples = "
                f"{cfg.aug_critic_samples}",
                f"DrQ's extra augmentations call augmenter(obs) with one dict, which failed "
                f"with {type(exc).__name__}: {exc}",
                "make the augmenter accept one dict (as AugmentationSequence does), or set "
                "aug_target_samples = aug_critic_samples = 1",
            ) from exc
    return aug_obs


def _probe_encoder(agent: Agent, aug_obs: dict[str, Any]) -> None:
    encoder = copy.deepcopy(agent.encoder)  # the agent's own stats stay put
    try:
        encoder(aug_obs)
    except Exception as exc:
        shapes = {k: tuple(v.shape) for k, v in aug_obs.items() if isinstance(v, torch.Tensor)}
        raise ConfigError(
            f"super_sac.augmenter: the encoder {type(agent.encoder).__name__} cannot read the "
            f"augmented observations {shapes}: {type(exc).__name__}: {exc}. Fix: match the "
            "augmentation's output size and the encoder's input size: for RAD's crops build "
            "the encoder for the cropped size (DrQPixelEncoder.image_size = rendered size - "
            "RadAug.crop) and render frames that large (the DMC script's --image_size), or "
            "change RadAug.crop"
        ) from exc
