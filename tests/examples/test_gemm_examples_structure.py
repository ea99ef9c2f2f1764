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


def _bench_source(stem, program=None):
    """The sm_90a CUDA of the example's bench program named `program` (default: its last)."""
    progs = dict(_example(stem).programs("bench"))
    func = progs[program] if program else list(progs.values())[-1]
    return tilelang.lower(func, target="cuda -arch=sm_90a")


SS_DEQUANT = ("example_dequant_gemm_int4", "dequant_gemm_int4")


@pytest.mark.parametrize("stem", ["example_gemm", "example_gemm_swizzle", "example_gemm_splitk",
                                  SS_DEQUANT])
def test_bench_kernel_is_tma_fed_wgmma(stem):
    src = _bench_source(*stem) if isinstance(stem, tuple) else _bench_source(stem)
    assert "tl::wgmma_gemm_ss<" in src
    assert "tl::tma_load(" in src
    assert "setmaxnreg" in src  # warp-specialised: producer + consumer warpgroups


def _indexes(tile, text):
    """Whether `text` reads or writes an element of `tile`: `tile[i]`, or inside unrolled
    loops `(tile + (rest))[unrolled]` (codegen/cuda.py)."""
    return re.search(rf"\b{tile}\[|\({tile} \+ \(", text) is not None


def test_register_dequant_expands_pairs_into_two_alternating_fragments():
    src = _bench_source("example_dequant_gemm_int4", "dequant_gemm_int4_rs")
    loop = src[[m.start() for m in re.finditer(r"for \(int ko? = 0;", src)][-1]:]  # consumers
    assert "tl::tma_load(" in src and "setmaxnreg" in src
    # W in registers as the gemm's A operand, one copy per iteration parity, issued without
    # waiting; the expansion writes two weights per 32-bit operation
    assert "tl::wgmma_gemm_rs<" in loop and "W_local_odd" in loop
    assert all(g.endswith("-1>") for g in re.findall(r"tl::wgmma_gemm_rs<[^>]*>", loop))
    assert "*(tl::vec<half_t, 2>*)(W_local + " in loop
    assert "named_barrier_sync" not in loop.split("wgmma_wait_in_place<0>")[0]  # no barrier
    assert "Scale[" not in loop and _indexes("S_shared", loop)
    # the previous stage goes back (from the second iteration on) only once the gemm reading
    # it is complete: the wait sits in the branch, before the arrival
    # (the codes are read from the stage with ordinary loads: a proxy fence follows them,
    # before the stage goes back to the TMA producer)
    handback = re.search(r"tl::fence_proxy_async\(\);\s*if \(ko > 0\) \{"
                         r"\s*tl::wgmma_wait_in_place<0>\(\);"
                         r"\s*tl::wgmma_fence_operands\(Ct_local, 128\);"
                         r"\s*tl::mbarrier_arrive\(", loop)
    assert handback, loop
    # after a wait that leaves a gemm accumulating into Ct_local in flight, no fence touches
    # those registers
    assert not re.search(r"wgmma_wait_in_place<1>\(\);\s*tl::wgmma_fence_operands\(Ct_local",
                         loop)


def test_dequant_expansion_is_vectorised_and_reads_scales_from_shared():
    src = _bench_source(*SS_DEQUANT)
    loop = src[[m.start() for m in re.finditer(r"for \(int ko? = 0;", src)][-1]:]  # consumers
    assert re.search(r"tl::copy_vec<16>\(\(&B_shared\[", loop), "8 weights per 16-byte store"
    assert "Scale[" not in loop, "no global scale loads inside the K loop"
    assert _indexes("S_shared", loop)
    assert "tl::cast<half_t>" not in loop.split("wgmma")[0], "no int->half conversion"


def test_splitk_atomics_options():
    mod = _example("example_gemm_splitk")
    M, N, K, split, cfg = mod.SIZES["bench"]

    def source(**opts):
        return tilelang.lower(mod.matmul_splitk.get_tir(M, N, K, split, **dict(cfg, **opts)),
                              target="cuda -arch=sm_90a")

    vector = source(tma_atomics=False, vector_atomics=True, num_stages=2)
    assert "tl::atomic_addx4(" in vector and "tl::atomic_add(" not in vector
    # straight from the gemm's registers: staged for the TMA unit on sm_90a
    # (transform/stage_fragment_atomics.py), each thread's column pairs, two floats per atomic,
    # without TMA lowering
    staged = source(tma_atomics=False, vector_atomics=False)
    assert staged.count("tl::tma_store_add(") == 8 and "tl::atomic_add" not in staged
    pairs = tilelang.lower(mod.matmul_splitk.get_tir(M, N, K, split, **dict(
        cfg, tma_atomics=False, vector_atomics=False)), target="cuda -arch=sm_90a",
        pass_configs={"tl.disable_tma_lower": True})
    assert "tl::atomic_addx2(" in pairs and "tl::atomic_addx4(" not in pairs
    # the measured-faster default: a 128 x 256 float32 tile in 32-column boxes, no
    # element-wise atomics
    tma = _bench_source("example_gemm_splitk")
    assert tma.count("tl::tma_store_add(") == 8 and "tl::atomic_add" not in tma
    assert "tl::tma_store(" not in tma and "cluster_" not in tma
    # cluster_sum: the K slices of a tile form a cluster; the first stores, the others add
    cluster = source(cluster_sum=True)
    assert "__cluster_dims__(1, 1, 4)" in cluster
    assert cluster.count("tl::tma_store(") == 8 and cluster.count("tl::tma_store_add(") == 8
    assert cluster.index("tl::tma_store(") < cluster.index("tl::cluster_arrive();") < \
        cluster.index("tl::tma_store_add(")


@pytest.mark.skipif(toolkit.nvrtc_backend() is None, reason="NVRTC is not installed")
@pytest.mark.parametrize("stem", ["example_gemm", "example_gemm_splitk",
                                  "example_dequant_gemm_int4"])
def test_bench_kernel_does_not_spill(stem):
    from tilelang.runtime.compiler import compile_cuda

    for name, _ in _example(stem).programs("bench"):
        log = compile_cuda(_bench_source(stem, name), "sm_90a", verbose=True,
                           use_cache=False).log
        spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", log)]
        assert spills and max(spills) == 0, (name, log)


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


@pytest.mark.parametrize("M,N,K,group,cfg", [
    (40, 88, 256, 64, dict(block_M=64, block_N=64, block_K=32, num_stages=2, threads=128,
                          split_k=1)),                 # N padded to 96 rows, ragged M
    (40, 88, 512, 128, dict(block_M=64, block_N=32, block_K=64, num_stages=2, threads=128,
                           split_k=2)),                # two K slices into a zeroed C
])
def test_register_dequant_cpu(M, N, K, group, cfg):
    ex = _example("example_dequant_gemm_int4")
    kernel = ex.dequant_gemm_int4_rs(M, N, K, group, **cfg)
    a = torch.randn(M, K, dtype=torch.float16)
    packed, scale = ex.quantize_int4(torch.randn(N, K), group)
    w = ex.dequantize_int4(packed, scale, group)
    c = torch.zeros(M, N, dtype=torch.float16) if cfg["split_k"] > 1 else \
        torch.full((M, N), float("nan"), dtype=torch.float16)
    kernel(a, ex.fragment_words(packed), scale, c)
    ex.check(c, a.double() @ w.double().t(), 2e-3)


def test_fragment_words_place_each_code_where_its_thread_reads_it():
    ex = _example("example_dequant_gemm_int4")
    codes = torch.randint(0, 16, (40, 64), dtype=torch.uint8)
    words = ex.fragment_words(ex.pack_int4(codes))
    assert words.shape == (24, 16)  # 40 rows padded to 48
    for n in range(40):
        for k in range(64):
            word = int(words[n // 16 * 8 + n % 8, k // 16 * 4 + k % 8 // 2]) & 0xFFFFFFFF
            shift = 4 * (2 * (n % 16 // 8) + k % 16 // 8) + 16 * (k % 2)
            assert (word >> shift) & 0xF == codes[n, k], (n, k)
