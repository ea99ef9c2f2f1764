"""Generated kernels include tl/common.cuh and only the headers of the device library whose names
their code uses (codegen/library.py `library_includes`): NVRTC parses what a kernel needs, not the
whole library."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.codegen import library
from tilelang.codegen.library import library_headers, library_includes
from tilelang.runtime import compile_cuda

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from rt_helpers import compilers, requires_compiler  # noqa: E402

COMMON = '#include "tl/common.cuh"'


def includes(*sources, imported=()):
    return library_includes(list(sources), imported).splitlines()


def test_a_kernel_that_names_only_common_includes_common_alone():
    code = "C_out[i] = tl::cast<half_t>(C[i]); tl::half_t h = tl::bit_cast<tl::half_t>(u);"
    assert includes(code) == [COMMON]


@pytest.mark.parametrize("code, header", [
    ("tl::cp_async<16>(A_shared + i, A + j);", "copy"),
    ("x = tl::exp2(y * 1.44f);", "math"),
    ("x = tl::fast_exp2(y);", "math"),
    ("m = tl::max(m, v);", "math"),
    ("q = tl::floordiv(i, 7);", "math"),
    ("v = tl::infinity<float>();", "math"),
    ("v = tl::warp_allreduce<tl::SumOp, 16>(v);", "reduce"),
    ("tl::atomic_add(&out[i], v, tl::MemoryOrder::relaxed);", "atomic"),
    ("tl::stmatrix_x4(p, a, b, c, d);", "ldmatrix"),
    ("const int2 b = tl::rasterize_row(8, blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);",
     "rasterize"),
    ("tl::mbarrier_wait(bar[0], phase);", "barrier"),
    ("tl::tma_load(&desc, bar[0], smem, 0, 0);", "tma"),
    ("tl::wgmma_fence_operands(C);", "wgmma"),
    ("tl::wgmma_m64n64k16_ss_f32_f16(d, a, b, 1);", "wgmma"),  # tl/wgmma_ops.cuh, via wgmma
    ("tl::setmaxnreg_inc<240>();", "setmaxnreg"),
    # defined outside namespace tl (NVRTC lacks the CUDA runtime's device-side PDL functions)
    ("cudaGridDependencySynchronize();", "barrier"),
    ("cudaTriggerProgrammaticLaunchCompletion();", "barrier"),
])
def test_each_header_is_included_when_named(code, header):
    assert includes(code) == [COMMON, f'#include "tl/{header}.cuh"']


def test_headers_follow_the_library_order_and_come_once():
    a = "x = tl::exp2(y);\ntl::atomic_add(&o[0], x);"
    b = "tl::cp_async_commit();\nz = tl::exp2(s);"
    assert includes(a, b) == [COMMON, '#include "tl/math.cuh"', '#include "tl/copy.cuh"',
                              '#include "tl/atomic.cuh"']


def test_hand_written_cuda_gets_the_whole_library():
    assert includes("x = y;", imported=["__device__ float f(float v) { return v; }\n"]) == \
        ['#include "tl.cuh"']


def test_a_name_in_a_longer_identifier_or_another_namespace_is_not_a_use():
    assert includes("x = tl::exp2_table[i]; y = ::exp2f(z); w = std::max(a, b);") == [COMMON]


def test_the_name_table_is_what_the_headers_define():
    """codegen/library_names.py is regenerated whenever a header changes (`python -m
    tilelang.codegen.library`)."""
    from tilelang.codegen import library_names

    assert library_names.SIZES == library.header_sizes()
    assert library_names.HEADERS == library.read_headers()
    assert library.main(["--check"]) == 0


def test_a_header_edited_since_the_table_was_made_is_read_again(monkeypatch):
    """Where a header's size differs from the table's (an edit in a checkout), the names come
    from the headers, not from the table."""
    fresh = (("tl/math.cuh", ("only_in_the_edited_header",), ()),)
    monkeypatch.setattr(library, "read_headers", lambda: fresh)
    library_headers.cache_clear()
    try:
        assert includes("tl::exp2(x);") == [COMMON, '#include "tl/math.cuh"']  # the table
        sizes = library.header_sizes()
        sizes["tl/math.cuh"] += 1
        monkeypatch.setattr(library, "header_sizes", lambda: sizes)
        library_headers.cache_clear()
        assert includes("tl::exp2(x);") == [COMMON]
        assert includes("tl::only_in_the_edited_header(x);") == [COMMON, '#include "tl/math.cuh"']
    finally:
        library_headers.cache_clear()


def test_headers_mark_where_namespace_tl_ends():
    """The name reader tells names inside `namespace tl` from those outside by these lines."""
    for path in sorted((Path(tilelang.__file__).parent / "include" / "tl").glob("*.cuh")):
        lines = path.read_text().splitlines()
        opens = sum(1 for line in lines if line.startswith("namespace tl {"))
        closes = sum(1 for line in lines if line.rstrip() == "}  // namespace tl")
        assert opens == closes, path.name


def test_every_header_of_the_library_has_names():
    text = (Path(tilelang.__file__).parent / "include" / "tl.cuh").read_text()
    listed = [line.split('"')[1] for line in text.splitlines() if line.startswith("#include")]
    assert [h for h, *_ in library_headers()] == listed[1:]


@requires_compiler
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_each_header_compiles_after_common_alone(arch):
    """What a kernel includes is common.cuh and some headers: each must bring what it builds
    on (the gemm and tile-copy headers codegen adds by feature too)."""
    extra = ["gemm_sm80", "gemm_sp_sm80", "gemm_sm90", "tile_copy"]
    body = '\nextern "C" __global__ void k(float* x) { x[threadIdx.x] = tl::cast<float>(x[0]); }\n'
    for header in [h for h, *_ in library_headers()] + [f"tl/{h}.cuh" for h in extra]:
        compile_cuda(f'{COMMON}\n#include "{header}"{body}', arch, compiler=compilers()[0],
                     use_cache=False)


def _softmax_rows(M=64, N=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
             S: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((M, N), "float32")
            m = T.alloc_fragment((M,), "float32")
            T.copy(A, a)
            T.reduce_max(a, m, dim=1)
            for i, j in T.Parallel(M, N):
                a[i, j] = T.exp2(a[i, j] - m[i])
            T.copy(a, B)
            for i in T.Parallel(M):
                T.atomic_add(S[i], m[i])

    return main


def _copy(M=64, N=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((M, N), "float16")
            T.copy(A, s)
            T.copy(s, B)

    return main


@requires_compiler
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_generated_kernels_compile_with_what_they_include(arch):
    src = tilelang.compile(_softmax_rows(), target=f"cuda -arch={arch}").get_kernel_source()
    assert COMMON in src and '"tl.cuh"' not in src
    assert '#include "tl/math.cuh"' in src and '#include "tl/atomic.cuh"' in src
    copy = tilelang.compile(_copy(), target=f"cuda -arch={arch}").get_kernel_source()
    assert COMMON in copy and '"tl/math.cuh"' not in copy and '"tl/atomic.cuh"' not in copy
