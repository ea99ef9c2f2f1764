"""Lazy JIT errors: contradicting dtype/rank/size, T.dyn name clashes, argument counts."""

import pytest
import torch

import tilelang
import tilelang.language as T


@tilelang.lazy_jit
def gemm_dyn(
    A: T.Tensor[[int, T.dyn["K"]], T.float16],  # noqa: F821
    B: T.Tensor[[T.dyn["K"], int], T.float16],  # noqa: F821
    block: int = 32,
):
    M, K = A.shape
    K, N = B.shape
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block), T.ceildiv(N, block), threads=128) as (bx, by):
        A_s = T.alloc_shared((block, block), T.float16)
        B_s = T.alloc_shared((block, block), T.float16)
        C_l = T.alloc_fragment((block, block), T.float32)
        T.clear(C_l)
        for k in T.Pipelined(T.ceildiv(K, block), num_stages=1):
            T.copy(A[bx * block, k * block], A_s)
            T.copy(B[k * block, by * block], B_s)
            T.gemm(A_s, B_s, C_l)
        T.copy(C_l, C[bx * block, by * block])
    return C


def h(*shape):
    return torch.randn(*shape).half()


def test_dtype_mismatch_names_parameter_expected_and_actual():
    for _ in range(2):  # the second time the key is cached: same message
        with pytest.raises(ValueError) as e:
            gemm_dyn(torch.randn(32, 32), h(32, 32))
        msg = str(e.value)
        assert "'A'" in msg and "float16" in msg and "float32" in msg


def test_rank_mismatch():
    with pytest.raises(ValueError) as e:
        gemm_dyn(h(32, 32), h(32, 32, 2))
    msg = str(e.value)
    assert "'B'" in msg and "2-D" in msg and "3-D" in msg


def test_fixed_size_mismatch():
    @tilelang.lazy_jit
    def first(A: T.Tensor[[4, T.dyn], T.float32]):
        M, N = A.shape
        B = T.empty((N,), T.float32)
        with T.Kernel(1, threads=32) as _:
            for j in T.Parallel(N):
                B[j] = A[0, j]
        return B

    x = torch.randn(4, 8)
    torch.testing.assert_close(first(x), x[0])
    with pytest.raises(ValueError) as e:
        first(torch.randn(5, 8))
    msg = str(e.value)  # checked by the cached kernel's argument checks
    assert "'A'" in msg and "shape[0]" in msg and "4" in msg and "5" in msg


def test_named_dyn_values_must_agree_at_call_time():
    a, b = h(32, 64), h(64, 32)
    torch.testing.assert_close(gemm_dyn(a, b), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    traces = gemm_dyn.trace_count
    with pytest.raises(ValueError) as e:
        gemm_dyn(h(32, 64), h(96, 32))  # same key (K is runtime), K differs
    msg = str(e.value)
    assert "'A'" in msg and "'B'" in msg and "K" in msg and "64" in msg and "96" in msg
    assert gemm_dyn.trace_count == traces


def test_wrong_argument_count_says_what_is_expected():
    a, b = h(32, 64), h(64, 32)
    with pytest.raises(TypeError) as e:
        gemm_dyn(a)
    assert "missing" in str(e.value) and "'B'" in str(e.value) and "A, B, block=32" in str(e.value)
    with pytest.raises(TypeError) as e:
        gemm_dyn(a, b, 32, 1)
    assert "takes 3 positional argument(s) (A, B, block=32) but 4 were given" in str(e.value)
    with pytest.raises(TypeError) as e:
        gemm_dyn(a, b, blok=32)
    assert "'blok'" in str(e.value)
    with pytest.raises(TypeError):
        gemm_dyn(a, b, 32, A=a)


def test_non_tensor_and_bad_constants():
    with pytest.raises(TypeError) as e:
        gemm_dyn([1, 2], h(4, 4))
    assert "'A'" in str(e.value) and "tensor" in str(e.value)
    with pytest.raises(TypeError) as e:
        gemm_dyn(h(32, 32), h(32, 32), h(1))
    assert "'block'" in str(e.value) and "int" in str(e.value)


def test_ptr_needs_match_buffer_and_bad_returns():
    @tilelang.lazy_jit
    def no_match(A: T.ptr, n: int):
        with T.Kernel(1) as _:
            pass

    with pytest.raises(TypeError) as e:
        no_match(torch.zeros(4), 4)
    assert "T.match_buffer" in str(e.value)

    @tilelang.lazy_jit
    def returns_int(A: T.Tensor[[int], T.float32]):
        with T.Kernel(1) as _:
            pass
        return 3

    with pytest.raises(TypeError) as e:
        returns_int(torch.zeros(4))
    assert "returns 3" in str(e.value)

    @tilelang.lazy_jit
    def empty_in_kernel(A: T.Tensor[[int], T.float32]):
        with T.Kernel(1) as _:
            C = T.empty((4,), T.float32)
        return C

    with pytest.raises(RuntimeError) as e:
        empty_in_kernel(torch.zeros(4))
    assert "outside" in str(e.value)


def test_const_bound_by_two_tensors_must_agree():
    @tilelang.jit
    def add(A, B):
        N = T.const("N")
        A: T.Tensor[[N], T.float32]
        B: T.Tensor[[N], T.float32]
        C = T.empty((N,), T.float32)
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(N):
                C[i] = A[i] + B[i]
        return C

    x, y = torch.randn(16), torch.randn(16)
    torch.testing.assert_close(add(x, y), x + y)
    with pytest.raises(ValueError) as e:
        add(x, torch.randn(8))
    msg = str(e.value)
    assert "'B'" in msg and "shape[0] = 8" in msg and "N" in msg and "A.shape[0]" in msg
