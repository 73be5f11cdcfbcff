"""Offline datasets: Minari (the maintained successor of D4RL's format) and a plain ``.npz``.

Both formats store whole episodes of the *raw* environment: observations as the env returns
them (a ``Box`` becomes the ``{"obs": ...}`` dict of :class:`super_sac.wrappers.SimpleGymWrapper`
on load), actions in the env's own units together with the action space's bounds (they are
rescaled to the library's ``[-1, 1]`` on load, as :class:`super_sac.wrappers.NormActionSpace`
does), rewards, and ``terminations`` and ``truncations`` kept apart: only a termination stops
bootstrapping, a truncated transition bootstraps from its true final observation.

* Minari: ``<datasets_path>/<dataset id>/`` written by :func:`save_minari` with
  ``minari.create_dataset_from_buffers`` and read by :func:`load_minari` with
  ``minari.load_dataset``; ``datasets_path`` defaults to ``$MINARI_DATASETS_PATH`` (then Minari's
  own default, ``~/.minari/datasets``). Nothing is downloaded.
* ``.npz`` (:func:`save_npz` / :func:`load_npz`): per-transition arrays ``obs/<key>``,
  ``next_obs/<key>``, ``action``, ``reward``, ``terminated``, ``truncated`` plus
  ``action_low`` / ``action_high`` (Box actions) or ``num_actions`` (Discrete), no pickles.

:func:`load_transitions` resolves a source (a ``.npz`` path, a Minari dataset folder or a Minari
id), converts it to the library's conventions and validates it against the env the agent
trains in (:func:`validate_transitions`), raising :class:`DatasetError` with the problem and the
fix. :meth:`super_sac.replay.ReplayBuffer.load_dataset` puts the result in a replay buffer.
"""

from super_sac.datasets.core import (
    DatasetError,
    Episode,
    Transitions,
    episodes_to_transitions,
    validate_transitions,
)
from super_sac.datasets.files import load_minari, load_npz, load_transitions, save_minari, save_npz
from super_sac.datasets.recording import (
    Policy,
    agent_policy,
    flat_observation_key,
    random_policy,
    raw_action_space,
    raw_observation_space,
    record_episodes,
)

__all__ = [
    "DatasetError",
    "Policy",
    "episodes_to_transitions",
    "Episode",
    "Transitions",
    "load_minari",
    "load_npz",
    "agent_policy",
    "load_transitions",
    "random_policy",
    "flat_observation_key",
    "raw_action_space",
    "raw_observation_space",
    "record_episodes",
    "save_minari",
    "save_npz",
    "validate_transitions",
]
