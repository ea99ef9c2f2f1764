"""When a pipelined loop is not warp-specialised because a copy cannot be a TMA load, the
note in the host source names the constraint that failed, with the numbers."""

import re
import sys
from pathlib import Path

import pytest

import tilelang

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.gpu import kernels as K  # noqa: E402


def _notes(M, N, Kd, bm, bn, bk):
    kern = tilelang.compile(K.gemm(M, N, Kd, bm, bn, bk, out_dtype="float16", num_stages=3,
                                   threads=256), target="cuda -arch=sm_90a")
    return kern.get_host_source()


@pytest.mark.parametrize("shape,reason", [
    ((512, 512, 300, 128, 128, 64), "the rows of A are 600 bytes apart, not a multiple of 16"),
    ((1024, 512, 512, 512, 64, 32),
     "a box of (512, 32) elements exceeds TMA's 256 per dimension"),
])
def test_fallback_note_names_the_constraint(shape, reason):
    notes = _notes(*shape)
    assert "no warp specialisation: copy A -> A_shared does not meet TMA's constraints: " + \
        reason in notes, notes


def test_tma_able_copies_are_warp_specialised():
    assert "warp-specialised pipeline over k" in _notes(512, 512, 512, 128, 128, 64)


# ---- a T.Pipelined loop inside a persistent kernel's tile loop ----------------------------

def _persistent_source(**kw):
    from tests.gpu.epilogue_kernels import persistent_ragged_k

    # 15 tiles on 4 blocks: the last wave is partial, so the tile guard stays
    return tilelang.lower(persistent_ragged_k(300, 264, 128, blocks=4, **kw),
                          target="cuda -arch=sm_90a")


def test_tile_loop_runs_in_producer_and_consumers_with_a_running_ring_position():
    src = _persistent_source()
    producer = src[src.index("thread_group: ('producer'"):src.index("thread_group: ('consumer'")]
    consumer = src[src.index("thread_group: ('consumer'"):]
    for part in (producer, consumer):
        # the tile loop, its guard, one counter of the iterations run so far
        nest = part[part.index("int pipe_done = 0;"):]
        assert nest.index("for (int w = 0;") < nest.index("if (") < nest.index("for (int ko")
        assert re.search(r"pipe_done = [^;]*& 3\) \+ pipe_done;", nest), nest
        # the ring slot of a counted position: unsigned, so a mask rather than floor rounding
        assert re.search(r"mbarrier_wait\(\(&\w+_bar\[\(\(int\)\(\(\(unsigned int\)"
                         r"\(ko \+ pipe_done\)\) & 1u\)\)\]\)", part)
    assert "tl::tma_load(" in producer and "tl::tma_load(" not in consumer


def test_tile_loop_note_names_the_loops():
    from tests.gpu.epilogue_kernels import persistent

    kern = tilelang.compile(persistent(512, 512, 256), target="cuda -arch=sm_90a")
    assert "warp-specialised pipeline over ko (inside for w, if)" in kern.get_host_source()


def test_loads_that_depend_on_computed_values_fall_back():
    """The producer cannot follow a tile index read from shared memory: cp.async instead."""
    import tilelang.language as T

    @T.prim_func
    def f(A: T.Tensor((256, 64), "float16"), order: T.Tensor((4,), "int32"),
          C: T.Tensor((256, 64), "float32")):
        with T.Kernel(2, threads=128) as bid:
            idx = T.alloc_shared((4,), "int32")
            As = T.alloc_shared((64, 64), "float16")
            Cl = T.alloc_fragment((64, 64), "float32")
            T.copy(order, idx)
            for w in T.serial(2):
                t = idx[w * 2 + bid]
                T.clear(Cl)
                for ko in T.Pipelined(2, num_stages=2):
                    T.copy(A[t * 64, ko * 64], As)
                    T.gemm(As, As, Cl, transpose_B=True)
                T.copy(Cl, C[t * 64, 0])

    src = tilelang.compile(f, target="cuda -arch=sm_90a").get_host_source()
    assert "no warp specialisation: the load into As depends on values computed from " \
        "memory in the loops around it" in src, src


def test_thread_dependent_outer_loop_is_not_a_tile_loop():
    import tilelang.language as T

    @T.prim_func
    def f(A: T.Tensor((256, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bid:
            As = T.alloc_shared((64, 64), "float16")
            Cl = T.alloc_fragment((64, 64), "float32")
            T.clear(Cl)
            for w in T.serial(T.get_thread_binding() // 64 + 1):
                for ko in T.Pipelined(4, num_stages=2):
                    T.copy(A[ko * 64, 0], As)
                    T.gemm(As, As, Cl, transpose_B=True)
            T.copy(Cl, C)

    src = tilelang.compile(f, target="cuda -arch=sm_90a").get_host_source()
    assert "no warp specialisation: the T.Pipelined loop is neither" in src


def test_persistent_im2col_is_issued_by_the_producer_unless_its_tile_is_read_from_memory():
    import tilelang.language as T
    from tests.gpu.epilogue_kernels import persistent_conv

    src = tilelang.compile(persistent_conv(2, 64, 9, 11, 72), target="cuda -arch=sm_90a")
    assert "(inside for wave, if)" in src.get_host_source()

    @T.prim_func
    def f(data: T.Tensor((2, 9, 11, 64), "float16"), weight: T.Tensor((576, 64), "float16"),
          order: T.Tensor((4,), "int32"), out: T.Tensor((256, 64), "float32")):
        with T.Kernel(2, threads=128) as bid:
            idx = T.alloc_shared((4,), "int32")
            data_s = T.alloc_shared((64, 32), "float16")
            weight_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(order, idx)
            for w in T.serial(2):
                t = idx[w * 2 + bid]
                T.clear(acc)
                for ko in T.Pipelined(18, num_stages=2):
                    T.c2d_im2col(data, data_s, t, ko, 3, 1, 1, 1)
                    T.copy(weight[ko * 32, 0], weight_s)
                    T.gemm(data_s, weight_s, acc)
                T.copy(acc, out[t * 64, 0])

    host = tilelang.compile(f, target="cuda -arch=sm_90a").get_host_source()
    assert "no warp specialisation: the load into data_s depends on values computed from " \
        "memory in the loops around it" in host, host


def test_stage_read_by_ordinary_loads_is_fenced_before_the_hand_back():
    """A TMA load into a stage is an async-proxy write: when the consumers read the stage with
    ordinary loads (here A into registers), a proxy fence follows their last such read and
    precedes their arrival on the empty barrier; a stage read by wgmma alone needs none."""
    from tilelang.testing import fuzz
    from tilelang.testing.fuzz import fam_gemm

    from tests.gpu.epilogue_kernels import persistent_tiles

    spec = fuzz.generate(734, "persistent").spec
    for a_regs in (True, False):
        case = fam_gemm.build(dict(spec, a_regs=a_regs, bm=64, M=192, a_panel=False), 734)
        src = tilelang.lower(fuzz.load(case), target="cuda -arch=sm_90a")
        consumer = src[src.index("thread_group: ('consumer'"):]
        loop = consumer[consumer.index("for (int k = 0;"):]
        loop = loop[:loop.index("tl::mbarrier_arrive((&empty_bar")]
        if a_regs:
            assert loop.rindex("(&A_s[") < loop.index("tl::fence_proxy_async();"), loop
        else:
            assert "fence_proxy_async" not in loop, loop
    src = tilelang.lower(persistent_tiles(1024, 1024, 512), target="cuda -arch=sm_90a")
    consumer = src[src.index("thread_group: ('consumer'"):]
    loop = consumer[consumer.index("for (int k = 0;"):]
    assert "fence_proxy_async" not in loop[:loop.index("tl::mbarrier_arrive((&empty_bar")]


def _attention_source(**kw):
    from tests.gpu.epilogue_kernels import persistent_attention

    return tilelang.compile(persistent_attention(2, 3, 333, 64, True, **kw),
                            target="cuda -arch=sm_90a")


def test_tile_load_before_the_loop_is_issued_by_the_producer_once_per_tile():
    """Q (read only by the pipelined loop) is loaded by the producer on its own ring of two
    buffers, indexed by a count of tiles: the consumers wait for it where their copy was and
    hand it back right after the loop."""
    kern = _attention_source()
    src = kern.get_kernel_source()
    producer = src[src.index("thread_group: ('producer'"):src.index("thread_group: ('consumer'")]
    consumer = src[src.index("thread_group: ('consumer'"):]
    ring = "((int)(((unsigned int)tiles_done) & 1u))"
    slot = f"tile_full_bar[{ring}]"
    # the producer: free buffer, then Q, then the loop's stages; one count per tile
    assert producer.index(f"tile_empty_bar[{ring}]") < \
        producer.index(f"tl::tma_load((&Q_desc), (&{slot})") < producer.index("for (int k")
    assert re.search(r"tiles_done = tiles_done \+ 1;", producer)
    # the consumers: wait, loop reading Q from the tile's buffer, release after the loop
    loop = consumer.index("for (int k")
    assert consumer.index(f"tl::mbarrier_wait((&{slot})") < loop
    assert f"(&Q_s[{ring} * 4096])" in consumer
    release = consumer.index(f"tl::mbarrier_arrive((&tile_empty_bar[{ring}]))")
    assert release > consumer.rindex("tl::mbarrier_arrive((&empty_bar")
    assert "cp_async" not in consumer and "Q[" not in consumer
    assert "loads Q once per tile (2 buffer(s))" in kern.get_host_source()


def _tile_reuse(read_after_loop):
    import tilelang.language as T

    @T.prim_func
    def f(X: T.Tensor((640, 64), "float16"), Y: T.Tensor((256, 64), "float16"),
          C: T.Tensor((640, 64), "float32"), Z: T.Tensor((640, 64), "float16")):
        with T.Kernel(4, threads=128) as bid:
            Xs = T.alloc_shared((64, 64), "float16")
            Ys = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            for t in T.Persistent([10], 4, bid):
                T.copy(X[t * 64, 0], Xs)
                T.clear(acc)
                for k in T.Pipelined(4, num_stages=2):
                    T.copy(Y[k * 64, 0], Ys)
                    T.gemm(Xs, Ys, acc)
                if read_after_loop:
                    T.copy(Xs, Z[t * 64, 0])
                T.copy(acc, C[t * 64, 0])
    return tilelang.compile(f, target="cuda -arch=sm_90a").get_host_source()


def test_tile_read_after_the_loop_stays_with_the_consumers():
    """Only a tile the pipelined loop alone reads is handed to the producer: one read after
    the loop too would need the buffer after its hand-back."""
    assert "loads X once per tile" in _tile_reuse(False)
    host = _tile_reuse(True)
    assert "warp-specialised pipeline over k" in host and "once per tile" not in host


def test_order_stage_schedule_runs_inside_a_tile_loop():
    """FlashAttention-3's order/stage schedule in a persistent tile loop: the overlapped
    pipeline with its prologue and epilogue passes runs per tile, every ring position counted
    from the iterations of earlier tiles (prologue instance 0 included), ping-pong between
    the consumer warpgroups, Q from the producer."""
    from tests.gpu.epilogue_kernels import persistent_attention

    kern = tilelang.compile(persistent_attention(2, 3, 333, 128, True, bm=128, bn=128,
                                                 threads=256, overlap=True),
                            target="cuda -arch=sm_90a")
    host = kern.get_host_source()
    assert "warp-specialised overlapped pipeline over k (inside for wave, if)" in host
    assert "loads Q once per tile" in host and "warpgroup ping-pong" in host
    src = kern.get_kernel_source()
    consumer = src[src.index("thread_group: ('consumer'"):]
    tile = consumer[consumer.index("for (int wave"):]
    prologue = tile[:tile.index("for (int k")]
    assert "K_s_full[((int)(((unsigned int)pipe_done) & 1u))]" in prologue
    steady = tile[tile.index("for (int k"):]
    assert "V_s_full[((int)(((unsigned int)(k + pipe_done - 1)) & 1u))]" in steady
    assert re.search(r"pipe_done = [^;]*\+ pipe_done[^;]*;", tile)  # counted across tiles


# ---- warp specialisation or the cp.async pipeline, for a GEMM as the user wrote it -------

def _gemm_notes(M, bm, bn, bk, stages, threads=128, **configs):
    kern = tilelang.compile(K.gemm(M, M, M, bm, bn, bk, out_dtype="float16", num_stages=stages,
                                   threads=threads), target="cuda -arch=sm_90a",
                            pass_configs=configs)
    return kern.get_host_source()


@pytest.mark.parametrize("M,bm,bn,bk,stages,threads,specialised", [
    (4096, 128, 128, 32, 3, 128, False),  # 1024 blocks, one per SM warp-specialised
    (2048, 128, 128, 32, 3, 128, False),
    (1024, 128, 128, 32, 3, 128, True),   # 64 blocks: fewer than the SMs
    (4096, 128, 128, 32, 2, 128, True),   # two stages: cp.async would not overlap
    (4096, 64, 64, 32, 3, 128, True),     # small tiles: several warp-specialised blocks per SM
    (4096, 128, 256, 64, 3, 256, True),   # two consumer warpgroups
])
def test_schedule_follows_occupancy(M, bm, bn, bk, stages, threads, specialised):
    notes = _gemm_notes(M, bm, bn, bk, stages, threads)
    assert ("warp-specialised pipeline over k" in notes) == specialised, notes
    if not specialised:
        assert "the cp.async pipeline fits several blocks per SM" in notes


def test_explicit_pass_config_keeps_warp_specialisation():
    notes = _gemm_notes(4096, 128, 128, 32, 3, **{"tl.disable_warp_specialized": False})
    assert "warp-specialised pipeline over k" in notes


def test_lowering_does_not_import_torch():
    """The SM count the schedule choice needs is asked of the CUDA driver (or taken as an
    H100/H200's 132) when the program has not imported torch: importing it cost a process's
    first compile about a second."""
    import os
    import subprocess
    import sys as _sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import sys; sys.path.insert(0, %r); import tilelang; "
            "from as_written import gemm; "
            "tilelang.lower(gemm(4096, 4096, 4096, 128, 128, 32, 3, 128), "
            "target='cuda -arch=sm_90a'); "
            "print('torch' in sys.modules)") % str(root / "benchmarks")
    out = subprocess.run([_sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout
