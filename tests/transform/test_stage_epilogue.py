"""Staged GEMM epilogues (transform/stage_epilogue.py) and the shared-memory reuse they rely on
(plan_shared's fresh buffers): the fragment→global copy after the main loop goes through a
swizzled shared tile that takes the bytes of the pipeline's stages, with a TMA store on
sm_90a (fence, barrier, one issuing thread, bulk commit/wait) or 16-byte vector stores
elsewhere; also inside a persistent tile loop; barriers order every reuse; a pass config
turns it off. Results on the interpreter are unchanged (the pass is CUDA-only)."""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.runtime import toolkit
from tilelang.transform.pass_config import PassConfigKey

from transform_helpers import (SM80, SM90, externs, gemm_with_epilogue, nodes,
                               requires_compiler, run_passes, show)
from test_insert_sync import hazards
from tests.gpu.epilogue_kernels import gemm, persistent

OFF = {PassConfigKey.TL_DISABLE_STAGED_EPILOGUE: True}


def _ranges(ctx):
    return {b.name: (o, o + b.numel() * b.dtype.bytes) for b, o in ctx.shared_plan.items()}


def _overlap(a, b):
    return a[0] < b[1] and b[0] < a[1]


def _epi(ctx):
    return [n for n in _ranges(ctx) if n.endswith("_epi")]


def test_sm80_epilogue_is_staged_with_vector_stores_in_the_stage_bytes():
    k, ctx = run_passes(gemm(1000, 1000, 512), "insert_sync", SM80)
    r = _ranges(ctx)
    assert _epi(ctx) == ["Cl_epi"]
    assert _overlap(r["Cl_epi"], r["As"]) or _overlap(r["Cl_epi"], r["Bs"])
    assert ctx.layouts[next(b for b in ctx.layouts if b.name == "Cl_epi")].swizzle_bytes
    _, off = run_passes(gemm(1000, 1000, 512), "plan_shared", SM80, OFF)
    assert ctx.smem_bytes == off.smem_bytes  # the tile costs no extra shared memory
    assert "tl::tma_store" not in externs(k)
    # whole 16-byte global stores (ragged N = 1000 is a multiple of 8 halves)
    src = tilelang.lower(gemm(1024, 1024, 512), target=SM80)
    assert "tl::copy_vec<16>((&C[" in src
    assert hazards(k, ctx) == [], show(k)


def test_sm90_epilogue_is_a_fenced_tma_store():
    k, ctx = run_passes(gemm(1000, 1000, 512, 128, 256, 64, 3, 256), "insert_sync", SM90)
    calls = externs(k)
    assert "tl::tma_store" in calls
    i = calls.index("tl::tma_store")
    # every writer fences the async proxy, then a barrier, then one thread stores
    assert calls[i - 2:i] in (["tl::fence_proxy_async", "__syncthreads"],
                              ["tl::fence_proxy_async", "tl::named_barrier_sync"])
    assert calls[-2:] == ["tl::tma_store_arrive", "tl::tma_store_wait<0>"]
    assert calls.count("tl::tma_store") == 4  # one per 64-column (128-byte) block
    (desc,) = [d for d in ctx.tma_descriptors if d.name.endswith("_store_desc")]
    assert desc.box == (128, 64) and desc.swizzle == 128
    r = _ranges(ctx)
    assert _overlap(r["Cl_epi"], r["Bs"]) and r["Cl_epi"][0] % 1024 == 0
    assert hazards(k, ctx) == [], show(k)


def test_tma_store_needs_16_byte_rows_else_vector_path():
    k, ctx = run_passes(gemm(300, 260, 96), "insert_sync", SM90)  # 520-byte rows
    assert _epi(ctx) and "tl::tma_store" not in externs(k)
    k, ctx = run_passes(gemm(256, 256, 96), "insert_sync", SM90,
                        {PassConfigKey.TL_DISABLE_TMA_STORE: True})
    assert _epi(ctx) and "tl::tma_store" not in externs(k)


def test_config_turns_it_off_and_small_tiles_stay_direct():
    for tgt in (SM80, SM90):
        _, ctx = run_passes(gemm(256, 256, 64), "plan_shared", tgt, OFF)
        assert not _epi(ctx)
    _, ctx = run_passes(gemm(64, 64, 64, 32, 32, 32), "plan_shared", SM80)  # 2 KB tile
    assert not _epi(ctx)


def test_no_room_means_no_staging():
    # fp32 128x256 tile (128 KB) is larger than any stage buffer and does not fit next to them
    _, ctx = run_passes(gemm(512, 512, 512, 128, 256, 64, 3, 256, out="float32"),
                        "plan_shared", SM90)
    assert not _epi(ctx) and any("do not fit" in n for n in ctx.notes)


def test_hand_staged_tile_reuses_the_warp_specialised_stages():
    # the user's own C tile after a TMA/mbarrier pipeline: live ranges no longer touch
    k, ctx = run_passes(gemm_with_epilogue(), "insert_sync", SM90)
    r = _ranges(ctx)
    assert any(_overlap(r["Cs"], r[x]) for x in ("As", "Bs"))
    assert hazards(k, ctx) == [], show(k)


def test_persistent_loop_reuses_stage_bytes_with_barriers():
    configs = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
    for tgt in (SM80, SM90):
        k, ctx = run_passes(persistent(1000, 1000, 96), "insert_sync", tgt, configs)
        r = _ranges(ctx)
        assert _overlap(r["Cl_epi"], r["As"]), (tgt, r)
        assert ctx.smem_bytes == max(hi for _, hi in r.values())
        assert ctx.smem_bytes <= 2 * 3 * 128 * 32 * 2 + 1024
        # the next tile's prologue overwrites the bytes the epilogue just read: a barrier
        assert hazards(k, ctx) == [], show(k)
        loop = next(s for s in nodes(k, ir.For) if s.var.name == "w")
        assert externs(loop).count("__syncthreads") >= 4


def test_warp_specialised_persistent_loop_keeps_the_stages_to_the_producer():
    """With a TMA producer the stages of the next tile fill while the epilogue of this one
    runs: the epilogue tile gets bytes of its own."""
    k, ctx = run_passes(persistent(1000, 1000, 96), "insert_sync", SM90)
    assert any("warp-specialised pipeline over ko (inside for w, if)" in n for n in ctx.notes)
    r = _ranges(ctx)
    assert not any(_overlap(r["Cl_epi"], r[b]) for b in ("As", "Bs", "full_bar", "empty_bar"))
    assert hazards(k, ctx) == [], show(k)


def test_reuse_can_be_disabled():
    _, ctx = run_passes(persistent(512, 512, 96), "plan_shared", SM80,
                        {PassConfigKey.TL_DISABLE_SHARED_MEMORY_REUSE: True})
    r = list(_ranges(ctx).values())
    assert not any(_overlap(a, b) for i, a in enumerate(r) for b in r[i + 1:])


def test_non_fresh_tiles_in_a_loop_still_never_overlap():
    # a user tile used throughout an outer loop may carry values between iterations
    @T.prim_func
    def f(A: T.Tensor((4, 64, 64), "float32"), B: T.Tensor((4, 64, 64), "float32")):
        with T.Kernel(1, threads=128):
            X = T.alloc_shared((64, 64), "float32")
            Y = T.alloc_shared((64, 64), "float32")
            for t in T.serial(4):
                T.copy(A[t, 0, 0], X)
                for i, j in T.Parallel(64, 64):
                    B[t, i, j] = X[j, i] + Y[i, j]
                T.copy(A[t, 0, 0], Y)
    _, ctx = run_passes(f, "plan_shared", SM80)
    r = _ranges(ctx)
    assert not _overlap(r["X"], r["Y"])


@pytest.mark.parametrize("M,N,K", [(1000, 1000, 200), (257, 136, 40)])
def test_interpreter_results_unchanged(M, N, K):
    torch.manual_seed(M)
    a = torch.randn(M, K).half()
    b = torch.randn(K, N).half()
    ref = (a.double() @ b.double()).half()
    for f in (gemm(M, N, K), persistent(M, N, K)):
        kern = tilelang.compile(f, out_idx=[2], target="cpu")
        out = kern(a, b)
        np.testing.assert_allclose(out.float().numpy(), ref.float().numpy(), rtol=2e-3,
                                   atol=2e-2)


@requires_compiler
@pytest.mark.parametrize("target", [SM80, SM90])
def test_staged_kernels_compile_without_spills(target):
    for f in (gemm(1000, 1000, 512, 128, 256, 64, 3, 256), gemm(4096, 4096, 4096, 256, 128,
                                                                  64, 3, 256),
              persistent(1000, 1000, 96)):
        k = tilelang.compile(f, out_idx=[2], target=target)
        assert "_epi" in k.get_kernel_source()
        assert k.n_spills == 0


@pytest.mark.skipif(toolkit.nvrtc_backend() is None, reason="NVRTC is not installed")
def test_tma_store_into_a_workspace_has_a_host_source():
    """A staged epilogue into a `T.alloc_global` workspace gets its tensor map from the
    workspace allocated for the call (it used to fail: 'not over a parameter')."""
    M = N = 128

    @T.prim_func
    def main(A: T.Tensor((M, 64), "float16"), B: T.Tensor((64, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        W = T.alloc_global((M, N), "float32")
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, 64), "float16")
            B_s = T.alloc_shared((64, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            for k in T.Pipelined(1, num_stages=1):
                T.copy(A[0, 0], A_s)
                T.copy(B[0, 0], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, W[0, 0])
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(M, N):
                C[i, j] = W[i, j]

    kernel = tilelang.compile(main, target="cuda -arch=sm_90a")
    assert "tl::tma_store((&W_store_desc)" in kernel.get_kernel_source()
    assert any(index < 0 for index, _ in kernel.adapter.tma_sources)
