"""`@T.prim_func` in the reference's lazy style (tensor annotations as statements in the body,
`T.empty` outputs returned), and the function-level `T.annotate_pass_configs` /
`T.annotate_compile_flags` with the PrimFunc attributes the reference records."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.transform import PassConfigKey


def _doubling():
    @T.prim_func
    def kernel(A):
        A: T.Tensor[[16, 8], T.float32]
        T.annotate_pass_configs({PassConfigKey.TL_ENABLE_FAST_MATH: True})
        T.annotate_compile_flags("--use_fast_math")
        B = T.empty([16, 8], T.float32)
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(16, 8):
                B[i, j] = A[i, j] * 2.0
        return B
    return kernel


def test_body_annotations_and_returned_outputs():
    kernel = _doubling()
    assert kernel.attrs["tilelang_out_idx"] == [-1]
    assert kernel.attrs["tilelang_compile_flags"] == ["--use_fast_math"]
    a = torch.randn(16, 8)
    torch.testing.assert_close(tilelang.compile(kernel, target="cpu")(a), a * 2)


def test_function_configs_merge_under_the_callers():
    kernel = _doubling()
    k = tilelang.compile(kernel, target="cuda -arch=sm_90a", compile_flags=["-lineinfo"],
                         pass_configs={"tl.disable_tma_lower": True})
    assert k.options["pass_configs"] == {"tl.enable_fast_math": True,
                                         "tl.disable_tma_lower": True}
    assert list(k.options["compile_flags"]) == ["--use_fast_math", "-lineinfo"]
    # the caller's value of the same key wins
    k = tilelang.compile(kernel, target="cuda -arch=sm_90a",
                         pass_configs={PassConfigKey.TL_ENABLE_FAST_MATH: False})
    assert k.options["pass_configs"]["tl.enable_fast_math"] is False


def test_out_idx_with_returned_outputs_is_a_conflict():
    with pytest.raises(ValueError, match="Out index conflict"):
        tilelang.compile(_doubling(), out_idx=[-1], target="cpu")


def test_annotation_statements_before_or_after_the_attributes():
    @T.prim_func
    def kernel(A, B):
        T.annotate_compile_flags(["--use_fast_math"])
        A: T.Tensor[[4, 8], T.int32]
        B: T.Tensor[[4, 8], T.int32]
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(4, 8):
                B[i, j] = A[i, j] + i
    assert "tilelang_out_idx" not in kernel.attrs
    a = torch.randint(-9, 9, (4, 8), dtype=torch.int32)
    out = tilelang.compile(kernel, out_idx=[-1], target="cpu")(a)
    assert torch.equal(out, a + torch.arange(4, dtype=torch.int32)[:, None])


def test_attributes_are_checked():
    with pytest.raises(TypeError, match="takes a dict of pass configs") as info:
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            T.annotate_pass_configs(["tl.enable_fast_math"])
            with T.Kernel(1, threads=32):
                A[0] = 1.0
    assert "test_prim_func_lazy_style.py" in str(info.value)
    with pytest.raises(TypeError, match="a string or a list of strings"):
        @T.prim_func
        def bad_flags(A: T.Tensor((4,), "float32")):
            T.annotate_compile_flags([3])
            with T.Kernel(1, threads=32):
                A[0] = 1.0
