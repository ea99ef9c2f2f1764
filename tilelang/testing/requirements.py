"""pytest skip decorators: `requires_cuda`, `requires_cuda_compute_version(9, 0)`,
`requires_package("einops")`, ...

A `Requirement` is a named condition evaluated lazily (at decoration time, not import time, so
`import tilelang.testing` never touches the GPU). Applied to a function or class it adds its pytest
marks: `skipif(not condition, reason=...)`, plus `pytest.mark.gpu` for GPU requirements so the
project's `-m gpu` / `-m "not gpu"` selection works.
"""

from __future__ import annotations

import importlib.util
from typing import Callable


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def cuda_compute_version(device: int = None) -> tuple:
    """(major, minor) of the current (or given) GPU; (0, 0) without one."""
    if not _cuda_available():
        return (0, 0)
    import torch

    return tuple(torch.cuda.get_device_capability(device))


class Requirement:
    """A test requirement usable as `@req`, `@req()` or `pytestmark = req.marks()`."""

    def __init__(self, name: str, check: Callable[[], bool], reason: str, gpu: bool = False,
                 parents: tuple = ()):
        self.name = name
        self._check = check
        self._reason = reason
        self.gpu = gpu
        self.parents = tuple(parents)

    def satisfied(self) -> bool:
        return all(p.satisfied() for p in self.parents) and bool(self._check())

    def __bool__(self):
        return self.satisfied()

    def marks(self) -> list:
        import pytest

        marks = []
        for p in self.parents:
            marks.extend(p.marks())
        if self.gpu and not any(getattr(m, "name", None) == "gpu" for m in marks):
            marks.append(pytest.mark.gpu)
        reason = self._reason() if callable(self._reason) else self._reason
        marks.append(pytest.mark.skipif(not self._check(), reason=reason))
        return marks

    def __call__(self, func=None):
        if func is None:
            return self
        for mark in self.marks():
            func = mark(func)
        return func

    def __repr__(self):
        return f"<tilelang.testing requirement {self.name}>"


# (lambdas look `_cuda_available` up at call time, so tests can monkeypatch it)
requires_cuda = Requirement("cuda", lambda: _cuda_available(),
                            "Requires a CUDA GPU (torch sees none)", gpu=True)
requires_gpu = Requirement("gpu", lambda: _cuda_available(), "Requires a GPU (torch sees none)",
                           gpu=True)
# The CPU target of this compiler is its interpreter: always there.
requires_llvm = Requirement("llvm", lambda: True, "CPU target")
requires_rocm = Requirement("rocm", lambda: False,
                            "ROCm/HIP is not supported by this compiler (NVIDIA GPUs and the CPU "
                            "interpreter only)")
requires_hip = requires_rocm
# AMD CDNA (MI200/MI300) and gfx950 (MI350) GPUs: never here; "CUDA or CDNA" is CUDA
requires_cdna = Requirement("cdna", lambda: False,
                            "Requires a CDNA ROCm GPU (not supported by this compiler)")
requires_gfx950 = Requirement("gfx950", lambda: False,
                              "Requires gfx950 (CDNA4/MI350; not supported by this compiler)")
requires_cuda_or_cdna = Requirement("cuda or cdna", lambda: _cuda_available(),
                                    "Requires a CUDA (or CDNA ROCm) GPU; torch sees none",
                                    gpu=True)
requires_metal = Requirement("metal", lambda: False,
                             "Metal is not supported by this compiler (NVIDIA GPUs and the CPU "
                             "interpreter only)")


def requires_package(*packages: str) -> Requirement:
    """Skip unless every named package is importable: `@requires_package("einops")`."""
    missing = lambda: [p for p in packages if importlib.util.find_spec(p) is None]  # noqa: E731
    return Requirement(f"package {', '.join(packages)}", lambda: not missing(),
                       lambda: f"Requires package(s) {', '.join(missing()) or packages}")


_COMPARE = {
    "ge": lambda have, want: have >= want,
    "gt": lambda have, want: have > want,
    "le": lambda have, want: have <= want,
    "lt": lambda have, want: have < want,
    "eq": lambda have, want: have == want,
}


def requires_cuda_compute_version(major_version: int, minor_version: int = 0,
                                  mode: str = "ge") -> Requirement:
    """Skip unless the GPU's compute capability compares `mode` ("ge", "gt", "le", "lt", "eq")
    to (major, minor); also requires a GPU."""
    if mode not in _COMPARE:
        raise ValueError(f"Invalid mode: {mode}")
    want = (major_version, minor_version)

    def reason():
        have = cuda_compute_version()
        return (f"Requires CUDA compute {mode} {major_version}.{minor_version}, but have "
                f"{have[0]}.{have[1]}")

    return Requirement(f"cuda compute {mode} {want}",
                       lambda: _COMPARE[mode](cuda_compute_version(), want), reason, gpu=True,
                       parents=(requires_cuda,))


def requires_cuda_compute_version_ge(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, mode="ge")


def requires_cuda_compute_version_gt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, mode="gt")


def requires_cuda_compute_version_eq(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, mode="eq")


def requires_cuda_compute_version_lt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, mode="lt")


def requires_cuda_compute_version_le(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, mode="le")
