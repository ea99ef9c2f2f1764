"""T.PersistentTileScheduler: every tile visited once, in the documented order (panels of
swizzle_size along the secondary axis, the primary axis swept whole), by worker
linear_idx % num_workers at iteration linear_idx // num_workers; stateful (while loop) and
stateless (coord) forms; builds for sm_80."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.runtime import compile_cuda, toolkit


def _kernel(MT, NT, workers, swizzle, column_major=True, stateful=True):
    @T.prim_func
    def f(O: T.Tensor((MT, NT), "int32"), W: T.Tensor((MT, NT), "int32")):
        with T.Kernel(workers, threads=32) as bid:
            tx = T.get_thread_binding()
            if stateful:
                sched = T.PersistentTileScheduler(MT, NT, workers, swizzle_size=swizzle,
                                                  column_major=column_major, name="s")
                sched.init(bid)
                while sched.valid():
                    if tx == 0:
                        O[sched.m_idx, sched.n_idx] = sched.linear_idx
                        W[sched.m_idx, sched.n_idx] = sched.current_iter * 1000 + bid
                    sched.next_tile()
            else:
                sched = T.PersistentTileScheduler(MT, NT, workers, swizzle_size=swizzle,
                                                  column_major=column_major, stateful=False)
                for w in T.serial(T.ceildiv(MT * NT, workers)):
                    t = w * workers + bid
                    m, n = sched.coord(t)
                    if tx == 0 and t < MT * NT:
                        O[m, n] = t
                        W[m, n] = w * 1000 + bid
    return f


def _expected(MT, NT, swizzle, column_major):
    out = torch.full((MT, NT), -1, dtype=torch.int32)
    P, S = (MT, NT) if column_major else (NT, MT)
    for t in range(MT * NT):
        g = t // (P * swizzle)
        base = g * swizzle
        width = max(1, min(swizzle, S - base))
        fast, slow = (t - g * P * swizzle) // width, base + (t - g * P * swizzle) % width
        out[(fast, slow) if column_major else (slow, fast)] = t
    return out


@pytest.mark.parametrize("MT,NT,workers,swizzle,column_major",
                         [(7, 5, 3, 1, True), (7, 5, 3, 2, True), (16, 13, 4, 8, True),
                          (6, 9, 5, 4, False)])
@pytest.mark.parametrize("stateful", [True, False])
def test_tile_order(MT, NT, workers, swizzle, column_major, stateful):
    o = torch.full((MT, NT), -1, dtype=torch.int32)
    w = o.clone()
    tilelang.compile(_kernel(MT, NT, workers, swizzle, column_major, stateful),
                     target="cpu")(o, w)
    expect = _expected(MT, NT, swizzle, column_major)
    assert torch.equal(o, expect)
    assert torch.equal(w % 1000, expect % workers)  # worker
    assert torch.equal(w // 1000, expect // workers)  # its iteration


@pytest.mark.skipif(toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
                    reason="no CUDA compiler (NVRTC or nvcc) installed")
def test_builds():
    compile_cuda(tilelang.lower(_kernel(16, 13, 4, 8), target="cuda -arch=sm_80"), "sm_80")


def test_stateless_has_no_state():
    with pytest.raises(KernelError, match="stateful=False"):
        @T.prim_func
        def f(O: T.Tensor((4,), "int32")):
            with T.Kernel(2, threads=32):
                sched = T.PersistentTileScheduler(2, 2, 2, stateful=False)
                O[0] = sched.m_idx
