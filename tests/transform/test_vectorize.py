"""vectorize_value_loop (called by partition_parallel): global/shared loads and unconditional
stores contiguous and aligned in the lane index move as one 4/8/16-byte access through a
register array; a vector that may leave the tensor is guarded as a whole with an element-wise
fallback; anything else stays scalar. The accesses are enumerated for every thread."""

import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.runtime import compile_cuda
from tilelang.transform.analysis.numeric import eval_index
from tilelang.transform.pass_config import PassConfigKey

from transform_helpers import (SM80, SM90, gemm_with_epilogue, nodes, requires_compiler,
                               requires_gpu, run_passes, show)


def _rows(M, N, bn=128, dtype="float16"):
    @T.prim_func
    def f(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), M, threads=128) as (bx, by):
            for i, j in T.Parallel(1, bn):
                B[by + i, bx * bn + j] = A[by + i, bx * bn + j]
    return f


def _flat(N, block=1024, off=0, dtype="float16"):
    @T.prim_func
    def f(A: T.Tensor((N + off,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i + off] * 2.0
    return f


_FLOAT_VECTOR_BYTES = {"float": 4, "float2": 8, "float4": 16}  # float32 lanes' spelling


def _vector_calls(k):
    out = []
    for c in nodes(k, ir.Call, lambda c: c.op == "call_extern"):
        m = re.match(r"tl::copy_vec<(\w+)>", c.args[0])
        if m:
            dst, src = (a.args[0] for a in c.args[1:3])
            mem = src if dst.buffer.scope == "local" else dst
            nbytes = _FLOAT_VECTOR_BYTES.get(m.group(1)) or int(m.group(1))
            out.append((nbytes, "load" if mem is src else "store", mem))
    return out


def _env(k, ctx):
    (loop,) = [s for s in nodes(k, ir.For, lambda s: s.var.name == "vo")] or [None]
    env = {ctx.kernel.thread_vars[0]: np.arange(ctx.num_threads)[:, None]}
    if loop is not None:
        env[loop.var] = np.arange(loop.extent.value)[None, :]
    return env


@pytest.mark.parametrize("target", [SM80, SM90])
def test_contiguous_fp16_rows_move_in_128_bit_accesses(target):
    k, ctx = run_passes(_rows(64, 1024, bn=1024), "partition_parallel", target)
    calls = _vector_calls(k)
    assert sorted((w, kind, m.buffer.name) for w, kind, m in calls) == \
        [(16, "load", "A"), (16, "store", "B")]
    # each thread's vectors: aligned, and together the 1024 elements of the row, once
    for _, _, mem in calls:
        env = _env(k, ctx)
        env.update({v: 0 for v in ctx.kernel.block_vars})
        base = np.broadcast_to(eval_index(mem.indices[-1], env), (128, 1))
        assert np.all(base % 8 == 0)
        covered = np.sort((base[..., None] + np.arange(8)).ravel())
        np.testing.assert_array_equal(covered, np.arange(1024))
    # no scalar access of A or B is left
    scalar = nodes(k, (ir.Load, ir.Store), lambda n: n.buffer.name in ("A", "B"))
    assert all(any(n is m for _, _, m in calls) for n in scalar)


@pytest.mark.parametrize("N", [99, 1001])
def test_ragged_row_stride_stays_scalar(N):
    k, _ = run_passes(_rows(64, N, bn=128), "partition_parallel", SM80)
    assert not _vector_calls(k), show(k)


def test_vector_that_may_leave_the_tensor_falls_back_per_element():
    k, ctx = run_passes(_flat(1000), "partition_parallel", SM80)
    guarded = [s for s in nodes(k, ir.If) if _vector_calls(s.then_body)]
    assert len(guarded) == 2  # the load of A and the store of B
    env = _env(k, ctx)
    env[ctx.kernel.block_vars[0]] = 0
    for s in guarded:
        ((w, kind, mem),) = _vector_calls(s.then_body)
        base = eval_index(mem.indices[0], env)
        full = np.broadcast_to(eval_index(s.cond, env), np.shape(base))
        # the vector path exactly when all 8 elements are inside the tensor
        np.testing.assert_array_equal(full, base + 8 <= 1000)
        # the fallback moves the same 8 elements one by one
        (lane,) = nodes(s.else_body, ir.For)
        assert lane.extent.value == 8 and not _vector_calls(s.else_body)


def _row_gather(rows=7):
    """A_s[i, j] = X[2i + j // 2 - 2, j % 2]: each vector of 4 lanes spans two rows of X, and
    the rows of the last lanes leave X before those of the first (fuzz seed 192554)."""
    @T.prim_func
    def f(X: T.Tensor((rows, 2), "float16"), Y: T.Tensor((64, 16), "float16")):
        with T.Kernel(1, threads=256):
            A_s = T.alloc_shared((64, 16), "float16")
            for i, j in T.Parallel(64, 16):
                A_s[i, j] = X[i * 2 + j // 2 - 2, j % 2]
            T.copy(A_s, Y)
    return f


def test_vector_crossing_rows_is_bounded_at_every_row_it_touches():
    k, ctx = run_passes(_row_gather(), "partition_parallel", SM80)
    (s,) = [s for s in nodes(k, ir.If) if any(m.buffer.name == "X" for _, _, m in
                                               _vector_calls(s.then_body))]
    ((w, kind, mem),) = _vector_calls(s.then_body)
    (loop,) = [lp for lp in nodes(k, ir.For, lambda lp: lp.var.name.startswith("vo"))
               if nodes(lp.body, ir.If, lambda x: x is s)]
    env = {ctx.kernel.thread_vars[0]: np.arange(ctx.num_threads)[:, None],
           loop.var: np.arange(loop.extent.value)[None, :]}
    base = eval_index(mem.indices[0], env) * 2 + eval_index(mem.indices[1], env)  # lane 0
    lanes = w // 2
    full = np.broadcast_to(eval_index(s.cond, env), np.shape(base))
    first_row, last_row = np.floor_divide(base, 2), np.floor_divide(base + lanes - 1, 2)
    np.testing.assert_array_equal(full, (first_row >= 0) & (last_row < 7))


@requires_gpu
def test_vector_crossing_rows_reads_zeros_past_the_tensor():
    import torch

    x = torch.randn(7, 2, device="cuda", dtype=torch.float16)
    y = torch.full((64, 16), float("nan"), device="cuda", dtype=torch.float16)
    tilelang.compile(_row_gather(), target="cuda")(x, y)
    i, j = torch.meshgrid(torch.arange(64), torch.arange(16), indexing="ij")
    r = i * 2 + j // 2 - 2
    ok = (r >= 0) & (r < 7)
    want = torch.zeros(64, 16, dtype=torch.float16)
    want[ok] = x.cpu()[r[ok], (j % 2)[ok]]
    assert torch.equal(y.cpu(), want)


def test_misaligned_access_stays_scalar_and_the_other_side_vectorises():
    k, _ = run_passes(_flat(4096, off=1), "partition_parallel", SM80)
    calls = _vector_calls(k)
    assert [(kind, m.buffer.name) for _, kind, m in calls] == [("store", "B")]
    assert nodes(k, ir.Load, lambda e: e.buffer.name == "A")


def test_read_modify_write_is_not_staged():
    @T.prim_func
    def f(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(1024):
                B[i] = B[i] + A[i]

    k, _ = run_passes(f, "partition_parallel", SM80)
    names = [(kind, m.buffer.name) for _, kind, m in _vector_calls(k)]
    assert ("load", "A") in names
    assert all(name != "B" for _, name in names)


def test_shared_memory_accesses_vectorise_through_the_layout():
    k, _ = run_passes(gemm_with_epilogue(), "partition_parallel", SM80)
    calls = _vector_calls(k)
    assert any(kind == "load" and m.buffer.name == "Cs" and w == 16 for w, kind, m in calls)
    assert any(kind == "store" and m.buffer.name == "C" and w == 16 for w, kind, m in calls)


def test_disabled_by_pass_config():
    k, _ = run_passes(_rows(64, 1024, bn=1024), "partition_parallel", SM80,
                      {PassConfigKey.TIR_DISABLE_VECTORIZE: True})
    assert not _vector_calls(k)


@requires_compiler
def test_vectorised_kernels_compile():
    for i, f in enumerate((_flat(1000), _rows(64, 1024, bn=1024), _rows(64, 99))):
        compile_cuda(tilelang.lower(f, target=SM90), "sm_90a", name=f"vec{i}")


@requires_gpu
@pytest.mark.parametrize("make", [lambda: _flat(1000), lambda: _flat(99, block=256),
                                  lambda: _flat(4096, off=1)])
def test_vectorised_kernels_compute_what_the_scalar_loop_does(make):
    import torch

    f = make()
    A0 = f.params[0]
    n_a, n_b = A0.shape[0], f.params[1].shape[0]
    A = torch.randn(n_a, dtype=torch.float16, device="cuda")
    B = torch.full((n_b,), 7.0, dtype=torch.float16, device="cuda")
    tilelang.compile(f, target="cuda")(A, B)
    off = n_a - n_b
    np.testing.assert_array_equal(B.cpu().numpy(), (A.cpu().float() * 2).half().numpy()[off:])


def _expand_rows(N=64, K=64, threads=128, dst="shared"):
    """Out = 2 * In through shared memory; `dst`: where the doubled rows are stored."""
    @T.prim_func
    def f(A: T.Tensor((N, K), "float16"), B: T.Tensor((N, K), "float16")):
        with T.Kernel(1, threads=threads) as _:
            S = T.alloc_shared((N, K), "float16")
            D = T.alloc_shared((N, K), "float16")
            T.copy(A, S)
            if dst == "shared":
                for i, j in T.Parallel(N, K):
                    D[i, j] = S[i, j] * 2.0
                T.copy(D, B)
            else:
                for i, j in T.Parallel(N, K):
                    B[i, j] = S[i, j] * 2.0
    return f


def test_small_shared_stores_wait_until_every_group_is_computed():
    # 32 values a thread: four groups of eight; 64 bytes held in registers
    src = tilelang.lower(_expand_rows(), target=SM90)
    start = src.index("for (int vo", src.index("D_vec[32]"))  # after the copy's barrier
    code = src[start:src.index("__syncthreads", src.index("tl::copy_vec<16>((&D[", start))]
    compute, store = code.index("* 2.0f"), code.index("tl::copy_vec<16>((&D[")
    assert compute < store and "(&D_vec[vo * 8])" in code[store:]
    # computing loop, then storing loop, one nest: no barrier between them, and S and D
    # (both touched in it) do not share bytes
    assert code.count("for (int vo") == 2 and "__syncthreads" not in code
    k, ctx = run_passes(_expand_rows(), "plan_shared", SM90)
    plan = {b.name: (off, off + b.numel() * b.dtype.bytes) for b, off in ctx.shared_plan.items()}
    (s0, s1), (d0, d1) = plan["S"], plan["D"]
    assert s1 <= d0 or d1 <= s0, plan


def test_held_back_stores_never_overwrite_what_another_thread_still_reads():
    """Words read as int32, weights written as float16 (racecheck found this on an H200):
    the tile written in the storing loop must not take the bytes of the one read in the
    computing loop, since their elements belong to different threads."""
    from test_pair_lanes import expand

    k, ctx = run_passes(expand(), "plan_shared", SM90)
    plan = {b.name: (off, off + b.numel() * b.dtype.bytes) for b, off in ctx.shared_plan.items()}
    (w0, w1), (b0, b1) = plan["Ws"], plan["Bs"]
    assert w1 <= b0 or b1 <= w0, plan


@pytest.mark.parametrize("why", ["too many bytes", "global destination"])
def test_other_stores_stay_with_their_group(why):
    f = _expand_rows(threads=64) if why == "too many bytes" else _expand_rows(dst="global")
    src = tilelang.lower(f, target=SM90)
    assert "_vec[8]" in src and "_vec[32]" not in src and "_vec[64]" not in src


@requires_gpu
def test_held_back_stores_compute_the_same():
    import torch

    a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    b = torch.full_like(a, float("nan"))
    tilelang.compile(_expand_rows(), target="cuda")(a, b)
    assert torch.equal(b, a * 2)


def _lanes(K, chunk=8, off=0, dtype="float16"):
    """A thread's own lanes through T.vectorized (the reference's gemv idiom): chunk `chunk`
    of row `by`, starting `off` elements in, loaded into registers, doubled and stored."""

    @T.prim_func
    def f(A: T.Tensor((4, K + off), dtype), B: T.Tensor((4, K), dtype)):
        with T.Kernel(1, 4, threads=K // chunk) as (bx, by):
            tx = T.get_thread_binding()
            a = T.alloc_local((chunk,), dtype)
            for v in T.vectorized(chunk):
                a[v] = A[by, tx * chunk + v + off]
            for v in T.vectorized(chunk):
                B[by, tx * chunk + v] = a[v] * 2.0
    return f


def test_a_vectorized_loop_moves_its_lanes_in_one_access():
    src = tilelang.lower(_lanes(256), target=SM90)
    # straight into the register array: no staging array, no element loop
    assert re.search(r"tl::copy_vec<16>\(\(&a\[0\]\), \(&A\[", src), src
    assert "A_vec" not in src
    assert re.search(r"tl::copy_vec<16>\(\(&B\[", src), src
    # misaligned by one element: no provable 16-byte access, the lanes stay scalar
    src = tilelang.lower(_lanes(256, off=1), target=SM90)
    assert "copy_vec<16>((&a" not in src and "copy_vec<16>((&A_vec" not in src
    # the pass config that turns vectorisation off keeps the scalar loop
    k = tilelang.compile(_lanes(256), target=SM90,
                         pass_configs={PassConfigKey.TIR_DISABLE_VECTORIZE: True})
    assert "copy_vec" not in k.get_kernel_source()


def _lanes_into(K, reg, at, chunk=8, rows=4, dtype="float16"):
    """Chunk `chunk` of row `by` loaded into elements at..at+chunk-1 of a register array of
    `reg` elements (zeros elsewhere), then every element of the array, doubled, summed into
    B (rows past `rows` of A's 4 are out of bounds: A has `rows` rows)."""

    @T.prim_func
    def f(A: T.Tensor((rows, K), dtype), B: T.Tensor((4, K // chunk), dtype)):
        with T.Kernel(1, 4, threads=K // chunk) as (bx, by):
            tx = T.get_thread_binding()
            a = T.alloc_local((reg,), dtype)
            for v in T.serial(reg):
                a[v] = T.cast(0, dtype)
            if by < rows:
                for v in T.vectorized(chunk):
                    a[at + v] = A[by, tx * chunk + v]
            s = T.alloc_var(dtype)
            s = T.cast(0, dtype)
            for v in T.serial(reg):
                s = s + a[v] * T.cast(2, dtype)
            B[by, tx] = s
    return f


def test_a_register_array_is_loaded_directly_only_at_an_aligned_element():
    # elements 8..15 of a 16-element (32-byte, 16-aligned) array: a 16-byte access in place
    src = tilelang.lower(_lanes_into(256, 16, 8), target=SM90)
    assert re.search(r"tl::copy_vec<16>\(\(&a\[8\]\), \(&A\[", src), src
    # elements 4..11: the array's address plus 8 bytes is no 16-byte boundary: staged
    src = tilelang.lower(_lanes_into(256, 16, 4), target=SM90)
    assert not re.search(r"copy_vec<16>\(\(&a\[", src), src
    assert re.search(r"tl::copy_vec<16>\(\(&A_vec\[0\]\), \(&A\[", src), src


@pytest.mark.parametrize("reg,at", [(16, 8), (16, 4), (8, 0)])
def test_register_array_loads_mean_the_same_on_the_interpreter(reg, at):
    import torch

    a = torch.randn(3, 256).half()
    b = torch.full((4, 32), float("nan")).half()
    tilelang.compile(_lanes_into(256, reg, at, rows=3), target="cpu")(a, b)
    ref = (a.float() * 2).reshape(3, 32, 8).sum(-1)
    torch.testing.assert_close(b[:3].float(), ref, rtol=2e-3, atol=2e-2)
    assert (b[3] == 0).all()


@requires_gpu
@pytest.mark.parametrize("reg,at", [(16, 8), (16, 4), (8, 0)])
def test_register_array_loads_on_the_gpu(reg, at):
    import torch

    a = torch.randn(3, 256, device="cuda").half()
    b = torch.full((4, 32), float("nan"), device="cuda").half()
    tilelang.compile(_lanes_into(256, reg, at, rows=3), target="cuda")(a, b)
    ref = (a.float() * 2).reshape(3, 32, 8).sum(-1)
    torch.testing.assert_close(b[:3].float(), ref, rtol=2e-3, atol=2e-2)
    assert (b[3] == 0).all()


@requires_compiler
def test_register_array_loads_build():
    for reg, at in ((16, 8), (16, 4), (8, 0)):
        compile_cuda(tilelang.lower(_lanes_into(256, reg, at, rows=3), target=SM90), "sm_90a")


def test_a_vectorized_loop_means_the_same_on_the_interpreter():
    import torch

    a = torch.randn(4, 256).half()
    b = torch.full((4, 256), float("nan")).half()
    tilelang.compile(_lanes(256), target="cpu")(a, b)
    torch.testing.assert_close(b, a * 2)


@requires_compiler
def test_vectorized_loops_build():
    for off in (0, 1):
        compile_cuda(tilelang.lower(_lanes(256, off=off), target=SM90), "sm_90a")


def _ragged_tile_store(M, N, bm=64):
    """A tile stored row by row under the user's row bound (a varlen attention epilogue):
    the bound is the same for the lanes of a row."""
    @T.prim_func
    def f(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16"), rows: T.int32):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            S = T.alloc_shared((bm, N), "float16")
            T.copy(A[bx * bm, 0], S)
            for i, j in T.Parallel(bm, N):
                if bx * bm + i < rows:
                    B[bx * bm + i, j] = S[i, j]
    return f


@pytest.mark.parametrize("target", [SM80, SM90])
def test_store_under_a_lane_invariant_guard_vectorises(target):
    src = tilelang.compile(_ragged_tile_store(200, 64), target=target).get_kernel_source()
    store = [l for l in src.splitlines() if "copy_vec<16>((&B[" in l]
    assert store, src


def test_store_under_a_lane_invariant_guard_interpreter():
    import torch

    kernel = tilelang.compile(_ragged_tile_store(200, 64), target="cpu")
    A = torch.randn(200, 64).half()
    B = torch.full((200, 64), 7.0).half()
    kernel(A, B, 150)
    assert torch.equal(B[:150], A[:150]) and (B[150:] == 7).all()


@requires_gpu
@pytest.mark.parametrize("rows", [0, 37, 150, 200])
def test_store_under_a_lane_invariant_guard_on_the_gpu(rows):
    import torch

    kernel = tilelang.compile(_ragged_tile_store(200, 64), target="cuda")
    A = torch.randn(200, 64, device="cuda").half()
    B = torch.full((200, 64), float("nan"), device="cuda").half()
    kernel(A, B, rows)
    assert torch.equal(B[:rows], A[:rows]) and B[rows:].isnan().all()


def _long_lanes(N, M, stride_a, stride_b):
    """A `T.vectorized` loop longer than one access: each thread walks a column of strided
    (column-major) float32 tensors, `row` contiguous with stride 1."""

    @T.prim_func
    def f(A: T.StridedTensor[(N, M), (1, stride_a), T.float32],
          B: T.StridedTensor[(N, M), (1, stride_b), T.float32]):
        with T.Kernel(M // 32, threads=32) as bx:
            col = bx * 32 + T.get_thread_binding()
            for row in T.vectorized(N):
                B[row, col] = A[row, col] * 2.0
    return f


@pytest.mark.parametrize("strides, vector", [((64, 64), "float4"), ((66, 68), "float2"),
                                             ((68, 72), "float4"), ((65, 64), None)])
def test_a_long_vectorized_loop_moves_its_lanes_in_groups(strides, vector):
    """The group width is the widest one every access is aligned for: 16 bytes when both
    column starts are multiples of 4 elements, 8 bytes for multiples of 2, scalar else."""
    src = tilelang.lower(_long_lanes(64, 64, *strides), target=SM90)
    if vector is None:
        assert "copy_vec" not in src, src
    else:
        assert f"tl::copy_vec<{vector}>((&A_vec[0]), (&A[" in src, src
        assert f"tl::copy_vec<{vector}>((&B[" in src, src
        width = 4 if vector == "float4" else 2
        assert f"row_vo < {64 // width}; ++row_vo)" in src, src


def test_a_long_vectorized_loop_means_the_same_on_both_paths():
    import torch

    base = torch.randn(64, 66)
    b = torch.full((64, 68), float("nan"))
    a_view = torch.as_strided(base, (64, 64), (1, 66))
    b_view = torch.as_strided(b, (64, 64), (1, 68))
    tilelang.compile(_long_lanes(64, 64, 66, 68), target="cpu")(a_view, b_view)
    torch.testing.assert_close(b_view, a_view * 2)


def _lane_invariant_operand(N, M, K):
    @T.prim_func
    def f(A: T.Tensor((N, M), T.float32), C: T.Tensor((N, M // K), T.float32),
          B: T.Tensor((N, M), T.float32)):
        with T.Kernel(N // 32, threads=32) as bx:
            row = bx * 32 + T.get_thread_binding()
            for col in T.vectorized(M):
                B[row, col] = A[row, col] * C[row, col // K]
    return f


@pytest.mark.parametrize("K, vector", [(2, "float2"), (4, "float4"), (8, "float4"),
                                       (6, "float2"), (3, None)])
def test_a_long_vectorized_loop_reads_a_shared_operand_once_per_group(K, vector):
    """`C[row, col // K]` is one element for all lanes of a group whose width divides K: the
    width is limited by K, and the element is read by the group's lanes, not staged."""
    src = tilelang.lower(_lane_invariant_operand(32, 48 * K, K), target=SM90)
    if vector is None:
        assert "copy_vec" not in src, src
    else:
        assert f"tl::copy_vec<{vector}>((&A_vec[0])" in src, src
        assert "C_vec" not in src, src


@pytest.mark.parametrize("K", [2, 6, 3])
def test_a_long_vectorized_loop_with_a_shared_operand_on_the_interpreter(K):
    import torch

    a, c = torch.randn(32, 48 * K), torch.randn(32, 48)
    b = torch.full((32, 48 * K), float("nan"))
    tilelang.compile(_lane_invariant_operand(32, 48 * K, K), target="cpu")(a, c, b)
    torch.testing.assert_close(b, a * c.repeat_interleave(K, dim=1))


@requires_compiler
def test_long_vectorized_loops_build():
    for strides in ((64, 64), (66, 68), (65, 64)):
        compile_cuda(tilelang.lower(_long_lanes(64, 64, *strides), target=SM90), "sm_90a")
    for K in (2, 6):
        compile_cuda(tilelang.lower(_lane_invariant_operand(32, 48 * K, K), target=SM90),
                     "sm_90a")


@requires_gpu
@pytest.mark.parametrize("strides", [(66, 68), (68, 72), (65, 64)])
def test_long_vectorized_loops_on_the_gpu(strides):
    import torch

    base = torch.randn(96 * strides[0], device="cuda")  # column c starts at c * stride
    out = torch.full((96 * strides[1],), float("nan"), device="cuda")
    a = torch.as_strided(base, (64, 96), (1, strides[0]))
    b = torch.as_strided(out, (64, 96), (1, strides[1]))
    tilelang.compile(_long_lanes(64, 96, *strides), target="cuda")(a, b)
    torch.testing.assert_close(b, a * 2)
    K = 6
    a, c = torch.randn(64, 48 * K, device="cuda"), torch.randn(64, 48, device="cuda")
    b = torch.full((64, 48 * K), float("nan"), device="cuda")
    tilelang.compile(_lane_invariant_operand(64, 48 * K, K), target="cuda")(a, c, b)
    torch.testing.assert_close(b, a * c.repeat_interleave(K, dim=1))


def _row_copy(K=256, block_k=128, variant=None, dtype="float16"):
    """Each thread copies its own row of B in a serial loop (the reference's naive GEMV);
    `variant`: "accumulate" adds the row into a register (a loop-carried value), "in_place"
    reads back what the loop writes, "call" stores a math call's value, "ragged" reads past
    the end of B's rows (K not a multiple of the chunk: the vectors may leave the tensor)."""
    N = 128
    Kb = K + 3 if variant == "ragged" else K

    @T.prim_func
    def f(B: T.Tensor((N, Kb), dtype), C: T.Tensor((N, block_k), dtype)):
        with T.Kernel(1, threads=N):
            tn = T.get_thread_binding(0)
            row = T.alloc_local((block_k,), dtype)
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0
            for bk in T.serial(T.ceildiv(Kb, block_k)):
                for k in T.serial(block_k):
                    if variant == "accumulate":
                        acc[0] += B[tn, bk * block_k + k]
                    elif variant == "in_place":
                        row[k] = row[(k + 1) % block_k] + B[tn, bk * block_k + k]
                    elif variant == "call":
                        row[k] = T.exp(B[tn, bk * block_k + k])
                    else:
                        row[k] = B[tn, bk * block_k + k]
                for k in T.serial(block_k):
                    if variant == "accumulate":
                        C[tn, k] = acc[0]
                    else:
                        C[tn, k] = row[k] + acc[0]
    return f


def test_a_serial_loop_that_moves_a_row_uses_16_byte_accesses():
    k, _ = run_passes(_row_copy(), "partition_parallel", SM90)
    sizes = sorted({(n, kind, mem.buffer.name) for n, kind, mem in _vector_calls(k)})
    assert (16, "load", "B") in sizes and (16, "store", "C") in sizes, sizes
    assert not nodes(k, ir.For, lambda s: s.var.name == "k"), show(k)


@pytest.mark.parametrize("variant", ["accumulate", "in_place", "call"])
def test_a_serial_loop_that_carries_or_computes_values_stays_scalar(variant):
    k, _ = run_passes(_row_copy(variant=variant), "partition_parallel", SM90)
    assert not [c for c in _vector_calls(k) if c[2].buffer.name == "B"], show(k)


def test_disabling_vectorisation_keeps_the_serial_loop_scalar():
    configs = {PassConfigKey.TIR_DISABLE_VECTORIZE: True}
    k, _ = run_passes(_row_copy(), "partition_parallel", SM90, configs)
    assert not _vector_calls(k), show(k)


@requires_gpu
@pytest.mark.parametrize("variant", [None, "ragged", "accumulate"])
def test_vectorised_serial_loops_match_torch(variant):
    import torch

    K = 256
    Kb = K + 3 if variant == "ragged" else K
    kernel = tilelang.compile(_row_copy(K=K, variant=variant), target="cuda")
    for seed in range(2):
        g = torch.Generator().manual_seed(seed)
        b = torch.randn(128, Kb, generator=g).half()
        c = torch.full((128, 128), float("nan")).half().cuda()
        kernel(b.cuda(), c)
        chunks = -(-Kb // 128)
        last = torch.zeros(128, 128, dtype=torch.float64)
        tail = b[:, (chunks - 1) * 128:].double()
        last[:, :tail.shape[1]] = tail
        acc = b.double().sum(1, keepdim=True) if variant == "accumulate" else 0.0
        want = (torch.zeros_like(last) if variant == "accumulate" else last) + acc
        torch.testing.assert_close(c.double().cpu(), want, rtol=2e-2, atol=2e-2)
