"""User-synchronised kernels on the GPU against torch, fresh random inputs, outputs poisoned:
T.tma_copy with mbarriers in T.ws roles and thread-range branches (sm_90), T.ptx_cp_async with
commit/wait and with cp.async mbarrier arrivals, thread all-reductions, reducers."""

import pytest
import torch

import tilelang

from . import role_kernels as R

pytestmark = pytest.mark.gpu


def _sm90():
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA and mbarrier try_wait need sm_90")


def _poisoned(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


@pytest.mark.parametrize("M,N,K", [(1024, 1024, 1024), (200, 136, 72), (333, 520, 264)])
@pytest.mark.parametrize("producer", [0, 1])
def test_ws_gemm(M, N, K, producer):
    _sm90()
    k = tilelang.compile(R.ws_gemm(M, N, K, producer=producer), target="cuda")
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = _poisoned(M, N, dtype=torch.float16)
    k(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("M,N,K,stages", [(1024, 1024, 1024, 2), (256, 384, 704, 3)])
def test_ws_gemm_ring(M, N, K, stages):
    _sm90()
    k = tilelang.compile(R.ws_gemm_stages(M, N, K, stages=stages), target="cuda")
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = _poisoned(M, N, dtype=torch.float16)
    k(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("M", [64, 300, 1000])
def test_thread_range_branches(M):
    _sm90()
    k = tilelang.compile(R.branch_roles(M, 64), target="cuda")
    x = torch.randn(M, 64, device="cuda")
    out = _poisoned(M)
    k(x, out)
    torch.testing.assert_close(out, 2 * x.sum(1) + 1, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("M,K", [(37, 1024), (8, 256)])
def test_per_warp_tma(M, K):
    _sm90()
    k = tilelang.compile(R.per_warp_rows(M, K), target="cuda")
    a = torch.randn(M, K, device="cuda")
    out = _poisoned(M)
    k(a, out)
    torch.testing.assert_close(out, a[:, 0] + a[:, -1])


@pytest.mark.parametrize("M,N", [(100, 132), (256, 256)])
def test_tma_store(M, N):
    _sm90()
    k = tilelang.compile(R.tma_store(M, N), target="cuda")
    x = torch.randn(M, N, device="cuda")
    y = _poisoned(M, N)
    k(x, y)
    torch.testing.assert_close(y, 3 * x)


@pytest.mark.parametrize("M", [16, 112])
def test_cp_async_rows(M):
    k = tilelang.compile(R.cp_async_rows(M), target="cuda")
    a = torch.randn(M, 64, device="cuda", dtype=torch.float16)
    b = _poisoned(M, 64, dtype=torch.float16)
    k(a, b)
    expect = 2 * a
    expect.view(-1, 16, 64)[:, 15] = 0
    torch.testing.assert_close(b, expect)


@pytest.mark.parametrize("n,chunks", [(1500, 4), (70001, 8)])
def test_cp_async_mbarrier(n, chunks):
    _sm90()
    k = tilelang.compile(R.cp_async_mbarrier(n, chunks), target="cuda")
    a = torch.randn(n, device="cuda")
    b = _poisoned(n)
    k(a, b)
    torch.testing.assert_close(b, a + 1)


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("rows,R_", [(8, 4), (2, 32)])
def test_thread_allreduce(op, rows, R_):
    k = tilelang.compile(R.thread_allreduce(rows, R_, "float32", op, K=256), target="cuda")
    a = torch.randn(rows, 256, device="cuda")
    out = _poisoned(rows)
    k(a, out)
    expect = a.sum(1) if op == "sum" else a.max(1).values
    torch.testing.assert_close(out, expect, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("M,N,op", [(1024, 1024, "sum"), (100, 200, "sum"), (130, 72, "max")])
def test_reducer_gemv(M, N, op):
    k = tilelang.compile(R.reducer_gemv(M, N, op=op), target="cuda")
    a = torch.randn(M, N, device="cuda", dtype=torch.float16)
    x = torch.randn(N, device="cuda", dtype=torch.float16)
    o = _poisoned(M)
    k(a, x, o)
    prod = (a * x).float()
    expect = prod.sum(1) if op == "sum" else prod.max(1).values
    torch.testing.assert_close(o, expect, rtol=1e-3, atol=2e-2)


@pytest.mark.parametrize("M,N,K", [(1024, 1024, 1024), (200, 264, 96)])
def test_block_level_tma_in_pipelined_loop(M, N, K):
    _sm90()
    k = tilelang.compile(R.block_tma_gemm(M, N, K), target="cuda")
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = _poisoned(M, N, dtype=torch.float16)
    k(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)
