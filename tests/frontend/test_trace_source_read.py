"""Tracing a `@T.prim_func` reads its source (to tell the reference's lazy style) only when
that style is possible: a parameter without an annotation, or a `.empty` in the code."""

import inspect

import pytest

import tilelang.language as T
from tilelang.frontend import trace
from tilelang.ir import nodes as ir


@pytest.fixture
def count_source_reads(monkeypatch):
    reads = []
    real = inspect.getsource

    def counted(obj):
        reads.append(obj)
        return real(obj)

    monkeypatch.setattr(trace.inspect, "getsource", counted)
    return reads


def test_annotated_kernel_is_traced_without_reading_its_source(count_source_reads):
    @T.prim_func
    def k(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=8) as _:
            tx = T.get_thread_binding()
            A[tx] = A[tx] * 2.0
    assert isinstance(k, ir.PrimFunc) and count_source_reads == []


def test_returned_empty_output_is_still_the_lazy_style(count_source_reads):
    @T.prim_func
    def k(A: T.Tensor((8,), T.float32)):
        B = T.empty((8,), T.float32)
        with T.Kernel(1, threads=8) as _:
            tx = T.get_thread_binding()
            B[tx] = A[tx] * 2.0
        return B
    assert count_source_reads  # `.empty` in the code: the source decides
    assert k.attrs["tilelang_out_idx"] == [-1]


def test_a_nested_function_using_empty_counts(count_source_reads):
    def kernel(A: T.Tensor((8,), T.float32)):
        def helper():
            return T.empty((8,), T.float32)
        return helper

    assert "empty" in trace._names_used(kernel.__code__)
    assert "empty" not in trace._names_used(
        test_annotated_kernel_is_traced_without_reading_its_source.__code__)
