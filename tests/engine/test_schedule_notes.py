"""`verbose=True` / `get_host_source()` explain each schedule choice for a program as written:
the gemm instruction and its warp partition (and why not wgmma), the shared tiles' swizzles,
why warp specialisation was kept rather than the cp.async pipeline, and why an attention grid
stays one block per tile."""

import sys
from pathlib import Path

import pytest

import tilelang

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import as_written as aw  # noqa: E402

SM90, SM80 = "cuda -arch=sm_90a", "cuda -arch=sm_80"


def _notes(func, target=SM90):
    return tilelang.compile(func, target=target).get_host_source()


def test_wgmma_gemm_names_its_shape_and_warpgroups():
    notes = _notes(aw.gemm(1024, 1024, 1024, 128, 256, 64, 3, 256))
    assert "T.gemm A_shared x B_shared -> C_local: wgmma m64n256 on 2x1 warpgroup(s), A and B " \
        "from shared memory by descriptor" in notes


def test_mma_sync_gemm_names_its_warps():
    notes = _notes(aw.gemm(1024, 1024, 1024, 64, 64, 32, 2, 128), SM80)
    assert "T.gemm A_shared x B_shared -> C_local: mma.sync on 2x2 warps" in notes


def test_mma_sync_on_hopper_says_why_not_wgmma():
    # 64 threads: not a whole warpgroup
    notes = _notes(aw.gemm(256, 256, 256, 32, 32, 32, 2, 64))
    assert "mma.sync on" in notes and "(no wgmma: 64 threads are not whole warpgroups" in notes


def test_shared_tiles_name_their_swizzles():
    notes = _notes(aw.gemm(1024, 1024, 1024, 64, 64, 32, 2, 128))
    assert "shared tiles: A_shared 64-byte swizzle, B_shared 128-byte swizzle" in notes


@pytest.mark.parametrize("args,reason", [
    ((1024, 1024, 1024, 64, 64, 32, 2, 128), "2 stages, too few for the cp.async pipeline"),
    ((4096, 4096, 4096, 128, 256, 64, 3, 256), "2 consumer warpgroups"),
    ((1024, 1024, 1024, 128, 128, 32, 3, 128), "no more blocks than SMs"),
])
def test_warp_specialisation_kept_says_why(args, reason):
    notes = _notes(aw.gemm(*args))
    assert f"warp-specialised rather than the cp.async pipeline: {reason}" in notes


def test_cp_async_pipeline_chosen_says_why():
    notes = _notes(aw.gemm(4096, 4096, 4096, 128, 128, 32, 3, 128))
    assert "no warp specialisation: one consumer warpgroup over 1024 blocks" in notes
    assert "warp-specialised rather than" not in notes


def test_small_attention_grid_stays_one_block_per_tile_and_says_why():
    notes = _notes(aw.flash_fwd(1, 8, 1024, 128, True, 128, 128, 2, 256))
    assert "one block per tile: 64 blocks, fewer than 4 per SM" in notes
    assert "setmaxnreg 40/232 (registers a thread: the producer only issues TMA" in notes


def test_a_padded_tile_and_a_vectorised_serial_loop_are_explained():
    sys.path.insert(0, str(ROOT / "tests" / "transform"))
    from test_layout_inference import _row_per_thread_kernel

    notes = _notes(_row_per_thread_kernel())
    assert "shared tile B_s: rows padded by 4 bytes (a warp's lanes index its rows: 64 " \
        "wavefronts per warp over its accesses row-major, 2 padded)" in notes, notes
    assert "serial loop tk: moves values only, run as 16 groups of 8 lanes with vector " \
        "accesses" in notes, notes
