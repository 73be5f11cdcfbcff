"""A quick-start SAC for users who do not want gin files: ``SAC(env).train(num_episodes=100)``.

:class:`SAC` is a facade over the gin loop's pieces (settings, learner, collector, loggers);
:class:`ReplayMemory` is the transition store of its seed API, backed by a
:class:`~super_sac.replay.ReplayBuffer`; :class:`QNetwork`, :class:`GaussianPolicy` and
:class:`DeterministicPolicy` are its network classes, thin modules over the library's critic and
actors that take env-unit actions. Users see raw ``Box`` observations and actions in the
env's own bounds; inside, observations are ``{"obs": float32}`` dicts and actions live in the
agent's ``[-1, 1]``, which is also what the memory holds.
"""

from super_sac.quickstart.memory import ReplayMemory, check_action_space, check_spaces
from super_sac.quickstart.networks import DeterministicPolicy, GaussianPolicy, QNetwork
from super_sac.quickstart.sac import POLICY_TYPES, SAC, soft_update

__all__ = [
    "POLICY_TYPES",
    "SAC",
    "DeterministicPolicy",
    "GaussianPolicy",
    "QNetwork",
    "ReplayMemory",
    "check_action_space",
    "check_spaces",
    "soft_update",
]
