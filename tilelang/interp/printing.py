"""`T.print` on the CPU interpreter (SEMANTICS §14), written to `sys.stdout`.

* message only: `msg='<msg>' BlockIdx=(bx, by, bz), ThreadIdx=(tx, ty, tz)` from every active
  thread;
* expression: `...: dtype=<C type> value=<v>` from every active thread (inside `T.Parallel`:
  once per iteration, shown with the thread an even split of iterations over threads gives);
  the default message is `expr<expression>`;
* buffer: one line per element in row-major order, `...: buffer=<name>, index=<flat>,
  dtype=<t> value=<v>`; shared and fragment buffers are printed by thread 0 of the block,
  local and global buffers by every active thread. Default message `buffer<name, dtype>`
  (empty for global buffers).

Floats print with `%f` (6 decimals), integers with `%d`, bool as `true`/`false`.
"""

from __future__ import annotations

import sys

import numpy as np

from ..ir import nodes as ir
from .lanes import at_statement, fail
from .memory import LocalStore

__all__ = ["compile_print", "format_value"]


def format_value(v, dtype) -> str:
    if dtype.is_bool:
        return "true" if bool(v) else "false"
    if dtype.is_float:
        return "%f" % float(v)
    return "%d" % int(v)


def _active_lanes(mask, shape):
    if mask is None:
        return np.arange(int(np.prod(shape)))
    return np.nonzero(np.broadcast_to(mask, shape).reshape(-1))[0]


def _thread_of(ctx, lane):
    """(tx, ty, tz) of a lane of the current space."""
    n = ctx.nthreads
    t = lane % n if ctx.space is not ctx.thread_space else lane
    tx, ty, tz = ctx.thread_ids
    return int(tx[t]), int(ty[t]), int(tz[t])


def _head(ctx, msg, thread):
    bx, by, bz = ctx.block
    return (f"msg='{msg}' BlockIdx=({bx}, {by}, {bz}), "
            f"ThreadIdx=({thread[0]}, {thread[1]}, {thread[2]})")


def compile_print(c, s: ir.Print):
    value = s.value
    if value is None:
        run = _print_msg(s)
    elif isinstance(value, ir.BufferRegion):
        run = _print_buffer(s)
    else:
        run = _print_expr(c, s)
    return at_statement(s, run)


def _print_msg(s):
    def run(ctx, mask):
        shape = ctx.space.shape
        out = [_head(ctx, s.msg, _thread_of(ctx, k)) for k in _active_lanes(mask, shape)]
        if out:
            sys.stdout.write("\n".join(out) + "\n")
    return run


def _print_expr(c, s):
    e = s.value
    fv = c.expr(e)
    dt = e.dtype
    msg = s.msg or f"expr<{e}>"
    tail = f": dtype={dt.ctype} value="

    def run(ctx, mask):
        v = fv(ctx)
        shape = ctx.space.shape
        vals = np.broadcast_to(np.asarray(v), shape).reshape(-1) if np.ndim(v) else None
        out = []
        for k in _active_lanes(mask, shape):
            x = v if vals is None else vals[k]
            out.append(_head(ctx, msg, _thread_of(ctx, k)) + tail + format_value(x, dt))
        if out:
            sys.stdout.write("\n".join(out) + "\n")
    return run


def _print_buffer(s):
    buf = s.value.buffer
    dt = buf.dtype
    scope = buf.scope
    default = "" if scope == "global" else f"buffer<{buf.name}, {dt}>"
    msg = s.msg or default
    tail = f": buffer={buf.name}, index="
    one_thread = scope in ("shared", "shared.dyn", "local.fragment")

    def lines(ctx, thread, flat):
        head = _head(ctx, msg, thread) + tail
        return [f"{head}{i}, dtype={dt.ctype} value={format_value(x, dt)}"
                for i, x in enumerate(flat)]

    def run(ctx, mask):
        st = ctx.bufs.get(buf)
        if st is None:
            raise fail(ctx, NameError, f"buffer {buf.name} is not allocated here")
        shape = ctx.space.shape
        active = _active_lanes(mask, shape)
        out = []
        if one_thread:
            if ctx.space is ctx.thread_space and 0 not in set(active.tolist()):
                return
            out = lines(ctx, _thread_of(ctx, 0), np.asarray(st).reshape(-1))
        else:
            for k in active:
                if isinstance(st, LocalStore):
                    data = st.data[np.unravel_index(k, st.space.shape)] if st.per_lane \
                        else st.data
                else:
                    data = st
                out.extend(lines(ctx, _thread_of(ctx, k), np.asarray(data).reshape(-1)))
        if out:
            sys.stdout.write("\n".join(out) + "\n")
    return run
