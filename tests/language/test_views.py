"""T.reshape / T.view of global tensors, shared tiles and fragments: the same elements through
both names on the interpreter, composed layouts in the generated CUDA (sm_90a, sm_80 builds),
located errors for sizes that differ and for what is not supported."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.runtime import compile_cuda, toolkit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu.view_kernels import fragment_reshape, gemm_scores, global_view, shared_reshape  # noqa: E402,E501

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


@pytest.mark.parametrize("dtype,new", [("float32", None), ("float16", None),
                                       ("float32", "float16"), ("float16", "float32"),
                                       ("int32", "int8")])
def test_global_views(dtype, new):
    N, M = 1024, 32
    tdt = getattr(torch, dtype)
    a = torch.randn(N).to(tdt) if tdt.is_floating_point else torch.randint(-99, 99, (N,),
                                                                           dtype=tdt)
    ndt = getattr(torch, new or dtype)
    cols = M * a.element_size() // torch.empty(0, dtype=ndt).element_size()
    b = torch.zeros(N // M, cols, dtype=ndt)
    tilelang.compile(global_view(N, M, dtype, new), target="cpu")(a, b)
    assert torch.equal(b.view(torch.uint8), a.view(ndt).view(N // M, cols).view(torch.uint8))


@pytest.mark.parametrize("swizzle", [False, True])
def test_shared_reshape_sees_the_tile_through_its_layout(swizzle):
    a = torch.randn(32, 64).half()
    b = torch.zeros(2048).half()
    f = shared_reshape(2048, 64, swizzle)
    tilelang.compile(f, target="cpu")(a, b)
    assert torch.equal(b, a.reshape(-1))
    if toolkit.nvrtc_backend() or toolkit.nvcc_path():
        compile_cuda(tilelang.lower(f, target="cuda -arch=sm_80"), "sm_80")


@pytest.mark.parametrize("rows,cols,groups", [(2, 384, 3), (32, 32, 4), (16, 256, 2)])
def test_fragment_reshape(rows, cols, groups):
    a = torch.randn(rows, cols)
    b = torch.zeros(rows, groups)
    f = fragment_reshape(rows, cols, groups)
    tilelang.compile(f, target="cpu")(a, b)
    torch.testing.assert_close(b, (2 * a).view(rows, groups, -1).max(2).values)
    src = tilelang.lower(f, target="cuda -arch=sm_80")
    # the view reads the tile's own registers: one register array
    assert src.count("float L[") == 1 and "float R[" not in src


def test_gemm_accumulator_reshape():
    q, k = torch.randn(64, 64).half(), torch.randn(64, 64).half()
    w, o = torch.randn(4, 16), torch.zeros(64, 4)
    tilelang.compile(gemm_scores(), target="cpu")(q, k, w, o)
    s = (k.float() @ q.float().T).view(64, 4, 16)
    torch.testing.assert_close(o, (s.clamp(min=0) * w).sum(-1), rtol=1e-4, atol=1e-3)


@requires_compiler
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_builds(arch):
    for f in (gemm_scores(), fragment_reshape(2, 384, 3), global_view(1024, 32, "float32",
                                                                      "float16")):
        compile_cuda(tilelang.lower(f, target=f"cuda -arch={arch}"), arch)


def test_shared_view_of_another_dtype_reuses_the_bytes():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float16"), B: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float16")
            T.copy(A, S)
            F = T.view(S, [32, 64], dtype="float32")
            for i, j in T.Parallel(32, 64):
                F[i, j] = T.cast(i * 64 + j, "float32")
            T.copy(F, B)

    b = torch.zeros(32, 64)
    tilelang.compile(f, target="cpu")(torch.randn(64, 64).half(), b)
    assert torch.equal(b, torch.arange(2048, dtype=torch.float32).view(32, 64))
    src = tilelang.lower(f, target="cuda -arch=sm_80")
    assert "float* F = reinterpret_cast<float*>(smem + 0);" in src


@pytest.mark.parametrize("fn,match", [(lambda S: T.reshape(S, [33, 2]), "shape check"),
                                      (lambda S: T.view(S, [64], dtype="float32"),
                                       "shape check")])
def test_size_mismatch_is_value_and_assertion_error(fn, match):
    with pytest.raises((ValueError, AssertionError), match=match) as e:
        @T.prim_func
        def f(A: T.Tensor((64,), "float16")):
            with T.Kernel(1, threads=32):
                S = T.alloc_shared((64,), "float16")
                fn(S)
    assert isinstance(e.value, ValueError) and isinstance(e.value, AssertionError)
    assert isinstance(e.value, KernelError) and "test_views.py" in str(e.value)


@pytest.mark.parametrize("scope", ["local", "fragment_dtype"])
def test_unsupported_views_are_located(scope):
    with pytest.raises(KernelError, match="not supported|registers keep their dtype"):
        @T.prim_func
        def f(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32):
                if scope == "local":
                    T.reshape(T.alloc_local((8,), "float32"), [2, 4])
                else:
                    T.view(T.alloc_fragment((64,), "float32"), [128], dtype="float16")
