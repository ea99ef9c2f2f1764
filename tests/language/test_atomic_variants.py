"""Atomics the reference's tests use beyond add/max/min: `T.atomic_or`, memory orders checked
per operation (loads cannot release, stores cannot acquire), and `T.atomic_addx2/x4` on
2/4-element regions or T.Ramp vectors, with `return_prev=True` giving the old values."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import HAS_COMPILER, DEVICES, target_of as _target


def _or_kernel(dtype, order):
    @T.prim_func
    def k(A: T.Tensor((2,), dtype), M: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            T.atomic_or(A[0], M[tx], memory_order=order)
            T.atomic_or(A[1], M[63 - tx])
    return k


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64"])
def test_atomic_or_sets_every_bit(device, dtype):
    bits = 63 if "64" in dtype else 31
    m = torch.tensor([1 << (i % bits) for i in range(64)]).to(getattr(torch, dtype))
    a = torch.tensor([1 << (bits - 1), 0]).to(m.dtype)
    kernel = tilelang.compile(_or_kernel(dtype, "release"), target=_target(device))
    a = a.to(device)
    kernel(a, m.to(device))
    expect = 0
    for i in range(64):
        expect |= 1 << (i % bits)
    assert a.cpu().tolist() == [expect, expect]


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
def test_atomic_or_orders_build():
    src = tilelang.compile(_or_kernel("int32", "acq_rel"),
                           target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl::atomic_or((&A[0]), M[tx], tl::MemoryOrder::acq_rel);" in src


def test_atomic_or_rejects_tiles_and_floats():
    with pytest.raises(NotImplementedError, match="T.atomic_or takes one element"):
        @T.prim_func
        def k1(A: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=1):
                T.atomic_or(A, 1)
    with pytest.raises(TypeError, match="atomics exist for int32, int64, uint32, uint64"):
        @T.prim_func
        def k2(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1):
                T.atomic_or(A[0], 1)


@pytest.mark.parametrize("op,order,ok", [
    ("load", "relaxed", True), ("load", "consume", True), ("load", "acquire", True),
    ("load", "seq_cst", True), ("load", "release", False), ("load", "acq_rel", False),
    ("store", "relaxed", True), ("store", "release", True), ("store", "seq_cst", True),
    ("store", "acquire", False), ("store", "consume", False), ("store", "acq_rel", False),
    ("load", "bogus", False), ("store", "bogus", False)])
def test_load_and_store_orders(op, order, ok):
    def build():
        @T.prim_func
        def k(A: T.Tensor((2,), "int32")):
            with T.Kernel(1, threads=1):
                if op == "load":
                    A[1] = T.atomic_load(A[0], memory_order=order)
                else:
                    T.atomic_store(A[1], 7, memory_order=order)
        return k
    if ok:
        a = torch.tensor([5, 0], dtype=torch.int32)
        tilelang.compile(build(), target="cpu")(a)
        assert a[1].item() == (5 if op == "load" else 7)
    else:
        with pytest.raises(ValueError, match=f"atomic_{op} does not support memory_order"):
            build()


def test_rmw_orders_are_checked():
    with pytest.raises(ValueError, match="T.atomic_add does not support memory_order='eager'"):
        @T.prim_func
        def k(A: T.Tensor((2,), "float32")):
            with T.Kernel(1, threads=1):
                T.atomic_add(A[0], 1.0, memory_order="eager")


def _vec_kernel(lanes, dtype, form):
    @T.prim_func
    def k(Dst: T.Tensor((8,), dtype), Val: T.Tensor((8,), dtype), Prev: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=1):
            for j in T.serial(8 // lanes):
                fn = T.atomic_addx2 if lanes == 2 else T.atomic_addx4
                if form == "region":
                    Prev[j * lanes:(j + 1) * lanes] = fn(
                        Dst[j * lanes:(j + 1) * lanes], Val[j * lanes:(j + 1) * lanes],
                        return_prev=True)
                elif form == "ramp":
                    Prev[T.Ramp(j * lanes, 1, lanes)] = fn(
                        Dst[T.Ramp(j * lanes, 1, lanes)], Val[T.Ramp(j * lanes, 1, lanes)],
                        return_prev=True)
                else:  # no old values wanted: the vector instruction
                    fn(Dst[j * lanes:(j + 1) * lanes], Val[j * lanes:(j + 1) * lanes])
    return k


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("lanes", [2, 4])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("form", ["region", "ramp", "plain"])
def test_vector_atomic_adds(device, lanes, dtype, form):
    tdt = getattr(torch, dtype)
    dst = torch.arange(8).to(tdt)
    val = (torch.arange(8) * 10).to(tdt)
    prev = torch.full((8,), -1.0).to(tdt)
    kernel = tilelang.compile(_vec_kernel(lanes, dtype, form), target=_target(device))
    d, p = dst.clone().to(device), prev.clone().to(device)
    kernel(d, val.to(device), p)
    torch.testing.assert_close(d.cpu(), dst + val)
    torch.testing.assert_close(p.cpu(), prev if form == "plain" else dst)
    if device == "cpu" and HAS_COMPILER:
        tilelang.compile(_vec_kernel(lanes, dtype, form), target="cuda -arch=sm_90a")


def test_vector_atomic_region_must_be_consecutive():
    with pytest.raises(ValueError, match="must be 2 consecutive elements of its last dimension"):
        @T.prim_func
        def k(Dst: T.Tensor((8,), "float32"), Val: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1):
                T.atomic_addx2(Dst[0:4], Val[0:2])
