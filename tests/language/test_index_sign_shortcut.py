"""Subscripts whose sign is plain from their form (sums and products of launch variables,
loop variables from 0 up and constants) skip the analyzer that decides whether an index
counts from the end; the others still ask it, with the same answers."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang import arith
from tilelang.ir import nodes as ir


class _AnalyzerBuilt(Exception):
    pass


@pytest.fixture
def no_analyzer(monkeypatch):
    def refuse(*a, **k):
        raise _AnalyzerBuilt()

    monkeypatch.setattr(arith, "Analyzer", refuse)


def _plain():
    @T.prim_func
    def plain(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(4, threads=4) as bx:
            tx = T.get_thread_binding()
            for i in T.serial(2, 6):
                B[bx * 16 + tx * 4 + i - 2] = A[T.max(bx * 16, tx) + i % 4 + i // 4]
    return plain


def test_a_subtraction_still_asks_the_analyzer(no_analyzer):
    # `i - 2` has a subtraction: that subscript asks (and is refused here)
    with pytest.raises(_AnalyzerBuilt):
        _plain()


def test_sums_products_and_loop_variables_from_zero_up_skip_it(no_analyzer):
    @T.prim_func
    def k(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(4, threads=4) as bx:
            tx = T.get_thread_binding()
            for i in T.serial(2, 6):
                for j in T.Parallel(2):
                    B[bx * 16 + tx * 4 + j] = A[T.min(bx * 16 + i, 63) + j % 2 + i // 4]
    assert isinstance(k, ir.PrimFunc)


@pytest.mark.parametrize("start, first", [(-4, 4), (0, 0)])
def test_other_subscripts_still_ask(start, first):
    @T.prim_func
    def k(A: T.Tensor((8,), T.float32), B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(start, start + 4):
                B[i - start] = A[i]
    a = torch.arange(8, dtype=torch.float32)
    b = torch.full((4,), float("nan"))
    tilelang.compile(k, target="cpu")(a, b)
    # i in [-4, 0) is negative in every iteration: A[i] counts from the end (A[4..7])
    torch.testing.assert_close(b, a[first:first + 4])
