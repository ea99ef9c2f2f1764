"""On the GPU: an index negative in every iteration (`A[-k - 1]`) counts from the end (the
kernel is built in tests/language/test_frontend_builder_names.py)."""

import pytest
import torch

import tilelang
from tests.language.test_frontend_builder_names import _from_the_end


@pytest.mark.gpu
def test_an_index_negative_in_every_iteration_on_the_gpu():
    a = torch.randn(16, device="cuda")
    b = torch.full((8,), float("nan"), device="cuda")
    tilelang.compile(_from_the_end())(a, b)
    torch.testing.assert_close(b.cpu(), a.cpu().flip(0)[:8])
