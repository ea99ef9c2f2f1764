"""Warp and block votes (T.any_sync, T.all_sync, T.ballot_sync, T.ballot, T.activemask,
T.syncthreads_count/and/or), T.tvm_warp_shuffle, T.dp4a, T.index_to_coordinates,
T.alloc_buffer: interpreter results against torch, CUDA renderings built for sm_80, errors."""

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

SM80 = "cuda -arch=sm_80"


def test_votes():
    a = torch.randint(-9, 9, (128,), dtype=torch.int32)
    o = torch.zeros(128, 5, dtype=torch.int64)
    tilelang.compile(R.votes(), target="cpu")(a, o)
    w = a.view(4, 32)
    per_warp = lambda x: x.repeat_interleave(32)  # noqa: E731
    assert torch.equal(o[:, 0], per_warp((w > 5).any(1).long()))
    assert torch.equal(o[:, 1], per_warp((w > -8).all(1).long()))
    bits = ((w > 0).long() << torch.arange(32)).sum(1)
    assert torch.equal(o[:, 2], per_warp(bits))
    assert torch.equal(o[:, 3], (a > 0).sum().expand(128))
    assert torch.equal(o[:, 4], (int((a == 7).any()) + 2 * int((a > -10).all())) *
                       torch.ones(128, dtype=torch.int64))


def test_ballot_mask_and_activemask():
    @T.prim_func
    def f(A: T.Tensor((64,), "int32"), O: T.Tensor((64, 2), "int64")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            if tx % 32 < 16:
                O[tx, 0] = T.cast(T.ballot_sync(A[tx] > 0, 0x0000FFFF), "int64")
                O[tx, 1] = T.cast(T.activemask(), "int64")
            else:
                O[tx, 0] = T.cast(T.ballot(1), "int64")
                O[tx, 1] = 0

    a = torch.randint(-5, 5, (64,), dtype=torch.int32)
    o = torch.zeros(64, 2, dtype=torch.int64)
    tilelang.compile(f, target="cpu")(a, o)
    w = (a.view(2, 32) > 0).long()[:, :16]
    bits = (w << torch.arange(16)).sum(1)
    assert torch.equal(o.view(2, 32, 2)[:, :16, 0], bits[:, None].expand(2, 16))
    assert torch.equal(o.view(2, 32, 2)[:, 16:, 0], torch.full((2, 16), 0xFFFF0000))
    assert (o.view(2, 32, 2)[:, :16, 1] == 0xFFFF).all()


@requires_compiler
def test_votes_build_for_sm80():
    src = tilelang.lower(R.votes(), target=SM80)
    for fn in ("__any_sync(", "__all_sync(", "__ballot_sync(", "__syncthreads_count(",
               "__syncthreads_or(", "__syncthreads_and("):
        assert fn in src
    compile_cuda(src, "sm_80")


@pytest.mark.parametrize("vote", [T.any_sync, T.all_sync, T.ballot_sync, T.ballot,
                                  T.syncthreads_count, T.syncthreads_and, T.syncthreads_or])
def test_float_predicates_are_rejected(vote):
    with pytest.raises(KernelError, match="integer or boolean predicate"):
        @T.prim_func
        def f(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                tx = T.get_thread_binding()
                A[tx] = T.cast(vote(A[tx]), "float32")


def test_block_vote_in_a_branch_is_an_interpreter_error():
    @T.prim_func
    def f(A: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            if tx < 32:
                A[tx] = T.syncthreads_count(A[tx] > 0)

    with pytest.raises(RuntimeError, match="block barrier reached by only some"):
        tilelang.compile(f, target="cpu")(torch.zeros(64, dtype=torch.int32))


def test_dp4a():
    a = torch.randint(-128, 128, (64, 16), dtype=torch.int8)
    b = torch.randint(-128, 128, (64, 16), dtype=torch.int8)
    c = torch.zeros(64, dtype=torch.int32)
    tilelang.compile(R.dp4a_rows(), target="cpu")(a, b, c)
    assert torch.equal(c, (a.int() * b.int()).sum(1).int())


@requires_compiler
def test_dp4a_builds():
    compile_cuda(tilelang.lower(R.dp4a_rows(), target=SM80), "sm_80")


@pytest.mark.parametrize("dtypes", [("float16", "float16", "int32"), ("int8", "int8", "float32"),
                                    ("uint8", "uint8", "int32"), ("int8", "float16", "int32")])
def test_dp4a_dtypes_are_checked(dtypes):
    a, b, c = dtypes
    with pytest.raises(ValueError, match="dp4a requires") as e:
        @T.prim_func
        def f(A: T.Tensor((4,), a), B: T.Tensor((4,), b), C: T.Tensor((1,), c)):
            with T.Kernel(1, threads=1):
                T.dp4a(A, B, C)
    assert "test_warp_intrinsics.py" in str(e.value)


def test_warp_shuffle_index_to_coordinates_alloc_buffer():
    @T.prim_func
    def f(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32"),
          Z: T.Tensor((4, 16), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            Y[tx] = T.tvm_warp_shuffle(0xFFFFFFFF, X[tx], (tx + 3) % 16, 16, 32)
            S = T.alloc_buffer((4, 16), "float32", scope="shared")
            n = T.alloc_buffer((1,), "int32", scope="local.var")
            n = tx + 1
            i, j = T.index_to_coordinates(tx, (4, 16))
            S[i, j] = X[tx] * n
            Z[i, j] = S[i, j]

    x = torch.randn(64)
    y, z = torch.zeros(64), torch.zeros(4, 16)
    tilelang.compile(f, target="cpu")(x, y, z)
    lane = torch.arange(64)
    src = lane - lane % 16 + (lane % 16 + 3) % 16
    torch.testing.assert_close(y, x[src])
    torch.testing.assert_close(z.view(-1), x * (lane + 1))
    if toolkit.nvrtc_backend() or toolkit.nvcc_path():
        compile_cuda(tilelang.lower(f, target=SM80), "sm_80")


def test_alloc_buffer_global_workspace_and_bad_scope():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        W = T.alloc_buffer((64,), "float32")
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            W[tx] = A[tx] + 1
            B[tx] = W[tx] * 2

    a, b = torch.randn(64), torch.zeros(64)
    tilelang.compile(f, target="cpu")(a, b)
    torch.testing.assert_close(b, (a + 1) * 2)
    with pytest.raises(KernelError, match="unknown scope"):
        @T.prim_func
        def g(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                T.alloc_buffer((64,), "float32", scope="texture")


def _match_kernel():
    @T.prim_func
    def f(A: T.Tensor((64,), "int32"), O: T.Tensor((64, 5), "int64")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            O[tx, 0] = T.cast(T.match_any_sync(A[tx]), "int64")
            O[tx, 1] = T.cast(T.match_all_sync(A[tx] * 0 + 7), "int64")
            O[tx, 2] = T.cast(T.match_all_sync(A[tx]), "int64")
            mask = T.ballot_sync(tx % 32 >= 7)
            O[tx, 3] = T.cast(T.__ffs(mask) - 1, "int64")
            O[tx, 4] = T.cast(T.__fns(T.cast(mask, "uint32"), 0, 3), "int64")
    return f


def test_match_ffs_fns():
    a = torch.randint(0, 3, (64,), dtype=torch.int32)
    a[0] = 5  # warp 0 disagrees; warp 1 may agree only by chance: make it disagree too
    a[32], a[33] = 0, 1
    o = torch.zeros(64, 5, dtype=torch.int64)
    tilelang.compile(_match_kernel(), target="cpu")(a, o)
    w = a.view(2, 32)
    same = torch.stack([((w[i][None, :] == w[i][:, None]).long() << torch.arange(32)).sum(1)
                        for i in range(2)]).view(-1)
    assert torch.equal(o[:, 0], same)
    assert (o[:, 1] == 0xFFFFFFFF).all() and (o[:, 2] == 0).all()
    assert (o[:, 3] == 7).all() and (o[:, 4] == 9).all()
    if toolkit.nvrtc_backend() or toolkit.nvcc_path():
        src = tilelang.lower(_match_kernel(), target=SM80)
        assert "__ffsll(" in src and "__fns(" in src
        # 32-bit values: CUDA's intrinsics themselves (match_all's predicate dropped)
        assert "__match_any_sync(" in src and src.count("__match_all_sync(") == 2
        assert "tl::match_" not in src
        compile_cuda(src, "sm_80")


@pytest.mark.parametrize("dtype,native", [("int32", True), ("uint32", True), ("int64", True),
                                          ("float32", True), ("float64", True),
                                          ("int16", False), ("float16", False),
                                          ("bfloat16", False)])
def test_shuffles_and_matches_call_cuda_directly_where_it_takes_the_type(dtype, native):
    @T.prim_func
    def f(A: T.Tensor((32,), dtype), O: T.Tensor((32, 4), dtype), M: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            O[tx, 0] = T.shfl_sync(A[tx], 3)
            O[tx, 1] = T.shfl_xor(A[tx], 1)
            O[tx, 2] = T.shfl_down(A[tx], 2)
            O[tx, 3] = T.shfl_up(A[tx], 2)
            M[tx] = T.cast(T.match_any_sync(A[tx]), "int32")

    src = tilelang.lower(f, target=SM80)
    for fn in ("shfl_sync", "shfl_xor", "shfl_down", "shfl_up"):
        cuda = "__shfl_sync(" if fn == "shfl_sync" else f"__{fn}_sync("
        assert (cuda in src) == native and (f"tl::{fn}(" in src) == (not native)
    assert ("__match_any_sync(" in src) == native
    if toolkit.nvrtc_backend() or toolkit.nvcc_path():
        compile_cuda(src, "sm_80")
    a = torch.arange(32).to(getattr(torch, dtype) if dtype != "uint32" else torch.int64)
    if dtype == "uint32":
        return  # torch has no uint32 arithmetic to check against: built only
    o = torch.zeros(32, 4, dtype=a.dtype)
    m = torch.zeros(32, dtype=torch.int32)
    tilelang.compile(f, target="cpu")(a, o, m)
    lane = torch.arange(32)
    assert torch.equal(o[:, 0], a[torch.full((32,), 3)])
    assert torch.equal(o[:, 1], a[lane ^ 1])
    assert torch.equal(o[:, 2], a[torch.where(lane + 2 < 32, lane + 2, lane)])
    assert torch.equal(o[:, 3], a[torch.where(lane >= 2, lane - 2, lane)])
    assert torch.equal(m.long() & 0xFFFFFFFF, (1 << lane).long())


@pytest.mark.parametrize("mask,base,offset,expect", [(0b1011000, 0, 1, 3), (0b1011000, 4, 1, 4),
                                                     (0b1011000, 5, 1, 6), (0b1011000, 6, -2, 4),
                                                     (0b1011000, 5, 0, 0xFFFFFFFF),
                                                     (0b1011000, 0, 4, 0xFFFFFFFF)])
def test_fns_directions(mask, base, offset, expect):
    @T.prim_func
    def f(O: T.Tensor((32,), "int64")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            O[tx] = T.cast(T.__fns(mask, base, offset), "int64")

    o = torch.zeros(32, dtype=torch.int64)
    tilelang.compile(f, target="cpu")(o)
    assert (o == expect).all()
