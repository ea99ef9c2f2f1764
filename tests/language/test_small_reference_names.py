"""Small names of the reference's T namespace: `T.align_up`, `T.clamp` with keyword bounds,
`T.transpose` of a shared tile, `T.annotate_min_blocks_per_sm` (launch bounds) and `T.int32()`
as a fresh variable."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from device_params import HAS_COMPILER, DEVICES, target_of as _target


@pytest.mark.parametrize("device", DEVICES)
def test_align_up_and_ceildiv_of_runtime_values(device):
    @T.prim_func
    def k(A: T.Tensor((8,), "int32"), V: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=8):
            tx = T.get_thread_binding()
            A[tx] = T.align_up(V[tx], 32)

    v = torch.tensor([128, 1, -1, -2, 0, 33, 64, -33], dtype=torch.int32)
    a = torch.zeros(8, dtype=torch.int32, device=device)
    tilelang.compile(k, target=_target(device))(a, v.to(device))
    assert a.cpu().tolist() == [(-(-x // 32)) * 32 for x in v.tolist()]
    assert T.align_up(5, 4) == 8 and T.align_up(-1, 32) == 0


@pytest.mark.parametrize("device", DEVICES)
def test_clamp_keyword_bounds(device):
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((3, 64), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            B[0, tx] = T.clamp(A[tx], min_val=-0.5, max_val=0.25)
            B[1, tx] = T.clamp(A[tx], min_val=0.0)
            B[2, tx] = T.clamp(A[tx], -1.0, 1.0)

    a = torch.randn(64) * 2
    b = torch.zeros(3, 64, device=device)
    tilelang.compile(k, target=_target(device))(a.to(device), b)
    torch.testing.assert_close(b.cpu(), torch.stack([a.clamp(-0.5, 0.25), a.clamp(min=0.0),
                                                     a.clamp(-1.0, 1.0)]))


def _transpose_kernel(M, N, dtype):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((M, N), dtype)
            tile_t = T.alloc_shared((N, M), dtype)
            T.copy(A, tile)
            T.transpose(tile, tile_t)
            T.copy(tile_t, B)
    return main


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("M,N,dtype", [(64, 32, "float16"), (33, 17, "float32")])
def test_transpose_of_a_shared_tile(device, M, N, dtype):
    a = torch.randn(M, N).to(getattr(torch, dtype))
    kernel = tilelang.compile(_transpose_kernel(M, N, dtype), out_idx=[1],
                              target=_target(device))
    assert torch.equal(kernel(a.to(device)).cpu(), a.T)
    if device == "cpu" and HAS_COMPILER:
        tilelang.compile(_transpose_kernel(M, N, dtype), out_idx=[1],
                         target="cuda -arch=sm_90a")


def test_transpose_shape_mismatch_is_located():
    with pytest.raises(ValueError, match="needs \\[16, 8\\]") as info:
        @T.prim_func
        def k(A: T.Tensor((8, 16), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((8, 16), "float32")
                t = T.alloc_shared((8, 16), "float32")
                T.transpose(s, t)
    assert "test_small_reference_names.py" in str(info.value)


def test_min_blocks_per_sm_sets_launch_bounds():
    @T.prim_func
    def k(A: T.Tensor((128, 128), "float32")):
        with T.Kernel(128, threads=128) as bx:
            T.annotate_min_blocks_per_sm(2)
            for i in T.serial(128):
                A[bx, i] = A[bx, i] + 1.0

    src = tilelang.lower(k, target="cuda -arch=sm_90a")
    assert "__launch_bounds__(128, 2)" in src
    with pytest.raises(ValueError, match="takes a positive int"):
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                T.annotate_min_blocks_per_sm(0)


def test_dtype_call_without_value_is_a_variable():
    a = T.int32()
    assert isinstance(a, ir.Var) and str(a.dtype) == "int32"
    assert (T.uint64() & T.uint64(0xFFFFFFFFFFFFFFFF)).dtype == "uint64"
    assert T.int64(-0x7FFFFFFFFFFFFFFF - 1).value == -2**63


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("extent", [0, 32, 64, 96])
def test_shuffle_elect_and_warp_indices(device, extent):
    n = 192

    @T.prim_func
    def k(O: T.Tensor((5, n), "int32")):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            O[0, tx] = T.shuffle_elect(extent)
            O[1, tx] = T.get_lane_idx(None)
            O[2, tx] = T.get_warp_idx_sync(None)
            O[3, tx] = T.get_warp_group_idx(None, None)
            O[4, tx] = T.get_warp_group_idx(16, 2)

    o = torch.full((5, n), -1, dtype=torch.int32, device=device)
    tilelang.compile(k, target=_target(device))(o)
    t = torch.arange(n)
    elect = (t == 0) if extent == 0 else (t % extent == 0)
    expect = torch.stack([elect.int(), t % 32, t // 32, t // 128, t // 32]).int()
    assert torch.equal(o.cpu(), expect)


def test_empty_takes_sizes_as_separate_arguments():
    @tilelang.jit(target="cpu")
    def twice(A):
        M, N = T.const("M, N")
        A: T.Tensor[[M, N], T.float32]
        B = T.empty(M, N, dtype=T.float32)
        C = T.empty((M, N), T.float32)
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(M, N):
                B[i, j] = A[i, j] * 2.0
                C[i, j] = A[i, j] * 3.0
        return B, C

    a = torch.randn(4, 8)
    b, c = twice(a)
    torch.testing.assert_close(b, a * 2)
    torch.testing.assert_close(c, a * 3)
