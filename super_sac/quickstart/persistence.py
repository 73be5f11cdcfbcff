"""Saving and loading quick-start agents: the folder format, the env description, the Hub."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import VectorEnv

from super_sac.quickstart.memory import single_spaces
from super_sac.utils import atomic_write_json, load_torch_file

if TYPE_CHECKING:
    from super_sac.quickstart.sac import SAC

FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
TARGET_FILE = "target_agent.pt"
ALPHA_FILE = "log_alpha.pt"
OPTIMIZERS_FILE = "optimizers.pt"
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_VECTOR_SPEC_KWARGS = ("num_envs", "vectorization_mode", "vector_kwargs", "wrappers")


def env_spec(env: Any) -> EnvSpec | None:
    """The spec that rebuilds one (non-vector) copy of ``env``, if gymnasium knows it."""
    if not isinstance(env, VectorEnv):
        return env.spec
    sub_envs = getattr(env, "envs", None)
    if sub_envs:
        return sub_envs[0].spec
    if env.spec is None:
        return None
    kwargs = {k: v for k, v in env.spec.kwargs.items() if k not in _VECTOR_SPEC_KWARGS}
    return dataclasses.replace(env.spec, kwargs=kwargs)


def spec_json(spec: EnvSpec | None) -> str | None:
    if spec is None:
        return None
    try:
        return spec.to_json()
    except (ValueError, TypeError):  # kwargs that JSON cannot hold
        return None


def space_description(space: spaces.Box) -> dict[str, Any]:
    return {
        "shape": list(space.shape),
        "dtype": str(space.dtype),
        "low": np.asarray(space.low, dtype=np.float64).ravel().tolist(),
        "high": np.asarray(space.high, dtype=np.float64).ravel().tolist(),
    }


def resolve_pretrained(repo_name: str | Path, token: str | None, version: str | None) -> Path:
    """A local folder, or the snapshot of a Hugging Face Hub repository ``namespace/name``."""
    path = Path(repo_name).expanduser()
    if path.is_dir():
        return path
    name = str(repo_name)
    if path.is_file():
        raise FileNotFoundError(
            f"{name!r} is a file; a saved SAC is the folder that holds {CONFIG_FILE} and "
            f"agent.pt. Fix: pass {str(path.parent)!r}"
        )
    if not _HUB_ID.fullmatch(name):
        raise FileNotFoundError(
            f"{name!r} is neither a local folder nor a Hugging Face Hub id (namespace/name). "
            "Fix: check the path (the folder SAC.save wrote)"
        )
    try:
        from huggingface_hub import snapshot_download
    except ImportError as err:
        raise FileNotFoundError(
            f"there is no local folder {name!r} (from {Path.cwd()}); read as a Hugging Face Hub "
            "repository it would need the huggingface_hub package. Fix: check the path, or "
            'pip install "super_sac[hub]" to download from the Hub'
        ) from err
    try:
        return Path(snapshot_download(repo_id=name, revision=version, token=token))
    except Exception as err:  # network, authentication, missing repository or revision
        raise RuntimeError(
            f"could not download {name!r} (revision {version or 'main'}) from the Hugging Face "
            f"Hub: {type(err).__name__}: {err}. Check the id, the revision, the access token and "
            "the network; offline, copy the folder to this machine and pass its path."
        ) from err


def rebuild_env(env_config: dict[str, Any]) -> gym.Env:
    spec_json = env_config.get("spec")
    if spec_json is None:
        raise ValueError(
            "this checkpoint does not record how to build its env (it was not made with "
            "gymnasium.make, or its arguments are not JSON); pass it: "
            "SAC.from_pretrained(path, env=my_env)"
        )
    try:
        return gym.make(EnvSpec.from_json(spec_json))
    except Exception as err:
        raise RuntimeError(
            f"could not rebuild the env {env_config.get('id')!r} with gymnasium.make "
            f"({type(err).__name__}: {err}); import the package that registers it, or pass the "
            "env: SAC.from_pretrained(path, env=my_env)"
        ) from err


def check_env_matches(env: Any, env_config: dict[str, Any]) -> None:
    obs_space, act_space = single_spaces(env)
    saved_obs, saved_act = env_config["observation_space"], env_config["action_space"]
    diffs = []
    if list(obs_space.shape or ()) != saved_obs["shape"]:
        diffs.append(f"observation shape {obs_space.shape} != saved {tuple(saved_obs['shape'])}")
    if not isinstance(act_space, spaces.Box) or list(act_space.shape) != saved_act["shape"]:
        diffs.append(f"action space {act_space} != saved shape {tuple(saved_act['shape'])}")
    else:
        bounds = space_description(act_space)
        if not (
            np.allclose(bounds["low"], saved_act["low"])
            and np.allclose(bounds["high"], saved_act["high"])
        ):
            diffs.append(
                f"action bounds {bounds['low']}..{bounds['high']} != saved "
                f"{saved_act['low']}..{saved_act['high']}"
            )
    if diffs:
        raise ValueError(
            "the env does not match the one the agent was saved with: " + "; ".join(diffs)
        )


def default_run_path(prefix: str) -> Path:
    """``$SSAC_SAVE/<prefix>_<date-time>`` (default ``./saves``, as for gin runs), with ``_<i>``
    added when that folder exists already (two saves within one second keep both)."""
    base = Path(os.environ.get("SSAC_SAVE", "./saves")) / f"{prefix}_{datetime.now():%Y%m%d-%H%M%S}"
    folder, i = base, 1
    while folder.exists():
        folder, i = base.with_name(f"{base.name}_{i}"), i + 1
    return folder


def _as_checked_settings(init: dict[str, Any]) -> dict[str, Any]:
    """The constructor arguments of a save, as the argument checks of later versions take them:
    saves written before those checks could hold counts as floats (``memory_capacity=1e6``,
    which the constructor then truncated) or ``log_every_updates = 0`` (then read as 1)."""
    from super_sac.quickstart.sac import COUNT_SETTINGS

    for name in (*COUNT_SETTINGS, "seed"):
        value = init.get(name)
        if isinstance(value, float) and value.is_integer():
            init[name] = int(value)
    if isinstance(init.get("log_every_updates"), int) and init["log_every_updates"] < 1:
        init["log_every_updates"] = 1
    return init


def _present(file: Path) -> Path:
    """``file``, which a complete save holds (a damaged one is reported where it is read, by
    :func:`super_sac.utils.load_torch_file`)."""
    if not file.is_file():
        raise FileNotFoundError(
            f"{file} is missing; the save is incomplete. Fix: load another save, or save the "
            "agent again"
        )
    return file


class SavingMixin:
    """:class:`~super_sac.quickstart.SAC`'s folder format: ``save``, ``from_pretrained``,
    ``get_param_env`` and ``close`` (kept apart from the training code)."""

    def get_param_env(self) -> dict[str, Any]:
        """A JSON-friendly description of the env and the policy (stored in ``config.json``).

        :return: ``{"env": {"id", "spec", "vector", "num_envs", "observation_space",
            "action_space"}, "policy": {"type", "actor", "hidden_size", "obs_dim", "act_dim",
            "num_critics", "automatic_entropy_tuning", "alpha", "target_entropy"}}``.
        """
        spec = env_spec(self.env)
        vector = isinstance(self.env, VectorEnv)
        return {
            "env": {
                "id": None if spec is None else spec.id,
                "spec": spec_json(spec),
                "vector": vector,
                "num_envs": self.env.num_envs if vector else 1,
                "observation_space": {
                    "shape": list(self.observation_space.shape),
                    "dtype": str(self.observation_space.dtype),
                },
                "action_space": space_description(self.action_space),
            },
            "policy": {
                "type": self.policy_type,
                "actor": type(self.agent.actor).__name__,
                "hidden_size": self.agent.hidden_size,
                "obs_dim": self.obs_dim,
                "act_dim": self.act_dim,
                "num_critics": self.agent.num_critics,
                "automatic_entropy_tuning": self.automatic_entropy_tuning,
                "alpha": self.alpha,
                "target_entropy": self.target_entropy,
            },
        }

    def save(self, path: str | Path | None = None, save_gradients: bool = False) -> Path:
        """Save the agent to a folder.

        The folder holds ``config.json`` (the constructor arguments, :meth:`get_param_env`, the
        counters), ``agent.pt`` (:meth:`super_sac.Agent.save`), ``target_agent.pt``,
        ``log_alpha.pt`` and, with ``save_gradients``, ``optimizers.pt`` (the Adam states of the
        critics, the policy and alpha, and the update counter) so that training can continue
        exactly where it stopped.

        :param path: the folder (created if needed); default ``$SSAC_SAVE/sac_<date-time>``.
        :param save_gradients: include the optimizer states.
        :return: the folder.
        """
        folder = Path(path) if path is not None else default_run_path("sac")
        folder.mkdir(parents=True, exist_ok=True)
        self.agent.save(folder)
        self.target_agent.save(folder / TARGET_FILE)
        torch.save({"log_alpha": self.log_alpha.detach().cpu()}, folder / ALPHA_FILE)
        optimizers = folder / OPTIMIZERS_FILE
        if save_gradients:
            torch.save(self._optimizer_states(), optimizers)
        elif optimizers.exists():
            optimizers.unlink()  # stale states of an earlier save must not be resumed
        atomic_write_json(folder / CONFIG_FILE, self._saved_config(save_gradients))
        return folder

    def _optimizer_states(self) -> dict[str, Any]:
        return {
            "critic": self.critic_optim.state_dict(),
            "policy": self.policy_optim.state_dict(),
            "alpha": None if self.alpha_optim is None else self.alpha_optim.state_dict(),
            "updates": self.updates,
        }

    def _saved_config(self, with_optimizers: bool) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "algorithm": "SAC",
            "init_args": self._config,
            **self.get_param_env(),
            "updates": self.updates,
            "total_steps": self.total_steps,
            "optimizer_states": with_optimizers,
        }

    @classmethod
    def from_pretrained(
        cls,
        repo_name: str | Path,
        access_token: str | None = None,
        version: str | None = None,
        load_gradients: bool = False,
        env: Any = None,
        device: str | torch.device | None = None,
    ) -> SAC:
        """Load an agent written by :meth:`save`.

        :param repo_name: a local folder, or a Hugging Face Hub repository
            ``namespace/name`` (downloaded with ``huggingface_hub``, ``pip install
            "super_sac[hub]"``).
        :param access_token: Hub token for a private repository.
        :param version: Hub revision (branch, tag or commit).
        :param load_gradients: restore the optimizer states and the update counter (the folder
            must have been saved with ``save_gradients=True``), to continue training exactly.
        :param env: the env to act in; default: rebuilt with ``gymnasium.make`` from the saved
            env spec.
        :param device: override the saved device.
        :return: the agent (without loggers: pass ``log_dir`` by building a new SAC to log).
        """
        folder = resolve_pretrained(repo_name, access_token, version)
        config_file = folder / CONFIG_FILE
        if not config_file.exists():
            raise FileNotFoundError(f"{folder} holds no {CONFIG_FILE}; it was not made by SAC.save")
        try:
            config = json.loads(config_file.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(
                f"{config_file} is not valid JSON ({err}); the save is damaged. Fix: load "
                "another save, or save the agent again"
            ) from err
        if (
            not isinstance(config, dict)
            or config.get("algorithm") != "SAC"
            or config.get("format") != FORMAT_VERSION
        ):
            raise ValueError(f"{config_file} is not a SAC checkpoint of format {FORMAT_VERSION}")
        env = rebuild_env(config["env"]) if env is None else env
        check_env_matches(env, config["env"])
        init = _as_checked_settings(dict(config["init_args"]))
        init.update(log_dir=None, wandb_project=None)
        if device is not None:
            init["device"] = str(device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # settings were already warned about when saved
            sac = cls(env, **init)
        sac._load_weights(folder, load_gradients)
        sac.total_steps = int(config.get("total_steps", 0))
        return sac

    def _load_weights(self, folder: Path, load_gradients: bool) -> None:
        self.agent.load(_present(folder / "agent.pt"))
        self.target_agent.load(_present(folder / TARGET_FILE))
        saved = load_torch_file(_present(folder / ALPHA_FILE), self.device)
        with torch.no_grad():
            self.learner.log_alpha.copy_(saved["log_alpha"])
        if not load_gradients:
            return
        file = folder / OPTIMIZERS_FILE
        if not file.exists():
            raise FileNotFoundError(
                f"{folder} holds no optimizer states; save with save_gradients=True to resume "
                "training, or load with load_gradients=False"
            )
        states = load_torch_file(file, self.device)
        self.critic_optim.load_state_dict(states["critic"])
        self.policy_optim.load_state_dict(states["policy"])
        if self.alpha_optim is not None and states["alpha"] is not None:
            self.alpha_optim.load_state_dict(states["alpha"])
        self.updates = int(states["updates"])

    def __getstate__(self) -> dict[str, Any]:
        """What ``pickle`` and ``copy.deepcopy`` copy: everything :meth:`save` keeps (networks,
        optimizers, alpha, settings) plus the replay memory, the env and the step counters,
        but not the open loggers (the copy logs nowhere; pass ``log_dir`` to a new
        :class:`SAC` for that) nor the episode under way (the copy's next :meth:`train`
        starts a new one, as after :meth:`from_pretrained`)."""
        state = self.__dict__.copy()
        state["_total_steps"] = self.total_steps
        state["_collector"] = None  # its vector env over this env holds closures
        state["_loggers"] = []  # open files, threads and a wandb run
        state["_seed_views"] = {}
        return state

    def close(self) -> None:
        """Flush and close the loggers (tensorboard, wandb). The env is left open."""
        for logger in self._loggers:
            logger.close()
        self._loggers = []
