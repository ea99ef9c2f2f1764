"""Second round of reference idioms: a T.Parallel loop that follows an annotated fragment
indexed at a constant column (flash-decoding combine kernels), block-level reads of a fragment
element one thread holds, and buffer views T.Tensor(shape, dtype, X.data) (convolution
examples). Each runs on the CPU interpreter against torch in float64 and is lowered for
sm_80 / sm_90a (generation only)."""

import pytest
import torch

import tilelang
import tilelang.language as T

CUDA_TARGETS = ["cuda -arch=sm_80", "cuda -arch=sm_90a"]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


# ---- loop layout from a fragment indexed [k, c] (element (k, j) on thread j) ------------------
def split_combine(heads, num_split, col, threads=128):
    @T.prim_func
    def main(glse: T.Tensor((heads, num_split), "float32"),
             partial: T.Tensor((heads, num_split, 16), "float32"),
             out: T.Tensor((heads, 16), "float32")):
        with T.Kernel(heads, threads=threads) as by:
            lse_local = T.alloc_fragment([num_split, threads], "float32")
            lse_max = T.alloc_fragment([threads], "float32")
            acc = T.alloc_fragment([16], "float32")
            total = T.alloc_var("float32")
            T.annotate_layout({
                lse_local: T.Fragment(lse_local.shape, forward_thread_fn=lambda i, j: j),
                lse_max: T.Fragment(lse_max.shape, forward_thread_fn=lambda i: i),
            })
            for k in T.Parallel(num_split):
                lse_local[k, col] = glse[by, k]
            T.fill(lse_max, -T.infinity("float32"))  # clear=False reads it first
            T.reduce_max(lse_local, lse_max, dim=0, clear=False)
            scale = T.alloc_var("float32")
            total = 0.0
            for k in T.serial(num_split):  # block-level reads of lse_max[col]
                total += T.exp(glse[by, k] - lse_max[col])
            T.clear(acc)
            for k in T.serial(num_split):
                scale = T.exp(glse[by, k] - lse_max[col]) / total
                for i in T.Parallel(16):
                    acc[i] += partial[by, k, i] * scale
            for i in T.Parallel(16):
                out[by, i] = acc[i]
    return main


def _combine_ref(glse, partial):
    w = torch.softmax(glse.double(), dim=1)
    return (partial.double() * w[:, :, None]).sum(1)


@pytest.mark.parametrize("num_split,col", [(5, 0), (7, 0)])
def test_loop_follows_fragment_at_constant_column(num_split, col):
    heads = 3
    func = split_combine(heads, num_split, col)
    glse = torch.randn(heads, num_split) * 3
    partial = torch.randn(heads, num_split, 16)
    out = torch.zeros(heads, 16)
    tilelang.compile(func, target="cpu")(glse, partial, out)
    torch.testing.assert_close(out.double(), _combine_ref(glse, partial), rtol=1e-5, atol=1e-5)
    for target in CUDA_TARGETS:
        src = tilelang.lower(func, target=target)
        body = src.split("__global__")[1]
        # the fill runs on the one thread holding column `col`, every k on that thread
        assert body.count(f"if (tx == {col})") >= num_split
        assert "lse_max_bcast" in body and "__syncthreads()" in body


def test_owner_loops_at_a_nonzero_column():
    """Writes and reads of lse[k, 3] both run on thread 3."""
    n = 6

    @T.prim_func
    def main(x: T.Tensor((2, n), "float32"), y: T.Tensor((2, n), "float32")):
        with T.Kernel(2, threads=64) as b:
            lse = T.alloc_fragment([n, 64], "float32")
            T.annotate_layout({lse: T.Fragment(lse.shape, forward_thread_fn=lambda i, j: j)})
            for k in T.Parallel(n):
                lse[k, 3] = x[b, k] * 2.0
            for k in T.Parallel(n):
                y[b, k] = lse[k, 3] + k

    x = torch.randn(2, n)
    y = torch.zeros(2, n)
    tilelang.compile(main, target="cpu")(x, y)
    torch.testing.assert_close(y, x * 2 + torch.arange(n).float())
    body = tilelang.lower(main, target="cuda -arch=sm_80").split("__global__")[1]
    assert body.count("if (tx == 3)") == 2 * n
    assert "if (tx == 0)" not in body


def test_block_level_store_to_one_threads_element():
    """A block-level store to an element one thread holds is done by that thread only; a
    later read broadcasts it."""
    @T.prim_func
    def main(x: T.Tensor((4,), "float32"), y: T.Tensor((4,), "float32")):
        with T.Kernel(4, threads=64) as b:
            f = T.alloc_fragment([64], "float32")
            T.annotate_layout({f: T.Fragment(f.shape, forward_thread_fn=lambda i: i)})
            f[0] = x[b] * 2.0
            y[b] = f[0] + 1.0

    x = torch.randn(4)
    y = torch.zeros(4)
    tilelang.compile(main, target="cpu")(x, y)
    torch.testing.assert_close(y, x * 2 + 1)
    body = tilelang.lower(main, target="cuda -arch=sm_80").split("__global__")[1]
    store, bcast = body.index("f[0] = "), body.index("f_bcast[0] = f[0]")
    assert "if (tx == 0)" in body[:store].splitlines()[-2] and store < bcast
    assert "y[b] = f_bcast[0]" in body


# ---- buffer views ------------------------------------------------------------------------------
def test_global_views_read_and_write_the_same_storage():
    N, H, W, C = 2, 5, 3, 12  # ragged: rows of the flat view straddle images

    @T.prim_func
    def main(X: T.Tensor((N, H, W, C), "float32"), Y: T.Tensor((N, H, W, C), "float32")):
        with T.Kernel(T.ceildiv(N * H * W, 8), threads=64) as bx:
            x_flat = T.Tensor((N * H * W, C), "float32", X.data)
            y_flat = T.Tensor((N * H * W * C,), "float32", Y.data)
            for i, j in T.Parallel(8, C):
                r = bx * 8 + i
                if r < N * H * W:
                    y_flat[r * C + j] = x_flat[r, j] * 3.0 + r

    x = torch.randn(N, H, W, C)
    y = torch.full((N, H, W, C), float("nan"))
    tilelang.compile(main, target="cpu")(x, y)
    rows = torch.arange(N * H * W, dtype=torch.float64).view(N, H, W, 1)
    torch.testing.assert_close(y.double(), x.double() * 3 + rows, rtol=1e-6, atol=1e-6)
    for target in CUDA_TARGETS:
        body = tilelang.lower(main, target=target).split("__global__")[1]
        assert "((float*)Y)[" in body and "((float*)X)[" in body


def gemm_through_view(M, N, K, bm=64, bn=64, bk=32):
    # B arrives as (K // 4, 4, N) and is read as a (K, N) matrix through a view
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K // 4, 4, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            B2 = T.Tensor((K, N), "float16", B.data)
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B2[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])
    return main


def test_gemm_operand_through_a_view():
    M, N, K = 96, 64, 128
    func = gemm_through_view(M, N, K)
    a = torch.randn(M, K).half()
    b = torch.randn(K // 4, 4, N).half()
    kern = tilelang.compile(func, out_idx=[2], target="cpu")
    c = kern(a, b)
    torch.testing.assert_close(c.double(), a.double() @ b.reshape(K, N).double(),
                               rtol=1e-3, atol=1e-3)
    for target in CUDA_TARGETS:  # compiled: on sm_90a B2 is a TMA operand over B's memory
        tilelang.compile(func, out_idx=[2], target=target)


@pytest.mark.parametrize("case,message", [
    ("shared", "views of shared.dyn buffers are not supported"),
    ("dtype", "the view has 256 bytes but X has only 128"),
    ("size", "the view has 256 bytes but X has only 128"),
])
def test_view_errors_are_located(case, message):
    def build():
        @T.prim_func
        def main(X: T.Tensor((4, 8), "float32")):
            with T.Kernel(1, threads=32):
                S = T.alloc_shared((4, 8), "float32")
                if case == "shared":
                    v = T.Tensor((32,), "float32", S.data)
                elif case == "dtype":  # another dtype reinterprets the bytes: not more
                    v = T.Tensor((128,), "float16", X.data)
                else:
                    v = T.Tensor((64,), "float32", X.data)
                v[0] = 0.0
        return main

    with pytest.raises((NotImplementedError, ValueError), match=message) as info:
        build()
    assert "test_reference_idioms_views.py" in str(info.value)


# ---- tvm.te.var (the reference's dynamic-shape examples) ---------------------------------------
def test_tvm_te_var_is_a_dynamic_size():
    from tilelang import tvm

    M = tvm.te.var("m")

    @T.prim_func
    def scale_rows(X: T.Tensor((M, 24), "float32"), Y: T.Tensor((M, 24), "float32")):
        with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
            for i, j in T.Parallel(16, 24):
                Y[bx * 16 + i, j] = X[bx * 16 + i, j] * (j + 1)

    kern = tilelang.compile(scale_rows, target="cpu")
    for m in (7, 40):  # ragged: the last block is partial
        x = torch.randn(m, 24)
        y = torch.zeros(m, 24)
        kern(x, y)
        torch.testing.assert_close(y, x * torch.arange(1, 25).float())
    with pytest.raises(AttributeError, match="tvm.te.placeholder is not available"):
        tvm.te.placeholder
