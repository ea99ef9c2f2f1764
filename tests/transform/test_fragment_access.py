"""Fragments indexed the ways the reference's examples index them (fragment_access_kernels.py):
each program runs on the interpreter and matches torch, builds for sm_90a (and sm_80 where the
instruction choice differs), and gets the layouts the reference gives: dims indexed by a serial
variable in every thread's registers, a fragment read outside T.Parallel held whole by every
thread, a loop over a shifted index laid out over the fragment's elements, register gemm
operands in the mma layouts. Only where no layout serves an access is the fragment reached
through shared memory (and the build says so)."""

import numpy as np
import pytest
import torch

import tilelang
from tilelang import layout as L
from tilelang.ir import nodes as ir
from tilelang.runtime.compiler import compile_cuda
from tilelang.transform.analysis import fragment_access as FA
from tilelang.transform.analysis.fragment_ops import split_dim

from fragment_access_kernels import CASES
from transform_helpers import SM80, SM90, nodes, requires_compiler, run_passes

STAGED = {"staged_row_reads": ["acc_shared"], "replicated_write": ["col_shared"],
          "windowed_reads_spread": ["x_shared"]}


def _run_on_interpreter(name):
    func, inputs, reference = CASES[name]()
    ins = inputs(torch.Generator().manual_seed(1), "cpu")
    expected = reference(ins)
    for pos in expected:  # outputs are poisoned: an unwritten element shows
        ins[pos].fill_(float("nan") if ins[pos].dtype.is_floating_point else -12345)
    tilelang.compile(func, target="cpu")(*ins)
    for pos, want in expected.items():
        got = ins[pos].double()
        tol = 2e-2 * max(1.0, float(want.abs().max()))
        assert torch.allclose(got, want.double(), atol=tol, rtol=0), (name, pos)


@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreter_matches_torch(name):
    _run_on_interpreter(name)


@requires_compiler
@pytest.mark.parametrize("name", sorted(CASES))
def test_builds_for_sm90a(name):
    func = CASES[name]()[0]
    src = tilelang.lower(func, target=SM90)
    assert compile_cuda(src, "sm_90a", name=func.name, use_cache=False).cubin


@requires_compiler
@pytest.mark.parametrize("name", ["gemm_sr", "gemm_rr", "gemm_rs_transA", "gemm_rr_bf16_trans",
                                  "shifted_store", "masked_tiles"])
def test_builds_for_sm80(name):
    func = CASES[name]()[0]
    src = tilelang.lower(func, target=SM80)
    assert compile_cuda(src, "sm_80", name=func.name, use_cache=False).cubin


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("target", [SM80, SM90])
def test_only_unservable_accesses_go_through_shared_memory(name, target):
    _, ctx = run_passes(CASES[name]()[0], "infer_layouts", target)
    assert sorted(b.name for b in ctx.scratch_shared) == STAGED.get(name, []), name


def _layout(name, buf, target=SM80):
    _, ctx = run_passes(CASES[name]()[0], "infer_layouts", target)
    return {b.name: lay for b, lay in ctx.layouts.items()}[buf], ctx


def test_a_dim_indexed_by_a_serial_variable_stays_in_each_threads_registers():
    lse, _ = _layout("split_combine", "lse_local")
    assert FA.dims_only_in_values(lse, [0])
    # each thread holds whole columns: every (k, i) of a column i on the same thread
    for i in range(lse.shape[1]):
        assert len({lse.locate(k, i)[0] for k in range(lse.shape[0])}) == 1
    a, _ = _layout("inner_serial_mix", "a_l")
    b, _ = _layout("inner_serial_mix", "b_l")
    assert FA.dims_only_in_values(a, [0]) and FA.dims_only_in_values(b, [0])
    assert b.replication < 128  # b_l keeps its columns spread over the threads


def test_a_fragment_read_outside_parallel_is_held_whole_by_every_thread():
    m, _ = _layout("masked_tiles", "m")
    assert m.replication == 128 and m.num_values == 6


def test_a_shifted_index_lays_the_loop_out_over_the_fragments_elements():
    func = CASES["shifted_store"]()[0]
    k, ctx = run_passes(func, "infer_layouts", SM80)
    loops = nodes(k, ir.For, lambda s: s.kind == "parallel" and
                  s.annotation("loop_iter_map") is not None)
    # the serial split loop was unrolled: s = 1 shifts by 32 rows (s = 0 does not shift)
    offsets = sorted(tuple(lp.annotation("loop_iter_map").offset) for lp in loops)
    assert offsets == [(0, 0), (32, 0)], offsets
    acc = next(lay for b, lay in ctx.layouts.items() if b.name == "acc")
    assert all(lp.annotation("loop_layout") is acc for lp in loops)


def test_a_shifted_store_stays_a_vector_loop():
    """Iterations of the shifted loop whose element lies past the fragment (bi + 16 >= 32:
    the program's `if bi < 16` skips them) take any register: the loop stays one compact
    loop of 8-byte vector stores, as the unshifted one, not unrolled scalar stores."""
    func = CASES["shifted_store_mla"]()[0]
    for target in (SM80, SM90):
        k, _ = run_passes(func, "partition_parallel", target)
        assert not nodes(k, ir.Attr, lambda a: a.key == "partitioned"), target
        stores = [n for n in nodes(k, ir.Evaluate, lambda e: ir.extern_name(e.value) ==
                                   "tl::copy_vec<float2>")]
        assert len(stores) == 2, (target, len(stores))  # one per trip of the split loop


def test_a_fragment_grows_to_the_loop_that_indexes_it():
    func = CASES["grown_fragment"]()[0]  # s = T.alloc_fragment((heads,)) with heads = 4
    frag = next(b for k in nodes(func.body, ir.Kernel) for b in k.allocs if b.name == "s")
    assert frag.shape == (128,)


@pytest.mark.parametrize("name,a,b", [("gemm_sr", "s", "r"), ("gemm_rr", "r", "r"),
                                      ("gemm_rs_transA", "r", "s")])
def test_register_operands_use_the_mma_layouts(name, a, b):
    src = tilelang.lower(CASES[name]()[0], target=SM90)
    # wgmma takes A from registers but B only from shared memory: mma.sync for B in registers
    want = "tl::wgmma_gemm_rs<" if (a, b) == ("r", "s") else f"tl::gemm_{a}{b}<"
    assert want in src
    assert f"tl::gemm_{a}{b}<" in tilelang.lower(CASES[name]()[0], target=SM80)
    B, ctx = _layout(name, "B_l")
    if b == "r":
        (_, part), = ctx.gemm_info.values()
        want = L.mma_b_fragment(32, 64, part[0], part[1], 16)  # (bk, N)
        assert L.fragment_equal(B, want)


def test_transposed_register_operands_are_the_transposed_maps():
    B, ctx = _layout("gemm_rr_bf16_trans", "B_l")
    A, _ = _layout("gemm_rr_bf16_trans", "A_l")
    (_, part), = ctx.gemm_info.values()
    b = L.mma_b_fragment(32, 64, part[0], part[1], 16)  # logical (bk, N); B_l is (N, bk)
    a = L.mma_a_fragment(64, 32, part[0], part[1], 16)  # logical (M, bk); A_l is (bk, M)
    t, v = np.arange(128)[:, None], np.arange(b.num_values)[None, :]
    assert np.array_equal(np.stack(B._coords_array(t, v)), np.stack(b._coords_array(t, v))[::-1])
    assert np.array_equal(np.stack(A._coords_array(t, v)), np.stack(a._coords_array(t, v))[::-1])


def test_staging_is_reported():
    k = tilelang.compile(CASES["staged_row_reads"]()[0], target=SM90)
    assert "acc is read in a T.Parallel loop" in k.get_host_source()


def _coords(frag):
    t, v = np.arange(frag.num_threads)[:, None], np.arange(frag.num_values)[None, :]
    return np.stack([np.broadcast_to(c, (t.size, v.size)) for c in frag._coords_array(t, v)])


@pytest.mark.parametrize("frag", [L.mma_a_fragment(32, 256, 2, 2, 32),
                                  L.mma_a_fragment(64, 64, 2, 2, 16),
                                  L.mma_b_fragment(32, 64, 2, 2, 16)], ids=["tf32", "a16", "b16"])
@pytest.mark.parametrize("period", [2, 4, 8, 32])
def test_a_split_dim_holds_the_same_elements_in_the_same_slots(frag, period):
    split = split_dim(frag, 1, period)
    assert split is not None and split.shape == (frag.shape[0], frag.shape[1] // period, period)
    split.check()
    a, b = _coords(frag), _coords(split)  # same (thread, value) -> the same element
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1] * period + b[2])


def test_a_split_dim_refuses_what_modes_cannot_express():
    # one thread mode walking 3 columns at a time: a period of 4 cuts its moves unevenly
    frag = L.Fragment((2, 12), [(4, (0, 3))], [(2, (1, 0)), (3, (0, 1))])
    assert split_dim(frag, 1, 4) is None
    assert split_dim(frag, 1, 5) is None  # not a divisor of the dim
    assert split_dim(frag, 1, 12) is not None


@pytest.mark.parametrize("name", ["windowed_reads", "windowed_reads_tf32",
                                  "windowed_reads_unrolled"])
def test_a_window_at_a_serial_offset_follows_the_operand_layout(name):
    """x[i, w * n + j]: the loop takes x's layout split at the window, and the partial sums
    its projection (each thread adds the values it holds), not a staged copy of x."""
    x, ctx = _layout(name, "x", SM90)
    part = {b.name: lay for b, lay in ctx.layouts.items()}["part"]
    n = part.shape[1]
    split = split_dim(x, 1, n)
    assert FA.dims_only_in_values(split, [1])
    assert L.fragment_equal(part, split.project([0, 2]))


def test_a_windows_registers_are_indexed_by_one_multiple_of_the_serial_variable():
    src = tilelang.lower(CASES["windowed_reads_tf32"]()[0], target=SM90)
    body = src[src.index("for (int w = 0; w < 32; ++w)"):]
    body = body[:body.index("tl::gemm_rs")]
    # window w of 4 columns is 2 slots per thread (rows g and g + 8 of its column): x[w * 2 + v]
    assert "x[w * 2 + v" in body and "_shared" not in body, body
