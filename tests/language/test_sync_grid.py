"""T.sync_grid: cooperative_groups' grid barrier in a cooperative launch; on the interpreter
the blocks run side by side."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import compile_cuda, toolkit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu import role_kernels as R  # noqa: E402


@pytest.mark.parametrize("N,blocks", [(1000, 8), (77, 3), (5000, 16)])
def test_interpreter(N, blocks):
    a = torch.rand(N) + 0.5
    p = torch.full((blocks,), float("nan"))
    b = torch.full((N,), float("nan"))
    tilelang.compile(R.grid_normalise(N, blocks), target="cpu")(a, p, b)
    torch.testing.assert_close(b, a / a.sum(), rtol=1e-5, atol=1e-7)


def test_cooperative_launch_of_the_cooperative_groups_barrier():
    k = tilelang.compile(R.grid_normalise(1000, 8), target="cuda -arch=sm_90a")
    launch, = k.adapter.module.kernels
    assert launch.cooperative and not k.adapter.module.workspaces
    src = k.get_kernel_source()
    assert "#include <cooperative_groups.h>" in src
    assert src.count("cooperative_groups::this_grid().sync();") == 1


@pytest.mark.skipif(toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
                    reason="no CUDA compiler (NVRTC or nvcc) installed")
def test_builds_for_sm80():
    compile_cuda(tilelang.lower(R.grid_normalise(1000, 8), target="cuda -arch=sm_80"), "sm_80")


def test_blocks_that_skip_the_barrier_are_an_error():
    @T.prim_func
    def f(A: T.Tensor((4,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            if bx > 0:
                T.sync_grid()

    with pytest.raises(RuntimeError, match="wait on each other forever"):
        tilelang.compile(f, target="cpu")(torch.zeros(4))
