"""Explicit Hopper controls lower to the right CUDA: barriers initialised once with their
arrive counts, roles guarded by the warpgroup index, no block-wide barrier between or inside
user-synchronised roles (the other warpgroup never reaches it), clear errors for misuse."""

import re
import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.runtime import compile_cuda, toolkit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu import kernels as K  # noqa: E402

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


def _body(src: str) -> str:
    return src[src.index("threadIdx.x"):]


def test_barriers_are_initialised_once_with_their_counts():
    body = _body(tilelang.lower(K.ws_stream(1000, 4), target="cuda -arch=sm_90a"))
    inits = re.findall(r"tl::mbarrier_init\(\(&(\w+)\[(\d)\]\), (\d+)\)", body)
    assert sorted(inits) == [("empty", "0", "128"), ("empty", "1", "128"),
                             ("full", "0", "128"), ("full", "1", "128")]
    assert body.index("fence_mbarrier_init") < body.index("__syncthreads")


def test_no_block_barrier_between_or_inside_roles():
    body = _body(tilelang.lower(K.ws_stream(1000, 4), target="cuda -arch=sm_90a"))
    roles = body[body.index("(tx >> 7) == 0"):]
    assert "__syncthreads" not in roles, roles
    assert "(tx >> 7) == 1" in roles


def test_barrier_before_roles_when_earlier_code_touches_their_tiles():
    @T.prim_func
    def f(A: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            bar = T.alloc_barrier(128)
            S = T.alloc_shared((256,), "float32")
            tx = T.get_thread_binding()
            S[tx] = A[tx]
            with T.ws(0):
                T.barrier_arrive(bar[0])
            with T.ws(1):
                T.barrier_wait(bar[0], 0)
                A[tx] = S[255 - tx]

    body = _body(tilelang.lower(f, target="cuda -arch=sm_90a"))
    first_role = body.index("(tx >> 7) == 0")
    store = body.index("S[tx] =")
    assert store < body.index("__syncthreads", store) < first_role
    assert "__syncthreads" not in body[first_role:]


def test_wait_wgmma_expect_tx_and_fence_lower_to_helpers():
    @T.prim_func
    def f(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            bar = T.alloc_barrier([1])
            T.mbarrier_expect_tx(bar[0], 512)
            T.mbarrier_arrive_expect_tx(mbarrier=bar[0], tx=256)
            T.fence_proxy_async()
            T.mbarrier_wait_parity(bar[0], 0)
            T.wait_wgmma(1)

    body = _body(tilelang.lower(f, target="cuda -arch=sm_90a"))
    # the reference's expect_tx only raises the transaction count; arrive_expect_tx arrives too
    assert "tl::mbarrier_expect_tx((&bar[0]), 512)" in body
    assert "tl::mbarrier_arrive_expect_tx((&bar[0]), 256)" in body
    assert "tl::fence_proxy_async()" in body
    assert "tl::mbarrier_wait((&bar[0]), 0)" in body
    assert "tl::wgmma_wait<1>()" in body


@pytest.mark.parametrize("counts", [0, [128, -1], 2.5])
def test_bad_arrive_counts_are_rejected_at_the_users_line(counts):
    def build():
        @T.prim_func
        def f(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                T.alloc_barrier(counts)
        return f

    with pytest.raises(KernelError, match="arrive counts") as info:
        tilelang.lower(build(), target="cuda -arch=sm_90a")
    assert "test_hopper_controls.py" in str(info.value)


def test_waiting_on_a_non_barrier_is_rejected():
    def build():
        @T.prim_func
        def f(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((4,), "float32")
                T.barrier_wait(S[0], 0)
        return f

    with pytest.raises(KernelError, match="T.alloc_barrier"):
        tilelang.lower(build(), target="cuda -arch=sm_90a")


@pytest.mark.parametrize("n,chunks", [(512, 2), (1000, 4), (3000, 5)])
def test_interpreter_runs_roles_side_by_side(n, chunks):
    # the producer fills both buffers, then waits for the consumer to hand one back: the
    # roles only make progress when they run side by side
    import torch

    a = torch.randn(n)
    b = torch.full((n,), float("nan"))
    tilelang.compile(K.ws_stream(n, chunks), target="cpu")(a, b)
    torch.testing.assert_close(b, a * 2 + 1)


@requires_compiler
def test_generated_cuda_compiles_for_sm90a():
    compile_cuda(tilelang.lower(K.ws_stream(5000, 8), target="cuda -arch=sm_90a"), "sm_90a")


def _named_sync_kernel(count=128):
    @T.prim_func
    def f(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared((256,), "float32")
            tx = T.get_thread_binding()
            S[tx] = A[tx] * 3.0
            T.sync_threads(1, count)
            B[tx] = S[tx ^ 1]
    return f


def test_named_barrier_lowers_to_bar_sync_and_interprets():
    import numpy as np
    import torch

    src = tilelang.lower(_named_sync_kernel(), target="cuda -arch=sm_90a")
    assert "tl::__sync_thread_partial(1, 128)" in src
    a = torch.randn(256)
    b = torch.full((256,), float("nan"))
    tilelang.compile(_named_sync_kernel(), target="cpu")(a, b)
    np.testing.assert_allclose(b.numpy(), (a * 3).numpy()[np.arange(256) ^ 1], rtol=1e-6)


def test_named_barrier_needs_whole_warps():
    with pytest.raises(KernelError, match="multiple of 32"):
        tilelang.lower(_named_sync_kernel(100), target="cuda -arch=sm_90a")
