"""`T.Kernel` frame behaviours taken from the reference's regression tests: binding the block
index as a one-element tuple, and a grid with no blocks (an error when the kernel is called,
not when it is built)."""

import pytest
import torch

import tilelang
import tilelang.language as T

DEVICES = ["cpu", pytest.param("cuda", marks=[
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")])]


def _target(device):
    return "cpu" if device == "cpu" else "cuda"


@pytest.mark.parametrize("device", DEVICES)
def test_one_dimensional_grid_binds_as_a_tuple(device):
    @T.prim_func
    def k(O: T.Tensor((4,), "int32")):
        with T.Kernel(4, threads=32) as (bx,):
            tx = T.get_thread_binding()
            if tx == 0:
                O[bx] = bx * 10

    out = torch.full((4,), -1, dtype=torch.int32, device=device)
    tilelang.compile(k, target=_target(device))(out)
    assert out.cpu().tolist() == [0, 10, 20, 30]


@pytest.mark.parametrize("device", DEVICES)
def test_two_dimensional_grid_binds_as_a_tuple_and_scalar_binding_still_works(device):
    @T.prim_func
    def k(O: T.Tensor((2, 3), "int32"), P: T.Tensor((3,), "int32")):
        with T.Kernel(3, 2, threads=32) as (bx, by):
            if T.get_thread_binding() == 0:
                O[by, bx] = by * 3 + bx
        with T.Kernel(3, threads=32) as b:
            if T.get_thread_binding() == 0:
                P[b] = b

    o = torch.full((2, 3), -1, dtype=torch.int32, device=device)
    p = torch.full((3,), -1, dtype=torch.int32, device=device)
    tilelang.compile(k, target=_target(device))(o, p)
    assert o.cpu().flatten().tolist() == list(range(6))
    assert p.cpu().tolist() == [0, 1, 2]


def test_unpacking_more_names_than_grid_axes_is_a_python_error():
    with pytest.raises(ValueError, match="not enough values to unpack"):
        @T.prim_func
        def k(O: T.Tensor((4,), "int32")):
            with T.Kernel(4, threads=32) as (bx, by):
                O[bx] = by


@pytest.mark.parametrize("device", DEVICES)
def test_launch_thread_is_the_kernels_own_index(device):
    """T.launch_thread("threadIdx.x", n) names the thread index the T.Kernel launches."""
    @T.prim_func
    def k(O: T.Tensor((3, 64), "int32")):
        with T.Kernel(3, threads=64) as (bx,):
            tx = T.launch_thread("threadIdx.x", 64)
            b = T.launch_thread("blockIdx.x", 3)
            O[b, tx] = tx * 10 + bx

    out = torch.full((3, 64), -1, dtype=torch.int32, device=device)
    tilelang.compile(k, target=_target(device))(out)
    want = torch.arange(64, dtype=torch.int32)[None, :] * 10 + torch.arange(3)[:, None]
    assert torch.equal(out.cpu(), want.int())


@pytest.mark.parametrize("name,extent,match", [("threadIdx.x", 128, "extent 64"),
                                               ("warp.x", 64, "threadIdx.x/y/z")])
def test_launch_thread_errors_are_located(name, extent, match):
    from tilelang.errors import KernelError

    with pytest.raises(KernelError, match=match) as e:
        @T.prim_func
        def k(O: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64):
                O[T.launch_thread(name, extent)] = 1
    assert "test_kernel_frame.py" in str(e.value)


@pytest.mark.parametrize("threads", [0, -32, (128, 0), [32, 1, -2], (1, 2, 3, 4), 32.0])
def test_non_positive_or_malformed_thread_extents_are_located_errors(threads):
    with pytest.raises(ValueError, match="threads") as info:
        @T.prim_func
        def empty_block(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=threads):
                A[0] = 1.0
    assert "test_kernel_frame.py" in str(info.value)


def test_thread_extents_keep_the_named_dimensions():
    @T.prim_func
    def two_d(A: T.Tensor((8, 4), "float32")):
        with T.Kernel(1, threads=(4, 8)):
            tx, ty = T.get_thread_bindings()[:2]
            A[ty, tx] = tx + ty * 10.0

    a = torch.zeros(8, 4)
    tilelang.compile(two_d, target="cpu")(a)
    assert a.tolist() == [[x + y * 10.0 for x in range(4)] for y in range(8)]
