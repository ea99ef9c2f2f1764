"""interp/memory.py: a per-thread variable (`T.alloc_var`) assigned inside a T.Parallel body
holds one value per iteration on the CPU interpreter, as each GPU thread's own variable does
for the iteration it runs (issue 1549's `idx = i; Data[i] = idx`). What the GPU leaves to
the thread mapping is refused at the user's line: a read of the variable in an iteration that
has not assigned it, or after the loop when iterations left different values."""

import pytest
import torch

import tilelang
import tilelang.language as T

from device_params import DEVICES, target_of


def per_iteration(M, shift):
    @T.prim_func
    def main(Data: T.Tensor((M,), "int32")):
        with T.Kernel(1, threads=64) as _:
            idx = T.alloc_var(T.int32)
            for i in T.Parallel(M):
                idx = i * 3 + shift
                Data[i] = idx + 1
    return main


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("M", [64, 200, 2048])
def test_each_iteration_reads_its_own_assignment(M, device):
    kernel = tilelang.compile(per_iteration(M, 5), target=target_of(device))
    data = torch.full((M,), -7, dtype=torch.int32, device=device)
    kernel(data)
    assert torch.equal(data.cpu(), torch.arange(M, dtype=torch.int32) * 3 + 6)


def test_the_cuda_build_agrees_on_the_program():
    src = tilelang.compile(per_iteration(200, 5), target="cuda -arch=sm_90a").get_kernel_source()
    assert "idx" in src


def _read_after(same_value):
    @T.prim_func
    def main(Data: T.Tensor((128,), "int32"), Out: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=64) as _:
            v = T.alloc_var(T.int32)
            for i in T.Parallel(128):
                v = 4 if same_value else i
                Data[i] = v
            Out[0] = v
    return main


def test_a_value_all_iterations_agree_on_survives_the_loop():
    kernel = tilelang.compile(_read_after(True), target="cpu")
    data, out = torch.zeros(128, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    kernel(data, out)
    assert (data == 4).all() and out.item() == 4


def test_reading_an_iteration_dependent_value_after_the_loop_is_refused():
    kernel = tilelang.compile(_read_after(False), target="cpu")
    with pytest.raises(NotImplementedError, match="last iteration it ran"):
        kernel(torch.zeros(128, dtype=torch.int32), torch.zeros(1, dtype=torch.int32))


def _carried():
    @T.prim_func
    def main(Data: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=64) as _:
            v = T.alloc_var(T.int32)
            v = 0
            for i in T.Parallel(128):
                Data[i] = v
                v = i
    return main


def _partly_assigned():
    @T.prim_func
    def main(Data: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=64) as _:
            v = T.alloc_var(T.int32)
            for i in T.Parallel(128):
                if i % 2 == 0:
                    v = i
                Data[i] = v
    return main


@pytest.mark.parametrize("make,words", [(_carried, "before this assignment"),
                                        (_partly_assigned, "has not assigned it")])
def test_values_carried_between_iterations_are_refused(make, words):
    kernel = tilelang.compile(make(), target="cpu")
    with pytest.raises(NotImplementedError, match=words) as e:
        kernel(torch.zeros(128, dtype=torch.int32))
    assert "test_interp_memory.py" in str(e.value)
