"""Choose the layout of every fragment and shared buffer, and of every T.Parallel loop.

Expects: a kernel body whose element-wise tile ops are already parallel loops
(`lower_elementwise_tile_ops`); Gemm/Reduce/CumSum and global→shared Copy remain tile ops.

Guarantees: `ctx.layouts` maps every fragment to a `Fragment` over its shape and every shared
buffer to a `Layout`; every outermost parallel loop that touches a fragment carries the
annotation ("loop_layout", Fragment over the loop extents). Constraints, strongest first:
  1. `T.annotate_layout` entries;
  2. gemm operands: the accumulator layout of the chosen warp partition (C), the register
     operand layout (A from a fragment), swizzled shared layouts (A/B in shared memory);
  3. reductions: dst = src projected on the kept dims;
  4. parallel loops: fragments indexed by exactly the loop variables share the loop's layout,
     lower-rank ones get its projection; a loop whose only fragment is lower-rank extends it;
  5. anything left: the default element-wise layout.
Conflicts raise a located error naming both buffers/loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import located
from ..ir import nodes as ir
from ..ir.visitor import LocatedVisitor, Mutator
from .. import layout as L
from .fragment_ops import extend_fragment, insert_unit_dim, replicated_fragment

SHARED = ("shared", "shared.dyn")


def _err(loc, msg, exc=ValueError):
    raise located(exc)(msg, loc)


# ---------------------------------------------------------------------------------------------
# warp partition of a gemm
# ---------------------------------------------------------------------------------------------


def warp_partition(M: int, N: int, num_warps: int, policy: str, atom_m=16, atom_n=8):
    """(warp_m, warp_n) with warp_m * warp_n = num_warps dividing the tile in mma atoms."""
    options = []
    for wm in range(1, num_warps + 1):
        if num_warps % wm:
            continue
        wn = num_warps // wm
        if M % (atom_m * wm) == 0 and N % (atom_n * wn) == 0:
            options.append((wm, wn))
    if not options:
        return None
    if policy == "FullRow":
        full = [o for o in options if o[1] == 1]
        if full:
            return full[0]
    if policy == "FullCol":
        full = [o for o in options if o[0] == 1]
        if full:
            return full[0]
    # Square: per-warp tiles as square as possible, ties prefer more warps along M
    return min(options, key=lambda o: (abs((M / o[0]) - (N / o[1])), -o[0]))


# ---------------------------------------------------------------------------------------------
# collection
# ---------------------------------------------------------------------------------------------


@dataclass
class LoopInfo:
    stmt: ir.For
    vars: list
    extents: list
    accesses: dict = field(default_factory=dict)  # fragment -> list of index tuples
    layout: object = None
    restage: object = None  # (src, dst) fragments of a copy between different layouts
    written: set = field(default_factory=set)  # fragments stored to in the loop
    staged_reads: list = field(default_factory=list)  # read fragments staged through smem
    owner: object = None  # (fragment, indices): iterations run by the threads holding it


@dataclass
class Collected:
    gemms: list = field(default_factory=list)
    reduces: list = field(default_factory=list)
    scans: list = field(default_factory=list)
    loops: list = field(default_factory=list)
    block_level: dict = field(default_factory=dict)  # fragment -> loc of a block-level access
    shared: list = field(default_factory=list)
    fragments: list = field(default_factory=list)


class _Collect(LocatedVisitor):
    def __init__(self, out: Collected):
        self.out = out
        self.loop: LoopInfo = None

    def visit_For(self, s):
        if s.kind == "parallel" and self.loop is None:
            vars_, extents, inner = [], [], s
            while isinstance(inner, ir.For) and inner.kind == "parallel":
                vars_.append(inner.var)
                extents.append(inner.extent)
                inner = inner.body
            self.loop = LoopInfo(s, vars_, extents)
            self.visit(inner)
            self.out.loops.append(self.loop)
            self.loop = None
            return
        self.generic(s)

    def _access(self, buf, indices):
        if buf.scope != "local.fragment":
            return
        if self.loop is None:
            self.out.block_level.setdefault(buf, self.loc)
        else:
            self.loop.accesses.setdefault(buf, []).append(tuple(indices))

    def visit_Load(self, e):
        self._access(e.buffer, e.indices)
        for i in e.indices:
            self.visit(i)

    def visit_Store(self, s):
        self._access(s.buffer, s.indices)
        if self.loop is not None and s.buffer.scope == "local.fragment":
            self.loop.written.add(s.buffer)
        for i in s.indices:
            self.visit(i)
        self.visit(s.value)

    def visit_Gemm(self, s):
        self.out.gemms.append(s)

    def visit_Reduce(self, s):
        self.out.reduces.append(s)

    def visit_CumSum(self, s):
        self.out.scans.append(s)


# ---------------------------------------------------------------------------------------------
# the solver
# ---------------------------------------------------------------------------------------------


class LayoutSolver:
    def __init__(self, kernel: ir.Kernel, ctx):
        self.kernel = kernel
        self.ctx = ctx
        self.T = ctx.num_threads
        self.layouts: dict = {}
        self.origin: dict = {}  # buffer -> description of what fixed its layout
        self.c = Collected()
        _Collect(self.c).visit(kernel.body)
        # fragments and their T.reshape views hold the same registers: each one's layout is
        # the other's composed with the reshape (shared views: see _shared_views)
        self.views = [v for k, v in kernel.attrs if k == "local_view"]
        self.aliases: dict = {}
        for v in self.views:
            if v.scope == "local.fragment":
                self.aliases.setdefault(v, []).append(v.view_of)
                self.aliases.setdefault(v.view_of, []).append(v)

    # ---- assignment with conflict detection ------------------------------------------------
    def assign(self, buf, layout, why, loc):
        old = self.layouts.get(buf)
        if old is None:
            self.layouts[buf] = layout
            self.origin[buf] = (why, loc)
            self._assign_aliases(buf, layout, loc)
            return True
        same = (L.fragment_equal(old, layout) if isinstance(layout, L.Fragment)
                else L.layout_equal(old, layout))
        if not same:
            prev_why, prev_loc = self.origin[buf]
            where = f" (line {prev_loc.lineno})" if prev_loc is not None else ""
            _err(loc, f"layout conflict for {buf.name}: {why} needs {layout!r}, but "
                      f"{prev_why}{where} fixed {old!r}")
        return False

    def _assign_aliases(self, buf, layout, loc):
        for other in self.aliases.get(buf, ()):
            if other in self.layouts:
                continue
            try:
                composed = reshape_fragment(layout, other.shape)
            except ValueError as e:
                _err(loc, f"the fragment {other.name} reshapes {buf.name}, whose layout "
                          f"{layout!r} has no equivalent at shape {list(other.shape)} ({e})")
            self.assign(other, composed, f"the reshape of {buf.name}", loc)

    def _shared_views(self):
        """A shared view of the same dtype is its tile's elements in row-major order: the
        tile's layout composed with the reshape. One of another dtype reuses the tile's bytes
        for other data: it keeps a layout of its own (row-major unless an operation needs
        another), no larger than the tile."""
        for v in self.views:
            if v.scope not in SHARED:
                continue
            root = v.view_of
            if v.dtype == root.dtype:
                if v in self.layouts:
                    why, loc = self.origin.get(v, ("", None))
                    _err(loc, f"{v.name}, a reshape of shared tile {root.name}, cannot have a "
                              f"layout of its own ({why}); give the operation {root.name} "
                              "itself")
                self.layouts[v] = reshaped_layout(self.layouts[root], v.shape)
                continue
            self.layouts.setdefault(v, L.row_major(v.shape))
            need = self.layouts[v].physical_size * v.dtype.bytes
            have = self.layouts[root].physical_size * root.dtype.bytes
            if need > have:
                _err(v.loc, f"the view {v.name} takes {need} bytes of shared tile {root.name}, "
                            f"which has {have}")

    # ---- constraints ---------------------------------------------------------------------
    def annotated(self):
        for key, value in self.kernel.attrs:
            if key == "layout":
                buf, layout = value
                self.assign(buf, layout, "T.annotate_layout", self.kernel.loc)

    def gemm(self, g: ir.Gemm):
        A, C = g.A.buffer, g.C.buffer
        M, N = [e for e in g.C.extents][-2:]
        K = g.A.extents[-1] if not g.trans_A else g.A.extents[-2]
        if C.scope != "local.fragment":
            _err(g.loc, f"T.gemm accumulator {C.name} must be a fragment (T.alloc_fragment) "
                        f"on CUDA, got {C.scope}")
        num_warps = self.T // 32
        if self.T % 32 or num_warps == 0:
            _err(g.loc, f"T.gemm needs whole warps; the block has {self.T} threads")
        part = self.ctx.gemm_partition(g, M, N, num_warps)
        if part is None:
            _err(g.loc, f"T.gemm tile {M}x{N} cannot be split over {num_warps} warps in "
                        f"16x8 mma tiles (policy {g.policy}); use a tile whose M is a multiple "
                        "of 16 and N a multiple of 8 per warp")
        self.ctx.gemm_info[g.C.buffer] = part
        self.assign(C, self.ctx.accumulator_layout(g, part), "T.gemm accumulator", g.loc)
        if A.scope == "local.fragment":
            self.assign(A, self.ctx.a_fragment_layout(g, part, M, K), "T.gemm register "
                        "operand A", g.loc)
        for operand, region in (("A", g.A), ("B", g.B)):
            buf = region.buffer
            if buf.scope in SHARED and buf not in self.layouts:
                self.assign(buf, self.ctx.shared_operand_layout(buf), f"T.gemm operand "
                            f"{operand}", g.loc)
            elif buf.scope == "local.fragment" and operand == "B":
                self.assign(buf, self.ctx.b_fragment_layout(g, part), "T.gemm register "
                            "operand B", g.loc)

    def reduce(self, r: ir.Reduce) -> bool:
        src, dst = r.src, r.dst
        if src.scope != "local.fragment" or dst.scope != "local.fragment":
            return False
        if src in self.layouts and dst not in self.layouts:
            kept = [d for d in range(src.ndim) if d != r.dim]
            proj = self.layouts[src].project(kept)
            if dst.ndim == src.ndim:
                proj = insert_unit_dim(proj, r.dim)
            return self.assign(dst, proj, f"T.reduce_{r.kind}({src.name})", r.loc)
        return False

    def loop(self, info: LoopInfo) -> bool:
        if not info.accesses or info.restage is not None:
            return False
        if not all(isinstance(e, ir.Const) for e in info.extents):
            return False  # semantic check already rejected fragments in symbolic loops
        extents = [e.value for e in info.extents]
        changed = False
        if info.layout is None:
            info.layout = self._loop_layout_from_fragments(info, extents)
        if info.layout is None:
            return False
        if info.owner is not None:
            return False  # an owner-run loop lays out no other fragment (see _owner_layout)
        for buf, index_lists in info.accesses.items():
            if buf in self.layouts:
                continue
            unit = _unit_dims_match(buf, index_lists[0], info.vars)
            if unit is not None:  # (1, N) tile indexed [0, j] in a loop over (N,)
                want = info.layout
                for d in unit:
                    want = insert_unit_dim(want, d)
                changed |= self.assign(buf, want, "a T.Parallel loop", info.stmt.loc)
                continue
            dims = _dims_of(index_lists[0], info.vars)
            if dims is None:
                # a transposed read (x[j, i] in a loop over i, j) takes the loop layout with
                # its dims permuted, as in the reference (mamba chunk_state's x_local)
                dims = _permutation_of(index_lists[0], info.vars)
            if dims is None or len(dims) != buf.ndim:
                continue
            want = info.layout if dims == list(range(len(info.vars))) else \
                info.layout.project(dims)
            changed |= self.assign(buf, want, "a T.Parallel loop", info.stmt.loc)
        return changed

    def _loop_layout_from_fragments(self, info, extents):
        full, partial = [], []
        for buf, index_lists in info.accesses.items():
            unit = _unit_dims_match(buf, index_lists[0], info.vars)
            if unit is not None and buf in self.layouts:
                kept = [d for d in range(buf.ndim) if d not in unit]
                return self.layouts[buf].project(kept)
        for buf, index_lists in info.accesses.items():
            dims = _dims_of(index_lists[0], info.vars)
            if dims is None or buf not in self.layouts or len(dims) != buf.ndim:
                continue
            if dims == list(range(len(info.vars))):
                full.append(buf)
            else:
                partial.append((buf, dims))
        if full:
            layout = self.layouts[full[0]]
            for other in full[1:]:
                if not L.fragment_equal(layout, self.layouts[other]):
                    pair = _fragment_copy(info)
                    if pair is not None:  # move the data between layouts through shared memory
                        info.restage = pair
                        return None
                    chosen = self._stage_reads(info, full)
                    if chosen is not None:
                        return chosen
                    _err(info.stmt.loc, f"layout conflict in one T.Parallel loop: fragments "
                                        f"{full[0].name} and {other.name} are laid out "
                                        f"differently ({layout!r} vs "
                                        f"{self.layouts[other]!r}); copy one into a fragment "
                                        f"of the other's layout first")
            return layout
        if partial:
            # extend one of them; prefer an extension under which every other one is read
            # only by threads holding the element (C[j] and R[i] in a loop over (i, j))
            options = [extend_fragment(self.layouts[buf], dims, extents, self.T)
                       for buf, dims in partial]
            for layout in options:
                if all(_serves(layout, self.layouts[b], d) for b, d in partial):
                    return layout
            return options[0]
        return self._owner_layout(info, extents)

    def _owner_layout(self, info, extents):
        """A laid-out fragment indexed by loop variables and constants in other dims
        (lse[k, 0] where element (k, j) lives on thread j): as in the reference, the loop
        follows the fragment, each iteration running on the threads that hold its element.
        The layout gives every thread every iteration; partition_parallel guards each one
        by ownership of the element (annotation "loop_owner")."""
        for buf, index_lists in info.accesses.items():
            if buf not in self.layouts or len(index_lists) != 1 and any(
                    not _same_indices(index_lists[0], other) for other in index_lists[1:]):
                continue
            indices = index_lists[0]
            used = [idx for idx in indices if any(idx is v for v in info.vars)]
            if len(used) != len({id(u) for u in used}) or not all(
                    isinstance(idx, ir.Const) or any(idx is v for v in info.vars)
                    for idx in indices):
                continue
            if not used or len(used) == len(indices):
                continue  # only constants (a broadcast read) or only loop variables: not this
            info.owner = (buf, tuple(indices))
            nd = len(extents)  # value modes fastest first: row-major iterations
            values = [(extents[d], tuple(int(k == d) for k in range(nd)))
                      for d in reversed(range(nd))]
            return L.Fragment(tuple(extents), [(self.T, (0,) * nd)], values)
        return None

    def _stage_reads(self, info, full):
        """A loop that writes fragments of one layout and reads fragments of others runs in
        the written layout; the others are read from shared copies made before the loop."""
        written = [b for b in full if b in info.written]
        if not written:
            return None
        layout = self.layouts[written[0]]
        if not all(L.fragment_equal(layout, self.layouts[b]) for b in written):
            return None
        info.staged_reads = [b for b in full if b not in info.written
                             and not L.fragment_equal(layout, self.layouts[b])]
        return layout

    def default_fragment(self, buf):
        if self.aliases.get(buf):
            return self._default_for_aliases(buf)
        return L.elementwise_fragment(buf.shape, self.T, self._vector_width(buf))

    def _default_for_aliases(self, buf):
        """The default layout of a fragment with T.reshape views: the element-wise layout of
        the first shape (this one, then its views) and vector width whose reshape to every
        other shape is a fragment too (narrower vectors leave fewer threads idle)."""
        group = [buf] + self.aliases[buf]
        first_error = None
        for member in group:
            w = self._vector_width(member)
            while w >= 1:
                cand = L.elementwise_fragment(member.shape, self.T, w)
                try:
                    mine = cand if member is buf else reshape_fragment(cand, buf.shape)
                    for other in group[1:]:
                        reshape_fragment(mine, other.shape)
                    return mine
                except ValueError as e:
                    first_error = first_error or e
                w //= 2
        _err(buf.loc, f"no layout of fragment {buf.name} also lays out its T.reshape views "
                      f"({', '.join(f'{v.name} {list(v.shape)}' for v in group[1:])}): "
                      f"{first_error}")

    def _vector_width(self, buf) -> int:
        return max(1, min(16 // max(1, buf.dtype.bytes), buf.shape[-1] if buf.shape else 1))

    # ---- driver -------------------------------------------------------------------------------
    def propagate(self):
        changed = True
        while changed:
            changed = False
            for r in self.c.reduces:
                changed |= self.reduce(r)
            for info in self.c.loops:
                changed |= self.loop(info)

    def _open_fragments(self):
        seen, out = set(), []
        candidates = [b for b in self.kernel.allocs if b.scope == "local.fragment"]
        for info in self.c.loops:
            candidates.extend(info.accesses)
        for r in self.c.reduces:
            candidates.extend(b for b in (r.src, r.dst) if b.scope == "local.fragment")
        for b in candidates:
            if b not in seen and b not in self.layouts:
                seen.add(b)
                out.append(b)
        return out

    def solve(self):
        self.annotated()
        for g in self.c.gemms:
            self.gemm(g)
        self.propagate()
        for buf, loc in self.c.block_level.items():
            if buf not in self.layouts and buf.numel() == 1:
                self.assign(buf, replicated_fragment(buf.shape, self.T), "a block-level "
                            "access", loc)
        self.propagate()
        # Defaults go to the largest open fragment first (tiles before the row vectors that
        # reductions and broadcasts derive from them), propagating after each choice.
        while True:
            open_ = self._open_fragments()
            if not open_:
                break
            # a tile before its T.reshape views (they follow it), then by size
            buf = max(open_, key=lambda b: (b.view_of is None, b.ndim, b.numel()))
            loc = next((info.stmt.loc for info in self.c.loops if buf in info.accesses),
                       buf.loc)
            self.assign(buf, self.default_fragment(buf), "the default element-wise layout",
                        loc)
            self.propagate()
        for buf, loc in self.c.block_level.items():
            if buf not in self.layouts:
                self.assign(buf, replicated_fragment(buf.shape, self.T), "a block-level "
                            "access", loc)
        for buf in self.kernel.allocs:
            if buf.scope in SHARED and buf not in self.layouts:
                self.layouts[buf] = L.row_major(buf.shape)
        self._shared_views()
        for info in self.c.loops:
            if info.layout is None and info.accesses and info.restage is None:
                info.layout = self._loop_layout_from_fragments(
                    info, [e.value for e in info.extents]) if all(
                    isinstance(e, ir.Const) for e in info.extents) else None
        return self.layouts


def _serves(loop_layout, frag, dims) -> bool:
    """Whether every (thread, value) of `loop_layout` reads element coords[dims] of a fragment
    laid out as `frag` on a thread that holds it (the check partition_parallel enforces)."""
    import numpy as np

    t, v = loop_layout._enumerate_slots()
    cs = loop_layout._coords_array(t, v)
    inb = np.all([(c >= 0) & (c < n) for c, n in zip(cs, loop_layout.shape)], axis=0)
    elem = [np.where(inb, cs[d], 0) for d in dims]
    slot = frag._holder_table()[(1,) + tuple(elem)]
    if (slot[inb] < 0).any():
        return False
    tt = np.broadcast_to(t % frag.num_threads, inb.shape)
    held = frag._coords_array(tt, np.where(inb, slot, 0))
    return bool(np.all([(h == e) | ~inb for h, e in zip(held, elem)]))


def _fragment_nest(src, dst, layout, loc):
    """for idx in T.Parallel(shape) (laid out as `layout`): dst[idx] = src[idx]."""
    vars_ = [ir.Var(n) for n in "ijklmn"[:src.ndim]]
    body = ir.Store(dst, tuple(vars_), ir.cast_to(ir.Load(src, tuple(vars_), src.dtype),
                                                  dst.dtype), loc=loc)
    for v, e in reversed(list(zip(vars_, src.shape))):
        body = ir.For(v, ir.const(0), ir.const(e), "parallel", body, loc=loc)
    return ir.with_fields(body, annotations=(("loop_layout", layout),))


def _fragment_copy(info: LoopInfo):
    """(src, dst) when the loop is a T.copy between two fragments, else None."""
    if info.stmt.annotation("from_tile_op") != "copy":
        return None
    inner = info.stmt
    while isinstance(inner, ir.For):
        inner = inner.body
    if not isinstance(inner, ir.Store) or inner.buffer.scope != "local.fragment":
        return None
    value = inner.value.value if isinstance(inner.value, ir.Cast) else inner.value
    if not isinstance(value, ir.Load) or value.buffer.scope != "local.fragment":
        return None
    return value.buffer, inner.buffer


def _unit_dims_match(buf, indices, loop_vars):
    """The unit dims of `buf` if it is indexed by 0 there and by exactly the loop variables,
    in order, everywhere else (a (1, N) tile in a loop over N); else None."""
    unit, it = [], iter(loop_vars)
    if buf.ndim == len(loop_vars):
        return None
    for d, (idx, n) in enumerate(zip(indices, buf.shape)):
        if n == 1 and isinstance(idx, ir.Const) and idx.value == 0:
            unit.append(d)
            continue
        v = next(it, None)
        if v is None or idx is not v:
            return None
    if next(it, None) is not None or not unit:
        return None
    return unit


def _dims_of(indices, loop_vars):
    """Which loop dims a fragment access uses, if its indices are exactly loop variables in
    loop order (e.g. [i, j] -> [0, 1], [i] -> [0]); None for any other pattern."""
    dims = []
    for idx in indices:
        pos = next((d for d, v in enumerate(loop_vars) if v is idx), None)
        if pos is not None:
            dims.append(pos)
        elif isinstance(idx, ir.Const) and idx.value == 0:
            continue
        else:
            return None
    if dims != sorted(dims) or len(set(dims)) != len(dims):
        return None
    return dims


def _same_indices(a, b):
    return len(a) == len(b) and all(
        x is y or (isinstance(x, ir.Const) and isinstance(y, ir.Const) and x.value == y.value)
        for x, y in zip(a, b))


def _permutation_of(indices, loop_vars):
    """Loop dims of an access whose indices are all the loop variables, each once, in any
    order (e.g. [j, i] -> [1, 0]); None for any other pattern."""
    if len(indices) != len(loop_vars):
        return None
    dims = [next((d for d, v in enumerate(loop_vars) if v is idx), None) for idx in indices]
    if None in dims or len(set(dims)) != len(dims):
        return None
    return dims


class _Annotate(Mutator):
    def __init__(self, loops, ctx):
        self.by_stmt = {id(info.stmt): info for info in loops}
        self.ctx = ctx

    def visit_For(self, s):
        info = self.by_stmt.get(id(s))
        if info is not None and info.restage is not None:
            return self._restage(info)
        if info is not None and info.layout is not None:
            ann = tuple((k, v) for k, v in s.annotations if k not in ("loop_layout",
                                                                       "loop_owner"))
            ann += (("loop_layout", info.layout),)
            if info.owner is not None:
                ann += (("loop_owner", info.owner),)
            loop = ir.For(s.var, s.start, s.extent, s.kind, s.body, s.step, ann, loc=s.loc)
            if info.staged_reads:
                return self._stage(info, loop)
            return loop
        return self.generic(s)

    def _stage(self, info, loop):
        """Copy each fragment in info.staged_reads to shared memory before `loop` and read the
        copies inside it."""
        ctx = self.ctx
        pre, mapping = [], {}
        for frag in info.staged_reads:
            scratch = ctx.add_scratch_shared(f"{frag.name}_shared", frag.shape, frag.dtype)
            mapping[frag] = scratch
            pre.append(_fragment_nest(frag, scratch, ctx.layouts[frag], info.stmt.loc))
            ctx.note(f"{frag.name} is read in a loop laid out differently: staged through "
                     "shared memory")

        class Swap(Mutator):
            def visit_Load(self, e):
                nb = mapping.get(e.buffer)
                e = self.generic(e)
                return ir.Load(nb, e.indices, e.dtype) if nb is not None else e

        return ir.Seq(tuple(pre) + (Swap().visit(loop),))

    def _restage(self, info):
        """src fragment -> shared scratch (src's layout) -> dst fragment (dst's layout)."""
        src, dst = info.restage
        ctx = self.ctx
        base = dst.name if dst.name != "__unnamed" else "frag"
        scratch = ctx.add_scratch_shared(f"{base}_restage", dst.shape, dst.dtype)
        ctx.note(f"copy {src.name} -> {dst.name}: different register layouts, staged through "
                 f"shared memory")

        def nest(from_buf, to_buf, layout):
            vars_ = [ir.Var(n) for n in "ijklmn"[:dst.ndim]]
            body = ir.Store(to_buf, tuple(vars_), ir.cast_to(
                ir.Load(from_buf, tuple(vars_), from_buf.dtype), to_buf.dtype), loc=info.stmt.loc)
            for v, e in reversed(list(zip(vars_, dst.shape))):
                body = ir.For(v, ir.const(0), ir.const(e), "parallel", body, loc=info.stmt.loc)
            return ir.with_fields(body, annotations=(("loop_layout", layout),))

        return ir.Seq((nest(src, scratch, ctx.layouts[src]),
                       nest(scratch, dst, ctx.layouts[dst])))


def infer_layouts(kernel: ir.Kernel, ctx) -> ir.Kernel:
    solver = LayoutSolver(kernel, ctx)
    ctx.layouts.update(solver.solve())
    body = _Annotate(solver.c.loops, ctx).visit(kernel.body)
    return kernel if body is kernel.body else ir.with_fields(kernel, body=body)


def _ravel_unravel(new_shape, old_shape):
    """Coordinates at `new_shape` -> the same row-major element's coordinates at `old_shape`
    (ints, arrays or expressions)."""
    def to_old(*c):
        flat = 0
        for x, n in zip(c, new_shape):
            flat = flat * n + x
        out = []
        for n in reversed(old_shape):
            out.append(flat % n)
            flat = flat // n
        return tuple(reversed(out))
    return to_old


def reshaped_layout(layout, shape):
    """A shared layout seen at another shape with the same elements in row-major order."""
    to_old = _ravel_unravel(tuple(shape), tuple(layout.shape))
    return L.Layout(tuple(shape), lambda *c: layout.forward(*to_old(*c)),
                    name=f"reshape({getattr(layout, 'name', None) or 'layout'})",
                    physical_size=layout.physical_size)


def reshape_fragment(frag, shape):
    """The fragment holding the same elements (same thread, same register) at another shape,
    row-major; ValueError when that is not expressible as modes."""
    if frag.replication != 1:
        raise ValueError("a replicated fragment")
    to_old = _ravel_unravel(tuple(shape), tuple(frag.shape))
    return L.Fragment.from_function(tuple(shape), lambda *c: frag.locate(*to_old(*c))[0],
                                    lambda *c: frag.locate(*to_old(*c))[1],
                                    num_threads=frag.num_threads)