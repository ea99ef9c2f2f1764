"""`T.ptx_ldmatrix` and `T.ptx_mma` on their own: which lane receives which element (checked
against the PTX fragment tables written out here), one mma atom against torch, the build for
sm_90a, and the errors for misuse (located at the user's line)."""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import toolkit

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


def ldmatrix_kernel(num, trans, dtype="float16", rows=32, cols=16):
    per_lane = num * (4 // (tilelang.language.dtype(dtype).bits // 8))

    @T.prim_func
    def main(S: T.Tensor((rows, cols), dtype), O: T.Tensor((32, per_lane), dtype)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            S_s = T.alloc_shared((rows, cols), dtype)
            L = T.alloc_local((per_lane,), dtype)
            T.copy(S, S_s)
            # lane t points at row t of the tile (matrix t // 8, row t % 8)
            T.ptx_ldmatrix(trans, num, T.access_ptr(S_s[tx, 0], "r"),
                           T.access_ptr(L[0], "w"))
            for v in T.serial(per_lane):
                O[tx, v] = L[v]
    return main


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_distributes_rows_as_ptx_says(num, trans):
    k = tilelang.compile(ldmatrix_kernel(num, trans), target="cpu")
    s = torch.arange(32 * 16, dtype=torch.float32).reshape(32, 16).half()
    out = torch.zeros(32, 2 * num, dtype=torch.float16)
    k(s, out)
    for t in range(32):
        g, q = t // 4, t % 4
        for m in range(num):
            for h in range(2):
                # matrix m = rows 8m .. 8m+7 of the tile, columns 0..7
                want = s[8 * m + 2 * q + h, g] if trans else s[8 * m + g, 2 * q + h]
                assert out[t, 2 * m + h] == want, (t, m, h)


def test_ldmatrix_of_bytes_gives_four_per_register():
    k = tilelang.compile(ldmatrix_kernel(2, False, "int8", 32, 32), target="cpu")
    s = torch.randint(-100, 100, (32, 32), dtype=torch.int8)
    out = torch.zeros(32, 8, dtype=torch.int8)
    k(s, out)
    for t in range(32):
        g, q = t // 4, t % 4
        for m in range(2):
            assert torch.equal(out[t, 4 * m:4 * m + 4], s[8 * m + g, 4 * q:4 * q + 4])


def mma_atom_kernel(in_dtype, acc_dtype, shape, a_t, c_t, k):
    from tilelang.layout import mma_a_fragment, mma_accumulator, mma_b_fragment

    bits = 32 if a_t == "tf32" else tilelang.language.dtype(in_dtype).bits
    fa = mma_a_fragment(16, k, 1, 1, bits)
    fb = mma_b_fragment(k, 8, 1, 1, bits)
    fc = mma_accumulator(16, 8, 1, 1)
    na, nb = fa.num_values, fb.num_values

    @T.prim_func
    def main(A: T.Tensor((16, k), in_dtype), B: T.Tensor((k, 8), in_dtype),
             C: T.Tensor((16, 8), acc_dtype)):
        with T.Kernel(1, threads=32):
            t = T.get_thread_binding()
            a = T.alloc_local((na,), in_dtype)
            b = T.alloc_local((nb,), in_dtype)
            c = T.alloc_local((4,), acc_dtype)
            for v in T.unroll(na):
                a[v] = A[fa.coords(t, v)]
            for v in T.unroll(nb):
                b[v] = B[fb.coords(t, v)]
            for v in T.unroll(4):
                c[v] = C[fc.coords(t, v)]
            T.ptx_mma(acc_dtype, shape, "row", "col", a_t, a_t, c_t, a.data, 0, b.data, 0,
                      c.data, 0, False)
            for v in T.unroll(4):
                C[fc.coords(t, v)] = c[v]
    return main


ATOMS = [("float16", "float32", "m16n8k16", "fp16", "fp32", 16),
         ("bfloat16", "float32", "m16n8k16", "bf16", "fp32", 16),
         ("float16", "float16", "m16n8k16", "fp16", "fp16", 16),
         ("float32", "float32", "m16n8k8", "tf32", "fp32", 8),
         ("int8", "int32", "m16n8k32", "int8", "int32", 32),
         ("float8_e4m3", "float32", "m16n8k32", "e4m3", "fp32", 32)]


@pytest.mark.parametrize("in_dtype,acc,shape,a_t,c_t,k", ATOMS)
def test_mma_atom_adds_a_times_b(in_dtype, acc, shape, a_t, c_t, k):
    torch.manual_seed(3)
    tin, tacc = T.dtype(in_dtype).as_torch(), T.dtype(acc).as_torch()
    if in_dtype == "int8":
        a = torch.randint(-20, 20, (16, k), dtype=tin)
        b = torch.randint(-20, 20, (k, 8), dtype=tin)
        c = torch.randint(-50, 50, (16, 8), dtype=tacc)
    else:
        a, b = torch.randn(16, k).to(tin), torch.randn(k, 8).to(tin)
        c = torch.randn(16, 8).to(tacc)
    ref = a.double() @ b.double() + c.double()
    kernel = tilelang.compile(mma_atom_kernel(in_dtype, acc, shape, a_t, c_t, k), target="cpu")
    kernel(a, b, c)
    if in_dtype == "int8":
        assert torch.equal(c.double(), ref)
    else:
        # float16 accumulators round every sum; tf32 rounds the inputs; else products are
        # exact in float32 and only the summation order differs
        tol = {"fp16": 1e-2, "tf32": 2e-3}.get(c_t if c_t == "fp16" else a_t, 1e-5)
        np.testing.assert_allclose(c.double().numpy(), ref.numpy(), rtol=tol, atol=tol * 4)


@requires_compiler
@pytest.mark.parametrize("in_dtype,acc,shape,a_t,c_t,k", ATOMS)
def test_mma_atom_builds_for_sm90a(in_dtype, acc, shape, a_t, c_t, k):
    src = tilelang.compile(mma_atom_kernel(in_dtype, acc, shape, a_t, c_t, k),
                           target="cuda -arch=sm_90a").get_kernel_source()
    assert f"tl::ptx_mma_{shape}_{a_t}_{c_t}(" in src


@requires_compiler
def test_ldmatrix_builds_for_sm80():
    src = tilelang.compile(ldmatrix_kernel(4, True), target="cuda -arch=sm_80").get_kernel_source()
    assert "tl::ptx_ldmatrix<4, true>(" in src


def _trace(body):
    @T.prim_func
    def main(A: T.Tensor((32, 16), "float16")):
        with T.Kernel(1, threads=32):
            body(A)
    return main


def test_ldmatrix_misuse_is_located():
    def from_global(A):
        L = T.alloc_local((8,), "float16")
        T.ptx_ldmatrix(False, 4, T.access_ptr(A[0, 0], "r"), T.access_ptr(L[0], "w"))

    with pytest.raises(TypeError, match="reads shared memory") as info:
        _trace(from_global)
    assert "test_ptx_intrinsics.py" in str(info.value)

    def wrong_type(A):
        S = T.alloc_shared((32, 16), "float16")
        L = T.alloc_local((8,), "float32")
        T.ptx_ldmatrix(False, 4, T.access_ptr(S[0, 0], "r"), T.access_ptr(L[0], "w"))

    with pytest.raises(TypeError, match="holds float32"):
        _trace(wrong_type)

    def three(A):
        S = T.alloc_shared((32, 16), "float16")
        L = T.alloc_local((8,), "float16")
        T.ptx_ldmatrix(False, 3, T.access_ptr(S[0, 0], "r"), T.access_ptr(L[0], "w"))

    with pytest.raises(ValueError, match="1, 2 or 4"):
        _trace(three)


def test_mma_misuse_is_located():
    def unsupported(A):
        a = T.alloc_local((8,), "float16")
        T.ptx_mma("float32", "m16n8k16", "row", "col", "fp16", "bf16", "fp32", a.data, 0,
                  a.data, 0, a.data, 0, False)

    with pytest.raises(NotImplementedError, match="mixed operand types") as info:
        _trace(unsupported)
    assert "test_ptx_intrinsics.py" in str(info.value)

    def wrong_acc(A):
        a = T.alloc_local((8,), "float16")
        c = T.alloc_local((4,), "float16")
        T.ptx_mma("float32", "m16n8k16", "row", "col", "fp16", "fp16", "fp32", a.data, 0,
                  a.data, 0, c.data, 0, False)

    with pytest.raises(TypeError, match="must hold float32"):
        _trace(wrong_acc)


def test_partial_warp_is_an_interpreter_error():
    @T.prim_func
    def main(S: T.Tensor((32, 16), "float16"), O: T.Tensor((32, 8), "float16")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            S_s = T.alloc_shared((32, 16), "float16")
            L = T.alloc_local((8,), "float16")
            T.copy(S, S_s)
            if tx < 16:
                T.ptx_ldmatrix(False, 4, T.access_ptr(S_s[tx, 0], "r"),
                               T.access_ptr(L[0], "w"))
            for v in T.serial(8):
                O[tx, v] = L[v]

    k = tilelang.compile(main, target="cpu")
    with pytest.raises(ValueError, match="warp-collective"):
        k(torch.zeros(32, 16, dtype=torch.float16), torch.zeros(32, 8, dtype=torch.float16))
