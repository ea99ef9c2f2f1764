"""A tensor argument may be None: the kernel receives a null pointer, which it must not use
(an optional input whose use was traced out, as in the reference's `with_bias=False`)."""

import pytest
import torch

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"


def matmul_bias(M, N, K, with_bias):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float32), B: T.Tensor((K, N), T.float32),
             C: T.Tensor((M, N), T.float32), Bias: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(M, N):
                acc = T.alloc_var(T.float32)
                acc = 0.0
                for k in T.serial(K):
                    acc += A[i, k] * B[k, j]
                if with_bias:
                    acc += Bias[j]
                C[i, j] = acc

    return main


def test_unused_tensor_may_be_none_on_the_interpreter():
    kernel = tilelang.compile(matmul_bias(8, 16, 4, with_bias=False), target="cpu")
    a, b = torch.randn(8, 4), torch.randn(4, 16)
    c = torch.full((8, 16), float("nan"))
    kernel(a, b, c, None)
    torch.testing.assert_close(c, a @ b)


def test_a_used_tensor_passed_as_none_is_refused_before_running():
    """Only a tensor the kernel never mentions may be None, on every backend: a null pointer
    must never reach a kernel that could dereference it (on a GPU that is a fault)."""
    kernel = tilelang.compile(matmul_bias(8, 16, 4, with_bias=True), target="cpu")
    with pytest.raises(TypeError, match="'Bias': expects a torch.Tensor .* got NoneType "
                                        r"\(None, a null pointer, is accepted only"):
        kernel(torch.randn(8, 4), torch.randn(4, 16), torch.empty(8, 16), None)
    plan = tilelang.compile(matmul_bias(8, 16, 4, with_bias=True), target=SM90).plan
    assert plan.unused_buffers == frozenset()
    assert tilelang.compile(matmul_bias(8, 16, 4, with_bias=False),
                            target=SM90).plan.unused_buffers == {3}


def test_sizes_come_from_another_tensor_when_one_is_none():
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Opt: T.Tensor((n,), T.float32),
             Y: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                Y[i] = X[i] * 2

    kernel = tilelang.compile(main, target="cpu")
    x, y = torch.randn(10), torch.empty(10)
    kernel(x, None, y)
    torch.testing.assert_close(y, x * 2)

    @T.prim_func
    def only(Opt: T.Tensor((n,), T.float32), Y: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=4):
            for i in T.Parallel(4):
                Y[i] = 1.0

    with pytest.raises(ValueError, match="size `n` has no value"):
        tilelang.compile(only, target="cpu")(None, torch.empty(4))


def test_outputs_are_still_allocated_and_checked():
    kernel = tilelang.compile(matmul_bias(8, 16, 4, with_bias=False), out_idx=[2], target="cpu")
    a, b = torch.randn(8, 4), torch.randn(4, 16)
    torch.testing.assert_close(kernel(a, b, None), a @ b)
    with pytest.raises(TypeError, match="'A'.*expects a torch.Tensor"):
        kernel("not a tensor", b, None)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_null_pointer_on_the_gpu():
    kernel = tilelang.compile(matmul_bias(64, 48, 16, with_bias=False), target="cuda")
    a, b = torch.randn(64, 16, device="cuda"), torch.randn(16, 48, device="cuda")
    c = torch.full((64, 48), float("nan"), device="cuda")
    kernel(a, b, c, None)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    kernel(a, b, c, None)  # the second call (fast path) falls back to the checked path
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


def test_each_cuda_kernel_has_its_own_kernel_handles():
    def add(value):
        @T.prim_func
        def main(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128) as bx:
                for tx in T.Parallel(128):
                    B[bx * 128 + tx] = A[bx * 128 + tx] + value

        return main

    first = tilelang.compile(add(1.0), out_idx=-1, target="cuda -arch=sm_90a")
    second = tilelang.compile(add(5.0), out_idx=-1, target="cuda -arch=sm_90a")
    assert set(first.adapter.kernels) == {"main_kernel"}
    assert first.adapter.kernels is not second.adapter.kernels
    assert first.adapter.kernels["main_kernel"] is not second.adapter.kernels["main_kernel"]
