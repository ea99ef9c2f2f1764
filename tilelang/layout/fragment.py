"""`Fragment`: a register tile spread over the threads of a block, described by modes.

A Fragment of logical `shape` is two lists of modes, CuTe style. Each mode is
`(extent, strides)` with one non-negative stride per logical dim:

* the thread index t decomposes in mixed radix over `thread_modes` (first mode fastest):
  t = Σ_k digit_k · Π_{j<k} extent_j;
* the value index v (the register slot of the thread, 0 <= v < num_values) decomposes the same
  way over `value_modes`;
* the logical coordinate along dim d is Σ digit · strides[d] over all thread and value modes.

A thread mode whose strides are all zero is replication: those threads hold copies of the same
elements (`replication` = product of their extents). All other modes must be injective together:
`check()` enumerates the map and requires every logical element to be held exactly `replication`
times. A fragment may cover more than its shape (rounded-up iteration spaces, see
`elementwise_fragment`); then `guard_dims` is non-empty and callers must guard with
`in_bounds(coords)` / `guard(thread, value)`.

All index methods take Python ints, numpy arrays or IR expressions (see `layout/index.py`):
`coords(thread, value)` (the per-thread loop direction: value a Python int, thread an Expr) and
`locate(*coords)` (the forward direction, returning the representative holder).

Fragments are immutable and compare by identity; compare mappings with `fragment_equal`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..ir import nodes as ir
from .index import all_of, eq, is_array, is_symbolic, lt, static_int, static_shape

__all__ = ["Fragment", "Mode", "Span", "ShufflePlan", "fragment_equal"]


class Mode(NamedTuple):
    extent: int
    strides: tuple  # one int per logical dim


class Span(NamedTuple):
    """A mode that moves along a queried dim: `index_stride` is its stride in the thread (or
    value) index, `coord_stride` its stride along the dim."""

    mode: int
    extent: int
    index_stride: int
    coord_stride: int


class ShufflePlan(NamedTuple):
    """How to combine the holders of one row of a dim: xor lane masks within a warp, then the
    warp-index digits (`Span`s with index_stride >= warp size) to combine through shared memory."""

    masks: tuple
    cross_warp: tuple


def _norm_modes(modes, ndim, what):
    out = []
    for k, m in enumerate(modes or ()):
        try:
            extent, strides = m
        except (TypeError, ValueError):
            raise ValueError(f"{what} mode {k} must be (extent, strides), got {m!r}") from None
        if isinstance(strides, (int, np.integer)):
            if ndim != 1:
                raise ValueError(f"{what} mode {k}: a single stride {strides} needs a 1-D "
                                 f"fragment; give one stride per dim ({ndim} dims)")
            strides = (strides,)
        strides = tuple(int(s) for s in strides)
        extent = static_int(extent)
        if extent is None or extent < 1:
            raise ValueError(f"{what} mode {k}: extent must be a positive int, got {m[0]!r}")
        if len(strides) != ndim:
            raise ValueError(f"{what} mode {k}: {len(strides)} strides for a {ndim}-D fragment")
        if any(s < 0 for s in strides):
            raise ValueError(f"{what} mode {k}: negative stride in {strides}")
        out.append(Mode(extent, strides))
    return tuple(out)


def _digits(x, extents, what):
    """Mixed-radix digits of x (first extent fastest). The outermost digit skips `% extent`:
    callers pass x in [0, Π extents) and the IR stays shorter."""
    n = math.prod(extents)
    k = static_int(x)
    if k is not None:
        if not 0 <= k < n:
            raise ValueError(f"{what} index {k} out of range [0, {n})")
        x = k
    last = max((i for i, e in enumerate(extents) if e > 1), default=-1)
    digits, prefix = [], 1
    for i, e in enumerate(extents):
        if e == 1:
            digits.append(0)
            continue
        d = x // prefix if prefix != 1 else x
        if i != last:
            d = d % e
        digits.append(d)
        prefix *= e
    return digits


def _combine(pairs):
    """Σ digit * stride, skipping zeros so IR stays small."""
    acc, const = 0, 0
    for digit, s in pairs:
        if s == 0 or (isinstance(digit, int) and digit == 0):
            continue
        if isinstance(digit, int):
            const += digit * s  # fold constant digits into one trailing term
            continue
        acc = acc + (digit if s == 1 else digit * s)
    return acc + const if const else acc


def _is_const_true(c):
    if isinstance(c, ir.Const):
        return bool(c.value)
    if isinstance(c, (bool, np.bool_)):
        return bool(c)
    return None


class Fragment:
    """A register tile: logical elements of `shape` -> (thread, value). See module docstring.

    Construct from modes, `Fragment(shape, thread_modes, value_modes)`, or like the reference
    `T.Fragment(shape, forward_thread_fn=..., forward_index_fn=..., replicate=1)` /
    `Fragment(shape, forward_fn=lambda *idx: (thread, index))` (built by enumeration; see
    `from_function`).

    `thread_base`: the first thread of the block holding the fragment, for a map given by
    functions over part of the block (threads 32..95: thread_base 32, the modes number them
    from 0). The compiler places such a fragment from thread 0 of the block and lets the other
    threads hold copies (`fit_to_block`): only which threads hold the values differs, never
    the values."""

    thread_base = 0

    def __new__(cls, shape=None, thread_modes=None, value_modes=None, *, forward_fn=None,
                forward_thread_fn=None, forward_index_fn=None, replicate=1, num_threads=None,
                name=None):
        """A map given by functions that is not expressible as modes becomes a FragmentMap
        (comparable, not a layout: see layout/fragment_map.py)."""
        self = object.__new__(cls)
        if callable(thread_modes):  # reference positional form: Fragment(shape, forward_fn)
            forward_fn, thread_modes = thread_modes, None
        if forward_fn is None and forward_thread_fn is None:
            return self
        if thread_modes is not None or value_modes is not None:
            raise ValueError("give either modes or index functions to Fragment, not both")
        from .build import NotModesError, enumerate_fragment, modes_from_function

        shape = static_shape((shape,) if isinstance(shape, int) else shape, "a Fragment")
        try:
            self._modes_from_functions = modes_from_function(
                shape, forward_thread_fn, forward_index_fn, num_threads, replicate=replicate,
                forward_fn=forward_fn, with_base=True)
        except NotModesError as exc:
            from .fragment_map import FragmentMap

            _, threads, indices = enumerate_fragment(shape, forward_thread_fn, forward_index_fn,
                                                     replicate, forward_fn)
            return FragmentMap(shape, threads, indices, str(exc), name=name)
        return self

    def __init__(self, shape, thread_modes=None, value_modes=None, *, forward_fn=None,
                 forward_thread_fn=None, forward_index_fn=None, replicate=1, num_threads=None,
                 name=None):
        if isinstance(shape, int):
            shape = (shape,)
        self.shape = static_shape(shape, "a Fragment")
        if callable(thread_modes):  # reference positional form: Fragment(shape, forward_fn)
            forward_fn, thread_modes = thread_modes, None
        if forward_fn is not None or forward_thread_fn is not None:
            # enumerated and factored by __new__
            thread_modes, value_modes, self.thread_base = \
                self.__dict__.pop("_modes_from_functions")
        elif thread_modes is None:
            raise ValueError("Fragment needs thread_modes/value_modes or forward_thread_fn")
        self.thread_modes = _norm_modes(thread_modes, len(self.shape), "thread")
        self.value_modes = _norm_modes(value_modes, len(self.shape), "value")
        self.name = name
        self._locate_plan = None
        self._table = None
        self._coords = None
        self._flat_coords = None

    # ---- alternative constructors ----------------------------------------------------------
    @classmethod
    def from_function(cls, shape, thread_fn, index_fn, num_threads=None, replicate=1,
                      name=None):
        """Build modes by enumerating `thread_fn(*idx)` and `index_fn(*idx)` over the shape.

        Raises ValueError when the map is not expressible as modes (see layout/build.py);
        the constructor's function forms give a FragmentMap then."""
        from .build import modes_from_function

        thread_modes, value_modes = modes_from_function(shape, thread_fn, index_fn, num_threads,
                                                        replicate=replicate)
        return cls(shape, thread_modes, value_modes, name=name)

    # ---- sizes -----------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def num_threads(self) -> int:
        return math.prod(m.extent for m in self.thread_modes)

    @property
    def num_values(self) -> int:
        return math.prod(m.extent for m in self.value_modes)

    @property
    def replication(self) -> int:
        return math.prod(m.extent for m in self.thread_modes if not any(m.strides))

    def get_thread_size(self) -> int:  # reference spelling: threads up to the last holder
        return self.thread_base + self.num_threads

    def misaligned_reduce(self, dim: int):
        """Why a reduction along `dim` across this fragment's threads is refused, or None: as
        in the reference, a fragment over part of the block reduces across threads only from
        a whole warp on (its warp shuffles assume every lane of the warps taking part does)."""
        if self.thread_base % 32 and self.threads_spanning(dim):
            return (f"needs a warp-aligned participating thread range: its layout's threads "
                    f"start at thread {self.thread_base}, inside a warp; start them at a "
                    "multiple of 32")
        return None

    def fit_to_block(self, block_threads: int) -> "Fragment":
        """This fragment on a block of `block_threads` threads: one held by fewer threads
        (e.g. 64 of 128, or threads 32..95) is placed from thread 0 with the remaining
        threads holding copies. ValueError when its threads do not fit the block or do not
        divide it."""
        n = self.num_threads
        if n == block_threads and not self.thread_base:
            return self
        end = self.thread_base + n
        if end > block_threads:
            raise ValueError(f"the fragment is held by threads [{self.thread_base}, {end}), "
                             f"beyond the block's {block_threads} threads")
        if block_threads % n:
            raise ValueError(f"the fragment is held by {n} threads, which does not divide "
                             f"the block's {block_threads} threads; a fragment held by part "
                             "of the block needs a thread count that divides it (a positive "
                             "power of two)")
        out = self.replicate(block_threads // n) if block_threads != n else \
            Fragment(self.shape, self.thread_modes, self.value_modes, name=self.name)
        out.thread_base = self.thread_base
        return out

    @property
    def guard_dims(self) -> tuple:
        """Dims along which the modes reach past the shape (coords need `in_bounds`)."""
        out = []
        for d, size in enumerate(self.shape):
            top = sum((m.extent - 1) * m.strides[d] for m in self.thread_modes + self.value_modes)
            if top >= size:
                out.append(d)
        return tuple(out)

    # ---- inverse direction: (thread, value) -> coordinates ----------------------------------
    def coords(self, thread, value) -> tuple:
        """Logical coordinates held by `thread` in register slot `value`.

        thread in [0, num_threads), value in [0, num_values); ints, arrays or expressions.
        With `guard_dims`, coordinates may be out of bounds: use `in_bounds`/`guard`."""
        td = _digits(thread, [m.extent for m in self.thread_modes], "thread")
        vd = _digits(value, [m.extent for m in self.value_modes], "value")
        modes = self.thread_modes + self.value_modes
        digits = td + vd
        return tuple(_combine((dg, m.strides[d]) for dg, m in zip(digits, modes))
                     for d in range(self.ndim))

    def in_bounds(self, coords):
        """Bounds condition of `coords` (bool / bool array / IR); None when always in bounds."""
        conds = [lt(coords[d], self.shape[d]) for d in self.guard_dims]
        return all_of(conds)

    def guard(self, thread, value):
        """`in_bounds(coords(thread, value))`, or None when it is statically true."""
        if not self.guard_dims:
            return None
        c = self.in_bounds(self.coords(thread, value))
        known = _is_const_true(c) if not is_array(c) else None
        if known is True:
            return None
        return c

    def is_representative(self, thread):
        """True for the one copy among replicated threads (all replication digits zero); None
        when the fragment is not replicated. Use it to keep one writer of replicated data."""
        td = _digits(thread, [m.extent for m in self.thread_modes], "thread")
        conds = [eq(dg, 0) for dg, m in zip(td, self.thread_modes)
                 if m.extent > 1 and not any(m.strides)]
        return all_of(conds)

    # ---- forward direction: coordinates -> (thread, value) ----------------------------------
    def _plan(self):
        """Per dim, the modes moving along it sorted by stride, if they form a compact mixed
        radix (strides 1, e0, e0*e1, ...) and no mode moves along two dims; else a reason."""
        if self._locate_plan is None:
            plan, reason = [], None
            pref_t = np.cumprod([1] + [m.extent for m in self.thread_modes])
            pref_v = np.cumprod([1] + [m.extent for m in self.value_modes])
            entries = [("t", k, m, int(pref_t[k])) for k, m in enumerate(self.thread_modes)]
            entries += [("v", k, m, int(pref_v[k])) for k, m in enumerate(self.value_modes)]
            for kind, k, m, _ in entries:
                if m.extent > 1 and sum(1 for s in m.strides if s) > 1:
                    reason = (f"{'thread' if kind == 't' else 'value'} mode {k} {m} moves "
                              f"along several dims")
            if reason is None:
                for d in range(self.ndim):
                    dim = sorted(((m.strides[d], m.extent, kind, istride)
                                  for kind, k, m, istride in entries
                                  if m.extent > 1 and m.strides[d]), key=lambda e: e[0])
                    expect = 1
                    for s, e, _, _ in dim:
                        if s != expect:
                            reason = (f"the modes along dim {d} have strides "
                                      f"{[x[0] for x in dim]}, not a compact mixed radix")
                            break
                        expect = s * e
                    plan.append(dim)
            self._locate_plan = (plan, reason)
        return self._locate_plan

    def locate(self, *coords):
        """(thread, value) holding the element at `coords`; for replicated fragments the
        representative thread (replication digits zero). Raises ValueError when the map has no
        closed-form inverse and the coords are symbolic."""
        if len(coords) == 1 and isinstance(coords[0], (tuple, list)):
            coords = tuple(coords[0])
        if len(coords) != self.ndim:
            raise ValueError(f"fragment of shape {list(self.shape)} located with "
                             f"{len(coords)} coordinates")
        for d, c in enumerate(coords):
            k = static_int(c)
            if k is not None and not 0 <= k < self.shape[d]:
                raise ValueError(f"coordinate {k} out of range [0, {self.shape[d]}) in dim {d}")
        plan, reason = self._plan()
        if reason is not None:
            if any(is_symbolic(c) for c in coords):
                raise ValueError(f"{self!r} has no closed-form inverse ({reason}); locate() "
                                 "needs integer coordinates here")
            table = self._holder_table()
            t = table[(0,) + tuple(np.asarray(c) for c in coords)]
            v = table[(1,) + tuple(np.asarray(c) for c in coords)]
            if np.any(t < 0):
                raise ValueError(f"{self!r}: some located coordinates are held by no thread")
            return (int(t), int(v)) if np.ndim(t) == 0 else (t, v)
        t_terms, v_terms = [], []
        for d, dim in enumerate(plan):
            x = coords[d]
            for j, (s, e, kind, istride) in enumerate(dim):
                digit = x // s if s != 1 else x
                if j != len(dim) - 1:
                    digit = digit % e
                (t_terms if kind == "t" else v_terms).append((digit, istride))
        return _combine(t_terms), _combine(v_terms)

    def map_forward_thread(self, indices):  # reference spelling
        thread = self.locate(*indices)[0]
        return thread + self.thread_base if self.thread_base else thread

    def _holder_table(self):
        """(2, *shape) array: representative thread and value of each element (-1: none)."""
        if self._table is None:
            table = np.full((2,) + self.shape, -1, dtype=np.int64)
            t, v = self._enumerate_slots()
            rep = self.is_representative(t)
            keep = np.ones(t.shape, bool) if rep is None else np.broadcast_to(rep, t.shape)
            cs = self._coords_array(t, v)
            inb = np.all([(c >= 0) & (c < n) for c, n in zip(cs, self.shape)], axis=0) & keep
            idx = tuple(c[inb] for c in cs)
            table[(0,) + idx] = np.broadcast_to(t, inb.shape)[inb]
            table[(1,) + idx] = np.broadcast_to(v, inb.shape)[inb]
            self._table = table
        return self._table

    # ---- enumeration and checks -------------------------------------------------------------
    def _enumerate_slots(self):
        t = np.arange(self.num_threads, dtype=np.int64)[:, None]
        v = np.arange(self.num_values, dtype=np.int64)[None, :]
        return t, v

    def _coords_array(self, t, v):
        shape = np.broadcast_shapes(t.shape, v.shape)
        return [np.broadcast_to(np.asarray(c, dtype=np.int64), shape)
                for c in self.coords(t, v)]

    def coord_table(self) -> np.ndarray:
        """int64 array (num_threads, num_values, ndim): coordinates of every slot (computed
        once: the analyses of a lowering ask for it, or for slots of it, many times; read-only)."""
        if self._coords is None:
            t, v = self._enumerate_slots()
            cs = self._coords_array(t, v)
            table = np.stack(cs, axis=-1) if cs else \
                np.zeros((self.num_threads, self.num_values, 0), np.int64)
            table.flags.writeable = False
            self._coords = table
        return self._coords

    def flat_coord_table(self) -> np.ndarray:
        """int64 array (num_threads, num_values): the row-major index of every slot's
        element, -1 for a slot outside the shape (computed once; read-only). One comparison
        of these tells whether two slots hold the same element."""
        if self._flat_coords is None:
            table = self.coord_table()
            flat = np.zeros(table.shape[:2], np.int64)
            inside = np.ones(table.shape[:2], bool)
            for d, n in enumerate(self.shape):
                c = table[..., d]
                flat = flat * n + c
                inside &= (c >= 0) & (c < n)
            flat[~inside] = -1
            flat.flags.writeable = False
            self._flat_coords = flat
        return self._flat_coords

    def check(self) -> "Fragment":
        """Validate that every logical element is held exactly `replication` times (slots that
        fall outside the shape are allowed only along `guard_dims`). Returns self."""
        t, v = self._enumerate_slots()
        cs = self._coords_array(t, v)
        size = math.prod(self.shape)
        if not self.shape:
            if self.num_values * (self.num_threads // self.replication) != 1:
                raise ValueError(f"{self!r}: a scalar fragment must hold one value per copy")
            return self
        inb = np.ones(cs[0].shape, bool)
        for c, n in zip(cs, self.shape):
            inb &= (c >= 0) & (c < n)
        flat = np.ravel_multi_index(tuple(c[inb] for c in cs), self.shape)
        counts = np.bincount(flat, minlength=size)
        bad = np.nonzero(counts != self.replication)[0]
        if bad.size:
            e = tuple(int(x) for x in np.unravel_index(int(bad[0]), self.shape))
            n_bad = int(counts[bad[0]])
            raise ValueError(
                f"{self!r} is not a valid fragment: element {e} is held {n_bad} times, "
                f"expected {self.replication} (replication); {bad.size} of {size} elements "
                "are wrong")
        return self

    # ---- derived fragments ------------------------------------------------------------------
    def project(self, dims_kept) -> "Fragment":
        """The fragment of the kept dims (e.g. a row reduction's result).

        Thread modes moving only along dropped dims become replication (threads are kept),
        value modes moving only along dropped dims disappear; a mode moving along both kept and
        dropped dims makes the projection impossible (ValueError)."""
        if isinstance(dims_kept, int):
            dims_kept = (dims_kept,)
        dims_kept = tuple(d % self.ndim for d in dims_kept)
        dropped = [d for d in range(self.ndim) if d not in dims_kept]

        def split(modes, what, keep_replicas):
            out = []
            for k, m in enumerate(modes):
                moves_kept = any(m.strides[d] for d in dims_kept)
                moves_dropped = any(m.strides[d] for d in dropped)
                if moves_kept and moves_dropped:
                    raise ValueError(f"cannot project {self!r} onto dims {list(dims_kept)}: "
                                     f"{what} mode {k} {tuple(m)} mixes kept and dropped dims")
                if moves_dropped and not keep_replicas:
                    continue
                out.append((m.extent, tuple(m.strides[d] for d in dims_kept)))
            return out

        return Fragment(tuple(self.shape[d] for d in dims_kept),
                        split(self.thread_modes, "thread", True),
                        split(self.value_modes, "value", False))

    def replicate(self, n: int) -> "Fragment":
        """The same fragment held by `n` times as many threads (new outermost thread mode)."""
        return Fragment(self.shape, self.thread_modes + ((n, (0,) * self.ndim),),
                        self.value_modes, name=self.name)

    def repeat(self, repeats, repeat_on_thread: bool = False,
               lower_dim_first: bool = True) -> "Fragment":
        """The fragment tiled `repeats[d]` times along each dim d (the shape grows by that factor).

        The copies are told apart by a repeat index: new registers (`value + num_values * r`,
        the default) or, with `repeat_on_thread`, new threads (`thread + num_threads * r`).
        `r` counts the copies with the last dim fastest (`lower_dim_first`, the default) or the
        first dim fastest."""
        if isinstance(repeats, int):
            repeats = (repeats,)
        repeats = tuple(int(r) for r in repeats)
        if len(repeats) != self.ndim or any(r < 1 for r in repeats):
            raise ValueError(f"Fragment.repeat needs one positive count per dim ({self.ndim}), "
                             f"got {list(repeats)}")
        dims = range(self.ndim - 1, -1, -1) if lower_dim_first else range(self.ndim)
        # each copy sits one whole tile further along its dim
        new_modes = tuple(
            (repeats[d], tuple(self.shape[d] if e == d else 0 for e in range(self.ndim)))
            for d in dims if repeats[d] > 1)
        shape = tuple(s * r for s, r in zip(self.shape, repeats))
        if repeat_on_thread:
            return Fragment(shape, self.thread_modes + new_modes, self.value_modes)
        return Fragment(shape, self.thread_modes, self.value_modes + new_modes)

    def _spans(self, modes, dim):
        dim = dim % self.ndim
        out, prefix = [], 1
        for k, m in enumerate(modes):
            if m.extent > 1 and m.strides[dim]:
                out.append(Span(k, m.extent, prefix, m.strides[dim]))
            prefix *= m.extent
        return out

    def threads_spanning(self, dim) -> list:
        """Thread modes moving along `dim`, with their thread-index strides (lane masks): a
        reduction along `dim` combines the threads that differ only in these digits."""
        return self._spans(self.thread_modes, dim)

    def values_spanning(self, dim) -> list:
        """Value modes moving along `dim` (the per-thread part of a reduction along it)."""
        return self._spans(self.value_modes, dim)

    def replica_spans(self) -> list:
        """The replication thread modes as `Span`s (coord_stride: the copy index they give,
        mixed radix over the replication modes): the threads holding copies of one element
        differ only in these digits."""
        out, prefix, copy = [], 1, 1
        for k, m in enumerate(self.thread_modes):
            if m.extent > 1 and not any(m.strides):
                out.append(Span(k, m.extent, prefix, copy))
                copy *= m.extent
            prefix *= m.extent
        return out

    def shuffle_plan(self, dim, warp_size: int = 32) -> ShufflePlan:
        """Lane xor masks (within a warp) and cross-warp digits for a reduction along `dim`.

        Raises ValueError when an in-warp digit is not a power-of-two block of lanes."""
        return self._exchange_plan(self.threads_spanning(dim), warp_size)

    def replica_plan(self, warp_size: int = 32) -> ShufflePlan:
        """Lane xor masks and cross-warp digits that combine the copies of every element of a
        replicated fragment (each copy a partial result: a reducer's); raises ValueError like
        `shuffle_plan`."""
        return self._exchange_plan(self.replica_spans(), warp_size)

    def _exchange_plan(self, spans, warp_size) -> ShufflePlan:
        masks, cross = [], []
        for sp in spans:
            lo, hi = sp.index_stride, sp.index_stride * sp.extent
            if lo >= warp_size:
                cross.append(sp)
                continue
            inner = min(hi, warp_size) // lo
            if (lo & (lo - 1)) or (inner & (inner - 1)) or min(hi, warp_size) % lo:
                raise ValueError(f"{self!r}: thread mode {sp.mode} (extent {sp.extent}, lane "
                                 f"stride {lo}) is not a power-of-two lane block; a reduction "
                                 "along it cannot use shuffle-xor")
            b = lo
            while b < lo * inner:
                masks.append(b)
                b *= 2
            if hi > warp_size:
                if sp.extent % inner:
                    raise ValueError(f"{self!r}: thread mode {sp.mode} straddles a warp "
                                     "boundary unevenly")
                cross.append(Span(sp.mode, sp.extent // inner, warp_size,
                                  sp.coord_stride * inner))
        return ShufflePlan(tuple(masks), tuple(cross))

    def canonical(self) -> "Fragment":
        """Same mapping with extent-1 modes dropped and mergeable neighbours merged
        ((a, s), (b, a*s) -> (a*b, s)), like CuTe's coalesce."""
        def coalesce(modes):
            out = []
            for m in modes:
                if m.extent == 1:
                    continue
                if out:
                    p = out[-1]
                    if all(s == p.extent * ps for s, ps in zip(m.strides, p.strides)):
                        out[-1] = Mode(p.extent * m.extent, p.strides)
                        continue
                out.append(m)
            return out

        return Fragment(self.shape, coalesce(self.thread_modes), coalesce(self.value_modes),
                        name=self.name)

    # ---- printing ----------------------------------------------------------------------------
    def _modes_str(self, modes):
        if not modes:
            return "_:_"
        ext = ",".join(str(m.extent) for m in modes)
        if self.ndim == 1:
            st = ",".join(str(m.strides[0]) for m in modes)
        else:
            st = ",".join("(" + ",".join(map(str, m.strides)) + ")" for m in modes)
        return f"({ext}):({st})"

    def __repr__(self):
        name = f"{self.name}: " if self.name else ""
        rep = f", replication={self.replication}" if self.replication > 1 else ""
        return (f"Fragment({name}{list(self.shape)}, threads={self._modes_str(self.thread_modes)}"
                f", values={self._modes_str(self.value_modes)}{rep})")


def _fragment_is_equal(self, other) -> bool:
    """The reference's `Fragment.is_equal`: the same map (see fragment_equal)."""
    return (isinstance(other, Fragment) and self.thread_base == other.thread_base
            and fragment_equal(self, other))


def fragment_equal(a: Fragment, b: Fragment) -> bool:
    """True when two fragments are the same map (thread, value) -> coordinates: same shape,
    thread and value counts, and coordinates for every slot (modes may be split differently)."""
    if a.shape != b.shape or a.num_threads != b.num_threads or a.num_values != b.num_values:
        return False
    ca, cb = a.canonical(), b.canonical()
    if ca.thread_modes == cb.thread_modes and ca.value_modes == cb.value_modes:
        return True
    return bool(np.array_equal(a.coord_table(), b.coord_table()))


Fragment.is_equal = _fragment_is_equal
