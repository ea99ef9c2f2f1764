"""Named barriers: `T.sync_threads(id, count)` with an int or a computed id, and
`T.named_barrier_arrive(id, count)` (bar.arrive) for producer/consumer hand-offs."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import compile_cuda
from device_params import HAS_COMPILER, DEVICES


def _handoff():
    @T.prim_func
    def kernel(inp: T.Tensor((2,), "int32"), out: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            slot = T.alloc_shared((1,), "int32")
            if tx < 32:
                if tx == 0:
                    slot[0] = inp[0] + inp[1]
                T.named_barrier_arrive(10, 64)
                T.sync_threads(11, 64)
            else:
                T.sync_threads(10, 64)
                if tx == 32:
                    out[0] = slot[0]
                    out[1] = slot[0] * 2
                T.named_barrier_arrive(11, 64)
    return kernel


@pytest.mark.parametrize("device", DEVICES)
def test_arrive_then_sync_hands_a_value_over(device):
    inp = torch.tensor([41, 1], dtype=torch.int32, device=device)
    out = torch.zeros(2, dtype=torch.int32, device=device)
    tilelang.compile(_handoff(), target="cpu" if device == "cpu" else "cuda")(inp, out)
    assert out.cpu().tolist() == [42, 84]


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
def test_named_barriers_build_with_the_reference_helpers():
    src = tilelang.lower(_handoff(), target="cuda -arch=sm_90a")
    assert "tl::__named_barrier_arrive(10, 64);" in src
    assert "tl::__named_barrier_arrive(11, 64);" in src
    assert "tl::__sync_thread_partial(10, 64);" in src
    compile_cuda(src, "sm_90a")


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
def test_computed_barrier_id():
    @T.prim_func
    def kernel(A: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            A[tx] = A[tx] + 1.0
            T.sync_threads(T.int32(1))
            T.sync_threads(tx // 128 + 1, 128)

    src = tilelang.lower(kernel, target="cuda -arch=sm_90a")
    assert "tl::__sync_thread_partial(1, 256);" in src
    assert "tl::__sync_thread_partial((tx >> 7) + 1, 128);" in src
    compile_cuda(src, "sm_90a")


@pytest.mark.parametrize("args,match", [
    ((16, 64), "barrier_id must be in \\[0, 16\\)"),
    ((1, 48), "arrive_count must be a positive multiple of 32"),
    ((1.5, 64), "barrier_id must be an int or an integer expression"),
])
def test_bad_barrier_operands(args, match):
    with pytest.raises((ValueError, TypeError), match=match) as info:
        @T.prim_func
        def kernel(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                T.named_barrier_arrive(*args)
    assert "test_named_barriers.py" in str(info.value)
