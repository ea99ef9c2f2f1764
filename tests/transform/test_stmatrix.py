"""Fragment -> 16-bit shared stores as stmatrix (transform/partition_parallel/stmatrix.py): a
T.Parallel nest storing a whole tile from the mma / wgmma accumulator layout on sm_90+ stores
four 8 x 8 matrices per instruction (`tl::stmatrix_x4`, float32 values converted two at a
time into its registers); other layouts, other element sizes, slices of a wider tile, sm_80
keep the vector stores. The builds compile (NVRTC); the values
are checked on the GPU (tests/gpu/test_stmatrix.py)."""

import re

import numpy as np
import pytest

import tilelang
from tilelang.transform.partition_parallel.stmatrix import stmatrix_matrices

from stmatrix_kernels import attention_row, gemm_half_slices, gemm_staged
from transform_helpers import SM80, SM90, requires_compiler


def _accumulator_slots(warps, pairs):
    """(inner, outer) coordinates of the mma accumulator layout: warp w holds rows
    16 w + lane / 4 (+ 8 for odd pairs), pair k columns 8 (k / 2) + 2 (lane % 4) + e."""
    t = np.arange(32 * warps)[:, None]
    v = np.arange(2 * pairs)[None, :]
    k, e = v // 2, v % 2
    lane, w = t % 32, t // 32
    row = 16 * w + lane // 4 + 8 * (k % 2)
    col = 8 * (k // 2) + 2 * (lane % 4) + e
    return col + 0 * row, row + 0 * col


@pytest.mark.parametrize("pairs,n", [(16, 4), (2, 2), (1, 1), (6, 2)])
def test_accumulator_layout_is_stmatrix_registers(pairs, n):
    inner, outer = _accumulator_slots(4, pairs)
    assert stmatrix_matrices(inner, [outer]) == n


def test_other_layouts_are_not():
    inner, outer = _accumulator_slots(4, 4)
    # lanes of a row in the wrong order
    swapped = inner.copy()
    swapped[1::4], swapped[2::4] = inner[2::4], inner[1::4]
    assert stmatrix_matrices(swapped, [outer]) == 0
    # a row segment that does not start at a multiple of 8 columns
    assert stmatrix_matrices(inner + 4, [outer]) == 0
    # two lanes of one row group in different rows
    bad_rows = outer.copy()
    bad_rows[3] += 1
    assert stmatrix_matrices(inner, [bad_rows]) == 0
    # each thread holding 8 consecutive elements of one row (the element-wise layout)
    t = np.arange(128)[:, None]
    v = np.arange(8)[None, :]
    assert stmatrix_matrices(8 * (t % 8) + v, [t // 8 + 0 * v]) == 0


def _stores(src):
    return (re.findall(r"tl::stmatrix_x(\d)\(", src),
            re.findall(r"tl::copy_vec<4>\(\(&c_s", src))


@requires_compiler
@pytest.mark.parametrize("threads,bm,bn", [(128, 64, 64), (256, 128, 128), (128, 64, 128)])
def test_wgmma_accumulator_copy_uses_stmatrix(threads, bm, bn):
    func = gemm_staged(256, 256, 64, bm=bm, bn=bn, threads=threads)
    kernel = tilelang.compile(func, target=SM90)
    src = kernel.get_kernel_source()
    st, vec = _stores(src)
    assert st and set(st) == {"4"} and not vec
    # one instruction per 8 accumulator registers of a thread
    assert re.search(rf"for \(int vq = 0; vq < {bm * bn // threads // 8}; \+\+vq\)", src)
    assert "tl::pack_bf162(acc[vq * 8], acc[vq * 8 + 1])" in src


@requires_compiler
def test_mma_accumulator_on_sm90_uses_stmatrix():
    # 32-row blocks of 2 warps: mma.sync accumulators (wgmma needs 64 rows a warpgroup)
    src = tilelang.compile(gemm_staged(256, 256, 64, bm=32, bn=64, threads=64, out="float16"),
                           target=SM90).get_kernel_source()
    assert "wgmma" not in src
    st, vec = _stores(src)
    assert st and not vec
    assert "tl::pack_half2(" in src


@requires_compiler
def test_computed_values_and_16_bit_fragments():
    src = tilelang.compile(gemm_staged(256, 256, 64, scale=0.5), target=SM90).get_kernel_source()
    assert re.search(r"tl::pack_bf162\(acc\[vq \* 8\] \* 0\.5f?, acc\[vq \* 8 \+ 1\] \* 0\.5f?\)",
                     src)
    src = tilelang.compile(gemm_staged(256, 256, 64, via_fragment=True),
                           target=SM90).get_kernel_source()
    assert "tl::pack_b16x2(low[vq * 8], low[vq * 8 + 1])" in src


@requires_compiler
def test_gemm_operand_tile_uses_stmatrix():
    src = tilelang.compile(attention_row(128, 64, 64), target=SM90).get_kernel_source()
    assert re.findall(r"tl::stmatrix_x4\(\(&p_s\[", src)


def test_sm80_keeps_vector_stores():
    src = tilelang.lower(gemm_staged(256, 256, 64), target=SM80)
    st, vec = _stores(src)
    assert not st and vec


def test_float32_tile_keeps_vector_stores():
    src = tilelang.lower(gemm_staged(256, 256, 64, out="float32"), target=SM90)
    assert "stmatrix" not in src


@requires_compiler
def test_slices_of_a_wider_tile_keep_vector_stores():
    kernel = tilelang.compile(gemm_half_slices(256, 256, 64), target=SM90)
    st, vec = _stores(kernel.get_kernel_source())
    assert not st and vec


def _simulate_stmatrix(func, target=SM90):
    """Run the stmatrix stores of `func`'s lowered nest on paper: {logical shared element:
    (thread, fragment register)} as stmatrix writes them (lane l's register j goes to row
    l / 4 of matrix j, columns 2 (l % 4) and + 1, at the row address lane 8 j + l / 4
    names) — and the fragment's own layout, which says which (thread, register) holds each
    element."""
    from tilelang.ir import nodes as ir
    from tilelang.transform.analysis.numeric import eval_index
    from transform_helpers import nodes, run_passes

    kernel, ctx = run_passes(func, "partition_parallel", target=target)
    loops = nodes(kernel.body, ir.For, lambda f: f.var.name == "vq")
    assert len(loops) == 1
    loop = loops[0]
    call = loop.body.value
    name = call.args[0]
    n = int(name[len("tl::stmatrix_x"):])
    target_load = call.args[1].args[0]
    regs = call.args[2:]
    assert len(regs) == n
    frag = next(f for f, r in ctx.registers.items() if r is regs[0].args[1].buffer)
    layout = ctx.layouts[frag]
    tx = kernel.thread_vars[0]
    T = ctx.num_threads
    written = {}
    for q in range(ir.int_value(loop.extent)):
        for t in range(T):
            lane, base = t % 32, t - t % 32
            for j, reg in enumerate(regs):
                row_lane = base + 8 * j + lane // 4
                env = {tx: row_lane, loop.var: q}
                row = [int(eval_index(i, env)) for i in target_load.indices]
                for e in range(2):
                    slot = int(eval_index(reg.args[1 + e].indices[0], {tx: t, loop.var: q}))
                    at = tuple(row[:-1] + [row[-1] + 2 * (lane % 4) + e])
                    assert at not in written, f"element {at} stored twice"
                    written[at] = (t, slot)
    held = {}
    for t in range(T):
        for s in range(layout.num_values):
            held[tuple(int(c) for c in layout.coords(t, s))] = (t, s)
    return written, held


@pytest.mark.parametrize("func", [
    gemm_staged(256, 256, 64, bm=64, bn=64, threads=128),
    gemm_staged(256, 256, 64, bm=128, bn=128, threads=256),
    gemm_staged(256, 256, 64, bm=64, bn=128, threads=128),
    gemm_staged(256, 256, 64, bm=32, bn=64, threads=64),
    gemm_staged(256, 256, 64, bm=64, bn=32, threads=256),
], ids=["wgmma64", "wgmma128x2", "wgmma64x128", "mma32", "wgmma_n_split_64B_swizzle"])
def test_stmatrix_stores_each_element_from_its_register(func):
    written, held = _simulate_stmatrix(func)
    assert written == held
