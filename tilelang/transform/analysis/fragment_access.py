"""How a T.Parallel nest indexes a fragment, and whether a loop layout can serve the access.

Shared by layout inference (to choose loop and fragment layouts, and to decide which
fragments a loop must reach through shared memory) and partition_parallel (which lowers the
access and checks, by the same enumeration, that inference kept its promise).

An index of fragment dim d is, relative to the loop variables of the nest:
  * VAR    exactly one loop variable (`F[i, j]`);
  * UNIT   a constant on a dim of extent 1 (`F[0, j]` on a (1, N) tile);
  * FIXED  free of the loop variables: a constant, an enclosing or inner serial loop's
           variable, a block index, a value read earlier (`lse[k, j]`, `a[i_hci, i]`). Every
           iteration of the nest reads the same element along d, so a thread needs the whole
           dim in its own registers (value modes) unless the index is a constant;
  * MIXED  any other function of the loop variables (`acc[i + 32, j]`, `F[i // 2]`).

`Served` says, by enumerating every (thread, register) slot of a loop layout, whether each
iteration runs on threads that hold the element it touches, in a register slot that does not
depend on the thread (reads), and, for writes, whether every copy of a written element is
written (a replicated fragment stays consistent). FIXED dims that are not constants are
enumerated at coordinate 0: the layout must keep them in value modes of their own, and the
register slot then moves by `fixed_offset` with the runtime index.

A window of a dim read at a runtime offset (`x[i, jj * 4 + j]`, j a loop variable of extent
4, jj a serial loop's) is the same: `window_view` splits the dim at the largest period dividing
the runtime part (x seen as (M, K / 4, 4), indexed [i, jj, j]), and the access is served when
the split layout holds the outer dim in value modes of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir import nodes as ir
from ...ir.visitor import collect
from ...layout.index import distinct
from .fragment_ops import split_dim
from .numeric import eval_index

VAR, UNIT, FIXED, MIXED = "var", "unit", "fixed", "mixed"


class View:
    """A fragment access seen through `window_view`: `shape`, `layout` and `indices` of the
    fragment with its windowed dims split (the original ones where none is)."""

    def __init__(self, shape, layout, indices):
        self.shape, self.layout, self.indices = tuple(shape), layout, tuple(indices)


def _vars_in(e) -> list:
    return collect(e, lambda n: isinstance(n, ir.Var))


def classify(buf, indices, loop_vars) -> tuple:
    """Per dim of `buf`: (kind, payload): (VAR, loop dim) | (UNIT, None) | (FIXED, index) |
    (MIXED, index)."""
    ids = {id(v): k for k, v in enumerate(loop_vars)}
    out = []
    for d, idx in enumerate(indices):
        if id(idx) in ids:
            out.append((VAR, ids[id(idx)]))
        elif isinstance(idx, ir.Const) and buf.shape[d] == 1:
            out.append((UNIT, None))
        elif not any(id(v) in ids for v in _vars_in(idx)):
            out.append((FIXED, idx))
        else:
            out.append((MIXED, idx))
    return tuple(out)


def var_dims(kinds) -> list:
    """[(fragment dim, loop dim)] of the VAR dims."""
    return [(d, p) for d, (k, p) in enumerate(kinds) if k == VAR]


def runtime_fixed_dims(kinds) -> list:
    """FIXED dims whose index is not a constant (a serial loop variable, a value read)."""
    return [d for d, (k, p) in enumerate(kinds) if k == FIXED and not isinstance(p, ir.Const)]


def dims_only_in_values(frag, dims) -> bool:
    """Whether `dims` of `frag` are spread over value modes of their own: no thread mode moves
    along them and no value mode moves along them and another dim."""
    dims = set(dims)
    for m in frag.thread_modes:
        if m.extent > 1 and any(m.strides[d] for d in dims):
            return False
    for m in frag.value_modes:
        if m.extent > 1 and any(m.strides[d] for d in dims) and \
                any(s for k, s in enumerate(m.strides) if k not in dims):
            return False
    return True


def fixed_offset(frag, dims, coords):
    """The register-slot offset of coordinates `coords` (one per dim in `dims`) along value
    modes of their own (`dims_only_in_values`), as an expression: the slot of element x is
    slot(x with these dims at 0) + fixed_offset. None when the modes along a dim do not form a
    compact mixed radix (then no closed form: the caller stages the fragment)."""
    prefix, total = 1, ir.const(0)
    pref = []
    for m in frag.value_modes:
        pref.append(prefix)
        prefix *= m.extent
    for d, x in zip(dims, coords):
        modes = sorted(((m.strides[d], m.extent, p) for m, p in zip(frag.value_modes, pref)
                        if m.extent > 1 and m.strides[d]), key=lambda t: t[0])
        # modes consecutive both along the dim and in the value index are one digit
        # (slot offset x * 2, not x % 2 * 2 + x // 2 * 4)
        merged = []
        for stride, extent, index_stride in modes:
            if merged:
                s0, e0, i0 = merged[-1]
                if stride == s0 * e0 and index_stride == i0 * e0:
                    merged[-1] = (s0, e0 * extent, i0)
                    continue
            merged.append((stride, extent, index_stride))
        modes = merged
        expect = 1
        for k, (stride, extent, index_stride) in enumerate(modes):
            if stride != expect:
                return None
            digit = x if stride == 1 else ir.binary("floordiv", x, stride)
            if k != len(modes) - 1:
                digit = ir.binary("floormod", digit, extent)
            term = digit if index_stride == 1 else ir.binary("mul", digit, index_stride)
            total = ir.binary("add", total, term)
            expect = stride * extent
        if expect < frag.shape[d]:
            return None
    return total


@dataclass
class IterMap:
    """A loop laid out over a fragment's element space instead of its own iterations
    (`acc[i + 32, j]` in a loop over (i, j) of acc's shape): loop dim k runs at
    `(element[dim_of[k]] - offset[k]) mod extent[k]`, so iteration x runs on the holders of
    element x + offset. `modular[k]`: the loop dim has the fragment dim's extent (wrap around,
    every iteration once); otherwise elements whose iteration falls outside the loop are
    guarded off."""

    dim_of: tuple
    offset: tuple
    modular: tuple

    def iterations(self, elem_coords, extents):
        """Loop coordinates (ints, arrays or expressions) of element coordinates."""
        out = []
        for k, (d, c, wrap) in enumerate(zip(self.dim_of, self.offset, self.modular)):
            x = elem_coords[d]
            if isinstance(x, (int, np.integer, np.ndarray)):
                x = x - c
                out.append(x % extents[k] if wrap else x)
            else:
                x = ir.binary("sub", x, c) if c else x
                out.append(ir.binary("floormod", ir.binary("add", x, extents[k]), extents[k])
                           if wrap and c else x)
        return tuple(out)

    def guard(self, iters, extents):
        """The bounds of non-modular dims (None when every dim wraps)."""
        conds = []
        for x, n, wrap in zip(iters, extents, self.modular):
            if not wrap:
                conds.append((x, n))
        return conds or None


def shifted_access(buf, kinds, loop_vars, extents, analyzer=None):
    """An IterMap when every loop dim appears exactly once in `buf`'s indices as `var + c`
    (c a constant, possibly 0), every other dim is a UNIT, and each shifted dim is either as
    long as its loop dim (modular) or holds the shifted range; else None."""
    from ...arith import Analyzer

    an = analyzer or Analyzer()
    dim_of, offset = [None] * len(loop_vars), [0] * len(loop_vars)
    for d, (kind, payload) in enumerate(kinds):
        if kind == UNIT:
            continue
        if kind == VAR:
            k, c = payload, 0
        elif kind == MIXED:
            found = None
            for k, v in enumerate(loop_vars):
                lin = an.detect_linear(payload, v)
                if lin is not None and lin[0] == 1 and isinstance(lin[1], ir.Const):
                    rest_vars = _vars_in(lin[1])
                    if not rest_vars:
                        found = (k, int(lin[1].value))
                        break
            if found is None:
                return None
            k, c = found
        else:
            return None
        if dim_of[k] is not None:
            return None
        dim_of[k], offset[k] = d, c
    if None in dim_of:
        return None
    modular = []
    for k, d in enumerate(dim_of):
        n, e, c = buf.shape[d], extents[k], offset[k]
        if n == e:
            modular.append(True)
        elif 0 <= c and c + e <= n:
            modular.append(False)
        else:
            return None
    return IterMap(tuple(dim_of), tuple(offset), tuple(modular))


def window_view(buf, frag, indices, loop_vars, extents, analyzer=None) -> View:
    """`buf[indices]` laid out as `frag`, with every MIXED dim indexed `c * var + rest` (var
    one loop variable, c a positive constant, rest free of the loop variables: a serial
    loop's variable scaled, or the constant it became when unrolled) split at the largest
    period P < the dim's extent dividing it that `rest` is a multiple of and the window
    (c * (extent - 1) < P) fits in: indexed (rest // P, c * var). A dim stays as it is when the split layout
    cannot express it or spreads its outer part over threads (then the window's position
    decides which threads hold it)."""
    from ...arith import Analyzer

    shape, layout, out = list(buf.shape), frag, list(indices)
    kinds = classify(buf, indices, loop_vars)
    an = None
    for d in reversed(range(len(indices))):  # splitting d leaves the dims before it in place
        kind, idx = kinds[d]
        if kind != MIXED:
            continue
        an = an or analyzer or Analyzer()
        found = None
        for k, v in enumerate(loop_vars):
            lin = an.detect_linear(idx, v)
            if lin is not None and isinstance(lin[0], int) and lin[0] >= 1:
                found = k, v, lin
                break
        if found is None:
            continue
        k, v, (coef, rest) = found
        if any(id(x) in {id(u) for u in loop_vars} for x in _vars_in(rest)):
            continue
        window = coef * (extents[k] - 1) + 1
        period = next((p for p in range(shape[d] - 1, window - 1, -1)
                       if shape[d] % p == 0 and an.is_divisible(rest, p)), None)
        split = None if period is None else split_dim(layout, d, period)
        if split is None or not dims_only_in_values(split, [d]):
            continue  # the window's position would move it to other threads
        inner = v if coef == 1 else ir.binary("mul", v, coef)
        layout = split
        shape[d:d + 1] = [shape[d] // period, period]
        out[d:d + 1] = [ir.binary("floordiv", rest, period), inner]
    return View(shape, layout, out)


class LoopGrid:
    """Every (thread, value) slot of a loop layout with the loop coordinates it runs and
    whether it runs at all (guards of a rounded-up layout or of an IterMap)."""

    def __init__(self, layout, loop_vars, extents, iter_map=None):
        self.layout = layout
        self.vars = list(loop_vars)
        self.extents = list(extents)
        T, V = layout.num_threads, layout.num_values
        table = layout.coord_table()
        coords = [table[:, :, d] for d in range(table.shape[-1])]
        guard = layout.in_bounds(coords) if layout.guard_dims else None
        active = np.ones((T, V), bool) if guard is None else \
            np.broadcast_to(np.asarray(guard, bool), (T, V)).copy()
        if iter_map is not None:
            coords = [np.broadcast_to(np.asarray(c, dtype=np.int64), (T, V))
                      for c in iter_map.iterations(coords, self.extents)]
            for c, n in zip(coords, self.extents):
                active &= (c >= 0) & (c < n)
        self.coords = coords
        self.active = active
        self.env = dict(zip(self.vars, coords))


@dataclass
class Served:
    """How a loop layout serves one fragment access: `slots[v]` is the register slot of value
    v (the same for every thread that runs it; -1 where no thread does); `fixed` the runtime
    FIXED dims, whose slot offset is `fixed_offset(layout, fixed, indices)`; `owners` (T, V)
    whether the thread runs value v of this access in range; `view` the access as served
    (`window_view`): `fixed` are dims of it, their offset taken with its layout and indices."""

    slots: np.ndarray
    fixed: tuple
    owners: np.ndarray
    view: View


def _element_slots(grid: LoopGrid, buf, frag, indices, fixed):
    """Per (thread, value) of the grid: the element's coordinates (runtime FIXED dims at 0),
    whether it runs in range, the element's register slot and whether the thread holds it;
    None when an index cannot be evaluated on the grid."""
    act = grid.active
    idx = []
    for d, i in enumerate(indices):
        if d in fixed:
            idx.append(np.zeros(act.shape, np.int64))
            continue
        try:
            val = eval_index(i, grid.env)
        except (KeyError, TypeError):
            return None
        idx.append(np.broadcast_to(np.asarray(val, dtype=np.int64), act.shape))
    inr = act.copy()
    for a, n in zip(idx, buf.shape):
        inr &= (a >= 0) & (a < n)
    table = frag._holder_table()
    safe = [np.where(inr, a, 0) for a in idx]
    slot = table[(1,) + tuple(safe)]
    held = slot >= 0  # -1: no thread holds the element
    t = np.arange(frag.num_threads)[:, None]
    if safe:  # whether what thread t holds in that slot is the element (row-major indices)
        at = frag.flat_coord_table()[t, np.where(inr & held, slot, 0)]
        elem = safe[0]
        for a, n in zip(safe[1:], frag.shape[1:]):
            elem = elem * n + a
        owns = held & (at == elem)
    else:
        owns = np.ones(act.shape, bool)
    return safe, inr, slot, owns


def restrict_to_holders(grid: LoopGrid, buf, frag, indices):
    """Run each iteration only on the threads that hold buf[indices] (an owner loop)."""
    got = _element_slots(grid, buf, frag, indices, ())
    if got is not None:
        grid.active &= got[3] | ~got[1]


def serve(grid: LoopGrid, buf, frag, indices, write: bool) -> Served | None:
    """A `Served` when `grid` serves `buf[indices]` laid out as `frag` (see the module
    docstring), else None. Iterations whose index falls outside `buf` are ignored: a program
    may guard them in the body, and one that does not reads undefined values on every target
    (the interpreter raises)."""
    view = window_view(buf, frag, indices, grid.vars, grid.extents)
    frag, indices = view.layout, view.indices
    kinds = classify(view, indices, grid.vars)
    fixed = runtime_fixed_dims(kinds)
    if fixed and not dims_only_in_values(frag, fixed):
        return None
    if fixed and fixed_offset(frag, fixed, [ir.const(0)] * len(fixed)) is None:
        return None
    if frag.num_threads != grid.layout.num_threads:
        return None
    got = _element_slots(grid, view, frag, indices, fixed)
    if got is None:
        return None
    safe, inr, slot, owns = got
    if not np.all(owns | ~inr):
        return None
    col = np.where(inr, slot, -1)
    per_v = col.max(axis=0) if col.size else np.zeros(0, np.int64)
    if not np.all((col == per_v[None, :]) | ~inr):
        return None
    if write and not _covers_every_copy(frag, view, safe, inr):
        return None
    return Served(per_v, tuple(fixed), inr, view)


def _covers_every_copy(frag, buf, elem, inr) -> bool:
    """Whether the (thread, element) pairs written include every holder of every element
    written: distinct pairs == distinct elements x replication."""
    if frag.replication == 1:
        return True
    shape = buf.shape
    flat = np.ravel_multi_index(tuple(e[inr] for e in elem), shape) if elem else \
        np.zeros(int(inr.sum()), np.int64)
    threads = np.broadcast_to(np.arange(inr.shape[0])[:, None], inr.shape)[inr]
    size = int(np.prod(shape)) if shape else 1
    pairs = distinct(threads.astype(np.int64) * size + flat)
    return pairs.size == distinct(flat).size * frag.replication
