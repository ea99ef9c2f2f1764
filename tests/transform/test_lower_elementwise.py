"""lower_elementwise_tile_ops: T.fill, tile atomics and every T.copy except global->shared
become T.Parallel nests over the non-unit extents (per-thread loops for thread-private
buffers), tagged ("from_tile_op", name); global->shared copies stay for the pipeliner."""

import numpy as np
import torch

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.transform.lower_elementwise import lower_elementwise_tile_ops

from transform_helpers import SM80, kernel_of, nodes, run_passes, show


def _kernel():
    @T.prim_func
    def f(A: T.Tensor((4, 64), "float16"), B: T.Tensor((4, 64), "float32"),
          C: T.Tensor((64,), "float32")):
        with T.Kernel(4, threads=64) as bx:
            S = T.alloc_shared((1, 64), "float16")
            F = T.alloc_fragment((64,), "float32")
            L = T.alloc_local((8,), "float32")
            T.copy(A[bx, 0:64], S)          # global -> shared: kept
            T.fill(F, 1.5)
            T.fill(L, 0)
            T.copy(S[0, 0:64], F)           # shared -> fragment, with a cast
            T.copy(F, B[bx, 0:64])          # fragment -> global, unit row extent
            T.atomic_add(C[0:64], F)
    return f


def _lowered():
    return lower_elementwise_tile_ops(kernel_of(_kernel()).body)


def _nest(loop):
    """(vars, extents, innermost body) of a loop nest of one kind."""
    vars_, extents = [], []
    kind = loop.kind
    while isinstance(loop, ir.For) and loop.kind == kind:
        vars_.append(loop.var)
        extents.append(loop.extent.value)
        loop = loop.body
    return vars_, extents, loop


def _outer_loops(body):
    """The statements of the kernel body that are loops, in order (through allocations)."""
    out = []

    def walk(s):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                walk(x)
        elif isinstance(s, (ir.Allocate, ir.LetStmt)):
            walk(s.body)
        elif isinstance(s, ir.For):
            out.append(s)

    walk(body)
    return out


def test_only_global_to_shared_copies_remain_as_tile_ops():
    body = _lowered()
    assert not nodes(body, (ir.Fill, ir.AtomicTile)), show(body)
    (copy,) = nodes(body, ir.Copy)
    assert copy.src.buffer.name == "A" and copy.dst.buffer.name == "S"


def test_each_tile_op_is_one_tagged_nest_over_its_non_unit_extents():
    loops = _outer_loops(_lowered())
    tags = [(s.kind, s.annotation("from_tile_op")) for s in loops]
    assert tags == [("parallel", "fill"), ("unroll", "fill"), ("parallel", "copy"),
                    ("parallel", "copy"), ("parallel", "atomic")], show(_lowered())
    for loop in loops:
        vars_, extents, inner = _nest(loop)
        # (1, 64) regions: one loop over 64, the unit dim indexed by its start
        assert extents == ([8] if loop.kind == "unroll" else [64])


def test_copy_body_indexes_both_regions_and_casts_per_element():
    loops = _outer_loops(_lowered())
    (v,), _, store = _nest(loops[2])  # S[0, i] -> F[i]
    assert store.buffer.name == "F" and store.indices == (v,)
    assert isinstance(store.value, ir.Cast) and store.value.dtype == ir.DType("float32")
    load = store.value.value
    assert load.buffer.name == "S" and load.indices[0].value == 0 and load.indices[1] is v
    (v,), _, store = _nest(loops[3])  # F[i] -> B[bx, i]
    assert store.buffer.name == "B"
    assert store.indices[0].name == "bx" and store.indices[1] is v
    assert isinstance(store.value, ir.Load) and store.value.buffer.name == "F"


def test_tile_atomic_is_an_element_atomic_per_iteration():
    loops = _outer_loops(_lowered())
    (v,), _, stmt = _nest(loops[4])
    assert isinstance(stmt, ir.Evaluate) and stmt.value.op == "atomic_add"
    target, value = stmt.value.args[:2]
    assert target.buffer.name == "C" and target.indices == (v,)
    assert value.buffer.name == "F" and value.indices == (v,)


def test_a_kernel_without_tile_ops_is_unchanged():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                A[i] = A[i] + 1.0

    body = kernel_of(f).body
    assert lower_elementwise_tile_ops(body) is body


def test_later_passes_see_a_partitioned_loop_not_a_tile_op():
    """After the whole pipeline the fill of the fragment is a per-thread register loop and the
    shared->fragment copy reads shared memory at the thread's elements."""
    k, _ = run_passes(_kernel(), "simplify", SM80)
    assert not nodes(k, (ir.Fill, ir.Copy, ir.AtomicTile))
    assert not nodes(k, ir.For, lambda s: s.kind == "parallel")


def test_lowered_semantics_match_numpy_on_the_interpreter():
    """The same program on the interpreter (the executable semantics of the tile ops)."""
    f = _kernel()
    kernel = tilelang.compile(f, target="cpu")
    rng = np.random.default_rng(0)
    A = torch.tensor(rng.standard_normal((4, 64)), dtype=torch.float16)
    B = torch.zeros((4, 64), dtype=torch.float32)
    C = torch.tensor(rng.standard_normal(64), dtype=torch.float32)
    C0 = C.clone()
    kernel(A, B, C)
    np.testing.assert_array_equal(B.numpy(), A.float().numpy())
    np.testing.assert_allclose(C.numpy(), C0.numpy() + A.float().sum(0).numpy(), rtol=1e-5,
                               atol=1e-5)
