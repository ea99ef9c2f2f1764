"""Building fragments: from index functions (by enumeration) and the default element-wise layout.

`modes_from_function` turns the reference-style description (a thread function and a local
index function of the logical indices) into modes: it enumerates the map, inverts it into a
table (thread, value) -> coordinates and factors that table as a sum of mixed-radix modes. It
raises ValueError (saying why) when the map is not injective, leaves slots empty, or is not a
sum of per-digit strides.

`elementwise_fragment` is the layout of a T.Parallel loop / fragment not fixed by an instruction.
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as ir
from .index import distinct, static_int, static_shape

__all__ = ["modes_from_function", "enumerate_fragment", "NotModesError", "elementwise_fragment",
           "factor_modes", "replicated_fragment", "make_fully_replicated_layout_fragment"]


def _eval(fn, idx, extra=()):
    """Evaluate a user index function on index arrays; fall back to one call per element (for
    functions that only work on scalars). Returns a list of int64 arrays (one per output)."""
    n = idx.shape[1]
    try:
        out = fn(*idx, *extra)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        arrs = []
        for o in outs:
            if isinstance(o, ir.Const):
                o = o.value
            if isinstance(o, ir.ExprOps):
                raise TypeError
            arrs.append(np.broadcast_to(np.asarray(o, dtype=np.int64), (n,)))
        return arrs
    except (TypeError, ValueError, AttributeError):
        pass
    rows = []
    for k in range(n):
        out = fn(*(int(x) for x in idx[:, k]), *extra)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        vals = []
        for o in outs:
            v = static_int(o)
            if v is None:
                raise ValueError(f"index function returned {o!r} for integer indices "
                                 f"{tuple(int(x) for x in idx[:, k])}; expected an integer")
            vals.append(v)
        rows.append(vals)
    return [np.array(col, dtype=np.int64) for col in zip(*rows)] if rows else []


def _rank_within(t: np.ndarray) -> np.ndarray:
    """For each position k, the number of earlier positions with the same value t[k]."""
    order = np.argsort(t, kind="stable")
    ts = t[order]
    starts = np.searchsorted(ts, ts, side="left")
    rank = np.empty_like(t)
    rank[order] = np.arange(t.size) - starts
    return rank


def _linearise(cols, what):
    """Row-major linearisation of a multi-output local index (extents inferred as max + 1)."""
    if len(cols) == 1:
        return cols[0]
    out = np.zeros_like(cols[0])
    for c in cols:
        if c.size and c.min() < 0:
            raise ValueError(f"{what} returned a negative index")
        out = out * (int(c.max()) + 1 if c.size else 1) + c
    return out


def factor_modes(vals: np.ndarray):
    """Factor f: [0, n) -> Z^ndim (rows of `vals`, f(0) = 0) as mixed-radix modes
    [(extent, strides)], or return None when f is not a sum of per-digit strides."""
    n = vals.shape[0]
    modes, prefix = [], 1
    while prefix < n:
        rem = n // prefix
        s = vals[prefix]
        k = 1
        while k < rem and np.array_equal(vals[k * prefix], k * s):
            k += 1
        e = max(d for d in range(1, k + 1) if rem % d == 0)
        if e == 1:
            return None
        modes.append((e, tuple(int(x) for x in s)))
        prefix *= e
    # verify: rebuild f from the modes
    t = np.arange(n)
    rebuilt = np.zeros_like(vals)
    pre = 1
    for e, s in modes:
        rebuilt += ((t // pre) % e)[:, None] * np.array(s, dtype=np.int64)[None, :]
        pre *= e
    return modes if np.array_equal(rebuilt, vals) else None


class NotModesError(ValueError):
    """A fragment map that is a valid function but not expressible as modes (two elements in
    one slot, empty slots, not separable or not mixed-radix): the reference can still hold it
    (see layout/fragment_map.py)."""


def enumerate_fragment(shape, thread_fn, index_fn, replicate=1, forward_fn=None):
    """(coordinates, threads, slots) of the fragment `idx -> (thread_fn(*idx[, rep]),
    index_fn(*idx))` over a static `shape`: coordinates (ndim, n_elem) of every element, and
    per copy rep in range(replicate) int64 arrays (replicate, n_elem) of its thread and local
    slot (a list-valued index linearised row-major). `forward_fn(*idx[, rep]) -> (thread,
    index)` may replace the two functions."""
    shape = static_shape(shape, "a Fragment")
    ndim = len(shape)
    idx = np.indices(shape, dtype=np.int64).reshape(ndim, -1)
    replicate = int(replicate)
    threads, values = [], []
    for rep in range(replicate):
        extra = (rep,) if replicate > 1 else ()
        if forward_fn is not None:
            out = _eval(lambda *a: _flatten_pair(forward_fn(*a)), idx, extra)
            t, vcols = out[0], out[1:]
        else:
            if thread_fn is None:
                raise ValueError("Fragment needs forward_thread_fn (or forward_fn)")
            (t,) = _eval(thread_fn, idx, extra)[:1]
            if index_fn is None:
                # The reference accepts a thread function alone: each thread keeps the
                # elements it owns in row-major order (slot = how many came before).
                vcols = [_rank_within(t)]
            else:
                vcols = _eval(index_fn, idx)
        threads.append(np.broadcast_to(t, idx.shape[1:]))
        values.append(np.broadcast_to(_linearise(vcols, "forward_index_fn"), idx.shape[1:]))
    t = np.stack(threads) if threads else np.zeros((0, idx.shape[1]), np.int64)
    v = np.stack(values) if values else np.zeros((0, idx.shape[1]), np.int64)
    if t.size and (t.min() < 0 or v.min() < 0):
        raise ValueError("fragment thread/index functions returned a negative thread or index")
    return idx, t, v


def modes_from_function(shape, thread_fn, index_fn, num_threads=None, replicate=1,
                        forward_fn=None, with_base=False):
    """(thread_modes, value_modes) of the fragment `idx -> (thread_fn(*idx[, rep]),
    index_fn(*idx))` over a static `shape`, where rep in range(replicate) numbers the copies.

    `forward_fn(*idx[, rep]) -> (thread, index)` may replace the two functions. A list-valued
    index is linearised row-major. `num_threads` larger than the threads used (a multiple of
    them) makes the extra threads hold copies (an outermost replication mode). A map that is
    not expressible as modes raises NotModesError.

    The threads used may be any one contiguous range [base, base + n) (the reference's
    fragments held by part of the block, e.g. threads 32..95): the modes describe it from
    thread 0 and `with_base=True` returns `(thread_modes, value_modes, base)`."""
    shape = static_shape(shape, "a Fragment")
    ndim = len(shape)
    idx, t, v = enumerate_fragment(shape, thread_fn, index_fn, replicate, forward_fn)
    n_elem, replicate = idx.shape[1], int(replicate)
    t, v = t.reshape(-1), v.reshape(-1)
    base = _contiguous_thread_base(t)
    t = t - base
    n_t = int(t.max()) + 1 if t.size else 1
    n_v = int(v.max()) + 1 if v.size else 1
    table = np.full((n_t, n_v, ndim), -1, dtype=np.int64)
    filled = np.zeros((n_t, n_v), dtype=np.int64)
    np.add.at(filled, (t, v), 1)
    if filled.max() > 1:
        tt, vv = np.argwhere(filled > 1)[0]
        raise NotModesError(f"fragment map is not injective: thread {tt} slot {vv} would hold "
                            f"{filled[tt, vv]} elements")
    if filled.min() == 0:
        tt, vv = np.argwhere(filled == 0)[0]
        raise NotModesError(f"fragment map leaves thread {tt} slot {vv} empty ({n_t} threads x "
                            f"{n_v} slots for {n_elem} elements x {replicate} copies); it "
                            "cannot be written as modes")
    table[t, v] = np.tile(idx.T, (replicate, 1))
    if ndim and np.any(table[0, 0] != 0):
        raise NotModesError(f"fragment map puts thread 0 slot 0 at {tuple(table[0, 0])}, not "
                            "at the origin; it cannot be written as modes")
    f_t, g_v = table[:, 0, :], table[0, :, :]
    if not np.array_equal(table, f_t[:, None, :] + g_v[None, :, :]):
        raise NotModesError("fragment map is not separable (coordinates are not a thread part "
                            "plus a value part); it cannot be written as modes")
    t_modes, v_modes = factor_modes(f_t), factor_modes(g_v)
    if t_modes is None or v_modes is None:
        which = "thread" if t_modes is None else "value"
        raise NotModesError(f"the {which} part of the fragment map is not a mixed-radix sum of "
                            "strides; it cannot be written as modes")
    if num_threads is not None and int(num_threads) != n_t:
        num_threads = int(num_threads)
        if num_threads % n_t:
            raise ValueError(f"fragment uses {n_t} threads, which does not divide "
                             f"num_threads={num_threads}")
        t_modes.append((num_threads // n_t, (0,) * ndim))
    return (t_modes, v_modes, base) if with_base else (t_modes, v_modes)


def _contiguous_thread_base(t: np.ndarray) -> int:
    """The first thread of the one contiguous range of threads `t` uses; a gap (threads
    0..63 and 128..191) raises NotModesError."""
    if not t.size:
        return 0
    used = distinct(t)
    lo, hi = int(used[0]), int(used[-1])
    if len(used) != hi - lo + 1:
        present = set(used.tolist())
        gap = next(x for x in range(lo, hi + 1) if x not in present)
        raise NotModesError(f"the threads holding the fragment do not form one contiguous "
                            f"thread range (they span [{lo}, {hi + 1}) but leave thread {gap} "
                            "empty)")
    return lo


def _flatten_pair(out):
    thread, index = out
    index = list(index) if isinstance(index, (list, tuple)) else [index]
    return [thread] + index


def elementwise_fragment(shape, num_threads: int, vector: int = 1, name=None):
    """The default fragment of a tile not fixed by an instruction.

    The last dim is cut into groups of `vector` contiguous elements (value mode `(vector, 1)`);
    the groups are dealt to the threads row-major (thread t takes group t, then t + num_threads,
    ...). Per dim, from the innermost: when the dim has at least as many groups as the threads
    left, all threads go across it and it repeats in the thread's values; otherwise the dim is
    spread over (a divisor of) the threads left and the rest moves outward. Threads left over
    after the outermost dim hold copies (replication). Extents that do not divide are rounded up,
    so such fragments have `guard_dims`: the caller must guard each slot with
    `frag.in_bounds(frag.coords(t, v))` (or `frag.guard(t, v)`)."""
    from .fragment import Fragment

    shape = static_shape(shape, "elementwise_fragment")
    num_threads, vector = int(num_threads), int(vector)
    if num_threads < 1 or vector < 1:
        raise ValueError(f"elementwise_fragment needs num_threads >= 1 and vector >= 1, got "
                         f"{num_threads}, {vector}")
    ndim = len(shape)
    if ndim == 0:
        return Fragment((), [(num_threads, ())] if num_threads > 1 else [], [], name=name)

    def unit(d, s):
        st = [0] * ndim
        st[d] = s
        return tuple(st)

    t_modes, v_inner, v_outer = [], [], []
    if vector > 1:
        v_inner.append((vector, unit(ndim - 1, 1)))
    left = num_threads
    for d in range(ndim - 1, -1, -1):
        step = vector if d == ndim - 1 else 1
        extent = -(-shape[d] // step)  # groups along this dim
        if extent <= 1:
            continue
        if left == 1:
            v_outer.append((extent, unit(d, step)))
        elif extent >= left:
            t_modes.append((left, unit(d, step)))
            rounds = -(-extent // left)
            if rounds > 1:
                v_outer.append((rounds, unit(d, step * left)))
            left = 1
        else:
            use = min(k for k in range(extent, left + 1) if left % k == 0)
            t_modes.append((use, unit(d, step)))
            left //= use
    if left > 1:
        t_modes.append((left, (0,) * ndim))
    # value order: the vector first, then dims from innermost out (register slots run along the
    # row first, which keeps per-thread loops and stores row-contiguous)
    return Fragment(shape, t_modes, v_inner + v_outer, name=name or "elementwise")


def replicated_fragment(shape, num_threads: int):
    """Every thread holds the whole (small) tile: block-level scalars in fragments."""
    from .fragment import Fragment

    nd = len(shape)
    values = []
    for d in reversed(range(nd)):
        if shape[d] > 1:
            values.append((shape[d], tuple(1 if k == d else 0 for k in range(nd))))
    if not values:
        values = [(1, (0,) * nd)]
    return Fragment(tuple(shape), [(num_threads, (0,) * nd)], values)


def make_fully_replicated_layout_fragment(buffer, threads: int):
    """The reference's name: `buffer` (a fragment, or its shape) held whole by each of
    `threads` threads, for `T.annotate_layout` (index tables, masks every thread reads)."""
    shape = getattr(buffer, "shape", buffer)
    shape = static_shape((shape,) if isinstance(shape, int) else shape, "a Fragment")
    n = static_int(threads)
    if n is None or n < 1:
        raise ValueError(f"make_fully_replicated_layout_fragment: threads must be a positive "
                         f"int, got {threads!r}")
    return replicated_fragment(shape, n)
