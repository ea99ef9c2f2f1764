"""`T.async_copy`: a global -> shared copy (the interpreter and CUDA give the copied values);
any other pair of scopes is a located error in the reference's words."""

import pytest
import torch

import tilelang
import tilelang.language as T


def test_global_to_shared_copies():
    @T.prim_func
    def k(A: T.Tensor((64,), "float16"), B: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((64,), "float16")
            T.async_copy(A[0:64], S)
            T.copy(S, B)

    a = torch.randn(64).half()
    b = torch.full((64,), float("nan")).half()
    tilelang.compile(k, target="cpu")(a, b)
    assert torch.equal(a, b)
    assert "S" in tilelang.lower(k, target="cuda -arch=sm_90a")


@pytest.mark.parametrize("case", ["shared->shared", "shared->global"])
@pytest.mark.parametrize("target", ["cpu", "cuda -arch=sm_90a"])
def test_other_scopes_are_rejected_when_compiled(case, target):
    @T.prim_func
    def k(A: T.Tensor((4,), "float16"), B: T.Tensor((4,), "float16")):
        with T.Kernel(1, threads=1):
            S0 = T.alloc_shared((4,), "float16")
            S1 = T.alloc_shared((4,), "float16")
            T.copy(A[0:4], S0)
            if case == "shared->shared":
                T.async_copy(S0, S1)
            else:
                T.async_copy(S0, B[0:4])

    # defined without error (as in the reference); compiling it fails, at the user's line
    with pytest.raises(ValueError, match="T.async_copy only supports global->shared/shared.dyn "
                                         "copies") as info:
        tilelang.compile(k, target=target)
    assert "test_async_copy.py" in str(info.value)
