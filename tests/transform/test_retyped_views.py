"""layout_inference: a shared view of another element size (`T.view(tile, shape, dtype=)`)
reads the tile's bytes where the tile's layout stored them: view element k is the tile's
row-major bytes [k * size, (k + 1) * size). Checked byte by byte against the tile's layout
(swizzled tiles), in the generated CUDA, and on the GPU against torch's `Tensor.view`."""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout import make_swizzled_layout

from transform_helpers import SM90, requires_gpu, run_passes

CASES = [((64, 64), "float32", (64, 128), "bfloat16"),   # narrowing
         ((64, 128), "bfloat16", (64, 64), "float32"),   # widening
         ((32, 64), "float16", (32, 32), "float32")]


def viewed(shape, dtype, new_shape, new_dtype, swizzled=True):
    @T.prim_func
    def main(A: T.Tensor(shape, dtype), B: T.Tensor(new_shape, new_dtype)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared(shape, dtype)
            V = T.view(S, new_shape, dtype=new_dtype)
            if swizzled:
                T.annotate_layout({S: make_swizzled_layout(S)})
            T.copy(A, S)
            T.copy(V, B)
    return main


def _bytes(layout, shape, size):
    """Physical byte offset of each row-major byte of a tile (element size `size`)."""
    coords = np.unravel_index(np.arange(int(np.prod(shape))), shape)
    phys = np.asarray(layout.forward(*coords)).ravel()
    return (phys[:, None] * size + np.arange(size)[None, :]).ravel()


@pytest.mark.parametrize("shape,dtype,new_shape,new_dtype", CASES)
def test_view_reads_the_tiles_bytes(shape, dtype, new_shape, new_dtype):
    k, ctx = run_passes(viewed(shape, dtype, new_shape, new_dtype), "infer_layouts", SM90)
    tile = next(b for b in ctx.layouts if b.name == "S")
    view = next(b for b in ctx.layouts if b.name == "V")
    assert not ctx.layouts[tile].is_row_major()
    want = _bytes(ctx.layouts[tile], shape, tile.dtype.bytes)
    got = _bytes(ctx.layouts[view], new_shape, view.dtype.bytes)
    assert np.array_equal(got, want)


@requires_gpu
@pytest.mark.parametrize("swizzled", [False, True])
@pytest.mark.parametrize("shape,dtype,new_shape,new_dtype", CASES)
def test_view_on_the_gpu(shape, dtype, new_shape, new_dtype, swizzled):
    kernel = tilelang.compile(viewed(shape, dtype, new_shape, new_dtype, swizzled),
                              target="cuda")
    words = torch.randint(-2 ** 15, 2 ** 15, (shape[0], shape[1] * T.dtype(dtype).bits // 16),
                          dtype=torch.int16)
    A = words.view(getattr(torch, dtype)).cuda()
    B = torch.full(new_shape, float("nan"), dtype=getattr(torch, new_dtype), device="cuda")
    kernel(A, B)
    want = A.view(getattr(torch, new_dtype)).view(new_shape)
    assert torch.equal(B.view(torch.int16), want.view(torch.int16))
