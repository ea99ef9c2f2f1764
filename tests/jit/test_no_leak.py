"""Compiling a kernel keeps no reference to the caller's local variables (a tensor that is
only a local of the function that compiled a kernel is freed when that function returns,
even with the cyclic garbage collector off), and a located error leaves no reference cycle
holding the caller's objects."""

import gc
import weakref

import pytest
import torch

import tilelang
import tilelang.language as T


@tilelang.jit(target="cpu")
def staged_copy(n):
    @T.prim_func
    def copy(a: T.Tensor[(n,), T.float32]):
        with T.Kernel(1) as _:
            staged = T.alloc_shared((n,), "float32")
            T.copy(a, staged)
            T.copy(staged, a)
    return copy


@pytest.fixture
def gc_off():
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_compiling_keeps_no_caller_locals(gc_off):
    def compile_with_probe(n):
        probe = torch.randn(1, 1024)
        kernel = staged_copy(n)
        assert kernel is not None
        return weakref.ref(probe)

    assert compile_with_probe(7)() is None


def test_a_located_error_keeps_no_caller_locals(gc_off):
    class Probe:
        pass

    def fail_with_probe():
        probe = Probe()
        with pytest.raises(ValueError):
            @T.prim_func
            def bad(A: T.Tensor((4,), T.float32)):
                with T.Kernel(1, threads=0):
                    A[0] = 1.0
        return weakref.ref(probe)

    assert fail_with_probe()() is None
