"""T.alloc_reducer / T.reducer_init / T.reducer_update / T.finalize_reducer (the reference's
gemv reducer): every contribution from a T.Parallel lands once, on the interpreter and in the
generated CUDA (atomic updates of a shared buffer, a barrier before it is read)."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.runtime import compile_cuda, toolkit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu import role_kernels as R  # noqa: E402

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


@pytest.mark.parametrize("M,N", [(64, 64), (100, 200), (130, 72)])
def test_sum_reducer(M, N):
    a, x = torch.randn(M, N).half(), torch.randn(N).half()
    o = torch.full((M,), float("nan"))
    tilelang.compile(R.reducer_gemv(M, N), target="cpu")(a, x, o)
    torch.testing.assert_close(o, (a * x).float().sum(1), rtol=1e-3, atol=1e-2)


def test_max_reducer_with_init_and_destination():
    a, x = torch.randn(100, 200).half(), torch.randn(200).half()
    o = torch.full((100,), float("nan"))
    tilelang.compile(R.reducer_gemv(100, 200, op="max"), target="cpu")(a, x, o)
    torch.testing.assert_close(o, (a * x).float().max(1).values)


def test_shared_form_is_atomics_then_a_barrier():
    # the shared form (tests/transform/test_reducer_fragments.py: when it is chosen)
    src = tilelang.lower(R.reducer_gemv(100, 200), target="cuda -arch=sm_90a",
                         pass_configs={"tl.reducer_force_baseline": True})
    body = src[src.index("threadIdx.x"):]
    last_atomic = body.rindex("tl::atomic_add((&r[")
    read = body.index("r[", body.index("}", last_atomic))
    assert "__syncthreads" in body[last_atomic:read] or "named_barrier_sync" in \
        body[last_atomic:read]


@requires_compiler
@pytest.mark.parametrize("op", ["sum", "max"])
def test_builds(op):
    compile_cuda(tilelang.lower(R.reducer_gemv(100, 200, op=op), target="cuda -arch=sm_90a"),
                 "sm_90a")
    compile_cuda(tilelang.lower(R.reducer_gemv(100, 200, op=op), target="cuda -arch=sm_80"),
                 "sm_80")


def test_arbitrary_store_is_located():
    with pytest.raises(KernelError, match="is a reducer") as e:
        @T.prim_func
        def f(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                r = T.alloc_reducer(64, "float32")
                for i in T.Parallel(64):
                    r[i] = A[i] * 2
    assert "test_reducer.py" in str(e.value)


@pytest.mark.parametrize("kw,match", [({"op": "bitor"}, "not supported"),
                                      ({"replication": "some"}, "replication")])
def test_bad_reducers_are_located(kw, match):
    with pytest.raises(KernelError, match=match):
        @T.prim_func
        def f(A: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64):
                T.alloc_reducer(64, "int32", **kw)
