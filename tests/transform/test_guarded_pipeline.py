"""A T.Pipelined loop whose work is all under a block-uniform branch (`if Mask[ko]:`, a
block-sparse GEMM) is pipelined by the warp-specialised TMA schedule too: producer and
consumers both evaluate the branch and count the iterations they run, so the ring slot and
mbarrier parity of each iteration that runs are the same on both sides whichever iterations
are skipped. Checked by running the producer and consumer regions the pass emits on an
abstract machine (mbarrier phases, TMA loads landing at arbitrary times, random
interleavings of the two roles), and in the generated CUDA; `@gpu` tests compare with torch."""

import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir

from mbarrier_machine import MbarrierMachine
from transform_helpers import BK, SM90, guarded_gemm, nodes, requires_gpu, run_passes


def _regions(kernel):
    groups = {a.value[0]: a.body for a in nodes(kernel.body, ir.Attr,
                                                 lambda a: a.key == "thread_group")}
    return groups["producer"], groups["consumer"]


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("mask", ["1011001", "0000", "1111", "0110", "1", "0", "1001110101"])
def test_tma_ring_stays_in_step_when_iterations_are_skipped(stages, mask):
    iters = len(mask)
    k, ctx = run_passes(guarded_gemm(iters * BK, stages), "warp_specialize", SM90)
    assert any("warp-specialised pipeline over ko" in n for n in ctx.notes), ctx.notes
    producer, consumer = _regions(k)
    (loop,) = nodes(consumer, ir.For, lambda f: f.kind == "serial")
    tx = k.thread_vars[0]
    memory = {"Mask": np.array([c == "1" for c in mask])}
    tile = {"As": lambda ko: (0, ko * BK), "Bs": lambda ko: (ko * BK, 0)}  # source starts
    expected = sorted((ko, name, n % stages, tile[name](ko)) for n, ko in
                      enumerate(i for i in range(iters) if mask[i] == "1")
                      for name in ("As", "Bs"))
    for seed in range(6):
        m = MbarrierMachine(memory, {"full_bar": 1, "empty_bar": 128}, seed, loop.var)
        m.run([(ir.If(ir.compare("eq", tx, 128), producer, None), {tx: 128}),
               (consumer, {tx: 0})])
        assert sorted(m.reads) == expected


def test_generated_cuda_counts_iterations_in_both_roles():
    src = tilelang.lower(guarded_gemm(8 * BK, 3), target="cuda -arch=sm_90a")
    producer = src[src.index("('producer'"):src.index("('consumer'")]
    consumer = src[src.index("('consumer'"):]
    for role in (producer, consumer):
        branch = role.index("if (Mask[ko])")
        assert role.index("pipe_done = pipe_done + 1") > branch
        assert re.search(r"int pipe_done = 0;\s*for \(int ko", role)
    assert "tl::tma_load" in producer and "tl::mbarrier_arrive((&empty_bar" in consumer


def test_branch_the_producer_cannot_evaluate_keeps_the_cp_async_pipeline():
    """A condition on a value the consumers compute from memory (a fragment) is not the
    producer's to evaluate: no warp specialisation."""
    @T.prim_func
    def f(A: T.Tensor((64, 4 * BK), "float16"), C: T.Tensor((64, BK), "float16")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((64, BK), "float16")
            flag = T.alloc_shared((1,), "int32")
            flag[0] = 1
            for ko in T.Pipelined(4, num_stages=2):
                if flag[0] > ko:
                    T.copy(A[0, ko * BK], As)
            T.copy(As, C)

    k, ctx = run_passes(f, "warp_specialize", SM90)
    assert not any("warp-specialised" in n for n in ctx.notes)


def _blocksparse(M, N, K, bm, bn, bk, stages, threads=128):
    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          Mask: T.Tensor((T.ceildiv(M, bm), T.ceildiv(N, bn), T.ceildiv(K, bk)), "bool"),
          C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, bn), "float16")
            Cl = T.alloc_fragment((bm, bn), "float32")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                if Mask[by, bx, k]:
                    T.copy(A[by * bm, k * bk], As)
                    T.copy(B[k * bk, bx * bn], Bs)
                    T.gemm(As, Bs, Cl)
            T.copy(Cl, C[by * bm, bx * bn])
    return f


def _blocksparse_reference(A, B, mask, bm, bn, bk):
    M, N = A.shape[0], B.shape[1]
    C = np.zeros((M, N), np.float32)
    for i, j, k in zip(*np.nonzero(mask)):
        C[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] += \
            A[i * bm:(i + 1) * bm, k * bk:(k + 1) * bk] @ B[k * bk:(k + 1) * bk,
                                                            j * bn:(j + 1) * bn]
    return C


def test_cpu_interpreter_skips_masked_tiles():
    import torch

    M, N, K, bm, bn, bk = 64, 96, 160, 32, 32, 32
    kernel = tilelang.compile(_blocksparse(M, N, K, bm, bn, bk, 2), target="cpu")
    g = torch.Generator().manual_seed(3)
    A = torch.randn(M, K, generator=g).half()
    B = torch.randn(K, N, generator=g).half()
    mask = torch.rand(M // bm, N // bn, K // bk, generator=g) > 0.5
    mask[0, 0, :] = False  # a block with nothing to add
    C = torch.full((M, N), float("nan"), dtype=torch.float16)
    kernel(A, B, mask, C)
    ref = _blocksparse_reference(A.float().numpy(), B.float().numpy(), mask.numpy(), bm, bn, bk)
    np.testing.assert_allclose(C.float().numpy(), ref, rtol=1e-2, atol=1e-2)


@requires_gpu
@pytest.mark.parametrize("arch_configs", [{}, {"tl.disable_warp_specialized": True}])
@pytest.mark.parametrize("M,N,K,stages", [(256, 384, 512, 2), (200, 136, 328, 3),
                                          (128, 128, 64, 4)])
def test_blocksparse_gemm_matches_torch(arch_configs, M, N, K, stages):
    """Ragged sizes (partial tiles at every edge), random masks with whole rows of blocks
    skipped, outputs poisoned first; both schedules (TMA producer and cp.async)."""
    import torch

    bm, bn, bk = 64, 64, 32
    kernel = tilelang.compile(_blocksparse(M, N, K, bm, bn, bk, stages), target="cuda",
                              pass_configs=arch_configs)
    gm, gn, gk = -(-M // bm), -(-N // bn), -(-K // bk)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        A = torch.randn(M, K, generator=g).half().cuda()
        B = torch.randn(K, N, generator=g).half().cuda()
        mask = torch.rand(gm, gn, gk, generator=g) > 0.5
        mask[0, :, :] = False
        mask[-1, -1, :] = True
        C = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
        kernel(A, B, mask.cuda(), C)
        Ap = torch.zeros(gm * bm, gk * bk); Ap[:M, :K] = A.float().cpu()  # noqa: E702
        Bp = torch.zeros(gk * bk, gn * bn); Bp[:K, :N] = B.float().cpu()  # noqa: E702
        ref = _blocksparse_reference(Ap.numpy(), Bp.numpy(), mask.numpy(), bm, bn, bk)
        torch.testing.assert_close(C.float().cpu(), torch.from_numpy(ref[:M, :N]),
                                   rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("target,configs", [
    ("cuda -arch=sm_90a", {}), ("cuda -arch=sm_90a", {"tl.disable_warp_specialized": True}),
    ("cuda -arch=sm_80", {})])
def test_ragged_blocksparse_compiles(target, configs):
    kernel = tilelang.compile(_blocksparse(200, 136, 328, 64, 64, 32, 3), target=target,
                              pass_configs=configs)
    src = kernel.get_kernel_source()
    assert "if (Mask[" in src
    specialised = target.endswith("90a") and not configs
    assert ("tl::tma_load" in src) == specialised
    assert ("tl::cp_async_wait<1>" in src) == (not specialised)  # 3 stages in flight
