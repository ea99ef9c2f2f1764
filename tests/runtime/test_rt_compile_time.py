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


class _FakePathfinder:
    """Stands for cuda.pathfinder: records whether NVRTC was looked up through it."""

    def __init__(self, path):
        self.calls = 0
        self.path = path

    def load_nvidia_dynamic_lib(self, name):
        self.calls += 1
        return type("Loaded", (), {"abs_path": self.path})()


def _fake_pathfinder(monkeypatch, path):
    import sys
    import types

    fake = _FakePathfinder(path)
    module = types.ModuleType("cuda.pathfinder")
    module.load_nvidia_dynamic_lib = fake.load_nvidia_dynamic_lib
    cuda = sys.modules.get("cuda") or types.ModuleType("cuda")
    monkeypatch.setitem(sys.modules, "cuda", cuda)
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", module)
    monkeypatch.setattr(cuda, "pathfinder", module, raising=False)
    return fake


def test_wheel_nvrtc_found_without_pathfinder(monkeypatch, tmp_path):
    """A wheel's libnvrtc in site-packages (cuda-pathfinder's first place, in its order) is
    taken without importing cuda-pathfinder (about 20 ms of a process's first compile)."""
    site = tmp_path / "site"
    for rel in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"):
        (site / rel).mkdir(parents=True)
        (site / rel / "libnvrtc.so.13").write_bytes(b"")
    monkeypatch.setattr(toolkit.sys, "path", [str(tmp_path / "empty"), str(site)])
    monkeypatch.setattr(toolkit, "_loaded_library", lambda stem: None)
    fake = _fake_pathfinder(monkeypatch, "/elsewhere/libnvrtc.so.13")
    assert toolkit._libnvrtc_candidates()[0] == str(site / "nvidia/cu13/lib/libnvrtc.so.13")
    assert fake.calls == 0
    # one loaded already wins (as in cuda-pathfinder)
    monkeypatch.setattr(toolkit, "_loaded_library", lambda stem: "/loaded/libnvrtc.so.13")
    assert toolkit._libnvrtc_candidates()[0] == "/loaded/libnvrtc.so.13"
    # no wheel, nothing loaded: cuda-pathfinder decides
    monkeypatch.setattr(toolkit, "_loaded_library", lambda stem: None)
    monkeypatch.setattr(toolkit.sys, "path", [str(tmp_path / "empty")])
    assert toolkit._libnvrtc_candidates()[0] == "/elsewhere/libnvrtc.so.13"
    assert fake.calls == 1


@requires_nvrtc
def test_nvrtc_compiles_in_a_process_without_torch():
    """NVRTC found without cuda-pathfinder still finds its builtins library (the wheels'
    libnvrtc has no RUNPATH; torch or cuda-pathfinder would have loaded the builtins)."""
    import os
    import subprocess
    import sys

    code = ("import sys\n"
            "from tilelang.runtime import compile_cuda\n"
            "r = compile_cuda('extern \"C\" __global__ void k(int* x) { x[0] = 1; }', 'sm_80',"
            " compiler='nvrtc', use_cache=False)\n"
            "assert 'torch' not in sys.modules\n"
            "print(r.compiler, len(r.cubin) > 0)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=root, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["nvrtc", "True"]
