"""`tilelang.record.Record`: the data classes a cached kernel's loading imports compare, print
and pickle by their fields, as the dataclasses they replaced did."""

import pickle

import pytest

from tilelang.codegen.launch import CudaModuleSource, KernelLaunch, TmaDescriptor
from tilelang.runtime.cache import CompileResult


def test_fields_compare_print_and_pickle():
    a = KernelLaunch("main_kernel", (4, 1, 1), (128, 1, 1), 1024)
    b = KernelLaunch("main_kernel", (4, 1, 1), (128, 1, 1), 1024)
    assert a == b and a.notes == [] and a.notes is not b.notes and not a.cooperative
    assert a != KernelLaunch("main_kernel", (4, 1, 1), (128, 1, 1), 1024, cooperative=True)
    assert a != ("main_kernel", (4, 1, 1), (128, 1, 1), 1024, [], False)
    assert repr(a) == ("KernelLaunch(name='main_kernel', grid=(4, 1, 1), block=(128, 1, 1), "
                       "smem_bytes=1024, notes=[], cooperative=False)")
    back = pickle.loads(pickle.dumps(a))
    assert back == a and type(back) is KernelLaunch
    with pytest.raises(TypeError):
        hash(a)  # mutable: compared by value, not hashable
    with pytest.raises(AttributeError):
        a.colour = "red"  # slots: a misspelt field is an error, not a new attribute


def test_every_record_round_trips_through_pickle():
    launch = KernelLaunch("k", (1, 2, 3), (32, 1, 1), 0, ["a note"], True)
    records = [
        launch,
        TmaDescriptor("A_desc", None, (64, 64), 128),
        CudaModuleSource("// src", [launch], [], [], [], "sm_90a", aligned=((0, 16),)),
        CompileResult(b"\x7fELF", "", "nvrtc", True, 0.5, "sm_90a", ("-O3",), "k" * 64, "13.0"),
    ]
    for r in records:
        assert pickle.loads(pickle.dumps(r, protocol=5)) == r
    assert records[2].tma == [] and records[2].zeroed == ()
