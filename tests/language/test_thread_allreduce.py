"""T.attr(T.comm_reducer(...), "reduce_scope", ...) + T.tvm_thread_allreduce (the reference's
gemv idiom): results of the interpreter against torch, builds for sm_80, located errors."""

import re
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


def _reference(a, op):
    if op == "sum":
        return a.sum(1).to(a.dtype)
    if op == "max":
        return a.max(1).values
    return a.double().prod(1).to(a.dtype)


@pytest.mark.parametrize("op,dtype", [("sum", "float32"), ("sum", "int32"),
                                      ("max", "float32"), ("prod", "float32"),
                                      ("prod", "int32")])
@pytest.mark.parametrize("rows,R_", [(8, 4), (2, 32), (16, 8)])
def test_allreduce_over_thread_y(op, dtype, rows, R_):
    if dtype == "int32":
        a = torch.randint(-3, 4, (rows, 64), dtype=torch.int32)
    else:
        a = torch.randn(rows, 64) * (0.6 if op == "prod" else 1.0)
    out = torch.zeros(rows, dtype=a.dtype)
    tilelang.compile(R.thread_allreduce(rows, R_, dtype, op, K=64), target="cpu")(a, out)
    torch.testing.assert_close(out, _reference(a, op), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,dtype", [("sum", "float32"), ("max", "float32"),
                                      ("prod", "int32")])
@pytest.mark.parametrize("rows,R_", [(4, 32), (8, 4), (3, 16)])
def test_allreduce_over_lanes(op, dtype, rows, R_):
    if dtype == "int32":
        a = torch.randint(-3, 4, (rows, 64), dtype=torch.int32)
    else:
        a = torch.randn(rows, 64)
    out = torch.zeros(rows, dtype=a.dtype)
    tilelang.compile(R.thread_allreduce(rows, R_, dtype, op, K=64, over_x=True),
                     target="cpu")(a, out)
    torch.testing.assert_close(out, _reference(a, op), rtol=1e-5, atol=1e-5)


def test_over_lanes_the_condition_leaves_out_threads():
    a = torch.randn(8, 64)
    out = torch.zeros(8)
    tilelang.compile(R.thread_allreduce(8, 4, K=64, skip_odd=True, over_x=True),
                     target="cpu")(a, out)
    torch.testing.assert_close(out, a.view(8, 16, 4)[:, :, 0::2].sum((1, 2)))


def test_over_lanes_lowered_to_warp_shuffles():
    """Reducing over threadIdx.x of extent 16 (groups of 16 consecutive lanes): four xor
    shuffles within 16 lanes, no shared scratch and no barrier."""
    src = tilelang.lower(R.thread_allreduce(4, 16, K=64, over_x=True), target="cuda -arch=sm_80")
    body = src[src.index("threadIdx.x"):]
    assert "allreduce_scratch" not in body and "__syncthreads" not in body
    # float32 shuffles call CUDA's own intrinsic (narrow types go through tl::shfl_xor)
    offsets = [int(m) for m in re.findall(r"__shfl_xor_sync\(0xffffffffu, [^,]+, (\d+), 16\)",
                                          body)]
    assert offsets == [8, 4, 2, 1], body


@requires_compiler
def test_over_lanes_builds_for_sm80():
    compile_cuda(tilelang.lower(R.thread_allreduce(8, 32, "float16", K=64, over_x=True),
                                target="cuda -arch=sm_80"), "sm_80")


def test_condition_leaves_out_threads():
    a = torch.randn(8, 64)
    out = torch.zeros(8)
    tilelang.compile(R.thread_allreduce(8, 4, K=64, skip_odd=True), target="cpu")(a, out)
    # thread tk folds columns k*4 + tk: only the even tk contribute
    torch.testing.assert_close(out, a.view(8, 16, 4)[:, :, 0::2].sum((1, 2)))


def test_lowered_to_a_shared_scratch_fold():
    src = tilelang.lower(R.thread_allreduce(8, 4, K=64), target="cuda -arch=sm_80")
    body = src[src.index("threadIdx.x"):]
    assert "allreduce_scratch[" in body
    assert body.index("allreduce_scratch[") < body.index("__syncthreads")


@requires_compiler
def test_builds_for_sm80():
    compile_cuda(tilelang.lower(R.thread_allreduce(8, 4, "float16", K=64),
                                target="cuda -arch=sm_80"), "sm_80")


def _kernel(body):
    @T.prim_func
    def f(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tk = T.get_thread_binding()
            v = T.alloc_local((1,), "float32")
            r = T.alloc_local((1,), "float32")
            v[0] = A[tk]
            body(tk, v, r)
            A[tk] = r[0]
    return f


def test_without_reducer_scope_is_located():
    def body(tk, v, r):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, r[0], tk, dtype="handle"))

    with pytest.raises(KernelError, match="needs a reducer") as e:
        _kernel(body)
    assert "test_thread_allreduce.py" in str(e.value)


@pytest.mark.parametrize("bad,match", [("size", "one value"), ("var", "thread indices"),
                                       ("tuple", "tuple reduction"), ("key", "not supported")])
def test_bad_uses_are_located(bad, match):
    def body(tk, v, r):
        if bad == "tuple":
            T.comm_reducer(lambda x, y: x + y, [T.float32(0), T.float32(0)])
        if bad == "key":
            T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "pragma_unroll", 1)
        with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope",
                    T.reinterpret(T.uint64(0), dtype="handle")):
            T.evaluate(T.tvm_thread_allreduce(T.uint32(2 if bad == "size" else 1), v[0], True,
                                              r[0], tk + 1 if bad == "var" else tk,
                                              dtype="handle"))

    with pytest.raises(KernelError, match=match) as e:
        _kernel(body)
    assert "test_thread_allreduce.py" in str(e.value)


def test_statement_form_applies_to_the_rest_of_the_block():
    def body(tk, v, r):
        T.attr(T.comm_reducer(lambda x, y: T.max(x, y), [T.float32(-1e30)]), "reduce_scope",
               T.reinterpret(T.uint64(0), dtype="handle"))
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, r[0], tk, dtype="handle"))

    a = torch.randn(32)
    expect = a.max().expand(32).clone()
    tilelang.compile(_kernel(body), target="cpu")(a)
    torch.testing.assert_close(a, expect)


def _product_over_threads(n, dtype):
    @T.prim_func
    def f(A: T.Tensor((n,), dtype), C: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=n):
            tk = T.get_thread_binding()
            v = T.alloc_local((1,), dtype)
            r = T.alloc_local((1,), dtype)
            v[0] = A[tk]
            with T.attr(T.comm_reducer(lambda x, y: x * y, [T.cast(1, dtype)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, r[0], tk,
                                                  dtype="handle"))
            if tk == 0:
                C[0] = r[0]
    return f


def test_power_of_two_groups_combine_in_the_shuffle_tree_order():
    # rank i takes i + 4, then i + 2, then i + 1: ((3*7)*(5*4))*((8*6)*(2*6)) = 420 * 576 =
    # 241920, one rounding to bfloat16: 241664; a left-to-right fold rounds 10080 to 10112
    # on the way and ends at 242688
    a = torch.tensor([3.0, 8.0, 5.0, 2.0, 7.0, 6.0, 4.0, 6.0], dtype=torch.bfloat16)
    c = torch.zeros(1, dtype=torch.bfloat16)
    tilelang.compile(_product_over_threads(8, "bfloat16"), target="cpu")(a, c)
    assert c.item() == 241664.0
    # on CUDA the 8 lanes of one warp combine by xor shuffles of offsets 4, 2, 1: the same
    # pairs in the same order
    src = tilelang.lower(_product_over_threads(8, "bfloat16"), target="cuda -arch=sm_90a")
    assert re.findall(r"shfl_xor\(allreduce_acc\[0\], (\d+), 8\)", src) == ["4", "2", "1"], src


def test_other_groups_fold_in_rank_order():
    a = torch.tensor([3.0, 8.0, 5.0, 2.0, 7.0, 6.0], dtype=torch.bfloat16)
    c = torch.zeros(1, dtype=torch.bfloat16)
    tilelang.compile(_product_over_threads(6, "bfloat16"), target="cpu")(a, c)
    assert c.item() == float(torch.tensor(3.0 * 8 * 5 * 2 * 7, dtype=torch.bfloat16) * 6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("n", [8, 32, 128, 6])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_product_over_threads_on_the_gpu(n, dtype):
    tdt = getattr(torch, dtype)
    kernel = tilelang.compile(_product_over_threads(n, dtype), target="cuda")
    a = (1 + 0.05 * torch.randn(n, device="cuda")).to(tdt)
    c = torch.full((1,), float("nan"), device="cuda", dtype=tdt)
    kernel(a, c)
    torch.testing.assert_close(c.float(), a.double().prod().float().reshape(1),
                               rtol=2e-2, atol=1e-3)
