"""Warp-level tensor-core instructions written by hand: `T.ptx_ldmatrix` and `T.ptx_mma`.

These are what the reference's intrinsics emitters (`tilelang.cuda.intrinsics`'s
`TensorCoreIntrinEmitter`: `ldmatrix_a/b`, `mma`) issue; `T.gemm` does the same work without
them. Every lane of a warp executes each call (the instructions are warp-collective).

* `T.ptx_ldmatrix(trans, num, T.access_ptr(S[i, j], "r"), T.access_ptr(L[k], "w"))`: ldmatrix
  of `num` (1, 2 or 4) 8 x 8 matrices from shared memory: lane t gives the start of row t % 8
  of matrix t // 8 (16 bytes: 8 elements of 16 bits, 16 of 8 bits); each lane receives 4 bytes
  per matrix, stored at L[k], L[k+1], ... (matrix m's bytes first for m = 0, 1, ...). Lane t
  gets bytes 4·(t % 4) .. +3 of row t // 4; with `trans` (16-bit only) the two elements of
  column t // 4 in rows 2·(t % 4) and +1. 32-bit elements (TF32 operands) move as pairs of
  16-bit halves, one element per lane and matrix.
* `T.ptx_mma(dtype, "m16n8k16", "row", "col", a_type, b_type, c_type, A.data, a_off, B.data,
  b_off, C.data, c_off, saturate)`: D = A @ B + C for one m16n8kK tile, the operands in the
  lanes' registers as mma.sync lays them out (tilelang/layout/mma.py): A's elements at
  A[a_off ...], B's at B[b_off ...], C/D at C[c_off ...] of per-thread (`T.alloc_local`) arrays.
  Shapes and types: m16n8k16 fp16/bf16 -> fp32 (fp16 -> fp16 too), m16n8k8 tf32 -> fp32,
  m16n8k32 int8/uint8 -> int32 and e4m3/e5m2 -> fp32.

Both run on the CPU interpreter with the same meaning (interp/ptx.py) and render to the device
library's wrappers (codegen/ptx.py, tl/ptx_compat.cuh).
"""

from __future__ import annotations

from ..frontend.builder import emit, error
from ..ir import nodes as ir
from ..ir.dtype import DType

__all__ = ["ptx_ldmatrix", "ptx_mma", "MMA_KINDS"]

_VOID = DType("void")

# (shape, A/B type, C type) -> (A/B element dtype names, accumulator dtype name, k)
MMA_KINDS = {
    ("m16n8k16", "fp16", "fp32"): (("float16",), "float32", 16),
    ("m16n8k16", "bf16", "fp32"): (("bfloat16",), "float32", 16),
    ("m16n8k16", "fp16", "fp16"): (("float16",), "float16", 16),
    ("m16n8k8", "tf32", "fp32"): (("float32",), "float32", 8),
    ("m16n8k32", "int8", "int32"): (("int8",), "int32", 32),
    ("m16n8k32", "uint8", "int32"): (("uint8",), "int32", 32),
    ("m16n8k32", "e4m3", "fp32"): (("float8_e4m3",), "float32", 32),
    ("m16n8k32", "e5m2", "fp32"): (("float8_e5m2",), "float32", 32),
}
_ABBREV = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "int8": "int8",
           "uint8": "uint8", "int32": "int32", "float8_e4m3": "e4m3", "float8_e5m2": "e5m2",
           "tfloat32": "tf32"}


def _element(ptr, what: str) -> ir.Load:
    """The buffer element a pointer argument designates (`T.access_ptr(buf[i], ...)`,
    `T.address_of(buf[i])` or the element itself)."""
    if isinstance(ptr, ir.Call) and ptr.op == "address_of":
        ptr = ptr.args[0]
    if isinstance(ptr, ir.Call) and ptr.op == "access_ptr":
        buf, off = ptr.args
        if buf.ndim != 1:
            raise error(TypeError, f"{what}: T.access_ptr of a whole {buf.ndim}-D buffer; "
                                   "point at an element instead (T.access_ptr(buf[i, j], ...))")
        ptr = ir.Load(buf, (off,), buf.dtype)
    if isinstance(ptr, ir.Buffer) and ptr.scope != "local.var":
        ptr = ir.Load(ptr, (ir.const(0),) * ptr.ndim, ptr.dtype)
    if not isinstance(ptr, ir.Load):
        raise error(TypeError, f"{what} needs a pointer to a buffer element "
                               f"(T.access_ptr(buf[i], ...)), got {ptr!r}")
    return ptr


def _const_int(v, what):
    e = ir.as_expr(v)
    if not isinstance(e, ir.Const):
        raise error(TypeError, f"{what} must be a compile-time constant, got {v!r}")
    return e.value


def ptx_ldmatrix(trans, num, src_ptr, dst_ptr, *args, **kwargs):
    """ldmatrix: `num` 8x8 matrices of 16-bit (or 8-bit, without `trans`) elements from
    shared memory into each lane's registers (see the module docstring for who gets what)."""
    if args or kwargs:
        raise error(TypeError, "T.ptx_ldmatrix(trans, num, src_ptr, dst_ptr): pointers made "
                               "with T.access_ptr (the TVM form with separate offsets is not "
                               "supported)")
    trans = bool(_const_int(trans, "T.ptx_ldmatrix trans"))
    num = _const_int(num, "T.ptx_ldmatrix num")
    if num not in (1, 2, 4):
        raise error(ValueError, f"T.ptx_ldmatrix loads 1, 2 or 4 matrices, not {num}")
    src = _element(src_ptr, "T.ptx_ldmatrix source")
    dst = _element(dst_ptr, "T.ptx_ldmatrix destination")
    if src.buffer.scope not in ("shared", "shared.dyn"):
        raise error(TypeError, f"T.ptx_ldmatrix reads shared memory; {src.buffer.name} is "
                               f"{src.buffer.scope}")
    if dst.buffer.scope != "local":
        raise error(TypeError, f"T.ptx_ldmatrix writes a per-thread array (T.alloc_local); "
                               f"{dst.buffer.name} is {dst.buffer.scope}")
    if src.buffer.dtype.bits not in (8, 16, 32) or src.buffer.dtype.lanes != 1:
        raise error(TypeError, f"T.ptx_ldmatrix moves 8-, 16- or 32-bit elements; "
                               f"{src.buffer.name} holds {src.buffer.dtype}")
    if trans and src.buffer.dtype.bits != 16:
        raise error(ValueError, "T.ptx_ldmatrix with trans=True needs 16-bit elements "
                                f"({src.buffer.name} holds {src.buffer.dtype})")
    if dst.buffer.dtype != src.buffer.dtype:
        raise error(TypeError, f"T.ptx_ldmatrix copies {src.buffer.dtype} elements into "
                               f"{dst.buffer.name}, which holds {dst.buffer.dtype}")
    emit(ir.Evaluate, ir.Call("ptx_ldmatrix", (ir.const(trans), ir.const(num), src, dst),
                              _VOID))


def _operand(data, offset, what) -> ir.Load:
    buf = data.buffer if isinstance(data, ir.BufferData) else data
    if not isinstance(buf, ir.Buffer):
        raise error(TypeError, f"T.ptx_mma {what}: pass a buffer's .data (e.g. A_local.data), "
                               f"got {data!r}")
    if buf.scope != "local" or buf.ndim != 1:
        raise error(TypeError, f"T.ptx_mma {what}: {buf.name} must be a 1-D per-thread array "
                               f"(T.alloc_local), not {buf.scope} of {buf.ndim} dims")
    return ir.Load(buf, (ir.as_expr(offset),), buf.dtype)


def ptx_mma(dtype, shape, A_layout, B_layout, A_dtype, B_dtype, C_dtype, multiplicand_a,
            a_index, multiplicand_b, b_index, accumulator, c_index, saturate=False,
            operator=None):
    """mma.sync: one m16n8kK tile, D = A @ B + C, written back into C (see the module
    docstring for shapes, types and register layouts)."""
    shape = str(shape)
    if (str(A_layout), str(B_layout)) != ("row", "col"):
        raise error(NotImplementedError, f"T.ptx_mma supports A row / B col layouts (as "
                                         f"mma.sync m16n8k*), got {A_layout} / {B_layout}")
    a_t, b_t, c_t = (_ABBREV.get(str(t), str(t)) for t in (A_dtype, B_dtype, C_dtype))
    if a_t != b_t:
        raise error(NotImplementedError, f"T.ptx_mma with A {a_t} and B {b_t}: mixed operand "
                                         "types are not supported")
    kind = MMA_KINDS.get((shape, a_t, c_t))
    if kind is None:
        supported = ", ".join(f"{s} {a}->{c}" for s, a, c in MMA_KINDS)
        raise error(NotImplementedError, f"T.ptx_mma {shape} {a_t} -> {c_t} is not supported "
                                         f"(supported: {supported})")
    if _const_int(saturate, "T.ptx_mma saturate") and not a_t.endswith("int8"):
        raise error(NotImplementedError, "T.ptx_mma saturate=True applies to integer mma only")
    A = _operand(multiplicand_a, a_index, "A")
    B = _operand(multiplicand_b, b_index, "B")
    C = _operand(accumulator, c_index, "C")
    elems, acc, _ = kind
    for load, want, what in ((A, elems[0], "A"), (B, elems[0], "B"), (C, acc, "C")):
        if load.buffer.dtype.name != want:
            raise error(TypeError, f"T.ptx_mma {shape} {a_t}->{c_t}: {what} "
                                   f"({load.buffer.name}) must hold {DType(want)}, not "
                                   f"{load.buffer.dtype}")
    if DType(dtype) != DType(acc):
        raise error(TypeError, f"T.ptx_mma result type {dtype} differs from the accumulator "
                               f"type {c_t}")
    emit(ir.Evaluate, ir.Call("ptx_mma", (shape, a_t, c_t, A, B, C), _VOID))
