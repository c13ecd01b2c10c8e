"""One module per accelerator; see `base.py` for the interface and the registry."""

from accelkit.backends.base import (
    Availability,
    Backend,
    DeviceInfo,
    all_backends,
    get,
    names,
    register,
)

__all__ = ["Availability", "Backend", "DeviceInfo", "all_backends", "get", "names", "register"]
