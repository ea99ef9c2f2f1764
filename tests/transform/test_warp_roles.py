"""Tile operations in roles of different thread ranges (transform/warp_roles.py thread groups):
the interpreter against torch (ragged sizes, outputs poisoned), the sm_90a / sm_80 lowering
(each role laid out for its own threads from its own first thread, a named barrier per role,
shared buffers of roles running side by side kept apart) built with the CUDA compiler, and the
located errors."""

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

SM90, SM80 = "cuda -arch=sm_90a", "cuda -arch=sm_80"


def _interp(func, *args):
    tilelang.compile(func, target="cpu")(*args)


def _nan(*shape):
    return torch.full(shape, float("nan"))


def _role_bodies(src):
    """{(lo, n): source of that role's thread group} of a lowered kernel."""
    out = {}
    marks = list(re.finditer(r"// thread_group: \('consumer', (\d+), (\d+), \d+\)", src))
    for k, m in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(src)
        out[(int(m.group(2)), int(m.group(1)))] = src[m.end():end]
    return out


# ---- the interpreter against torch -----------------------------------------------------------

def test_a_warp_and_two_warps_on_the_interpreter():
    M, H = 3, 300  # H is not a multiple of the 128-wide blocks
    X, Y = torch.randn(M, 16, 8), torch.randn(M, 4, H)
    out0, out1 = _nan(M, 4, 4), _nan(M, H)
    _interp(R.two_sized_roles(M, H), X, Y, out0, out1)
    w = 2 * X.sum(2)
    torch.testing.assert_close(out0, torch.softmax(w.view(M, 4, 4), -1))
    torch.testing.assert_close(out1, (w[:, :4, None] * Y).sum(1), rtol=1e-4, atol=1e-4)


def test_a_converting_copy_in_a_role_on_the_interpreter():
    M, H = 3, 300
    X, Y = torch.randn(M, 16, 8), torch.randn(M, 4, H).bfloat16()
    out0, out1 = _nan(M, 4, 4), _nan(M, H)
    _interp(R.two_sized_roles(M, H, y_dtype="bfloat16"), X, Y, out0, out1)
    w = 2 * X.sum(2)
    torch.testing.assert_close(out1, (w[:, :4, None] * Y.float()).sum(1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("reduce_threads", [128, 64])
def test_gemm_and_reduce_roles_on_the_interpreter(reduce_threads):
    M, N, K, bm = 100, 72, 96, 64
    a, b, r = torch.randn(M, K).half(), torch.randn(K, N).half(), torch.randn(M, N)
    c, s, cm = _nan(M, N), _nan(M, N), _nan(2, N)
    _interp(R.gemm_and_reduce_roles(M, N, K, reduce_threads=reduce_threads), a, b, r, c, s, cm)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    padded = torch.zeros(2 * bm, N)
    padded[:M] = r  # the last tile's rows past M read as zeros
    colmax = padded.view(2, bm, N).amax(1)
    torch.testing.assert_close(cm, colmax)
    torch.testing.assert_close(s, r * 3 - colmax.repeat_interleave(bm, 0)[:M])


def test_ws_roles_with_tile_operations_on_the_interpreter():
    N = 200
    A, B, OA, OB = torch.randn(N), torch.randn(N), _nan(N), _nan(N)
    _interp(R.ws_tile_roles(N), A, B, OA, OB)
    torch.testing.assert_close(OA, A + 2)
    torch.testing.assert_close(OB, 3 * B)


def test_two_consumers_and_a_producer_on_the_interpreter():
    # an if / elif / else chain of three roles handing tiles over through mbarriers
    M, N, K = 100, 200, 200
    a, b, c = torch.randn(M, K).half(), torch.randn(K, N).half(), _nan(M, N)
    _interp(R.split_consumer_gemm(M, N, K), a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


# ---- the CUDA lowering ------------------------------------------------------------------------

@requires_compiler
@pytest.mark.parametrize("make,targets", [
    (lambda: R.two_sized_roles(3, 300), (SM90, SM80)),
    (lambda: R.two_sized_roles(3, 300, y_dtype="bfloat16"), (SM90, SM80)),
    (lambda: R.gemm_and_reduce_roles(100, 72, 96), (SM90, SM80)),
    (lambda: R.gemm_and_reduce_roles(100, 72, 96, reduce_threads=64), (SM90, SM80)),
    (lambda: R.ws_tile_roles(200), (SM90, SM80)),
    (lambda: R.split_consumer_gemm(100, 200, 200), (SM90,)),
    (lambda: R.staged_halves(200), (SM90, SM80)),
])
def test_builds(make, targets):
    for target in targets:
        compile_cuda(tilelang.lower(make(), target=target), target.split("=")[1])


def test_a_converting_copy_in_a_role_is_spread_over_the_roles_threads_in_vectors():
    """bfloat16 rows copied into a float32 tile by a 64-thread role: each thread loads 4
    elements at once (8 bytes), converts them and stores them as one 16-byte vector next to
    its neighbours' (16 bytes of the narrow type would make each thread's stores 32 bytes
    and a warp's stores 32 bytes apart: bank conflicts), one barrier before and after the
    copy, none per element."""
    src = tilelang.lower(R.two_sized_roles(3, 512, y_dtype="bfloat16"), target=SM90)
    role = _role_bodies(src)[(32, 64)]
    loop = role[role.index("for (int h0"):]
    assert re.search(r"tl::copy_vec<8>\(\(&Y_vec\[0\]\), \(&Y\[", loop), loop
    assert re.search(r"tl::copy_vec<float4>\(\(&ys\[vo \* 256 \+ tx \* 4", loop), loop
    assert loop.count("tl::named_barrier_sync(2, 64)") == 2, loop
    # converted two at a time (pair_conversions)
    assert "__bfloat1622float2(__halves2bfloat162(Y_vec[" in loop, loop


def test_a_roles_staged_store_is_one_tma_store_after_the_roles_barrier():
    """Each role stores its half of a staged tile by TMA: its threads fence their shared
    writes for the async proxy and meet at the role's own barrier, then the role's first
    thread issues the boxes and waits until they have been read."""
    src = tilelang.lower(R.staged_halves(200), target=SM90)
    roles = _role_bodies(src)
    for (lo, _), body in roles.items():
        barrier = f"tl::named_barrier_sync({1 + lo // 128}, 128)"
        store = body.index(f"if (tx == {lo})")
        assert body.rindex("tl::fence_proxy_async()", 0, store) < \
            body.rindex(barrier, 0, store), body
        issued = body[store:]
        assert "tl::tma_store(" in issued and "tl::tma_store_wait<0>()" in issued
        assert "Out[" not in body  # no element-wise global stores left


def test_staged_halves_on_the_interpreter():
    x = torch.randn(200, 128).half()
    out = _nan(200, 128).half()
    _interp(R.staged_halves(200), x, out)
    expect = torch.cat([x[:, :64].float() * 2, x[:, 64:].float() + 1], 1).half()
    torch.testing.assert_close(out, expect)


def test_each_role_synchronises_its_own_threads():
    src = tilelang.lower(R.gemm_and_reduce_roles(128, 128, 96), target=SM90)
    roles = _role_bodies(src)
    assert set(roles) == {(0, 128), (128, 128)}
    reduce_role, gemm_role = roles[(0, 128)], roles[(128, 128)]
    # the cross-warp reduction and the copies into shared memory wait on their own barrier
    assert "tl::named_barrier_sync(1, 128)" in reduce_role
    assert "tl::named_barrier_sync(2, 128)" in gemm_role
    for body in roles.values():
        assert "__syncthreads" not in body
    assert "named_barrier_sync(2" not in reduce_role and "named_barrier_sync(1" not in gemm_role
    # warpgroup 1 issues the wgmma as the role's warpgroup 0, its only one: index 0
    assert re.search(r"wgmma_gemm_ss<64, 64, 32, 1, 1, .*acc, false, 0\)", gemm_role)


def test_a_role_from_thread_64_runs_mma_sync_on_its_own_warps():
    # four warps that are not a whole warpgroup: mma.sync, warps numbered from thread 64
    for target in (SM90, SM80):
        src = tilelang.lower(R.gemm_and_reduce_roles(100, 72, 96, reduce_threads=64),
                             target=target)
        roles = _role_bodies(src)
        assert set(roles) == {(0, 64), (64, 128)}
        assert "wgmma" not in roles[(64, 128)]
        assert re.search(r"tl::gemm_ss<64, 64, 32, 2, 2, .*acc, false, tx - 64\)",
                         roles[(64, 128)])
        assert "tl::named_barrier_sync(1, 64)" in roles[(0, 64)]


def test_shared_buffers_of_roles_side_by_side_do_not_overlap():
    src = tilelang.lower(R.gemm_and_reduce_roles(128, 128, 96), target=SM90)
    offsets = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"\* (\w+) = reinterpret_cast<\w+\*>\(smem \+ (\d+)\)", src)}
    sizes = {"A_s": 64 * 32 * 2, "B_s": 32 * 64 * 2, "cm_partials": 4 * 64 * 4}
    assert set(sizes) <= set(offsets), offsets
    spans = sorted((offsets[b], offsets[b] + n) for b, n in sizes.items())
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start, spans


def test_tile_operations_laid_out_from_the_roles_first_thread():
    src = tilelang.lower(R.split_consumer_gemm(128, 256, 128), target=SM90)
    roles = _role_bodies(src)
    assert set(roles) == {(0, 128), (128, 128)}
    # the second consumer's store: thread 128 + t holds what thread t of the first holds,
    # 64 columns further (rows t / 32 * 16 of the tile: -128 / 32 * 16 rows of 256)
    assert re.search(r"C\[.*\(tx >> 5\) \* 4096 .*- 16320\]", roles[(128, 128)])
    # each role's gemm is its one warpgroup's: index 0 in both
    for body in roles.values():
        calls = re.findall(r"tl::wgmma_gemm_ss<[^;]*, (\w+)\);", body)
        assert calls and set(calls) == {"0"}, calls


# ---- errors at the user's line ---------------------------------------------------------------

def test_a_fragment_used_by_two_roles_is_an_error():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256):
            F = T.alloc_fragment((64,), "float32")
            with T.ws(0):
                T.copy(A, F)
            with T.ws(1):
                T.copy(F, B)

    with pytest.raises(KernelError, match="fragment F is used by the role of threads "
                                          r"\[0, 128\).*\[128, 256\)") as e:
        tilelang.lower(f, target=SM90)
    assert "test_warp_roles.py" in str(e.value)


def test_a_role_of_part_of_a_warp_is_an_error():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            if tx < 48:
                T.fill(A, 1.0)
            else:
                T.fill(A, 2.0)

    with pytest.raises(KernelError, match=r"threads \[0, 48\).*whole warps") as e:
        tilelang.lower(f, target=SM90)
    assert "test_warp_roles.py" in str(e.value)


def test_more_roles_than_named_barriers_is_an_error():
    @T.macro
    def warp_fills(A, tx, r):
        if tx // 32 == r:
            T.fill(A[r, :], r)

    @T.prim_func
    def f(A: T.Tensor((16, 32), "float32")):
        with T.Kernel(1, threads=512):
            tx = T.get_thread_binding()
            warp_fills(A, tx, 0); warp_fills(A, tx, 1); warp_fills(A, tx, 2)  # noqa: E702
            warp_fills(A, tx, 3); warp_fills(A, tx, 4); warp_fills(A, tx, 5)  # noqa: E702
            warp_fills(A, tx, 6); warp_fills(A, tx, 7); warp_fills(A, tx, 8)  # noqa: E702
            warp_fills(A, tx, 9); warp_fills(A, tx, 10); warp_fills(A, tx, 11)  # noqa: E702
            warp_fills(A, tx, 12); warp_fills(A, tx, 13); warp_fills(A, tx, 14)  # noqa: E702
            warp_fills(A, tx, 15)

    with pytest.raises(KernelError, match="16 roles of different threads") as e:
        tilelang.lower(f, target=SM90)
    assert "test_warp_roles.py" in str(e.value)
