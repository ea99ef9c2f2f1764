"""Fragment properties: check, coords/locate inverse, symbolic = integer, project, spans,
equality, construction from functions, the element-wise default layout."""

import numpy as np
import pytest

import tilelang.layout as L
from tilelang.ir import nodes as ir

from layout_eval import evaluate


def all_fragments():
    frags = []
    rng = np.random.default_rng(1)
    for shape, threads, vec in [((64, 64), 128, 4), ((128, 32), 256, 8), ((16,), 32, 1),
                                ((4, 8, 16), 64, 2), ((6, 3), 128, 1), ((100,), 32, 4),
                                ((33, 17), 64, 2), ((2, 2), 128, 1), ((1, 64), 64, 1)]:
        frags.append(L.elementwise_fragment(shape, threads, vec))
    for _ in range(12):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(x) for x in rng.integers(1, 40, size=ndim))
        frags.append(L.elementwise_fragment(shape, int(rng.choice([32, 64, 128, 256])),
                                            int(rng.choice([1, 2, 4, 8]))))
    for M, N, wm, wn in [(16, 8, 1, 1), (64, 64, 2, 2), (128, 128, 2, 2), (128, 64, 4, 1),
                         (32, 256, 1, 4)]:
        frags.append(L.mma_accumulator(M, N, wm, wn))
        for bits in (8, 16, 32):
            frags.append(L.mma_a_fragment(M, 64, wm, wn, bits))
            frags.append(L.mma_b_fragment(64, N, wm, wn, bits))
    for M, N, g in [(64, 64, 1), (128, 256, 2), (256, 32, 2)]:
        frags.append(L.wgmma_accumulator(M, N, g))
        for bits in (8, 16, 32):
            frags.append(L.wgmma_a_fragment(M, 64, g, bits))
    return frags


FRAGS = all_fragments()


def _ids(f):
    return repr(f)[:60]


@pytest.mark.parametrize("frag", FRAGS, ids=_ids)
def test_check_and_sizes(frag):
    frag.check()
    held = frag.num_values * frag.num_threads // frag.replication
    size = int(np.prod(frag.shape))
    if frag.guard_dims:
        assert held > size
    else:
        assert held == size


@pytest.mark.parametrize("frag", FRAGS, ids=_ids)
def test_coords_locate_inverse(frag):
    table = frag.coord_table()  # (T, V, ndim)
    inb = np.all((table >= 0) & (table < np.array(frag.shape)), axis=-1)
    # every element: locate then coords gives it back, from a representative thread
    idx = np.indices(frag.shape).reshape(frag.ndim, -1)
    t, v = frag.locate(*idx)
    back = np.stack(np.broadcast_arrays(*frag.coords(np.asarray(t), np.asarray(v))), axis=0)
    assert np.array_equal(np.broadcast_to(back, idx.shape), idx)
    rep = frag.is_representative(np.asarray(t))
    assert rep is None or np.all(rep)
    # every in-bounds slot: locate(coords(t, v)) has the same value index and coordinates
    tt, vv = np.nonzero(inb)
    t2, v2 = frag.locate(*table[tt, vv].T)
    assert np.array_equal(np.broadcast_to(v2, vv.shape), vv)
    got = np.stack(np.broadcast_arrays(*frag.coords(np.asarray(t2), vv), vv)[:-1], -1)
    assert np.array_equal(got, table[tt, vv])
    # integer API
    e = tuple(int(x) for x in idx[:, -1])
    ti, vi = frag.locate(*e)
    assert tuple(int(c) for c in frag.coords(ti, vi)) == e


@pytest.mark.parametrize("frag", FRAGS[::3], ids=_ids)
def test_symbolic_coords_equal_integer(frag):
    tx = ir.Var("tx")
    threads = np.arange(frag.num_threads)
    table = frag.coord_table()
    for v in range(frag.num_values):
        cs = frag.coords(tx, v)
        for d, c in enumerate(cs):
            got = np.broadcast_to(evaluate(c, {"tx": threads}), threads.shape)
            assert np.array_equal(got, table[:, v, d]), (v, d, str(c))
        g = frag.guard(tx, v)
        if g is not None:
            want = np.all(table[:, v, :] < np.array(frag.shape), axis=-1)
            assert np.array_equal(np.broadcast_to(evaluate(g, {"tx": threads}), want.shape), want)
    # symbolic locate
    vars_ = [ir.Var(f"i{d}") for d in range(frag.ndim)]
    t, v = frag.locate(*vars_)
    idx = np.indices(frag.shape).reshape(frag.ndim, -1)
    env = {f"i{d}": idx[d] for d in range(frag.ndim)}
    ti, vi = frag.locate(*idx)
    n = idx.shape[1:]
    assert np.array_equal(np.broadcast_to(evaluate(t, env), n), np.broadcast_to(ti, n))
    assert np.array_equal(np.broadcast_to(evaluate(v, env), n), np.broadcast_to(vi, n))


def test_check_rejects_bad_fragments():
    dup = L.Fragment((8,), [(4, 1), (2, 1)], [(2, 4)])  # two modes with stride 1
    with pytest.raises(ValueError, match="held"):
        dup.check()
    hole = L.Fragment((8,), [(4, 1)], [])  # elements 4..7 held by nobody
    with pytest.raises(ValueError, match="held 0 times"):
        hole.check()
    with pytest.raises(ValueError, match="strides"):
        L.Fragment((8, 8), [(4, (1,))], [])
    with pytest.raises(ValueError, match="negative"):
        L.Fragment((8,), [(4, -1)], [])


def test_elementwise_layout_shape():
    f = L.elementwise_fragment((64, 64), 128, 4)
    # thread t, value v: vector element v % 4, rows repeat every 8
    for t in (0, 1, 15, 16, 127):
        for v in (0, 3, 4, 31):
            assert f.coords(t, v) == (t // 16 + 8 * (v // 4), 4 * (t % 16) + v % 4)
    assert f.num_values == 32 and not f.guard_dims
    ragged = L.elementwise_fragment((6, 3), 128)
    assert ragged.guard_dims == (0, 1)
    assert ragged.replication == 4
    assert ragged.in_bounds((5, 2)) is True and ragged.in_bounds((6, 0)) is False
    assert ragged.guard(0, 0) is None  # statically in bounds
    assert ragged.guard(3, 0) is False  # thread 3 -> column 3
    tx = ir.Var("tx")
    assert isinstance(ragged.guard(tx, 0), ir.Expr)
    assert L.elementwise_fragment((64, 64), 128).guard(tx, 0) is None
    assert ragged.is_representative(tx) is not None
    assert L.elementwise_fragment((64, 64), 128).is_representative(tx) is None


def test_project_and_spans_on_accumulator():
    acc = L.mma_accumulator(64, 64, 2, 2)
    rows = acc.project([0])
    rows.check()
    assert rows.shape == (64,) and rows.replication == 4 * 2
    assert rows.num_threads == acc.num_threads
    # each thread holds exactly the rows it held in the accumulator
    ta = acc.coord_table()
    tr = rows.coord_table()
    for t in range(acc.num_threads):
        assert set(ta[t, :, 0].tolist()) == set(tr[t, :, 0].tolist())
    cols = acc.project([1])
    cols.check()
    assert cols.replication == 8 * 2
    # row reduction (along dim 1): lanes differing in q -> xor masks 1 and 2, then warps wn
    plan = acc.shuffle_plan(1)
    assert plan.masks == (1, 2)
    assert [(s.extent, s.index_stride) for s in plan.cross_warp] == [(2, 64)]
    assert [(s.extent, s.index_stride, s.coord_stride) for s in acc.threads_spanning(1)] == \
        [(4, 1, 2), (2, 64, 32)]
    assert [(s.extent, s.coord_stride) for s in acc.values_spanning(1)] == [(2, 1), (4, 8)]
    # column reduction: lanes differing in g -> masks 4, 8, 16, then warps wm
    plan0 = acc.shuffle_plan(0)
    assert plan0.masks == (4, 8, 16)
    assert [(s.extent, s.index_stride) for s in plan0.cross_warp] == [(2, 32)]
    # independent check: lanes of warp 0 sharing a row are exactly lane ^ {0,1,2,3}
    for lane in range(32):
        row = set(ta[lane, :, 0].tolist())
        sharing = {m for m in range(32) if set(ta[m, :, 0].tolist()) == row}
        assert sharing == {lane ^ k for k in range(4)}


def test_project_errors_on_mixed_modes():
    diag = L.Fragment((4, 4), [(4, (1, 1))], [(4, (0, 1))])
    with pytest.raises(ValueError, match="mixes kept and dropped"):
        diag.project([0])


def test_shuffle_plan_straddling_and_non_power_of_two():
    f = L.Fragment((128,), [(128, 1)], [])
    plan = f.shuffle_plan(0)
    assert plan.masks == (1, 2, 4, 8, 16)
    assert [(s.extent, s.index_stride, s.coord_stride) for s in plan.cross_warp] == [(4, 32, 32)]
    g = L.Fragment((3, 8), [(8, (0, 1)), (3, (1, 0))], [])
    with pytest.raises(ValueError, match="power-of-two"):
        L.Fragment((24,), [(3, 1), (8, 3)], []).shuffle_plan(0)
    assert g.shuffle_plan(1).masks == (1, 2, 4)


def test_fragment_equal_examples():
    a = L.Fragment((16,), [(4, 1)], [(4, 4)])
    b = L.Fragment((16,), [(2, 1), (2, 2)], [(2, 4), (2, 8)])
    c = L.Fragment((16,), [(4, 4)], [(4, 1)])
    assert L.fragment_equal(a, b)
    assert not L.fragment_equal(a, c)
    assert L.fragment_equal(a.canonical(), a) and len(b.canonical().thread_modes) == 1
    d = L.Fragment((16,), [(4, 1), (1, 0)], [(1, 0), (4, 4)])  # extent-1 modes are no-ops
    assert L.fragment_equal(a, d)
    assert not L.fragment_equal(a, a.replicate(2))
    # same function, modes that do not coalesce the same way: enumeration decides
    e = L.Fragment((2, 2), [(2, (1, 0))], [(2, (0, 1))])
    f = L.Fragment((2, 2), [(2, (1, 0))], [(2, (0, 1)), (1, (1, 1))])
    assert L.fragment_equal(e, f)
    assert a.is_equal(b) and not a.is_equal(c) and e.is_equal(f)  # the reference's method
    assert not a.is_equal(L.Layout((16,), lambda i: i))  # a Layout is never a Fragment


def test_from_function_reference_style():
    # the mma C layout of one 16x16 tile, written as the reference's thread/index lambdas
    f = L.Fragment((16, 16),
                   forward_thread_fn=lambda i, j: (i % 8) * 4 + (j % 8) // 2,
                   forward_index_fn=lambda i, j: (j // 8) * 4 + (i // 8) * 2 + j % 2)
    assert L.fragment_equal(f, L.mma_accumulator(16, 16, 1, 1))
    # forward_fn form, passed positionally, with replication
    g = L.Fragment((16,), lambda i, rep: (i + 16 * rep, 0), replicate=2)
    g.check()
    assert g.replication == 2 and g.num_threads == 32 and g.num_values == 1
    # list-valued index, scalar-only function (falls back to per-element calls)
    h = L.Fragment.from_function((4, 4), lambda i, j: int(j), lambda i, j: [int(i) // 2,
                                                                            int(i) % 2])
    h.check()
    assert h.coords(3, 2) == (2, 3)
    # extra threads hold copies
    k = L.Fragment.from_function((8,), lambda i: i, lambda i: 0, num_threads=32)
    assert k.replication == 4
    assert "threads=(8,4):(1,0)" in repr(k)


@pytest.mark.parametrize("thread_fn,index_fn,msg", [
    (lambda i, j: i, lambda i, j: 0, "not injective"),
    (lambda i, j: (i + j) % 4, lambda i, j: i, "not separable"),
    (lambda i, j: i * 2, lambda i, j: j, "empty"),
])
def test_from_function_errors(thread_fn, index_fn, msg):
    with pytest.raises(ValueError, match=msg):
        L.Fragment.from_function((4, 4), thread_fn, index_fn)


def test_locate_without_closed_form():
    # a thread mode moving along two dims: no per-dim inverse; integer lookups still work
    f = L.Fragment((4, 4), [(4, (1, 1))], [(4, (0, 1))])  # thread t holds (t, t + v)
    with pytest.raises(ValueError, match="held 0 times"):
        f.check()  # (1, 0) is held by nobody: such mixed modes never tile a rectangle
    with pytest.raises(ValueError, match="closed-form"):
        f.locate(ir.Var("i"), ir.Var("j"))
    assert f.locate(1, 2) == (1, 1)
    with pytest.raises(ValueError, match="no thread"):
        f.locate(3, 0)
    with pytest.raises(ValueError, match="out of range"):
        f.locate(4, 0)


def test_repr_is_cute_like():
    acc = L.mma_accumulator(64, 64, 2, 2)
    assert repr(acc) == ("Fragment(mma_acc64x64: [64, 64], threads=(4,8,2,2):((0,2),(1,0),"
                         "(32,0),(0,32)), values=(2,2,4,2):((0,1),(8,0),(0,8),(16,0)))")


@pytest.mark.parametrize("frag", all_fragments(), ids=repr)
def test_flat_coord_table_is_the_row_major_element_or_minus_one(frag):
    coords = frag.coord_table()
    flat = frag.flat_coord_table()
    assert flat.shape == coords.shape[:2] and not flat.flags.writeable
    inside = np.all([(coords[..., d] >= 0) & (coords[..., d] < n)
                     for d, n in enumerate(frag.shape)], axis=0)
    assert (flat[~inside] == -1).all()
    if inside.any():
        want = np.ravel_multi_index(tuple(coords[inside].T), frag.shape)
        assert np.array_equal(flat[inside], want)
