"""`tilelang.utils.target`: the reference's `determine_target`, answered with this project's
targets (`"cuda -arch=sm_XY"` and `"cpu"`, the interpreter)."""

from __future__ import annotations

from ..jit.target import Target, gpu_available, parse_target, resolve_auto

SUPPORTED_TARGETS = {
    "auto": "the current GPU when there is one, else the CPU interpreter",
    "cuda": "NVIDIA GPU (`cuda -arch=sm_90a` generates code without a GPU)",
    "cpu": "the CPU interpreter (also spelled `c`, `llvm`)",
}


def describe_supported_targets() -> dict:
    """Target names and what they mean."""
    return dict(SUPPORTED_TARGETS)


def check_cuda_availability() -> bool:
    """Whether a CUDA GPU is visible."""
    return gpu_available()


def determine_target(target="auto", return_object: bool = False):
    """The target to compile for. `"auto"` gives the current GPU's (`"cuda -arch=sm_90a"`, ...)
    or `"cpu"` without a GPU; any other string is validated (ValueError for targets this
    compiler does not support, such as `"hip"`) and returned. `return_object=True` returns a
    `tilelang.jit.target.Target`."""
    if isinstance(target, dict):
        kind = str(target.get("kind", ""))
        arch = target.get("arch")
        target = f"{kind} -arch={arch}" if arch else kind
    if isinstance(target, Target):
        obj = target
        text = str(target)
    elif target is None or str(target).strip().lower() in ("auto", ""):
        obj = resolve_auto(Target("auto"))
        text = str(obj)
    else:
        text = str(target).strip()
        try:
            obj = parse_target(text)
        except RuntimeError:  # "cuda" without a visible GPU: a valid name all the same
            obj = Target("cuda")
    return obj if return_object else text
