"""compile_cuda: real kernels through nvcc and NVRTC (both access paths), for sm_80 and
sm_90a; option translation; compile errors. No GPU needed."""

from __future__ import annotations

import re
import struct

import pytest

from rt_helpers import compilers, nvrtc_kinds, requires_compiler, requires_nvcc, requires_nvrtc
from tilelang.runtime import CudaCompileError, compile_cuda, normalize_arch

SAXPY = r"""
#include "tl.cuh"
extern "C" __global__ void saxpy(float* __restrict__ y, const half_t* __restrict__ x,
                                 float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * tl::cast<float>(x[i]) + y[i] + MARK;
}
"""

WGMMA = r"""
#include "tl.cuh"
extern "C" __global__ void k(float* out, int s) {
  extern __shared__ __align__(1024) unsigned char smem[];
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  uint64_t d = tl::make_smem_desc(smem, tl::WgmmaSwizzle::k128B, 16, 1024);
  tl::wgmma_fence();
  tl::wgmma_m64n8k16_ss_f32_bf16(acc, d, d, s);
  tl::wgmma_commit();
  tl::wgmma_wait<0>();
  out[threadIdx.x] = acc[0] + acc[3];
}
"""


def _sm_of_cubin(cubin: bytes) -> int:
    assert cubin[:4] == b"\x7fELF", "not an ELF cubin"
    (machine,) = struct.unpack_from("<H", cubin, 18)
    assert machine == 190, f"ELF machine {machine} is not EM_CUDA"
    (flags,) = struct.unpack_from("<I", cubin, 48)
    return (flags >> 8) & 0xFF


ALL = [(c, a) for c in compilers() for a in ("sm_80", "sm_90a")]


@requires_compiler
@pytest.mark.parametrize("compiler,arch", ALL)
def test_compiles_small_kernel(compiler, arch):
    r = compile_cuda(SAXPY.replace("MARK", "1.0f"), arch, compiler=compiler)
    assert r.compiler == compiler
    assert r.cache_hit is False and r.seconds > 0
    assert _sm_of_cubin(r.cubin) == int(arch[3:5])
    assert r.arch == arch


@requires_nvrtc
@pytest.mark.parametrize("kind", nvrtc_kinds())
def test_nvrtc_access_paths_agree(kind):
    r = compile_cuda(SAXPY.replace("MARK", "2.0f"), "sm_80", compiler=f"nvrtc-{kind}",
                     use_cache=False)
    ref = compile_cuda(SAXPY.replace("MARK", "2.0f"), "sm_80", compiler="nvrtc",
                       use_cache=False)
    assert r.compiler == "nvrtc"
    assert r.cubin == ref.cubin  # the same library behind both paths


@requires_compiler
@pytest.mark.parametrize("compiler", compilers())
def test_wgmma_needs_the_a_target(compiler):
    r = compile_cuda(WGMMA, "sm_90a", compiler=compiler)
    assert _sm_of_cubin(r.cubin) == 90
    with pytest.raises(CudaCompileError) as e:
        compile_cuda(WGMMA, "sm_90", compiler=compiler)
    assert "wgmma" in str(e.value)


@requires_compiler
@pytest.mark.parametrize("compiler", compilers())
def test_options_translate(compiler):
    src = SAXPY.replace("MARK", "SHIFT")
    r = compile_cuda(src, "sm_80", options=["-O3", "-DSHIFT=3.0f", "-Xptxas", "-v",
                                            "--use_fast_math", "-lineinfo",
                                            "-maxrregcount=24"],
                     compiler=compiler)
    m = re.search(r"Used (\d+) registers", r.log)
    assert m, f"no ptxas resource line in the log:\n{r.log}"
    assert int(m.group(1)) <= 24
    v = compile_cuda(src, "sm_80", options=["-DSHIFT=3.0f"], compiler=compiler, verbose=True)
    assert "registers" in v.log
    q = compile_cuda(src, "sm_80", options=["-DSHIFT=3.0f"], compiler=compiler)
    assert "registers" not in q.log


@requires_compiler
@pytest.mark.parametrize("compiler", compilers())
def test_compile_error_shows_source_lines(compiler):
    src = SAXPY.replace("MARK", "undefined_name_xyz")
    with pytest.raises(CudaCompileError) as e:
        compile_cuda(src, "sm_80", compiler=compiler, name="my_kernel")
    msg = str(e.value)
    assert "undefined_name_xyz" in msg and "my_kernel" in msg
    line = src.split("\n").index(next(ln for ln in src.split("\n") if "undefined_name" in ln))
    assert e.value.line == line + 1
    assert f">{line + 1:5d} |" in msg  # the offending line, marked, with its neighbours
    assert "full source written to" in msg
    with open(e.value.source_path) as f:
        assert f.read() == src
    assert "undefined_name_xyz" in e.value.log


@requires_compiler
@pytest.mark.parametrize("compiler", compilers())
def test_error_inside_header_points_at_it(compiler):
    src = '#include "tl.cuh"\nextern "C" __global__ void k(float* a) { ' \
          'tl::cp_async<3>(a, a); }\n'
    with pytest.raises(CudaCompileError) as e:
        compile_cuda(src, "sm_80", compiler=compiler)
    assert "cp.async copies 4, 8 or 16 bytes" in str(e.value)


def test_arch_names():
    assert normalize_arch("sm_90a") == "sm_90a"
    assert normalize_arch("90a") == "sm_90a"
    assert normalize_arch("sm80") == "sm_80"
    assert normalize_arch("compute_89") == "sm_89"
    with pytest.raises(ValueError):
        normalize_arch("hopper")


@requires_nvcc
def test_missing_compiler_is_reported(monkeypatch):
    from tilelang.runtime import toolkit

    monkeypatch.setattr(toolkit, "nvcc_path", lambda: None)
    with pytest.raises(CudaCompileError, match="nvcc was requested"):
        compile_cuda(SAXPY, "sm_80", compiler="nvcc")


@requires_nvcc
def test_nvcc_fallback_compiles_warp_specialised_hopper_kernels(tmp_path, monkeypatch):
    """mbarrier pointers are `unsigned long long*` in generated code; the header must take the
    same type under nvcc, where uint64_t is `unsigned long` (NVRTC's is `unsigned long long`)."""
    import sys
    from pathlib import Path

    import tilelang

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.gpu import kernels as K

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    source = tilelang.lower(K.flash_fwd(2, 2, 256, 128, False, 128, 64, 2, 256),
                            target="cuda -arch=sm_90a")
    assert "mbarrier_wait" in source and "tma_load" in source
    result = compile_cuda(source, "sm_90a", name="main", compiler="nvcc")
    assert result.cubin[:4] == b"\x7fELF"


@requires_compiler
def test_running_out_of_registers_is_explained():
    """640 threads leave 96 registers a thread; a 64x256 wgmma needs 128 accumulators."""
    import sys
    from pathlib import Path

    import tilelang

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "examples" / "dequantize_gemm"))
    import example_dequant_gemm_int4 as dq

    func = dq.dequant_gemm_int4.get_tir(256, 1024, 1024, 128, block_M=256, block_N=256,
                                        block_K=64, num_stages=2, threads=512)
    with pytest.raises(CudaCompileError) as e:
        tilelang.compile(func, target="cuda -arch=sm_90a")
    msg = str(e.value)
    assert "Insufficient registers" in msg
    assert "a block of 640 threads leaves each thread at most 96" in msg
