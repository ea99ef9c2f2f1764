"""A shared-memory access inside fully unrolled loops is written `(tile + rest)[unrolled]`
(codegen/cuda.py, `_unrolled_split`): the terms of the unrolled loop vars, constants once
NVVM unrolls, become the load's immediate offset. NVRTC computes shared addresses in 64 bits
(nvcc in 32), and with `tile[rest + unrolled]` ptxas spent an add and a shift on every
access: mHC pre's gemm loaded 128 bfloat16 values a stage that way (1,448 -> 1,224 loop
instructions, NVRTC 13.0)."""

import os
import re
import sys

import pytest

import tilelang
from tilelang.runtime import compile_cuda, toolkit
from tilelang.runtime.cubin_info import code_bytes

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "transform"))
from exact_operand_kernels import converted_a  # noqa: E402

requires_nvrtc = pytest.mark.skipif(toolkit.nvrtc_backend() is None,
                                    reason="NVRTC not installed (the `cuda` extra)")

_SPLIT = re.compile(r"\(As \+ \((.+?)\)\)\[(.+?)\]")


def _source():
    """mHC pre's A tile: bfloat16 32 x 256, swizzled, read element-wise by 128 threads."""
    return tilelang.lower(converted_a(96, 32, 1024, block_K=256, swizzle=True),
                          target="cuda -arch=sm_90a")


def test_unrolled_terms_index_the_offset_pointer():
    src = _source()
    loads = [line for line in src.splitlines() if "a_narrow[" in line and "= " in line
             and "As" in line]
    assert loads, src
    for line in loads:
        m = _SPLIT.search(line)
        assert m, line
        rest, unrolled = m.groups()
        assert "tx" in rest, line  # the thread's part (with the swizzle's XOR of both)
        assert "v_" in unrolled and "tx" not in unrolled, line  # the unrolled loop's part


def test_accesses_in_serial_loops_keep_one_index():
    import tilelang.language as T

    @T.prim_func
    def k(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((256,), "float32")
            T.copy(A, S)
            tx = T.get_thread_binding()
            for i in T.serial(8):
                B[i * 32 + tx] = S[i * 32 + tx] * 2.0

    src = tilelang.lower(k, target="cuda -arch=sm_90a")
    assert "S[i * 32 + tx]" in src, src


def _unsplit(src):
    """The same kernel with every split access written back as one index."""
    return _SPLIT.sub(lambda m: f"As[{m.group(1)} + {m.group(2)}]", src)


@requires_nvrtc
def test_split_saves_instructions_under_nvrtc():
    src = _source()
    plain = _unsplit(src)
    assert plain != src
    split_size = code_bytes(compile_cuda(src, "sm_90a", compiler="nvrtc").cubin)["k_kernel"]
    plain_size = code_bytes(compile_cuda(plain, "sm_90a", compiler="nvrtc").cubin)["k_kernel"]
    assert split_size < plain_size, (split_size, plain_size)
