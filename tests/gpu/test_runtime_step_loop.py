"""On the GPU: a T.serial loop whose step is a kernel argument (of either sign) visits
the values of Python's range (tests/language/test_frontend_builder_names.py builds it)."""

import pytest
import torch

import tilelang
from tests.language.test_frontend_builder_names import strided_kernel


@pytest.mark.gpu
def test_serial_loop_with_a_runtime_step_on_the_gpu():
    kernel = tilelang.compile(strided_kernel())
    for start, stop, step in [(1, 10, 3), (10, 0, -3), (5, 5, 2), (3, 14, 5)]:
        a = torch.full((16,), 99, dtype=torch.int32, device="cuda")
        kernel(a, start, stop, step)
        visited = list(range(start, stop, step))
        assert a.cpu().tolist() == visited + [-1] * (16 - len(visited))
