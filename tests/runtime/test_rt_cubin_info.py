"""Register and local-memory counts read from the cubin, with no GPU (runtime/cubin_info.py)."""

import pytest
from rt_helpers import requires_compiler

import tilelang
import tilelang.language as T
from tilelang.runtime.cubin_info import resource_usage


def _kernel(n_local):
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), idx: T.Tensor((256,), "int32"),
             B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            buf = T.alloc_local((n_local,), "float32")
            t = T.get_thread_binding()
            for i in T.serial(n_local):
                buf[i] = A[(t + i) % 256]
            for i in T.serial(n_local):  # data-dependent indices keep the array in memory
                buf[idx[(t + i) % 256] % n_local] += 1.0
            B[t] = buf[idx[t] % n_local]

    return main


@requires_compiler
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_counts_without_a_gpu(arch):
    small = tilelang.compile(_kernel(2), target=f"cuda -arch={arch}")
    big = tilelang.compile(_kernel(64), target=f"cuda -arch={arch}")
    assert isinstance(small.n_regs, int) and 8 <= small.n_regs <= 255
    assert small.n_spills == 0
    # 64 floats indexed at run time cannot live in registers: a local frame of >= 256 bytes
    assert big.n_spills >= 64 * 4


@requires_compiler
def test_usage_is_keyed_by_kernel_name():
    k = tilelang.compile(_kernel(2), target="cuda -arch=sm_80")
    fn = k.adapter.functions[0]
    usage = resource_usage(fn.cubin)
    assert list(usage) == [fn.name]
    assert usage[fn.name][0] == k.n_regs


def test_not_a_cubin_is_refused():
    with pytest.raises(ValueError, match="ELF"):
        resource_usage(b"not an elf file at all")
