"""Device facts for the current GPU (`driver`); see tilelang/carver/__init__.py."""

from . import driver  # noqa: F401
from .driver import get_device_name, get_num_sms  # noqa: F401
