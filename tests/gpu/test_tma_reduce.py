"""`T.atomic_add(G[region], S, use_tma=True)` on the GPU (sm_90a): the TMA unit's reductions
add every element once, clip ragged edges, and race correctly when many blocks add into the
same tile; results match torch and the element-wise atomics."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "transform"))
from tma_reduce_kernels import (add_each_step, add_then_read, all_into_one,  # noqa: E402
                                cluster_split_k, fragment_split_k, scaled_add)

from .hopper import need_sm90  # noqa: E402

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@pytest.mark.parametrize("M,N", [(200, 392), (64, 128), (1000, 1000)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("swizzle", [True, False])
def test_scaled_add_matches_torch(M, N, dtype, swizzle):
    need_sm90()
    torch.manual_seed(M + N)
    t = DTYPES[dtype]
    x = torch.randn(M, N, device="cuda", dtype=t)
    y0 = torch.randn(M, N, device="cuda", dtype=t)
    kern = tilelang.compile(scaled_add(M, N, dtype=dtype, swizzle=swizzle), target="cuda")
    assert "tma_store_add" in kern.get_kernel_source()
    y = y0.clone()
    kern(x, y)
    torch.cuda.synchronize()
    ref = y0.double() + 2 * x.double()
    if dtype == "float32":
        assert torch.equal(y, y0 + 2 * x)
    else:  # one rounding of the sum to the storage type
        torch.testing.assert_close(y.double(), ref, rtol=1e-2, atol=1e-2)
    plain = tilelang.compile(scaled_add(M, N, dtype=dtype, swizzle=swizzle, use_tma=False),
                             target="cuda")
    y2 = y0.clone()
    plain(x, y2)
    torch.cuda.synchronize()
    assert torch.equal(y, y2)


@pytest.mark.parametrize("M,N", [(200, 392), (64, 128)])
@pytest.mark.parametrize("dtype", ["int32", "uint32", "uint64"])
@pytest.mark.parametrize("swizzle", [True, False])
def test_integer_adds_match_torch(M, N, dtype, swizzle):
    """The TMA unit's integer adds (.s32, .u32, .u64): exact, wrapping as unsigned adds do."""
    need_sm90()
    gen = torch.Generator().manual_seed(M * N)
    t = getattr(torch, dtype)
    hi = 1 << 20 if dtype == "int32" else 1 << 31
    x = torch.randint(-hi if dtype == "int32" else 0, hi, (M, N), generator=gen).to(t).cuda()
    y0 = torch.randint(0, hi, (M, N), generator=gen).to(t).cuda()
    kern = tilelang.compile(scaled_add(M, N, dtype=dtype, swizzle=swizzle), target="cuda")
    assert "tma_store_add" in kern.get_kernel_source()
    y = y0.clone()
    kern(x, y)
    torch.cuda.synchronize()
    want = (y0.cpu().to(torch.int64) + 2 * x.cpu().to(torch.int64))
    if dtype == "uint32":
        want = want % (1 << 32)
    assert torch.equal(y.cpu().to(torch.int64), want)


@pytest.mark.parametrize("blocks", [1, 37, 300])
def test_many_blocks_into_one_tile(blocks):
    need_sm90()
    torch.manual_seed(blocks)
    xs = torch.randn(blocks, 32, 64, device="cuda")
    acc = torch.randn(32, 64, device="cuda")
    ref = acc.double() + 3 * xs.double().sum(0)
    kern = tilelang.compile(all_into_one(32, 64, blocks), target="cuda")
    assert "tma_store_add" in kern.get_kernel_source()
    kern(xs, acc)
    torch.cuda.synchronize()
    torch.testing.assert_close(acc.double(), ref, rtol=1e-5, atol=1e-4 * blocks ** 0.5)


def test_sums_read_back_in_the_same_kernel():
    need_sm90()
    torch.manual_seed(5)
    x, y = torch.randn(16, 64, device="cuda"), torch.randn(16, 64, device="cuda")
    want = y + 2 * x
    z = torch.full_like(x, float("nan"))
    kern = tilelang.compile(add_then_read(16, 64), target="cuda")
    assert "tma_store_wait_complete" in kern.get_kernel_source()
    kern(x, y, z)
    torch.cuda.synchronize()
    assert torch.equal(y, want) and torch.equal(z, want)


@pytest.mark.parametrize("read_after", [False, True])
@pytest.mark.parametrize("deferred", [True, False])
def test_each_step_through_one_tile(read_after, deferred):
    """The same shared tile rewritten every step after a TMA reduction read it, with the
    issuing thread's wait deferred to the next step's first barrier (or not): every step's
    sums exact, and the tile read after the loop is the last step's."""
    need_sm90()
    torch.manual_seed(11 + read_after)
    steps, M, N = 9, 64, 128
    x = torch.randn(steps, M, N, device="cuda")
    y0 = torch.randn(steps, M, N, device="cuda")
    configs = {} if deferred else {"tl.disable_deferred_store_wait": True}
    kern = tilelang.compile(add_each_step(M, N, steps, read_after=read_after), target="cuda",
                            pass_configs=configs)
    assert "tma_store_add" in kern.get_kernel_source()
    y, z = y0.clone(), torch.full((M, N), float("nan"), device="cuda")
    kern(x, y, z)
    torch.cuda.synchronize()
    assert torch.equal(y, y0 + 2 * x.flip(1))
    if read_after:
        assert torch.equal(z, 2 * x[-1].flip(0))


@pytest.mark.parametrize("split,axis,use_tma", [(2, "z", True), (4, "z", True), (2, "x", True),
                                                (2, "z", False), (4, "x", False)])
@pytest.mark.parametrize("M,N,K", [(200, 136, 256), (1000, 1000, 1000)])
def test_cluster_sum_split_k(split, axis, use_tma, M, N, K):
    """T.store_cluster_sum: the K slices of a tile form a cluster; the output starts as NaN
    every run, so only the first block's store, ordered before the others' adds, gives the
    product (three runs, fresh inputs each)."""
    need_sm90()
    kern = tilelang.compile(cluster_split_k(M, N, K, split, axis, use_tma=use_tma),
                            target="cuda")
    assert ("tma_store_add" in kern.get_kernel_source()) == use_tma
    for run in range(3):
        torch.manual_seed(run)
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
        kern(a, b, c)
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        assert not torch.isnan(c).any(), run
        assert ((c.double() - ref).abs().max() / ref.abs().max()).item() < 2e-3, run


@pytest.mark.parametrize("M,splits", [(200, 2), (64, 4), (1000, 3)])
@pytest.mark.parametrize("tile_form", [False, True])
def test_staged_fragment_adds_match_torch(M, splits, tile_form):
    """transform/stage_fragment_atomics.py: the
    gemm's partial products staged in shared memory and added by the TMA unit, several blocks
    racing into each tile, ragged last tile."""
    need_sm90()
    torch.manual_seed(M + splits)
    N, K = 64, 128 * splits * 2
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    g0 = torch.randn(M, N, device="cuda")
    kern = tilelang.compile(fragment_split_k(M, N, K, splits=splits, tile_form=tile_form),
                            target="cuda")
    assert "tma_store_add" in kern.get_kernel_source()
    g = g0.clone()
    kern(a, b, g)
    torch.cuda.synchronize()
    ref = g0.double() + a.double() @ b.double()
    torch.testing.assert_close(g.double(), ref, rtol=1e-3, atol=1e-2)
