"""T.Pipelined(num_stages=S >= 2) around roles the user synchronises with mbarriers (T.ws,
the reference's example_warp_specialize_gemm_copy_1_gemm_0): the tiles the loop loads and
the barriers it uses get S copies, iteration k using copy k % S with the parity of each
copy's phases, so the producer role runs S - 1 iterations ahead instead of waiting for the
consumers to release the one buffer. Checked on the mbarrier machine (every gemm reads its
own tiles, landed; no deadlock), by how far the producer gets alone, in the generated CUDA,
and on the CPU interpreter."""

import re
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir

from mbarrier_machine import MbarrierMachine
from transform_helpers import SM90, nodes, run_passes

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.gpu import role_kernels as R  # noqa: E402

BM, BN, BK = 64, 64, 32


def _loop(stages, K, producer=1):
    k, ctx = run_passes(R.ws_gemm(BM, BN, K, BM, BN, BK, producer=producer, stages=stages),
                        "pipeline", SM90)
    (loop,) = nodes(k.body, ir.For, lambda f: f.var.name == "ko")
    return k, ctx, loop


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("iters", [1, 2, 5, 8])
def test_every_gemm_reads_its_own_landed_tiles(stages, iters):
    k, ctx, loop = _loop(stages, iters * BK)
    assert any("user roles: " in n for n in ctx.notes), ctx.notes
    assert {b.name: b.shape for b in k.allocs if b.name in ("A_s", "B_s")} == {
        "A_s": (stages, BM, BK), "B_s": (stages, BK, BN)}
    inits = dict((b.name, c) for key, (b, c) in k.attrs if key == "barrier_init")
    assert inits == {"data_ready": (128,) * stages, "compute_done": (128,) * stages}
    tx, blocks = k.thread_vars[0], {v: 0 for v in k.block_vars}
    expected = sorted((ko, name, ko % stages, start) for ko in range(iters)
                      for name, start in (("A_s", (0, ko * BK)), ("B_s", (ko * BK, 0))))
    for seed in range(5):
        m = MbarrierMachine({}, {"data_ready": 128, "compute_done": 128}, seed, loop.var)
        # producer (warpgroup 1), consumers
        m.run([(loop, {tx: 128, **blocks}), (loop, {tx: 0, **blocks})])
        assert sorted(m.reads) == expected


@pytest.mark.parametrize("stages", [2, 3])
def test_producer_alone_fills_every_stage(stages):
    """With no consumer running, the producer issues the loads of S iterations before it
    waits (one buffer: one iteration)."""
    k, ctx, loop = _loop(stages, 8 * BK)
    m = MbarrierMachine({}, {"data_ready": 128, "compute_done": 128}, 0, loop.var)
    producer = m._run(loop, {k.thread_vars[0]: 128, **{v: 0 for v in k.block_vars}}, {})
    while next(producer) != "blocked":
        pass
    assert len(m.in_flight) == 2 * stages


def test_generated_cuda_indexes_barriers_and_tiles_by_stage():
    src = tilelang.lower(R.ws_gemm(256, 256, 512, stages=3), target="cuda -arch=sm_90a")
    for name in ("data_ready", "compute_done"):
        assert all(f"tl::mbarrier_init((&{name}[{s}]), 128);" in src for s in range(3))
    assert re.search(r"mbarrier_wait\(\(&compute_done\[ko % 3\]\), \(ko / 3 \+ 1\) & 1\)", src)
    assert re.search(r"mbarrier_wait\(\(&data_ready\[ko % 3\]\), \(ko / 3\) & 1\)", src)
    assert re.search(r"tma_load\([^;]*&A_s\[ko % 3 \* 8192\]", src)


def test_loop_writing_other_shared_memory_keeps_one_buffer():
    @T.prim_func
    def f(A: T.Tensor((64, 128), "float16"), C: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=256):
            A_s = T.alloc_shared((64, 32), "float16")
            S_s = T.alloc_shared((64, 32), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            for ko in T.Pipelined(4, num_stages=2):
                with T.ws(1):
                    T.barrier_wait(done, (ko + 1) % 2)
                    T.tma_copy(A[0, ko * 32], A_s, barrier=ready)
                    T.barrier_arrive(ready)
                with T.ws(0):
                    T.barrier_wait(ready, ko % 2)
                    for i, j in T.Parallel(64, 32):
                        S_s[i, j] = S_s[i, j] + A_s[i, j]
                    T.barrier_arrive(done)
            with T.ws(0):
                T.copy(S_s, C)

    k, ctx = run_passes(f, "pipeline", SM90)
    assert any("one buffer per tile" in n for n in ctx.notes), ctx.notes
    assert not ctx.replaced_shared


def test_cpu_interpreter_runs_the_staged_role_gemm():
    M, N, K = 64, 64, 160
    kernel = tilelang.compile(R.ws_gemm(M, N, K, BM, BN, BK, stages=2), target="cpu")
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c = torch.full((M, N), float("nan")).half()
    kernel(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)
