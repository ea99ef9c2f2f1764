"""Every example on the GPU (CUDA backend) at its small and medium sizes, which are ragged
(sizes not multiples of the tiles) for most examples: the example's `run` checks the result
against a float64 torch reference on fresh random inputs. Marked `gpu`; skipped without one.
Known compiler problems are strict xfails naming the exact error."""

from __future__ import annotations

import math

import pytest

from example_helpers import EXAMPLES, example_id, load_example

pytestmark = pytest.mark.gpu

KNOWN_FAILURES: dict = {}


def _params():
    out = []
    for p in EXAMPLES:
        marks = []
        if example_id(p) in KNOWN_FAILURES:
            from tilelang.runtime.compiler import CudaCompileError

            marks.append(pytest.mark.xfail(strict=True, raises=CudaCompileError,
                                           reason=KNOWN_FAILURES[example_id(p)]))
        out += [pytest.param(p, size, id=f"{example_id(p)}-{size}", marks=marks)
                for size in ("small", "medium")]
    return out


@pytest.mark.parametrize("path,size", _params())
def test_example_on_gpu(path, size):
    import torch

    cases = load_example(path).run("cuda", size)
    assert cases
    for case in cases:
        assert math.isfinite(case["error"])
        case["tilelang"]()  # the call the benchmark times runs too
    torch.cuda.synchronize()


def test_swizzled_gemm_source_rasterizes():
    """The swizzle example's panel_size > 0 kernel really remaps the blocks."""
    mod = load_example(next(p for p in EXAMPLES if p.stem == "example_gemm_swizzle"))
    import tilelang

    src = tilelang.lower(mod.programs("medium")[1][1], target="cuda")
    assert "rasterize" in src
