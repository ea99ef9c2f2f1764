"""`T.atomic_add(G[region], S, use_tma=True)` (transform/tma_reduce.py): the TMA reduction on
sm_90a, the element-wise fallback with its reason elsewhere, and the tile semantics on the CPU
interpreter. No GPU needed (tests/gpu/test_tma_reduce.py runs the kernels)."""

from __future__ import annotations

import re

import pytest
import torch

import tilelang

from tma_reduce_kernels import add_then_read, all_into_one, scaled_add
from transform_helpers import SM80, SM90, requires_compiler


def _adds(src):
    return re.findall(r"tl::tma_store_add\(\(&(\w+)\), \(&(\w+)\[(\d+)\]\)", src)


def test_swizzled_tile_is_one_reduction_per_column_block():
    src = tilelang.lower(scaled_add(200, 384), target=SM90)
    adds = _adds(src)
    # a 64 x 128 float32 tile in the 128-byte swizzle: four 32-column boxes, 2048 floats apart
    assert [int(a[2]) for a in adds] == [0, 2048, 4096, 6144]
    assert "atomicAdd" not in src and "tl::atomic" not in src
    # every thread's writes reach the async proxy before one thread issues the reduction,
    # and that thread waits until the tile has been read
    tail = src[src.index("tl::fence_proxy_async"):]
    assert tail.index("__syncthreads") < tail.index("if (tx == 0)") < tail.index("tma_store_add")
    assert tail.index("tma_store_arrive") < tail.index("tma_store_wait<0>")


def test_reading_the_sums_back_waits_for_the_writes():
    """Only a kernel that also loads the destination pays for waiting until the sums are in
    memory; the others only wait until the tile has been read."""
    src = tilelang.lower(add_then_read(16, 64), target=SM90)
    tail = src[src.index("tma_store_add"):]
    assert tail.index("tma_store_wait_complete<0>") < tail.index("fence_proxy_async")
    assert "tma_store_wait<0>" not in src
    plain = tilelang.lower(scaled_add(200, 384), target=SM90)
    assert "tma_store_wait<0>" in plain and "wait_complete" not in plain
    x, y, z = torch.randn(16, 64), torch.randn(16, 64), torch.zeros(16, 64)
    want = y + 2 * x
    tilelang.compile(add_then_read(16, 64), target="cpu")(x, y, z)
    torch.testing.assert_close(z, want, rtol=0, atol=0)


def test_row_major_tile_is_one_box():
    src = tilelang.lower(scaled_add(200, 384, swizzle=False), target=SM90)
    assert [int(a[2]) for a in _adds(src)] == [0]


@pytest.mark.parametrize("why,kwargs,target,configs", [
    ("sm_80 has no TMA", {}, SM80, None),
    ("TMA turned off", {}, SM90, {"tl.disable_tma_lower": True}),
    ("integer add", dict(dtype="int32"), SM90, None),
    ("not asked for", dict(use_tma=False), SM90, None),
])
def test_element_wise_fallback(why, kwargs, target, configs, capsys):
    src = tilelang.lower(scaled_add(200, 384, **kwargs), target=target, pass_configs=configs)
    assert "tma_store_add" not in src, why
    assert "atomic" in src.lower(), why


@requires_compiler
def test_fallback_says_why(capsys):
    tilelang.compile(scaled_add(200, 384), target=SM80, verbose=True)
    assert "element-wise atomics (TMA needs sm_90a" in capsys.readouterr().err


@requires_compiler
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_compiles_for_sm90a(dtype):
    kern = tilelang.compile(scaled_add(200, 384, dtype=dtype), target=SM90)
    assert "tma_store_add" in kern.get_kernel_source()


def test_interpreter_adds_every_element_once():
    torch.manual_seed(0)
    x, y = torch.randn(200, 384), torch.randn(200, 384)
    ref = y + 2 * x
    tilelang.compile(scaled_add(200, 384), target="cpu")(x, y)
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
    xs = torch.randn(5, 16, 64)
    acc = torch.randn(16, 64)
    ref = acc + 3 * xs.sum(0)
    tilelang.compile(all_into_one(16, 64, 5), target="cpu")(xs, acc)
    torch.testing.assert_close(acc, ref, rtol=1e-5, atol=1e-5)
