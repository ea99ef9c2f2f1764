"""FP8 T.gemm on wgmma (sm_90a), checked without a GPU: which gemms take wgmma, the fp8
register layout of A, the descriptor geometry against the swizzled shared layout of 1-byte
elements, and the compiled SASS (QGMMA with the right types and count, no spills).

The hardware facts used here are restated from HARDWARE.md §4-§6 independently of the code."""


import os
import re
import shutil
import subprocess
import sys
import tempfile
from types import SimpleNamespace

import numpy as np
import pytest

import tilelang
import tilelang.language as T
import tilelang.layout as L
from tilelang.codegen import gemm_sm90
from tilelang.engine.build import lower_cuda
from tilelang.ir import nodes as ir
from tilelang.ir.dtype import DType
from tilelang.jit.target import parse_target
from tilelang.runtime import toolkit

from fp8_kernels import fp8_gemm

SM90 = "cuda -arch=sm_90a"
E4, E5 = "float8_e4m3", "float8_e5m2"
requires_nvrtc = pytest.mark.skipif(toolkit.nvrtc_backend() is None and
                                    toolkit.nvcc_path() is None, reason="no CUDA compiler")


def _cuobjdump():
    return shutil.which("cuobjdump") if shutil.which("nvdisasm") else None


requires_cuobjdump = pytest.mark.skipif(_cuobjdump() is None,
                                        reason="cuobjdump/nvdisasm not on PATH")


def gemm_calls(src):
    return re.findall(r"tl::(\w*gemm_\w+)<([^>]*)>", src)


# ---- which gemms take wgmma ------------------------------------------------------------------

@pytest.mark.parametrize("kw,want", [
    (dict(), "wgmma_gemm_ss"),
    (dict(a_dtype=E5, b_dtype=E5, block_K=64), "wgmma_gemm_ss"),
    (dict(b_dtype=E5), "wgmma_gemm_ss"),                      # mixed e4m3 x e5m2
    (dict(a_dtype=E5, block_K=32, num_stages=4), "wgmma_gemm_ss"),
    (dict(a_in_registers=True), "wgmma_gemm_rs"),
    (dict(block_N=256, threads=256), "wgmma_gemm_ss"),
    (dict(trans_B=False), "gemm_ss"),                         # B K x N: no 8-bit transpose
    (dict(trans_A=True), "gemm_ss"),                          # A K x M
    (dict(block_M=64, block_N=64, threads=64), "gemm_ss"),    # not a whole warpgroup
])
def test_lowering_choice(kw, want):
    src = tilelang.lower(fp8_gemm(200, 136, 272, **kw), target=SM90)
    names = [n for n, _ in gemm_calls(src)]
    # A copied into registers every iteration is double-buffered (computed_operands.py): the
    # loop is unrolled by two, plus the last iteration of an odd count
    assert names == [want] * (3 if kw.get("a_in_registers") else 1), names


def test_k_below_one_step_is_a_located_error():
    with pytest.raises(ValueError, match="multiple of 32"):
        tilelang.lower(fp8_gemm(256, 256, 256, block_K=16), target=SM90)


def test_fallback_is_noted_once():
    mod = lower_cuda(fp8_gemm(256, 256, 256, trans_B=False), parse_target(SM90), {})
    notes = [n for k in mod.kernels for n in k.notes if "fp8 wgmma" in n]
    assert len(notes) == 1 and "transpose_B=True" in notes[0], notes


def test_fp16_and_other_archs_unchanged():
    src = tilelang.lower(fp8_gemm(256, 256, 256, a_dtype="float16", b_dtype="float16",
                                  block_K=64), target=SM90)
    assert [n for n, _ in gemm_calls(src)] == ["wgmma_gemm_ss"]
    src = tilelang.lower(fp8_gemm(256, 256, 256), target="cuda -arch=sm_89")
    assert [n for n, _ in gemm_calls(src)] == ["gemm_ss"]


def test_template_arguments_of_the_example_config():
    src = tilelang.lower(fp8_gemm(8192, 8192, 8192, block_N=256, block_K=128, threads=256),
                         target=SM90)
    [(name, args)] = gemm_calls(src)
    # M, N, K, WGM, WGN, TransA, TransB, A rows/cols/swizzle, B rows/cols/swizzle, wait
    assert args.split(", ") == ["128", "256", "128", "2", "1", "false", "true", "128", "128",
                                "128", "256", "128", "128", "0"]


# ---- the fp8 A fragment (RS form) ----------------------------------------------------------

@pytest.mark.parametrize("M,K,wgm,wgn", [(64, 32, 1, 1), (128, 64, 1, 2), (128, 128, 2, 1),
                                         (256, 96, 2, 2)])
def test_fp8_a_fragment_matches_hardware(M, K, wgm, wgn):
    buf = ir.Buffer("A_local", (M, K), DType(E4), "local.fragment")
    gemm = SimpleNamespace(A=SimpleNamespace(buffer=buf), trans_A=False)
    frag = gemm_sm90.a_fragment_layout(gemm, (wgm, wgn), M, K, None)
    frag.check()
    assert frag.num_threads == 128 * wgm * wgn
    assert frag.num_values == M * K // (128 * wgm)
    table = frag.coord_table()
    # HARDWARE §5 (8-bit A, K = 32): element i of thread t (w = warp in the warpgroup,
    # lane = 4g + q) is at row 16w + g + 8*((i>>2)&1), col 4q + (i&3) + 16*(i>>3); value
    # i + 16*(kt + KT*mr), warpgroup wg -> (gm, gn) = (wg % WGM, wg / WGM), gn replicates.
    KT = K // 32
    for t in range(frag.num_threads):
        wg, lane, w = t // 128, t % 32, (t // 32) % 4
        g, q, gm = lane // 4, lane % 4, wg % wgm
        for v in range(frag.num_values):
            i, kt, mr = v % 16, (v // 16) % KT, v // (16 * KT)
            row = 64 * (gm + wgm * mr) + 16 * w + g + 8 * ((i >> 2) & 1)
            col = 32 * kt + 4 * q + (i & 3) + 16 * (i >> 3)
            assert tuple(table[t, v]) == (row, col), (t, v)
    if wgn == 1:
        from tilelang.layout.fragment import fragment_equal
        assert fragment_equal(frag, L.wgmma_a_fragment(M, K, wgm, elem_bits=8))


# ---- descriptor geometry for 1-byte elements ------------------------------------------------

def ptx_swizzle(a, width):
    """HARDWARE §4: the 16-byte chunk bits [4, 7) of the absolute address XOR the 128-byte line
    bits, masked to the pattern width."""
    mask = {32: 1, 64: 3, 128: 7}[width]
    return a ^ (((a >> 7) & mask) << 4)


def wgmma_kmajor_read(start, sbo, width):
    """Byte addresses a K-major swizzled descriptor makes wgmma read for the 64 rows x 32 bytes
    of one instruction (HARDWARE §6: atoms of 8 rows x `width` bytes, 8-row groups SBO apart,
    the start address advanced inside a row for later k steps, swizzle on the absolute
    address)."""
    r = np.arange(64)[:, None]
    b = np.arange(32)[None, :]
    return ptx_swizzle(start + (r // 8) * sbo + (r % 8) * width + b, width)


def desc_kmajor_start(rows, width, r0, k0, elem_bytes):
    """tl::detail::desc_kmajor's start byte (tl/gemm_sm90.cuh): column block of the k byte,
    then row, then the byte inside the row."""
    kb = k0 * elem_bytes
    return (kb // width) * rows * width + r0 * width + kb % width


@pytest.mark.parametrize("rows,cols,bits", [(128, 128, 8), (128, 64, 8), (64, 32, 8),
                                            (256, 256, 8), (64, 384, 8), (128, 64, 16)])
def test_descriptor_reads_the_swizzled_tile(rows, cols, bits):
    """Every k step of every 64-row slab of an operand tile: the bytes wgmma reads through the
    descriptor are exactly the (row, k) elements the swizzled Layout stores there."""
    lay = L.swizzled((rows, cols), bits)
    width = lay.swizzle_bytes
    eb = bits // 8
    assert width == next(p for p in (128, 64, 32) if (cols * eb) % p == 0)
    base = 1024 * 5  # the planner aligns swizzled tiles to 1024 bytes
    off = lay.offsets().reshape(rows, cols)
    kstep = gemm_sm90.k_step(DType(E4 if bits == 8 else "float16"))
    assert kstep * eb == 32
    for r0 in range(0, rows, 64):
        for k0 in range(0, cols, kstep):
            start = base + desc_kmajor_start(rows, width, r0, k0, eb)
            got = wgmma_kmajor_read(start, 8 * width, width) - base
            r = r0 + np.arange(64)[:, None]
            kb = np.arange(32)[None, :]
            want = off[r, k0 + kb // eb] * eb + kb % eb
            assert np.array_equal(got, want), (r0, k0)


def test_k_step():
    assert gemm_sm90.k_step(DType(E4)) == gemm_sm90.k_step(DType(E5)) == 32
    assert gemm_sm90.k_step(DType("bfloat16")) == 16


# ---- compiled code ------------------------------------------------------------------------

def single_gemm(M, N, K, a_dtype=E4, b_dtype=E4, threads=128, a_in_registers=False):
    """One tile, one T.gemm (no K loop): the SASS holds exactly one gemm's wgmmas."""

    @T.prim_func
    def main(A: T.Tensor((M, K), a_dtype), B: T.Tensor((N, K), b_dtype),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            A_shared = T.alloc_shared((M, K), a_dtype)
            B_shared = T.alloc_shared((N, K), b_dtype)
            C_local = T.alloc_fragment((M, N), "float32")
            T.copy(A[0, 0], A_shared)
            T.copy(B[0, 0], B_shared)
            if a_in_registers:
                A_local = T.alloc_fragment((M, K), a_dtype)
                T.copy(A_shared, A_local)
                T.gemm(A_local, B_shared, C_local, transpose_B=True, clear_accum=True)
            else:
                T.gemm(A_shared, B_shared, C_local, transpose_B=True, clear_accum=True)
            T.copy(C_local, C[0, 0])

    return main


def sass_of(kernel):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(kernel.adapter.compiled.cubin)
        sass = subprocess.run([_cuobjdump(), "--dump-sass", path], capture_output=True,
                              text=True, check=True).stdout
        res = subprocess.run([_cuobjdump(), "--dump-resource-usage", path],
                             capture_output=True, text=True, check=True).stdout
    return sass, res


def compile_sm90(func):
    return tilelang.compile(func, target=SM90)


@requires_nvrtc
@pytest.mark.parametrize("a,b,rs", [(E4, E4, False), (E5, E5, False), (E4, E5, False),
                                    (E5, E4, True), (E4, E4, True)])
def test_single_gemm_compiles_to_qgmma(a, b, rs):
    M, N, K, threads = 128, 96, 96, 128  # MR = 2 slabs of 64 rows, K = 3 k32 steps
    k = compile_sm90(single_gemm(M, N, K, a, b, threads, rs))
    [(name, _)] = gemm_calls(k.get_kernel_source())
    assert name == ("wgmma_gemm_rs" if rs else "wgmma_gemm_ss")
    if _cuobjdump() is None:
        pytest.skip("cuobjdump/nvdisasm not on PATH: compiled only")
    sass, _ = sass_of(k)
    t = {E4: "E4M3", E5: "E5M2"}
    ops = re.findall(r"QGMMA\.(\S+)", sass)
    assert ops and set(ops) == {f"64x{N}x32.F32.{t[a]}.{t[b]}"}, set(ops)
    assert len(ops) == (M // 64) * (K // 32)  # one wgmma per (64-row slab, k32 step)
    assert "LDL" not in sass and "STL" not in sass


@requires_nvrtc
@requires_cuobjdump
def test_example_bench_config_has_no_spills():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "gemm"))
    try:
        import example_gemm_fp8 as ex
    finally:
        sys.path.pop(0)
    for name, func in ex.programs("bench", "sm_90a"):
        sass, res = sass_of(compile_sm90(func))
        assert "QGMMA" in sass and ".E4M3.E4M3" in sass, name
        assert "HMMA" not in sass
        assert "LDL" not in sass and "STL" not in sass, name
        regs = int(re.search(r"REG:(\d+)", res).group(1))
        assert regs <= 240, regs
        assert "STACK:0" in res, res


@pytest.mark.parametrize("block_K,width", [(256, 128), (128, 128), (64, 64), (32, 32)])
def test_tma_boxes_write_the_1_byte_swizzle(block_K, width):
    """The warp-specialised TMA loads feeding an fp8 wgmma: one box per column block of
    `width` bytes (= elements for 1-byte types), with the matching swizzle mode."""
    mod = lower_cuda(fp8_gemm(1000, 1000, 1008, block_K=block_K), parse_target(SM90), {})
    assert [n for n, _ in gemm_calls(mod.source)] == ["wgmma_gemm_ss"]
    # (the staged epilogue adds C_store_desc: only the loads are checked here)
    boxes = {d.name: (d.box, d.swizzle) for d in mod.tma if not d.name.endswith("_store_desc")}
    assert boxes == {"A_desc": ((128, width), width), "B_desc": ((128, width), width)}
    assert L.swizzled((128, block_K), 8).column_block == width


FP8_HEADER = r"""
#include "tl.cuh"
#include "tl/wgmma_ops_fp8.cuh"
extern "C" __global__ void k(float* out, uint32_t* outh, int s) {
  extern __shared__ __align__(1024) unsigned char smem[];
  float acc[128] = {};
  uint32_t hacc[64] = {};
  uint32_t a[4] = {1u, 2u, 3u, 4u};
  uint64_t d = tl::make_smem_desc(smem, tl::WgmmaSwizzle::k128B, 16, 1024);
  tl::wgmma_fence();
  tl::wgmma_ss_fp8<256, fp8_e4_t, fp8_e5_t>(acc, d, d, s);
  tl::wgmma_rs_fp8<136, fp8_e5_t, fp8_e4_t, -1, 1>(acc, a, d, s);
  tl::wgmma_ss_fp8_f16acc<256, fp8_e5_t, fp8_e5_t>(hacc, d, d, s);
  tl::wgmma_rs_fp8_f16acc<8, fp8_e4_t, fp8_e4_t>(hacc, a, d, s);
  tl::wgmma_commit();
  tl::wgmma_wait<0>();
  for (int i = 0; i < 128; ++i) out[threadIdx.x * 128 + i] = acc[i];
  for (int i = 0; i < 64; ++i) outh[threadIdx.x * 64 + i] = hacc[i];
}
"""


@requires_nvrtc
def test_fp8_wrapper_header_compiles_and_rejects_other_types():
    from tilelang.runtime import CudaCompileError, compile_cuda

    compile_cuda(FP8_HEADER, "sm_90a")
    bad = FP8_HEADER.replace("<256, fp8_e4_t, fp8_e5_t>", "<256, half_t, fp8_e5_t>")
    with pytest.raises(CudaCompileError, match="must be fp8_e4_t or fp8_e5_t"):
        compile_cuda(bad, "sm_90a")


def test_fp8_wrappers_cover_every_n_and_mix():
    from pathlib import Path

    text = (Path(toolkit.TILELANG_INCLUDE) / "tl" / "wgmma_ops_fp8.cuh").read_text()
    for n in range(8, 257, 8):
        for form in ("ss", "rs"):
            for acc, per in (("f32", 2), ("f16", 4)):
                for a in ("e4m3", "e5m2"):
                    for b in ("e4m3", "e5m2"):
                        name = f"wgmma_m64n{n}k32_{form}_{acc}_{a}_{b}("
                        assert text.count(name) == 1, name
                        body = text[text.index(name):].split("\n}\n", 1)[0]
                        assert body.count('(d[') == n // per, name
                        assert f"m64n{n}k32.{acc}.{a}.{b} " in body, name


def _two_level_kernel():
    from fp8_kernels import fp8_gemm_two_level

    # one consumer warpgroup, 16 blocks: the warp-specialised TMA pipeline
    return compile_sm90(fp8_gemm_two_level(512, 512, 1024))


@requires_nvrtc
def test_two_level_accumulation_roles_branch_on_a_warp_uniform_index():
    k = _two_level_kernel()
    src = k.get_kernel_source()
    assert "thread_group: ('consumer'" in src
    # lane 0's thread index: ptxas then knows each role's code runs warp-converged
    assert re.search(r"if \(__shfl_sync\(0xffffffffu, tx, 0, 32\) > 127\) \{", src), src


@requires_nvrtc
@requires_cuobjdump
def test_two_level_accumulation_keeps_the_main_loop_on_the_uniform_datapath():
    """Stage addresses, mbarriers and wgmma descriptors of the consumer's loop come from the
    uniform datapath: no vector-to-uniform moves (R2UR) among the loop's QGMMAs, and the
    mbarrier wait before them addresses its barrier through a uniform register (before: the
    stage address was a per-thread value, spilled and reloaded from local memory right before
    every wait, and the descriptors were built per thread and moved over with R2UR)."""
    sass, _ = sass_of(_two_level_kernel())
    lines = [ln for ln in sass.splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", ln)]
    qgmma = [i for i, ln in enumerate(lines) if "QGMMA" in ln]
    assert len(qgmma) == 4, len(qgmma)  # 2 slabs of 64 rows x 2 k32 steps, one loop body
    assert not any("R2UR" in ln for ln in lines[qgmma[0]:qgmma[-1]])
    wait = max(i for i, ln in enumerate(lines[:qgmma[0]]) if "SYNCS.PHASECHK" in ln)
    assert re.search(r"SYNCS\.PHASECHK\S* P\d+, \[UR\d+", lines[wait]), lines[wait]
