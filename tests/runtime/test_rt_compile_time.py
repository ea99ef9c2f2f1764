"""What keeps a cold compile short (issue 5) without changing the machine code: generated
kernels parse only the wgmma shapes they issue (TL_WGMMA_SELECT), and finding the CUDA
headers does not start cuda-pathfinder's subprocess search when a toolkit has them."""

from __future__ import annotations

import pytest

from rt_helpers import compilers, requires_compiler, requires_nvrtc
from tilelang.codegen.module import wgmma_select
from tilelang.runtime import CudaCompileError, compile_cuda, toolkit

GEMM = r"""
#include "tl.cuh"
#include "tl/gemm_sm80.cuh"
#include "tl/gemm_sm90.cuh"
extern "C" __global__ void __launch_bounds__(256) k(float* out, half_t* A, half_t* B) {
  extern __shared__ __align__(1024) unsigned char smem[];
  half_t* As = reinterpret_cast<half_t*>(smem);
  half_t* Bs = reinterpret_cast<half_t*>(smem + 16384);
  float C[64];
  tl::wgmma_gemm_ss<128, 128, 64, 2, 1, false, true, 128, 64, 128, 128, 64, 128, 0>(
      As, 0, 0, Bs, 0, 0, C, true, threadIdx.x);
  for (int i = 0; i < 64; ++i) out[threadIdx.x * 64 + i] = C[i];
}
"""


def test_select_names_the_tile_widths_issued():
    src = ("tl::wgmma_gemm_ss<128, 256, 64, 2, 1, false, false, 128, 64, 128, 64, 256, 128, 0>"
           "(A, 0, 0, B, 0, 0, C, false, tx);\n"
           "tl::wgmma_gemm_rs<128, 128, 64, 1, 2, true, 64, 128, 128, 0>(A, B, 0, 0, C, true, "
           "tx);")
    text = wgmma_select([src])
    assert text.splitlines() == ["#define TL_WGMMA_SELECT", "#define TL_WGMMA_N64",
                                 "#define TL_WGMMA_N256"]
    assert "TL_WGMMA_FP8" in wgmma_select(["fp8_e4_t* A_shared;\n" + src])
    assert wgmma_select(["C[i] = A[i] + B[i];"]) == "#define TL_WGMMA_SELECT\n"


def test_select_is_off_for_hand_written_wgmma():
    assert wgmma_select(["tl::wgmma_ss<64, half_t>(d, a, b, 1);"]) == ""
    assert wgmma_select(["tl::wgmma_m64n64k16_ss_f32_f16(d, a, b, 1);"]) == ""
    assert wgmma_select(["x"], imported=["__device__ void f() {}\n"]) == ""


@requires_nvrtc
def test_selected_shapes_give_the_same_cubin():
    full = compile_cuda(GEMM, "sm_90a", compiler="nvrtc", use_cache=False)
    sel = compile_cuda("#define TL_WGMMA_SELECT\n#define TL_WGMMA_N128\n" + GEMM, "sm_90a",
                       compiler="nvrtc", use_cache=False)
    assert sel.cubin == full.cubin


@requires_compiler
@pytest.mark.parametrize("compiler", compilers())
def test_left_out_shape_is_a_compile_error(compiler):
    with pytest.raises(CudaCompileError) as e:
        compile_cuda("#define TL_WGMMA_SELECT\n#define TL_WGMMA_N64\n" + GEMM, "sm_90a",
                     compiler=compiler, use_cache=False)
    assert "this N was left out of the build" in e.value.log
    fp8 = GEMM.replace("half_t* A, half_t* B", "fp8_e4_t* A, fp8_e4_t* B").replace(
        "half_t* As = reinterpret_cast<half_t*>", "fp8_e4_t* As = reinterpret_cast<fp8_e4_t*>"
    ).replace("half_t* Bs = reinterpret_cast<half_t*>",
              "fp8_e4_t* Bs = reinterpret_cast<fp8_e4_t*>")
    with pytest.raises(CudaCompileError) as e:
        compile_cuda("#define TL_WGMMA_SELECT\n#define TL_WGMMA_N128\n" + fp8, "sm_90a",
                     compiler=compiler, use_cache=False)
    assert "8-bit wgmma wrappers left out" in e.value.log


def test_cuda_headers_found_without_pathfinder(monkeypatch):
    """A toolkit's include/ is taken before cuda-pathfinder (whose search may spawn a Python
    subprocess) is consulted."""
    home = next((h for h in toolkit._cuda_homes() if toolkit._has_cuda_headers(
        f"{h}/include")), None)
    if home is None:
        pytest.skip("no CUDA toolkit headers")
    try:
        from cuda import pathfinder
    except ImportError:
        pathfinder = None
    if pathfinder is not None:
        def boom(*a, **k):
            raise AssertionError("cuda-pathfinder consulted although a toolkit has the headers")

        monkeypatch.setattr(pathfinder, "find_nvidia_header_directory", boom)
    toolkit.cuda_include_dir.cache_clear()
    try:
        assert toolkit.cuda_include_dir() == f"{home}/include"
    finally:
        toolkit.cuda_include_dir.cache_clear()
