"""Environments that ship with super_sac, registered with gymnasium on import of ``super_sac``.

``super_sac/LinearLongitudinalF16-v0``: angle-of-attack tracking with the elevator of a linearised
F-16 (:class:`super_sac.envs.f16.LinearLongitudinalF16`)::

    import gymnasium as gym
    import super_sac  # registers the env

    env = gym.make("super_sac/LinearLongitudinalF16-v0", number_time_steps=1000)

The seed interface's bare id ``LinearLongitudinalF16-v0`` is registered too (unless another
package, such as tensoraerospace, registered it first), so its quick-start runs as written.
"""

from __future__ import annotations

import gymnasium as gym

from super_sac.envs.f16 import LinearLongitudinalF16, zoh_discretise

F16_ENV_ID = "super_sac/LinearLongitudinalF16-v0"
F16_SEED_ENV_ID = "LinearLongitudinalF16-v0"  # the id of the quick-start interface's example


def register_envs() -> None:
    """Register the library's envs with gymnasium (a no-op for ids already registered)."""
    for env_id in (F16_ENV_ID, F16_SEED_ENV_ID):
        if env_id not in gym.registry:
            # no TimeLimit wrapper: the env truncates its episodes itself (number_time_steps)
            gym.register(id=env_id, entry_point="super_sac.envs.f16:LinearLongitudinalF16")


register_envs()

__all__ = [
    "F16_ENV_ID",
    "F16_SEED_ENV_ID",
    "LinearLongitudinalF16",
    "register_envs",
    "zoh_discretise",
]
