"""The alignment a kernel's vector accesses need of the global buffers they touch.

Passes emit a vector access (a 16-byte `tl::copy_vec`, a `cp.async` of 16 bytes, a vector
load or store, `atomic_addx4`) where the element offset is a multiple of the vector's lanes,
which is enough only when the buffer itself starts at an address aligned to the vector: a
tensor view at an odd element offset (`x[1:]`) would stop the kernel with
CUDA_ERROR_MISALIGNED_ADDRESS, an error that leaves the process's CUDA context unusable. The
launchers check the pointers first and raise instead (engine/build.py, engine/host.py).

Guarantees: `vector_alignment(body)` maps each global buffer (a view to the buffer it views)
that `body` accesses more than one element at a time to the widest such access in bytes.
Accesses it does not recognise are not counted (TMA checks its own addresses when it encodes
a tensor map).
"""

from __future__ import annotations

import re

from ...ir import nodes as ir
from ...ir.visitor import collect
from .device_ops import ATOMIC_VECTOR_ADD

# header calls moving a fixed number of bytes per access: tl::copy_vec<16>, <float4>, ...
_SIZED_CALL = re.compile(r"tl::(?:copy_vec|cp_async|cp_async_zfill)<(\w+)>")
_NAMED_BYTES = {"float": 4, "float2": 8, "float4": 16}


def vector_alignment(body) -> dict:
    out: dict = {}

    def need(buf, nbytes):
        buf = buf.view_of or buf
        if buf.scope == "global" and nbytes > buf.dtype.bytes:
            out[buf] = max(out.get(buf, 0), nbytes)

    for n in collect(body, lambda n: isinstance(n, (ir.Load, ir.Store, ir.Call))):
        if isinstance(n, ir.Load) and n.dtype.lanes > 1:
            need(n.buffer, n.dtype.bytes)
        elif isinstance(n, ir.Store) and n.value.dtype.lanes > 1:
            need(n.buffer, n.value.dtype.bytes)
        elif isinstance(n, ir.Call) and n.op in ATOMIC_VECTOR_ADD and \
                isinstance(n.args[0], ir.Load):
            lanes = 4 if n.op == "atomic_addx4" else 2
            need(n.args[0].buffer, lanes * n.args[0].buffer.dtype.bytes)
        elif isinstance(n, ir.Call) and n.op == "call_extern":
            m = _SIZED_CALL.match(n.args[0]) if isinstance(n.args[0], str) else None
            if m is None:
                continue
            width = m.group(1)
            nbytes = int(width) if width.isdigit() else _NAMED_BYTES.get(width)
            for a in n.args[1:]:
                if nbytes and isinstance(a, ir.Call) and a.op == "address_of" and \
                        isinstance(a.args[0], ir.Load):
                    need(a.args[0].buffer, nbytes)
    return out
