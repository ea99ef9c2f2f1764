"""`T.CUDASourceCodeKernel`: a hand-written `__global__` function (inline or from a file)
launched over the given grid with the tensors' pointers and size variables (the reference's
argument order: pointers, then sizes, each sorted by name)."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.language.source_kernel import kernel_names
from tilelang.runtime import toolkit

HAS_COMPILER = toolkit.nvrtc_backend() is not None or toolkit.nvcc_path() is not None
gpu = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                           reason="needs a CUDA GPU")]

# the parameters in the reference's order: Out and X (sorted), then M and N
SOURCE = """
// a helper and two kernels; `scale_rows` is launched
__device__ float twice(float v) { return 2.0f * v; }

extern "C" __global__ void __launch_bounds__(128) scale_rows(float* Out, const float* X,
                                                             int M, int N) {
    __shared__ float row_sum[1];
    int r = blockIdx.x;
    if (threadIdx.x == 0) row_sum[0] = 0.0f;
    __syncthreads();
    for (int c = threadIdx.x; c < N; c += blockDim.x) atomicAdd(&row_sum[0], X[r * N + c]);
    __syncthreads();
    for (int c = threadIdx.x; c < N; c += blockDim.x)
        Out[r * N + c] = twice(X[r * N + c]) + row_sum[0] + (float)M;
}

extern "C" __global__ void unused_kernel(float* Out) { Out[0] = 1.0f; }
"""


def _program(source, entry="scale_rows"):
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Out: T.Tensor((M, N), T.float32)):
        T.CUDASourceCodeKernel(M, threads=128, source_code_or_path=source, entry_name=entry)
    return main


def test_kernel_names():
    assert kernel_names(SOURCE) == ["scale_rows", "unused_kernel"]
    assert kernel_names("/* __global__ void hidden() */ __global__ void k2(int* a) {}") == \
        ["k2"]


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_builds_and_calls_the_entry_in_the_reference_order(arch):
    src = tilelang.compile(_program(SOURCE), target=f"cuda -arch={arch}").get_kernel_source()
    assert "atomicAdd(&row_sum[0], X[r * N + c]);" in src  # the user's text, as written
    # N may be the specialised N_div4 * 4 (sizes that are multiples of 16 bytes)
    assert re.search(r"\bscale_rows\(Out, X, M, N[\w *]*\);", src)


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
def test_loads_the_source_from_a_file(tmp_path):
    path = tmp_path / "kernels.cu"
    path.write_text(SOURCE)
    src = tilelang.lower(_program(path), target="cuda -arch=sm_90a")
    assert "row_sum[0] = 0.0f;" in src.kernel_source


@pytest.mark.parametrize("_", [pytest.param(None, marks=gpu)])
def test_runs(_):
    kernel = tilelang.compile(_program(SOURCE), target="cuda")
    x = torch.randn(37, 300, device="cuda")
    out = torch.full_like(x, float("nan"))
    kernel(x, out)
    want = 2 * x + x.sum(dim=1, keepdim=True) + 37
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-3)


def test_checks():
    with pytest.raises(ValueError, match="Available entries: scale_rows, unused_kernel") as info:
        _program(SOURCE, entry="main_kernel")
    assert "test_source_kernel.py" in str(info.value)
    with pytest.raises(FileNotFoundError, match="CUDA source file not found"):
        _program("no/such/kernels.cu")
    with pytest.raises(ValueError, match="at least one __global__ kernel"):
        _program("__device__ int f() { return 1; }\n")


def test_interpreter_rejects_it():
    with pytest.raises(NotImplementedError, match="runs only on the GPU"):
        tilelang.compile(_program(SOURCE), target="cpu")
