"""The tile IR: nodes, dtypes, traversal and printing."""

from .dtype import DType  # noqa: F401
from .nodes import *  # noqa: F401,F403
