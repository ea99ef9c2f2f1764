"""Generate docs/language.md, the reference of the `T` namespace, from its docstrings.

    python -m tilelang.tools.language_reference > docs/language.md

Names are grouped by the submodule that defines them; a name bound to the same object as an
earlier one is listed as an alias. `HAND` adds hand-written sections (semantics that belong to
no single name, such as what a fragment index means) after a submodule's list. tests/language/test_language_reference.py keeps the file
in step with the code.
"""

from __future__ import annotations

import inspect
import sys

SECTIONS = [
    ("tilelang.language.kernel", "Kernels and thread indices",
     "A `with T.Kernel(...)` block describes what one thread block does; these read the "
     "block and thread coordinates inside it."),
    ("tilelang.language.alloc", "Memory",
     "Block-level buffers: shared-memory tiles, register fragments (distributed over the "
     "block's threads by layout inference), per-thread locals and mbarriers."),
    ("tilelang.language.loops", "Loops",
     "`T.Parallel` nests are split over the threads; `T.Pipelined` overlaps copies with "
     "compute; the others are ordinary per-thread loops."),
    ("tilelang.language.tile_ops", "Tile operations",
     "Operations on whole tiles (buffers or regions): copies, GEMM, reductions, scans, "
     "fills and atomics."),
    ("tilelang.language.tile_schedule", "Tile schedulers",
     "The order in which a persistent kernel's blocks visit the tiles."),
    ("tilelang.language.reducer", "Reducers",
     "Buffers that many threads or `T.Parallel` iterations combine contributions into."),
    ("tilelang.language.thread_reduce", "Thread all-reductions",
     "The reference's TVM-style all-reduction over chosen thread indices."),
    ("tilelang.language.math", "Scalar math",
     "Element-wise operations on kernel values; they follow CUDA's semantics for the operand "
     "dtype (see docs/semantics.md for literal typing)."),
    ("tilelang.language.misc", "Synchronisation, annotations and escape hatches",
     "Barriers, Hopper pipeline controls, layout and scheduling annotations, printing, and "
     "ways to inject CUDA."),
    ("tilelang.language.types", "Types and parameters",
     "Parameter annotations (`T.Tensor`, `T.StridedTensor`, scalars), dtypes and symbolic "
     "sizes."),
    ("tilelang.language.macro", "Macros", "Reusable pieces of kernel code."),
    ("tilelang.language.ptx", "Warp-level tensor-core instructions",
     "ldmatrix and mma.sync written by hand, as the reference's intrinsics emitters "
     "(`tilelang.cuda.intrinsics`) issue them; `T.gemm` does the same work without them."),
]
OTHER = ("", "Other names", "")

# Hand-written sections, printed after the generated list of the named submodule: semantics
# that belong to no single name.
HAND = {
    "tilelang.language.alloc": """### Fragments: what an index means

A fragment (`T.alloc_fragment`) is one logical tile of the block, as in the reference
TileLang: on the interpreter it is one array, on CUDA its elements live in the registers of the
threads that layout inference assigns them to (docs/layouts.md). Both targets give every
program below the same meaning; where the reference rejects a program (the last rule), both
run it.

- Inside `T.Parallel`, a fragment may be indexed by any expression: the loop's variables
  (`acc[i, j]`, `m[i]` in a loop over `(i, j)`), a serial loop's variable from outside or
  inside the nest (`lse[k, i]` with `k` from an enclosing `T.serial` / `T.Pipelined`,
  `a[i_hci, i]` with `i_hci` from a `T.serial` inside the nest), a loop variable plus a
  constant (`acc[bi + 32, d]`), a constant or a value read before. Every access to one fragment
  in one nest uses the same index expressions (else: "layout inference conflict").
- Outside `T.Parallel` (if conditions, block-level statements), a fragment may be indexed at
  any index, constant or runtime (`if block_mask[k] != 0:`): every thread holds such a
  fragment whole, reads its own copy, and a block-level store updates every copy.
- A fragment dim indexed directly by a `T.Parallel` variable whose loop is longer than the dim
  has the loop's extent (the reference sizes fragments by their loop's layout:
  `sinks = T.alloc_fragment([heads])` written and read by loops over `block_M`), unless a
  gemm, reduction or scan uses the fragment whole.
- An index outside the fragment's shape is undefined on every target (the interpreter
  raises); an iteration may compute one as long as a condition in the body keeps it from the
  access (`if bi < part: S[bi, d] = acc[bi + part, d]`).
- `T.gemm` takes A and B from fragments as well as shared tiles, in every transpose (B in
  registers runs on mma.sync, also on sm_90a: wgmma reads B from shared memory).
- A fragment `T.gemm` lays out (an operand or the accumulator) is spread over the threads in
  both dims, so inside `T.Parallel` it may not be indexed by the variable of a loop nested in
  the nest (`for j in T.serial(N): s[i] += acc[i, j]` is rejected on both targets, as in the
  reference: "thread-distributed fragment"; use `T.reduce_sum`). A serial loop around the
  nest is fine.
- Where no register layout can give a loop its elements (a gemm accumulator read at a row set
  by a serial loop around the nest, two accumulators of different layouts in one loop) the
  CUDA path stages the fragment through shared memory and says so in the build notes; the
  reference rejects such loops.
""",
}


def _first_paragraph(doc: str) -> str:
    para = doc.strip().split("\n\n")[0]
    return " ".join(line.strip() for line in para.splitlines())


def _signature(name: str, obj) -> str:
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return name
    return f"{name}{sig}"


def _entries():
    import tilelang.language as T

    by_section: dict = {}
    seen: dict = {}
    from ..ir.dtype import DType

    for name in sorted(n for n in dir(T) if not n.startswith("_")):
        obj = getattr(T, name)
        if inspect.ismodule(obj) or (isinstance(obj, DType) and name != "dtype"):
            continue  # the dtypes are listed together (`_dtype_line`)
        module = getattr(obj, "__module__", "") or ""
        section = next((s for s in SECTIONS if module == s[0]), OTHER)
        key = id(obj)
        if key in seen and (callable(obj) or isinstance(obj, type)):
            by_section.setdefault(section, []).append((name, None, seen[key]))
            continue
        seen.setdefault(key, name)
        by_section.setdefault(section, []).append((name, obj, None))
    return by_section


def _dtype_line() -> str:
    import tilelang.language as T
    from ..ir.dtype import DType

    names = sorted(n for n in dir(T) if not n.startswith("_") and n != "dtype"
                   and isinstance(getattr(T, n), DType))
    scalars = [n for n in names if getattr(T, n).lanes == 1]
    return ("- **dtypes** — " + ", ".join(f"`T.{n}`" for n in scalars) + "; vectors of 2 to 64 "
            "lanes as `T.float16x2`, `T.int8x4`, ... Each is a `str` of its name "
            "(`T.float16 == \"float16\"`); `T.float32(x)` casts, `T.float32(0)` is a constant, "
            "`.as_torch()` gives the torch dtype. `T.tfloat32` is `T.float32`; `T.float4_e2m1fn` "
            "is the element type of global tensors only (passed as byte tensors, two values "
            "to a byte); `T.int4`, `T.uint4` are values only (no buffers).")


def render() -> str:
    out = ["# The `T` language reference", "",
           "Generated from the docstrings by `python -m tilelang.tools.language_reference`; "
           "do not edit by hand. `import tilelang.language as T`. For how programs behave "
           "see docs/tutorial.md and docs/semantics.md; for what differs from the "
           "reference TileLang see docs/compatibility.md.", ""]
    by_section = _entries()
    for section in SECTIONS + [OTHER]:
        items = by_section.get(section)
        if not items:
            continue
        _, title, blurb = section
        out += [f"## {title}", ""]
        if blurb:
            out += [blurb, ""]
        if section[0] == "tilelang.language.types":
            out.append(_dtype_line())
        for name, obj, alias_of in items:
            if alias_of is not None:
                out += [f"- **`T.{name}`** — alias of `T.{alias_of}`."]
                continue
            doc = inspect.getdoc(obj) if (callable(obj) or isinstance(obj, type)) else None
            if doc is None and not callable(obj):
                out += [f"- **`T.{name}`** — `{obj!r}`."]
                continue
            head = _signature(name, obj) if callable(obj) else name
            out += [f"- **`T.{head}`** — {_first_paragraph(doc or 'undocumented')}"]
        out.append("")
        if section[0] in HAND:
            out += [HAND[section[0]].rstrip("\n"), ""]
    return "\n".join(out)


def undocumented() -> list:
    """Public callables of the T namespace without a docstring of their own."""
    missing = []
    for items in _entries().values():
        for name, obj, alias_of in items:
            if alias_of is None and callable(obj) and not (obj.__doc__ or "").strip():
                missing.append(name)
    return missing


if __name__ == "__main__":
    sys.stdout.write(render())
