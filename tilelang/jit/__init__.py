"""JIT entry points: `tilelang.jit`, `tilelang.lazy_jit`, `tilelang.compile`, `tilelang.lower`."""

from .kernel import JITKernel  # noqa: F401
from .api import jit, lazy_jit, compile, lower  # noqa: F401,A004
