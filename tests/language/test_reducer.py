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


@pytest.mark.parametrize("kw,match", [({"op": "bitnand"}, "not supported"),
                                      ({"replication": "some"}, "replication"),
                                      ({"op": "bitor", "replication": "all"}, "legacy")])
def test_bad_reducers_are_located(kw, match):
    with pytest.raises(KernelError, match=match):
        @T.prim_func
        def f(A: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64):
                T.alloc_reducer(64, "int32", **kw)


def test_a_bitwise_reducer_needs_an_integer_dtype():
    # the reference asserts it (an AssertionError)
    with pytest.raises(AssertionError, match="integer dtype") as e:
        @T.prim_func
        def f(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                T.alloc_reducer(64, "float32", op="bitxor")
    assert isinstance(e.value, KernelError) and "test_reducer.py" in str(e.value)


# ---- the v2 lifecycle: init once, updates inside T.Parallel, finalize into dst in the init's
# scope, results read from dst; the legacy form (T.clear, `r[i] +=`, reads) never mixed in


def _v2_program(body):
    """A kernel whose reducer `acc` (1 element) is used by `body(acc, src, res, B)`."""
    @T.prim_func
    def f(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((8,), "float32")
            T.copy(A, src)
            acc = T.alloc_reducer((1,), "float32", op="sum")
            res = T.alloc_fragment((1,), "float32")
            body(acc, src, res, B)
    return f


def _update(acc, src):
    for i in T.Parallel(8):
        T.reducer_update(acc[0], src[i])


def _no_init(acc, src, res, B):
    _update(acc, src)
    T.finalize_reducer(acc, res)


def _double_init(acc, src, res, B):
    T.reducer_init(acc)
    T.reducer_init(acc)
    _update(acc, src)
    T.finalize_reducer(acc, res)


def _wrong_dtype(acc, src, res, B):
    T.reducer_init(acc, T.float16(1.0))
    _update(acc, src)
    T.finalize_reducer(acc, res)


def _no_finalize(acc, src, res, B):
    T.reducer_init(acc)
    _update(acc, src)


def _store(acc, src, res, B):
    T.reducer_init(acc)
    for i in T.Parallel(8):
        acc[0] += src[i]
    T.finalize_reducer(acc, res)


def _clear_then_update(acc, src, res, B):
    T.clear(acc)
    T.reducer_init(acc)
    _update(acc, src)
    T.finalize_reducer(acc, res)


def _read_partial(acc, src, res, B):
    T.reducer_init(acc)
    _update(acc, src)
    B[0] = acc[0]
    T.finalize_reducer(acc, res)


def _read_after_finalize(acc, src, res, B):
    T.reducer_init(acc)
    _update(acc, src)
    T.finalize_reducer(acc, res)
    B[0] = acc[0]


def _outside_parallel(acc, src, res, B):
    T.reducer_init(acc)
    T.reducer_update(acc[0], src[0])
    T.finalize_reducer(acc, res)


def _contribution_reads_reducer(acc, src, res, B):
    T.reducer_init(acc)
    for i in T.Parallel(8):
        T.reducer_update(acc[0], src[i] + acc[0])
    T.finalize_reducer(acc, res)


def _finalize_outside_init_loop(acc, src, res, B):
    for _ in T.serial(4):
        T.reducer_init(acc)
        _update(acc, src)
    T.finalize_reducer(acc, res)


def _finalize_in_extra_loop(acc, src, res, B):
    T.reducer_init(acc)
    for _ in T.serial(4):
        _update(acc, src)
        T.finalize_reducer(acc, res)


@pytest.mark.parametrize("body,match", [
    (_no_init, "before T.reducer_init"),
    (_double_init, "double T.reducer_init"),
    (_wrong_dtype, "float16 does not match reducer acc"),
    (_no_finalize, "never finalized"),
    (_store, "illegal store to reducer acc"),
    (_clear_then_update, "illegal T.reducer_init on reducer acc.*T.fill"),
    (_read_partial, "illegal read of reducer acc"),
    (_read_after_finalize, "illegal read of reducer acc"),
    (_outside_parallel, "outside any T.Parallel"),
    (_contribution_reads_reducer, "illegal read of reducer acc"),
    (_finalize_outside_init_loop, "not in the scope of its T.reducer_init"),
    (_finalize_in_extra_loop, "not in the scope of its T.reducer_init"),
], ids=lambda x: getattr(x, "__name__", "")[1:] or None)
def test_v2_lifecycle_errors_are_located(body, match):
    with pytest.raises(KernelError, match=match) as e:
        _v2_program(body)
    assert "test_reducer.py" in str(e.value)


def test_v2_epochs_in_loops_and_branches_run():
    """A whole epoch inside a serial loop reopens every iteration; a finalize in a branch of
    the init's scope runs 0 or 1 times per init."""
    @T.prim_func
    def f(A: T.Tensor((8,), "float32"), S: T.Tensor((2,), "int32"),
          B: T.Tensor((2,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            src = T.alloc_fragment((8,), "float32")
            T.copy(A, src)
            best = T.alloc_fragment((1,), "float32")
            best[0] = -T.infinity("float32")
            for k in T.serial(3):
                acc = T.alloc_reducer((1,), "float32", op="max")
                T.reducer_init(acc, best[0])
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], src[i] * (k + 1))
                T.finalize_reducer(acc, best)
            total = T.alloc_reducer((1,), "float32", op="sum")
            T.reducer_init(total, 1.0)
            res = T.alloc_fragment((1,), "float32")
            res[0] = 0.0
            if S[bx] > 0:
                for i in T.Parallel(8):
                    T.reducer_update(total[0], src[i])
                T.finalize_reducer(total, res)
            if T.get_thread_binding() == 0:
                B[bx] = res[0] + best[0]

    A = torch.randn(8)
    S = torch.tensor([0, 1], dtype=torch.int32)
    B = torch.full((2,), float("nan"))
    tilelang.compile(f, target="cpu")(A, S, B)
    best = max(A.max().item(), 3 * A.max().item())
    torch.testing.assert_close(B, torch.tensor([best, 1.0 + A.sum().item() + best]))


def test_an_untouched_default_reducer_keeps_the_legacy_form():
    """Without `replication` and without any v2 operation, the reference's legacy form
    (T.clear, `r[i] +=`, the in-place finalize, reads of r) still compiles."""
    @T.prim_func
    def f(G: T.Tensor((64, 8), "float32"), O: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            g = T.alloc_fragment((64, 8), "float32")
            T.copy(G, g)
            r = T.alloc_reducer((64,), "float32")
            T.clear(r)
            for i, j in T.Parallel(64, 8):
                r[i] += g[i, j]
            T.finalize_reducer(r)
            T.copy(r, O)

    G = torch.randn(64, 8)
    O = torch.full((64,), float("nan"))
    tilelang.compile(f, target="cpu")(G, O)
    torch.testing.assert_close(O, G.sum(1))
