"""Profiler inputs for kernels with dynamic (symbolic) sizes:
`do_bench(dynamic_symbolic_constraints={"m": 40})`."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.profiler import Profiler


def double_rows():
    M = T.dynamic("m")
    N = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, 8), threads=32) as bx:
            for i, j in T.Parallel(8, 16):
                if bx * 8 + i < M and j < N:
                    B[bx * 8 + i, j] = A[bx * 8 + i, j] * 2

    return tilelang.compile(main, out_idx=[1], target="cpu")


def test_inputs_take_the_given_sizes(monkeypatch):
    import tilelang.profiler.profiler as impl

    seen = []

    def one_call(fn, **kwargs):
        seen.append(fn())
        return 1.0

    monkeypatch.setattr(impl, "do_bench", one_call)
    profiler = double_rows().get_profiler(tilelang.TensorSupplyType.Normal)
    assert profiler.do_bench(dynamic_symbolic_constraints={"m": 40, "n": 16}) == 1.0
    assert seen[0].shape == (40, 16)
    inputs = profiler._get_inputs(dynamic_symbolic_constraints={"m": 5, "n": 16})
    assert [tuple(x.shape) for x in inputs] == [(5, 16)]


def test_every_symbol_must_be_given():
    profiler = double_rows().get_profiler()
    with pytest.raises(ValueError, match="'n'.*not found in dynamic_symbolic_constraints"):
        profiler.do_bench(dynamic_symbolic_constraints={"m": 8})
    with pytest.raises(ValueError, match="dynamic_symbolic_constraints"):
        profiler.do_bench()  # no sizes at all: the message says how to give them


def test_given_input_tensors_win_over_sizes(monkeypatch):
    import tilelang.profiler.profiler as impl

    shapes = []
    monkeypatch.setattr(impl, "do_bench", lambda fn, **k: shapes.append(fn().shape) or 1.0)
    profiler = double_rows().get_profiler()
    profiler.do_bench(input_tensors=[torch.ones(3, 16)],
                      dynamic_symbolic_constraints={"m": 40, "n": 16})
    assert shapes == [(3, 16)]


def test_profiler_class_is_the_public_one():
    assert isinstance(double_rows().get_profiler(), Profiler)
