"""T.ptx_cp_async / T.ptx_commit_group / T.ptx_wait_group / T.cp_async_barrier_noinc (the
reference's hand-written cp.async pipelines): interpreter results against torch, sm_80 and
sm_90a builds, located errors."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.runtime import compile_cuda, toolkit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu import role_kernels as R  # noqa: E402

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


@pytest.mark.parametrize("M", [16, 96, 112])
def test_predicated_copies(M):
    a = torch.randn(M, 64).half()
    b = torch.full((M, 64), float("nan")).half()
    tilelang.compile(R.cp_async_rows(M), target="cpu")(a, b)
    expect = 2 * a
    expect.view(-1, 16, 64)[:, 15] = 0  # the predicate zero-fills the last row of each tile
    torch.testing.assert_close(b, expect)


def test_lowering():
    src = tilelang.lower(R.cp_async_rows(96), target="cuda -arch=sm_80")
    body = src[src.index("threadIdx.x"):]
    assert "tl::cp_async_zfill<16>(" in body
    assert body.index("tl::cp_async_commit()") < body.index("tl::cp_async_wait<0>()") \
        < body.index("__syncthreads")


@pytest.mark.parametrize("n,chunks", [(512, 4), (1500, 4), (700, 3)])
def test_mbarrier_counts_the_copies(n, chunks):
    a = torch.randn(n)
    b = torch.full((n,), float("nan"))
    tilelang.compile(R.cp_async_mbarrier(n, chunks), target="cpu")(a, b)
    torch.testing.assert_close(b, a + 1)
    src = tilelang.lower(R.cp_async_mbarrier(n, chunks), target="cuda -arch=sm_90a")
    assert "tl::mbarrier_cp_async_arrive_noinc((&full[" in src


def test_gather_rows():
    kv = torch.randn(300, 128).bfloat16()
    idx = torch.randint(0, 300, (2 * 2 * 32,), dtype=torch.int32)
    out = torch.full((128, 128), float("nan")).bfloat16()
    tilelang.compile(R.cp_async_gather(300, D=128, BI=32), target="cpu")(kv, idx, out)
    assert torch.equal(out, kv[idx.long()])


@requires_compiler
def test_builds():
    compile_cuda(tilelang.lower(R.cp_async_rows(96), target="cuda -arch=sm_80"), "sm_80")
    compile_cuda(tilelang.lower(R.cp_async_mbarrier(700, 3), target="cuda -arch=sm_90a"),
                 "sm_90a")


def _copy(dst, src, n):
    @T.prim_func
    def f(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((64,), "float32")
            F = T.alloc_fragment((64,), "float32")
            bufs = {"S": S, "A": A, "F": F}
            T.ptx_cp_async(T.access_ptr(bufs[dst][0], "w"), T.access_ptr(bufs[src][0], "r"), n)
    return f


@pytest.mark.parametrize("dst,src,n,match", [("S", "A", 3, "4, 8 or 16 bytes"),
                                             ("A", "A", 1, "not shared"),
                                             ("S", "S", 1, "not global")])
def test_bad_copies_are_located(dst, src, n, match):
    with pytest.raises(KernelError, match=match) as e:
        _copy(dst, src, n)
    assert "test_cp_async.py" in str(e.value)


def test_wait_group_needs_a_static_count():
    with pytest.raises(KernelError, match="static count"):
        @T.prim_func
        def f(A: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=32):
                T.ptx_wait_group(A[0])
