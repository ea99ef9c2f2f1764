"""`tilelang.rocm.target`: the availability probes of the reference's ROCm target module,
answering for this compiler, which has no HIP backend (see tilelang/rocm/__init__.py)."""

from __future__ import annotations

from . import _ABSENT

__all__ = ["check_hip_availability", "target_is_hip"]


def check_hip_availability() -> bool:
    """Whether HIP kernels can be built and run: never here."""
    return False


def target_is_hip(target) -> bool:
    """Whether `target` is a HIP target: none is accepted here."""
    return str(target).split()[0].lower() in ("hip", "rocm") if target is not None else False


def __getattr__(name):
    raise AttributeError(f"tilelang.rocm.target.{name}: {_ABSENT}")
