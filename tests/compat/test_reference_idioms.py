"""Idioms of the reference's example programs that the corpus survey found missing: each
written here in the reference's style, run on the CPU interpreter against torch in float64,
and lowered for sm_80 / sm_90a (generation only; no GPU needed)."""

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.testing

CUDA_TARGETS = ["cuda -arch=sm_80", "cuda -arch=sm_90a"]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


# ---- T.Fragment(shape, forward_thread_fn=...) without an index function -----------------------
# (examples/cast per-token quantisation; flash_decoding's combine kernel)
@tilelang.jit(out_idx=[1])
def row_absmax_scale(M, N, blk_m, threads=128):
    group = 64

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, blk_m), T.ceildiv(N, group), threads=threads) as (bx, by):
            x_local = T.alloc_fragment((blk_m, group), "float32")
            amax = T.alloc_fragment((blk_m,), "float32")
            # thread layout only: each thread keeps its elements in row-major order
            T.annotate_layout({
                x_local: T.Fragment(x_local.shape,
                                    forward_thread_fn=lambda i, j: (i // (blk_m // 4)) * 32 + j % 32),
            })
            T.copy(X[bx * blk_m:(bx + 1) * blk_m, by * group:(by + 1) * group], x_local)
            T.reduce_absmax(x_local, amax, dim=1)
            for i, j in T.Parallel(blk_m, group):
                x_local[i, j] = x_local[i, j] / T.max(amax[i], 1e-4)
            T.copy(x_local, Y[bx * blk_m:(bx + 1) * blk_m, by * group:(by + 1) * group])

    return main


def test_fragment_from_thread_function_alone():
    tilelang.testing.set_random_seed(1)
    M, N, blk_m = 40, 192, 8
    kernel = row_absmax_scale(M, N, blk_m)
    x = torch.randn(M, N) * 3
    y = kernel(x)
    xg = x.double().view(M, N // 64, 64)
    ref = (xg / xg.abs().amax(-1, keepdim=True).clamp(min=1e-4)).view(M, N)
    torch.testing.assert_close(y.double(), ref, rtol=1e-6, atol=1e-6)
    for tgt in CUDA_TARGETS:
        assert "__global__" in tilelang.lower(kernel.prim_func, target=tgt)


def test_fragment_thread_function_slots_are_row_major():
    f = T.Fragment((4, 8), forward_thread_fn=lambda i, j: j % 4)
    # thread t owns columns t and t + 4 of every row: 8 slots, row-major
    assert f.num_threads == 4
    got = [tuple(int(c) for c in f.coords(1, v)) for v in range(8)]
    assert got == [(i, j) for i in range(4) for j in (1, 5)]


def test_fragment_thread_function_must_be_injective_per_slot():
    # the same thread twice for one element position is fine; a negative thread is not
    with pytest.raises(Exception, match="negative"):
        T.Fragment((4,), forward_thread_fn=lambda i: i - 1)


# ---- T.Persistent (examples/gemm/example_gemm_persistent.py) --------------------------------
@tilelang.jit(out_idx=[-1])
def persistent_matmul(M, N, K, block_M, block_N, block_K, sm_num, threads=128,
                      dtype="float16", accum_dtype="float"):

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(sm_num, threads=threads) as (block_id):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            for bx, by in T.Persistent(
                    [T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sm_num, block_id):
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    T.copy(A[bx * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, by * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C[bx * block_M, by * block_N])

    return main


@pytest.mark.parametrize("M,N,K,sm_num", [(96, 160, 64, 4), (64, 64, 96, 7), (32, 32, 32, 3)])
def test_persistent_tile_loop(M, N, K, sm_num):
    # tile counts 3x5=15 over 4 blocks (partial last wave), 2x2 over 7 (idle blocks), 1 over 3
    tilelang.testing.set_random_seed(2)
    kernel = persistent_matmul(M, N, K, 32, 32, 32, sm_num)
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c = kernel(a, b)
    ref = a.double() @ b.double()
    torch.testing.assert_close(c.double(), ref, rtol=1e-2, atol=1e-2)
    for tgt in CUDA_TARGETS:
        assert "__global__" in tilelang.lower(kernel.prim_func, target=tgt)


def test_persistent_one_dimensional_domain():
    @T.prim_func
    def scale(X: T.Tensor((100,), "float32"), Y: T.Tensor((100,), "float32")):
        with T.Kernel(3, threads=32) as pid:
            for t in T.Persistent([T.ceildiv(100, 32)], 3, pid):
                for i in T.Parallel(32):
                    if t * 32 + i < 100:
                        Y[t * 32 + i] = X[t * 32 + i] * 2.0

    k = tilelang.compile(scale, target="cpu")
    x = torch.randn(100)
    y = torch.zeros(100)
    k(x, y)
    torch.testing.assert_close(y, x * 2)


def test_persistent_rejects_bad_domain():
    with pytest.raises(Exception, match="T.Persistent"):
        @T.prim_func
        def bad(X: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as pid:
                for t in T.Persistent("tiles", 1, pid):
                    X[t] = 0.0


# ---- a fragment read transposed in a loop laid out by a gemm operand ------------------------
# (examples/linear_attention/example_mamba_chunk_state.py: xt_local[i, j] = x_local[j, i] * s[j])
@tilelang.jit(out_idx=[-1])
def scaled_transpose_gemm(L, M, N, block_K, num_stages=2, dtype="float16", accum="float"):

    @T.prim_func
    def main(X: T.Tensor((L, M), dtype), S: T.Tensor((L,), accum), B: T.Tensor((L, N), dtype),
             O: T.Tensor((M, N), accum)):
        with T.Kernel(1, threads=128) as bx:
            x_shared = T.alloc_shared((block_K, M), dtype)
            x_local = T.alloc_fragment((block_K, M), dtype)
            xt_local = T.alloc_fragment((M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, N), dtype)
            s_local = T.alloc_fragment((block_K,), accum)
            acc = T.alloc_fragment((M, N), accum)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(L, block_K), num_stages=num_stages):
                T.copy(X[k * block_K, 0], x_shared)
                T.copy(B[k * block_K, 0], B_shared)
                for i in T.Parallel(block_K):
                    s_local[i] = S[k * block_K + i]
                T.copy(x_shared, x_local)
                for i, j in T.Parallel(M, block_K):
                    xt_local[i, j] = x_local[j, i] * s_local[j]
                T.gemm(xt_local, B_shared, acc)
            T.copy(acc, O)

    return main


@pytest.mark.parametrize("L,M,N,block_K", [(128, 64, 64, 64), (96, 64, 32, 32)])
def test_transposed_fragment_read_takes_the_gemm_operand_layout(L, M, N, block_K):
    tilelang.testing.set_random_seed(3)
    kernel = scaled_transpose_gemm(L, M, N, block_K)
    x = torch.randn(L, M, dtype=torch.float16)
    s = torch.rand(L) + 0.5
    b = torch.randn(L, N, dtype=torch.float16)
    out = kernel(x, s, b)
    xt = (x.double() * s.double()[:, None]).half().double().T  # the kernel rounds to half
    torch.testing.assert_close(out.double(), xt @ b.double(), rtol=1e-3, atol=1e-2)
    for tgt in CUDA_TARGETS:
        assert "__global__" in tilelang.lower(kernel.prim_func, target=tgt)


# ---- `from tvm import DataType` (examples/gemm_splitk, dequantize_gemm) -----------------------
def test_tvm_datatype_standin():
    import importlib.util
    import sys

    import tvm  # the reference's `import tilelang` makes this importable
    from tvm import DataType

    if importlib.util.find_spec("tvm") is not None and sys.modules["tvm"] is not tilelang.tvm:
        pytest.skip("a real TVM is installed; the stand-in is not registered")
    from tilelang import tvm as tl_tvm
    assert tvm is tl_tvm and DataType is tilelang.DataType
    assert DataType("float16").bits == 16 and DataType("float").bits == 32
    # as tvm_ffi.dtype: a str with bits/lanes/itemsize/type_code; T.* dtypes are DataTypes
    assert DataType("int8").type_code == 0 and DataType("float16").type_code == 2
    assert DataType("bfloat16").type_code == 4 and DataType("float16x4").itemsize == 8
    assert isinstance(T.float16, DataType) and isinstance(DataType("int8"), str)
    assert DataType("float8_e4m3").bits == 8 and DataType("float32").lanes == 1
    assert DataType(T.bfloat16) == "bfloat16" and str(DataType("uint8")) == "uint8"
    with pytest.raises(AttributeError, match="provides only tvm.DataType"):
        tvm.tir.const(0, "int32")


@tilelang.jit
def splitk_by_dtype_width(M, N, K, bm, bn, bk, split_k, dtype="float16", out_dtype="float16"):
    from tvm import DataType
    splitK = K // split_k

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), split_k, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_s = T.alloc_shared((bm, bn), out_dtype)
            C_l = T.alloc_fragment((bm, bn), "float")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(splitK, bk), num_stages=0):
                T.copy(A[by * bm, bz * splitK + ko * bk], A_s)
                T.copy(B[bz * splitK + ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            if DataType(out_dtype).bits == 16:  # a trace-time branch on the dtype width
                for i, j in T.Parallel(bm, bn // 2):
                    T.atomic_addx2(C[by * bm + i, bx * bn + j * 2], C_s[i, j * 2])
            else:
                for i, j in T.Parallel(bm, bn):
                    T.atomic_add(C[by * bm + i, bx * bn + j], C_s[i, j])

    return main


@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_split_k_with_dtype_width_branch(out_dtype):
    tilelang.testing.set_random_seed(4)
    M, N, K = 64, 96, 128
    kernel = splitk_by_dtype_width(M, N, K, 32, 32, 32, 2, out_dtype=out_dtype)
    a = torch.randn(M, K, dtype=torch.float16) / 4
    b = torch.randn(K, N, dtype=torch.float16) / 4
    c = torch.zeros(M, N, dtype=getattr(torch, out_dtype))
    kernel(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=2e-2)
    src = tilelang.lower(kernel.prim_func, target="cuda -arch=sm_80")
    assert ("tl::atomic_addx2" in src) == (out_dtype == "float16")


# ---- T.Tensor(shape, dtype, buf.data): a view inside a kernel (examples/convolution) ----------
def test_tensor_view_inside_kernel_reads_the_same_storage():
    # was a located rejection; views of global tensors are supported now (more in
    # test_reference_idioms_views.py)
    @T.prim_func
    def conv_like(W: T.Tensor((3, 3, 8, 16), "float16"), O: T.Tensor((72, 16), "float16")):
        with T.Kernel(1, threads=128) as bx:
            w_flat = T.Tensor((72, 16), "float16", W.data)
            for i, j in T.Parallel(72, 16):
                O[i, j] = w_flat[i, j]

    w = torch.randn(3, 3, 8, 16).half()
    o = torch.zeros(72, 16).half()
    tilelang.compile(conv_like, target="cpu")(w, o)
    assert torch.equal(o, w.reshape(72, 16))


def test_tensor_annotation_with_data_none_and_strides_still_works():
    spec = T.Tensor((4, 8), "float32", None, (8, 1))
    assert spec.strides == (8, 1) and spec.shape == (4, 8)


@pytest.mark.parametrize("tm,tn,group", [(9, 5, 8), (16, 3, 4), (5, 7, 1), (3, 4, 8)])
def test_persistent_visits_every_tile_once_in_groups_of_rows(tm, tn, group):
    """Each block records the tiles it visits, in order; together they cover the domain once,
    and consecutive tiles walk `group` rows column by column (the last group may be short)."""
    blocks, waves = 4, (tm * tn + 3) // 4

    @T.prim_func
    def visits(out: T.Tensor((blocks, waves, 2), "int32")):
        with T.Kernel(blocks, threads=1) as bid:
            for w in T.serial(waves):
                out[bid, w, 0] = -1
                out[bid, w, 1] = -1
            n = T.alloc_var("int32")
            for bx, by in T.Persistent([tm, tn], blocks, bid, group_size=group):
                out[bid, n, 0] = bx
                out[bid, n, 1] = by
                n = n + 1

    out = torch.zeros(blocks, waves, 2, dtype=torch.int32)
    tilelang.compile(visits, target="cpu")(out)
    order = [None] * (tm * tn)
    for b in range(blocks):
        for w in range(waves):
            if out[b, w, 0] >= 0:
                order[w * blocks + b] = (int(out[b, w, 0]), int(out[b, w, 1]))
    assert sorted(order) == [(i, j) for i in range(tm) for j in range(tn)]
    g = max(group, 1)
    want = []
    for first in range(0, tm, g):
        rows = min(g, tm - first)
        want += [(first + r, c) for c in range(tn) for r in range(rows)]
    assert order == want
