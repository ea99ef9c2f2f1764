"""plan_shared_memory: every shared tile gets a byte range of one dynamic arena; tiles whose
lifetimes are disjoint may share bytes, tiles live at the same time never do (a use inside a
loop keeps a tile live for the whole loop); swizzled tiles are 1024-byte aligned, the others
128-byte; accesses become flat physical offsets; the per-arch limit is a located error."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.ir import nodes as ir
from tilelang.runtime import compile_cuda
from tilelang.transform.analysis.numeric import eval_index
from tilelang.transform.pass_config import PassConfigKey

from transform_helpers import (SM80, SM90, gemm_with_epilogue, nodes, requires_compiler,
                               requires_gpu, run_passes, two_phases)


def _ranges(ctx):
    return {b.name: (off, off + b.numel() * b.dtype.bytes) for b, off in ctx.shared_plan.items()}


def _overlap(a, b):
    return a[0] < b[1] and b[0] < a[1]


_phases = two_phases


def test_disjoint_lifetimes_share_memory():
    _, ctx = run_passes(_phases(False), "plan_shared", SM80)
    r = _ranges(ctx)
    assert _overlap(r["X"], r["Y"])
    assert ctx.smem_bytes == 64 * 64 * 4


def test_tiles_used_in_one_loop_body_never_overlap():
    # Y is used after X in iteration t, and X again in iteration t + 1: both live throughout
    _, ctx = run_passes(_phases(True), "plan_shared", SM80)
    r = _ranges(ctx)
    assert not _overlap(r["X"], r["Y"])
    assert ctx.smem_bytes == 2 * 64 * 64 * 4


AGGRESSIVE = {PassConfigKey.TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE: True}


def test_aggressive_merge_shares_tiles_of_one_iteration():
    """With the reference's aggressive merge the user promises no tile carries a value into
    the next iteration: X (read before Y is filled) and Y share bytes."""
    _, ctx = run_passes(_phases(True), "plan_shared", SM80, AGGRESSIVE)
    r = _ranges(ctx)
    assert _overlap(r["X"], r["Y"])
    assert ctx.smem_bytes == 64 * 64 * 4


def _carried_into_loop():
    @T.prim_func
    def f(A: T.Tensor((4, 64, 64), "float32"), B: T.Tensor((4, 64, 64), "float32")):
        with T.Kernel(1, threads=128):
            Q = T.alloc_shared((64, 64), "float32")
            X = T.alloc_shared((64, 64), "float32")
            T.copy(A[3, 0, 0], Q)
            for t in T.serial(3):
                T.copy(A[t, 0, 0], X)
                for i, j in T.Parallel(64, 64):
                    B[t, i, j] = X[j, i] + Q[i, j]
    return f


def test_aggressive_merge_keeps_a_tile_loaded_before_the_loop():
    _, ctx = run_passes(_carried_into_loop(), "plan_shared", SM80, AGGRESSIVE)
    r = _ranges(ctx)
    assert not _overlap(r["Q"], r["X"])


@requires_gpu
def test_aggressive_merge_orders_the_reuse_on_the_gpu():
    import torch

    kernel = tilelang.compile(_phases(True), target="cuda", pass_configs=AGGRESSIVE)
    for seed in range(3):
        A = torch.randn(4, 64, 64, generator=torch.Generator().manual_seed(seed)).cuda()
        B = torch.full((4, 64, 64), float("nan"), device="cuda")
        kernel(A, B)
        torch.testing.assert_close(B, 2 * A.transpose(1, 2))


_gemm_with_epilogue = gemm_with_epilogue


def test_alignment_and_pipelined_stages_live_together():
    k, ctx = run_passes(_gemm_with_epilogue(), "plan_shared", SM80)
    r = _ranges(ctx)
    assert set(r) == {"As", "Bs", "Cs"}
    swizzled = {b.name for b, lay in ctx.layouts.items()
                if getattr(lay, "swizzle_bytes", None) and b.scope.startswith("shared")}
    assert {"As", "Bs"} <= swizzled
    for name, (lo, _) in r.items():
        assert lo % (1024 if name in swizzled else 128) == 0, (name, lo)
    # the stages of A and B are live together (3 stages each, one allocation per operand)
    assert r["As"][1] - r["As"][0] == 3 * 128 * 32 * 2
    assert not _overlap(r["As"], r["Bs"])
    # the epilogue tile starts after the loop: it may reuse the stages' bytes
    assert ctx.smem_bytes == max(hi for _, hi in r.values())
    assert ctx.smem_bytes < sum(hi - lo for lo, hi in r.values())


def test_accesses_are_flat_physical_offsets():
    k, ctx = run_passes(_gemm_with_epilogue(), "plan_shared", SM80)
    shared = nodes(k, (ir.Load, ir.Store), lambda n: n.buffer.scope.startswith("shared"))
    assert shared and all(len(n.buffer.shape) == 1 and len(n.indices) == 1 for n in shared)
    assert all(b.scope not in ("shared", "shared.dyn") for b in k.allocs)


def test_physical_offsets_follow_the_layout():
    @T.prim_func
    def f(A: T.Tensor((32, 32), "float32"), B: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((32, 32), "float32")
            T.annotate_layout({S: tilelang.layout.make_padded_layout((32, 32), 1)})
            for i, j in T.Parallel(32, 32):
                S[i, j] = A[i, j] * 2.0
            for i, j in T.Parallel(32, 32):
                B[i, j] = S[j, i]

    scalar = {PassConfigKey.TIR_DISABLE_VECTORIZE: True}
    logical, lctx = run_passes(f, "guard_global", SM80, scalar)
    flat, fctx = run_passes(f, "plan_shared", SM80, scalar)
    (store,) = nodes(flat, ir.Store, lambda s: s.buffer.name == "S")
    assert store.buffer.shape == (32 * 33,)
    (lstore,) = nodes(logical, ir.Store, lambda s: s.buffer.name == "S")
    # same statement before and after: offset == i * 33 + j for the thread's (i, j)
    (loop,) = [s for s in nodes(flat, ir.For, lambda s: s.annotation("partitioned"))
               if nodes(s, ir.Store, lambda st: st.buffer.name == "S")]
    (lloop,) = [s for s in nodes(logical, ir.For, lambda s: s.annotation("partitioned"))
                if nodes(s, ir.Store, lambda st: st.buffer.name == "S")]
    tx, ltx = fctx.kernel.thread_vars[0], lctx.kernel.thread_vars[0]
    t = np.arange(128)[:, None]
    v = np.arange(loop.extent.value)[None, :]
    off = eval_index(store.indices[0], {tx: t, loop.var: v})
    i, j = (eval_index(x, {ltx: t, lloop.var: v}) for x in lstore.indices)
    np.testing.assert_array_equal(off, i * 33 + j)


def _big(kbytes):
    @T.prim_func
    def f(A: T.Tensor((kbytes * 256,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((kbytes * 256,), "float32")
            T.copy(A, S)
            for i in T.Parallel(kbytes * 256):
                A[i] = S[kbytes * 256 - 1 - i]
    return f


def test_limit_depends_on_the_architecture():
    run_passes(_big(120), "plan_shared", SM80)       # 120 KiB: fine on sm_80 (163 KiB)
    run_passes(_big(200), "plan_shared", SM90)       # and 200 KiB on sm_90 (227 KiB)
    with pytest.raises(KernelError, match="shared memory") as info:
        run_passes(_big(120), "plan_shared", "cuda -arch=sm_86")  # 99 KiB
    assert "122880" in str(info.value) and info.value.loc is not None


@requires_compiler
def test_planned_kernel_compiles():
    compile_cuda(tilelang.lower(_gemm_with_epilogue(), target=SM80), "sm_80", name="planned")
