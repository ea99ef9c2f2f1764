"""Compilation targets: `"cpu"` (the interpreter), `"cuda"` (the current GPU), `"cuda -arch=sm_90a"`
(generate without a GPU), `"auto"` (CUDA when a GPU is present, else the CPU; at call time the
device of the tensors decides)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Target:
    kind: str  # "cpu" | "cuda" | "auto"
    arch: Optional[str] = None  # "sm_90a", "sm_80" (cuda only)

    def __str__(self):
        if self.kind == "cuda" and self.arch:
            return f"cuda -arch={self.arch}"
        return self.kind

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def sm(self) -> int:
        """Compute capability as an int (90 for sm_90a)."""
        m = re.match(r"sm_(\d+)", self.arch or "")
        return int(m.group(1)) if m else 0

    @property
    def is_hopper(self) -> bool:
        return self.arch == "sm_90a"


# The GPU architecture whose CUDA `JITKernel.get_kernel_source()` shows for a kernel that was
# not built for a GPU (no GPU on this machine, or target="cpu"): Hopper, the architecture the
# reference's examples and this project's measurements are about.
DEFAULT_CUDA_ARCH = "sm_90a"


def gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    try:
        return torch.cuda.is_available()
    except Exception:
        return False


def device_arch(device: int = None) -> str:
    """The architecture of a GPU: sm_90a on Hopper (wgmma needs the `a` target), else sm_XY."""
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    arch = f"sm_{major}{minor}"
    return arch + "a" if major == 9 else arch


_ARCH = re.compile(r"sm_\d+a?")
# options of TVM's cuda targets that reference programs pass; only -arch means anything here
_TVM_OPTIONS = {"arch", "mcpu", "keys", "libs", "model", "tag", "max_num_threads",
                "max_threads_per_block", "max_shared_memory_per_block", "registers_per_block",
                "thread_warp_size"}


def parse_target(target) -> Target:
    if isinstance(target, Target):
        return target
    if target is None:
        from ..env import env

        target = env.default_target
    if isinstance(target, dict):
        return _parse_target_dict(target)
    text = str(target).strip().lower()
    if text in ("auto", ""):
        from ..tvm.target import Target as ScopedTarget

        scoped = ScopedTarget.current()  # `with tvm.target.Target(...):`
        if scoped is not None:
            return parse_target(str(scoped))
        return Target("auto")
    if text in ("cpu", "c", "llvm", "interp", "interpreter"):
        return Target("cpu")
    kind, *rest = text.split()
    if kind == "cuda" or kind == "nvidia" or kind.startswith("nvidia/"):
        arch = _cuda_arch(target, rest)
        if arch is not None:
            return Target("cuda", arch)
        if not gpu_available():
            raise RuntimeError("target='cuda' builds for the current GPU, but no GPU is visible; "
                               "use target='cuda -arch=sm_90a' (or sm_80) to generate code "
                               "without one, or target='cpu' to run on the interpreter")
        return Target("cuda", device_arch())
    if kind.startswith(("hip", "rocm", "metal")):
        raise ValueError(f"target {target!r} is not supported: this compiler targets NVIDIA "
                         "GPUs (cuda) and the CPU interpreter (cpu)")
    raise ValueError(f"unknown target {target!r}; use 'auto', 'cpu', 'cuda' or "
                     "'cuda -arch=sm_90a'")


def _cuda_arch(target, options) -> Optional[str]:
    """The architecture the options of a cuda target name (None: the current GPU's). Every
    word must be understood: `cuda -arch=sm_90a junk` is an error, not sm_90a."""
    arch = None
    for word in options:
        key, eq, value = word.lstrip("-").partition("=")
        if not word.startswith("-") and _ARCH.fullmatch(word):
            key, value = "arch", word  # "cuda sm_80"
        elif not word.startswith("-") or key not in _TVM_OPTIONS or not eq:
            raise ValueError(f"target {target!r}: {word!r} is not an option this compiler "
                             "knows; a cuda target is 'cuda' or 'cuda -arch=sm_XY' (sm_90a for "
                             "Hopper's wgmma and TMA)")
        if key in ("arch", "mcpu"):
            if not _ARCH.fullmatch(value):
                raise ValueError(f"target {target!r}: {value!r} is not an architecture; write "
                                 "sm_ followed by the compute capability, e.g. sm_80, sm_90a")
            arch = value
    if arch == "sm_90":  # as the reference: Hopper code uses wgmma/TMA, which need sm_90a
        arch = "sm_90a"
    return arch


def _parse_target_dict(spec: dict) -> Target:
    """The reference's dictionary form, `{"kind": "cuda", "arch": "sm_80"}` (TVM's target
    configuration): "kind" picks the target as the string form does, "arch" the GPU."""
    unknown = set(spec) - {"kind", "arch", "keys", "tag", "host", "libs"}
    if unknown:  # TVM rejects keys a target kind does not have
        raise ValueError(f"target dictionary {spec!r}: unknown keys: {sorted(unknown)} (a "
                         "target dictionary has a 'kind' and optionally an 'arch')")
    kind = spec.get("kind")
    if not isinstance(kind, str):
        raise ValueError(f"target dictionary {spec!r} needs a 'kind' (e.g. 'cuda' or 'cpu')")
    arch = spec.get("arch")
    if kind.lower() == "cuda" and arch is not None:
        if not isinstance(arch, str) or not _ARCH.fullmatch(arch.strip().lower()):
            raise ValueError(f"target dictionary {spec!r}: 'arch' must look like 'sm_90a' or "
                             "'sm_80'")
        # through the string form, which also reads sm_90 as sm_90a (as the reference)
        return parse_target(f"cuda -arch={arch.strip().lower()}")
    return parse_target(kind)


def resolve_auto(target: Target) -> Target:
    """The concrete target of 'auto' on this machine."""
    if target.kind != "auto":
        return target
    if gpu_available():
        return Target("cuda", device_arch())
    return Target("cpu")
