"""lower_copies: a global->shared T.copy becomes per-thread V-element chunk copies (cp.async
on sm_80+, predicated vector loads before), chunk c of the tile on thread c % T, elements past
the tensor zero-filled through the cp.async src-size; V is the widest width (16/8/4 bytes) the
row stride, the region start and the shared layout allow, and V = 1 is an element loop.

The chunk copies are enumerated for every thread (numpy) and checked against the tile."""

import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.runtime import compile_cuda
from tilelang.transform.analysis.numeric import eval_index
from tilelang.transform.pass_config import PassConfigKey

from transform_helpers import (SM80, SM90, externs, nodes, requires_compiler, requires_gpu,
                               run_passes, show)


def _copy_kernel(M, N, r0, c0, tm=64, tn=64, dtype="float16", threads=128):
    @T.prim_func
    def f(A: T.Tensor((M, N), dtype), B: T.Tensor((tm, tn), dtype)):
        with T.Kernel(1, threads=threads):
            S = T.alloc_shared((tm, tn), dtype)
            T.copy(A[r0, c0], S)
            for i, j in T.Parallel(tm, tn):
                B[i, j] = S[i, j] + S[tm - 1 - i, j]   # read by other threads
    return f


def _chunk_copies(k, ctx):
    return _chunk_copies_at(k, ctx, {})


_FLOAT_VECTOR_BYTES = {"float": 4, "float2": 8, "float4": 16}  # tl::copy_vec<float4>


def _chunk_copies_at(k, ctx, bindings):
    """Every chunk copy the threads issue: dicts of arrays over the threads (one per trip)
    with the destination / source coordinates, the width, the byte count and an active
    mask; `bindings` gives block indices."""
    T_ = ctx.num_threads
    tx = ctx.kernel.thread_vars[0]
    out = []

    def walk(s, env, mask):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                walk(x, env, mask)
        elif isinstance(s, (ir.Allocate, ir.Attr)):
            walk(s.body, env, mask)
        elif isinstance(s, ir.LetStmt):
            walk(s.body, {**env, s.var: np.broadcast_to(eval_index(s.value, env), (T_,))},
                 mask)
        elif isinstance(s, ir.For):
            if s.kind in ("unroll", "serial"):
                for i in range(s.start.value, s.start.value + s.extent.value):
                    walk(s.body, {**env, s.var: i}, mask)
        elif isinstance(s, ir.If):
            walk(s.then_body, env, mask & np.broadcast_to(eval_index(s.cond, env), (T_,)))
        elif isinstance(s, ir.Evaluate) and isinstance(s.value, ir.Call) and \
                s.value.op == "call_extern":
            name = s.value.args[0]
            m = re.match(r"tl::(cp_async|cp_async_zfill|copy_zfill|copy_vec)<(\w+)>", name)
            if not m:
                return
            dst, src = (a.args[0] for a in s.value.args[1:3])
            width = _FLOAT_VECTOR_BYTES.get(m.group(2)) or int(m.group(2))
            if m.group(1) in ("cp_async", "copy_vec"):
                nbytes = np.full(T_, width)
            elif m.group(1) == "cp_async_zfill":
                nbytes = np.broadcast_to(eval_index(s.value.args[3], env), (T_,))
            else:  # copy_zfill<V>(dst, src, n_valid): elements
                width *= dst.dtype.bytes
                nbytes = np.broadcast_to(eval_index(s.value.args[3], env), (T_,)) * \
                    dst.dtype.bytes
            ev = lambda idx: [np.broadcast_to(eval_index(i, env), (T_,)) for i in idx]
            out.append(dict(name=name, bytes=width, dst=ev(dst.indices), src=ev(src.indices),
                            nbytes=nbytes, tid=np.arange(T_), mask=mask.copy()))

    walk(k.body, {**bindings, tx: np.arange(T_)}, np.ones(T_, bool))
    return out


def _check_tile(copies, M, N, r0, c0, tm, tn, esize, T_):
    V = copies[0]["bytes"] // esize
    seen = np.zeros((tm, tn // V), np.int64)
    for cp in copies:
        m = cp["mask"]
        di, dj = (x[m] for x in cp["dst"])
        si, sj = (x[m] for x in cp["src"])
        nb, tid = cp["nbytes"][m], cp["tid"][m]
        assert np.all(dj % V == 0)
        np.add.at(seen, (di, dj // V), 1)
        # chunk c of the tile goes to thread c % T
        chunk = di * (tn // V) + dj // V
        assert np.all(chunk % T_ == tid)
        # the same element of the global tensor, with the valid byte count at the edges
        valid = np.clip(N - (c0 + dj), 0, V) * (r0 + di < M) * esize
        assert np.array_equal(nb, valid), (nb, valid)
        live = nb > 0
        assert np.array_equal(si[live], (r0 + di)[live]) and np.array_equal(sj[live],
                                                                             (c0 + dj)[live])
        # a chunk that reads nothing still points inside the tensor
        assert np.all((si >= 0) & (si < M) & (sj >= 0) & (sj < N))
    assert np.all(seen == 1), "every chunk of the tile copied exactly once"
    return V


@pytest.mark.parametrize("N,width", [(128, 16), (100, 8), (98, 4)])
def test_vector_width_follows_the_row_stride(N, width):
    k, ctx = run_passes(_copy_kernel(128, N, 0, 0), "lower_copies", SM80)
    copies = _chunk_copies(k, ctx)
    assert {c["bytes"] for c in copies} == {width}
    assert _check_tile(copies, 128, N, 0, 0, 64, 64, 2, 128) == width // 2
    # a copy outside a pipeline waits for itself
    assert externs(k, "tl::cp_async_")[-2:] == ["tl::cp_async_commit", "tl::cp_async_wait<0>"]


def test_ragged_edges_are_zero_filled():
    # rows 64..127 and cols 64..127 of a 100 x 100 tensor: a quarter of the tile is outside
    k, ctx = run_passes(_copy_kernel(100, 100, 64, 64), "lower_copies", SM80)
    copies = _chunk_copies(k, ctx)
    assert all("zfill" in c["name"] for c in copies)
    _check_tile(copies, 100, 100, 64, 64, 64, 64, 2, 128)
    assert any((c["nbytes"] == 0).any() for c in copies)


def test_partial_chunk_at_the_end_of_a_vector():
    """1001 halves: the chunk holding the last element has 1 valid element of 8."""
    @T.prim_func
    def f(A: T.Tensor((1001,), "float16"), B: T.Tensor((1001,), "float16")):
        with T.Kernel(T.ceildiv(1001, 256), threads=128) as bx:
            S = T.alloc_shared((256,), "float16")
            T.copy(A[bx * 256], S)
            for i in T.Parallel(256):
                B[bx * 256 + i] = S[255 - i]

    k, ctx = run_passes(f, "lower_copies", SM80)
    bx = ctx.kernel.block_vars[0]
    counts = []
    for block in range(4):
        copies = _chunk_copies_at(k, ctx, {bx: block})
        for cp in copies:
            m = cp["mask"]
            (sj,) = (x[m] for x in cp["src"])
            (dj,) = (x[m] for x in cp["dst"])
            assert np.array_equal(np.broadcast_to(sj, dj.shape)[cp["nbytes"][m] > 0],
                                  (block * 256 + dj)[cp["nbytes"][m] > 0])
            expect = np.clip(1001 - (block * 256 + dj), 0, 8) * 2
            assert np.array_equal(cp["nbytes"][m], expect)
            counts.extend(cp["nbytes"][m].tolist())
    assert 2 in counts and 0 in counts and 16 in counts


def test_region_start_limits_the_width():
    # a start column of 2 halves is only 4-byte aligned
    k, ctx = run_passes(_copy_kernel(128, 128, 0, 2), "lower_copies", SM80)
    copies = _chunk_copies(k, ctx)
    assert {c["bytes"] for c in copies} == {4}
    _check_tile(copies, 128, 128, 0, 2, 64, 64, 2, 128)


def test_odd_row_stride_falls_back_to_an_element_loop_guarded_later():
    k, _ = run_passes(_copy_kernel(100, 99, 64, 64), "lower_copies", SM80)
    assert not externs(k, "tl::cp_async")
    loop = next(iter(nodes(k, ir.For, lambda s: s.annotation("from_tile_op") == "copy")))
    assert loop.kind == "parallel"
    # ... whose loads of A read 0 past the tensor once guard_global has run
    k, _ = run_passes(_copy_kernel(100, 99, 64, 64), "guard_global", SM80)
    guarded = nodes(k, ir.Select, lambda e: isinstance(e.true_value, ir.Load)
                    and e.true_value.buffer.name == "A")
    assert guarded and all(isinstance(e.false_value, ir.Const) and e.false_value.value == 0
                           for e in guarded)


def test_without_cp_async_predicated_vector_loads():
    k, ctx = run_passes(_copy_kernel(100, 100, 64, 64), "lower_copies", "cuda -arch=sm_75")
    copies = _chunk_copies(k, ctx)
    assert copies and all(c["name"].startswith("tl::copy_zfill<") for c in copies)
    assert not externs(k, "tl::cp_async")
    _check_tile(copies, 100, 100, 64, 64, 64, 64, 2, 128)


@pytest.mark.parametrize("key", [PassConfigKey.TL_ENABLE_ASYNC_COPY,
                                 PassConfigKey.TIR_USE_ASYNC_COPY])
@pytest.mark.parametrize("dtype, first", [("float16", "tl::copy_vec<16>"),
                                          ("float32", "tl::copy_vec<float4>")])
def test_async_copy_off_moves_chunks_with_plain_vector_accesses(key, dtype, first):
    """tl.enable_async_copy (or tir.use_async_copy) = False: no cp.async; whole chunks are
    one vector load and store each (float32 ones named float4), edge chunks zero-filled."""
    configs = {key.value: False}
    k, ctx = run_passes(_copy_kernel(128, 128, 0, 0, dtype=dtype), "lower_copies", SM90,
                        configs=configs)
    assert not externs(k, "tl::cp_async")
    copies = _chunk_copies(k, ctx)
    assert {c["name"] for c in copies} == {first}
    esize = 2 if dtype == "float16" else 4
    _check_tile(copies, 128, 128, 0, 0, 64, 64, esize, 128)
    k, ctx = run_passes(_copy_kernel(100, 100, 64, 64, dtype=dtype), "lower_copies", SM90,
                        configs=configs)
    assert not externs(k, "tl::cp_async")
    copies = _chunk_copies(k, ctx)
    assert all(c["name"].startswith("tl::copy_zfill<") for c in copies)
    _check_tile(copies, 100, 100, 64, 64, 64, 64, esize, 128)
    # the default issues cp.async and waits for it
    k, _ = run_passes(_copy_kernel(128, 128, 0, 0, dtype=dtype), "lower_copies", SM90)
    assert externs(k, "tl::cp_async<")


@requires_compiler
def test_copies_without_cp_async_compile():
    configs = {PassConfigKey.TL_ENABLE_ASYNC_COPY.value: False}
    for M, N, r0, c0 in ((128, 128, 0, 0), (100, 100, 64, 64)):
        src = tilelang.lower(_copy_kernel(M, N, r0, c0, dtype="float32"), target=SM90,
                             pass_configs=configs)
        assert "cp_async" not in src
        compile_cuda(src, "sm_90a", name="sync_copy")


@requires_gpu
@pytest.mark.parametrize("M,N,r0,c0", [(128, 128, 0, 0), (100, 100, 64, 64)])
def test_copies_without_cp_async_run_exactly(M, N, r0, c0):
    import torch

    configs = {PassConfigKey.TL_ENABLE_ASYNC_COPY.value: False}
    kernel = tilelang.compile(_copy_kernel(M, N, r0, c0, dtype="float32"), target="cuda",
                              pass_configs=configs)
    A = torch.randn((M, N), device="cuda")
    B = torch.full((64, 64), float("nan"), device="cuda")
    kernel(A, B)
    tile = torch.zeros(64, 64, device="cuda")
    part = A[r0:r0 + 64, c0:c0 + 64]
    tile[:part.shape[0], :part.shape[1]] = part
    torch.testing.assert_close(B, tile + tile.flip(0))


def test_fewer_chunks_than_threads_are_guarded():
    # 8 x 32 fp32 = 64 chunks of 16 bytes for 128 threads
    k, ctx = run_passes(_copy_kernel(64, 64, 0, 0, tm=8, tn=32, dtype="float32"),
                        "lower_copies", SM80)
    copies = _chunk_copies(k, ctx)
    assert sum(int(c["mask"].sum()) for c in copies) == 64
    _check_tile(copies, 64, 64, 0, 0, 8, 32, 4, 128)


def test_huge_last_dimension_computes_its_bounds_in_int64():
    """Regression: the valid-byte count of a chunk was computed from int32 indices, so past
    2^31 elements `bx * 256` wrapped and the last chunks read past the tensor."""
    N = 2**31 + 1000

    @T.prim_func
    def f(A: T.Tensor((N,), "float16"), B: T.Tensor((N,), "float16")):
        with T.Kernel(T.ceildiv(N, 256), threads=128) as bx:
            S = T.alloc_shared((256,), "float16")
            T.copy(A[bx * 256], S)
            for i in T.Parallel(256):
                B[bx * 256 + i] = S[i] + S[255 - i]

    k, _ = run_passes(f, "lower_copies", SM90)
    (let,) = nodes(k, ir.LetStmt, lambda s: s.var.name.startswith("nbytes"))
    narrow = nodes(let.value, ir.Binary, lambda e: e.dtype.bits < 64 and any(
        v.name == "bx" for v in nodes(e, ir.Var)))
    assert not narrow, show(let.value)
    src = tilelang.lower(f, target=SM90)
    line = next(x for x in src.splitlines() if "nbytes =" in x)
    # N is a multiple of 8: each chunk is wholly in or out, the bound compares chunk indices
    assert "((int64_t)bx) * 32LL" in line and "? 16 : 0" in line, line


@requires_compiler
def test_lowered_copies_compile():
    src = tilelang.lower(_copy_kernel(100, 100, 64, 64), target=SM80)
    compile_cuda(src, "sm_80", name="ragged_copy")


@requires_gpu
@pytest.mark.parametrize("M,N,r0,c0", [(100, 100, 64, 64), (128, 98, 0, 2), (100, 99, 40, 40)])
def test_ragged_copy_runs_exactly(M, N, r0, c0):
    import torch

    kernel = tilelang.compile(_copy_kernel(M, N, r0, c0), target="cuda")
    A = torch.randn((M, N), dtype=torch.float16, device="cuda")
    B = torch.empty((64, 64), dtype=torch.float16, device="cuda")
    kernel(A, B)
    tile = np.zeros((64, 64), np.float16)
    part = A.cpu().numpy()[r0:r0 + 64, c0:c0 + 64]
    tile[:part.shape[0], :part.shape[1]] = part
    np.testing.assert_array_equal(B.cpu().numpy(), tile + tile[::-1])
