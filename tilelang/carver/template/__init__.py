"""Computation templates that recommend tile configurations for a device: `MatmulTemplate`."""

from .base import BaseTemplate  # noqa: F401
from .matmul import MatmulTemplate  # noqa: F401

__all__ = ["BaseTemplate", "MatmulTemplate"]
