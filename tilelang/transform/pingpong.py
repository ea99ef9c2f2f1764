"""Consumer warpgroups take turns issuing their wgmma gemms (sm_90a "ping-pong").

Expects: tile IR after warp_specialize/__init__.py and pipeline.py, with each gemm's backend in
`ctx.gemm_info`. Applies when the target is sm_90a, the kernel is warp-specialised with
n >= 2 consumer warpgroups, pass config `tl.disable_warpgroup_pingpong` is not set, and some
loop of the consumers uses a wgmma result inside the loop and issues all its gemms in one
burst per iteration (FlashAttention-3's schedule from `T.Pipelined(order=, stage=)`: S(k) =
Q K(k)^T and O += P(k-1) V(k-1) together, then the softmax of S(k)). A GEMM main loop, which
only accumulates, is left alone (its warpgroups never leave the tensor cores idle), and so is
a loop with a burst on each side of the softmax (measured slower: see `_one_burst`).

Guarantees: every burst of the consumer region (a run of wgmma gemm statements, with
mbarrier waits and arrivals and register-only work that none of them writes between them: the
rescale of O between S(k) and P(k-1) V(k-1) in FlashAttention-3's schedule) runs between
`tl::wg_turn_wait` (bar.sync on the warpgroup's own named barrier) and `tl::wg_turn_pass`
(bar.arrive on the next warpgroup's), so warpgroups issue bursts in round-robin order and the
softmax of one overlaps the gemms of the others (FlashAttention-3 §3.1). Those gemms are
issued asynchronously (wg_wait=-1) so the turn passes as soon as they are issued; wgmma_wait.py
then waits where their results are used.
Before the region the last warpgroup hands warpgroup 0 the first turn and after it warpgroup 0
takes the last one, so each barrier sees as many arrivals as waits: every warpgroup runs the
same bursts, since the pass gives up (with a note) when a gemm sits under a condition that
depends on the thread index. Named barriers 2..n+1 are used (1 is the consumers' barrier).
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import Mutator, any_node, collect
from .analysis.scopes import SHARED
from .analysis.buffer_use import touched_buffers
from .pass_config import PassConfigKey

FIRST_BARRIER = 2  # named barrier 0 is __syncthreads, 1 the consumer group's barrier


def _flatten(stmt) -> list:
    """The statements of directly nested Seqs as one list."""
    if isinstance(stmt, ir.Seq):
        return [s for c in stmt.stmts for s in _flatten(c)]
    return [stmt]


class _Turns(Mutator):
    """Wraps each burst of a statement list in a turn wait and pass."""

    def __init__(self, is_wgmma, thread_vars, n_wg):
        self.is_wgmma = is_wgmma
        self.thread_vars = set(thread_vars)
        self.tmpl = f"<{FIRST_BARRIER}, {n_wg}>"
        self.bursts = 0
        self.divergent = False

    def _thread_dependent(self, e) -> bool:
        return any_node(e, lambda n: n in self.thread_vars)

    def visit_If(self, s):
        if self._thread_dependent(s.cond):
            if any_node(s, lambda n: isinstance(n, ir.Gemm) and self.is_wgmma(n)):
                self.divergent = True
            return s
        return self.generic(s)

    def visit_Seq(self, s):
        items = [c if isinstance(c, ir.Gemm) else self.visit(c) for c in _flatten(s)]
        out, i = [], 0
        while i < len(items):
            if not self._gemm(items[i]):
                out.append(items[i])
                i += 1
                continue
            end, written = i + 1, {items[i].C.buffer}
            for j in range(i + 1, len(items)):
                if self._gemm(items[j]):
                    end = j + 1
                    written.add(items[j].C.buffer)
                elif not (ir.calls_extern(items[j], "tl::mbarrier_") or _independent(items[j],
                                                                               written)):
                    break
            burst = [ir.with_fields(g, wg_wait=-1) if self._gemm(g) and g.wg_wait == 0 else g
                     for g in items[i:end]]
            out += [ir.extern_stmt("tl::wg_turn_wait" + self.tmpl), *burst,
                    ir.extern_stmt("tl::wg_turn_pass" + self.tmpl)]
            self.bursts += 1
            i = end
        return ir.Seq(tuple(out))

    def visit_Gemm(self, g):
        return self.visit_Seq(ir.Seq((g,))) if self._gemm(g) else g  # a loop of one gemm

    def _gemm(self, s) -> bool:
        return isinstance(s, ir.Gemm) and self.is_wgmma(s)


def _independent(stmt, written) -> bool:
    """Whether `stmt` may run while the burst's gemms are in flight, inside the turn: it
    touches none of their accumulators and no shared memory (so no barrier over all the
    consumers can land inside a turn) and calls nothing."""
    names = touched_buffers(stmt)
    return not (names & written or any(b.scope in SHARED for b in names)
                or collect(stmt, _gemm_or_extern_call))


def _gemm_or_extern_call(n) -> bool:
    return isinstance(n, ir.Gemm) or ir.is_extern_call(n)


def _softmax_between(loop: ir.For, is_wgmma) -> bool:
    """Whether the loop uses a wgmma result before the loop ends (attention's softmax), as
    opposed to a GEMM main loop that only accumulates."""
    stmts = _flatten(loop.body)
    acc = {s.C.buffer for s in stmts if isinstance(s, ir.Gemm) and is_wgmma(s)}
    return any(not isinstance(s, ir.Gemm) and touched_buffers(s) & acc for s in stmts)


def _one_burst(loop: ir.For, is_wgmma, kernel, n_wg) -> bool:
    """Whether one iteration issues all its gemms in a single burst (FlashAttention-3's
    schedule: S(k) and P(k-1) V(k-1) together). With two bursts around the softmax a
    warpgroup's next S waits for the other's softmax: 490 against 536 TFLOP/s free-running
    (H200, B8 H32 S4096 D128, 128/128 tiles), so such loops are left alone."""
    turns = _Turns(is_wgmma, kernel.thread_vars, n_wg)
    turns.visit(loop.body)
    return turns.bursts == 1


def _consumer_region(body):
    for node in collect(body, lambda n: isinstance(n, ir.Attr) and n.key == "thread_group"):
        if node.value[0] == "consumer":
            return node
    return None


def schedule_warpgroup_turns(kernel: ir.Kernel, ctx) -> ir.Kernel:
    if not ctx.target.is_hopper or ctx.flag(PassConfigKey.TL_DISABLE_WG_PINGPONG):
        return kernel
    ws = dict(kernel.attrs).get("warp_specialized")
    if not ws or ws[0] % 128 or ws[0] < 256:
        return kernel
    is_wgmma = ctx.is_wgmma
    region = _consumer_region(kernel.body)
    if region is None:
        return kernel
    n_wg = ws[0] // 128
    loops = collect(region.body, lambda n: isinstance(n, ir.For))
    if not any(_softmax_between(lp, is_wgmma) and _one_burst(lp, is_wgmma, kernel, n_wg)
               for lp in loops):
        return kernel
    turns = _Turns(is_wgmma, kernel.thread_vars, n_wg)
    body = turns.visit(region.body)
    if turns.divergent:
        ctx.note("warpgroup ping-pong off: a gemm runs under a thread-dependent condition")
        return kernel
    items = _flatten(body)
    lead = 1 if items and ir.calls_extern(items[0], "tl::setmaxnreg") else 0
    body = ir.Seq((*items[:lead], ir.extern_stmt("tl::wg_turn_start" + turns.tmpl),
                   *items[lead:], ir.extern_stmt("tl::wg_turn_finish" + turns.tmpl)))
    ctx.note(f"warpgroup ping-pong: {n_wg} consumer warpgroups take turns issuing "
             f"{turns.bursts} wgmma burst(s) (named barriers {FIRST_BARRIER}.."
             f"{FIRST_BARRIER + n_wg - 1})")

    class Replace(Mutator):
        def visit_Attr(self, a):
            return ir.with_fields(a, body=body) if a is region else self.generic(a)

    return ir.with_fields(kernel, body=Replace().visit(kernel.body))
