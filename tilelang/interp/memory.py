"""Element access to interpreter memory: loads, stores and scalar atomics.

Memory comes in two kinds:

* **block arrays**: global tensors, workspaces, shared and fragment tiles; one ndarray seen by
  every lane. Global accesses are guarded per element (loads out of bounds read the safe value,
  0 by default; stores out of bounds are dropped). Shared/fragment accesses out of range raise
  an error naming the buffer and the index (only lanes that are active count).
* **`LocalStore`**: `T.alloc_local` / `T.alloc_var` memory, private to each lane of the space
  that allocated it. It stays one uniform array until a lane-dependent value or a partial mask
  is stored, then it gets a leading lane axis (`per_lane`).

Index values are numpy scalars or arrays broadcastable to the lane space; loads return copies,
never views, so a let-bound value cannot change under a later store.
"""

from __future__ import annotations

import numpy as np

from .lanes import EMPTY, collapse, fail, VARYING

__all__ = ["LocalStore", "load_array", "store_array", "atomic_rmw", "scope_name"]

_SCOPE_NAMES = {"shared.dyn": "shared", "local.fragment": "fragment", "local.var": "local"}


def scope_name(buf) -> str:
    """The scope as users write it (`shared`, `fragment`, `local`, `global`)."""
    return _SCOPE_NAMES.get(buf.scope, buf.scope)

_ATOMIC_UFUNC = {"add": np.add, "max": np.fmax, "min": np.fmin, "or": np.bitwise_or,
                "and": np.bitwise_and, "xor": np.bitwise_xor}


def _oob(idx, shape):
    """None when every index is in range; else a bool (array) of out-of-range lanes."""
    bad = None
    for d, i in enumerate(idx):
        n = shape[d]
        if type(i) is np.ndarray:
            if i.size and (i.min() < 0 or i.max() >= n):
                b = (i < 0) | (i >= n)
                bad = b if bad is None else (bad | b)
        elif not 0 <= i < n:
            return True
    return bad


def _describe(buf, idx, bad, mask):
    """The first offending (active) index, for error messages."""
    parts = [np.asarray(i) for i in idx]
    arrays = np.broadcast_arrays(*parts, np.asarray(bad),
                                 *(() if mask is None else (np.asarray(mask),)))
    sel = arrays[len(parts)]
    if mask is not None:
        sel = sel & arrays[-1]
    pos = np.argwhere(sel)
    first = tuple(pos[0]) if len(pos) else ()
    return "[" + ", ".join(str(int(a[first])) for a in arrays[:len(parts)]) + "]"


def _range_error(ctx, buf, idx, bad, mask, what):
    return fail(ctx, IndexError,
                f"{what} out of range: {scope_name(buf)} buffer {buf.name}"
                f"{_describe(buf, idx, bad, mask)} with shape {list(buf_shape(ctx, buf))}")


def buf_shape(ctx, buf):
    st = ctx.bufs.get(buf)
    if isinstance(st, LocalStore):
        return st.shape
    if st is not None:
        return st.shape
    return buf.shape


def _active_bad(bad, mask):
    if mask is None:
        return bad if type(bad) is not np.ndarray else bad.any()
    if type(bad) is not np.ndarray:
        return bool(bad) and mask is not EMPTY
    return np.logical_and(bad, mask).any()


def _clip(idx, shape):
    return tuple(np.clip(i, 0, shape[d] - 1) for d, i in enumerate(idx))


# ---- block arrays ----------------------------------------------------------------------------

def load_array(ctx, arr, buf, idx, is_global, safe):
    """Gather `arr[idx]` (idx: one value per dimension)."""
    bad = _oob(idx, arr.shape)
    if bad is None:
        v = arr[idx]
        return v.copy() if type(v) is np.ndarray and v.base is arr else v
    if is_global:
        if arr.size == 0:  # nothing to clip to: every lane reads the safe value
            shape = np.broadcast_shapes(*(np.shape(i) for i in idx))
            return np.full(shape, safe, arr.dtype) if shape else arr.dtype.type(safe)
        val = arr[_clip(idx, arr.shape)]
        if bad is True:
            return np.zeros_like(val) + safe if type(val) is np.ndarray else safe
        return np.where(bad, safe, val)
    if _active_bad(bad, ctx.mask):
        raise _range_error(ctx, buf, idx, bad, ctx.mask, "load")
    return arr[_clip(idx, arr.shape)]


def _spread(idx, val, mask, lane_shape=None):
    """Broadcast indices, value (and mask) together; keep the active lanes (flattened)."""
    parts = [np.asarray(i) for i in idx] + [np.asarray(val)]
    if mask is not None:
        parts.append(np.asarray(mask))
    if lane_shape is not None:
        parts.append(np.zeros(lane_shape, np.bool_))
    arrays = np.broadcast_arrays(*parts)
    if lane_shape is not None:
        arrays = arrays[:-1]
    n = len(idx)
    if mask is not None:
        m = arrays[-1]
        return [a[m] for a in arrays[:n]], arrays[n][m]
    return [a.reshape(-1) for a in arrays[:n]], arrays[n].reshape(-1)


def store_array(ctx, arr, buf, idx, val, mask, is_global):
    """`arr[idx] = val` for the active lanes; global OOB lanes are dropped."""
    if mask is EMPTY:
        return
    if mask is None:
        bad = _oob(idx, arr.shape)
        if bad is None:
            try:
                arr[idx] = val
                return
            except ValueError:  # value varies over more lanes than the index: last lane wins
                pass
    flat_idx, flat_val = _spread(idx, val, mask)
    bad = _oob(flat_idx, arr.shape)
    if bad is not None:
        if not is_global:
            raise _range_error(ctx, buf, flat_idx, bad, None, "store")
        keep = np.logical_not(np.broadcast_to(bad, flat_val.shape))
        flat_idx = [i[keep] for i in flat_idx]
        flat_val = flat_val[keep]
    arr[tuple(flat_idx)] = flat_val


# ---- thread-private memory ---------------------------------------------------------------------

class LocalStore:
    """Memory of a `local` / `local.var` buffer for every lane of one lane space."""

    __slots__ = ("buf", "space", "data", "per_lane", "shape", "private", "undefined",
                 "read_in")

    def __init__(self, buf, space, data):
        self.buf = buf
        self.space = space
        self.shape = data.shape
        self.data = data
        self.per_lane = False
        # elements a T.Parallel body assigns per iteration (`idx = i; ... idx ...`): on the
        # GPU each thread's own variable, here one value per iteration of the running loop
        self.private = {}  # element index -> (lane space, values, written) per iteration
        self.undefined = set()  # elements whose value after such a loop depends on the threads
        self.read_in = {}  # element index -> the lane space that read it before assigning it

    def _widen(self):
        full = self.space.shape + self.shape
        self.data = np.broadcast_to(self.data, full).copy()
        self.per_lane = True

    def _check(self, ctx, idx, mask, what):
        bad = _oob(idx, self.shape)
        if bad is not None and _active_bad(bad, mask):
            raise _range_error(ctx, self.buf, idx, bad, mask, what)
        return bad

    def tile(self, ctx, what):
        """The array for a tile op (needs the same contents in every lane)."""
        if self.per_lane:
            lanes = self.data.reshape((-1,) + self.shape)
            if not (lanes == lanes[:1]).all():
                raise fail(ctx, NotImplementedError,
                           f"{what} on local buffer {self.buf.name}, whose contents differ "
                           "between threads, is not supported by the CPU interpreter")
            self.data = lanes[0].copy()
            self.per_lane = False
        return self.data

    def load(self, ctx, idx):
        bad = self._check(ctx, idx, ctx.mask, "load")
        if bad is not None:
            idx = _clip(idx, self.shape)
        if ctx.space is not self.space:
            key = _element_key(idx)
            held = self.private.get(key)
            if held is not None and held[0] is ctx.space:
                active = held[2] if ctx.mask is None else held[2] | ~np.asarray(ctx.mask)
                if not active.all():
                    raise fail(ctx, NotImplementedError,
                               f"{self.buf.name} is read in a T.Parallel iteration that has not "
                               "assigned it: the value would come from another iteration run "
                               "by the same thread (a race)")
                return held[1].copy()
            if key is not None:
                self.read_in[key] = ctx.space
        if self.undefined and _element_key(idx) in self.undefined:
            raise fail(ctx, NotImplementedError,
                       f"{self.buf.name} is read after a T.Parallel loop that assigned it per "
                       "iteration: each thread holds the value of the last iteration it ran, "
                       "which depends on how the iterations are spread over the threads")
        if not self.per_lane:
            v = self.data[idx]
            return v.copy() if type(v) is np.ndarray else v
        if ctx.space is self.space:
            if not any(type(i) is np.ndarray for i in idx):  # same element in every lane
                return self.data[(slice(None),) * len(self.space.shape) + tuple(idx)].copy()
            return self.data[self.space.index + tuple(idx)]
        # read from an inner lane space (a T.Parallel body): every lane must agree
        if any(type(i) is np.ndarray for i in idx):
            raise fail(ctx, NotImplementedError,
                       f"local buffer {self.buf.name} indexed by a T.Parallel variable")
        lead = (slice(None),) * len(self.space.shape)
        v = collapse(self.data[lead + tuple(idx)])
        if v is VARYING:
            raise fail(ctx, NotImplementedError,
                       f"per-thread value of {self.buf.name} differs between threads and is "
                       "read inside T.Parallel, whose iterations have no fixed thread on the "
                       "CPU interpreter")
        return v

    def store(self, ctx, idx, val, mask):
        if mask is EMPTY:
            return
        if self._check(ctx, idx, mask, "store") is not None:
            idx = _clip(idx, self.shape)  # out of range only on lanes the mask leaves out
        uniform = type(val) is not np.ndarray and not any(type(i) is np.ndarray for i in idx)
        if ctx.space is not self.space:  # inside T.Parallel: per iteration
            key = _element_key(idx)
            if key is None:
                raise fail(ctx, NotImplementedError,
                           f"store into per-thread buffer {self.buf.name} inside T.Parallel "
                           "at an index that depends on the iteration (a race); use a "
                           "fragment or reduce")
            self._store_private(ctx, idx, key, val, mask)
            return
        if self.undefined and mask is None:
            self.undefined.discard(_element_key(idx))  # assigned again after the loop
        if not self.per_lane:
            if uniform and mask is None:
                self.data[idx] = val
                return
            self._widen()
        if not any(type(i) is np.ndarray for i in idx):  # same element in every lane: a view
            view = self.data[(slice(None),) * len(self.space.shape) + tuple(idx)]
            if mask is None:
                view[...] = val
            else:
                np.copyto(view, val, where=np.asarray(mask), casting="unsafe")
            return
        flat_idx, flat_val = _spread(self.space.index + tuple(idx), val, mask,
                                     self.space.shape)
        self.data[tuple(flat_idx)] = flat_val

    def _store_private(self, ctx, idx, key, val, mask):
        held = self.private.get(key)
        if held is None or held[0] is not ctx.space:
            if self.read_in.get(key) is ctx.space:
                raise fail(ctx, NotImplementedError,
                           f"{self.buf.name} is read in a T.Parallel loop before this "
                           "assignment: each iteration would see the value another iteration "
                           "of the same thread left (a race); assign it first in the iteration")
            shape = ctx.space.shape
            held = (ctx.space, np.zeros(shape, self.data.dtype), np.zeros(shape, np.bool_))
            self.private[key] = held
        if mask is None:
            held[1][...] = val
            held[2][...] = True
        else:
            np.copyto(held[1], val, where=np.asarray(mask), casting="unsafe")
            held[2][...] |= np.asarray(mask, np.bool_)

    def end_parallel(self, space):
        """After a T.Parallel loop over `space`: an element all its iterations left with one
        value keeps it; others are unknown (which iteration ran last on each thread)."""
        self.read_in = {k: sp for k, sp in self.read_in.items() if sp is not space}
        for key, (sp, values, written) in list(self.private.items()):
            if sp is not space:
                continue
            del self.private[key]
            v = collapse(values) if written.all() else VARYING
            if v is VARYING:
                self.undefined.add(key)
            else:
                self.undefined.discard(key)
                if self.per_lane:
                    self.data[(slice(None),) * len(self.space.shape) + key] = v
                else:
                    self.data[key] = v


def _element_key(idx):
    """The element an index names when it is the same in every lane, else None."""
    if any(type(i) is np.ndarray for i in idx):
        return None
    return tuple(int(i) for i in idx)


# ---- scalar atomics ----------------------------------------------------------------------------

def atomic_rmw(ctx, store, buf, idx, val, op, is_global, return_prev, convert_out):
    """One read-modify-write per active lane (threads at block level, iterations inside
    T.Parallel). Returns the previous values per lane when `return_prev`."""
    mask = ctx.mask
    lane_shape = ctx.space.shape
    if isinstance(store, LocalStore):
        prev = store.load(ctx, idx)
        new = _ATOMIC_UFUNC[op](prev, val)
        store.store(ctx, idx, new if convert_out is None else convert_out(new), mask)
        return prev
    arr = store
    parts = [np.asarray(i) for i in idx] + [np.asarray(val), np.zeros(lane_shape, np.bool_)]
    if mask is not None and mask is not EMPTY:
        parts.append(np.asarray(mask))
    arrays = np.broadcast_arrays(*parts)
    n = len(idx)
    full_shape = arrays[0].shape
    active = arrays[-1] if (mask is not None and mask is not EMPTY) else None
    if mask is EMPTY:
        active = np.zeros(full_shape, np.bool_)
    flat = [a.reshape(-1) for a in arrays[:n + 1]]
    sel = np.ones(flat[0].shape, np.bool_) if active is None else active.reshape(-1).copy()
    bad = _oob(flat[:n], arr.shape)
    if bad is not None:
        if not is_global:
            raise _range_error(ctx, buf, flat[:n], bad, sel, "atomic")
        sel &= ~np.broadcast_to(bad, sel.shape)
    fidx = tuple(np.clip(i, 0, arr.shape[d] - 1) for d, i in enumerate(flat[:n]))
    fval = flat[n]
    if not return_prev:
        t = tuple(i[sel] for i in fidx)
        v = fval[sel]
        _ATOMIC_UFUNC[op].at(arr, t, v.astype(arr.dtype, copy=False))
        if convert_out is not None and len(v):
            arr[t] = convert_out(arr[t])
        return None
    # sequential in lane order so that each lane sees the updates of earlier lanes
    prev = np.zeros(fval.shape, arr.dtype)
    ufunc = _ATOMIC_UFUNC[op]
    for k in np.nonzero(sel)[0]:
        where = tuple(int(i[k]) for i in fidx)
        old = arr[where]
        prev[k] = old
        new = ufunc(old, fval[k])
        arr[where] = new if convert_out is None else convert_out(new)
    return prev.reshape(full_shape)
