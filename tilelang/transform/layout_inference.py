"""Choose the layout of every fragment and shared buffer, and of every T.Parallel loop.

Expects: a kernel body whose element-wise tile ops are already parallel loops
(`lower_elementwise_tile_ops`); Gemm/Reduce/CumSum and global→shared Copy remain tile ops.

Guarantees: `ctx.layouts` maps every fragment to a `Fragment` over its shape and every shared
buffer to a `Layout`; every outermost parallel loop that touches a fragment carries the
annotation ("loop_layout", Fragment) (and ("loop_iter_map", IterMap) when it runs over a
fragment's elements, ("loop_owner", ...) when each iteration runs on its element's holders),
and serves every fragment access in it (`fragment_access.serve`): a fragment no layout can
serve there is reached through a shared copy made around the loop (noted). Constraints,
strongest first, as in the reference (docs/layouts.md):
  1. `T.annotate_layout` entries;
  2. gemm operands: the accumulator layout of the chosen warp partition (C), the register
     operand layouts (A, B from fragments, transposed maps for transposed operands), swizzled
     shared layouts (A/B in shared memory);
  3. reductions: dst = src projected on the kept dims;
  4. fragments read or written outside T.Parallel that 2-3 did not lay out: held whole by
     every thread;
  5. parallel loops: a loop takes the layout of the fragment (written ones first) under which
     the fewest others need staging; fragments indexed by loop variables get the loop's
     layout or its projection, dims indexed by a value the iteration does not own (a serial
     loop's variable) value modes of their own; a window of a dim at a serial variable's
     multiple (x[i, jj * 4 + j]) is that dim split at the window
     (`fragment_access.window_view`), its outer part indexed by jj;
  6. anything left: the default element-wise layout (dims indexed by serial variables in
     value modes); shared tiles: swizzled where the TMA unit reads them (`T.atomic_add(...,
     use_tma=True)` sources) or where the program stages its output through them (written
     only by copies from fragments, read only by copies to global memory, as the reference's
     TMA store sources), row-major otherwise.
Conflicts between 1-3 raise a located error naming both.

Tile operations inside a role's own thread group (transform/warp_roles.py, roles of different
thread ranges) are laid out for the role's threads, numbered from 0: each constraint is solved
with the context describing the threads of the statement that imposes it, and a fragment is
laid out over the threads of the one role (or the block) whose statements use it; a fragment
used by two is a located error (its registers would belong to other threads).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..arith import Analyzer
from ..errors import located
from ..ir import nodes as ir
from ..ir.thread_range import role_group
from ..ir.visitor import LocatedVisitor, Mutator, children, collect
from .. import layout as L
from .analysis import fragment_access as FA
from .analysis.reductions import UPDATE as REDUCER_UPDATE
from .analysis.fragment_ops import (extend_fragment, insert_unit_dim, permute_dims, place_dims,
                           replicated_fragment, transpose_fragment)
from .analysis.scoped import bind_kernel_vars
from .analysis.scopes import SHARED
from .analysis.shared_memory import smem_limit, warp_wavefronts
from .analysis.tile_loops import STORE_COPY
from .analysis.numeric import eval_index
from .analysis.tma_plan import contiguous_offset


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
    accesses: dict = field(default_factory=dict)  # fragment -> index tuple (one per nest)
    layout: object = None
    iter_map: object = None  # FA.IterMap: the loop runs over a fragment's element space
    owner: object = None  # (fragment, indices): iterations run by the threads holding it
    written: set = field(default_factory=set)  # fragments stored to in the loop
    # reducer partials the loop accumulates into (transform/reducer_fragments.py): a thread
    # adds to the copy it holds, so the loop need not write every copy, and a copy staged
    # through shared memory would lose the other threads' contributions
    accumulated: set = field(default_factory=set)
    staged: dict = field(default_factory=dict)  # fragment -> written: reached through smem
    group: tuple = None  # (lo, n) of the role's thread group it runs in; None: the block

    def int_extents(self):
        if not all(isinstance(e, ir.Const) for e in self.extents):
            return None
        return [e.value for e in self.extents]

    def kinds(self, buf):
        return FA.classify(buf, self.accesses[buf], self.vars)


@dataclass
class Collected:
    gemms: list = field(default_factory=list)
    reduces: list = field(default_factory=list)
    scans: list = field(default_factory=list)
    loops: list = field(default_factory=list)
    block_level: dict = field(default_factory=dict)  # fragment -> loc of a block-level access
    shared: list = field(default_factory=list)
    fragments: list = field(default_factory=list)
    # id(gemm, reduction or scan) -> the thread group it runs in
    group_of: dict = field(default_factory=dict)
    # fragment (a view's root) -> {thread group: location of a statement using it there}
    users: dict = field(default_factory=dict)


class _Collect(LocatedVisitor):
    def __init__(self, out: Collected):
        self.out = out
        self.loop: LoopInfo = None
        self.group = None
        self.accumulating = False

    def visit_Attr(self, s):
        if s.key == REDUCER_UPDATE:
            self.accumulating = True
            try:
                return self.generic(s)
            finally:
                self.accumulating = False
        group = role_group(s)
        if group is None:
            return self.generic(s)
        saved, self.group = self.group, group
        try:
            self.generic(s)
        finally:
            self.group = saved

    def _use(self, buf, loc):
        if buf.scope == "local.fragment":
            root = buf
            while root.view_of is not None:
                root = root.view_of
            self.out.users.setdefault(root, {}).setdefault(self.group, loc)

    def _op(self, s, *buffers):
        self.out.group_of[id(s)] = self.group
        for b in buffers:
            self._use(b, s.loc or self.loc)

    def visit_For(self, s):
        if s.kind == "parallel" and self.loop is None:
            vars_, extents, inner = [], [], s
            while isinstance(inner, ir.For) and inner.kind == "parallel":
                vars_.append(inner.var)
                extents.append(inner.extent)
                inner = inner.body
            self.loop = LoopInfo(s, vars_, extents, group=self.group)
            self.visit(inner)
            self.out.loops.append(self.loop)
            self.loop = None
            return
        self.generic(s)

    def _access(self, buf, indices):
        if buf.scope != "local.fragment":
            return
        self._use(buf, self.loc if self.loop is None else self.loop.stmt.loc)
        if self.loop is None:
            self.out.block_level.setdefault(buf, self.loc)
        else:
            # semantic_check: every access to one fragment in one nest uses the same indices
            self.loop.accesses.setdefault(buf, tuple(indices))

    def visit_Load(self, e):
        self._access(e.buffer, e.indices)
        for i in e.indices:
            self.visit(i)

    def visit_Store(self, s):
        self._access(s.buffer, s.indices)
        if self.loop is not None and s.buffer.scope == "local.fragment":
            (self.loop.accumulated if self.accumulating else self.loop.written).add(s.buffer)
        for i in s.indices:
            self.visit(i)
        self.visit(s.value)

    def visit_Gemm(self, s):
        self.out.gemms.append(s)
        self._op(s, s.A.buffer, s.B.buffer, s.C.buffer)

    def visit_Reduce(self, s):
        self.out.reduces.append(s)
        self._op(s, s.src, s.dst)

    def visit_CumSum(self, s):
        self.out.scans.append(s)
        self._op(s, s.src, s.dst)


# ---------------------------------------------------------------------------------------------
# the solver
# ---------------------------------------------------------------------------------------------


class LayoutSolver:
    def __init__(self, kernel: ir.Kernel, ctx):
        self.kernel = kernel
        self.ctx = ctx
        self.layouts: dict = {}
        self.origin: dict = {}  # buffer -> description of what fixed its layout
        self.c = Collected()
        _Collect(self.c).visit(kernel.body)
        self.fragment_group = self._fragment_groups()
        # fragments and their T.reshape views hold the same registers: each one's layout is
        # the other's composed with the reshape (shared views: see _shared_views)
        self.views = [v for k, v in kernel.attrs if k == "local_view"]
        self.aliases: dict = {}
        for v in self.views:
            if v.scope == "local.fragment":
                self.aliases.setdefault(v, []).append(v.view_of)
                self.aliases.setdefault(v.view_of, []).append(v)
        # dims of each fragment that some nest indexes by a value it does not own (a serial
        # loop variable, a value read): those dims stay in every thread's registers
        self.fixed_dims: dict = {}
        for info in self.c.loops:
            for buf in info.accesses:
                dims = FA.runtime_fixed_dims(info.kinds(buf))
                if dims:
                    self.fixed_dims.setdefault(buf, set()).update(dims)

    @property
    def T(self) -> int:
        """Threads of the statement being solved for (ctx.thread_group)."""
        return self.ctx.num_threads

    def _fragment_groups(self):
        """fragment -> the thread group (None: the block) of the statements using it; a
        fragment used in two is an error."""
        out = {}
        for buf, where in self.c.users.items():
            if len(where) > 1:
                (g1, loc1), (g2, loc2) = list(where.items())[:2]
                _err(loc2, f"fragment {buf.name} is used by {self._threads(g1)} (line "
                           f"{loc1.lineno if loc1 else '?'}) and by {self._threads(g2)} here: "
                           "a fragment lives in the registers of the threads of one role; "
                           "pass values between roles through shared memory")
            out[buf] = next(iter(where))
        return out

    def _threads(self, group):
        if group is None:
            return f"the whole block of {self.kernel.num_threads} threads"
        lo, n = group
        return f"the role of threads [{lo}, {lo + n})"

    def _group_of_fragment(self, buf):
        while buf.view_of is not None:
            buf = buf.view_of
        return self.fragment_group.get(buf)

    # ---- assignment with conflict detection ------------------------------------------------
    def assign(self, buf, layout, why, loc):
        if isinstance(layout, L.Fragment) and tuple(layout.shape) != tuple(buf.shape):
            _err(loc, f"internal error: {why} gives {buf.name} of shape {list(buf.shape)} a "
                      f"layout of shape {list(layout.shape)}; please report it")
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
        tile's layout composed with the reshape. One of another dtype reads the tile's bytes:
        its element k is bytes [k * size, (k + 1) * size) of the tile in row-major order,
        where the tile's layout stored them (`retyped_layout`), unless an operation needs a
        layout of its own for it (then it reuses the bytes for other data); no larger than
        the tile."""
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
            if v not in self.layouts and not self.layouts[root].is_row_major():
                # nothing lays the view out itself: it reads the tile's bytes where the tile's
                # layout put them (a swizzled float32 tile viewed as bfloat16)
                self.layouts[v] = retyped_layout(self.layouts[root], v.shape,
                                                 root.dtype.bytes, v.dtype.bytes, v.loc)
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
                if isinstance(layout, L.Fragment):
                    with self.ctx.thread_group(self._group_of_fragment(buf)):
                        try:
                            layout = layout.fit_to_block(self.T)
                        except ValueError as e:
                            _err(self.kernel.loc, f"T.annotate_layout of {buf.name}: {e}")
                self.assign(buf, layout, "T.annotate_layout", self.kernel.loc)

    def gemm(self, g: ir.Gemm):
        A, B, C = g.A.buffer, g.B.buffer, g.C.buffer
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
            frag = self.ctx.a_fragment_layout(g, part, M, K)
            self.assign(A, transpose_fragment(frag) if g.trans_A else frag,
                        "T.gemm register operand A", g.loc)
        if B.scope == "local.fragment":
            frag = self.ctx.b_fragment_layout(g, part, K, N)
            self.assign(B, transpose_fragment(frag) if g.trans_B else frag,
                        "T.gemm register operand B", g.loc)
        for operand, region in (("A", g.A), ("B", g.B)):
            buf = region.buffer
            if buf.scope in SHARED and buf not in self.layouts:
                self.assign(buf, self.ctx.shared_operand_layout(buf), f"T.gemm operand "
                            f"{operand}", g.loc)

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

    # ---- parallel loops --------------------------------------------------------------------
    def loop(self, info: LoopInfo) -> bool:
        """Choose the loop's layout once one of its fragments has one; give the fragments that
        have none the layout the loop implies."""
        extents = info.int_extents()
        if not info.accesses or extents is None:
            return False  # semantic check already rejected fragments in symbolic loops
        if info.layout is None:
            choice = self._choose(info, extents)
            if choice is None:
                return False
            info.layout, info.iter_map, info.owner = choice
        if info.owner is not None or info.iter_map is not None:
            return False  # such a loop follows one fragment and lays out no other
        changed = False
        for buf in info.accesses:
            if buf in self.layouts:
                continue
            want = self._fragment_from_loop(info, buf, extents)
            if want is not None:
                changed |= self.assign(buf, want, "a T.Parallel loop", info.stmt.loc)
        return changed

    def _fragment_from_loop(self, info, buf, extents):
        """The layout of `buf` under which the loop layout serves its access: the loop's
        projection on the loop dims that index it, plus value modes of their own for the dims
        indexed by a fixed value; None for other index patterns (the default decides)."""
        kinds = info.kinds(buf)
        if any(k == FA.MIXED for k, _ in kinds):
            return None
        pairs = FA.var_dims(kinds)
        if any(buf.shape[d] != extents[p] for d, p in pairs):
            return None
        loop_dims = sorted(p for _, p in pairs)
        try:
            proj = info.layout.project(loop_dims) if len(loop_dims) < len(extents) else \
                info.layout
        except ValueError:
            return None
        fdim_of = {p: d for d, p in pairs}
        frag = place_dims(proj, [fdim_of[p] for p in loop_dims], buf.shape,
                          [d for d, (k, _) in enumerate(kinds) if k == FA.FIXED])
        if not FA.dims_only_in_values(frag, self.fixed_dims.get(buf, ())):
            return None  # another nest reads a dim of it by a runtime index: the default
        return frag

    def _loop_from_fragment(self, info, buf, extents):
        """(loop layout, iteration map, owner) under which `buf`'s layout serves the access
        directly, or None."""
        if self.layouts[buf].num_threads != self.T:
            return None
        # a window at a runtime offset (x[i, jj * 4 + j]): the fragment with that dim split
        view = FA.window_view(buf, self.layouts[buf], info.accesses[buf], info.vars, extents)
        frag = view.layout
        kinds = FA.classify(view, view.indices, info.vars)
        pairs = FA.var_dims(kinds)
        if any(k == FA.MIXED for k, _ in kinds) or \
                any(view.shape[d] != extents[p] for d, p in pairs):
            # acc[i + 32, j], or a loop over part of a dim (T.fill(acc[0:32, :], 0)): the
            # loop runs over the fragment's elements, each iteration where its element is
            if view.layout is not self.layouts[buf]:
                return None
            im = FA.shifted_access(buf, kinds, info.vars, extents)
            return None if im is None else (frag, im, None)
        fixed = [d for d, (k, _) in enumerate(kinds) if k == FA.FIXED]
        if fixed and not FA.dims_only_in_values(frag, fixed):
            if pairs and all(isinstance(kinds[d][1], ir.Const) for d in fixed):
                return self._owner_layout(info, buf, extents)
            return None
        if not pairs:
            return None
        dims = [d for d, _ in pairs]
        try:
            proj = frag.project(dims) if len(dims) < len(view.shape) else frag
        except ValueError:
            return None
        order = sorted(range(len(pairs)), key=lambda k: pairs[k][1])
        proj = permute_dims(proj, order)
        loop_dims = [pairs[k][1] for k in order]
        if len(loop_dims) == len(extents):
            return proj, None, None
        return extend_fragment(proj, loop_dims, extents, self.T), None, None

    def _owner_layout(self, info, buf, extents):
        """A laid-out fragment indexed by loop variables and constants in dims it spreads over
        threads (lse[k, 0] where element (k, j) lives on thread j): as in the reference, the
        loop follows the fragment, each iteration running on the threads that hold its
        element. The layout gives every thread every iteration; partition_parallel guards each
        one by ownership of the element (annotation "loop_owner")."""
        nd = len(extents)  # value modes fastest first: row-major iterations
        values = [(extents[d], tuple(int(k == d) for k in range(nd)))
                  for d in reversed(range(nd))]
        return (L.Fragment(tuple(extents), [(self.T, (0,) * nd)], values), None,
                (buf, info.accesses[buf]))

    def _choose(self, info, extents, final=False):
        """The loop layout from the laid-out fragment that leaves the fewest others to reach
        through shared memory (written fragments first, as the reference prefers them); with
        `final`, the default loop layout when none gives one."""
        order = sorted(info.accesses,
                       key=lambda b: b not in info.written and b not in info.accumulated)
        best, best_cost = None, None
        for buf in order:
            if buf not in self.layouts:
                continue
            cand = self._loop_from_fragment(info, buf, extents)
            if cand is None:
                continue
            unserved = self._unserved(info, extents, cand)
            cost = len(unserved) + 1000 * len(info.accumulated.intersection(unserved))
            if best is None or cost < best_cost:
                best, best_cost = cand, cost
            if cost == 0:
                break
        if best is None and final:
            best = (self.ctx.default_loop_layout(extents, _innermost(info.stmt)), None, None)
        return best

    def _grid(self, info, extents, cand):
        layout, iter_map, owner = cand
        grid = FA.LoopGrid(layout, info.vars, extents, iter_map)
        if owner is not None:
            buf, indices = owner
            FA.restrict_to_holders(grid, buf, self.layouts[buf], indices)
        return grid

    def _unserved(self, info, extents, cand):
        """{fragment: written} of the laid-out fragments the candidate does not serve."""
        grid = self._grid(info, extents, cand)
        out = {}
        for buf, indices in info.accesses.items():
            if buf not in self.layouts:
                continue
            write = buf in info.written
            if FA.serve(grid, buf, self.layouts[buf], indices, write) is None:
                out[buf] = write
        return out

    def finish_loop(self, info):
        """After every fragment has a layout: the loop's layout, and the fragments it reaches
        through shared memory (those its layout cannot serve)."""
        extents = info.int_extents()
        if not info.accesses or extents is None:
            return
        self._check_given_loop_layout(info, extents)
        if info.layout is None:
            info.layout, info.iter_map, info.owner = self._choose(info, extents, final=True)
        cand = (info.layout, info.iter_map, info.owner)
        info.staged = self._unserved(info, extents, cand)
        lost = [b.name for b in info.staged if b in info.accumulated]
        if lost:
            _err(info.stmt.loc, f"reducer {lost[0]} is updated in a T.Parallel loop whose layout "
                                "does not hold its elements where the iterations run (its "
                                "layout comes from another loop or operation); update it from "
                                "loops over the same tiles, or accumulate into a fragment and "
                                "combine it with T.reduce_*")

    def _check_given_loop_layout(self, info, extents):
        """`T.Parallel(..., loop_layout=F)`: the layouts chosen here decide where iterations
        run, but a given loop layout that makes threads write fragment elements they do not
        hold (under the fragments' layouts) is an error, as in the reference."""
        given = info.stmt.annotation("loop_layout")
        if not isinstance(given, L.Fragment) or tuple(given.shape) != tuple(extents):
            return
        try:
            given = given.fit_to_block(self.T)
        except ValueError as e:
            _err(info.stmt.loc, f"the loop_layout of this T.Parallel: {e}")
        written = [b for b, w in self._unserved(info, extents, (given, None, None)).items() if w]
        if written:
            buf = written[0]
            _err(info.stmt.loc, f"Layout infer conflict: the loop_layout of this T.Parallel "
                                f"writes elements of {buf.name} from threads that do not hold "
                                f"them under its layout {self.layouts[buf]!r}; give a loop "
                                "layout that runs each write on the element's holders")

    # ---- defaults -----------------------------------------------------------------------------
    def default_fragment(self, buf):
        if self.aliases.get(buf):
            return self._default_for_aliases(buf)
        fixed = sorted(self.fixed_dims.get(buf, ()))
        if not fixed:
            return L.elementwise_fragment(buf.shape, self.T, self._vector_width(buf))
        # the dims read at runtime indices in values of their own, the rest spread as usual
        # (narrower vectors rather than idle threads, like the reference's loop partition)
        rest = [d for d in range(buf.ndim) if d not in fixed]
        shape = tuple(buf.shape[d] for d in rest)
        numel = int(np.prod(shape)) if shape else 1
        vec = self._vector_width(buf) if rest else 1
        while vec > 1 and (numel // vec < self.T or shape[-1] % vec):
            vec //= 2
        base = L.elementwise_fragment(shape, self.T, vec) if rest else \
            replicated_fragment((), self.T)
        return place_dims(base, rest, buf.shape, fixed)

    def _default_for_aliases(self, buf):
        """The default layout of a fragment with T.reshape views: the element-wise layout of
        the first shape (this one, then its views) and vector width whose reshape to every
        other shape is a fragment too (narrower vectors leave fewer threads idle). When no
        width works on all the block's threads (a (2, 192) tile viewed as (2, 6, 32) on 128
        threads), the element-wise layout on half of them (then a quarter, ...), the others
        holding copies."""
        group = [buf] + self.aliases[buf]
        first_error = None
        counts = [self.T]
        while counts[-1] % 2 == 0:
            counts.append(counts[-1] // 2)
        for threads in counts:
            for member in group:
                w = self._vector_width(member)
                while w >= 1:
                    cand = L.elementwise_fragment(member.shape, threads, w)
                    if threads != self.T:
                        cand = cand.replicate(self.T // threads)
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
                with self.ctx.thread_group(info.group):
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

    def _tma_add_sources(self) -> list:
        """Shared tiles that `T.atomic_add(..., use_tma=True)` adds on sm_90a (constraint 6,
        before row-major): the swizzle the reference gives them, which the TMA unit reads
        (transform/tma_reduce.py) and which spreads the threads' writes of the tile over the
        banks. 16- and 32-bit tiles of whole 8-row groups with rows of at least 32 bytes; others
        stay row-major (a 64-bit tile's swizzle is not one a tensor map encodes)."""
        from ..ir.visitor import collect
        from .pass_config import PassConfigKey

        if not self.ctx.target.is_hopper or self.ctx.flag(PassConfigKey.TL_DISABLE_TMA_LOWER):
            return []
        out = []
        for s in collect(self.kernel.body, lambda n: isinstance(n, ir.AtomicTile)
                         and n.use_tma and not n.cluster_sum
                         and isinstance(n.src, ir.BufferRegion)):
            S = s.src.buffer
            if S.scope not in SHARED or S.ndim != 2 or not all(isinstance(d, int)
                                                              for d in S.shape):
                continue
            rows, cols = S.shape
            if S.dtype.bits in (16, 32) and rows % 8 == 0 and cols * S.dtype.bits // 8 >= 32:
                out.append(S)
        return out

    def _thread_indexed_tiles(self) -> dict:
        """Shared tiles whose rows follow the thread index (constraint 6, before row-major):
        {tile: (pad, wavefronts row-major, wavefronts padded)} for a 2-D (or more) tile of
        8-, 16- or 32-bit elements that only plain element loads and stores touch, outside
        T.Parallel and vectorized loops, where
        padding each row by 4, 8 or 16 bytes (`pad` elements) spreads a warp's accesses
        over more banks than row-major does: `S[tx, k]` in a row-major tile of 256-byte rows
        puts all 32 lanes in one bank (32 wavefronts per access, the reference's naive GEMV
        on sm_90a), 4 bytes of padding in 32. Each access is evaluated for the 32 lanes of the
        first warp, its other variables at 0; a tile with an access that cannot be evaluated so
        keeps row-major. Only the layout changes (plan_shared indexes every access through
        it); no other code sees the tile, so no vector access needs its rows aligned."""
        k = self.kernel
        free = {b for b in k.allocs if b.scope in SHARED and b.ndim >= 2 and
                b.dtype.bits in (8, 16, 32) and b.dtype.lanes == 1 and b.view_of is None and
                all(isinstance(d, int) for d in b.shape) and b not in self.layouts}
        if not free:
            return {}
        free -= {v.view_of for v in k.allocs if v.view_of is not None}
        free -= {v.view_of for key, v in k.attrs if key == "local_view"}
        accesses: dict = {}
        stack = [(k.body, False)]
        while stack:  # element accesses, and whether a parallel / vectorized loop holds them
            node, inside = stack.pop()
            if node is None:
                continue
            if isinstance(node, (ir.Load, ir.Store)) and node.buffer in free:
                accesses.setdefault(node.buffer, []).append((node, inside))
            if isinstance(node, ir.For):
                inner = inside or node.kind in ("parallel", "vectorized")
                stack.extend((c, inner) for c in (node.start, node.extent, node.body))
            else:
                stack.extend((c, inside) for c in children(node))
        lanes = np.arange(min(32, self.T))
        env, stride = {}, 1
        for v, n in zip(k.thread_vars, k.threads):
            env[v] = lanes // stride % n
            stride *= n
        out = {}
        for S, found in accesses.items():
            if any(inside for _, inside in found) or _mentions(k.body, S) != len(found):
                continue
            points = []
            for node, _ in found:
                idx = node.indices
                bind = dict(env)
                for i in idx:
                    for v in collect(i, lambda n: isinstance(n, ir.Var)):
                        bind.setdefault(v, 0)
                try:
                    points.append([np.broadcast_to(np.asarray(eval_index(i, bind), np.int64),
                                                   lanes.shape) for i in idx])
                except (KeyError, TypeError, ValueError):
                    break
            else:
                nbytes = S.dtype.bits // 8

                def cost(layout):
                    return sum(warp_wavefronts(layout.forward(*p), nbytes) for p in points)

                before = cost(L.row_major(S.shape))
                best, best_cost = 0, before
                for pad_bytes in _ROW_PADS:
                    pad = pad_bytes // nbytes
                    c = cost(L.make_padded_layout(S.shape, pad))
                    if c < best_cost:
                        best, best_cost = pad, c
                if best:
                    out[S] = (best, before, best_cost)
        # padding must not push a kernel that fits past the shared-memory limit (counted
        # without reuse between tiles: an upper bound of plan_shared's arena)
        extra = sum(pad * math.prod(S.shape[:-1]) * S.dtype.bytes for S, (pad, *_) in out.items())
        used = sum(b.numel() * b.dtype.bytes for b in k.allocs if b.scope in SHARED)
        if out and used + extra > smem_limit(self.ctx.target.sm):
            return {}
        return out

    def _staging_tiles(self) -> list:
        """Shared tiles a program stages fragment values through (constraint 6, before
        row-major): written only element-wise from fragments (`T.copy(fragment, S)`, or a
        T.Parallel nest storing `S[i, j] = fragment[...]` at its own loop variables) and read
        only by copies to global memory or by vector atomics of whole 8- or 16-byte groups
        (`T.atomic_addx4(G[...], S[i, 4 * j])`). They take the swizzle the reference gives
        its TMA store sources: a thread's accumulator elements sit in 8 rows at one column,
        which in a row-major tile of 128-byte multiple rows are all in the same banks (8-way
        conflicts on 4-byte stores, 4-way on 8-byte ones); the readers take whole 16-byte
        chunks, which the swizzle keeps whole. 16- and 32-bit 2-D tiles of whole 8-row
        groups with rows of a swizzle width; a tile anything else touches (a gemm, a pointer,
        a view, another loop), or one stored to a contiguous run of global memory (one 1-D
        bulk store, which needs it row-major), keeps its row-major layout."""
        viewed = {v.view_of for v in self.kernel.allocs if v.view_of is not None}
        viewed |= {v.view_of for k, v in self.kernel.attrs if k == "local_view"}
        uses: dict = {}  # shared tile -> [element-wise stores from fragments, whole reads]
        one_run = set()  # tiles stored to a contiguous run of global memory
        analyzer = Analyzer()
        bind_kernel_vars(analyzer, self.kernel)  # (a grid of one block: bx is 0)
        for info in self.c.loops:
            move = _copy_nest_move(info.stmt)
            if move is not None and move[1].scope in SHARED and move[0].scope == "global":
                uses.setdefault(move[1], [0, 0])[1] += 1
                store = info.stmt.annotation(STORE_COPY)
                if store is not None and contiguous_offset(store[0].dst, analyzer) \
                        is not None:
                    one_run.add(move[1])
                continue
            for st in collect(info.stmt, lambda n: isinstance(n, ir.Store)):
                if st.buffer.scope in SHARED and _stores_fragment_elementwise(st, info.vars):
                    uses.setdefault(st.buffer, [0, 0])[0] += 1
        for call in collect(self.kernel.body, lambda n: isinstance(n, ir.Call)
                            and n.op in _VECTOR_ATOMICS):
            src = call.args[1] if len(call.args) > 1 else None
            if isinstance(src, ir.Load) and src.buffer.scope in SHARED and \
                    _whole_chunk_group(src, _VECTOR_ATOMICS[call.op]):
                uses.setdefault(src.buffer, [0, 0])[1] += 1
        out = []
        for S, (written, read) in uses.items():
            if not (written and read) or S.view_of is not None or S in viewed:
                continue
            if S in one_run:
                # row-major, one 1-D bulk store needs no tensor map (encoding one costs the
                # host microseconds a call: FlashAttention bhsd 9.0 -> 13.4 µs, H200)
                continue
            if S.ndim != 2 or S.dtype.bits not in (16, 32) or not all(
                    isinstance(d, int) for d in S.shape) or S.shape[0] % 8:
                continue
            if L.swizzle_mode(S.shape, S.dtype.bits) is None:
                continue
            if _mentions(self.kernel.body, S) != written + read:
                continue  # something besides these touches the tile (one access each)
            out.append(S)
        return out

    def solve(self):
        self.annotated()
        for g in self.c.gemms:
            with self.ctx.thread_group(self.c.group_of[id(g)]):
                self.gemm(g)
        self.propagate()
        # A fragment read or written outside T.Parallel (an if condition, a block-level
        # statement) that no instruction or reduction laid out is held whole by every thread,
        # as in the reference: any thread can then read any element at any index.
        for buf, loc in self.c.block_level.items():
            if buf not in self.layouts:
                with self.ctx.thread_group(self._group_of_fragment(buf)):
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
            with self.ctx.thread_group(self._group_of_fragment(buf)):
                self.assign(buf, self.default_fragment(buf), "the default element-wise "
                            "layout", loc)
            self.propagate()
        for buf in self._tma_add_sources() + self._staging_tiles():
            if buf not in self.layouts:
                self.layouts[buf] = L.make_swizzled_layout(buf)
        for buf, (pad, before, after) in self._thread_indexed_tiles().items():
            if buf not in self.layouts:
                self.layouts[buf] = L.make_padded_layout(buf.shape, pad)
                self.ctx.note(f"shared tile {buf.name}: rows padded by "
                              f"{pad * buf.dtype.bytes} bytes (a warp's lanes index its rows: "
                              f"{before} wavefronts per warp over its accesses row-major, "
                              f"{after} padded)")
        for buf in self.kernel.allocs:
            if buf.scope in SHARED and buf not in self.layouts:
                self.layouts[buf] = L.row_major(buf.shape)
        self._shared_views()
        for info in self.c.loops:
            with self.ctx.thread_group(info.group):
                self.finish_loop(info)
        return self.layouts


# paddings tried for a tile whose rows follow the thread index (bytes added to each row)
_ROW_PADS = (4, 8, 16)


# vector atomics whose value operand may be read from a swizzled tile: lanes per access
_VECTOR_ATOMICS = {"atomic_addx2": 2, "atomic_addx4": 4}


def _stores_fragment_elementwise(st, loop_vars) -> bool:
    """`S[i, j] = cast?(F[...])` with F a fragment and (i, j) the nest's last two loop
    variables, in order."""
    v = st.value.value if isinstance(st.value, ir.Cast) else st.value
    if not (isinstance(v, ir.Load) and v.buffer.scope == "local.fragment"):
        return False
    return len(st.indices) == 2 and len(loop_vars) >= 2 and all(
        i is x for i, x in zip(st.indices, loop_vars[-2:]))


def _whole_chunk_group(load, lanes) -> bool:
    """Whether `load` starts `lanes` consecutive elements at a multiple of `lanes` along the
    row, a group of 8 or 16 bytes: inside one 16-byte chunk, which a swizzle moves whole."""
    nbytes = lanes * load.buffer.dtype.bytes
    if nbytes not in (8, 16) or len(load.indices) != 2:
        return False
    col = load.indices[-1]
    if isinstance(col, ir.Const):
        return col.value % lanes == 0
    return (isinstance(col, ir.Binary) and col.op == "mul" and any(
        isinstance(x, ir.Const) and x.value % lanes == 0 for x in (col.a, col.b)))


def _copy_nest_move(nest):
    """(destination, source) buffers of a `T.copy` nest whose body is one store of a
    (converted) load, else None."""
    if nest.annotation("from_tile_op") != "copy":
        return None
    body = _innermost(nest)
    if not isinstance(body, ir.Store):
        return None
    v = body.value.value if isinstance(body.value, ir.Cast) else body.value
    if not isinstance(v, ir.Load):
        return None
    return body.buffer, v.buffer


def _mentions(node, buf) -> int:
    """How many places of `node` name `buf` (loads, stores, regions, pointers); loop
    annotations are not places (a shared -> global copy nest carries its Copy in one,
    lower_elementwise's STORE_COPY)."""
    count, stack = 0, [node]
    while stack:
        x = stack.pop()
        if x is buf:
            count += 1
        if isinstance(x, ir.For):
            stack.extend((x.start, x.extent, x.body))
        elif x is not None:
            stack.extend(children(x))
    return count


def _innermost(nest):
    while isinstance(nest, ir.For) and nest.kind == "parallel":
        nest = nest.body
    return nest


def _fragment_nest(src, dst, layout, loc):
    """for idx in T.Parallel(shape) (laid out as `layout`): dst[idx] = src[idx]."""
    vars_ = [ir.Var(n) for n in "ijklmn"[:src.ndim]]
    body = ir.Store(dst, tuple(vars_), ir.cast_to(ir.Load(src, tuple(vars_), src.dtype),
                                                  dst.dtype), loc=loc)
    for v, e in reversed(list(zip(vars_, src.shape))):
        body = ir.For(v, ir.const(0), ir.const(e), "parallel", body, loc=loc)
    return ir.with_fields(body, annotations=(("loop_layout", layout),))


class _Annotate(Mutator):
    def __init__(self, loops, ctx):
        self.by_stmt = {id(info.stmt): info for info in loops}
        self.ctx = ctx

    def visit_For(self, s):
        info = self.by_stmt.get(id(s))
        if info is not None and info.layout is not None:
            ann = tuple((k, v) for k, v in s.annotations
                        if k not in ("loop_layout", "loop_owner", "loop_iter_map"))
            ann += (("loop_layout", info.layout),)
            if info.owner is not None:
                ann += (("loop_owner", info.owner),)
            if info.iter_map is not None:
                ann += (("loop_iter_map", info.iter_map),)
            loop = ir.For(s.var, s.start, s.extent, s.kind, s.body, s.step, ann, loc=s.loc)
            if info.staged:
                return self._stage(info, loop)
            return loop
        return self.generic(s)

    def _stage(self, info, loop):
        """Reach the fragments of info.staged through shared copies: each is copied to shared
        memory (in its own layout) before the loop, the loop reads and writes the copy, and a
        written one is copied back after it. The general way to move data between threads;
        layout inference takes it only where no layout serves the access directly."""
        ctx = self.ctx
        pre, post, mapping = [], [], {}
        for frag, written in info.staged.items():
            scratch = ctx.add_scratch_shared(f"{frag.name}_shared", frag.shape, frag.dtype)
            mapping[frag] = scratch
            pre.append(_fragment_nest(frag, scratch, ctx.layouts[frag], info.stmt.loc))
            if written:
                post.append(_fragment_nest(scratch, frag, ctx.layouts[frag], info.stmt.loc))
            ctx.note(f"{frag.name} is {'written' if written else 'read'} in a T.Parallel loop "
                     f"(line {info.stmt.loc.lineno if info.stmt.loc else '?'}) whose layout "
                     "does not hold its elements where the loop needs them: staged through "
                     "shared memory")

        class Swap(Mutator):
            def visit_Load(self, e):
                nb = mapping.get(e.buffer)
                e = self.generic(e)
                return ir.Load(nb, e.indices, e.dtype) if nb is not None else e

            def visit_Store(self, s):
                nb = mapping.get(s.buffer)
                s = self.generic(s)
                return ir.Store(nb, s.indices, s.value, loc=s.loc) if nb is not None else s

        return ir.Seq(tuple(pre) + (Swap().visit(loop),) + tuple(post))


def infer_layouts(kernel: ir.Kernel, ctx) -> ir.Kernel:
    solver = LayoutSolver(kernel, ctx)
    ctx.layouts.update(solver.solve())
    _note_shared_layouts(kernel, ctx)
    body = _Annotate(solver.c.loops, ctx).visit(kernel.body)
    return kernel if body is kernel.body else ir.with_fields(kernel, body=body)


def _note_shared_layouts(kernel, ctx):
    """One note naming each shared tile's layout (verbose=True explains the choices)."""
    parts = []
    for b in kernel.allocs:
        layout = ctx.layouts.get(b)
        if b.scope not in ("shared", "shared.dyn") or layout is None or \
                b.dtype.name == "uint64":  # mbarriers
            continue
        swz = getattr(layout, "swizzle_bytes", 0)
        parts.append(f"{b.name} {swz}-byte swizzle" if swz else
                     f"{b.name} row-major" if layout.is_row_major() else f"{b.name} {layout}")
    if parts:
        ctx.note("shared tiles: " + ", ".join(parts) + " (a swizzle spreads each 8-row "
                 "group's 16-byte chunks over the banks; wgmma and TMA read swizzled tiles "
                 "as they are)")


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


def retyped_layout(layout, shape, old_bytes, new_bytes, loc=None):
    """A shared tile's layout seen through a view of another element size: view element k
    holds the tile's row-major bytes [k * new_bytes, (k + 1) * new_bytes), wherever the
    tile's layout stored them (in units of the view's elements). A widening view needs each
    group of tile elements it covers stored together and aligned (a swizzle of 16-byte
    chunks keeps pairs and quads of narrow elements so); otherwise a located error."""
    n_view = int(np.prod(shape))
    to_flat = _ravel_unravel(tuple(shape), (n_view,))
    unravel = _ravel_unravel((int(np.prod(layout.shape)),), tuple(layout.shape))
    if new_bytes < old_bytes:
        r = old_bytes // new_bytes

        def fwd(*c):
            (flat,) = to_flat(*c)
            return layout.forward(*unravel(flat // r)) * r + flat % r
    else:
        r = new_bytes // old_bytes
        flat = np.arange(n_view) * r
        base = np.asarray(layout.forward(*unravel(flat)))
        for t in range(1, r):
            if not (np.asarray(layout.forward(*unravel(flat + t))) == base + t).all():
                _err(loc, f"a view of {new_bytes}-byte elements cannot read a tile whose layout "
                          f"does not keep each group of {r} elements together")
        if (base % r).any():
            _err(loc, f"a view of {new_bytes}-byte elements reads a tile whose layout does "
                      "not align its element groups")

        def fwd(*c):
            (flat,) = to_flat(*c)
            return layout.forward(*unravel(flat * r)) // r
    size = -(-layout.physical_size * old_bytes // new_bytes)
    return L.Layout(tuple(shape), fwd, name=f"retype({getattr(layout, 'name', None) or 'layout'})",
                    physical_size=size)


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
        # copies held by the outermost threads (Fragment.replicate): reshape one copy
        held = [m for m in frag.thread_modes if any(m.strides)]
        if list(frag.thread_modes[:len(held)]) != held:
            raise ValueError("a replicated fragment whose copies are not its outermost threads")
        one = L.Fragment(frag.shape, held, frag.value_modes)
        return reshape_fragment(one, shape).replicate(frag.replication)
    to_old = _ravel_unravel(tuple(shape), tuple(frag.shape))
    return L.Fragment.from_function(tuple(shape), lambda *c: frag.locate(*to_old(*c))[0],
                                    lambda *c: frag.locate(*to_old(*c))[1],
                                    num_threads=frag.num_threads)