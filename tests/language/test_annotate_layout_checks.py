"""`T.annotate_layout` on a shared buffer rejects a layout that puts two logical elements at
one physical position (they would silently alias), at the user's line; injective layouts,
including ones with gaps, keep working."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout import Layout

N = 128


def _roundtrip(fwd):
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), Out: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=N):
            s = T.alloc_shared((N,), "int32")
            T.annotate_layout({s: Layout((N,), fwd)})
            for i in T.Parallel(N):
                s[i] = A[i]
            for i in T.Parallel(N):
                Out[i] = s[i]
    return main


@pytest.mark.parametrize("fwd,first,second,where", [
    (lambda i: i % 64, (0,), (64,), (0,)),
    (lambda i: i * 0, (0,), (1,), (0,)),
    (lambda i: (i % 64) * 4 + 3, (0,), (64,), (3,)),
])
def test_many_to_one_layouts_are_rejected(fwd, first, second, where):
    with pytest.raises(ValueError, match=(
            f"shared buffer `s` must be injective: logical elements {first} and {second} both "
            f"map to physical coordinates {where}").replace("(", "\\(").replace(")", "\\)")) \
            as info:
        _roundtrip(fwd)
    assert "test_annotate_layout_checks.py" in str(info.value)


def test_negative_positions_are_rejected():
    with pytest.raises(ValueError, match="maps element \\(0,\\) to a negative position -5"):
        _roundtrip(lambda i: i - 5)


@pytest.mark.parametrize("fwd", [lambda i: i, lambda i: i ^ 1, lambda i: i * 2,
                                 lambda i: i + 10, lambda i: (N - 1) - i])
def test_injective_layouts_compute(fwd):
    a = torch.randint(-1000, 1000, (N,), dtype=torch.int32)
    out = tilelang.compile(_roundtrip(fwd), out_idx=[1], target="cpu")(a)
    assert torch.equal(out, a)
    tilelang.lower(_roundtrip(fwd), target="cuda -arch=sm_90a")
