"""The calling convention of a compiled kernel: which parameters the caller passes, which are
allocated as outputs, how symbolic sizes are bound, and the checks made before a launch.

`CallPlan(func, out_idx)` is built once per kernel; `plan.prepare(args, device_kind)` checks
the caller's arguments, binds the symbolic sizes, allocates outputs and workspaces and returns
the full argument list in parameter order. Every error names the parameter and raises before
anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir import nodes as ir
from ..ir.dtype import DType
from . import packed


@dataclass
class ParamInfo:
    index: int
    name: str
    kind: str  # "buffer" | "scalar"
    dtype: DType
    shape: tuple = ()
    strides: Optional[tuple] = None
    buffer: Optional[ir.Buffer] = None
    var: Optional[ir.Var] = None
    # sub-byte elements, passed packed in a byte tensor (jit/packed.py)
    packed: bool = False


def normalize_out_idx(out_idx, n_params: int, params) -> list:
    if out_idx is None:
        return []
    items = [out_idx] if isinstance(out_idx, int) else list(out_idx)
    out = []
    for i in items:
        if not isinstance(i, int) or isinstance(i, bool):
            raise ValueError(f"out_idx entries must be ints, got {i!r}")
        j = i + n_params if i < 0 else i
        if not 0 <= j < n_params:
            raise ValueError(f"out_idx {i} is out of range for {n_params} parameters")
        if j in out:
            raise ValueError(f"out_idx {i} appears twice")
        if not isinstance(params[j], ir.Buffer):
            raise ValueError(f"out_idx {i} does not refer to a buffer parameter "
                             f"({params[j].name} is a scalar)")
        out.append(j)
    return out


def _torch():
    import torch

    return torch


def eval_shape_expr(e, symbols: dict):
    """Evaluate a shape expression given symbol values (ints)."""
    if isinstance(e, int):
        return e
    from ..interp.evaluate import eval_int

    return eval_int(e, symbols)


class CallPlan:
    def __init__(self, func: ir.PrimFunc, out_idx=None):
        self.func = func
        self.name = func.name
        self.params = []
        for i, p in enumerate(func.params):
            if isinstance(p, ir.Buffer):
                self.params.append(ParamInfo(i, p.name, "buffer", p.dtype, p.shape, p.strides,
                                             buffer=p, packed=packed.pack_factor(p.dtype) > 1))
            else:
                self.params.append(ParamInfo(i, p.name, "scalar", p.dtype, var=p))
        if out_idx is None:
            outs = []
        elif isinstance(out_idx, int) and not isinstance(out_idx, bool):
            outs = [out_idx]  # `out_idx=-1` (and `out_idx=0`, which is falsy)
        else:
            outs = list(out_idx)
        # lazy-JIT outputs (T.empty) are outputs too
        for o in func.outputs:
            for i, p in enumerate(func.params):
                if p is o and i not in outs:
                    outs.append(i)
        self.out_idx = normalize_out_idx(outs, len(self.params), func.params)
        out_set = set(self.out_idx)
        self.inputs = [p for p in self.params if p.index not in out_set]
        self.outputs = [self.params[i] for i in self.out_idx]
        self.symbols = self._symbol_sources()

    @property
    def unused_buffers(self) -> frozenset:
        """Indices of tensor parameters the kernel body never mentions (an optional input
        whose use was traced out): the only ones that may be passed as None, on every
        backend, so that a None can never reach a kernel that would dereference it."""
        unused = self.__dict__.get("_unused")
        if unused is None:
            from ..ir.visitor import collect

            params = {id(p.buffer): p.index for p in self.params if p.kind == "buffer"}
            seen = set()
            for n in collect(self.func.body, lambda n: isinstance(n, ir.Buffer)
                             or isinstance(getattr(n, "buffer", None), ir.Buffer)):
                buf = n if isinstance(n, ir.Buffer) else n.buffer
                for b in (buf, getattr(buf, "view_of", None)):
                    if id(b) in params:
                        seen.add(params[id(b)])
            unused = self.__dict__["_unused"] = frozenset(set(params.values()) - seen)
        return unused

    def _symbol_sources(self):
        """For each symbolic size: the first (input param, dim or stride) that carries it."""
        return {var: found[0] for var, found in self._all_symbol_sources().items()}

    def _all_symbol_sources(self):
        """For each symbolic size: every (kind, input param, dim) that carries it, in order
        (a tensor passed as None gives none: the next one is used)."""
        sources: dict = {}
        for p in self.inputs:
            if p.kind == "scalar" and p.dtype.is_int:
                sources.setdefault(p.var, []).append(("scalar", p.index, None))
        for p in self.inputs:
            if p.kind != "buffer":
                continue
            for d, s in enumerate(p.shape):
                if isinstance(s, ir.Var):
                    sources.setdefault(s, []).append(("shape", p.index, d))
            for d, s in enumerate(p.strides or ()):
                if isinstance(s, ir.Var):
                    sources.setdefault(s, []).append(("stride", p.index, d))
        # a size met only inside an extent `a * n + b` (T.Tensor((n * 4,), ...)) is solved
        # from that extent, as the reference's argument binder does
        for p in self.inputs:
            if p.kind != "buffer":
                continue
            for d, s in enumerate(p.shape):
                solved = _solvable(s, sources)
                if solved is not None:
                    var, a, b = solved
                    sources.setdefault(var, []).append(("linear", p.index, (d, a, b)))
        return sources

    # ---- checks -----------------------------------------------------------------------------
    def _fail(self, exc, p: ParamInfo, what: str):
        raise exc(f"kernel {self.name} parameter {p.name!r}: {what}")

    def prepare(self, args, device_kind: str, device=None, allocate=True):
        """Check `args` (the caller's inputs), bind symbols, allocate outputs. Returns
        (full argument list in parameter order, symbol values, output tensors)."""
        torch = _torch()
        if len(args) != len(self.inputs):
            raise ValueError(f"Kernel expected {len(self.inputs)} inputs, but {len(args)} are "
                             f"provided. (inputs: {', '.join(p.name for p in self.inputs)})")
        full = [None] * len(self.params)
        for p, a in zip(self.inputs, args):
            full[p.index] = a
        tensor_device = None
        for p in self.inputs:
            a = full[p.index]
            if p.kind == "scalar":
                full[p.index] = self._check_scalar(p, a)
                continue
            if a is None and p.index in self.unused_buffers:
                continue  # a null pointer for a tensor the kernel never mentions
            if self._is_address(p, a):
                continue  # made a tensor once the sizes are bound (below)
            if not isinstance(a, torch.Tensor):
                why = " (None, a null pointer, is accepted only for a tensor the kernel never " \
                      "mentions)" if a is None else ""
                self._fail(TypeError, p, f"expects a torch.Tensor of {p.dtype} with "
                                         f"{len(p.shape)} dims, got {type(a).__name__}{why}")
            if a.dim() != len(p.shape):
                self._fail(ValueError, p, f"ndim mismatch, expected {len(p.shape)}, got "
                                          f"{a.dim()} (shape {tuple(a.shape)})")
            if not _dtype_matches(a.dtype, p.dtype) and not (
                    p.packed and packed.holds_packed(a.dtype, p.dtype)):
                self._fail(ValueError, p, f"dtype mismatch, expected {p.dtype}, got "
                                          f"{str(a.dtype).replace('torch.', '')}")
            dev = a.device
            if device_kind == "cuda":
                if dev.type != "cuda":
                    self._fail(ValueError, p, f"is on {dev}, but this kernel runs on the GPU; "
                                              "move it with .cuda()")
            elif dev.type != "cpu":
                self._fail(ValueError, p, f"is on {dev}, but this kernel runs on the CPU "
                                          "interpreter")
            if tensor_device is None:
                tensor_device = dev
            elif dev != tensor_device:
                self._fail(ValueError, p, f"is on {dev} but an earlier argument is on "
                                          f"{tensor_device}; all tensors must be on one device")
        symbols = self._bind_symbols(full)
        for p in self.inputs:
            if self._is_address(p, full[p.index]):
                full[p.index] = self._tensor_at(p, full[p.index], symbols, device_kind)
        for p in self.inputs:
            if p.kind == "buffer" and full[p.index] is not None:
                a = full[p.index]
                shape, strides = self._check_shape(p, a, symbols)
                self._check_index_range(p, shape, strides)
        self.check_assumptions(symbols)
        if device is None:
            device = tensor_device if tensor_device is not None else (
                torch.device("cuda", torch.cuda.current_device()) if device_kind == "cuda"
                else torch.device("cpu"))
        outputs = []
        if allocate:
            for p in self.outputs:
                shape = tuple(eval_shape_expr(s, symbols) for s in p.shape)
                self._check_index_range(p, shape, _row_major_strides(shape))
                if p.packed:
                    t = self._packed_output(p, shape, device)
                else:
                    t = torch.empty(shape, dtype=p.dtype.torch, device=device)
                full[p.index] = t
                outputs.append(t)
        return full, symbols, outputs, device

    def _is_address(self, p: ParamInfo, a) -> bool:
        """An int passed for a `T.ptr` parameter given its shape by `T.make_tensor`."""
        return isinstance(a, int) and not isinstance(a, bool) and p.kind == "buffer" and \
            p.name in self.func.attrs.get("address_params", ())

    def _tensor_at(self, p: ParamInfo, address: int, symbols: dict, device_kind: str):
        """The tensor of `p`'s shape and dtype at a raw address (device memory for a GPU
        kernel, host memory for the interpreter). Its sizes must come from other arguments."""
        import ctypes

        torch = _torch()
        if address == 0:
            self._fail(ValueError, p, "got the null address 0")
        try:
            shape = tuple(eval_shape_expr(s, symbols) for s in p.shape)
        except KeyError:
            self._fail(TypeError, p, "an address carries no sizes: pass a tensor, or give the "
                                     "sizes as scalar arguments")
        if p.strides is not None or p.packed:
            self._fail(TypeError, p, "an address is accepted for a row-major tensor of whole "
                                     "bytes only; pass a tensor")
        nbytes = p.dtype.bytes
        for n in shape:
            nbytes *= n
        if device_kind == "cuda":
            class _Memory:  # torch reads device memory through this interface
                __cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                            "data": (address, False), "version": 2}
            raw = torch.as_tensor(_Memory(), device="cuda")
        elif nbytes:
            raw = torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(address),
                                   dtype=torch.uint8)
        else:
            raw = torch.empty(0, dtype=torch.uint8)
        return raw.view(p.dtype.torch).view(shape)

    def _packed_output(self, p: ParamInfo, shape, device):
        """An output of sub-byte elements: a byte tensor holding them packed."""
        k = packed.pack_factor(p.dtype)
        if not shape or shape[-1] % k:
            self._fail(ValueError, p, f"an output of {p.dtype} elements is allocated packed, "
                                      f"{k} to a byte: its last dimension must be a multiple of "
                                      f"{k}, got shape {shape}")
        # int4 in int8 bytes (the reference's storage dtype), the other types in uint8
        storage = _torch().int8 if p.dtype.base == "int4" else _torch().uint8
        return _torch().empty(shape[:-1] + (shape[-1] // k,), dtype=storage, device=device)

    def _check_scalar(self, p: ParamInfo, a):
        torch = _torch()
        if isinstance(a, torch.Tensor) and a.dim() == 0:
            a = a.item()
        if p.dtype.is_float:
            if isinstance(a, (bool, int, float)) or _is_np_number(a):
                return float(a)
            self._fail(TypeError, p, f"expected float, got {type(a).__name__}")
        if p.dtype.is_int or p.dtype.is_bool:
            if isinstance(a, (bool, int)) or _is_np_int(a):
                a = int(a)
                lo, hi = p.dtype.min_value(), p.dtype.max_value()
                if not p.dtype.is_bool and not lo <= a <= hi:
                    self._fail(ValueError, p, f"value {a} does not fit in {p.dtype}")
                return a
            self._fail(TypeError, p, f"expected integer, got {type(a).__name__}")
        if p.dtype.is_handle:
            return a
        return a

    def check_assumptions(self, symbols):
        """The function's T.assume conditions on its sizes and scalar arguments hold for this
        call (RuntimeError "Assume: ...", the reference's message, otherwise)."""
        for cond in self.func.attrs.get("host_assumptions", ()):
            if not eval_shape_expr(cond, symbols):
                raise RuntimeError(f"Assume: {cond} does not hold for this call (kernel "
                                   f"{self.name}: {_symbol_values(cond, symbols)})")

    def _bind_symbols(self, full):
        symbols = {}
        for var, (kind, idx, d) in self.symbols.items():
            a = full[idx]
            if a is None:  # the tensor carrying this size was passed as None: another one
                kind, idx, d = self._source_not_none(var, full)
                a = full[idx]
            if kind == "scalar":
                symbols[var] = int(a)
                continue
            p = self.params[idx]
            if p.packed:  # sizes in elements, not bytes
                a = _LogicalSizes(*_arg_sizes(p, a))
            if kind == "linear":
                dim, coef, const = d
                extent = int(a.shape[dim])
                if (extent - const) % coef:
                    self._fail(ValueError, self.params[idx],
                               f"shape[{dim}] = {extent} is not {coef} * {var.name} + {const} "
                               "for any integer size")
                symbols[var] = (extent - const) // coef
                continue
            val = int(a.shape[d]) if kind == "shape" else int(a.stride(d))
            dt = var.dtype
            if dt.is_int and not dt.min_value() <= val <= dt.max_value():
                # the kernel computes with this size in its declared (32-bit) type: it would
                # wrap around and index the wrong memory
                self._fail(ValueError, self.params[idx],
                           f"{kind}[{d}] = {val} does not fit the {dt} size `{var.name}`; "
                           f"declare it T.dynamic(\"{var.name}\", \"int64\")")
            symbols[var] = val
        return symbols

    def _source_not_none(self, var, full):
        for kind, idx, d in self._all_symbol_sources()[var]:
            if full[idx] is not None:
                return kind, idx, d
        names = ", ".join(repr(self.params[idx].name)
                          for _, idx, _ in self._all_symbol_sources()[var])
        raise ValueError(f"kernel {self.name}: the size `{var.name}` has no value: every "
                         f"tensor that carries it ({names}) was passed as None")

    def _check_index_range(self, p: ParamInfo, shape, strides):
        """A buffer whose sizes are all 32-bit symbols is indexed with 32-bit arithmetic
        (SEMANTICS §10): its farthest element must lie within int32, else offsets wrap."""
        syms = [s for s in tuple(p.shape) + tuple(p.strides or ()) if not isinstance(s, int)]
        if not syms:
            return  # static shapes: the compiler chooses the index width
        for s in syms:
            for v in _vars_of(s):
                if v.dtype.bits > 32:
                    return
        if any(int(n) == 0 for n in shape):
            return
        span = sum((int(n) - 1) * abs(int(st)) for n, st in zip(shape, strides)) + 1
        if span > 2 ** 31 - 1:
            names = ", ".join(sorted({v.name for s in syms for v in _vars_of(s)}))
            self._fail(ValueError, p,
                       f"spans {span} elements (shape {tuple(int(n) for n in shape)}), beyond "
                       f"the 32-bit index arithmetic of this kernel (its sizes {names} are "
                       f"int32); split the tensor, or declare the sizes with "
                       f"T.dynamic(..., \"int64\")")

    def _check_shape(self, p: ParamInfo, a, symbols):
        """Tensor `a`'s sizes against p's; returns them (shape, strides), in elements of p's
        type."""
        shape, strides = _arg_sizes(p, a)
        for d, s in enumerate(p.shape):
            expect = eval_shape_expr(s, symbols)
            if int(shape[d]) != expect:
                name = s.name if isinstance(s, ir.Var) else str(s)
                extra = f" (= {name})" if not isinstance(s, int) else ""
                self._fail(ValueError, p, f"shape[{d}] mismatch: expected {expect}{extra}, got "
                                          f"{shape[d]} (shape {tuple(shape)}){_packing(p, a)}")
        if p.strides is not None:
            for d, s in enumerate(p.strides):
                expect = eval_shape_expr(s, symbols)
                if shape[d] != 1 and int(strides[d]) != expect:
                    self._fail(ValueError, p, f"strides[{d}] mismatch: expected {expect}, got "
                                              f"{strides[d]}")
        elif not _is_row_major(shape, strides):
            self._fail(ValueError, p, f"must be contiguous (row-major), got strides "
                                      f"{tuple(strides)}; call .contiguous() or annotate "
                                      "the parameter with T.StridedTensor")
        return shape, strides


def _vars_of(e) -> list:
    """The symbolic size variables an expression mentions."""
    if isinstance(e, ir.Var):
        return [e]
    from ..ir.visitor import collect

    return collect(e, lambda n: isinstance(n, ir.Var))


def _row_major_strides(shape) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(out))


def _is_np_number(a):
    import numpy as np

    return isinstance(a, np.number)


def _is_np_int(a):
    import numpy as np

    return isinstance(a, (np.integer, np.bool_))


def _dtype_matches(torch_dtype, dt: DType) -> bool:
    try:
        return DType(torch_dtype) is dt
    except ValueError:
        return False


def _solvable(extent, known):
    """(var, a, b) when `extent` is a * var + b for one size var not yet bound (ints a != 0,
    b), else None."""
    if not isinstance(extent, ir.Expr) or isinstance(extent, (ir.Var, ir.Const)):
        return None
    free = [v for v in _vars_of(extent) if v not in known]
    if len(free) != 1 or len(set(_vars_of(extent))) != 1:
        return None
    from ..arith import Analyzer

    linear = Analyzer().detect_linear(extent, free[0])
    if linear is None:
        return None
    a, rest = linear
    if not isinstance(a, int) or a == 0:
        return None
    b = ir.int_value(Analyzer().simplify(rest))
    return None if b is None else (free[0], a, b)


def _symbol_values(cond, symbols) -> str:
    from ..ir.visitor import collect

    names = {v: symbols[v] for v in collect(cond, lambda n: isinstance(n, ir.Var))
             if v in symbols}
    return ", ".join(f"{v.name} = {n}" for v, n in names.items())


def _arg_sizes(p: ParamInfo, a):
    """(shape, strides) of tensor `a` in elements of parameter p's type: a byte tensor that
    carries packed sub-byte elements counts them (jit/packed.py)."""
    if p.packed and packed.holds_packed(a.dtype, p.dtype):
        return packed.logical_shape(a.shape, p.dtype), packed.logical_strides(a.stride(), p.dtype)
    return a.shape, a.stride()


class _LogicalSizes:
    """A tensor's sizes in elements, read as `_bind_symbols` reads a tensor's."""

    __slots__ = ("shape", "strides")

    def __init__(self, shape, strides):
        self.shape, self.strides = shape, strides

    def stride(self, d):
        return self.strides[d]


def _is_row_major(shape, strides) -> bool:
    if any(int(n) == 0 for n in shape):  # no element is addressed: any strides do (as torch)
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _packing(p: ParamInfo, a) -> str:
    """How a packed parameter's tensor is sized, for a shape mismatch of one."""
    if not p.packed or not packed.holds_packed(getattr(a, "dtype", None), p.dtype):
        return ""
    k = packed.pack_factor(p.dtype)
    return (f"; {p.dtype} values come packed {k} to a byte, so the shape counts values: the "
            f"byte tensor {tuple(a.shape)} holds {tuple(_arg_sizes(p, a)[0])} of them and a "
            f"last dimension of {p.dtype} n takes a byte tensor of last dimension n / {k}")
