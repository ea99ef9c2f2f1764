"""Three lowering choices of the attention backward kernels (sm_90a sources, no GPU):

* consecutive synchronous tile loads (K then V before the loop) wait once, after both are
  issued, not once each (lower_copy);
* a shared -> global copy of a tile whose rows are not a multiple of the threads' lanes
  (128 x 192 halves on 256 threads: 24 vectors a row dealt to 32 lanes) still moves 16-byte
  vectors: the layout's guard is one condition per vector (partition_parallel);
* a warp-specialised stage of a loop known to run at most 4 times (or any, with the pass
  config tl.ws_tile_barriers) has one full barrier per tile, each waited for just before its
  tile's first reader (warp_specialize).
The GPU counterparts (correctness against torch) are tests/gpu/test_perf_attn_lowering.py."""

import re
import sys
from pathlib import Path

import tilelang
import tilelang.language as T

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.gpu import kernels as K  # noqa: E402

SM90 = "cuda -arch=sm_90a"


def two_tile_loads(M=128, D=64, threads=128):
    """Out = A + B through two shared tiles loaded one after the other."""
    @T.prim_func
    def f(A: T.Tensor((M, D), "float16"), B: T.Tensor((M, D), "float16"),
          Out: T.Tensor((M, D), "float16")):
        with T.Kernel(1, threads=threads) as bx:
            a = T.alloc_shared((M, D), "float16")
            b = T.alloc_shared((M, D), "float16")
            T.copy(A[0:M, 0:D], a)
            T.copy(B[0:M, 0:D], b)
            for i, j in T.Parallel(M, D):
                Out[i, j] = a[i, j] + b[i, j]
    return f


def ragged_row_store(M=128, N=192, rows=100, threads=256):
    """Out[:rows] = In[:rows] through a shared tile of N columns (N / 8 vectors a row, fewer
    than the lanes the default layout deals them to); rows past `rows` lie outside Out."""
    @T.prim_func
    def f(In: T.Tensor((rows, N), "float16"), Out: T.Tensor((rows, N), "float16")):
        with T.Kernel(1, threads=threads) as bx:
            s = T.alloc_shared((M, N), "float16")
            T.copy(In[0:M, 0:N], s)
            T.copy(s, Out[0:M, 0:N])
    return f


def _issued_together(src, commits):
    """The kernel's loads up to the first one into tile `b` have no wait (and no barrier)
    between them; one wait covers all `commits` groups. Returns the kernel's body."""
    body = src[src.index("__global__"):]
    first_b = body.index("&b[")
    assert "cp_async_wait" not in body[:first_b], body
    assert "__syncthreads" not in body[:first_b], body
    assert body.count("tl::cp_async_wait<0>();") == 1, body
    assert body.count("tl::cp_async_commit();") == commits, body
    return body


def test_consecutive_tile_loads_wait_once():
    # A's loads, then B's, with no wait between them; one wait covers both
    _issued_together(tilelang.lower(two_tile_loads(), target=SM90), commits=2)


def test_a_load_into_the_same_tile_still_waits():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float16"), Out: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 64), "float16")
            T.copy(A[0:64, 0:64], a)
            T.copy(A[0:64, 0:64], a)  # the same tile twice: the writes must stay ordered
            T.copy(a, Out[0:64, 0:64])
    body = tilelang.lower(f, target=SM90)
    assert body.count("tl::cp_async_wait<0>();") == 2, body


def column_parts_load(M=64, D=512, tail=64, threads=256):
    """Out = A[:, :D + tail] + B[:, :D] padded: the first D and the last `tail` columns of A
    loaded into one shared tile by two copies (the sparse MLA backward's Q tile), then B."""
    @T.prim_func
    def f(A: T.Tensor((M, D + tail), "float16"), B: T.Tensor((M, D), "float16"),
          Out: T.Tensor((M, D + tail), "float16")):
        with T.Kernel(1, threads=threads) as bx:
            a = T.alloc_shared((M, D + tail), "float16")
            b = T.alloc_shared((M, D), "float16")
            T.copy(A[0:M, 0:D], a[:, 0:D])
            T.copy(A[0:M, D:D + tail], a[:, D:D + tail])
            T.copy(B[0:M, 0:D], b)
            for i, j in T.Parallel(M, D + tail):
                Out[i, j] = a[i, j] + T.if_then_else(j < D, b[i, T.min(j, D - 1)], 0)
    return f


def test_disjoint_parts_of_one_tile_load_together():
    # both parts of `a` and all of `b` issued before the one wait, no barrier between them
    _issued_together(tilelang.lower(column_parts_load(), target=SM90), commits=3)


def test_overlapping_parts_of_one_tile_still_wait():
    @T.prim_func
    def f(A: T.Tensor((64, 128), "float16"), Out: T.Tensor((64, 128), "float16")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 128), "float16")
            T.copy(A[0:64, 0:96], a[:, 0:96])
            T.copy(A[0:64, 32:128], a[:, 32:128])  # columns 32..95 written twice
            T.copy(a, Out[0:64, 0:128])
    body = tilelang.lower(f, target=SM90)
    assert body.count("tl::cp_async_wait<0>();") == 2, body


def test_rounded_up_layout_stores_whole_vectors():
    # (the threads' store: by default on sm_90a this copy is a TMA store, lower_copy/copy_tma.py)
    src = tilelang.lower(ragged_row_store(), target=SM90,
                         pass_configs={"tl.disable_tma_store": True})
    body = src[src.index("__global__"):]
    assert "copy_vec<16>((&Out[" in body, body
    assert not re.search(r"for \(int v\w* = 0; v\w* < 96;", body), body  # no element loop
    # the lanes past the 24 vectors of a row sit out as a whole
    assert re.search(r"if \(\(tx & 31\) < 24\)", body), body


def _flash_source(seq_len=512, **configs):
    return tilelang.lower(K.flash_fwd(1, 2, seq_len, 64, block_M=64, block_N=64, num_stages=2),
                          target=SM90, pass_configs=configs or None)


def test_tile_barriers_wait_for_each_tile_before_its_first_reader():
    src = _flash_source(**{"tl.ws_tile_barriers": True})
    producer = src[src.index("thread_group: ('producer'"):src.index("thread_group: ('consumer'")]
    consumer = src[src.index("thread_group: ('consumer'"):]
    assert "full_bar" not in src
    # the producer expects each tile's bytes on its own barrier before loading it
    k_expect = producer.index("mbarrier_arrive_expect_tx((&K_shared_full[")
    v_expect = producer.index("mbarrier_arrive_expect_tx((&V_shared_full[")
    assert k_expect < producer.index("(&K_shared_full[", k_expect + 1) < v_expect
    assert producer.count("mbarrier_wait((&empty_bar[") == 1
    # the consumers wait for K before Q K^T and for V only before P V
    loop = consumer[consumer.index("for (int k"):]
    k_wait = loop.index("mbarrier_wait((&K_shared_full[")
    v_wait = loop.index("mbarrier_wait((&V_shared_full[")
    gemms = [m.start() for m in re.finditer(r"wgmma_gemm_\w\w<", loop)]
    assert k_wait < gemms[0] < v_wait < gemms[1], loop
    assert loop.count("mbarrier_arrive((&empty_bar[") == 1


def test_tile_barriers_by_default_only_on_short_loops():
    """8 iterations (seq 512 in 64-row tiles): one barrier per stage; 4 (seq 256): one per
    tile; the pass config forces either way."""
    long_loop = _flash_source()
    assert "full_bar" in long_loop and "K_shared_full" not in long_loop
    short_loop = _flash_source(256)
    assert "full_bar" not in short_loop and "K_shared_full" in short_loop
    forced_off = _flash_source(256, **{"tl.ws_tile_barriers": False})
    assert "full_bar" in forced_off and "K_shared_full" not in forced_off


def test_verbose_notes_say_why_a_loop_has_a_barrier_per_tile():
    notes = tilelang.compile(K.flash_fwd(1, 2, 256, 64, block_M=64, block_N=64, num_stages=2),
                             target=SM90).get_host_source()
    assert "one full barrier per tile" in notes and "a short loop (at most 4 iterations)" in notes
