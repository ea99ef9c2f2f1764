"""The GEMM-family examples keep the structure their performance depends on (checked on the
generated sm_90a CUDA, no GPU needed), and their less common paths stay correct on the CPU
interpreter at ragged sizes against a float64 torch reference."""

from __future__ import annotations

import re

import pytest
import torch

import tilelang
from tilelang.runtime import toolkit

from example_helpers import EXAMPLES, load_example


def _example(stem):
    return load_example(next(p for p in EXAMPLES if p.stem == stem))


def _bench_source(stem):
    name, func = _example(stem).programs("bench")[-1]
    return tilelang.lower(func, target="cuda -arch=sm_90a")


@pytest.mark.parametrize("stem", ["example_gemm", "example_gemm_swizzle", "example_gemm_splitk",
                                  "example_dequant_gemm_int4"])
def test_bench_kernel_is_tma_fed_wgmma(stem):
    src = _bench_source(stem)
    assert "tl::wgmma_gemm_ss<" in src
    assert "tl::tma_load(" in src
    assert "setmaxnreg" in src  # warp-specialised: producer + consumer warpgroups


def test_dequant_expansion_is_vectorised_and_reads_scales_from_shared():
    src = _bench_source("example_dequant_gemm_int4")
    loop = src[[m.start() for m in re.finditer(r"for \(int ko? = 0;", src)][-1]:]  # consumers
    assert re.search(r"tl::copy_vec<16>\(\(&B_shared\[", loop), "8 weights per 16-byte store"
    assert "Scale[" not in loop, "no global scale loads inside the K loop"
    assert "S_shared[" in loop
    assert "tl::cast<half_t>" not in loop.split("wgmma")[0], "no int->half conversion"


def test_splitk_atomics_options():
    mod = _example("example_gemm_splitk")
    M, N, K, split, cfg = mod.SIZES["bench"]

    def source(**opts):
        return tilelang.lower(mod.matmul_splitk.get_tir(M, N, K, split, **dict(cfg, **opts)),
                              target="cuda -arch=sm_90a")

    vector = source(tma_atomics=False, vector_atomics=True, num_stages=2)
    assert "tl::atomic_addx4(" in vector and "tl::atomic_add(" not in vector
    scalar = source(tma_atomics=False, vector_atomics=False)
    assert "tl::atomic_add(" in scalar and "tl::atomic_addx4(" not in scalar
    tma = _bench_source("example_gemm_splitk")  # the measured-faster default
    # a 128 x 256 float32 tile in 32-column boxes, no element-wise atomics
    assert tma.count("tl::tma_store_add(") == 8 and "tl::atomic_add" not in tma


@pytest.mark.skipif(toolkit.nvrtc_backend() is None, reason="NVRTC is not installed")
@pytest.mark.parametrize("stem", ["example_gemm", "example_gemm_splitk",
                                  "example_dequant_gemm_int4"])
def test_bench_kernel_does_not_spill(stem):
    from tilelang.runtime.compiler import compile_cuda

    log = compile_cuda(_bench_source(stem), "sm_90a", verbose=True, use_cache=False).log
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", log)]
    assert spills and max(spills) == 0, log


@pytest.mark.parametrize("vector_atomics", [True, False])
def test_splitk_ragged_cpu(vector_atomics):
    ex = _example("example_gemm_splitk")
    M, N, K, split = 77, 52, 391, 5  # nothing a multiple of a tile; last slices past K
    kernel = ex.matmul_splitk(M, N, K, split, block_M=32, block_N=32, block_K=16,
                              threads=128, vector_atomics=vector_atomics)
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c = torch.zeros(M, N)
    kernel(a, b, c)
    ex.check(c, a.double() @ b.double(), 1e-5)


@pytest.mark.parametrize("block_K,group", [(32, 64), (128, 32)])
def test_dequant_groups_and_steps_cpu(block_K, group):
    """A group spanning two K-steps, and four groups inside one K-step."""
    ex = _example("example_dequant_gemm_int4")
    M, N, K = 40, 88, 256
    kernel = ex.dequant_gemm_int4(M, N, K, group, block_M=32, block_N=64, block_K=block_K,
                                  num_stages=2, threads=128)
    a = torch.randn(M, K, dtype=torch.float16)
    packed, scale = ex.quantize_int4(torch.randn(N, K), group)
    w = ex.dequantize_int4(packed, scale, group)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    kernel(a, packed.view(torch.int32), scale, c)
    ex.check(c, a.double() @ w.double().t(), 2e-3)


def test_dequant_split_k_cpu():
    """Two K slices added into a zeroed C; ragged M and N."""
    ex = _example("example_dequant_gemm_int4")
    M, N, K, group = 40, 88, 512, 64
    kernel = ex.dequant_gemm_int4(M, N, K, group, block_M=32, block_N=64, block_K=64,
                                  num_stages=2, threads=128, split_k=2)
    a = torch.randn(M, K, dtype=torch.float16)
    packed, scale = ex.quantize_int4(torch.randn(N, K), group)
    w = ex.dequantize_int4(packed, scale, group)
    c = torch.zeros(M, N, dtype=torch.float16)
    kernel(a, packed.view(torch.int32), scale, c)
    ex.check(c, a.double() @ w.double().t(), 2e-3)
