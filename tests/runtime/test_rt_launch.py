"""Kernel-argument packing (layout, conversions, errors) and the Python cost of a launch,
counted with a stand-in for cuLaunchKernel. No GPU needed."""

from __future__ import annotations

import ctypes
import math
import struct

import numpy as np
import pytest
import torch

from tilelang.runtime import ArgLayout, CudaKernelFunction, launch as launch_fn
from tilelang.runtime import launcher as launch_mod
from tilelang.testing.calls import count_calls

rng = np.random.default_rng(1234)


def test_layout_follows_natural_alignment():
    types = ["ptr", "int32", "ptr", "float16", "int64", "tensor_map", "bfloat16", "bool",
             "float64", "uint8", "float32"]
    lay = ArgLayout(types)
    assert lay.offsets == (0, 8, 16, 24, 32, 64, 192, 194, 200, 208, 212)
    assert lay.size == 216
    assert lay.base % 64 == 0  # so the CUtensorMap copy is 64-byte aligned too
    ptrs = (ctypes.c_void_p * len(types)).from_address(lay.params_addr)
    assert [p - lay.base for p in ptrs] == list(lay.offsets)


def test_packed_bytes_match_the_values():
    types = ["ptr", "int32", "float32", "float16", "int64", "tensor_map", "bool", "float64",
             "int8", "uint16", "uint64"]
    lay = ArgLayout(types)
    tmap = bytes(range(128))
    for _ in range(20):
        vals = [int(rng.integers(0, 2**63)), int(rng.integers(-2**31, 2**31)),
                float(rng.standard_normal()), float(rng.standard_normal()),
                int(rng.integers(-2**63, 2**63)), tmap, bool(rng.integers(0, 2)),
                float(rng.standard_normal()), int(rng.integers(-128, 128)),
                int(rng.integers(0, 2**16)), int(rng.integers(0, 2**64, dtype=np.uint64))]
        lay.pack(vals)
        raw = lay.packed_bytes()
        o = lay.offsets
        assert struct.unpack_from("<Q", raw, o[0])[0] == vals[0]
        assert struct.unpack_from("<i", raw, o[1])[0] == vals[1]
        assert struct.unpack_from("<f", raw, o[2])[0] == np.float32(vals[2])
        assert struct.unpack_from("<e", raw, o[3])[0] == np.float16(vals[3])
        assert struct.unpack_from("<q", raw, o[4])[0] == vals[4]
        assert raw[o[5]:o[5] + 128] == tmap
        assert struct.unpack_from("<?", raw, o[6])[0] == vals[6]
        assert struct.unpack_from("<d", raw, o[7])[0] == vals[7]
        assert struct.unpack_from("<b", raw, o[8])[0] == vals[8]
        assert struct.unpack_from("<H", raw, o[9])[0] == vals[9]
        assert struct.unpack_from("<Q", raw, o[10])[0] == vals[10]


def test_bfloat16_and_fp8_scalars_round_like_torch():
    xs = np.concatenate([rng.standard_normal(200) * 10 ** rng.uniform(-8, 8, 200),
                         [0.0, -0.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 65504.0, 3e38, 1e-40,
                          math.inf, -math.inf]])
    lay = ArgLayout(["bfloat16", "float8_e4m3", "float8_e5m2"])
    for x in xs:
        lay.pack([x, max(min(x, 448.0), -448.0), max(min(x, 57344.0), -57344.0)])
        raw = lay.packed_bytes()
        want = torch.tensor([x], dtype=torch.float32).to(torch.bfloat16).view(torch.int16)
        assert struct.unpack_from("<H", raw, 0)[0] == int(want.item()) & 0xFFFF, x
        if math.isfinite(x):
            e4 = torch.tensor([max(min(x, 448.0), -448.0)]).to(torch.float8_e4m3fn)
            assert raw[2] == int(e4.view(torch.uint8).item()), x
    lay.pack([math.nan, 0.0, 0.0])
    bits = struct.unpack_from("<H", lay.packed_bytes(), 0)[0]
    assert bits & 0x7F80 == 0x7F80 and bits & 0x7F


def test_slow_path_accepts_tensors_and_numpy_scalars():
    lay = ArgLayout(["ptr", "int32", "float32", "ptr"])
    t = torch.arange(4, dtype=torch.float32)
    lay.pack([t, np.int64(5), np.float32(0.25), None])
    raw = lay.packed_bytes()
    assert struct.unpack_from("<Qif", raw, 0) == (t.data_ptr(), 5, 0.25)
    assert struct.unpack_from("<Q", raw, 16)[0] == 0


@pytest.mark.parametrize("types,args,match", [
    (["int32"], [2**31], r"argument 0 \(int32\)"),
    (["ptr", "uint8"], [0, -1], r"argument 1 \(uint8\)"),
    (["float32"], ["x"], r"argument 0 \(float32\)"),
    (["int32"], [1.5], r"argument 0 \(int32\).*integer"),
    (["tensor_map"], [b"short"], r"128 bytes"),
    (["ptr", "ptr"], [1], r"expects 2 arguments \(ptr, ptr\), got 1"),
])
def test_bad_arguments_are_named(types, args, match):
    with pytest.raises(TypeError, match=match):
        ArgLayout(types).pack(args)


def test_type_names():
    lay = ArgLayout(["half_t", "float*", "int", "unsigned long long", "CUtensorMap", "double"])
    assert lay.types == ("float16", "ptr", "int32", "uint64", "tensor_map", "float64")
    with pytest.raises(ValueError, match="unknown kernel parameter type"):
        ArgLayout(["quaternion"])


def _fake_launcher():
    """A ctypes function with cuLaunchKernel's signature that returns 0 (libc's abs of the
    null function handle): the whole Python side of a launch runs, the driver does not."""
    libc = ctypes.CDLL(None)
    addr = ctypes.cast(libc.abs, ctypes.c_void_p).value
    return ctypes.PYFUNCTYPE(ctypes.c_int)(addr)  # as driver.fast_launcher binds it


def test_python_cost_of_a_launch(monkeypatch):
    """The Python side of a launch stays a handful of calls: the per-call work that
    benchmarks/host_overhead.py times on a GPU (6 us per call), counted here so that the
    bound holds on any machine at any load."""
    fn = CudaKernelFunction(b"", "k", ["ptr", "ptr", "ptr", "int32"])
    fn._launch_fn = _fake_launcher()
    fn._entry[0] = (ctypes.c_void_p(0), 48 * 1024)
    monkeypatch.setattr(launch_mod, "current_device", lambda: 0)
    args = [0x7F0000001000, 0x7F0000002000, 0x7F0000003000, 12345]
    grid, block = (108, 1, 1), (128, 1, 1)
    stream = 0x7F00DEAD0000  # a 64-bit stream handle, as torch's are
    launch_fn(fn, grid, block, 0, stream, args)  # the first launch binds the stream
    _, calls = count_calls(launch_fn, fn, grid, block, 0, stream, args)
    print(f"\nlaunch (3 pointers + int): {calls}")
    assert struct.unpack_from("<QQQi", fn.layout.packed_bytes()) == tuple(args)
    # today 4 and 5: launch, CudaKernelFunction.launch, current_device and the packer; the
    # ctypes call, the lock and getattr. A per-argument Python conversion would add 4 or more.
    assert calls.python <= 6 and calls.builtin <= 8, calls


def test_failed_launch_names_the_kernel(monkeypatch):
    from tilelang.runtime import driver

    class Lib:  # stands in for libcuda in the error path
        @staticmethod
        def cuGetErrorName(code, out):
            out._obj.value = b"CUDA_ERROR_INVALID_VALUE"
            return 0

        @staticmethod
        def cuGetErrorString(code, out):
            out._obj.value = b"invalid argument"
            return 0

    monkeypatch.setattr(driver, "_raw", Lib)
    fn = CudaKernelFunction(b"", "my_kernel", ["ptr"])
    fn._launch_fn = lambda *a: driver.CUDA_ERROR_INVALID_VALUE
    fn._entry[0] = (ctypes.c_void_p(0), 48 * 1024)
    monkeypatch.setattr(launch_mod, "current_device", lambda: 0)
    with pytest.raises(driver.CudaDriverError) as e:
        fn.launch((1, 1, 1), (2048, 1, 1), 0, 0, [0])
    msg = str(e.value)
    assert "my_kernel" in msg and "block=(2048, 1, 1)" in msg
    assert "CUDA_ERROR_INVALID_VALUE" in msg and e.value.code == 1
    fn.launch((0, 1, 1), (32, 1, 1), 0, 0, [0])  # an empty grid is not an error
