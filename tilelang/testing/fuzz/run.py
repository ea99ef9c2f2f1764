"""Running a fuzz case on a backend and classifying the outcome.

`run_case(case, target, inputs)` compiles `main` for `target` ("cpu", "cuda", "cuda -arch=...")
with every parameter passed explicitly (no out_idx), runs it on tensors made from `inputs`
(outputs pre-filled with poison) and returns {name: numpy array} of the "out"/"inout"
parameters. `classify(exc)` sorts a compile failure into "rejected" (a located `KernelError`: the
compiler refused the program and said where) or "crash" (anything else: an internal error such
as KeyError/AttributeError, an unlocated error, or generated CUDA that NVRTC refuses).
"""

from __future__ import annotations

import numpy as np

from .case import Case, load, poison, to_numpy, to_torch

def arrays_for(case: Case, inputs: dict) -> dict:
    """All parameters: inputs as given, outputs poisoned."""
    out = dict(inputs)
    for p in case.params:
        if p.role == "out":
            out[p.name] = poison(p.shape, p.dtype)
    return out


def compile_case(case: Case, target: str):
    import tilelang

    return tilelang.compile(load(case), target=target)


def run_kernel(case: Case, kernel, inputs: dict, device="cpu") -> dict:
    arrs = arrays_for(case, inputs)
    tensors = [to_torch(arrs[p.name], p.dtype, device) for p in case.params]
    kernel(*tensors)
    if device != "cpu":
        import torch

        torch.cuda.synchronize()
    return {p.name: to_numpy(t) for p, t in zip(case.params, tensors) if p.role != "in"}


def run_case(case: Case, target: str, inputs: dict) -> dict:
    kernel = compile_case(case, target)
    device = "cpu" if target == "cpu" else "cuda"
    return run_kernel(case, kernel, inputs, device)


def classify(exc: BaseException) -> str:
    from ...errors import KernelError

    from ...runtime.compiler import CudaCompileError

    if isinstance(exc, KernelError) and not isinstance(exc, CudaCompileError):
        return "rejected"
    return "crash"


def expected(case: Case, inputs: dict) -> dict:
    return case.oracle({k: np.asarray(v) for k, v in inputs.items()})
