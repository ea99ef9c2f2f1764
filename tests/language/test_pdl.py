"""Programs of several kernels linked by programmatic dependent launch (`T.pdl_trigger`,
`T.pdl_sync`), and `with T.Kernel(n) as (bx,):` (a one-dimensional grid unpacked)."""

import pytest
import torch

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"


def two_kernels(N, block=64, pdl=True):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32),
             C: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as (bx,):
            for i in T.Parallel(block):
                idx = bx * block + i
                if idx < N:
                    B[idx] = A[idx] + 1.0
            if pdl:
                T.pdl_trigger()
        with T.Kernel(T.ceildiv(N, block), threads=block) as (bx2,):
            if pdl:
                T.pdl_sync()
            for i in T.Parallel(block):
                idx = bx2 * block + i
                if idx < N:
                    C[idx] = B[idx] * 2.0

    return main


def test_one_dim_grid_unpacks_as_a_tuple():
    seen = {}

    @T.prim_func
    def main(A: T.Tensor((128,), T.float32)):
        with T.Kernel(2, threads=64) as (bx,):
            seen["bx"] = bx
            for i in T.Parallel(64):
                A[bx * 64 + i] = 1.0

    assert seen["bx"].name == "bx"
    a = torch.zeros(128)
    tilelang.compile(main, target="cpu")(a)
    assert bool((a == 1).all())


@pytest.mark.parametrize("n", [1, 100, 257])
def test_dependent_kernels_run_in_order_on_the_interpreter(n):
    kernel = tilelang.compile(two_kernels(n), target="cpu")
    a = torch.randn(n)
    b = torch.full((n,), float("nan"))
    c = torch.full((n,), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(b, a + 1)
    torch.testing.assert_close(c, (a + 1) * 2)


def test_pdl_calls_in_the_cuda_source_of_each_kernel():
    src = tilelang.compile(two_kernels(100), target=SM90).get_kernel_source()
    first, second = src.split("__global__")[1:3]
    trigger, wait = "cudaTriggerProgrammaticLaunchCompletion()", "cudaGridDependencySynchronize()"
    assert trigger in first and wait not in first
    assert wait in second and trigger not in second
    # the wait comes before the dependent kernel reads B
    assert second.index(wait) < second.index("B[")
    # what the waiting kernel reads was written while it ran: no __restrict__ there
    assert "__restrict__" in first and "__restrict__" not in second


def test_pdl_builds_for_sm80_where_it_is_a_no_op():
    src = tilelang.compile(two_kernels(100), target="cuda -arch=sm_80").get_kernel_source()
    assert "tl::pdl_sync();" in src


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("n", [1, 1000, 4099])
def test_dependent_kernels_on_the_gpu(n):
    kernel = tilelang.compile(two_kernels(n, block=256), target="cuda")
    a = torch.randn(n, device="cuda")
    b = torch.full((n,), float("nan"), device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    kernel(a, b, c)
    torch.testing.assert_close(b, a + 1)
    torch.testing.assert_close(c, (a + 1) * 2)
