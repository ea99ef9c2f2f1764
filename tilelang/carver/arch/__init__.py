"""Device facts for the tile-configuration recommender: `CUDA(target)` and the reference's
architecture predicates (`arch/cuda.py`); `driver` answers raw queries of the current GPU
(SM count, shared memory, ...)."""

from . import driver  # noqa: F401
from .cuda import *  # noqa: F401,F403
from .cuda import __all__ as _cuda_all
from .driver import get_device_name, get_num_sms  # noqa: F401

__all__ = ["driver", "get_device_name", "get_num_sms"] + list(_cuda_all)
