"""The explicit-width accesses of `T.ldg32` ... `T.sts128` (`tl::load_global_128(words, src)`,
`tl::store_shared_64(dst, w0, w1)`, ... of tl/wide_access.cuh) on the CPU interpreter: each is
compiled as the element loads and stores it stands for (ir/bits.py packs elements into 32-bit
words and back), after a check that the address is aligned to the access as the GPU requires.
"""

from __future__ import annotations

import re

from ..ir import bits as ir_bits
from ..ir import nodes as ir

WIDE_ACCESS = re.compile(r"tl::(load|store)_(global|shared)_(32|64|128|256)(_conditional)?$")


def _pointee(ptr) -> ir.Load:
    return ptr.args[0]


def _elements(start: ir.Load, n: int) -> list:
    """The indices of the n elements from `start` on along the buffer's last dimension."""
    *outer, last = start.indices
    return [tuple(outer) + (ir.binary("add", last, k),) for k in range(n)]


def _alignment_check(start: ir.Load, width: int, what: str, loc) -> ir.Stmt:
    buf = start.buffer
    offset = ir.const(0)
    for i, s in zip(start.indices, buf.effective_strides()):
        offset = ir.binary("add", offset, ir.binary("mul", i, s))
    align_elems = max(1, min(width, 128) // buf.dtype.bits)
    aligned = ir.compare("eq", ir.binary("floormod", offset, align_elems), 0)
    return ir.Assert(aligned, f"{what}: the address of {buf.name}[...] is not aligned to "
                              f"{min(width, 128) // 8} bytes (misaligned address on the GPU)",
                     loc=loc)


def compile_wide_access(c, e: ir.Call, name: str):
    kind, space, width, conditional = WIDE_ACCESS.match(name).groups()
    width = int(width)
    what = f"T.{'ld' if kind == 'load' else 'st'}{space[0]}{width}"
    args = e.args[1:]
    loc = c.statement_loc
    pred = args[-1] if conditional else None
    if kind == "load":
        words_buf = _pointee(args[0]).buffer
        start = _pointee(args[1])
        n = width // start.buffer.dtype.bits
        values = [ir.Load(start.buffer, idx, start.buffer.dtype) for idx in _elements(start, n)]
        words = ir_bits.pack_words(values)
        if pred is not None:
            zero = ir.const(0, ir_bits.WORD)
            words = [ir.Select(pred, w, zero, ir_bits.WORD) for w in words]
        body = [ir.Store(words_buf, (ir.const(j),), w, loc=loc) for j, w in enumerate(words)]
        check = _alignment_check(start, width, what, loc)
        stmt = ir.Seq((ir.If(pred, check, loc=loc) if pred is not None else check, *body),
                      loc=loc)
    else:
        start = _pointee(args[0])
        words = args[1:-1] if conditional else args[1:]
        values = ir_bits.unpack_words(words, start.buffer.dtype)
        body = [ir.Store(start.buffer, idx, v, loc=loc)
                for idx, v in zip(_elements(start, len(values)), values)]
        stmt = ir.Seq((_alignment_check(start, width, what, loc), *body), loc=loc)
        if pred is not None:
            stmt = ir.If(pred, stmt, loc=loc)
    run = c.stmt(stmt)

    def f(ctx):
        run(ctx, ctx.mask)
        return None
    return f
