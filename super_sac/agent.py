"""The Agent: an encoder, an actor and a vectorized critic ensemble."""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gin
import numpy as np
import torch
from torch import nn

from super_sac import learning_utils as lu
from super_sac.markov import MarkovHeads
from super_sac.nets import Encoder
from super_sac.nets.mlps import (
    ContinuousCritic,
    ContinuousDeterministicActor,
    ContinuousStochasticActor,
    DiscreteActor,
    DiscreteCritic,
)
from super_sac.utils import load_torch_file

ObsDict = Mapping[str, Any]

ADV_METHODS = ("mean", "max", "indirect")


def _unreadable(
    err: Exception, state: dict[str, torch.Tensor], batched: bool, features: str = ""
) -> Exception:
    """``err`` of the encoder or actor, of the same type, with the observations' shapes and
    the ``batched`` rule added (the usual cause: a batch passed without ``batched=True``, or a
    single observation with it), and ``features``, a note on the encoder's output."""
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    note = "a leading dimension was added" if not batched else "taken as a batch"
    detail = str(err)
    if isinstance(err, KeyError) and err.args:  # str() of a KeyError is its quoted key
        key = err.args[0]
        detail = f"no observation key {key!r}" if " " not in str(key) else str(key)
    message = (
        f"{detail}\n(the agent read observations of shapes {shapes}, {note}: batched={batched}"
        f"{features}. Fix: pass one observation of the env's shape with batched=False, or a "
        "batch with a leading dimension and batched=True, under the keys the encoder reads)"
    )
    if isinstance(err, KeyError):  # KeyError would quote the message: a missing key is a value
        return ValueError(message)
    try:
        return type(err)(message)
    except Exception:  # an exception type with other constructor arguments
        return RuntimeError(message)


_AGENT_FILE = "agent.pt"
_CHECKPOINT_STATE_FILE = "state.pt"  # super_sac.checkpoint's file of the loop's state


def default_adv_method(discrete: bool) -> str:
    """The advantage estimate ``Agent.adv_method = None`` stands for: "indirect" (discrete
    actions, an exact expectation over the actions) or "mean" (continuous actions)."""
    return "indirect" if discrete else "mean"


def _accepts(cls: Any, name: str) -> bool:
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _discrete_classes(actor_cls: Any, critic_cls: Any) -> tuple[Any, Any]:
    """The actor and critic classes of a discrete agent: continuous defaults become their discrete
    counterparts; the deterministic actor (DDPG/TD3) has no discrete meaning and is refused."""
    if actor_cls is ContinuousDeterministicActor:
        raise ValueError(
            "Agent.discrete = True with actor_network_cls = ContinuousDeterministicActor: "
            "deterministic (DDPG/TD3-style) actors output continuous actions. Fix: use "
            "Agent.actor_network_cls = @super_sac.nets.mlps.DiscreteActor (epsilon-greedy "
            "exploration comes from super_sac.use_exploration_process = True)."
        )
    if actor_cls is ContinuousStochasticActor:
        actor_cls = DiscreteActor
    if critic_cls is ContinuousCritic:
        critic_cls = DiscreteCritic
    return actor_cls, critic_cls


def completed_signature(signature: dict[str, Any], state_dict: dict[str, Any]) -> dict[str, Any]:
    """A saved :meth:`Agent.signature` with the entries that files written before they existed
    lack, read from the saved weights: ``standardize_observations`` (standardising encoders
    saved their statistics, ``encoder.obs_mean``, before the signature named them)."""
    out = dict(signature)
    if "standardize_observations" not in out and "encoder.obs_mean" in state_dict:
        out["standardize_observations"] = True
    return out


@gin.configurable
class Agent(nn.Module):
    """Encoder + actor + an ensemble of ``num_critics`` critics, acting on dict observations.

    Actions live in the library's normalised space ``[-1, 1]^act_space_size``; wrap the env with
    :class:`super_sac.wrappers.NormActionSpace` to rescale them to its bounds. Discrete agents
    (``discrete=True``) act with int64 indices in ``[0, act_space_size)``.

    :param act_space_size: action dimension (continuous) or number of actions (discrete).
    :param encoder: an :class:`super_sac.nets.Encoder` turning observation dicts into states.
    :param actor_network_cls: actor class, built as
        ``cls(state_space_size, act_space_size, [log_std_low, log_std_high,] hidden_size)``.
    :param critic_network_cls: critic ensemble class, built as
        ``cls(state_space_size, act_space_size, num_critics, hidden_size)``.
    :param discrete: discrete actions (SAC-Discrete, Christodoulou 2019): actions are integers in
        ``[0, act_space_size)``. When the actor and critic classes are left at their continuous
        defaults they become :class:`~super_sac.nets.mlps.DiscreteActor` and
        :class:`~super_sac.nets.mlps.DiscreteCritic`.
    :param ensemble_size: SUNRISE ensemble size E (Lee et al. 2021): E actors, each with its own
        ``num_critics`` critics and entropy coefficient, held in one actor module and one critic
        module with a leading member dimension (critics ``e*N .. e*N + N - 1`` belong to member
        ``e``). The encoder is shared.
    :param num_critics: critics per ensemble member (2 = clipped double-Q, 10 = REDQ).
    :param ucb_bonus: SUNRISE's UCB exploration weight: exploration picks, per state, the
        member proposal maximising ``mean(Q) + ucb_bonus * std(Q)``; 0 picks a random member.
    :param hidden_size: hidden width passed to the actor and critic classes.
    :param auto_rescale_targets: PopArt-normalised critic outputs (set ``pop=True`` in the loop
        to also preserve outputs when the statistics move).
    :param log_std_low: lower log-std bound of stochastic actors.
    :param log_std_high: upper log-std bound of stochastic actors.
    :param adv_method: advantage estimate for filtered BC: "mean" or "max" (continuous),
        "indirect" (discrete). Used only by the offline actor update. ``None`` (the default, and
        what the original project's gin files bind) picks the action type's default: "indirect"
        for discrete agents, "mean" for continuous ones; ``agent.adv_method`` is always the
        resolved string.
    :param beta_dist: a Beta-distribution policy instead of the tanh-Gaussian (stochastic
        actors only).
    """

    def __init__(
        self,
        act_space_size: int,
        encoder: Encoder,
        actor_network_cls: type[nn.Module] = ContinuousStochasticActor,
        critic_network_cls: type[nn.Module] = ContinuousCritic,
        discrete: bool = False,
        ensemble_size: int = 1,
        num_critics: int = 2,
        ucb_bonus: float = 0.0,
        hidden_size: int = 256,
        auto_rescale_targets: bool = False,
        log_std_low: float = -5.0,
        log_std_high: float = 2.0,
        adv_method: str | None = None,
        beta_dist: bool = False,
    ) -> None:
        super().__init__()
        if adv_method is None:
            adv_method = default_adv_method(discrete)
        self._check_settings(
            act_space_size,
            encoder,
            discrete,
            ensemble_size,
            num_critics,
            ucb_bonus,
            hidden_size,
            auto_rescale_targets,
            adv_method,
            beta_dist,
        )
        if discrete:
            actor_network_cls, critic_network_cls = _discrete_classes(
                actor_network_cls, critic_network_cls
            )
        state_size = encoder.embedding_dim
        actor_kwargs: dict[str, Any] = {"hidden_size": hidden_size}
        if _accepts(actor_network_cls, "log_std_low"):
            actor_kwargs.update(log_std_low=log_std_low, log_std_high=log_std_high)
        if beta_dist:
            if not _accepts(actor_network_cls, "beta_dist"):
                raise ValueError(
                    f"Agent.beta_dist = True, but {actor_network_cls.__name__} has no Beta "
                    "distribution. Fix: use super_sac.nets.mlps.ContinuousStochasticActor, or "
                    "set Agent.beta_dist = False."
                )
            actor_kwargs["beta_dist"] = True
        if ensemble_size > 1:
            if not _accepts(actor_network_cls, "ensemble_size"):
                raise ValueError(
                    f"Agent.ensemble_size = {ensemble_size} (SUNRISE), but "
                    f"{actor_network_cls.__name__} cannot hold an actor ensemble. Fix: use "
                    "super_sac.nets.mlps.ContinuousStochasticActor, or set "
                    "Agent.ensemble_size = 1."
                )
            actor_kwargs["ensemble_size"] = ensemble_size
        # moves with ``.to()``, so ``device`` needs no search through the modules when acting
        self.register_buffer("_device_marker", torch.empty(0), persistent=False)
        self.encoder = encoder
        self.actor = actor_network_cls(state_size, act_space_size, **actor_kwargs)
        # every member's critics live in one ensemble module, member e owning critics
        # e*N .. e*N + N - 1
        critic_kwargs: dict[str, Any] = {
            "num_critics": num_critics * ensemble_size,
            "hidden_size": hidden_size,
        }
        if auto_rescale_targets:
            if not _accepts(critic_network_cls, "popart"):
                raise ValueError(
                    f"Agent.auto_rescale_targets = True, but {critic_network_cls.__name__} has "
                    "no PopArt layer. Fix: use super_sac.nets.mlps.ContinuousCritic, or set "
                    "Agent.auto_rescale_targets = False."
                )
            critic_kwargs["popart"] = True
        self.critic = critic_network_cls(state_size, act_space_size, **critic_kwargs)
        # the Markov state abstraction's heads, attached by a loop that trains them
        self.markov_heads: MarkovHeads | None
        self.register_module("markov_heads", None)
        self.act_space_size = int(act_space_size)
        self.num_critics = int(num_critics)
        self.ensemble_size = int(ensemble_size)
        self.hidden_size = int(hidden_size)
        self.discrete = bool(discrete)
        self.adv_method = adv_method
        self.ucb_bonus = float(ucb_bonus)
        self.beta_dist = bool(beta_dist)
        self.auto_rescale_targets = bool(auto_rescale_targets)
        if self.ensemble_size > 1 and not self.stochastic:
            raise ValueError(
                f"Agent.ensemble_size = {ensemble_size} (SUNRISE) needs a stochastic actor, got "
                f"{actor_network_cls.__name__}. Fix: use "
                "super_sac.nets.mlps.ContinuousStochasticActor, or set Agent.ensemble_size = 1."
            )

    @staticmethod
    def _check_settings(
        act_space_size: int,
        encoder: Encoder,
        discrete: bool,
        ensemble_size: int,
        num_critics: int,
        ucb_bonus: float,
        hidden_size: int,
        auto_rescale_targets: bool,
        adv_method: str,
        beta_dist: bool,
    ) -> None:
        for name, value in (
            ("act_space_size", act_space_size),
            ("ensemble_size", ensemble_size),
            ("num_critics", num_critics),
            ("hidden_size", hidden_size),
        ):
            if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
                raise TypeError(
                    f"Agent.{name} must be an int, got {value!r} ({type(value).__name__}). Fix: "
                    f"bind it without quotes, e.g. Agent.{name} = 256"
                )
        if not isinstance(encoder, Encoder):
            raise TypeError(
                f"Agent.encoder must be a super_sac.nets.Encoder, got {type(encoder).__name__}; "
                "subclass super_sac.nets.Encoder or use super_sac.nets.FlatEncoder(dim)."
            )
        if num_critics < 1:
            raise ValueError(f"Agent.num_critics must be >= 1, got {num_critics}")
        if ensemble_size < 1:
            raise ValueError(f"Agent.ensemble_size must be >= 1, got {ensemble_size}")
        if hidden_size < 1 or act_space_size < 1:
            raise ValueError(
                f"Agent.hidden_size and act_space_size must be >= 1, got {hidden_size} and "
                f"{act_space_size}"
            )
        if adv_method not in ADV_METHODS:
            raise ValueError(
                f"Agent.adv_method must be one of {ADV_METHODS} or None (the default of the "
                f"action type), got {adv_method!r}"
            )
        if discrete and (auto_rescale_targets or beta_dist):
            raise ValueError(
                "Agent.discrete = True does not support "
                + ("auto_rescale_targets (PopArt)" if auto_rescale_targets else "beta_dist")
                + ". Fix: set Agent.auto_rescale_targets = False and Agent.beta_dist = False."
            )
        if ucb_bonus < 0.0:
            raise ValueError(
                f"Agent.ucb_bonus must be >= 0 (it weighs the critics' disagreement as a bonus), "
                f"got {ucb_bonus}"
            )

    # ------------------------------------------------------------------ properties
    @property
    def stochastic(self) -> bool:
        """Whether the actor returns a distribution (SAC) rather than an action (DDPG/TD3)."""
        return bool(getattr(self.actor, "stochastic", True))

    @property
    def device(self) -> torch.device:
        """The device of the agent's parameters."""
        return self._device_marker.device

    # ------------------------------------------------------------------ acting
    def _to_tensors(self, obs: ObsDict, batched: bool) -> tuple[dict[str, torch.Tensor], bool]:
        if not isinstance(obs, Mapping):
            raise TypeError(
                f"the agent acts on dict observations, got {type(obs).__name__}; wrap the env "
                "with super_sac.wrappers.SimpleGymWrapper (Box -> {'obs': ...})."
            )
        device = self.device
        from_numpy = not all(isinstance(v, torch.Tensor) for v in obs.values())
        out = {}
        for key, value in obs.items():
            t = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
            if t.dtype == torch.float64:  # the replay buffer stores float64 as float32 too
                t = t.float()
            if not batched:
                t = t.unsqueeze(0)
            out[key] = t.to(device, non_blocking=True)
        return out, from_numpy

    @staticmethod
    def _to_output(action: torch.Tensor, batched: bool, from_numpy: bool) -> Any:
        if not batched:
            action = action.squeeze(0)
        return action.cpu().numpy() if from_numpy else action

    @torch.no_grad()
    def forward(self, obs: ObsDict, batched: bool = False) -> Any:
        """The deterministic (evaluation) action: the actor's mean, in ``[-1, 1]`` (continuous),
        or the most probable action, an int64 index (discrete).

        :param obs: an observation dict of numpy arrays or tensors.
        :param batched: the arrays already carry a leading batch dimension (parallel envs).
        :return: numpy actions for numpy input, tensors for tensor input.
        """
        state, from_numpy = self._to_tensors(obs, batched)
        rep = self._encode(state, batched)
        try:
            action = self.mean_action(rep)
        except (RuntimeError, IndexError) as err:
            raise self._unreadable_features(err, rep, state, batched) from err
        return self._to_output(action, batched, from_numpy)

    @torch.no_grad()
    def sample_action(self, obs: ObsDict, batched: bool = False) -> Any:
        """An exploration action: a policy sample (stochastic actors; int64 indices for discrete
        actors) or the mean (deterministic actors, which explore with the loop's noise process).
        An ensemble (SUNRISE) samples from one randomly chosen member per state, or with
        ``ucb_bonus > 0`` from the member whose proposal has the highest upper confidence bound
        (see :meth:`explore_ensemble`).

        :param obs: an observation dict of numpy arrays or tensors.
        :param batched: the arrays already carry a leading batch dimension (parallel envs).
        """
        state, from_numpy = self._to_tensors(obs, batched)
        rep = self._encode(state, batched)
        try:
            if self.ensemble_size > 1:
                action = self.explore_ensemble(rep)
            else:
                action = self.actor(rep).sample() if self.stochastic else self.actor(rep)
        except (RuntimeError, IndexError) as err:
            raise self._unreadable_features(err, rep, state, batched) from err
        return self._to_output(action, batched, from_numpy)

    def _encode(self, state: dict[str, torch.Tensor], batched: bool) -> torch.Tensor:
        """The encoder's features of an acting batch; its errors keep their type and gain the
        observations' shapes and the ``batched`` rule."""
        try:
            return self.encoder(state)
        except (RuntimeError, IndexError, KeyError) as err:
            raise _unreadable(err, state, batched) from err

    def _unreadable_features(
        self, err: Exception, rep: Any, state: dict[str, torch.Tensor], batched: bool
    ) -> Exception:
        """The actor's error on the encoder's features, as :func:`_unreadable`; when the
        features are not the ``(batch, embedding_dim)`` tensor of the actor's dtype it was built
        for, the note says so (observations of another shape, or an encoder whose
        ``embedding_dim`` or dtype is not what its forward returns)."""
        width = self.encoder.embedding_dim
        dtype = next(self.actor.parameters()).dtype
        if isinstance(rep, torch.Tensor) and (rep.shape[-1:] != (width,) or rep.dtype != dtype):
            return _unreadable(err, state, batched, features=(
                f"; from them the encoder {type(self.encoder).__name__} made features of "
                f"shape {tuple(rep.shape)} ({rep.dtype}), but the actor reads (batch, "
                f"embedding_dim = {width}) {dtype}: if the observations are right, the "
                "encoder's embedding_dim or dtype is not what its forward returns"
            ))  # fmt: skip
        return _unreadable(err, state, batched)

    def explore_ensemble(self, state_rep: torch.Tensor) -> torch.Tensor:
        """Exploration actions ``(B, A)`` of an actor ensemble (Lee et al. 2021, eq. 6).

        Every member proposes a sample for every state. With ``ucb_bonus = 0`` each state takes
        the proposal of a uniformly drawn member; otherwise the proposal maximising
        ``mean(Q) + ucb_bonus * std(Q)`` over all ``ensemble_size * num_critics`` critics.
        Discrete agents return ``(B,)`` action indices.
        """
        proposals = self.actor(state_rep).sample()  # (E, B, A), or (E, B) indices if discrete
        num_members, batch = proposals.shape[:2]
        if self.ucb_bonus > 0.0:
            q = self.critic_values_of_candidates(state_rep, proposals)
            choice = lu.ucb_choice(q, self.ucb_bonus)
        else:
            choice = torch.randint(num_members, (batch,), device=proposals.device)
        return proposals[choice, torch.arange(batch, device=proposals.device)]

    def critic_values_of_candidates(
        self, state_rep: torch.Tensor, candidates: torch.Tensor
    ) -> torch.Tensor:
        """Every critic's value of every candidate action: ``candidates`` ``(C, B, A)`` (or
        ``(C, B)`` discrete indices) for states ``(B, D)`` give ``(K, C, B)``, ``K`` the critics
        of all members."""
        num_candidates, batch = candidates.shape[:2]
        if self.discrete:  # every action's value is there already: gather each candidate's
            q_all = self.critic(state_rep)  # (K, B, A)
            idx = candidates.t().unsqueeze(0).expand(q_all.shape[0], -1, -1)  # (K, B, C)
            return q_all.gather(-1, idx).transpose(1, 2)
        reps = state_rep.repeat(num_candidates, 1)  # (C*B, D), candidate-major
        q = self.critic(reps, candidates.reshape(num_candidates * batch, -1))
        return q.reshape(q.shape[0], num_candidates, batch)

    def mean_action(self, state_rep: torch.Tensor) -> torch.Tensor:
        """Deterministic action for encoded states ``(B, embedding_dim)``: the actor's mean (an
        ensemble: the mean of its members' means), or for discrete actors the argmax of the
        action probabilities, ``(B,)`` int64."""
        out = self.actor(state_rep)
        if self.discrete:  # an ensemble: the action of highest mean probability
            probs = out.probs.mean(dim=0) if self.ensemble_size > 1 else out.probs
            return probs.argmax(dim=-1)
        action = out.mean if self.stochastic else out
        return action.mean(dim=0) if self.ensemble_size > 1 else action

    def compile_networks(self, **compile_kwargs: Any) -> None:
        """Apply :func:`torch.compile` in place to the encoder's, actor's and critic's networks
        (their ``net`` attribute where they have one, so that the distributions they return stay
        plain Python). Parameter names, ``state_dict`` and checkpoints are unchanged.

        :param compile_kwargs: passed to :meth:`torch.nn.Module.compile` (``mode=...``).
        """
        for module in (self.encoder, self.actor, self.critic):
            net = getattr(module, "net", module)
            if isinstance(net, nn.Module) and any(True for _ in net.parameters()):
                net.compile(**compile_kwargs)

    def attach_markov_heads(self, **settings: Any) -> MarkovHeads:
        """Give the agent the inverse-dynamics and contrastive heads of a Markov state
        abstraction (Allen et al. 2021; :class:`super_sac.markov.MarkovHeads`) on its encoder's
        states, if it has none yet; they are saved and loaded with the agent. The training loop
        attaches them when ``markov_abstraction_updates_per_step > 0``.

        :param settings: :class:`~super_sac.markov.MarkovHeads` settings; by default the
            agent's action type and ``hidden_size``.
        :return: the heads (the existing ones when already attached).
        """
        if self.markov_heads is None:
            settings = {"discrete": self.discrete, "hidden_size": self.hidden_size, **settings}
            heads = MarkovHeads(self.encoder.embedding_dim, self.act_space_size, **settings)
            self.markov_heads = heads.to(self.device)
        return self.markov_heads

    # ------------------------------------------------------------------ persistence
    def signature(self) -> dict[str, Any]:
        """The settings that fix the shapes and types of the agent's networks.

        Saved weights and checkpoints store it; loading compares it with the loading agent's own
        and refuses a mismatch with the list of differences.
        """
        signature = {
            "act_space_size": self.act_space_size,
            "num_critics": self.num_critics,
            "ensemble_size": self.ensemble_size,
            "hidden_size": self.hidden_size,
            "embedding_dim": self.encoder.embedding_dim,
            "actor": type(self.actor).__name__,
            "critic": type(self.critic).__name__,
            "encoder": type(self.encoder).__name__,
            "beta_dist": self.beta_dist,
            "auto_rescale_targets": self.auto_rescale_targets,
        }
        if self.markov_heads is not None:  # absent otherwise: older files stay loadable
            signature["markov_heads"] = self.markov_heads.settings()
        if getattr(self.encoder, "standardize", False):  # likewise
            signature["standardize_observations"] = True
        shift = getattr(self.encoder, "pixel_shift", -0.5)
        if shift != -0.5:  # likewise (DrQPixelEncoder's default): the input scaling
            signature["pixel_shift"] = shift
        no_tanh = [
            name
            for name, net in (("actor", self.actor), ("critic", self.critic))
            if getattr(getattr(net, "trunk", None), "tanh", True) is False
        ]
        if no_tanh:  # likewise: the heads' activation
            signature["trunk_without_tanh"] = no_tanh
        return signature

    def save(self, path: str | os.PathLike) -> Path:
        """Save the weights to ``path/agent.pt`` (or to ``path`` itself if it ends in ``.pt``).

        Written to a temporary file first and renamed, so an interrupted save never leaves a
        half-written file behind. :return: the file written.
        """
        path = Path(path)
        file = path if path.suffix == ".pt" else path / _AGENT_FILE
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(file.name + ".tmp")
        torch.save({"signature": self.signature(), "state_dict": self.state_dict()}, tmp)
        os.replace(tmp, file)
        return file

    def load(self, path: str | os.PathLike) -> None:
        """Load weights written by :meth:`save` (safe: ``weights_only=True``), or the agent of a
        training checkpoint (a ``<run>/checkpoints/ckpt_<steps>`` folder, whose ``state.pt``
        holds the whole loop). Weights saved with Markov abstraction heads attach them first
        (:meth:`attach_markov_heads`).

        :param path: a run directory or folder holding ``agent.pt``, a ``.pt`` file, or a
            checkpoint folder.
        :raises FileNotFoundError: when there are no weights at ``path``.
        :raises ValueError: when the file is damaged, or was made by an agent of another
            configuration (the message lists the differences).
        """
        path = Path(path)
        file = path if path.suffix == ".pt" else path / _AGENT_FILE
        if path.name == _CHECKPOINT_STATE_FILE:  # a checkpoint's state file itself
            path = path.parent
        checkpoint = path / _CHECKPOINT_STATE_FILE
        from_checkpoint = checkpoint.is_file() and (file == checkpoint or not file.exists())
        if from_checkpoint:
            file = checkpoint
        elif not file.exists():
            raise FileNotFoundError(
                f"no agent weights at {file}. Fix: pass the run directory (its agent.pt), an "
                "agent.pt file, or a checkpoint folder <run>/checkpoints/ckpt_<steps>"
            )
        payload = load_torch_file(file, self.device)
        if from_checkpoint:  # the loop's state: the agent's weights and the run's signature
            payload = {"signature": payload["signature"], "state_dict": payload["agent"]}
        saved = completed_signature(payload["signature"], payload["state_dict"])
        if saved.get("markov_heads") is not None:  # weights of a run that trained the heads
            self.attach_markov_heads(**saved["markov_heads"])
        mine = self.signature()
        # a checkpoint's signature also holds the loop's settings: compare the agent's only
        keys = mine if from_checkpoint else {**mine, **saved}  # this agent's keys first
        diffs = [
            f"{k}: saved {saved.get(k)!r}, this agent {mine.get(k)!r}"
            for k in keys
            if saved.get(k) != mine.get(k)
        ]
        if diffs:
            raise ValueError(
                f"checkpoint {file} was saved by a differently configured Agent:\n  "
                + "\n  ".join(diffs)
                + "\nBuild the Agent with the same settings as the run that saved it."
            )
        self.load_state_dict(payload["state_dict"])
