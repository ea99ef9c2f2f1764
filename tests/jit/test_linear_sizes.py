"""A size that appears only inside an extent `a * n + b` (`T.Tensor((n * 4,), ...)`) is solved
from the argument's shape, as the reference binds it; shapes that no integer n gives are an
error naming the parameter."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import DEVICES


def _kernel(extent_of):
    n = T.symbolic("n")

    @T.prim_func
    def kernel(A: T.Tensor((extent_of(n),), "int32"), B: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=1):
            B[0] = n
            for i in T.serial(extent_of(n)):
                A[i] = i
    return kernel


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("extent_of,size,n", [(lambda n: n * 4, 16, 4), (lambda n: n + 1, 16, 15),
                                              (lambda n: n * 3 + 1, 16, 5),
                                              (lambda n: 2 * n - 2, 10, 6)])
def test_sizes_solved_from_linear_extents(device, extent_of, size, n):
    kernel = tilelang.compile(_kernel(extent_of), target="cpu" if device == "cpu" else "cuda")
    a = torch.full((size,), -1, dtype=torch.int32, device=device)
    b = torch.zeros(2, dtype=torch.int32, device=device)
    kernel(a, b)
    assert b[0].item() == n
    assert a.cpu().tolist() == list(range(size))


def test_shapes_no_integer_size_gives_are_rejected():
    kernel = tilelang.compile(_kernel(lambda n: n * 4), target="cpu")
    with pytest.raises(ValueError, match="parameter 'A': shape\\[0\\] = 18 is not 4 \\* n \\+ 0"):
        kernel(torch.zeros(18, dtype=torch.int32), torch.zeros(2, dtype=torch.int32))
