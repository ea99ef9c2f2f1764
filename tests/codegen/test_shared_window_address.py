"""T.ptx_cp_async destinations are written as a tile's shared-window address plus a byte offset
(codegen/intrinsics.py, `_shared_window_address`), 32-bit arithmetic in which ptxas folds each
copy's constant part into the instruction. Written as `&tile[i]` (a 64-bit generic pointer
that NVVM truncates after the add), NVRTC's code kept every distinct address of an unrolled
copy in a register of its own: the sparse MLA producer spilled at 80 registers and could not
issue its index loads early (H200, 2026-11-27: 29.0 -> 26.6 us kernel time). T.copy's lowered
cp.async keep pointer destinations (measured: no gain there, one pipelined gemv slower)."""

import os
import re
import sys

import pytest

import tilelang
from tilelang.runtime import compile_cuda, toolkit
from tilelang.runtime.cubin_info import resource_usage

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.gpu import kernels as K_  # noqa: E402
from tests.gpu import role_kernels as R  # noqa: E402

requires_nvrtc = pytest.mark.skipif(toolkit.nvrtc_backend() is None,
                                    reason="NVRTC not installed (the `cuda` extra)")

_CALL = re.compile(r"tl::cp_async(?:_zfill)?<\d+>\((.*)\);")


def _destinations(src):
    """The first argument of every cp.async call (up to the top-level comma)."""
    out = []
    for args in _CALL.findall(src):
        depth = 0
        for i, ch in enumerate(args):
            depth += ch in "([" and 1 or (ch in ")]" and -1 or 0)
            if ch == "," and depth == 0:
                out.append(args[:i])
                break
    return out


_WINDOW = re.compile(r"\(tl::smem_addr\(\w+\) \+ \(uint32_t\)\(.+\) \* \du\)")


@pytest.mark.parametrize("kernel,arch", [
    (lambda: R.cp_async_rows(96), "sm_80"),  # with a predicate (zfill)
    (lambda: R.cp_async_gather(512), "sm_90a"),
    (lambda: R.cp_async_mbarrier(700, 3), "sm_90a"),  # in a T.ws role, counted by an mbarrier
], ids=["predicated_rows", "gather", "mbarrier_role"])
def test_ptx_cp_async_destination_is_a_window_address(kernel, arch):
    src = tilelang.lower(kernel(), target=f"cuda -arch={arch}")
    dests = _destinations(src)
    assert dests, "no cp.async in the kernel"
    for d in dests:
        assert _WINDOW.fullmatch(d), d


def test_lowered_copies_keep_pointers():
    src = tilelang.lower(K_.gemm(256, 256, 256, 128, 128, 32, num_stages=3),
                         target="cuda -arch=sm_80")
    dests = _destinations(src)
    assert dests and all(re.fullmatch(r"\(&\w+\[.+\]\)", d) for d in dests), dests


@requires_nvrtc
@pytest.mark.parametrize("cap", [40, 64])
def test_gather_keeps_no_address_per_copy(cap):
    """72 copies a thread (2 stages x 4 rows x 9 columns) from one base register: NVRTC 13.0
    gives the kernel 40 registers under either cap; with `&S[i]` destinations it took 64 and
    78 (each address hoisted out of the loop into a register of its own; nvcc's front end
    kept those 32-bit, so the test asks NVRTC, which the GPU path uses)."""
    src = tilelang.lower(R.cp_async_gather(512), target="cuda -arch=sm_90a")
    built = compile_cuda(src, "sm_90a", options=[f"-maxrregcount={cap}"], compiler="nvrtc")
    regs, frame = resource_usage(built.cubin)["main_kernel"]
    assert frame == 0 and regs <= 48, (regs, frame)
