"""Values every thread of a block agrees on, and a loop body whose work sits under a branch
on such a value.

Both software pipeliners (transform/pipeline.py and transform/warp_specialize/) pipeline a
`T.Pipelined` loop whose body is `if cond: <copies and compute>` (a block-sparse GEMM's
`if BlockMask[by, bx, k]`) when `cond` is block-uniform: it reads no thread index (directly
or through lets) and loads only global tensors the loop does not write, so it may also be
evaluated for a later iteration (a prefetch) or by another warpgroup (a TMA producer) with
the same result. The cp.async pipeliner also accepts loads of a fragment every thread holds
whole and fills alike (`uniform_fragments`: block-sparse attention's `block_mask`, copied
from global before the loop); the producer warpgroup does not hold such a fragment.
"""

from __future__ import annotations

from typing import NamedTuple

from ...ir import nodes as ir
from ...ir.visitor import collect
from .buffer_use import written_buffers, written_by
from .loop_items import flatten


def depends_on(exprs, block_vars, let_values) -> bool:
    """Whether any of `exprs` reads one of `block_vars`, directly or through the values of
    the lets it reads (`let_values`: var -> value)."""
    stack, seen = [ir.as_expr(e) for e in exprs], set()
    while stack:
        for v in collect(stack.pop(), lambda n: isinstance(n, ir.Var)):
            if v in block_vars:
                return True
            if v in let_values and v not in seen:
                seen.add(v)
                stack.append(let_values[v])
    return False


def let_values(root) -> dict:
    """var -> value of every let bound in `root` (variables are unique objects)."""
    return {s.var: s.value for s in collect(root, lambda n: isinstance(n, ir.LetStmt))}


def buffers_loaded(exprs, let_values) -> set:
    """The buffers `exprs` load from, directly or through the values of the lets they read."""
    out, stack, seen = set(), [ir.as_expr(e) for e in exprs], set()
    while stack:
        e = stack.pop()
        out.update(n.buffer for n in collect(e, lambda n: isinstance(n, ir.Load)))
        for v in collect(e, lambda n: isinstance(n, ir.Var)):
            if v in let_values and v not in seen:
                seen.add(v)
                stack.append(let_values[v])
    return out


class GuardedBody(NamedTuple):
    """A loop body `lets; if cond: then` (no else) on a block-uniform `cond`."""
    cond: ir.Expr
    lets: list     # the LetItems before the branch (in scope of `cond` and of `then`)
    items: list    # `lets` followed by the items of `then` (loop_items.flatten)
    loc: object    # the branch's source location


def uniform_fragments(kernel: ir.Kernel, layouts) -> set:
    """Fragments whose copies agree in every thread: each thread holds the whole fragment
    (its layout replicates it over all threads) and every write to it is a copy from a global
    tensor the kernel never writes, at block-uniform indices, or a fill with such a value."""
    values = let_values(kernel.body)
    threads = set(kernel.thread_vars)
    kernel_writes = written_buffers(kernel.body)
    out = set()
    for b in kernel.allocs:
        layout = layouts.get(b) if b.scope == "local.fragment" else None
        if layout is None or getattr(layout, "replication", 0) != layout.num_threads:
            continue
        writers = collect(kernel.body, lambda n: written_by(n) is b)
        if writers and all(_uniform_fill(w, threads, values, kernel_writes) for w in writers):
            out.add(b)
    return out


def _uniform_fill(stmt, threads, values, kernel_writes) -> bool:
    if isinstance(stmt, ir.Copy):
        src = stmt.src.buffer
        exprs = [x for r in stmt.src.region for x in r]
        return src.scope == "global" and src not in kernel_writes and \
            not depends_on(exprs, threads, values)
    if isinstance(stmt, ir.Fill):
        return not depends_on([stmt.value], threads, values) and \
            not buffers_loaded([stmt.value], values)
    return False


def uniform_guard(body, kernel: ir.Kernel, written, uniform=frozenset()) -> GuardedBody | None:
    """`body` as a GuardedBody when it is one branch without an else, after lets, whose
    condition every thread of the block evaluates alike for any iteration: no thread index
    in it (through the lets of the kernel), and its loads read global tensors, or `uniform`
    fragments (`uniform_fragments`), that the loop (`written`: the buffers it writes) leaves
    alone."""
    items = flatten(body)
    if not items or not isinstance(items[-1], ir.If) or items[-1].else_body is not None or \
            any(not isinstance(it, tuple) for it in items[:-1]):
        return None
    branch = items[-1]
    values = let_values(kernel.body)
    if depends_on([branch.cond], set(kernel.thread_vars), values):
        return None
    if any((b.scope != "global" and b not in uniform) or b in written
           for b in buffers_loaded([branch.cond], values)):
        return None
    lets = list(items[:-1])
    return GuardedBody(branch.cond, lets, lets + flatten(branch.then_body), branch.loc)
