"""User-synchronised kernels on the GPU against torch, fresh random inputs, outputs poisoned:
T.tma_copy with mbarriers in T.ws roles and thread-range branches (sm_90), T.ptx_cp_async with
commit/wait and with cp.async mbarrier arrivals, thread all-reductions, reducers, tile
operations in roles of different thread ranges."""

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


@pytest.mark.parametrize("M,N,K,stages,producer", [(1024, 1024, 1024, 2, 1), (200, 136, 72, 2, 0),
                                                   (333, 520, 264, 3, 1), (64, 64, 64, 4, 1)])
def test_ws_gemm_in_pipelined_loop_with_stages(M, N, K, stages, producer):
    """The single-buffered user protocol under T.Pipelined(num_stages=S): tiles and barriers
    get S copies and the producer runs ahead (transform/pipeline.py, _RoleLoops)."""
    _sm90()
    k = tilelang.compile(R.ws_gemm(M, N, K, producer=producer, stages=stages), target="cuda")
    for _ in range(2):
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


@pytest.mark.parametrize("M", [200, 64])
def test_staged_halves_by_tma_store(M):
    _sm90()
    k = tilelang.compile(R.staged_halves(M), target="cuda")
    x = torch.randn(M, 128, device="cuda", dtype=torch.float16)
    out = _poisoned(M, 128, dtype=torch.float16)
    k(x, out)
    expect = torch.cat([x[:, :64].float() * 2, x[:, 64:].float() + 1], 1).half()
    torch.testing.assert_close(out, expect)


@pytest.mark.parametrize("M", [16, 112])
def test_cp_async_rows(M):
    k = tilelang.compile(R.cp_async_rows(M), target="cuda")
    a = torch.randn(M, 64, device="cuda", dtype=torch.float16)
    b = _poisoned(M, 64, dtype=torch.float16)
    k(a, b)
    expect = 2 * a
    expect.view(-1, 16, 64)[:, 15] = 0
    torch.testing.assert_close(b, expect)


@pytest.mark.parametrize("rows_kv", [257, 1000])
def test_cp_async_gather(rows_kv):
    k = tilelang.compile(R.cp_async_gather(rows_kv), target="cuda")
    kv = torch.randn(rows_kv, 576, device="cuda", dtype=torch.bfloat16)
    idx = torch.randint(0, rows_kv, (256,), device="cuda", dtype=torch.int32)
    out = _poisoned(256, 576, dtype=torch.bfloat16)
    k(kv, idx, out)
    assert torch.equal(out, kv[idx.long()])


@pytest.mark.parametrize("n,chunks", [(1500, 4), (70001, 8)])
def test_cp_async_mbarrier(n, chunks):
    _sm90()
    k = tilelang.compile(R.cp_async_mbarrier(n, chunks), target="cuda")
    a = torch.randn(n, device="cuda")
    b = _poisoned(n)
    k(a, b)
    torch.testing.assert_close(b, a + 1)


@pytest.mark.parametrize("over_x", [False, True], ids=["over_y", "over_lanes"])
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("rows,R_", [(8, 4), (2, 32), (3, 16)])
def test_thread_allreduce(op, rows, R_, over_x):
    # over_lanes: threadIdx.x reduced by warp shuffles
    k = tilelang.compile(R.thread_allreduce(rows, R_, "float32", op, K=256, over_x=over_x),
                         target="cuda")
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


# ---- tile operations in roles of different thread ranges ------------------------------------

@pytest.mark.parametrize("y_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("M,H", [(7, 300), (64, 1024)])
def test_a_warp_and_two_warps(M, H, y_dtype):
    # bfloat16: Y converted by the 64-thread role as it is copied into its float32 tile
    k = tilelang.compile(R.two_sized_roles(M, H, y_dtype=y_dtype), target="cuda")
    X = torch.randn(M, 16, 8, device="cuda")
    Y = torch.randn(M, 4, H, device="cuda").to(getattr(torch, y_dtype))
    out0, out1 = _poisoned(M, 4, 4), _poisoned(M, H)
    k(X, Y, out0, out1)
    w = 2 * X.sum(2)
    torch.testing.assert_close(out0, torch.softmax(w.view(M, 4, 4), -1))
    torch.testing.assert_close(out1, (w[:, :4, None] * Y.float()).sum(1), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("reduce_threads", [128, 64])
@pytest.mark.parametrize("M,N,K", [(100, 72, 96), (512, 256, 320)])
def test_gemm_and_reduce_roles(M, N, K, reduce_threads):
    bm = 64
    k = tilelang.compile(R.gemm_and_reduce_roles(M, N, K, bm=bm, reduce_threads=reduce_threads),
                         target="cuda")
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    r = torch.randn(M, N, device="cuda")
    tiles = (M + bm - 1) // bm
    c, s, cm = _poisoned(M, N), _poisoned(M, N), _poisoned(tiles, N)
    k(a, b, r, c, s, cm)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=2e-2)
    padded = torch.zeros(tiles * bm, N, device="cuda")
    padded[:M] = r  # the last tile's rows past M read as zeros
    colmax = padded.view(tiles, bm, N).amax(1)
    torch.testing.assert_close(cm, colmax)
    torch.testing.assert_close(s, r * 3 - colmax.repeat_interleave(bm, 0)[:M])


@pytest.mark.parametrize("N", [200, 4096])
def test_ws_roles_with_tile_operations(N):
    k = tilelang.compile(R.ws_tile_roles(N), target="cuda")
    A, B = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    OA, OB = _poisoned(N), _poisoned(N)
    k(A, B, OA, OB)
    torch.testing.assert_close(OA, A + 2)
    torch.testing.assert_close(OB, 3 * B)


@pytest.mark.parametrize("M,N,K", [(100, 200, 200), (1024, 1024, 1024)])
def test_two_consumers_and_a_producer(M, N, K):
    _sm90()
    k = tilelang.compile(R.split_consumer_gemm(M, N, K), target="cuda")
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = _poisoned(M, N)
    k(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=2e-2)


@pytest.mark.parametrize("M", [64, 200])
def test_tma_slices_at_run_time_offsets(M):
    _sm90()
    k = tilelang.compile(R.sliced_tma_gemm(M, 64, 256), target="cuda")
    a = torch.randn(M, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 256, device="cuda", dtype=torch.float16)
    c = _poisoned(M, 64)
    k(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-3, atol=2e-2)


@pytest.mark.parametrize("M", [64, 200, 333])
def test_handover_through_shared_with_only_the_proxy_fences_needed(M):
    """Arrivals after generic accesses of memory no async-proxy operation touches go
    unfenced, as do the barriers after nothing but wgmma (transform/insert_sync.py,
    _ProxyFences); the fenced handover of the gemm operand must still be seen by wgmma."""
    _sm90()
    k = tilelang.compile(R.handover_through_shared(M), target="cuda")
    for _ in range(2):
        a = torch.randn(M, 64, device="cuda", dtype=torch.float16)
        b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
        c = _poisoned(M, 64)
        k(a, b, c)
        torch.testing.assert_close(c, 3 * (a.float() @ b.float().T), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("M", [64, 200, 333])
def test_cp_async_gather_into_wgmma(M):
    """Rows gathered by another warpgroup's cp.async (completion = the arrival), read by
    wgmma after the consumer's wait and proxy fence; out-of-range indices give zero rows."""
    _sm90()
    k = tilelang.compile(R.cp_async_gather_gemm(M), target="cuda")
    for _ in range(2):
        a = torch.randn(M, 64, device="cuda", dtype=torch.float16)
        b = torch.randn(128, 64, device="cuda", dtype=torch.float16)
        idx = torch.randint(0, 140, (4, 64), device="cuda", dtype=torch.int32)
        c = _poisoned(M, 64)
        k(a, b, idx, c)
        rows = torch.cat([b.float(), torch.zeros(12, 64, device="cuda")])
        ref = sum(a.float() @ rows[idx[s].long()].T for s in range(4))
        torch.testing.assert_close(c, ref, rtol=1e-2, atol=5e-2)
