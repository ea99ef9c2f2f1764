"""`CPUAdapter`: the JIT backend that runs a kernel on the CPU interpreter.

`CPUAdapter(func, options)` compiles the PrimFunc into closures once (`execute.Program`) and
exposes `source` (the printed IR). `run(full_args, symbols, device, stream)` takes the
arguments in parameter order (torch CPU tensors or numpy arrays for buffers, Python numbers for
scalars) and writes results into the tensors in place. float16/float32/int tensors are shared
with numpy without copies; bfloat16/float8 tensors are converted to float32 arrays, run, and
copied back. Kernels containing injected CUDA (`T.call_extern`, `T.import_source`) are
rejected at construction with NotImplementedError, except the header-library calls the
interpreter models (mbarriers, fences: intrinsics.is_modeled_extern).
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import user_facing
from ..ir import nodes as ir
from ..ir.dtype import PACKED_GLOBAL
from ..ir.visitor import collect
from .evaluate import eval_int
from .execute import Program
from .intrinsics import is_modeled_extern
from .numerics import (NARROW_FLOATS, const_value, pack_fp4, pack_nibbles, poison_value,
                       unpack_fp4, unpack_nibbles)

__all__ = ["CPUAdapter"]

RANDOM_STREAM_CALLS = "tl::rng_"  # the header calls of T.rng_* (language/random.py)
_DEVICE_FN = re.compile(r"__device__[^;{(]*?\b(\w+)\s*\(")
_UNSIGNED_VIEW = {"uint16": "int16", "uint32": "int32", "uint64": "int64"}


def _reject_injected_cuda(func: ir.PrimFunc):
    externs = collect(func.body, lambda n: isinstance(n, ir.Call) and n.op == "call_extern"
                      and not (n.args and isinstance(n.args[0], str)
                               and is_modeled_extern(n.args[0])))
    if externs:
        names = sorted({str(c.args[0]) for c in externs if c.args})
        if any(n.startswith(RANDOM_STREAM_CALLS) for n in names):
            raise NotImplementedError(
                f"kernel {func.name} draws random numbers (T.rng_init / T.rng_rand / "
                "T.rng_rand_float): the random streams (Philox, tl/random.cuh) run on the GPU "
                "only; the CPU interpreter has no generator")
        raise NotImplementedError(
            f"kernel {func.name} contains injected CUDA (T.call_extern of "
            f"{', '.join(f'`{n}`' for n in names)}) and runs only on the GPU; the CPU "
            "interpreter cannot execute it")
    sources = func.attrs.get("import_source")
    if sources:
        names = [n for src in sources for n in _DEVICE_FN.findall(str(src))]
        what = f" defining {', '.join(f'`{n}`' for n in names)}" if names else ""
        raise NotImplementedError(
            f"kernel {func.name} contains injected CUDA (T.import_source{what}) and runs only "
            "on the GPU; the CPU interpreter cannot execute it")


class CPUAdapter:
    """Runs a PrimFunc with the numpy interpreter."""

    @user_facing
    def __init__(self, func: ir.PrimFunc, options: dict = None):
        self.func = func
        self.options = dict(options or {})
        self.source = str(func)
        _reject_injected_cuda(func)
        self.program = Program(func)

    @user_facing
    def run(self, full_args, symbols, device=None, stream=None) -> None:
        func = self.func
        if len(full_args) != len(func.params):
            raise ValueError(f"kernel {func.name} takes {len(func.params)} arguments, got "
                             f"{len(full_args)}")
        bufs, env, writeback = {}, {}, []
        for p, a in zip(func.params, full_args):
            if isinstance(p, ir.Buffer) and a is None:
                bufs[p] = self._null_buffer(p)
            elif isinstance(p, ir.Buffer):
                arr, back = _to_numpy(a, p)
                bufs[p] = arr
                if back:
                    writeback.append((a, arr, p.dtype))
            elif p.dtype.is_handle:
                env[p] = a
            else:
                env[p] = const_value(a, p.dtype)
        sizes = {}
        for var, val in (symbols or {}).items():
            sizes[var] = int(val)
        for p in func.params:  # sizes not given by the caller come from the tensors
            if isinstance(p, ir.Buffer):
                for d, s in enumerate(p.shape):
                    if isinstance(s, ir.Var) and s not in sizes:
                        sizes[s] = int(bufs[p].shape[d])
        for var, val in sizes.items():
            env.setdefault(var, const_value(val, var.dtype))
        for w in func.workspaces:
            shape = tuple(eval_int(s, sizes) for s in w.shape)
            bufs[w] = np.full(shape, poison_value(w.dtype), w.dtype.numpy)
        self.program.run(bufs, env)
        for tensor, arr, dt in writeback:
            import torch

            # through a detached view, as a GPU kernel writes memory: autograd does not see it
            # (a leaf that requires grad may be an argument)
            if dt.base in PACKED_GLOBAL:  # sub-byte elements, two to a byte
                codes = pack_fp4(arr) if dt.is_float else pack_nibbles(arr)
                tensor.detach().view(torch.uint8).copy_(torch.from_numpy(codes))
            else:
                tensor.detach().copy_(torch.from_numpy(arr).to(tensor.dtype))

    @staticmethod
    def _null_buffer(p: ir.Buffer):
        """A tensor argument passed as None: the call checks (CallPlan.unused_buffers) allow it
        only for a buffer the kernel never mentions, so an empty array stands in for it."""
        return np.empty((0,) * len(p.shape), p.dtype.numpy)

    def __repr__(self):
        return f"<CPUAdapter {self.func.name}>"


def _to_numpy(a, p: ir.Buffer):
    """(numpy storage for parameter p, whether it must be copied back into `a`)."""
    dt = p.dtype
    if isinstance(a, np.ndarray):
        if a.dtype != dt.numpy:
            raise TypeError(f"parameter {p.name}: expected a {dt} array (stored as "
                            f"{dt.numpy}), got {a.dtype}")
        return a, False
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        raise TypeError(f"parameter {p.name}: expected a numpy array, got {type(a).__name__}")
    if not isinstance(a, torch.Tensor):
        raise TypeError(f"parameter {p.name}: expected a tensor, got {type(a).__name__}")
    if a.device.type != "cpu":
        raise ValueError(f"parameter {p.name} is on {a.device}; the CPU interpreter needs CPU "
                         "tensors")
    t = a.detach()
    if dt.base in PACKED_GLOBAL:
        if t.dtype.itemsize != 1:
            raise TypeError(f"parameter {p.name}: {dt} elements come packed in a tensor of "
                            f"one-byte elements (int8 / uint8), got a tensor of {a.dtype}")
        codes = t.view(torch.uint8).numpy()
        return (unpack_fp4(codes) if dt.is_float else unpack_nibbles(codes, dt)), True
    if dt.name in NARROW_FLOATS:
        return t.float().numpy(), True
    if dt.name in _UNSIGNED_VIEW:
        try:
            return t.numpy(), False
        except TypeError:
            signed = getattr(torch, _UNSIGNED_VIEW[dt.name])
            return t.view(signed).numpy().view(dt.numpy), False
    arr = t.numpy()
    if arr.dtype != dt.numpy:
        raise TypeError(f"parameter {p.name}: expected {dt}, got a tensor of {a.dtype}")
    return arr, False
