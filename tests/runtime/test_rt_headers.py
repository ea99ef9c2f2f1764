"""The device header library: every wrapper compiles (nvcc and NVRTC, sm_80 and sm_90a),
the generated wgmma header is current, arch guards work, and the host-callable helpers
(rasterisation, wgmma descriptors) are right, run on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rt_helpers import compilers, requires_compiler, requires_nvcc, requires_nvrtc
from tilelang.runtime import CudaCompileError, compile_cuda, toolkit

DATA = Path(__file__).parent / "data"
INCLUDE = Path(toolkit.TILELANG_INCLUDE)
ALL = [(c, a) for c in compilers() for a in ("sm_80", "sm_90a")]


@requires_compiler
@pytest.mark.parametrize("compiler,arch", ALL)
def test_every_wrapper_compiles(compiler, arch):
    src = (DATA / "all_headers.cu").read_text()
    r = compile_cuda(src, arch, compiler=compiler, name="all_headers", verbose=True)
    assert r.cubin[:4] == b"\x7fELF"
    assert "all_headers" in r.log  # ptxas compiled the entry


def test_generated_wgmma_header_is_current():
    p = subprocess.run([sys.executable, str(INCLUDE / "gen_wgmma.py"), "--check"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_generated_wrappers_cover_every_n():
    text = (INCLUDE / "tl" / "wgmma_ops.cuh").read_text()
    for n in range(8, 257, 8):
        for form in ("ss", "rs"):
            for t in ("f16", "bf16"):
                name = f"wgmma_m64n{n}k16_{form}_f32_{t}("
                assert text.count(name) == 1, name
                body = text[text.index(name):].split("\n}\n", 1)[0]
                assert body.count('"+f"(d[') == n // 2
                assert f"m64n{n}k16.f32.{t}.{t}" in body


EXTRA = r"""
#include "tl.cuh"
#include "tl/wgmma_ops_extra.cuh"
extern "C" __global__ void k(float* out, uint32_t* outh, int s) {
  extern __shared__ __align__(1024) unsigned char smem[];
  float acc[64] = {};
  uint32_t hacc[32] = {};
  uint32_t a[4] = {1u, 2u, 3u, 4u};
  uint64_t d = tl::make_smem_desc(smem, tl::WgmmaSwizzle::k128B, 16, 1024);
  tl::wgmma_fence();
  tl::wgmma_ss_ext<128, tl::tfloat32_t>(acc, d, d, s);
  tl::wgmma_ss_ext<64, fp8_e4_t>(acc, d, d, s);
  tl::wgmma_rs_ext<128, fp8_e5_t>(acc, a, d, s);
  tl::wgmma_ss_f16acc_ext<128, half_t, 1, 1, 1, 0>(hacc, d, d, s);
  tl::wgmma_rs_f16acc_ext<128, half_t>(hacc, a, d, s);
  tl::wgmma_commit();
  tl::wgmma_wait<0>();
  for (int i = 0; i < 64; ++i) out[threadIdx.x * 64 + i] = acc[i];
  for (int i = 0; i < 32; ++i) outh[threadIdx.x * 32 + i] = hacc[i];
}
"""


@requires_compiler
@pytest.mark.parametrize("compiler", compilers())
def test_extra_wgmma_types_compile(compiler):
    compile_cuda(EXTRA, "sm_90a", compiler=compiler)
    bad = EXTRA.replace("tl::wgmma_ss_ext<64, fp8_e4_t>(acc", "tl::wgmma_ss_ext<64, fp8_e4_t, 1, 1, 1>(acc")
    with pytest.raises(CudaCompileError, match="must be K-major"):
        compile_cuda(bad, "sm_90a", compiler=compiler)


@requires_compiler
@pytest.mark.parametrize("compiler", compilers())
def test_sm90_parts_are_absent_on_sm80(compiler):
    calls = ["tl::fence_proxy_async()", "tl::wgmma_fence()", "tl::setmaxnreg_inc<232>()",
             "tl::tma_store_arrive()", "tl::stmatrix_x1(p, 0u)"]
    body = "".join(f'extern "C" __global__ void k{i}(float* p) {{ {c}; }}\n'
                   for i, c in enumerate(calls))
    src = '#include "tl.cuh"\n' + body
    with pytest.raises(CudaCompileError) as e:
        compile_cuda(src, "sm_80", compiler=compiler)
    for c in calls:  # each use is reported, by name
        assert c.split("(")[0].split("<")[0].replace("tl::", "") in e.value.log, c
    with pytest.raises(CudaCompileError) as e:  # sm_90 without the 'a' features
        compile_cuda(src, "sm_90", compiler=compiler)
    assert "wgmma_fence" in e.value.log and "setmaxnreg_inc" in e.value.log
    assert "fence_proxy_async" not in e.value.log
    compile_cuda(src, "sm_90a", compiler=compiler)


@requires_compiler
@pytest.mark.parametrize("compiler", compilers())
def test_static_asserts_explain(compiler):
    cases = {
        "tl::setmaxnreg_dec<20>()": "multiple of 8 in [24, 256]",
        "tl::warp_allreduce_lanes<tl::SumOp, 3>(1.0f)": "kThreads must be a power of two",
        "tl::wgmma_ss<12, half_t>((float*)p, 0, 0, 1)": "N must be a multiple of 8",
        "tl::atomic_add((short*)p, 1)": "unsupported element type",
        "tl::cp_async_wait<-1>()": "needs N >= 0",
    }
    body = "".join(f'extern "C" __global__ void k{i}(float* p) {{ {c}; }}\n'
                   for i, c in enumerate(cases))
    with pytest.raises(CudaCompileError) as e:
        compile_cuda('#include "tl.cuh"\n' + body, "sm_90a", compiler=compiler)
    for call, msg in cases.items():
        assert msg in e.value.log, call


SMALL = r"""
#include "tl.cuh"
extern "C" __global__ void __launch_bounds__(128) add(half_t* __restrict__ C,
    const half_t* __restrict__ A, const half_t* __restrict__ B, int n) {
  int i = blockIdx.x * 128 + threadIdx.x;
  if (i < n) C[i] = tl::cast<half_t>(tl::cast<float>(A[i]) + tl::exp(tl::cast<float>(B[i])));
}
"""


@requires_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_nvrtc_compiles_a_small_kernel_with_the_headers(arch):
    # how long it takes is measured by benchmarks/compile_time.py (docs/perf.md), not bounded
    # here: a bound on seconds fails on a loaded machine whatever the code does
    fresh = compile_cuda(SMALL, arch, compiler="nvrtc", use_cache=False)
    print(f"\nNVRTC, small kernel including tl.cuh, {arch}: {fresh.seconds * 1000:.0f} ms")
    assert fresh.cubin[:4] == b"\x7fELF"
    skipped = compile_cuda("#define TL_NO_WGMMA_OPS\n" + SMALL, arch, compiler="nvrtc")
    assert skipped.cubin[:4] == b"\x7fELF"


HOST_TEST = r"""
#include "tl.cuh"
#include "tl/gemm_sm90.cuh"
#include <cstdio>
#include <vector>

// A gemm advances each operand's k = 0 descriptor by kmajor_step per k-step: the sub-tile's
// byte offset must be the one kmajor_byte gives it directly, for every row (the warpgroup's
// slice), start column and step, a positive multiple of 16 bytes.
template <class T, int Rows, int Swz>
static int check_kmajor_steps() {
  int bad = 0;
  const int kK = 32 / int(sizeof(T)), align = 16 / int(sizeof(T));
  for (int r0 = 0; r0 < Rows; r0 += 8)
    for (int c0 = 0; c0 < 4 * Swz; c0 += align)
      for (int k = kK; k <= 512; k += kK) {
        int step = tl::detail::kmajor_step<T, Rows, Swz>(c0, k);
        bad += tl::detail::kmajor_byte<T, Rows, Swz>(r0, c0) + step !=
               tl::detail::kmajor_byte<T, Rows, Swz>(r0, c0 + k);
        bad += step <= 0 || step % 16 != 0;
      }
  return bad;
}

// Rasterisation must be a bijection of the grid for every shape and panel size.
static int check_raster() {
  int bad = 0;
  for (unsigned gx = 1; gx <= 13; ++gx)
    for (unsigned gy = 1; gy <= 11; ++gy)
      for (unsigned panel = 1; panel <= 9; ++panel)
        for (int order = 0; order < 2; ++order) {
          std::vector<int> seen(gx * gy, 0);
          for (unsigned by = 0; by < gy; ++by)
            for (unsigned bx = 0; bx < gx; ++bx) {
              int2 r = order ? tl::rasterize_col(panel, bx, by, gx, gy)
                             : tl::rasterize_row(panel, bx, by, gx, gy);
              if (r.x < 0 || r.y < 0 || r.x >= (int)gx || r.y >= (int)gy) { ++bad; continue; }
              seen[r.y * gx + r.x]++;
            }
          for (int s : seen) bad += s != 1;
        }
  // the order inside a row panel: consecutive blocks walk down the panel first
  int2 a = tl::rasterize_row(4, 0, 0, 8, 8), b = tl::rasterize_row(4, 1, 0, 8, 8);
  int2 c = tl::rasterize_row(4, 4, 0, 8, 8);
  if (!(a.x == 0 && a.y == 0 && b.x == 0 && b.y == 1 && c.x == 1 && c.y == 0)) ++bad;
  return bad;
}

int main() {
  int bad = check_raster();
  bad += check_kmajor_steps<uint16_t, 64, 128>() + check_kmajor_steps<uint16_t, 128, 64>() +
         check_kmajor_steps<uint16_t, 32, 32>() + check_kmajor_steps<uint8_t, 64, 128>() +
         check_kmajor_steps<uint8_t, 256, 64>();
  // wgmma descriptor fields (HARDWARE §6)
  uint64_t d = tl::make_smem_desc_addr(0x2400, tl::WgmmaSwizzle::k128B, 16, 1024, 3);
  unsigned long long want = (0x2400ull >> 4) | (1ull << 16) | (64ull << 32) | (3ull << 49) |
                            (1ull << 62);
  if (d != want) { printf("desc %llx != %llx\n", (unsigned long long)d, want); ++bad; }
  if (tl::smem_desc_advance(d, 32) != want + 2) ++bad;
  uint64_t e = tl::make_smem_desc_addr(0x3FFF0, tl::WgmmaSwizzle::k32B, 2048, 128);
  if ((e & 0x3FFF) != 0x3FFF || ((e >> 16) & 0x3FFF) != 128 || ((e >> 32) & 0x3FFF) != 8 ||
      (e >> 62) != 3) ++bad;
  if (((e >> 46) & 0x3F) != 0 || ((e >> 52) & 0x3FF) != 0) ++bad;  // reserved bits stay 0
  if (tl::ceildiv(10, 4) != 3) ++bad;
  printf("bad=%d\n", bad);
  return bad != 0;
}
"""


@requires_nvcc
def test_host_helpers(tmp_path):
    src = tmp_path / "host_test.cu"
    src.write_text(HOST_TEST)
    exe = tmp_path / "host_test"
    cmd = [toolkit.nvcc_path(), "-std=c++17", "-O1", "-arch=sm_80", f"-I{INCLUDE}", str(src),
           "-o", str(exe)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0 and "host compiler" in (p.stdout + p.stderr).lower():
        pytest.skip("nvcc has no usable host compiler here")
    assert p.returncode == 0, p.stdout + p.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0 and "bad=0" in r.stdout, r.stdout + r.stderr
