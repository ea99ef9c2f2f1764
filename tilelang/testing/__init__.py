"""Test helpers with the reference's names: `tilelang.testing.main()`, `requires_cuda`,
`requires_cuda_compute_version(8, 0)`, `set_random_seed`, `torch_assert_close`, ...

Expects pytest to be importable (it is only imported here, never by `import tilelang`).
Guarantees: every `requires_*` object works both as a bare decorator (`@requires_cuda`) and
called (`@requires_cuda()`), on functions and classes, and exposes `.marks()` (a list of pytest
marks) for `pytestmark = ...`. Skips say why ("Requires CUDA compute ge 9.0, but have 8.0").
"""

from __future__ import annotations

import importlib.util
import inspect
import random
import sys

from .compare import assert_allclose, torch_assert_close  # noqa: F401
from .requirements import (  # noqa: F401
    Requirement,
    cuda_compute_version,
    requires_cdna,
    requires_cuda,
    requires_cuda_compute_version,
    requires_cuda_compute_version_eq,
    requires_cuda_compute_version_ge,
    requires_cuda_compute_version_gt,
    requires_cuda_compute_version_le,
    requires_cuda_compute_version_lt,
    requires_cuda_or_cdna,
    requires_gfx950,
    requires_gpu,
    requires_hip,
    requires_llvm,
    requires_metal,
    requires_package,
    requires_rocm,
)

__all__ = [
    "main", "set_random_seed", "torch_assert_close", "assert_allclose", "Requirement",
    "requires_cuda", "requires_gpu", "requires_package", "requires_llvm", "requires_rocm",
    "requires_hip", "requires_metal", "requires_cuda_compute_version",
    "requires_cuda_compute_version_ge", "requires_cuda_compute_version_gt",
    "requires_cuda_compute_version_eq", "requires_cuda_compute_version_lt",
    "requires_cuda_compute_version_le", "cuda_compute_version", "requires_cdna",
    "requires_cuda_or_cdna", "requires_gfx950",
]


def main():
    """Run pytest on the file that calls this (as in
    `if __name__ == "__main__": tilelang.testing.main()`), passing on the command-line
    arguments, and exit with pytest's status."""
    import pytest

    test_file = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([test_file] + sys.argv[1:]))


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's `random`, numpy and torch (all CUDA devices too, when present)."""
    random.seed(seed)
    if importlib.util.find_spec("numpy") is not None:
        import numpy as np

        np.random.seed(seed)
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
