"""pipeline_loops: a T.Pipelined loop with num_stages = S >= 2 prefetches S-1 iterations of its
global->shared copies with cp.async into S-buffered tiles, and every iteration waits with
cp_async_wait<S-2> + a barrier before reading its stage. Checked by executing the schedule
the pass emits on an abstract machine (cp.async groups, barriers, stage contents) for several
trip counts, and in the generated CUDA."""

import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.runtime import compile_cuda
from tilelang.transform.analysis.numeric import eval_index
from tilelang.transform.pass_config import PassConfigKey

from transform_helpers import (BK, SM80, eval_with_memory, externs, guarded_gemm, nodes,
                               pipelined_gemm, requires_compiler, requires_gpu, run_passes, show)

_gemm = pipelined_gemm


class _Machine:
    """One thread's view of the schedule (every thread runs the same uniform code): cp.async
    groups complete only through wait<N>; data written by other threads is visible after a
    barrier that follows their wait; a stage may be overwritten only after a barrier that
    follows every read of its previous contents."""

    def __init__(self, stacked, iteration_of, loop_var, memory=None, single=(),
                 check_overwrite=True):
        self.memory = memory or {}        # tensors the schedule's branches read
        self.stacked = stacked            # stacked buffers (leading stage dim)
        self.single = set(single)         # one-buffer tiles of a single-stage loop (stage 0)
        self.check_overwrite = check_overwrite  # (off where insert_sync adds those barriers)
        self.loop_var = loop_var
        self.iteration_of = iteration_of  # Copy, env -> iteration whose tile it moves
        self.time = 0
        self.pending, self.groups = [], []
        self.content = {}                 # (buffer, stage) -> iteration landed there
        self.landed_at = {}
        self.in_flight = set()
        self.last_read = {}
        self.last_barrier = -1
        self.reads = []                   # (iteration of the loop, buffer, stage, content)

    def tick(self):
        self.time += 1

    def run(self, s, env):
        self.tick()
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                self.run(x, env)
        elif isinstance(s, ir.LetStmt):
            self.run(s.body, {**env, s.var: eval_with_memory(s.value, env, self.memory)})
        elif isinstance(s, ir.Attr):
            self.run(s.body, env)
        elif isinstance(s, ir.For):
            start, n = eval_index(s.start, env), eval_index(s.extent, env)
            for i in range(start, start + n):
                self.run(s.body, {**env, s.var: i})
        elif isinstance(s, ir.If):
            if eval_with_memory(s.cond, env, self.memory):
                self.run(s.then_body, env)
            elif s.else_body is not None:
                self.run(s.else_body, env)
        elif isinstance(s, ir.Copy):
            assert dict(s.options).get("async"), "a pipelined copy must be asynchronous"
            buf = s.dst.buffer
            stage = int(eval_index(s.dst.region[0][0], env)) if buf in self.stacked else 0
            key = (buf, stage)
            assert not self.check_overwrite or self.last_read.get(key, -2) < self.last_barrier, \
                f"{buf.name}[{stage}] overwritten before every thread finished reading it"
            self.pending.append((key, self.iteration_of(s, env)))
            self.in_flight.add(key)
        elif isinstance(s, ir.Evaluate) and s.value.op == "call_extern":
            name = s.value.args[0]
            if name == "tl::cp_async_commit":
                self.groups.append(self.pending)
                self.pending = []
            elif name.startswith("tl::cp_async_wait<"):
                keep = int(name[len("tl::cp_async_wait<"):-1])
                done = self.groups[:len(self.groups) - keep] if keep else self.groups
                self.groups = self.groups[len(done):]
                for group in done:
                    for key, it in group:
                        self.content[key] = it
                        self.landed_at[key] = self.time
                        self.in_flight.discard(key)
            elif name == "__syncthreads":
                self.last_barrier = self.time
        elif isinstance(s, ir.Store):  # an element of a copy into registers
            for ld in nodes(s.value, ir.Load, lambda e: e.buffer in self.stacked):
                self._read(ld.buffer, int(eval_index(ld.indices[0], env)), env)
        elif isinstance(s, ir.Gemm):
            for region in (s.A, s.B):
                if region.buffer in self.single:
                    key = (region.buffer, 0)
                elif region.buffer in self.stacked:
                    key = (region.buffer, int(eval_index(region.region[0][0], env)))
                else:
                    continue
                self._read(region.buffer, key[1], env)
        else:
            raise AssertionError(f"unexpected statement in the schedule: {show(s)}")


    def _read(self, buf, stage, env):
        key = (buf, stage)
        assert key not in self.in_flight, f"read of {key} while a copy is in flight"
        assert self.landed_at.get(key, self.time) < self.last_barrier, \
            "read before a barrier after the wait that landed it"
        self.last_read[key] = self.time
        read = (env[self.loop_var], buf.name, stage, self.content.get(key))
        if not self.reads or self.reads[-1] != read:  # a copy reads a tile element-wise
            self.reads.append(read)


def _schedule(K, stages, start=0, kernel=_gemm):
    k, ctx = run_passes(kernel(K, stages, start), "pipeline", SM80)
    (loop,) = nodes(k, ir.For, lambda s: s.annotation("pipelined_from") is not None)
    stacked = {b for b in ctx.replaced_shared.values()}
    # the statements from the prologue to the drain, in order
    seq = next(s for s in nodes(k, ir.Seq) if any(x is loop for x in s.stmts))
    i = next(j for j, x in enumerate(seq.stmts) if x is loop)
    return k, ctx, loop, stacked, list(seq.stmts[i - 1:i + 2])


def _iteration_of(copy, env):
    """Which ko a copy loads: A[0, ko*BK] or B[ko*BK, 0]."""
    starts = [eval_index(st, env) for st, _ in copy.src.region]
    off = starts[1] if copy.src.buffer.name == "A" else starts[0]
    assert off % BK == 0
    return off // BK


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("iters", [1, 2, 5])
def test_schedule_reads_each_iteration_from_a_landed_stage(stages, iters):
    k, ctx, loop, stacked, stmts = _schedule(iters * BK, stages)
    # S buffers in one allocation
    assert {b.name: b.shape for b in stacked} == {"As": (stages, 64, BK),
                                                 "Bs": (stages, BK, 64)}
    assert all(b in k.allocs for b in stacked)
    prologue, main, drain = stmts
    assert isinstance(prologue, ir.For) and prologue.extent.value == stages - 1
    if stages == 2:  # issue k + 1 first, then wait for k alone: a load stays in flight
        assert externs(main.body)[:3] == ["__syncthreads", "tl::cp_async_commit",
                                          "tl::cp_async_wait<1>"]
    else:
        assert externs(main.body)[:1] == [f"tl::cp_async_wait<{stages - 2}>"]
    assert "__syncthreads" in externs(main.body)
    assert externs(drain) == ["tl::cp_async_wait<0>"]
    m = _Machine(stacked, _iteration_of, loop.var)
    env = {}
    for s in stmts:
        m.run(s, env)
    # every iteration read both tiles of its own ko, each once, from stage ko % S
    expected = sorted((ko, name, ko % stages, ko) for ko in range(iters)
                      for name in ("As", "Bs"))
    got = sorted((int(a), b, c, d) for a, b, c, d in m.reads)
    assert got == expected
    # nothing is left in flight after the drain
    assert m.groups == [] and m.pending == [] and not m.in_flight


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("mask", ["1011001", "0000", "1111", "0110", "1", "0", "00101"])
def test_skipped_iterations_under_a_uniform_branch(stages, mask):
    """A body entirely under `if Mask[ko]`: each iteration whose mask is set reads its own
    tiles from a landed stage, skipped ones load and read nothing, and nothing stays in
    flight (the branch is evaluated for the prefetched iteration too)."""
    iters = len(mask)
    k, ctx, loop, stacked, stmts = _schedule(iters * BK, stages, kernel=guarded_gemm)
    assert any("under a block-uniform branch" in n for n in ctx.notes), ctx.notes
    memory = {"Mask": np.array([c == "1" for c in mask])}
    m = _Machine(stacked, _iteration_of, loop.var, memory)
    for s in stmts:
        m.run(s, {})
    got = sorted((int(a), b, c, d) for a, b, c, d in m.reads)
    assert got == sorted((ko, name, ko % stages, ko) for ko in range(iters) if mask[ko] == "1"
                         for name in ("As", "Bs"))
    assert m.groups == [] and m.pending == [] and not m.in_flight


def _guarded_two_tiles(iters, mask_in_fragment):
    """A single-stage loop under `if mask[k]` whose two tiles are first read by different
    gemms (block-sparse attention's K and V); the mask read from global memory, or from a
    fragment every thread holds whole (copied from global before the loop)."""
    @T.prim_func
    def f(A: T.Tensor((64, BK), "float16"), Kt: T.Tensor((iters * BK, 64), "float16"),
          Vt: T.Tensor((iters * BK, 64), "float16"), Mask: T.Tensor((iters,), "bool"),
          C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((64, BK), "float16")
            Ks = T.alloc_shared((BK, 64), "float16")
            Vs = T.alloc_shared((BK, 64), "float16")
            S = T.alloc_fragment((64, 64), "float32")
            O = T.alloc_fragment((64, 64), "float32")
            flags = T.alloc_fragment((iters,), "bool")
            T.copy(A, As)
            T.copy(Mask, flags)
            T.clear(S)
            T.clear(O)
            for k in T.Pipelined(iters, num_stages=1):
                if (flags[k] if mask_in_fragment else Mask[k]):
                    T.copy(Kt[k * BK, 0], Ks)
                    T.gemm(As, Ks, S)
                    T.copy(Vt[k * BK, 0], Vs)
                    T.gemm(As, Vs, O)
            for i, j in T.Parallel(64, 64):
                C[i, j] = S[i, j] + O[i, j]
    return f


@pytest.mark.parametrize("mask_in_fragment", [False, True])
@pytest.mark.parametrize("mask", ["1011001", "0000", "1111", "0110", "1", "0", "1100111"])
def test_single_stage_under_a_uniform_branch(mask_in_fragment, mask):
    """Each iteration that runs reads its own K and V tiles after they landed (issued by the
    previous iteration if it ran, else at its own top), skipped ones load nothing, and
    nothing stays in flight."""
    iters = len(mask)
    k, ctx = run_passes(_guarded_two_tiles(iters, mask_in_fragment), "pipeline", SM80)
    assert any("single-stage loop over k" in n and "block-uniform branch" in n
               for n in ctx.notes), ctx.notes
    (loop,) = nodes(k, ir.For, lambda f: f.var.name == "k")
    seq = next(s for s in nodes(k, ir.Seq) if any(x is loop for x in s.stmts))
    i = next(j for j, x in enumerate(seq.stmts) if x is loop)
    tiles = {b for b in k.allocs if b.name in ("Ks", "Vs")}
    flags = np.array([c == "1" for c in mask])
    # the barriers before overwrites come later (insert_sync); here: data and waits
    m = _Machine(set(), lambda c, env: int(eval_index(c.src.region[0][0], env)) // BK,
                 loop.var, {"Mask": flags, "flags": flags}, single=tiles,
                 check_overwrite=False)
    for s in seq.stmts[i:i + 2]:
        m.run(s, {})
    got = sorted((int(a), b, d) for a, b, _, d in m.reads)
    assert got == sorted((ko, name, ko) for ko in range(iters) if mask[ko] == "1"
                         for name in ("Ks", "Vs"))
    assert m.groups == [] and m.pending == [] and not m.in_flight


@pytest.mark.parametrize("target", ["cuda -arch=sm_80", "cuda -arch=sm_90a"])
def test_single_stage_under_a_fragment_branch_compiles(target):
    src = tilelang.compile(_guarded_two_tiles(5, True), target=target).get_kernel_source()
    assert "fresh" in src and "flags[k + 1]" in src
    assert src.count("cp_async_commit") >= 4


@requires_gpu
@pytest.mark.parametrize("mask_in_fragment", [False, True])
def test_single_stage_under_a_uniform_branch_matches_torch(mask_in_fragment):
    import torch

    iters = 7
    kernel = tilelang.compile(_guarded_two_tiles(iters, mask_in_fragment), target="cuda")
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        A = torch.randn(64, BK, generator=g).half()
        Kt = torch.randn(iters * BK, 64, generator=g).half()
        Vt = torch.randn(iters * BK, 64, generator=g).half()
        mask = torch.rand(iters, generator=g) > 0.5
        mask[seed % iters] = not mask[seed % iters].item()
        C = torch.full((64, 64), float("nan"), device="cuda")
        kernel(A.cuda(), Kt.cuda(), Vt.cuda(), mask.cuda(), C)
        ref = torch.zeros(64, 64, dtype=torch.float64)
        for k in range(iters):
            if mask[k]:
                ref += A.double() @ (Kt[k * BK:(k + 1) * BK].double()
                                     + Vt[k * BK:(k + 1) * BK].double())
        torch.testing.assert_close(C.double().cpu(), ref, rtol=1e-3, atol=1e-2)


def _register_staged(N, stages, M=16, staged_x=False):
    """o = A @ x with a reducer, the A tile staged through shared memory and copied into a
    fragment at the top of the T.Pipelined body (the reference's `gemv_alloc_reducer`); x
    read from global memory, or (`staged_x`) staged too and copied into a fragment every
    thread holds whole, so a thread reads elements other threads' copies wrote."""
    @T.prim_func
    def f(A: T.Tensor((M, N), "float16"), x: T.Tensor((N,), "float16"),
          o: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
            As = T.alloc_shared((16, BK), "float16")
            xs = T.alloc_shared((BK,), "float16")
            Af = T.alloc_fragment((16, BK), "float16")
            xf = T.alloc_fragment((BK,), "float16")
            acc = T.alloc_reducer(16, "float32", replication="all")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(N, BK), num_stages=stages):
                T.copy(A[bx * 16, k * BK], As)
                T.copy(As, Af)
                if staged_x:
                    T.copy(x[k * BK], xs)
                    T.copy(xs, xf)
                else:
                    T.copy(x[k * BK], xf)
                for i, j in T.Parallel(16, BK):
                    acc[i] += Af[i, j] * xf[j]
            T.finalize_reducer(acc)
            T.copy(acc, o[bx * 16])
    return f


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("iters", [1, 2, 5])
@pytest.mark.parametrize("staged_x", [False, True])
def test_register_staged_tiles_are_refilled_after_their_copies(stages, iters, staged_x):
    """Stage tiles read only by copies into registers at the top of the body: S iterations
    are issued before the loop, each iteration waits for S-1 groups, reads its own landed
    stage, and reloads that stage with iteration k + S right after the copies (S loads in
    flight while the rest of the body runs)."""
    k, ctx = run_passes(_register_staged(iters * BK, stages, staged_x=staged_x), "pipeline",
                        SM80)
    assert any("refilled as soon as its copies into registers are done" in n
               for n in ctx.notes), ctx.notes
    (loop,) = nodes(k, ir.For, lambda s: s.annotation("pipelined_from") is not None)
    stacked = set(ctx.replaced_shared.values())
    seq = next(s for s in nodes(k, ir.Seq) if any(x is loop for x in s.stmts))
    i = next(j for j, x in enumerate(seq.stmts) if x is loop)
    prologue = seq.stmts[i - 1]
    assert prologue.extent.value == stages
    assert externs(loop.body)[0] == f"tl::cp_async_wait<{stages - 1}>"
    m = _Machine(stacked, lambda c, env: int(eval_index(c.src.region[-1][0], env)) // BK,
                 loop.var, check_overwrite=False)  # overwrite barriers: insert_sync's
    for s in seq.stmts[i - 1:i + 2]:
        m.run(s, {})
    names = ("As", "xs") if staged_x else ("As",)
    assert sorted((int(a), b, c, d) for a, b, c, d in m.reads) == sorted(
        (ko, name, ko % stages, ko) for ko in range(iters) for name in names)
    assert m.groups == [] and m.pending == [] and not m.in_flight


def test_register_staged_refill_waits_for_other_threads_copies():
    """A fragment every thread holds whole reads elements other threads' cp.async wrote: the
    stage is refilled only after a barrier that follows those copies."""
    src = tilelang.lower(_register_staged(8 * BK, 2, staged_x=True), target=SM80)
    body = src[src.index("for (int k = 0"):src.index("tl::cp_async_wait<0>")]
    reads = body.index("xs[")
    refill = body.index("tl::cp_async", body.index("// refill_stage: 2"))
    assert "__syncthreads" in body[reads:refill]


def test_a_gemm_reading_the_stage_keeps_the_issue_at_the_top():
    """Stage tiles a gemm reads in shared memory are busy until the body's end: S-1 ahead."""
    k, ctx = run_passes(_gemm(4 * BK, 3), "pipeline", SM80)
    assert not any("refilled" in n for n in ctx.notes)


def test_branch_on_the_thread_index_is_not_pipelined():
    """A condition threads may disagree on (or one reading shared memory) keeps the serial
    loop: the prefetch of another iteration would be issued by only some threads."""
    @T.prim_func
    def f(A: T.Tensor((64, 4 * BK), "float16"), C: T.Tensor((64, BK), "float16")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((64, BK), "float16")
            tx = T.get_thread_binding()
            for ko in T.Pipelined(4, num_stages=2):
                if tx < 64 + ko:
                    T.copy(A[0, ko * BK], As)
            T.copy(As, C)

    k, ctx = run_passes(f, "pipeline", SM80)
    assert not ctx.replaced_shared


def test_loop_with_a_nonzero_start():
    k, ctx, loop, stacked, stmts = _schedule(6 * BK, 3, start=2)
    m = _Machine(stacked, _iteration_of, loop.var)
    for s in stmts:
        m.run(s, {})
    got = sorted((int(a), b, d) for a, b, _, d in m.reads)
    assert got == sorted((ko, name, ko) for ko in range(2, 6) for name in ("As", "Bs"))


def test_prefetch_depth_in_the_issue_order():
    """Before the first wait, S-1 iterations' copies are issued (as S-1 commit groups)."""
    stages = 4
    k, ctx, loop, stacked, stmts = _schedule(8 * BK, stages)
    m = _Machine(stacked, _iteration_of, loop.var)
    m.run(stmts[0], {})
    assert [[it for _, it in g] for g in m.groups] == [[0, 0], [1, 1], [2, 2]]
    assert any("4 stages" in n for n in ctx.notes), ctx.notes


@pytest.mark.parametrize("stages", [0, 1])
def test_one_stage_runs_serially_with_synchronous_copies(stages):
    k, ctx = run_passes(_gemm(4 * BK, stages), "pipeline", SM80)
    assert not ctx.replaced_shared
    assert not nodes(k, ir.For, lambda s: s.kind == "pipelined")
    copies = nodes(k, ir.Copy)
    assert len(copies) == 2 and not any(dict(c.options).get("async") for c in copies)
    assert not externs(k, "tl::cp_async_wait")


def test_destination_used_after_the_loop_is_not_multi_buffered():
    @T.prim_func
    def f(A: T.Tensor((64, 128), "float16"), B: T.Tensor((64, 32), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 32), "float16")
            F = T.alloc_fragment((64, 32), "float32")
            T.clear(F)
            for ko in T.Pipelined(4, num_stages=3):
                T.copy(A[0, ko * 32], S)
                for i, j in T.Parallel(64, 32):
                    F[i, j] += S[i, j]
            T.copy(S, B)  # the last tile, read after the loop

    k, ctx = run_passes(f, "pipeline", SM80)
    assert not ctx.replaced_shared
    assert not externs(k, "tl::cp_async")


def test_copy_indexed_by_data_written_in_the_loop_is_not_prefetched():
    @T.prim_func
    def f(A: T.Tensor((256, 32), "float16"), Idx: T.Tensor((8,), "int32"),
          B: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 32), "float16")
            F = T.alloc_fragment((64, 32), "float32")
            T.clear(F)
            for ko in T.Pipelined(4, num_stages=2):
                row = Idx[ko]
                T.copy(A[row, 0], S)
                for i, j in T.Parallel(64, 32):
                    F[i, j] += S[i, j]
                Idx[ko + 1] = row + 1   # the next iteration's start depends on this one
            T.copy(F, B)

    _, ctx = run_passes(f, "pipeline", SM80)
    assert not ctx.replaced_shared


def test_read_only_index_data_is_prefetched_with_its_let():
    @T.prim_func
    def f(A: T.Tensor((256, 32), "float16"), Idx: T.Tensor((8,), "int32"),
          B: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 32), "float16")
            F = T.alloc_fragment((64, 32), "float32")
            T.clear(F)
            for ko in T.Pipelined(4, num_stages=2):
                row = Idx[ko]
                T.copy(A[row, 0], S)
                for i, j in T.Parallel(64, 32):
                    F[i, j] += S[i, j]
            T.copy(F, B)

    k, ctx = run_passes(f, "pipeline", SM80)
    assert [b.name for b in ctx.replaced_shared] == ["S"]
    # the prefetch of iteration ko + 1 reads Idx[ko + 1]: the let moves with its copy
    main = next(iter(nodes(k, ir.For, lambda s: s.annotation("pipelined_from"))))
    issue = next(s for s in nodes(main.body, ir.If) if nodes(s, ir.Copy))
    (let,) = nodes(issue, ir.LetStmt)
    assert isinstance(let.value, ir.Load) and let.value.buffer.name == "Idx"


def _cuda(stages, K=4 * BK):
    return tilelang.lower(_gemm(K, stages), target=SM80)


@pytest.mark.parametrize("stages", [2, 3])
def test_generated_cuda_waits_for_s_minus_2_groups(stages):
    src = _cuda(stages)
    # one wait per iteration (S-2 groups left in flight; with two stages the next stage is
    # issued first and one group is left), one wait<0> to drain
    assert src.count(f"tl::cp_async_wait<{max(stages - 2, 1)}>();") == 1
    assert src.count("tl::cp_async_wait<0>();") == 1
    assert re.search(r"tl::cp_async(_zfill)?<16>", src)  # 16-byte chunks of fp16
    assert src.count("tl::cp_async_commit();") == 2  # prologue, steady state


@requires_compiler
def test_generated_cuda_compiles():
    compile_cuda(_cuda(3), "sm_80", name="pipelined_gemm")


@requires_gpu
@pytest.mark.parametrize("stages,K", [(3, 4 * BK), (3, BK), (4, 2 * BK + 16)])
def test_pipelined_gemm_runs_like_the_serial_loop(stages, K):
    import torch

    # on Hopper the warp-specialised TMA path would take the loop: keep the cp.async pipeline
    kernel = tilelang.compile(_gemm(K, stages), target="cuda", pass_configs={
        PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
    rng = np.random.default_rng(1)
    A = torch.tensor(rng.standard_normal((64, K)), dtype=torch.float16, device="cuda")
    B = torch.tensor(rng.standard_normal((K, 64)), dtype=torch.float16, device="cuda")
    C = torch.empty((64, 64), dtype=torch.float32, device="cuda")
    kernel(A, B, C)
    ref = A.float().cpu().numpy() @ B.float().cpu().numpy()
    np.testing.assert_allclose(C.cpu().numpy(), ref, rtol=1e-2, atol=1e-2)


@requires_gpu
@pytest.mark.parametrize("staged_x", [False, True])
@pytest.mark.parametrize("stages", [2, 3])
def test_register_staged_gemv_matches_torch(staged_x, stages):
    """Ragged sizes (a partial block of rows, a partial last tile), outputs poisoned."""
    import torch

    M, N = 40, 7 * BK + 8
    kernel = tilelang.compile(_register_staged(N, stages, M=M, staged_x=staged_x),
                              target="cuda")
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        A = torch.randn(M, N, generator=g).half()
        x = torch.randn(N, generator=g).half()
        o = torch.full((M,), float("nan"), device="cuda")
        kernel(A.cuda(), x.cuda(), o)
        ref = A.double() @ x.double()
        torch.testing.assert_close(o.double().cpu(), ref, rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("overlap", [True, False])
def test_hopper_issues_the_next_stage_under_the_running_gemm(overlap):
    """sm_90a without warp specialisation: a loop of wgmma gemms alone issues them first and
    computes and issues the next stage's copies while they run; the wait for the gemm comes
    just before the next iteration's barrier, and no barrier separates the gemm from the
    copies (they write another stage). `tl.disable_wgmma_overlap` keeps the plain order."""
    configs = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
    if not overlap:
        configs[PassConfigKey.TL_DISABLE_WGMMA_OVERLAP] = True
    src = tilelang.lower(_gemm(8 * BK, 3), target="cuda -arch=sm_90a", pass_configs=configs)
    body = src[src.index("for (int ko"):]
    body = body[:body.index("tl::cp_async_wait<0>")]
    gemm = body.index("tl::wgmma_gemm_ss<")
    copies = re.compile(r"tl::cp_async(_zfill)?<").search(body,
                                                        body.index("// issue_ahead")).start()
    if overlap:
        assert re.search(r"tl::wgmma_gemm_ss<[^>]*, -1>", body)
        assert gemm < copies and "__syncthreads" not in body[gemm:copies]
        assert body.index("tl::wgmma_wait_in_place<0>") < body.index("__syncthreads")
    else:
        assert copies < gemm and "wgmma_wait_in_place" not in body


@pytest.mark.parametrize("shape,dtype_bytes,stride", [
    ((80,), 4, 96),          # 320 bytes: the next stage would start off a 128-byte boundary
    ((64,), 4, 64),          # already aligned: plain row-major stacking
    ((3, 40), 2, 128),       # 240 bytes
    ((128, 64), 2, 8192)])
def test_stages_start_on_128_byte_boundaries(shape, dtype_bytes, stride):
    from tilelang import layout as L
    from tilelang.transform.analysis.loop_items import stack_layout

    stacked = stack_layout(L.row_major(shape), 3, dtype_bytes)
    zero = (0,) * len(shape)
    assert [stacked.forward(s, *zero) for s in range(3)] == [0, stride, 2 * stride]
    assert stacked.physical_size == 3 * stride
    last = tuple(n - 1 for n in shape)
    assert stacked.forward(1, *last) == stride + L.row_major(shape).forward(*last)
