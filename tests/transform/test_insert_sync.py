"""insert_barriers: between a write of shared bytes and a later access of overlapping bytes
(and between a read and a later write) every thread passes a __syncthreads: in straight-line
code, across loop iterations and around branches; never inside a thread-dependent branch or
loop. Checked with an independent hazard finder that linearises the kernel (loops run twice)
and looks for conflicting accesses without a barrier between them."""

import os
import sys

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.runtime import compile_cuda
from tilelang.transform.pass_config import PassConfigKey

from transform_helpers import (SM80, SM90, externs, gemm_with_epilogue, nodes, pipelined_gemm,
                               requires_compiler, run_passes, show, two_phases)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from gpu import role_kernels as R  # noqa: E402

SHARED = ("shared", "shared.dyn")
_WRITERS = ("tl::cp_async", "tl::copy_zfill", "tl::copy_vec")


def _is_barrier(s):
    return isinstance(s, ir.Evaluate) and isinstance(s.value, ir.Call) and \
        s.value.op == "call_extern" and s.value.args[0] == "__syncthreads"


def _thread_dependent(expr, ctx):
    return any(v in set(ctx.kernel.thread_vars) for v in nodes(expr, ir.Var))


def _accesses(stmt):
    """(reads, writes, async writes) of shared buffers under `stmt`."""
    reads, writes, async_writes = set(), set(), set()

    def pointee(a):
        if isinstance(a, ir.Call) and a.op == "address_of" and isinstance(a.args[0], ir.Load):
            return a.args[0].buffer
        return None

    stack = [stmt]
    from tilelang.ir.visitor import children

    while stack:
        n = stack.pop()
        if isinstance(n, ir.Call) and n.op == "address_of":
            continue
        if isinstance(n, ir.Load) and n.buffer.scope in SHARED:
            reads.add(n.buffer)
        elif isinstance(n, ir.Store) and n.buffer.scope in SHARED:
            writes.add(n.buffer)
        elif isinstance(n, ir.Call) and n.op == "call_extern":
            bufs = [pointee(a) for a in n.args[1:]]
            shared = [b for b in bufs if b is not None and b.scope in SHARED]
            if shared and n.args[0].startswith(_WRITERS):
                if bufs[0] is not None and bufs[0].scope in SHARED:
                    (async_writes if dict(n.attrs).get("async") else writes).add(bufs[0])
                reads.update(b for b in bufs[1:] if b is not None and b.scope in SHARED)
            elif shared:
                reads.update(shared)  # gemm templates and the like read their operands
        stack.extend(children(n))
    return reads, writes, async_writes


def _events(k, ctx):
    """Linearised execution: ("barrier",) or ("access", unit id, reads, writes, async)."""
    out, errors = [], []

    def unit(s, uid, ahead=False):
        r, w, a = _accesses(s)
        if r or w or a:
            out.append(("access", uid, r, w, a, ahead))

    def walk(s, uniform=True):
        if _is_barrier(s):
            if not uniform:
                errors.append("barrier inside a thread-dependent region")
            out.append(("barrier",))
        elif isinstance(s, ir.Seq):
            for x in s.stmts:
                walk(x, uniform)
        elif isinstance(s, (ir.Allocate,)):
            walk(s.body, uniform)
        elif isinstance(s, ir.Attr):
            if s.key == "partitioned":
                unit(s, id(s))
                walk_barriers_only(s.body, False)
            elif s.key == "issue_ahead":
                # the pipeliner's copies into a stage nothing else of the iteration touches:
                # ordered with the accesses before them by the iteration's first barrier
                unit(s, id(s), ahead=True)
                walk_barriers_only(s.body, False)
            else:
                walk(s.body, uniform)
        elif isinstance(s, ir.LetStmt):
            unit(ir.Evaluate(s.value), id(s))
            walk(s.body, uniform)
        elif isinstance(s, ir.For) and s.annotation("partitioned"):
            unit(s, id(s))  # one T.Parallel nest: iterations are independent
            walk_barriers_only(s.body, False)
        elif isinstance(s, (ir.For, ir.While)):
            cond = s.cond if isinstance(s, ir.While) else s.extent
            if _thread_dependent(cond, ctx) or not uniform:
                unit(s, id(s))
                walk_barriers_only(s.body, False)
            else:
                n = s.extent.value if isinstance(s, ir.For) and isinstance(
                    s.extent, ir.Const) else 2
                for _ in range(min(n, 2)):
                    walk(s.body, uniform)
        elif isinstance(s, ir.If):
            if _thread_dependent(s.cond, ctx) or not uniform:
                unit(s, id(s))
                walk_barriers_only(s, False)
            else:
                walk(s.then_body, uniform)  # the superset of the accesses
        else:
            unit(s, id(s))

    def walk_barriers_only(s, uniform):
        for b in nodes(s, ir.Evaluate, _is_barrier):
            errors.append(f"barrier inside a thread-dependent region: {show(s)[:200]}")

    walk(k.body)
    return out, errors


def hazards(k, ctx):
    """Pairs of conflicting accesses of overlapping bytes with no barrier between them."""
    ranges = {b: (off, off + b.numel() * b.dtype.bytes) for b, off in ctx.shared_plan.items()}

    def overlap(x, y):
        rx, ry = ranges.get(x), ranges.get(y)
        if rx is None or ry is None:
            return x is y
        return rx[0] < ry[1] and ry[0] < rx[1]

    def hit(xs, ys):
        return any(overlap(x, y) for x in xs for y in ys)

    events, errors = _events(k, ctx)
    found = list(errors)
    since = []  # accesses since the last barrier
    for e in events:
        if e[0] == "barrier":
            since = []
            continue
        _, uid, r, w, a, ahead = e
        for _, uid0, r0, w0, a0, _ in ([] if ahead else since):
            raw = hit(w0, r)
            war = hit(r0, w | a)
            waw = hit(w0, w | a) and uid0 != uid
            if raw or war or waw:
                found.append(("RAW" if raw else "WAR" if war else "WAW",
                              sorted(b.name for b in r0 | w0), sorted(b.name for b in r | w | a)))
        since.append(e)
    return found


def _check(func, target=SM80, configs=None):
    k, ctx = run_passes(func, "insert_sync", target, configs)
    assert hazards(k, ctx) == [], show(k)
    return k, ctx


def _barriers(k):
    return len(nodes(k, ir.Evaluate, _is_barrier))


# ---- kernels --------------------------------------------------------------------------------


def _exchange():
    @T.prim_func
    def f(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), "float32")
            for i in T.Parallel(128):
                S[i] = A[i] * 2.0
            for i in T.Parallel(128):
                B[i] = S[127 - i]       # another thread's element
    return f


def _branches_and_loops():
    @T.prim_func
    def f(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding(0)
            S = T.alloc_shared((128,), "float32")
            if tx < 32:                  # thread-dependent: fenced around, never inside
                S[tx] = A[tx]
                S[tx + 32] = S[tx] * 2.0
            for t in T.serial(3):        # loop-carried: read at the end, written at the top
                for i in T.Parallel(128):
                    S[i] = S[i] + 1.0
                for i in T.Parallel(128):
                    B[i] = S[127 - i]
            for k in T.serial(tx):       # thread-dependent trip count
                S[tx] = 1.0
            B[tx] = S[(tx + 1) % 128]
    return f


def _independent():
    @T.prim_func
    def f(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), "float32")
            T.copy(A, S)
            for i in T.Parallel(128):
                B[i] = S[127 - i]
            for i in T.Parallel(128):
                B[i] += S[i]             # read after read: nothing to order
    return f


def test_write_then_read_by_other_threads_gets_a_barrier_between():
    k, _ = _check(_exchange())
    assert _barriers(k) == 1
    # order: writer loop, barrier, reader loop
    seq = [s for s in _top_level(k) if _is_barrier(s) or isinstance(s, ir.For)]
    assert [("B" if _is_barrier(s) else "L") for s in seq] == ["L", "B", "L"]


def _top_level(k):
    out = []

    def walk(s):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                walk(x)
        elif isinstance(s, ir.Allocate):
            walk(s.body)
        else:
            out.append(s)

    walk(k.body)
    return out


def test_reads_after_reads_need_nothing_more():
    k, _ = _check(_independent())
    assert _barriers(k) == 1  # only after the copy into S


def test_thread_dependent_regions_are_fenced_outside():
    k, ctx = _check(_branches_and_loops())
    for s in nodes(k, ir.If, lambda s: _thread_dependent(s.cond, ctx)):
        assert not nodes(s, ir.Evaluate, _is_barrier)
    for s in nodes(k, ir.For, lambda s: _thread_dependent(s.extent, ctx)):
        assert not nodes(s, ir.Evaluate, _is_barrier)
    # the loop-carried WAR gets a barrier inside the uniform loop
    (loop,) = nodes(k, ir.For, lambda s: s.var.name == "t")
    assert nodes(loop.body, ir.Evaluate, _is_barrier)


def test_buffers_sharing_bytes_are_ordered():
    """X and Y have disjoint lifetimes and share bytes: the copy into Y must wait for the
    transposed reads of X."""
    k, ctx = _check(two_phases(False))
    ranges = {b.name: off for b, off in ctx.shared_plan.items()}
    assert ranges["X"] == ranges["Y"]
    assert _barriers(k) >= 3  # X ready, X done (before Y is written), Y ready


def test_pipeline_prologue_waits_for_readers_of_reused_bytes():
    """Regression: the prologue's cp.async into stage buffers that reuse the bytes of a tile
    read just before the loop was issued with no barrier after those reads."""

    @T.prim_func
    def f(A: T.Tensor((64, 64), "float16"), B: T.Tensor((256, 64), "float16"),
          C: T.Tensor((64, 64), "float16"), D: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            X = T.alloc_shared((64, 64), "float16")
            S = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], X)
            for i, j in T.Parallel(64, 64):
                C[i, j] = X[j, i]
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(B[k * 64, 0], S)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += S[i, j]
            T.copy(acc, D)

    k, ctx = _check(f)
    r = {b.name: (o, o + b.numel() * b.dtype.bytes) for b, o in ctx.shared_plan.items()}
    assert r["X"][0] < r["S"][1] and r["S"][0] < r["X"][1]  # the bytes are reused
    prologue = next(s for s in _top_level(k) if isinstance(s, ir.For) and s.var.name == "s")
    seq = _top_level(k)
    i = next(j for j, s in enumerate(seq) if s is prologue)
    assert any(_is_barrier(s) for s in seq[:i][-2:]), show(k)


def test_plain_pipelined_gemm_keeps_one_barrier_per_iteration():
    # (the staged epilogue's own barriers are tested in test_stage_epilogue.py)
    k, _ = _check(pipelined_gemm(4 * 32, 3), SM80,
                  {PassConfigKey.TL_DISABLE_STAGED_EPILOGUE: True})
    (main,) = nodes(k, ir.For, lambda s: s.annotation("pipelined_from") is not None)
    assert len(nodes(main, ir.Evaluate, _is_barrier)) == 1
    assert _barriers(k) == 1  # none before the prologue: nothing was read before it


def test_wgmma_kernels_fence_the_async_proxy():
    k, ctx = _check(gemm_with_epilogue(), SM90,
                    {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
    assert ctx.uses_wgmma
    # (waits for the gemm still in flight may sit between the fence and the barrier)
    names = [n for n in externs(k) if not n.startswith(("tl::wgmma_wait", "tl::wgmma_fence"))]
    fenced = [i for i, n in enumerate(names)
              if n == "__syncthreads" and names[i - 1] == "tl::fence_proxy_async"]
    assert fenced, names
    for i, n in enumerate(names):
        if n == "__syncthreads" and i not in fenced:
            # an unfenced barrier only where a fenced one follows before any wgmma
            after = names[i + 1:]
            first_async = next((j for j, m in enumerate(after)
                                if m.startswith("tl::wgmma_gemm")), len(after))
            assert any(i + 1 + j in fenced for j in range(first_async)), names[i - 3:i + 6]


def store_then_wgmma(n=3):
    """Each iteration stores a tile the wgmma of the iteration then reads (a FlashAttention
    backward's dS): C = sum_k (A * (k + 1)) @ B."""
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
          C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Bs = T.alloc_shared((64, 64), "float16")
            Ss = T.alloc_shared((64, 64), "float16")
            frag = T.alloc_fragment((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(B[0:64, 0:64], Bs)
            T.clear(acc)
            for k in T.serial(n):
                for i, j in T.Parallel(64, 64):
                    frag[i, j] = A[i, j] * T.cast(k + 1, "float16")
                T.copy(frag, Ss)
                T.gemm(Ss, Bs, acc)
            T.copy(acc, C[0:64, 0:64])
    return f


def test_a_barrier_ordering_only_reads_before_stores_has_no_proxy_fence():
    k, ctx = _check(store_then_wgmma(), SM90)
    assert ctx.uses_wgmma
    (loop,) = nodes(k, ir.For, lambda s: s.var.name == "k")
    names = [n for n in externs(loop) if not n.startswith(("tl::wgmma_wait", "tl::wgmma_fence"))]
    first, second = [i for i, n in enumerate(names) if n == "__syncthreads"]
    gemm = next(i for i, n in enumerate(names) if n.startswith("tl::wgmma_gemm"))
    # the previous iteration's wgmma is done with Ss before the stores: a barrier alone;
    # the stores reach the async proxy before this iteration's wgmma: fence, then barrier
    assert names[first - 1] != "tl::fence_proxy_async", names
    assert names[second - 1] == "tl::fence_proxy_async" and second < gemm, names


def test_the_checker_sees_missing_barriers():
    for func in (_exchange(), _branches_and_loops()):
        k, ctx = run_passes(func, "plan_shared", SM80)
        assert hazards(k, ctx)


def test_disabled_by_pass_config():
    k, _ = run_passes(_exchange(), "insert_sync", SM80,
                      {PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
    assert _barriers(k) == 0


@requires_compiler
def test_synchronised_kernel_compiles():
    compile_cuda(tilelang.lower(_branches_and_loops(), target=SM80), "sm_80", name="sync")


def test_statements_under_a_tensor_at_a_computed_address_are_synchronised():
    """T.make_tensor of an address read in the kernel scopes the statements after it in an
    Attr: the hazards inside are the block's own (a grouped GEMM over pointer tables computed
    garbage on the GPU without its barriers)."""
    @T.prim_func
    def f(A_ptrs: T.Tensor([2], T.ptr), C: T.Tensor((256, 96), "float16")):
        with T.Kernel(4, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            acc = T.alloc_fragment((64, 32), "float32")
            A = T.make_tensor(A_ptrs[0], (256, 64), "float16")
            for ko in T.serial(2):
                T.copy(A[bx * 64, ko * 32], A_s)
                T.copy(A_s, acc)
            T.copy(acc, C[bx * 64, 0])

    k, ctx = run_passes(f, "insert_sync", SM80)
    assert not hazards(k, ctx)
    assert _barriers(k) >= 2  # after the copy in, before the next iteration's copy


def _user_sync_before_pipeline():
    """A T.sync_threads() the user wrote before a pipelined loop that warp_specialize gives a
    producer warpgroup: the sync then sits in the consumers' code."""
    @T.prim_func
    def main(A: T.Tensor((128, 256), "bfloat16"), B: T.Tensor((256, 128), "bfloat16"),
             C: T.Tensor((128, 128), "bfloat16"), Total: T.Tensor((1,), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            total = T.alloc_shared((1,), "float32")
            for _ in T.Parallel(1):
                total[0] = 0.0
            T.sync_threads()
            a_s = T.alloc_shared((64, 32), "bfloat16")
            b_s = T.alloc_shared((32, 64), "bfloat16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(8, num_stages=2):
                T.copy(A[bx * 64, k * 32], a_s)
                T.copy(B[k * 32, by * 64], b_s)
                T.gemm(a_s, b_s, acc)
                for _ in T.Parallel(1):
                    total[0] = total[0] + T.cast(a_s[0, 0], "float32")
            T.copy(acc, C[bx * 64, by * 64])
            for _ in T.Parallel(1):
                if bx == 0 and by == 0:
                    Total[0] = total[0]
    return main


def test_user_block_sync_in_the_consumers_code_synchronises_the_consumers():
    """Only the consumer warpgroup reaches the user's T.sync_threads() once the producer
    warpgroup is split off: a __syncthreads() there waits for 256 threads forever (the
    reference's issue sm120 test hung on this); it becomes the consumers' named barrier."""
    k, _ = run_passes(_user_sync_before_pipeline(), "insert_sync", SM90)
    consumers = nodes(k.body, ir.Attr, lambda a: a.key == "thread_group"
                      and a.value[0] == "consumer")
    assert consumers
    for c in consumers:
        assert not nodes(c, ir.Evaluate, lambda e: e.value.__class__ is ir.Call and (
            e.value.op == "sync_threads" or _is_barrier(e)))
        assert "tl::named_barrier_sync" in externs(c)


def _fenced(names, target):
    """For each call of `target` in the extern list, whether a proxy fence precedes it."""
    return [names[i - 1] == "tl::fence_proxy_async" for i, n in enumerate(names)
            if n == target]


def _arrivals_and_barriers(k):
    out = []
    for n in nodes(k, ir.Evaluate, lambda s: ir.extern_name(s.value) is not None):
        name = ir.extern_name(n.value)
        if name == "tl::mbarrier_arrive":
            name += ":" + n.value.args[1].args[0].buffer.name
        out.append(name)
    return out


def test_a_user_arrival_is_fenced_only_after_touching_memory_the_async_proxy_reads():
    k, _ = run_passes(R.handover_through_shared(64), "insert_sync", SM90)
    names = _arrivals_and_barriers(k)
    # the scales are only ever read and written by threads: no fence before handing them
    # over; the gemm operand the first role copied in is read by wgmma: fenced
    assert _fenced(names, "tl::mbarrier_arrive:bar_scale") == [False], names
    assert _fenced(names, "tl::mbarrier_arrive:bar_p") == [True], names


def test_an_inserted_fence_goes_where_the_thread_touched_no_async_proxy_memory():
    k, _ = run_passes(R.handover_through_shared(64), "insert_sync", SM90)
    names = _arrivals_and_barriers(k)
    syncs = _fenced(names, "tl::named_barrier_sync")
    # before the gemm: the role's own cp.async into its operand completed (fenced); before
    # the exchange of `row` after the gemm: nothing since that fence but wgmma (no fence)
    assert syncs == [True, False], names


def test_a_shared_pointer_given_to_a_user_function_keeps_every_fence():
    k, _ = run_passes(R.handover_through_shared(64, opaque_call=True), "insert_sync", SM90)
    names = _arrivals_and_barriers(k)
    assert _fenced(names, "tl::mbarrier_arrive:bar_scale") == [True], names
    syncs = _fenced(names, "tl::named_barrier_sync")
    assert len(syncs) >= 2 and all(syncs), names


@requires_compiler
def test_the_handover_kernel_builds_and_runs_on_the_interpreter():
    import torch

    compile_cuda(tilelang.lower(R.handover_through_shared(200), target=SM90), "sm_90a",
                 name="handover")
    a, b = torch.randn(200, 64).half(), torch.randn(64, 64).half()
    c = torch.full((200, 64), float("nan"))
    tilelang.compile(R.handover_through_shared(200), target="cpu")(a, b, c)
    torch.testing.assert_close(c, 3 * (a.float() @ b.float().T), rtol=1e-3, atol=1e-3)


def test_a_wait_for_cp_async_arrivals_is_followed_by_a_fence():
    """Another thread's cp.async writes, completed by its cp.async arrival, cannot be fenced
    by the writer: the waiting consumer fences before its wgmma reads them; its own arrival
    after the wgmma (nothing generic since) needs none. The producer that also stores zeros
    into the ring fences before its cp.async arrival."""
    k, _ = run_passes(R.cp_async_gather_gemm(200), "insert_sync", SM90)
    names = externs(k)
    waits = [i for i, n in enumerate(names) if n == "tl::mbarrier_wait"]
    full_waits = [i for i in waits if names[i + 1] == "tl::fence_proxy_async"]
    assert len(full_waits) == 1, names  # the consumer's wait on `full` (the loop body)
    i = full_waits[0]
    assert names[i + 2].startswith("tl::wgmma_gemm"), names[i:i + 4]
    assert _fenced(names, "tl::mbarrier_arrive") == [False], names
    assert _fenced(names, "tl::mbarrier_cp_async_arrive_noinc") == [True], names


@requires_compiler
def test_the_gather_kernel_builds_and_runs_on_the_interpreter():
    import torch

    compile_cuda(tilelang.lower(R.cp_async_gather_gemm(200), target=SM90), "sm_90a",
                 name="gather")
    a, b = torch.randn(200, 64).half(), torch.randn(128, 64).half()
    idx = torch.randint(0, 140, (4, 64), dtype=torch.int32)
    c = torch.full((200, 64), float("nan"))
    tilelang.compile(R.cp_async_gather_gemm(200), target="cpu")(a, b, idx, c)
    rows = torch.cat([b.float(), torch.zeros(12, 64)])
    ref = sum(a.float() @ rows[idx[s].long()].T for s in range(4))
    torch.testing.assert_close(c, ref, rtol=1e-3, atol=1e-3)


def _computed_operand_gemm():
    """A two-stage cp.async pipeline whose gemm reads an operand the threads compute from a
    copied tile (the dequantising GEMMs' shape)."""
    @T.prim_func
    def f(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
          C: T.Tensor((256, 256), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((128, 32), "float16")
            Bd = T.alloc_shared((128, 32), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            T.clear(Cl)
            for ko in T.Pipelined(8, num_stages=2):
                T.copy(A[by * 128, ko * 32], As)
                T.copy(B[bx * 128, ko * 32], Bs)
                for i, j in T.Parallel(128, 32):
                    Bd[i, j] = Bs[i, j] * 2.0
                T.gemm(As, Bd, Cl, transpose_B=True)
            T.copy(Cl, C[by * 128, bx * 128])
    return f


def test_a_fence_a_later_fence_covers_before_any_wgmma_goes():
    k, _ = run_passes(_computed_operand_gemm(), "insert_sync", SM90,
                      {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
    (main,) = nodes(k, ir.For, lambda s: s.annotation("pipelined_from") is not None)
    names = externs(main)
    # the copies' wait and the computed stores each had a fence before their barrier; the
    # second orders the copied tile too (it comes first in every thread), so one is left,
    # right before the barrier in front of the gemm
    fences = [i for i, n in enumerate(names) if n == "tl::fence_proxy_async"]
    gemm = next(i for i, n in enumerate(names) if n.startswith("tl::wgmma_gemm"))
    assert len(fences) == 1, names
    assert names[fences[0] + 1] == "__syncthreads" and fences[0] + 2 == gemm, names
    assert names.count("__syncthreads") == 3, names


# ---- kernels in which nothing touches shared memory through the async proxy ----------------

def _pipelined_plain_reads(K=128, BK=32):
    """A cp.async pipeline whose stages only ordinary loads read (as ldmatrix does):
    C[i] = sum_k A[i, k] * 2 over BK-wide tiles."""
    @T.prim_func
    def f(A: T.Tensor((128, K), "float32"), C: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            As = T.alloc_shared((128, BK), "float32")
            acc = T.alloc_fragment((128,), "float32")
            T.clear(acc)
            for ko in T.Pipelined(K // BK, num_stages=2):
                T.copy(A[0, ko * BK], As)
                for i in T.Parallel(128):
                    for kk in T.serial(BK):
                        acc[i] += As[i, kk] * 2.0
            T.copy(acc, C)
    return f


def test_no_proxy_fence_where_nothing_reads_through_the_async_proxy():
    # Hopper: the pipeliner fences after its cp.async wait for a wgmma that may read the
    # stage; with only ordinary loads reading it that MEMBAR + proxy fence orders nothing
    k, ctx = _check(_pipelined_plain_reads(), SM90,
                    {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
    assert not ctx.uses_wgmma
    assert "tl::cp_async_wait<1>" in externs(k)
    assert "tl::fence_proxy_async" not in externs(k), show(k)


def test_the_proxy_fence_stays_for_wgmma_readers():
    k, ctx = _check(pipelined_gemm(4 * 32, 2), SM90,
                    {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
    assert ctx.uses_wgmma
    assert "tl::fence_proxy_async" in externs(k), show(k)


def _nested_tile_stores():
    """Each thread stores its values of an (i, j) grid of 8 x 8 tiles into shared memory in
    nested serial loops (the mma emitter's stmatrix), then the block reads them transposed."""
    @T.prim_func
    def f(A: T.Tensor((128,), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=64) as _:
            S = T.alloc_shared((64, 64), "float32")
            tx = T.get_thread_binding()
            for i in T.serial(8):
                for j in T.serial(8):
                    for v in T.serial(8):
                        S[i * 8 + v, tx] = A[(i * 8 + j + v + tx) % 128]
            for r, c in T.Parallel(64, 64):
                B[r, c] = S[c, r]
    return f


def test_nested_store_loops_get_no_barrier_per_iteration():
    # a nested loop is one statement of its loop's body: its writes after the same writes of
    # the previous iteration are no hazard (before: a barrier in each of the 8 + 64 bodies)
    k, _ = _check(_nested_tile_stores())
    loops = nodes(k, ir.For, lambda s: s.var.name in ("i", "j", "v"))
    assert loops and all(not nodes(s.body, ir.Evaluate, _is_barrier) for s in loops), show(k)
    assert _barriers(k) == 1, show(k)  # the one before the transposed read


def _stage_loop_after_a_read(read_only_body=False):
    """S written and read by other threads before a loop that rewrites S every iteration
    (its own barrier before the write orders the read before the loop as well); or S only
    written before a loop that only reads it (a barrier before the loop, none inside)."""
    @T.prim_func
    def f(A: T.Tensor((512,), "float32"), B: T.Tensor((512,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), "float32")
            for i in T.Parallel(128):
                S[i] = A[i]
            if not read_only_body:
                for i in T.Parallel(128):
                    B[i] = S[127 - i]
            for k in T.serial(3):
                if not read_only_body:
                    for i in T.Parallel(128):
                        S[i] = A[128 * k + 128 + i]
                for i in T.Parallel(128):
                    B[128 * k + 128 + i] = S[127 - i] + 1.0
    return f


def test_a_loop_whose_barrier_comes_first_needs_none_before_it():
    k, _ = _check(_stage_loop_after_a_read())
    (loop,) = nodes(k, ir.For, lambda s: s.var.name == "k")
    # inside: before the write (the previous iteration's readers) and before the read
    assert len(nodes(loop.body, ir.Evaluate, _is_barrier)) == 2
    # outside: only the one between the first write and the first read
    assert _barriers(k) == 3


def test_a_read_only_loop_keeps_its_barrier_before_it():
    k, _ = _check(_stage_loop_after_a_read(read_only_body=True))
    (loop,) = nodes(k, ir.For, lambda s: s.var.name == "k")
    assert not nodes(loop.body, ir.Evaluate, _is_barrier)
    assert _barriers(k) == 1  # between the write and the loop
