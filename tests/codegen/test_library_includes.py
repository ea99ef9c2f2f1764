"""Generated kernels include the device library's math family (tl/math.cuh, reduce.cuh,
atomic.cuh) only when their code names it: tl/core.cuh alone parses in about two thirds of the
time (codegen/module.py `library_includes`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.codegen.module import MATH_FAMILY, library_includes
from tilelang.runtime import compile_cuda

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from rt_helpers import compilers, requires_compiler  # noqa: E402

CORE = '#include "tl/core.cuh"\n'


def includes(*sources, imported=()):
    return library_includes(list(sources), imported).splitlines()


def test_a_kernel_that_names_none_of_the_family_includes_the_core_alone():
    gemm = ("tl::cp_async<16>(A_shared + i, A + j);\ntl::cp_async_commit();\n"
            "tl::wgmma_gemm_ss<128, 128, 32, 2, 1, false, false, 128, 32, 128, 32, 128, 128, 0>"
            "(A_shared, 0, 0, B_shared, 0, 0, C, false, tx);\n"
            "C_out[i] = tl::cast<half_t>(C[i]); tl::half_t h = tl::bit_cast<tl::half_t>(u);")
    assert includes(gemm) == [CORE.strip()]


@pytest.mark.parametrize("code, header", [
    ("x = tl::exp2(y * 1.44f);", "math"),
    ("x = tl::fast_exp2(y);", "math"),
    ("m = tl::max(m, v);", "math"),
    ("q = tl::floordiv(i, 7);", "math"),
    ("v = tl::infinity<float>();", "math"),
    ("v = tl::warp_allreduce<tl::SumOp, 16>(v);", "reduce"),
    ("v = tl::shfl_xor(v, 1);", "reduce"),
    ("tl::atomic_add(&out[i], v, tl::MemoryOrder::relaxed);", "atomic"),
    ("tl::atomic_max(&out[i], v);", "atomic"),
])
def test_each_member_is_included_when_named(code, header):
    assert includes(code) == [CORE.strip(), f'#include "tl/{header}.cuh"']


def test_members_follow_the_family_order_and_come_once():
    a = "x = tl::exp2(y);\ntl::atomic_add(&o[0], x);"
    b = "s = tl::warp_allreduce<tl::MaxOp, 32>(s);\nz = tl::exp2(s);"
    assert includes(a, b) == [CORE.strip()] + [f'#include "tl/{h}.cuh"' for h in MATH_FAMILY]


def test_hand_written_cuda_gets_the_whole_library():
    assert includes("x = y;", imported=["__device__ float f(float v) { return v; }\n"]) == \
        ['#include "tl.cuh"']


def test_a_name_in_a_longer_identifier_or_another_namespace_is_not_a_use():
    assert includes("x = tl::exp2_table[i]; y = ::exp2f(z); w = std::max(a, b);") == \
        [CORE.strip()]


CORE_KERNEL = r"""
{prelude}#include "tl/gemm_sm80.cuh"
#include "tl/gemm_sp_sm80.cuh"
#include "tl/gemm_sm90.cuh"
#include "tl/tile_copy.cuh"
extern "C" __global__ void k(float* x) {{ x[threadIdx.x] = tl::cast<float>(x[0]); }}
"""


@requires_compiler
@pytest.mark.parametrize("compiler", compilers())
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_the_core_and_the_gemm_headers_need_nothing_of_the_family(compiler, arch):
    compile_cuda(CORE_KERNEL.format(prelude=CORE), arch, compiler=compiler, use_cache=False)


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
    softmax = tilelang.compile(_softmax_rows(), target=f"cuda -arch={arch}")
    src = softmax.get_kernel_source()
    assert CORE.strip() in src
    assert '#include "tl/math.cuh"' in src and '#include "tl/atomic.cuh"' in src
    copy = tilelang.compile(_copy(), target=f"cuda -arch={arch}").get_kernel_source()
    assert CORE.strip() in copy
    assert not any(f'"tl/{h}.cuh"' in copy for h in MATH_FAMILY) and '"tl.cuh"' not in copy
