"""analysis/alignment.py and the launchers' check: a kernel that reads or writes a tensor
parameter with vector accesses records the alignment they need; a call passing a view that
starts at a misaligned address raises a ValueError naming the parameter, instead of stopping
the kernel with CUDA_ERROR_MISALIGNED_ADDRESS (which leaves the CUDA context unusable)."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.transform.pass_config import PassConfigKey

from test_vectorize import _row_copy
from transform_helpers import SM80, SM90, requires_compiler, requires_gpu


def _tile_copy(M=256, N=256, dtype="float16"):
    @T.prim_func
    def f(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(M // 64, threads=128) as bx:
            S = T.alloc_shared((64, N), dtype)
            T.copy(A[bx * 64, 0], S)
            T.copy(S, B[bx * 64, 0])
    return f


@requires_compiler
def test_vector_accesses_record_the_alignment_they_need():
    module = tilelang.compile(_row_copy(), target=SM90).adapter.module
    assert module.aligned == ((0, 16), (1, 16)), module.aligned
    module = tilelang.compile(_tile_copy(), target=SM80).adapter.module
    assert dict(module.aligned) == {0: 16, 1: 16}, module.aligned


@requires_compiler
def test_the_requirement_comes_back_with_a_cached_program(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "tl-cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    first = tilelang.compile(_row_copy(), target=SM90).adapter
    again = tilelang.compile(_row_copy(), target=SM90).adapter
    assert again.program_cache_hit and not first.program_cache_hit
    assert again.module.aligned == first.module.aligned == ((0, 16), (1, 16))


@requires_compiler
def test_element_accesses_need_no_more_than_the_element():
    configs = {PassConfigKey.TIR_DISABLE_VECTORIZE: True}
    kernel = tilelang.compile(_row_copy(), target=SM90, pass_configs=configs)
    assert kernel.adapter.module.aligned == ()


@requires_gpu
def test_a_misaligned_view_is_a_clear_error_and_the_context_survives():
    import torch

    kernel = tilelang.compile(_row_copy(), target="cuda")
    b = torch.randn(128 * 256 + 1, device="cuda").half()
    c = torch.full((128, 128), float("nan"), device="cuda").half()
    aligned, misaligned = b[:-1].view(128, 256), b[1:].view(128, 256)
    for _ in range(2):  # the general path, then the fast path a first call prepared
        with pytest.raises(ValueError, match=r"parameter 'B' .* not 16-byte aligned"):
            kernel(misaligned, c)
        torch.cuda.synchronize()  # nothing was launched: the context is fine
        c.fill_(float("nan"))
        kernel(aligned, c)
        torch.testing.assert_close(c.double(), aligned[:, 128:].double())
