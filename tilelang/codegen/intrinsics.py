"""How each IR `Call` op is written in CUDA C++ (a table, one entry per op family).

Math functions map to overloads in the device library (`tl::exp(x)` works for float, double,
half_t and bfloat16_t), so codegen never branches on dtypes for them. Lowered device
intrinsics (cp.async, gemm templates, warp reductions, printing) are `call_extern` calls whose
first argument is the C++ callee text.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..transform.analysis.device_ops import ATOMIC_RMW, ATOMIC_VECTOR_ADD
from .ptx import PTX_RENDERERS

_MATH = {"exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "expm1", "tanh", "sin",
         "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "erf", "sigmoid", "rsqrt",
         "floor", "ceil", "round", "trunc", "nearbyint", "rcp", "sqrt", "abs", "pow", "fmod",
         "atan2", "isnan", "isinf", "isfinite", "max_nan", "min_nan"}

_FAST = {"exp": "fast_exp", "exp2": "fast_exp2", "log": "fast_log", "log2": "fast_log2",
         "sin": "fast_sin", "cos": "fast_cos", "tanh": "fast_tanh", "rsqrt": "rsqrt",
         "sigmoid": "fast_sigmoid"}


# fast-math intrinsics: CUDA's approximate float32 functions; other types use the accurate ones
_FAST_INTRINSICS = {"__exp": ("__expf", "exp"), "__exp10": ("__exp10f", "exp10"),
                    "__log": ("__logf", "log"), "__log2": ("__log2f", "log2"),
                    "__log10": ("__log10f", "log10"), "__sin": ("__sinf", "sin"),
                    "__cos": ("__cosf", "cos"), "__tan": ("__tanf", "tan")}

_WARP_REDUCE_OPS = {"warp_reduce_sum": "SumOp", "warp_reduce_max": "MaxOp",
                    "warp_reduce_min": "MinOp", "warp_reduce_bitand": "BitAndOp",
                    "warp_reduce_bitor": "BitOrOp"}


# warp shuffles: the CUDA intrinsic of each, called directly on the types it takes as they are
# (others go through tl/reduce.cuh, which moves 8/16-bit values in 32-bit registers)
_SHUFFLES = {"shfl_xor": "__shfl_xor_sync", "shfl_down": "__shfl_down_sync",
             "shfl_up": "__shfl_up_sync", "shfl_sync": "__shfl_sync"}
_WARP_NATIVE = ("int32", "uint32", "int64", "uint64", "float32", "float64")

# programmatic dependent launch: T.pdl_trigger / T.pdl_sync
_PDL = {"pdl_trigger": "cudaTriggerProgrammaticLaunchCompletion",
        "pdl_sync": "cudaGridDependencySynchronize"}

# warp and block votes: (CUDA intrinsic, result zero-extended to 64 bits)
_VOTES = {"any_sync": ("__any_sync", False), "all_sync": ("__all_sync", False),
          "ballot_sync": ("__ballot_sync", True), "activemask": ("__activemask", True),
          "syncthreads_count": ("__syncthreads_count", False),
          "syncthreads_and": ("__syncthreads_and", False),
          "syncthreads_or": ("__syncthreads_or", False)}


def _bit_count(p, c: ir.Call) -> str:
    """popcount / clz on the unsigned bits of the operand's width (__popc/__popcll,
    __clz/__clzll); narrow types are zero-extended to 32 bits."""
    from .cuda import ctype

    src = c.args[0].dtype
    x = p.expr(c.args[0])
    if src.bits == 64:
        bits = f"(unsigned long long)({x})"
        text = f"__popcll({bits})" if c.op == "popcount" else f"__clzll((long long){bits})"
    else:
        narrow = {8: "unsigned char", 16: "unsigned short"}.get(src.bits)
        bits = f"(unsigned int)({x})" if narrow is None else f"(unsigned int)({narrow})({x})"
        if c.op == "popcount":
            text = f"__popc({bits})"
        else:
            text = f"__clz((int){bits})"
            if src.bits < 32:
                text = f"({text} - {32 - src.bits})"
    return f"(({ctype(c.dtype)}){text})"


def _address(p, e) -> str:
    """`&buf[index]` of a Load (the element an atomic or extern call points at)."""
    if isinstance(e, ir.Load):
        if e.buffer in p.scalar_buffers:
            return f"(&{p.name(e.buffer)})"
        return f"(&{p.name(e.buffer)}[{p.flat_index(e.buffer, e.indices)}])"
    return p.expr(e)


# IEEE operations with a rounding mode: CUDA's correctly rounded intrinsics, by dtype ("{m}" is
# the mode: rn, rz, ru, rd); 16-bit floats have round-to-nearest forms only (the frontend checks)
_IEEE = {
    "float32": {"ieee_add": "__fadd_{m}", "ieee_sub": "__fsub_{m}", "ieee_mul": "__fmul_{m}",
                "ieee_fmaf": "__fmaf_{m}", "ieee_fdiv": "__fdiv_{m}", "ieee_frcp": "__frcp_{m}",
                "ieee_fsqrt": "__fsqrt_{m}", "ieee_frsqrt": "__frsqrt_rn"},
    "float64": {"ieee_add": "__dadd_{m}", "ieee_sub": "__dsub_{m}", "ieee_mul": "__dmul_{m}",
                "ieee_fmaf": "__fma_{m}", "ieee_fdiv": "__ddiv_{m}", "ieee_frcp": "__drcp_{m}",
                "ieee_fsqrt": "__dsqrt_{m}"},
    "half": {"ieee_add": "__hadd", "ieee_sub": "__hsub", "ieee_mul": "__hmul",
             "ieee_fmaf": "tl::hfma_rn", "ieee_fdiv": "tl::hdiv_rn", "ieee_frcp": "tl::hrcp_rn",
             "ieee_fsqrt": "tl::hsqrt_rn", "ieee_frsqrt": "tl::hrsqrt_rn"},
}


def _math_name(op: str, dtype) -> str:
    """The device-library function of a math op. Names follow what the reference's generated
    code calls, which users and tools grep for: float `abs` is `fabs`, 16-bit `tan` is `htan`,
    C's ties-away `round` is `RoundTiesAwayFromZero` (T.round itself is `nearbyint`)."""
    if op == "abs" and dtype.is_float:
        return "fabs"
    if op == "tan" and dtype.name in ("float16", "bfloat16"):
        return "htan"
    if op == "round":
        return "RoundTiesAwayFromZero"
    return op


def _ieee_call(p, c: ir.Call) -> str:
    mode = dict(c.attrs).get("rounding_mode", "rn")
    table = _IEEE["half" if c.dtype.bits == 16 else c.dtype.name]
    fn = table[c.op].format(m=mode)
    return f"{fn}({', '.join(p.expr(a) for a in c.args)})"


def render_call(p, c: ir.Call) -> str:
    op = c.op
    attrs = dict(c.attrs)
    if op in PTX_RENDERERS:
        return PTX_RENDERERS[op](p, c, _address)
    if op in _MATH:
        fn = _math_name(op, c.dtype)
        if p.fast_math and op in _FAST and c.dtype.name == "float32":
            fn = _FAST[op]
        return f"tl::{fn}({', '.join(p.expr(a) for a in c.args)})"
    if op in _FAST_INTRINSICS:
        fast, accurate = _FAST_INTRINSICS[op]
        fn = fast if c.dtype.name == "float32" else f"tl::{_math_name(accurate, c.dtype)}"
        return f"{fn}({p.expr(c.args[0])})"
    if op == "fast_rcp":
        fn = "fast_rcp" if c.dtype.name == "float32" else "rcp"
        return f"tl::{fn}({p.expr(c.args[0])})"
    if op.startswith("ieee_"):
        return _ieee_call(p, c)
    if op in ("popcount", "clz"):
        return _bit_count(p, c)
    if op in _WARP_REDUCE_OPS:
        return f"tl::warp_allreduce<tl::{_WARP_REDUCE_OPS[op]}, 31u>({p.expr(c.args[0])})"
    if op == "fast_exp":
        return f"tl::fast_exp({p.expr(c.args[0])})"
    if op in _SHUFFLES:
        v, off, width = (p.expr(a) for a in c.args)
        if c.args[0].dtype.name in _WARP_NATIVE:  # CUDA's own overloads, full-warp mask
            return f"{_SHUFFLES[op]}(0xffffffffu, {v}, {off}, {width})"
        return f"tl::{op}({v}, {off}, {width})"  # 8/16-bit types travel in 32-bit words
    if op == "sync_threads":
        if c.args:  # a named barrier for part of the block (the reference's helper name)
            return f"tl::__sync_thread_partial({p.expr(c.args[0])}, {p.expr(c.args[1])})"
        return "__syncthreads()"
    if op == "named_barrier_arrive":
        return f"tl::__named_barrier_arrive({p.expr(c.args[0])}, {p.expr(c.args[1])})"
    if op == "sync_warp":
        return "__syncwarp()"
    if op == "num_blocks":  # the launched grid's x extent (a grid sized at the launch)
        return "((int)gridDim.x)"
    if op in _PDL:
        # CUDA's device API from sm_90 on (griddepcontrol); before it, no-ops in tl/barrier.cuh
        return f"{_PDL[op]}()" if p.sm >= 90 else f"tl::{op}()"
    if op in ("match_any_sync", "match_all_sync"):
        mask, v = (p.expr(a) for a in c.args)
        if c.args[1].dtype.name in _WARP_NATIVE:
            if op == "match_any_sync":
                return f"__match_any_sync({mask}, {v})"
            # the predicate output is dropped (T.match_all_sync returns the mask alone)
            return f"[&] {{ int pred_; return __match_all_sync({mask}, {v}, &pred_); }}()"
        fn = "tl::match_any" if op == "match_any_sync" else "tl::match_all"
        return f"{fn}({mask}, {v})"  # 8/16-bit types compared as 32-bit words
    if op == "ffs":
        x = c.args[0]
        if x.dtype.bits == 64:
            return f"__ffsll((long long)({p.expr(x)}))"
        return f"__ffs((int)({p.expr(x)}))"
    if op == "fns":
        return f"__fns({', '.join(p.expr(a) for a in c.args)})"
    if op in _VOTES:
        fn, wide = _VOTES[op]
        text = f"{fn}({', '.join(p.expr(a) for a in c.args)})"
        return f"((uint64_t){text})" if wide else text
    if op in ATOMIC_RMW:
        order = attrs.get("memory_order", "relaxed")
        target, value = c.args
        extra = "" if order == "relaxed" else f", tl::MemoryOrder::{order}"
        return f"tl::{op}({_address(p, target)}, {p.expr(value)}{extra})"
    if op in ATOMIC_VECTOR_ADD:
        dst, src = c.args
        src_text = _address(p, src) if isinstance(src, ir.Load) else p.expr(src)
        return f"tl::{op}({_address(p, dst)}, {src_text})"
    if op == "atomic_load":
        return f"tl::atomic_load({_address(p, c.args[0])})"
    if op == "ldg":  # the element read through the read-only data cache
        return _ldg(p, c.args[0])
    if op == "atomic_store":
        return f"tl::atomic_store({_address(p, c.args[0])}, {p.expr(c.args[1])})"
    if op == "call_extern":
        name = c.args[0]
        args = [_extern_arg(p, a) for a in c.args[1:]]
        if attrs.get("shared_window"):
            args[0] = _shared_window_address(p, c.args[1]) or args[0]
        return f"{name}({', '.join(args)})"
    if op == "address_of":
        return _address(p, c.args[0])
    if op == "address_of_param":
        return f"(&{p.name(c.args[0])})"
    if op == "access_ptr":
        from .cuda import _PREC

        buf, offset = c.args
        off = p.expr(offset, _PREC["add"])  # `(buf + (i >> 1))`, never `(buf + i) >> 1`
        return f"({p.name(buf)} + {off})" if off != "0" else p.name(buf)
    if op == "broadcast":
        from .cuda import ctype

        return f"tl::broadcast<{ctype(c.args[0].dtype)}, {c.dtype.lanes}>({p.expr(c.args[0])})"
    if op == "reinterpret":
        from .cuda import ctype

        value, src = c.args[0], c.args[0].dtype
        text = p.expr(value)
        if src.is_int and src.bits < 32 and src.lanes == 1 and not isinstance(value, ir.Load):
            # C++ promotes narrow integer arithmetic to int: cast back to the operand's own
            # type, whose size is the one reinterpreted
            text = f"(({ctype(src)})({text}))"
        return f"tl::bit_cast<{ctype(c.dtype)}>({text})"
    if op == "comment":
        return f"/* {c.args[0]} */"
    if op == "set_max_nreg":
        n, inc = c.args
        kind = "inc" if inc.value else "dec"
        return f"tl::setmaxnreg_{kind}<{n.value}>()"
    raise NotImplementedError(f"codegen: no CUDA rendering for call {op!r}")


def _shared_window_address(p, pointer) -> str | None:
    """`(tl::smem_addr(tile) + (uint32_t)(i) * size)` for `address_of(tile[i])` of a shared
    tile of whole-byte elements; None for anything else (written as a pointer). Used for the
    first argument of extern calls marked `shared_window` (T.ptx_cp_async's; tl/copy.cuh
    takes either form).

    The window address plus a byte offset is 32-bit arithmetic, in which ptxas folds each
    constant part into the instruction. `&tile[i]` is a 64-bit generic pointer that NVVM (under
    NVRTC) adds and then truncates, so ptxas folds nothing and keeps every distinct address of
    an unrolled copy in a register of its own: the sparse MLA producer (80 registers) hoisted
    its 72 cp.async addresses out of its loop, spilled them, and could not issue its index
    loads early. T.copy's lowered cp.async keep pointers: on an H200 (2026-11-27) the window
    form left 28 such kernels within noise and slowed example_gemv's pipelined kernel 16.1 ->
    22.3 us (ptxas then issued its vector load of x after the refill, not before the wait)."""
    if not (isinstance(pointer, ir.Call) and pointer.op == "address_of"
            and isinstance(pointer.args[0], ir.Load)):
        return None
    load = pointer.args[0]
    buf = load.buffer
    if buf.scope not in ("shared", "shared.dyn") or buf in p.scalar_buffers \
            or buf.dtype.bits % 8:
        return None
    index = p.flat_index(buf, load.indices)
    return f"(tl::smem_addr({p.name(buf)}) + (uint32_t)({index}) * {buf.dtype.bytes}u)"


def _extern_arg(p, a) -> str:
    if isinstance(a, str):
        return a
    if isinstance(a, ir.Buffer):
        return p.name(a)
    return p.expr(a)


def _ldg(p, value) -> str:
    """`__ldg(&x[i])`; a load guarded by the bounds predicate (`c ? x[i] : 0`) reads through
    the cache under its guard, and anything else is an ordinary expression (the cache is a
    hint, never a meaning)."""
    if isinstance(value, ir.Load):
        return f"__ldg(&({p.expr(value)}))"
    if isinstance(value, ir.Select) and isinstance(value.true_value, ir.Load):
        return (f"(({p.expr(value.cond)}) ? {_ldg(p, value.true_value)} : "
                f"{p.expr(value.false_value)})")
    return p.expr(value)
