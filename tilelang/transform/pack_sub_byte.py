"""Put packed int4 / uint4 buffers on their bytes (CUDA path).

Global tensors and shared tiles of `T.int4` / `T.uint4` hold two values a byte, the value of
even index in the low nibble (jit/packed.py). Pointer arithmetic, cp.async, TMA, ldmatrix and
swizzled layouts all address bytes, so this pass gives every such buffer a byte buffer of the
same rows (the last dimension halved, rounded up for a shared tile): int8 for int4, uint8 for
uint4; a global tensor's is a view of the parameter (engine/build.py encodes a TMA box over it
from the argument's own bytes), a shared tile's replaces its allocation. Later passes never see a
packed buffer and handle the bytes like any int8 / uint8 tile.

Expects: tile IR before `lower_elementwise` (copies are still `Copy` nodes); the CPU
interpreter does not run this (it keeps one value per element).

Guarantees:
* a `Copy` between two packed buffers of one dtype whose last dimension starts and spans an
  even number of values on both sides copies the bytes (a byte region: start and extent
  halved), so later passes vectorise it, issue it as cp.async / TMA and pipeline it;
* any other copy touching a packed buffer becomes a T.Parallel loop of element accesses;
* a `T.gemm` on packed operands reads byte regions of its A and B tiles and records the
  packed dtype in `Gemm.packed` (codegen/gemm_sm80.py issues mma.sync .s4 / .u4 on them);
  the instruction needs both operands K-major, the gemm's K a whole number of bytes;
* an element load becomes the byte's load and a shift of the nibble (sign-extended for int4:
  the `Cast` to int4 wraps); an element store becomes `tl::store_nibble`, an atomic update of
  the nibble's word, so threads storing the two values of one byte both land;
* any other use of a packed buffer (a layout annotation, `T.access_ptr`, a reshaped view) is
  a located `NotImplementedError`.
"""

from __future__ import annotations

from ..arith import Analyzer
from ..errors import located
from ..ir import nodes as ir
from ..ir.dtype import PACKED_INTS, DType
from ..ir.visitor import Mutator, collect
from .analysis.scopes import SHARED
from .analysis.tile_loops import copy_as_loop

_BYTE = {"int4": DType("int8"), "uint4": DType("uint8")}


def _is_packed(buf) -> bool:
    return isinstance(buf, ir.Buffer) and buf.dtype.base in PACKED_INTS


def _half(e, analyzer):
    """e / 2 (e even): a Python int where it is a constant, as regions and shapes keep them."""
    half = analyzer.simplify(ir.binary("floordiv", e, 2))
    value = ir.int_value(half)
    return half if value is None else value


def _byte_buffer(buf: ir.Buffer, analyzer) -> ir.Buffer:
    """The byte buffer of packed `buf`: the same rows, half the last dimension (rounded up
    in shared memory; a tensor argument's is a whole number of bytes by construction)."""
    last = buf.shape[-1] if buf.shape else 1
    if isinstance(last, int) and last % 2 and buf.scope == "global":
        raise located(ValueError)(
            f"{buf.dtype} tensor {buf.name} is passed two values a byte: its last dimension "
            f"must be even, got shape {list(buf.shape)}", buf.loc)
    if buf.scope != "global":
        last = ir.binary("add", last, 1)
    shape = tuple(buf.shape[:-1]) + (_half(last, analyzer),)
    strides = None
    if buf.strides is not None:
        strides = tuple(_half(s, analyzer) for s in buf.strides[:-1]) + (buf.strides[-1],)
    byte = _BYTE[buf.dtype.base]
    if buf.scope == "global":  # the parameter's storage, re-typed
        return ir.Buffer(buf.name, shape, byte, "global", strides=strides,
                         data=ir.BufferData(buf), loc=buf.loc)
    return ir.Buffer(buf.name, shape, byte, buf.scope, strides=strides, loc=buf.loc)


class _PackSubByte(Mutator):
    def __init__(self, byte_of: dict, analyzer):
        self.byte_of = byte_of
        self.analyzer = analyzer

    def _even(self, e) -> bool:
        return self.analyzer.prove(ir.compare("eq", ir.binary("floormod", e, 2), 0))

    def _byte_region(self, r: ir.BufferRegion) -> ir.BufferRegion:
        (start, extent), lead = r.region[-1], r.region[:-1]
        return ir.BufferRegion(self.byte_of[r.buffer], tuple(lead) + (
            (_half(start, self.analyzer), _half(extent, self.analyzer)),))

    def _bytewise(self, r: ir.BufferRegion) -> bool:
        start, extent = r.region[-1]
        return self._even(start) and self._even(extent)

    def visit_Copy(self, s: ir.Copy):
        src, dst = s.src, s.dst
        if not (_is_packed(src.buffer) or _is_packed(dst.buffer)):
            return s
        if src.buffer.dtype is dst.buffer.dtype and self._bytewise(src) and \
                self._bytewise(dst) and self.analyzer.can_prove_equal(src.extents[-1],
                                                                      dst.extents[-1]):
            return ir.with_fields(s, src=self._byte_region(src), dst=self._byte_region(dst))
        return self.visit(copy_as_loop(s))

    def visit_Gemm(self, g: ir.Gemm):
        a, b = g.A.buffer, g.B.buffer
        if not (_is_packed(a) or _is_packed(b)):
            return g
        if a.dtype is not b.dtype:
            raise located(ValueError)(
                f"T.gemm operands A ({a.dtype}) and B ({b.dtype}) must have the same dtype",
                g.loc)
        if isinstance(g, ir.GemmSp):
            raise located(NotImplementedError)(
                f"T.gemm_sp on {a.dtype} operands is not supported", g.loc)
        if g.trans_A or not g.trans_B:
            raise located(NotImplementedError)(
                f"T.gemm on {a.dtype} operands reads them K-major (the mma.sync .s4 / .u4 "
                "instructions take no other layout): store A as M x K and B as N x K and "
                "pass transpose_A=False, transpose_B=True", g.loc)
        for r in (g.A, g.B):
            if not self._bytewise(r):
                raise located(ValueError)(
                    f"T.gemm on {a.dtype} operands: the K range of {r.buffer.name} must start "
                    "at and span an even number of values (they are packed two a byte)", g.loc)
        return ir.with_fields(g, A=self._byte_region(g.A), B=self._byte_region(g.B),
                              packed=a.dtype)

    def visit_Load(self, e: ir.Load):
        e = self.generic(e)
        if not _is_packed(e.buffer):
            return e
        *lead, j = e.indices
        byte = self.byte_of[e.buffer]
        load = ir.Load(byte, tuple(lead) + (ir.binary("floordiv", j, 2),), byte.dtype)
        shift = ir.binary("mul", ir.binary("floormod", j, 2), 4)
        nibble = ir.binary("bitand", ir.binary("shr", ir.cast_to(load, "int32"), shift), 15)
        return ir.Cast(nibble, e.buffer.dtype)

    def visit_Store(self, s: ir.Store):
        s = self.generic(s)
        if not _is_packed(s.buffer):
            return s
        *lead, j = s.indices
        byte = self.byte_of[s.buffer]
        where = ir.address_of(byte, tuple(lead) + (ir.binary("floordiv", j, 2),))
        call = ir.Call("call_extern", ("tl::store_nibble", where, ir.binary("floormod", j, 2),
                                       ir.cast_to(s.value, "int32")), DType("void"))
        return ir.Evaluate(call, loc=s.loc)


def pack_sub_byte(kernel: ir.Kernel, ctx) -> ir.Kernel:
    packed = [b for b in kernel.allocs if _is_packed(b)]
    packed += [p for p in ctx.func.params if _is_packed(p)]
    if not packed:
        return kernel
    analyzer = Analyzer()
    byte_of = {b: _byte_buffer(b, analyzer) for b in packed}
    body = _PackSubByte(byte_of, analyzer).visit(kernel.body)
    allocs = tuple(byte_of.get(b, b) for b in kernel.allocs)
    out = ir.with_fields(kernel, body=body, allocs=allocs)
    left = [n for n in collect(out, lambda n: _is_packed(n) and n.scope in SHARED + ("global",))]
    if left:
        buf = left[0]
        raise located(NotImplementedError)(
            f"{buf.dtype} buffer {buf.name} is used here in a way the CUDA path does not "
            "support for packed 4-bit values (copies, T.gemm and element accesses are): "
            "declare it as int8 / uint8 bytes and unpack the values with shifts and masks",
            buf.loc)
    return out
