"""Asynchronous gathers (transform/partition_parallel/async_gather.py, pipeline.py, partition_parallel/__init__.py): a
`T.Parallel` load of global data into a shared tile inside `T.Pipelined` that is not a window
(an im2col tile, strided rows) becomes a producer stage issued with cp.async + zero-fill, in
the widest width the analysis proves.

The schedule the passes emit is executed for every thread (numpy) on random inputs: each
cp.async chunk (destination, source, byte count) lands in a simulated shared tile, and every
gemm must see exactly the tile the synchronous gather computes for its iteration (zeros for
padding, ragged edges and rows past the tensor)."""

import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.runtime import compile_cuda
from tilelang.transform.analysis.numeric import eval_index

from transform_helpers import SM80, SM90, externs, nodes, requires_compiler, run_passes


def conv(N, C, H, W, F, KH, KW, stride=1, pad=0, dil=1, BM=64, BN=64, BK=32, stages=3,
         threads=128, dtype="float16"):
    OH = (H + 2 * pad - dil * (KH - 1) - 1) // stride + 1
    OW = (W + 2 * pad - dil * (KW - 1) - 1) // stride + 1
    M, K = N * OH * OW, KH * KW * C

    @T.prim_func
    def f(data: T.Tensor((N, H, W, C), dtype), weight: T.Tensor((K, F), dtype),
          out: T.Tensor((M, F), "float32")):
        with T.Kernel(T.ceildiv(F, BN), T.ceildiv(M, BM), threads=threads) as (bx, by):
            A = T.alloc_shared((BM, BK), dtype)
            B = T.alloc_shared((BK, BN), dtype)
            acc = T.alloc_fragment((BM, BN), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, BK), num_stages=stages):
                for i, j in T.Parallel(BM, BK):
                    m = by * BM + i
                    k = ko * BK + j
                    n, oh, ow = m // (OH * OW), m % (OH * OW) // OW, m % OW
                    kh, kw, c = k // (KW * C), k % (KW * C) // C, k % C
                    ih = oh * stride + kh * dil - pad
                    iw = ow * stride + kw * dil - pad
                    inside = (m < M) and (k < K) and (ih >= 0) and (ih < H) and (iw >= 0) and \
                        (iw < W)
                    A[i, j] = T.if_then_else(inside, data[n, ih, iw, c], 0)
                T.copy(weight[ko * BK, bx * BN], B)
                T.gemm(A, B, acc)
            T.copy(acc, out[by * BM, bx * BN])

    def expected(x, by, ko):
        """The synchronous gather's tile for block row `by`, iteration `ko` (numpy)."""
        i, j = np.meshgrid(np.arange(BM), np.arange(BK), indexing="ij")
        m, k = by * BM + i, ko * BK + j
        n, oh, ow = m // (OH * OW), m % (OH * OW) // OW, m % OW
        kh, kw, c = k // (KW * C), k % (KW * C) // C, k % C
        ih, iw = oh * stride + kh * dil - pad, ow * stride + kw * dil - pad
        inside = (m < M) & (k < K) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        safe = [np.where(inside, a, 0) for a in (n, ih, iw, c)]
        return np.where(inside, x[tuple(safe)], 0.0)

    return f, dict(grid_y=-(-M // BM), shape=(N, H, W, C), expected=expected, name="A")


def strided_rows(R, Kd, step, BM=64, BK=32, stages=3, dtype="float16", threads=128):
    """S[i, j] = X[(by*BM + i) * step, ko*BK + j]: rows past R and columns past Kd read 0."""
    nrows = -(-R // step)

    @T.prim_func
    def f(X: T.Tensor((R, Kd), dtype), Wt: T.Tensor((Kd, 64), dtype),
          out: T.Tensor((nrows, 64), "float32")):
        with T.Kernel(1, T.ceildiv(nrows, BM), threads=threads) as (bx, by):
            A = T.alloc_shared((BM, BK), dtype)
            B = T.alloc_shared((BK, 64), dtype)
            acc = T.alloc_fragment((BM, 64), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(Kd, BK), num_stages=stages):
                for i, j in T.Parallel(BM, BK):
                    A[i, j] = X[(by * BM + i) * step, ko * BK + j]
                T.copy(Wt[ko * BK, 0], B)
                T.gemm(A, B, acc)
            T.copy(acc, out[by * BM, 0])

    def expected(x, by, ko):
        i, j = np.meshgrid(np.arange(BM), np.arange(BK), indexing="ij")
        r, c = (by * BM + i) * step, ko * BK + j
        ok = (r < R) & (c < Kd)
        return np.where(ok, x[np.where(ok, r, 0), np.where(ok, c, 0)], 0.0)

    return f, dict(grid_y=-(-nrows // BM), shape=(R, Kd), expected=expected, name="A")


# ---- executing the thread IR ------------------------------------------------------------------

def _simulate(func, info, target=SM80, seed=0):
    """Run the issued cp.async chunks of every thread into a simulated stacked tile; at every
    gemm compare the stage it reads with the synchronous gather of that iteration. Returns
    (number of gemms checked, widths used)."""
    k, ctx = run_passes(func, "guard_global", target=target)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(info["shape"])
    flat = x.reshape(-1)
    strides = np.array([int(np.prod(info["shape"][d + 1:])) for d in range(len(info["shape"]))])
    nthreads = ctx.num_threads
    tx = k.thread_vars[0]
    bx, by = k.block_vars
    stacked = [b for b in k.allocs if b.name == info["name"]]
    assert stacked and len(stacked[0].shape) == 3, "the gathered tile is not multi-buffered"
    buf = stacked[0]
    checked, widths = 0, set()
    for row in range(info["grid_y"]):
        mem = np.full(buf.shape, np.nan)
        env0 = {bx: 0, by: row, tx: np.arange(nthreads)}

        def walk(s, env, mask):
            nonlocal checked
            if isinstance(s, ir.Seq):
                for x_ in s.stmts:
                    walk(x_, env, mask)
            elif isinstance(s, (ir.Allocate, ir.Attr)):
                walk(s.body, env, mask)
            elif isinstance(s, ir.LetStmt):
                try:
                    val = eval_index(s.value, env)
                except (TypeError, KeyError):
                    val = None  # a float let of the epilogue: not an index
                walk(s.body, {**env, s.var: val}, mask)
            elif isinstance(s, ir.For):
                start, n = eval_index(s.start, env), eval_index(s.extent, env)
                for i in range(int(start), int(start) + int(n)):
                    walk(s.body, {**env, s.var: i}, mask)
            elif isinstance(s, ir.If):
                try:
                    c = np.broadcast_to(eval_index(s.cond, env), (nthreads,))
                except (TypeError, KeyError):
                    return  # the epilogue's bounds checks
                walk(s.then_body, env, mask & c)
                if s.else_body is not None:
                    walk(s.else_body, env, mask & ~c)
            elif isinstance(s, ir.Store) and s.buffer is buf:
                raise AssertionError("the gather was left synchronous")
            elif isinstance(s, ir.Evaluate) and isinstance(s.value, ir.Call) and \
                    s.value.op == "call_extern":
                call = s.value
                name = call.args[0]
                m = re.match(r"tl::cp_async(_zfill)?<(\d+)>", name)
                if m and call.args[1].args[0].buffer is buf:
                    assert dict(call.attrs).get("async"), "gather cp.async not marked async"
                    dst, src = call.args[1].args[0], call.args[2].args[0]
                    w = int(m.group(2)) // buf.dtype.bytes
                    widths.add(int(m.group(2)))
                    nb = np.broadcast_to(eval_index(call.args[3], env) if m.group(1) else
                                         int(m.group(2)), (nthreads,)) // buf.dtype.bytes
                    d = [np.broadcast_to(eval_index(i, env), (nthreads,)) for i in dst.indices]
                    off = sum(np.broadcast_to(eval_index(i, env), (nthreads,)) * st
                              for i, st in zip(src.indices, strides))
                    for t in np.nonzero(mask)[0]:
                        for e in range(w):
                            v = flat[off[t] + e] if e < nb[t] else 0.0
                            mem[d[0][t], d[1][t], d[2][t] + e] = v
                elif name.startswith(("tl::gemm", "tl::wgmma_gemm")):
                    stage = eval_index(call.args[1].args[0].indices[0], env)
                    ko = env[[v for v in env if v.name == "ko"][0]]
                    np.testing.assert_array_equal(mem[stage], info["expected"](x, row, ko),
                                                  err_msg=f"block row {row}, iteration {ko}")
                    checked += 1

        walk(k.body, env0, np.ones(nthreads, bool))
    return checked, widths


CONV_CASES = [
    # N, C, H, W, F, KH, KW, stride, pad, dil, BK, stages: 16-byte vectors, ragged M and K
    (2, 16, 9, 11, 24, 3, 3, 1, 1, 1, 32, 3),
    (3, 8, 10, 7, 16, 3, 3, 2, 1, 2, 32, 2),    # stride and dilation, C = 8
    (1, 24, 6, 5, 16, 2, 3, 1, 2, 1, 64, 4),    # padding wider than the filter reach
    (2, 4, 7, 9, 16, 3, 3, 1, 1, 1, 32, 3),     # C = 4: 8-byte copies
    (2, 2, 7, 5, 16, 3, 1, 2, 0, 1, 32, 2),     # C = 2: 4-byte copies
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_gather_lands_the_synchronous_tile(case):
    N, C, H, W, F, KH, KW, s, p, d, BK, stages = case
    func, info = conv(N, C, H, W, F, KH, KW, s, p, d, BK=BK, stages=stages)
    checked, widths = _simulate(func, info)
    assert checked > 0
    want = {16: 16, 8: 16, 24: 16, 4: 8, 2: 4}[C]
    assert widths == {want}


def test_conv_gather_fp32_uses_4_byte_copies_of_single_channels():
    func, info = conv(2, 3, 6, 7, 16, 3, 3, 1, 1, 1, BK=16, dtype="float32")
    checked, widths = _simulate(func, info)
    assert checked > 0 and widths == {4}


@pytest.mark.parametrize("R,Kd,step", [(200, 72, 3), (130, 40, 2), (64, 36, 1)])
def test_strided_rows_read_zero_past_the_tensor(R, Kd, step):
    func, info = strided_rows(R, Kd, step)
    checked, widths = _simulate(func, info)
    assert checked > 0
    assert widths == ({16} if Kd % 8 == 0 else {8})


def test_hopper_keeps_the_gather_async_and_does_not_warp_specialise():
    func, info = conv(2, 16, 9, 11, 64, 3, 3, 1, 1, 1, BM=64, BN=64, stages=3)
    checked, widths = _simulate(func, info, target=SM90)
    assert checked > 0 and widths == {16}
    k, ctx = run_passes(func, "simplify", target=SM90)
    # (a TMA store of the staged epilogue is fine: the loads are what must stay cp.async)
    loads = [d for d in ctx.tma_descriptors if not d.name.endswith("_store_desc")]
    assert not loads and not any(key == "warp_specialized" for key, _ in k.attrs)
    assert any("gathered by a T.Parallel loop" in n for n in ctx.notes)


def test_pipeline_issues_the_gather_as_a_producer_stage():
    func, _ = conv(2, 16, 9, 11, 24, 3, 3, 1, 1, 1, stages=3)
    k, ctx = run_passes(func, "pipeline")
    gathers = nodes(k, ir.For, lambda f: f.annotation("async_gather"))
    assert len(gathers) == 2  # the prologue and the steady state
    A = [b for b in k.allocs if b.name == "A"][0]
    assert A.shape == (3, 64, 32)
    assert any("1 of them gathers" in n for n in ctx.notes)
    k, _ = run_passes(func, "partition_parallel")
    names = externs(k, "tl::cp_async")
    assert names.count("tl::cp_async_zfill<16>") >= 4 and "tl::cp_async_wait<1>" in names


def _gather_kernel(body_kind, stages=3):
    @T.prim_func
    def f(X: T.Tensor((64, 64), "float16"), Y: T.Tensor((64, 64), "float16"),
          out: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A = T.alloc_shared((64, 32), "float16")
            B = T.alloc_shared((32, 64), "float16")
            idx = T.alloc_shared((64,), "int32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for ko in T.Pipelined(2, num_stages=stages):
                if body_kind == "indirect":
                    for i in T.Parallel(64):
                        idx[i] = (i * 7 + ko) % 64
                    for i, j in T.Parallel(64, 32):
                        A[i, j] = X[idx[i], ko * 32 + j]
                elif body_kind == "lane_predicate":
                    for i, j in T.Parallel(64, 32):
                        A[i, j] = T.if_then_else(j % 8 < 5, X[i * 2 % 64, ko * 32 + j], 0)
                else:
                    for i, j in T.Parallel(64, 32):
                        A[i, j] = X[i * 2 % 64, ko * 32 + j]
                T.copy(Y[ko * 32, 0], B)
                T.gemm(A, B, acc)
            T.copy(acc, out)

    return f


def _copies_into(k, buf):
    """cp.async calls whose destination is `buf`."""
    return [c for c in nodes(k, ir.Call, lambda c: c.op == "call_extern" and
                             c.args[0].startswith("tl::cp_async") and len(c.args) > 2)
            if c.args[1].args[0].buffer is buf]


def test_a_gather_through_memory_the_loop_writes_stays_synchronous():
    k, _ = run_passes(_gather_kernel("indirect"), "partition_parallel")
    assert not nodes(k, ir.For, lambda f: f.annotation("async_gather"))
    assert [b.shape for b in k.allocs if b.name == "A"] == [(64, 32)]


def test_a_predicate_that_differs_between_lanes_stays_synchronous_but_pipelined():
    k, ctx = run_passes(_gather_kernel("lane_predicate"), "partition_parallel")
    A = [b for b in k.allocs if b.name == "A"][0]
    assert A.shape == (3, 64, 32)  # still a producer stage, issued ahead
    assert not _copies_into(k, A)
    assert any("no provable cp.async width" in n for n in ctx.notes)


def test_safe_value_source_is_not_zero_filled():
    @T.prim_func
    def f(X: T.Tensor((64, 64), "float16"), Y: T.Tensor((64, 64), "float16"),
          out: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.annotate_safe_value({X: 1.0})
            A = T.alloc_shared((64, 32), "float16")
            B = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for ko in T.Pipelined(2, num_stages=3):
                for i, j in T.Parallel(64, 32):
                    A[i, j] = X[i * 2, ko * 32 + j]
                T.copy(Y[ko * 32, 0], B)
                T.gemm(A, B, acc)
            T.copy(acc, out)

    k, _ = run_passes(f, "pipeline")
    assert not nodes(k, ir.For, lambda f_: f_.annotation("async_gather"))


def test_unpipelined_gather_stays_synchronous():
    func, _ = conv(2, 16, 9, 11, 24, 3, 3, 1, 1, 1, stages=1)
    k, _ = run_passes(func, "partition_parallel")
    A = [b for b in k.allocs if b.name == "A"][0]
    assert A.shape == (64, 32) and not _copies_into(k, A)


@requires_compiler
@pytest.mark.parametrize("target,arch", [(SM80, "sm_80"), (SM90, "sm_90a")])
def test_generated_cuda_compiles_with_cp_async_gathers(target, arch):
    func, _ = conv(2, 16, 9, 11, 64, 3, 3, 1, 1, 1, stages=3)
    src = tilelang.lower(func, target=target)
    assert "data_vec" not in src  # no synchronous register staging of the gather
    assert len(re.findall(r"cp_async_zfill<16>\(\(&A\[", src)) == 2
    compile_cuda(src, arch, name="conv_gather")
