"""On the GPU: a loop entered without a barrier of its own when the barrier its body needs
for the previous iteration's readers comes before each conflicting access (insert_sync,
tests/transform/test_insert_sync.py), and a read-only loop with its barrier before it,
compute what the programs say. Outputs NaN-poisoned, inputs fresh random."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "transform"))
from test_insert_sync import _stage_loop_after_a_read  # noqa: E402


@pytest.mark.parametrize("read_only", [False, True])
def test_stage_loop_after_a_read(read_only):
    kernel = tilelang.compile(_stage_loop_after_a_read(read_only), target="cuda")
    a = torch.randn(512, device="cuda")
    b = torch.full((512,), float("nan"), device="cuda")
    kernel(a, b)
    torch.cuda.synchronize()
    tiles = a.view(4, 128)
    if read_only:
        ref = tiles[0].flip(0).repeat(3) + 1.0
    else:
        torch.testing.assert_close(b[:128], tiles[0].flip(0))
        ref = (tiles[1:].flip(1) + 1.0).reshape(-1)
    torch.testing.assert_close(b[128:], ref)
