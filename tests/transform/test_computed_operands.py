"""Shared wgmma operands the consumers compute (transform/warp_specialize/computed_operands.py): on sm_90a the
tile gets a second copy and the loop is unrolled by two, so the next tile is computed while the
previous gemm runs (checked on the generated CUDA, which NVRTC compiles); kernels where that
cannot help or would be wrong keep the plain loop."""

from __future__ import annotations

import re

import pytest

import tilelang

from computed_operand_kernels import relu_scaled_a_in_registers, relu_scaled_gemm
from transform_helpers import SM90, requires_compiler, run_passes


def _consumer(src):
    return src[src.index("setmaxnreg_inc"):] if "setmaxnreg_inc" in src else \
        src[src.index("'consumer'"):]


@pytest.mark.parametrize("K", [512, 448, 64])  # 8, 7 and 1 iterations
def test_second_copy_and_the_wait_after_the_next_tile(K):
    src = tilelang.lower(relu_scaled_gemm(256, 256, K), target="cuda -arch=sm_90a")
    body = _consumer(src)
    assert ("B_shared_odd" in body) == (K // 64 >= 2)  # nothing to overlap in one iteration
    if K // 64 >= 2:
        loop = body[body.index("for (int k = 0; k < "):]
        assert "k += 2" in loop[:loop.index("\n")]
        # even half: the tile is written, then the previous gemm waited for, then published
        even = loop[:loop.index("tl::wgmma_gemm_ss<")]
        assert even.index("(&B_shared[") < even.index("tl::wgmma_wait_in_place<0>") < \
            even.index("tl::named_barrier_sync(1, 256)")
        # the gemms are issued without waiting (last template argument -1)
        assert all(g.endswith("-1>") for g in re.findall(r"tl::wgmma_gemm_ss<[^>]*>", loop)[:2])
    if (K // 64) % 2:
        assert src.count("tl::wgmma_gemm_ss<") == (3 if K // 64 > 1 else 1)


@requires_compiler
def test_compiles_for_sm90a():
    tilelang.compile(relu_scaled_gemm(256, 256, 448), target=SM90)


def test_not_for_tiles_used_after_the_loop():
    src = tilelang.lower(relu_scaled_gemm(256, 256, 512, use_outside=True),
                         target="cuda -arch=sm_90a")
    assert "_odd" not in src


def test_not_for_attention_probabilities():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "deepseek_mla"))
    import example_mla_decode as ex

    for _, func in ex.programs("bench"):
        assert "_odd" not in tilelang.lower(func, target="cuda -arch=sm_90a")


def test_not_when_the_second_copy_does_not_fit():
    # 3 stages of 256x64 and 64x256 tiles (192 KB) + the computed 64x256 tile (32 KB): no room
    # for another 32 KB
    func = relu_scaled_gemm(512, 512, 512, block_M=256, block_N=256, block_K=64, num_stages=3)
    kernel, ctx = run_passes(func, "warp_specialize", target=SM90)
    assert any("not double-buffered" in n for n in ctx.notes), ctx.notes
    assert "_odd" not in tilelang.lower(func, target=SM90)


def test_not_with_two_stages():
    # the load of the next iteration would wait for the publication of the tile
    assert "_odd" not in tilelang.lower(relu_scaled_gemm(256, 256, 512, num_stages=2),
                                        target=SM90)


@pytest.mark.parametrize("K", [448, 512])  # 7 and 8 iterations
def test_register_operand_gets_a_second_copy_and_no_barrier(K):
    src = tilelang.lower(relu_scaled_a_in_registers(256, 256, K), target=SM90)
    body = _consumer(src)
    loop = body[body.index("for (int k = 0; k < "):]
    assert "k += 2" in loop[:loop.index("\n")] and "A_local_odd[" in loop
    # registers are each thread's own: no barrier publishes them; the stage handed back from
    # the second iteration on waits for the gemm that read it, inside its branch
    assert "named_barrier_sync" not in loop[:loop.index("tl::wgmma_gemm_rs<")]
    assert re.search(r"if \(k > 0\) \{\s*tl::wgmma_wait_in_place<0>\(\);"
                     r"\s*tl::wgmma_fence_operands\(C_local, \d+\);\s*tl::mbarrier_arrive", loop)
    # the operand is computed from the stage with ordinary loads: a proxy fence follows them,
    # before the stage goes back to the TMA producer
    assert re.search(r"A_local\[[^\n]*\n\s*\}\s*\}\s*tl::fence_proxy_async\(\);\s*if \(k > 0\)",
                     loop)
    assert all(g.endswith("-1>") for g in re.findall(r"tl::wgmma_gemm_rs<[^>]*>", loop)[:2])


@requires_compiler
def test_register_operand_kernel_compiles():
    tilelang.compile(relu_scaled_a_in_registers(256, 256, 448), target=SM90)
