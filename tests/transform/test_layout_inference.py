"""infer_layouts: every fragment gets a Fragment, every shared buffer a Layout, every
parallel loop touching a fragment a loop layout; gemm accumulators get the instruction's
register layout (mma.sync on sm_80, wgmma on sm_90a), reductions the projection of their
source, annotations win, and conflicts are located errors naming both sides."""


import numpy as np
import pytest

import tilelang.language as T
from tilelang import layout as L
from tilelang.errors import KernelError
from tilelang.ir import nodes as ir

from transform_helpers import SM80, SM90, marked_line, nodes, requires_gpu, run_passes


def _gemm_kernel(bm=64, bn=64, bk=32, threads=128):
    @T.prim_func
    def f(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16"),
          C: T.Tensor((128, 128), "float32")):
        with T.Kernel(T.ceildiv(128, bn), T.ceildiv(128, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, bn), "float16")
            Cl = T.alloc_fragment((bm, bn), "float32")
            rs = T.alloc_fragment((bm,), "float32")
            T.clear(Cl)
            for ko in T.Pipelined(T.ceildiv(128, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], As)
                T.copy(B[ko * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cl)
            T.reduce_sum(Cl, rs, dim=1)
            for i, j in T.Parallel(bm, bn):
                Cl[i, j] = Cl[i, j] / rs[i]
            T.copy(Cl, C[by * bm, bx * bn])
    return f


def _layouts(func, target=SM80):
    k, ctx = run_passes(func, "infer_layouts", target)
    return k, ctx, {b.name: lay for b, lay in ctx.layouts.items()}


def _each_element_once(frag: L.Fragment):
    """Every element of the shape is held by exactly `replication` (thread, value) slots."""
    table = frag.coord_table().reshape(-1, frag.ndim)
    counts = np.zeros(frag.shape, np.int64)
    np.add.at(counts, tuple(table.T), 1)
    return np.all(counts == frag.replication)


def test_mma_accumulator_matches_the_ptx_fragment_on_sm80():
    _, ctx, lay = _layouts(_gemm_kernel())
    C = lay["Cl"]
    assert isinstance(C, L.Fragment) and C.shape == (64, 64)
    assert C.num_threads == 128 and C.num_values == 64 * 64 // 128
    assert _each_element_once(C) and C.replication == 1
    # mma.sync m16n8 C/D fragment (PTX ISA): lane l holds rows l/4 and l/4 + 8, columns
    # 2*(l%4) and 2*(l%4) + 1 of each 16x8 tile
    for lane in range(32):
        got = {tuple(int(x) for x in C.coords(lane, v)) for v in range(4)}
        r, c = lane // 4, 2 * (lane % 4)
        assert got == {(r, c), (r, c + 1), (r + 8, c), (r + 8, c + 1)}, lane
    # the gemm's warp partition is recorded and the four warps tile 64x64 as 2x2
    (backend, part), = ctx.gemm_info.values()
    assert backend.__name__.endswith("gemm_sm80") and tuple(part[:2]) == (2, 2)
    warp_origin = {tuple(int(x) for x in C.coords(32 * w, 0)) for w in range(4)}
    assert warp_origin == {(0, 0), (0, 32), (32, 0), (32, 32)}


def test_wgmma_accumulator_on_sm90():
    _, ctx, lay = _layouts(_gemm_kernel(), SM90)
    C = lay["Cl"]
    (backend, _), = ctx.gemm_info.values()
    assert backend.__name__.endswith("gemm_sm90")
    assert _each_element_once(C)
    # wgmma m64nN D fragment: warp w of the warpgroup holds rows 16w..16w+15, laid out per
    # warp like the mma.sync accumulator
    for t in range(128):
        w, lane = divmod(t, 32)
        r, c = 16 * w + lane // 4, 2 * (lane % 4)
        got = {tuple(int(x) for x in C.coords(t, v)) for v in range(4)}
        assert got == {(r, c), (r, c + 1), (r + 8, c), (r + 8, c + 1)}, t


def test_gemm_shared_operands_are_swizzled():
    for target in (SM80, SM90):
        _, _, lay = _layouts(_gemm_kernel(), target)
        for name in ("As", "Bs"):
            assert getattr(lay[name], "swizzle_bytes", None), (target, name, lay[name])


def test_reduction_output_is_the_projection_of_its_source():
    _, _, lay = _layouts(_gemm_kernel())
    C, r = lay["Cl"], lay["rs"]
    assert r.shape == (64,) and r.num_threads == 128
    # every thread holds, in rs, exactly the rows it holds of Cl
    ct, rt = C.coord_table(), r.coord_table()
    for t in range(128):
        assert set(ct[t, :, 0].tolist()) == set(rt[t, :, 0].tolist()), t
    # the 4 lanes of a quad (and the 2 warps along N) share rows: rs is replicated
    assert r.replication == 8


def test_loops_over_a_fragment_carry_its_layout():
    k, _, lay = _layouts(_gemm_kernel())
    outer = [s for s in nodes(k, ir.For, lambda s: s.kind == "parallel")
             if s.annotation("loop_layout") is not None]
    # clear, the scaling loop, the copy out: all over Cl's index space, all in Cl's layout
    assert len(outer) == 3
    for loop in outer:
        assert L.fragment_equal(loop.annotation("loop_layout"), lay["Cl"])


def test_annotation_wins_and_defaults_fill_the_rest():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32"), D: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float32")
            F = T.alloc_fragment((64, 64), "float32")
            r = T.alloc_fragment((64,), "float32")
            T.annotate_layout({S: L.make_padded_layout((64, 64), 4)})
            T.copy(A, S)
            T.copy(S, F)
            T.reduce_max(F, r, dim=1)
            for i, j in T.Parallel(64, 64):
                D[i, j] = F[i, j] - r[i]

    k, _, lay = _layouts(f)
    assert L.layout_equal(lay["S"], L.make_padded_layout((64, 64), 4))
    assert lay["S"].physical_size == 64 * 68
    F = lay["F"]
    assert L.fragment_equal(F, L.elementwise_fragment((64, 64), 128, 4))
    assert _each_element_once(F)
    ft, rt = F.coord_table(), lay["r"].coord_table()
    for t in range(128):
        assert set(ft[t, :, 0].tolist()) == set(rt[t, :, 0].tolist())


def test_unannotated_shared_tiles_default_to_row_major():
    @T.prim_func
    def f(A: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((32, 32), "float32")
            T.copy(A, S)
            for i, j in T.Parallel(32, 32):
                A[i, j] = S[j, i]

    _, _, lay = _layouts(f)
    assert lay["S"].is_row_major()


def _two_accumulators():
    @T.prim_func
    def f(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
          D: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((64, 32), "float16")
            Bs = T.alloc_shared((32, 64), "float16")
            C1 = T.alloc_fragment((64, 64), "float32")
            C2 = T.alloc_fragment((64, 64), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, C1, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
            T.gemm(As, Bs, C2, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(64, 64):  # <-
                D[i, j] = C1[i, j] + C2[i, j]
    return f


def _annotated_accumulator():
    @T.prim_func
    def f(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
          D: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((64, 32), "float16")
            Bs = T.alloc_shared((32, 64), "float16")
            C = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({C: L.elementwise_fragment((64, 64), 128, 4)})
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, C, clear_accum=True)  # <-
            T.copy(C, D)
    return f


def test_a_loop_reading_two_accumulator_layouts_stages_one():
    """No layout holds both accumulators' elements on the same threads: the loop follows the
    first one and reads the other through a shared copy (the reference rejects this loop;
    the interpreter runs it, so the CUDA path must too)."""
    k, ctx, lay = _layouts(_two_accumulators())
    assert [b.name for b in ctx.scratch_shared] == ["C2_shared"]


@pytest.mark.parametrize("builder,words", [
    (_annotated_accumulator, ["layout conflict for C", "T.gemm accumulator",
                              "T.annotate_layout"]),
], ids=["annotation-vs-gemm"])
def test_conflicts_are_located_errors(builder, words):
    with pytest.raises(KernelError) as info:
        run_passes(builder(), "infer_layouts", SM80)
    text = str(info.value)
    for w in words:
        assert w in text, text
    assert info.value.loc is not None and info.value.loc.filename == __file__
    assert info.value.loc.lineno == marked_line(builder), text


def test_a_loop_writing_one_layout_reads_the_other_through_shared_memory():
    """Not a conflict: the loop runs in the layout of the fragment it writes and the other
    fragment is staged through a shared scratch tile first."""

    @T.prim_func
    def f(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
          D: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((64, 32), "float16")
            Bs = T.alloc_shared((32, 64), "float16")
            C1 = T.alloc_fragment((64, 64), "float32")
            C2 = T.alloc_fragment((64, 64), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, C1, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
            T.gemm(As, Bs, C2, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(64, 64):
                C1[i, j] = C1[i, j] + C2[i, j]
            T.copy(C1, D)

    k, ctx, lay = _layouts(f)
    assert [b.name for b in ctx.scratch_shared] == ["C2_shared"]
    loop = next(s for s in nodes(k, ir.For, lambda s: s.kind == "parallel")
                if nodes(s, ir.Store, lambda st: st.buffer.name == "C1")
                and nodes(s, ir.Load, lambda e: e.buffer.name == "C2_shared"))
    assert L.fragment_equal(loop.annotation("loop_layout"), lay["C1"])


def test_loop_over_two_lower_rank_fragments_extends_the_one_both_can_serve():
    """R[i] (3 values, every thread holds all) and C[j] (32 values, 4 per thread) read in one
    loop over (i, j): the loop must extend C's layout, under which R is read where it is held;
    extending R's distributed j so that threads read C elements they do not hold (device
    fuzzer seed 140992, 2026-11-22)."""
    import torch

    import tilelang

    @T.prim_func
    def f(r: T.Tensor((3,), "float32"), c: T.Tensor((32,), "float32"),
          Z: T.Tensor((3, 32), "float32")):
        with T.Kernel(1, threads=256):
            R = T.alloc_fragment((3,), "float32")
            for i in T.Parallel(3):
                R[i] = r[i]
            C = T.alloc_fragment((32,), "float32")
            for j in T.Parallel(32):
                C[j] = c[j]
            F = T.alloc_shared((3, 32), "float32")
            for i, j in T.Parallel(3, 32):
                F[i, j] = T.if_then_else(C[j] > 0.5, R[i], 0.5)
            for i, j in T.Parallel(3, 32):
                F[i, j] = F[i, j] - R[i]
                F[i, j] = F[i, j] + C[j]
            for i in T.Parallel(3):
                R[i] = R[i] * 1.25 + 1.25
            T.copy(F, Z)

    tilelang.lower(f, target=SM90)  # raised "fragment C is read across threads"
    kern = tilelang.compile(f, target="cpu")
    r, c = torch.randn(3), torch.rand(32)
    z = torch.empty(3, 32)
    kern(r, c, z)
    first = torch.where(c[None, :] > 0.5, r[:, None].expand(3, 32), torch.full((3, 32), 0.5))
    torch.testing.assert_close(z, first - r[:, None] + c[None, :])


def _staged_output_kernel(extra_reader=False, c_cols=256):
    """A gemm whose result the program stages itself: fragment -> shared tile -> global
    (C's first 128 columns: rows apart in memory, unless C has 128 columns)."""
    @T.prim_func
    def f(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 64), "float16"),
          C: T.Tensor((128, c_cols), "float16"), R: T.Tensor((128,), "float16")):
        with T.Kernel(1, threads=128) as bx:
            As = T.alloc_shared((128, 64), "float16")
            Bs = T.alloc_shared((128, 64), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            Cs = T.alloc_shared((128, 128), "float16")
            T.copy(A[0, 0], As)
            T.copy(B[0, 0], Bs)
            T.gemm(As, Bs, Cl, transpose_B=True, clear_accum=True)
            T.copy(Cl, Cs)
            T.copy(Cs, C[0, bx * 128])  # (one block: bx is 0)
            if extra_reader:
                for i in T.Parallel(128):
                    R[i] = Cs[i, i]
    return f


def _store_banks(frag: L.Fragment, tile: L.Layout, lanes, value: int, elem_bytes=2,
                 rows=None):
    """The shared-memory banks each lane's store of fragment values value and value + 1 (two
    elements of one row) into `tile` touches (lanes whose row is not below `rows` store
    nothing)."""
    banks = []
    for t in lanes:
        r, c = (int(x) for x in frag.coords(t, value))
        if rows is not None and r >= rows:
            continue
        first = int(tile.forward(r, c)) * elem_bytes // 4
        banks += [(first + k) % 32 for k in range(max(1, 2 * elem_bytes // 4))]
    return banks


def test_a_hand_staged_output_tile_is_swizzled_so_fragment_stores_spread_over_the_banks():
    for target in (SM80, SM90):
        _, _, lay = _layouts(_staged_output_kernel(), target)
        assert lay["Cs"].swizzle_bytes == 128, (target, lay["Cs"])
        # every 4-byte store of a warp (lanes 0-31, one value pair) hits 32 distinct banks;
        # row-major 256-byte rows would put the 8 row groups of lanes in the same 4 banks
        for value in (0, 2, 4, 6):
            banks = _store_banks(lay["Cl"], lay["Cs"], range(32), value)
            assert len(set(banks)) == 32, (target, value, banks)


def test_a_staging_tile_stored_to_one_contiguous_run_keeps_the_row_major_layout():
    """The whole of a 128 x 128 C (at column bx * 128 of a grid of one block): one 1-D bulk
    store, which needs the tile row-major (and no tensor map)."""
    for target in (SM80, SM90):
        _, _, lay = _layouts(_staged_output_kernel(c_cols=128), target)
        assert lay["Cs"].is_row_major(), target


def test_a_staging_tile_something_else_reads_keeps_the_row_major_layout():
    _, _, lay = _layouts(_staged_output_kernel(extra_reader=True), SM90)
    assert lay["Cs"].is_row_major()


def _slice_tile_kernel(vector_atomic=True):
    """Accumulator rows stored into a shared slice under a guard, added to C from there."""
    @T.prim_func
    def f(A: T.Tensor((32, 32), "float16"), B: T.Tensor((32, 256), "float16"),
          C: T.Tensor((32, 256), "float32")):
        with T.Kernel(1, threads=256):
            As = T.alloc_shared((32, 32), "float16")
            Bs = T.alloc_shared((32, 256), "float16")
            Cl = T.alloc_fragment((32, 256), "float32")
            Cs = T.alloc_shared((16, 256), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.gemm(As, Bs, Cl, clear_accum=True)
            for s in range(2):
                for i, j in T.Parallel(32, 256):
                    if i < 16:
                        Cs[i, j] = Cl[i + s * 16, j]
                if vector_atomic:
                    for i, j in T.Parallel(16, 64):
                        T.atomic_addx4(C[s * 16 + i, j * 4], Cs[i, j * 4])
                else:
                    for i, j in T.Parallel(16, 256):
                        T.atomic_add(C[s * 16 + i, j], Cs[i, j])
    return f


def test_a_slice_tile_vector_atomics_read_is_swizzled():
    _, _, lay = _layouts(_slice_tile_kernel(), SM90)
    assert lay["Cs"].swizzle_bytes == 128, lay["Cs"]
    # each 8-byte store of a warp: 256 bytes over the 32 banks, each bank twice (the minimum)
    for value in (0, 2):
        banks = _store_banks(lay["Cl"], lay["Cs"], range(32), value, elem_bytes=4, rows=16)
        assert max(banks.count(b) for b in set(banks)) <= 2, (value, sorted(banks))


def test_a_slice_tile_read_element_by_element_keeps_the_row_major_layout():
    _, _, lay = _layouts(_slice_tile_kernel(vector_atomic=False), SM90)
    assert lay["Cs"].is_row_major()


def _row_per_thread_kernel(K=256, block_k=128, transposed=False, vectorized=False,
                           dtype="float16"):
    """The reference's naive GEMV: each thread copies its own row of B into a shared tile
    and reads it back (`B_s[tx, k]`); `transposed` indexes the tile `B_s[k, tx]` instead,
    `vectorized` copies the row in a T.vectorized loop."""
    N = 128

    @T.prim_func
    def f(A: T.Tensor((K,), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bn:
            tn = T.get_thread_binding(0)
            A_s = T.alloc_shared((block_k,), dtype)
            B_s = T.alloc_shared((block_k, N) if transposed else (N, block_k), dtype)
            acc = T.alloc_local((1,), "float32")
            T.clear(acc)
            for bk in T.serial(K // block_k):
                if vectorized:
                    for tk in T.vectorized(block_k):
                        B_s[tn, tk] = B[tn, bk * block_k + tk]
                for tk in T.serial(block_k):
                    A_s[tk] = A[bk * block_k + tk]
                    if transposed:
                        B_s[tk, tn] = B[tn, bk * block_k + tk]
                    elif not vectorized:
                        B_s[tn, tk] = B[tn, bk * block_k + tk]
                for tk in T.serial(block_k):
                    b = B_s[tk, tn] if transposed else B_s[tn, tk]
                    acc[0] += A_s[tk].astype("float32") * b.astype("float32")
            C[tn] = acc[0]
    return f


@pytest.mark.parametrize("dtype,pad", [("float16", 2), ("float32", 1), ("int8", 4)])
def test_a_tile_whose_rows_follow_the_thread_is_padded_off_one_bank(dtype, pad):
    """Row-major 128-element rows put lanes 0-31 of `B_s[tx, k]` in one bank (32
    wavefronts per access); 4 bytes of padding per row give every lane its own bank."""
    for target in (SM80, SM90):
        k, _, lay = _layouts(_row_per_thread_kernel(dtype=dtype), target)
        B_s = lay["B_s"]
        assert not B_s.is_row_major() and B_s.physical_size == 128 * (128 + pad), (target, B_s)
        lanes = np.arange(32)
        words = np.asarray(B_s.forward(lanes, 0)) * np.dtype(dtype).itemsize // 4
        assert len(set(words % 32)) == 32, (target, words)
        assert lay["A_s"].is_row_major()  # one dimension: every lane reads one element


def test_no_padding_that_would_push_the_tiles_past_the_shared_memory_limit():
    """B_s (32 KiB) and A_s beside a tile that leaves less than the padding's 512 bytes of
    the sm_90a limit: the tiles stay row-major and the kernel still lowers."""
    from tilelang.transform.analysis.shared_memory import smem_limit

    free = smem_limit(90) - 128 * 128 * 2 - 128 * 2 - 256  # 256 bytes short of the padding

    @T.prim_func
    def f(A: T.Tensor((256,), "float16"), B: T.Tensor((128, 256), "float16"),
          C: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tn = T.get_thread_binding(0)
            A_s = T.alloc_shared((128,), "float16")
            B_s = T.alloc_shared((128, 128), "float16")
            Big = T.alloc_shared((free,), "uint8")
            acc = T.alloc_local((1,), "float32")
            T.clear(acc)
            for bk in T.serial(2):
                for tk in T.serial(128):
                    A_s[tk] = A[bk * 128 + tk]
                    B_s[tn, tk] = B[tn, bk * 128 + tk]
                    Big[tn * 2 + tk] = T.uint8(1)
                for tk in T.serial(128):
                    acc[0] += A_s[tk].astype("float32") * B_s[tn, tk].astype("float32")
            C[tn] = acc[0] + Big[tn].astype("float32")

    _, _, lay = _layouts(f, SM90)
    assert lay["B_s"].is_row_major()
    run_passes(f, "plan_shared", SM90)


@pytest.mark.parametrize("case", ["transposed", "vectorized"])
def test_a_tile_without_conflicts_or_with_vector_accesses_stays_row_major(case):
    """`B_s[k, tx]` already spreads the lanes over the banks; a T.vectorized loop's accesses
    need whole aligned rows."""
    _, _, lay = _layouts(_row_per_thread_kernel(**{case: True}), SM90)
    assert lay["B_s"].is_row_major(), lay["B_s"]


def test_a_padded_tile_gives_the_interpreters_results():
    """Only placement changes: the CUDA source indexes the padded rows, and the result is the
    interpreter's (and numpy's)."""
    import tilelang

    f = _row_per_thread_kernel()
    src = tilelang.lower(f, target=SM90).kernel_source
    assert "tx * 130 + " in src, src
    import torch

    kernel = tilelang.compile(_row_per_thread_kernel(), target="cpu")
    g = torch.Generator().manual_seed(0)
    a = torch.randn(256, generator=g).half()
    b = torch.randn(128, 256, generator=g).half()
    c = torch.full((128,), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(c.double(), b.double() @ a.double(), rtol=1e-3, atol=1e-3)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_a_padded_tile_on_the_gpu_matches_torch(dtype):
    import tilelang
    import torch

    kernel = tilelang.compile(_row_per_thread_kernel(K=384, dtype=dtype), target="cuda")
    pitch = 128 + {"float16": 2, "float32": 1}[dtype]  # rows padded by 4 bytes
    assert f"tx * {pitch} + " in kernel.get_kernel_source()
    for seed in range(2):
        g = torch.Generator().manual_seed(seed)
        a = torch.randn(384, generator=g).to(getattr(torch, dtype))
        b = torch.randn(128, 384, generator=g).to(getattr(torch, dtype))
        c = torch.full((128,), float("nan"), device="cuda")
        kernel(a.cuda(), b.cuda(), c)
        torch.testing.assert_close(c.double().cpu(), b.double() @ a.double(), rtol=2e-3,
                                   atol=2e-3)


@pytest.mark.parametrize("offsets,elem_bytes,wavefronts", [
    (np.zeros(32, np.int64), 2, 1),           # every lane one word: a broadcast
    (np.arange(32), 4, 1),                     # consecutive words: every bank once
    (np.arange(32) * 128, 2, 32),              # 256-byte rows: one bank
    (np.arange(32) * 130, 2, 1),               # rows padded by 4 bytes
    (np.arange(32) * 136, 2, 4),               # rows padded by 16 bytes: 8 banks
    (np.arange(32) // 2, 2, 1),                # two 2-byte lanes per word
])
def test_warp_wavefronts(offsets, elem_bytes, wavefronts):
    from tilelang.transform.analysis.shared_memory import warp_wavefronts

    assert warp_wavefronts(offsets, elem_bytes) == wavefronts
