"""T.tma_store_wait(count, read): with read=True (the default) it waits until the shared
tiles of all but `count` bulk-store groups may be reused (cp.async.bulk.wait_group.read), with
read=False until their global writes are done (cp.async.bulk.wait_group); the reference tests
this with its header's spelling (tl::tma_store_wait<0, true>), listed in docs/compatibility.md."""

from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.runtime import compile_cuda, toolkit


def wait_only(**kw):
    @T.prim_func
    def main():
        with T.Kernel(threads=128):
            T.tma_store_wait(**kw)

    return main


@pytest.mark.parametrize("kw,call", [({}, "tl::tma_store_wait<0>();"),
                                     ({"read": True, "count": 2}, "tl::tma_store_wait<2>();"),
                                     ({"read": False}, "tl::tma_store_wait_complete<0>();")])
def test_read_selects_the_wait(kw, call):
    src = tilelang.lower(wait_only(**kw), target="cuda -arch=sm_90a")
    assert call in src[src.index("__global__"):]


def test_the_header_waits_as_documented():
    text = (Path(tilelang.__file__).parent / "include" / "tl" / "tma.cuh").read_text()
    read = text[text.index("void tma_store_wait()"):text.index("void tma_store_wait_complete()")]
    complete = text[text.index("void tma_store_wait_complete()"):]
    assert "cp.async.bulk.wait_group.read" in read
    assert "cp.async.bulk.wait_group %0" in complete[:300]


def test_a_negative_count_is_located():
    with pytest.raises(KernelError, match="non-negative") as e:
        wait_only(count=-1)
    assert "test_tma_store_wait.py" in str(e.value)


@pytest.mark.skipif(toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
                    reason="no CUDA compiler (NVRTC or nvcc) installed")
def test_builds_for_sm90a():
    compile_cuda(tilelang.lower(wait_only(read=False), target="cuda -arch=sm_90a"), "sm_90a")
