"""super_sac: one off-policy actor-critic loop that recovers DDPG, TD3, SAC and their relatives
as gin settings, and a quick-start SAC class (``super_sac.SAC``) for use without gin."""

from super_sac import (
    agent,
    augmentations,
    checkpoint,
    envs,
    learning,
    learning_utils,
    main,
    nets,
    quickstart,
    replay,
    wrappers,
)
from super_sac.agent import Agent
from super_sac.main import super_sac
from super_sac.nets import Encoder
from super_sac.nets import cnns as _cnns  # noqa: F401  (super_sac.nets.cnns after import super_sac)
from super_sac.quickstart import SAC, ReplayMemory
from super_sac.replay import ReplayBuffer
from super_sac.utils import get_device, set_seed

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "Encoder",
    "ReplayBuffer",
    "ReplayMemory",
    "SAC",
    "agent",
    "augmentations",
    "checkpoint",
    "envs",
    "get_device",
    "learning",
    "learning_utils",
    "main",
    "nets",
    "quickstart",
    "replay",
    "set_seed",
    "super_sac",
    "wrappers",
]
