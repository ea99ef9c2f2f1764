"""defer_store_waits: the thread that issued a TMA store waits for the TMA unit's read of the
shared tile just before the next barrier (wrapping into the next iteration of a loop, with one
more wait after it), not right after the issue; and only where nothing in between could let
another thread rewrite the tile. Checked on the generated sm_90a CUDA (no GPU needed;
tests/gpu/test_tma_reduce.py runs the kernels)."""

from __future__ import annotations

import re

import tilelang

from tma_reduce_kernels import add_each_step, all_into_one
from transform_helpers import SM90

WAIT = "tl::tma_store_wait<0>();"
OFF = {"tl.disable_deferred_store_wait": True}


def _loop(src):
    """(loop body, what follows the loop) of the kernel's only serial loop."""
    start = src.index("for (int s = 0;")
    depth, i = 0, src.index("{", start)
    for i in range(i, len(src)):
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        if depth == 0:
            break
    return src[start:i + 1], src[i + 1:]


def test_wait_moves_to_the_first_barrier_of_the_next_step():
    src = tilelang.lower(add_each_step(64, 128, 3), target=SM90)
    body, after = _loop(src)
    issue = body[body.index("tma_store_add"):]
    assert "tma_store_arrive" in issue and WAIT not in issue, "no wait right after the issue"
    # the wait comes before the step's first barrier, which comes before S is written
    head = body[:body.index("tma_store_add")]
    assert head.index(WAIT) < head.index("__syncthreads") < head.index("S[")
    assert re.search(r"if \(tx == 0\) \{\s*" + re.escape(WAIT), head)
    assert WAIT in after, "the last step's store is waited for after the loop"


def test_pass_config_keeps_the_wait_after_the_issue():
    src = tilelang.lower(add_each_step(64, 128, 3), target=SM90, pass_configs=OFF)
    body, after = _loop(src)
    assert body.count(WAIT) == 1
    assert body.index("tma_store_arrive") < body.index(WAIT)
    assert WAIT not in after


def test_wait_stays_when_the_tile_is_read_after_the_loop():
    """S read after the loop: the wait may not wrap into the next step (nothing else in the
    body follows the issue), so the code is what the pass config gives."""
    on = tilelang.lower(add_each_step(64, 128, 3, read_after=True), target=SM90)
    off = tilelang.lower(add_each_step(64, 128, 3, read_after=True), target=SM90,
                         pass_configs=OFF)
    assert on == off


def test_wait_stays_when_the_next_step_writes_the_tile_first():
    """all_into_one rewrites S as the first thing of the next step: only the barrier before
    that write separates them, so there is nothing to overlap and the wait stays."""
    on = tilelang.lower(all_into_one(32, 64, 4), target=SM90)
    assert on == tilelang.lower(all_into_one(32, 64, 4), target=SM90, pass_configs=OFF)
    body, _ = _loop(on.replace("for (int r = 0;", "for (int s = 0;"))
    assert body.index("tma_store_arrive") < body.index(WAIT)


def test_persistent_epilogue_store_overlaps_the_next_tile():
    """In a persistent GEMM the tile loop's body is the tile guard: the epilogue's TMA store
    is waited for before the next tile's epilogue barrier, after its whole main loop."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.gpu.epilogue_kernels import persistent_tiles

    src = tilelang.lower(persistent_tiles(1024, 1024, 512, blocks=6), target=SM90)
    consumer = src[src.index("thread_group: ('consumer'"):]
    loop = consumer[consumer.index("for (int wave"):]
    body, after = loop[:loop.rindex("if (tx == 0) {\n      tl::tma_store_wait<0>")], \
        loop[loop.rindex("if (tx == 0) {\n      tl::tma_store_wait<0>"):]
    tile = body[body.index("if ((wave"):]
    # the main loop, then the wait, then the barrier before the epilogue tile is written
    assert tile.index("for (int k = 0;") < tile.index(WAIT) < \
        tile.index("named_barrier_sync") < tile.index("C_local_epi[")
    issue = tile[tile.index("tl::tma_store("):]
    assert WAIT not in issue
    assert WAIT in after
    off = tilelang.lower(persistent_tiles(1024, 1024, 512, blocks=6), target=SM90,
                         pass_configs=OFF)
    off_tile = off[off.index("thread_group: ('consumer'"):]
    assert off_tile.index("tma_store_arrive") < off_tile.index(WAIT)


# ---- the rules on hand-built statement lists --------------------------------------------

def _statements():
    """(issue, arrival on `bar`, wait on `bar`, barrier, a write of S, S, tid) of a sequence
    like the backward kernel's: one thread issues a TMA reduction of S."""
    from tilelang.ir import nodes as ir

    S = ir.Buffer("S", (64,), ir.DType("float32"), "shared.dyn")
    bar = ir.Buffer("bar", (2,), ir.DType("uint64"), "shared.dyn")
    tid = ir.Var("tx", ir.DType("int32"))
    call = ir.extern_stmt
    issue = ir.If(ir.compare("eq", tid, 0), ir.Seq((
        call("tl::tma_store_add", ir.const(0), ir.address_of(S, (0,)), ir.const(0)),
        call("tl::tma_store_arrive"), call(WAIT[:-3]))))
    arrive = call("tl::mbarrier_arrive", ir.address_of(bar, (0,)))
    wait_bar = call("tl::mbarrier_wait", ir.address_of(bar, (0,)), ir.const(0))
    barrier = call("tl::named_barrier_sync", ir.const(1), ir.const(256))
    write = ir.Store(S, (ir.const(0),), ir.const(1.0, "float32"))
    return issue, arrive, wait_bar, barrier, write, S, tid


def _defer(stmts, kernel_body, loop=False):
    from types import SimpleNamespace

    from tilelang.ir import nodes as ir
    from tilelang.transform.defer_store_waits import _Deferrer

    ctx = SimpleNamespace(shared_plan={}, kernel=SimpleNamespace(thread_vars=()),
                          uses_wgmma=False)
    out, after = _Deferrer(SimpleNamespace(body=ir.Seq(tuple(kernel_body))), ctx).seq(
        stmts, loop_body=loop)
    return [("wait" if isinstance(s, ir.If) and not isinstance(s.then_body, ir.Seq) else
             "issue" if isinstance(s, ir.If) else type(s).__name__ if not
             isinstance(s, ir.Evaluate) else s.value.args[0]) for s in out], after


def test_rules_arrival_passed_only_when_the_sequence_holds_every_access_of_the_tile():
    from tilelang.ir import nodes as ir

    issue, arrive, wait_bar, barrier, write, S, _ = _statements()
    stmts = [issue, arrive, barrier, write]
    names, _ = _defer(stmts, stmts)
    assert names == ["issue", "tl::mbarrier_arrive", "wait", "tl::named_barrier_sync", "Store"]
    # S is also read elsewhere: a thread the arrival releases might rewrite it
    elsewhere = ir.Evaluate(ir.Call("call_extern", ("tl::use", ir.address_of(S, (0,))),
                                    ir.DType("void")))
    names, _ = _defer(stmts, stmts + [elsewhere])
    assert names[:2] == ["issue", "tl::mbarrier_arrive"] and "wait" not in names
    # the sequence itself waits on the barrier the arrival signals
    names, _ = _defer([issue, arrive, wait_bar, barrier, write],
                      [issue, arrive, wait_bar, barrier, write])
    assert "wait" not in names


def test_rules_wrap_into_the_next_iteration_past_acquires():
    issue, arrive, wait_bar, barrier, write, _, _ = _statements()
    # next iteration: wait on a (different) barrier, then the barrier before S is written
    from tilelang.ir import nodes as ir

    other = ir.Buffer("full", (2,), ir.DType("uint64"), "shared.dyn")
    acquire = ir.extern_stmt("tl::mbarrier_wait", ir.address_of(other, (0,)), ir.const(0))
    body = [acquire, barrier, write, issue, arrive]
    names, after = _defer(body, body, loop=True)
    assert names == ["tl::mbarrier_wait", "wait", "tl::named_barrier_sync", "Store", "issue",
                     "tl::mbarrier_arrive"]
    assert len(after) == 1


def _scheduled_tiles(M=1024, N=256, K=256, bm=128, bk=64, width=3, blocks=4):
    """A persistent GEMM whose tiles come from a schedule table: the tile loop's body is a
    let (the tile read from the table) around the tile guard."""
    import tilelang.language as T

    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          sched: T.Tensor((blocks, width), "int32"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(blocks, threads=256) as bid:
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, N), "float16")
            acc = T.alloc_fragment((bm, N), "float32")
            for j in T.serial(width):
                t = sched[bid, j]
                if t >= 0:
                    T.clear(acc)
                    for k in T.Pipelined(K // bk, num_stages=2):
                        T.copy(A[t * bm, k * bk], As)
                        T.copy(B[k * bk, 0], Bs)
                        T.gemm(As, Bs, acc)
                    T.copy(acc, C[t * bm, 0])
    return f


def test_tile_loop_with_lets_around_the_guard_defers_the_wait():
    """The let of the tile read from the table does not hide the guard: the epilogue's store
    is waited for in the next tile, after its main loop."""
    src = tilelang.lower(_scheduled_tiles(), target=SM90)
    consumer = src[src.index("thread_group: ('consumer'"):]
    tile = consumer[consumer.index("if (t >= 0)"):]
    issue = tile[tile.index("tl::tma_store("):]
    assert WAIT not in issue[:issue.index("}")], "no wait right after the issue"
    assert tile.index("for (int k = 0;") < tile.index(WAIT) < tile.index("tl::tma_store(")
    assert WAIT in issue, "the last tile's store is waited for after the loop"
