"""transform/stage_fragment_atomics.py: a fragment added element-wise into a global tile
becomes a staged copy and one TMA reduction on sm_90a; nothing changes with
`tl.disable_tma_lower`, before sm_90 or where the TMA unit cannot add the tile. No GPU needed (tests/gpu/test_tma_reduce.py runs the kernels)."""

from __future__ import annotations

import re

import pytest

import tilelang

from tma_reduce_kernels import fragment_add_in_thread_branch, fragment_split_k
from transform_helpers import SM80, SM90, requires_compiler

@pytest.mark.parametrize("tile_form", [False, True])
def test_fragment_adds_become_one_tma_reduction(tile_form):
    src = tilelang.lower(fragment_split_k(200, 64, 512, tile_form=tile_form), target=SM90)
    # a 64 x 64 float32 tile in the 128-byte swizzle: two 32-column boxes
    assert src.count("tl::tma_store_add(") == 2
    assert "tl::atomic_add" not in src and "atomicAdd" not in src
    staged = src[src.index("C_staged["):]
    # every thread's stores reach the async proxy and the barrier before one thread adds
    barrier = re.search(r"__syncthreads|tl::named_barrier_sync", staged).start()
    assert staged.index("tl::fence_proxy_async") < barrier < staged.index("tl::tma_store_add(")
    assert "tl::tma_store_wait<0>" in staged  # the tile read before the kernel exits


@pytest.mark.parametrize("tile_form", [False, True])
def test_without_tma_lowering_the_adds_stay_element_wise(tile_form):
    src = tilelang.lower(fragment_split_k(200, 64, 512, tile_form=tile_form), target=SM90,
                         pass_configs={"tl.disable_tma_lower": True})
    assert "tma_store_add" not in src and "C_staged" not in src
    assert "tl::atomic_add" in src


def test_before_sm90_the_adds_stay_element_wise():
    src = tilelang.lower(fragment_split_k(200, 64, 512), target=SM80)
    assert "tma_store_add" not in src and "C_staged" not in src


def test_a_transposed_add_stays_element_wise():
    src = tilelang.lower(fragment_split_k(200, 64, 512, transposed=True), target=SM90)
    assert "tma_store_add" not in src and "C_staged" not in src


def test_an_add_under_a_thread_branch_stays_element_wise():
    src = tilelang.lower(fragment_add_in_thread_branch(), target=SM90)
    assert "tma_store_add" not in src and "F_staged" not in src


@requires_compiler
def test_compiles_for_sm90a():
    kern = tilelang.compile(fragment_split_k(200, 64, 512), target=SM90)
    assert "tma_store_add" in kern.get_kernel_source()
