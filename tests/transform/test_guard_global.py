"""guard_global_accesses: a global load the analyzer cannot prove in bounds reads 0 (or the
T.annotate_safe_value value) outside the tensor, such stores and atomics are skipped, and an
access proved in bounds gets no guard. The guard conditions are checked by evaluating them
for every block, thread and register slot against the tensor's bounds."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.runtime import compile_cuda
from tilelang.transform.guard_global import guard_global_accesses
from tilelang.transform.analysis.numeric import eval_index
from tilelang.transform.pass_config import PassConfigKey

from transform_helpers import (SM80, SM90, externs, nodes, requires_compiler, requires_gpu,
                               run_passes)

SCALAR = {PassConfigKey.TIR_DISABLE_VECTORIZE: True}  # element accesses, easier to read


def _rows_kernel(M, safe=None, shift=0):
    @T.prim_func
    def f(A: T.Tensor((M, 64), "float32"), B: T.Tensor((M, 64), "float32"),
          C: T.Tensor((64,), "float32")):
        with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
            if safe is not None:
                T.annotate_safe_value({A: safe})
            for i, j in T.Parallel(32, 64):
                B[bx * 32 + i, j] = A[bx * 32 + i - shift, 63 - j] + C[j]
    return f


def _grid(k, ctx):
    """Env binding the block index, the thread index and the partitioned loop's value index
    to broadcastable arrays covering all of them."""
    (loop,) = nodes(k, ir.For, lambda s: s.annotation("partitioned"))
    bx, tx = ctx.kernel.block_vars[0], ctx.kernel.thread_vars[0]
    return {bx: np.arange(int(ctx.kernel.grid[0]))[:, None, None],
            tx: np.arange(ctx.num_threads)[None, :, None],
            loop.var: np.arange(loop.extent.value)[None, None, :]}


def _in_bounds(load_or_store, env):
    ok = True
    for i, n in zip(load_or_store.indices, load_or_store.buffer.shape):
        x = eval_index(i, env)
        ok = ok & (x >= 0) & (x < n)
    return ok


def _guarded_loads(k, name):
    return nodes(k, ir.Select, lambda e: isinstance(e.true_value, ir.Load)
                 and e.true_value.buffer.name == name)


def _shape(env):
    return np.broadcast_shapes(*(np.shape(a) for a in env.values()))


@pytest.mark.parametrize("shift", [0, 5])
def test_possibly_out_of_bounds_load_and_store_get_exact_guards(shift):
    k, ctx = run_passes(_rows_kernel(100, shift=shift), "guard_global", SM80, SCALAR)
    env = _grid(k, ctx)
    (sel,) = _guarded_loads(k, "A")
    assert isinstance(sel.false_value, ir.Const) and sel.false_value.value == 0
    # the guard is exactly "inside the tensor" for every block, thread and value
    np.testing.assert_array_equal(np.broadcast_to(eval_index(sel.cond, env), _shape(env)),
                                  np.broadcast_to(_in_bounds(sel.true_value, env),
                                                  _shape(env)))
    (store,) = nodes(k, ir.Store, lambda s: s.buffer.name == "B")
    (guard,) = nodes(k, ir.If, lambda s: s.then_body is store)
    np.testing.assert_array_equal(np.broadcast_to(eval_index(guard.cond, env), _shape(env)),
                                  np.broadcast_to(_in_bounds(store, env), _shape(env)))
    # the column index 63 - j is provably in range: the guards only test rows
    for cond in (sel.cond, guard.cond):
        assert all(v.name != "j" for v in nodes(cond, ir.Var))
        assert not nodes(cond, ir.Binary, lambda e: e.op == "floormod")  # no column terms


def test_provably_in_bounds_accesses_get_no_guard():
    k, _ = run_passes(_rows_kernel(128), "guard_global", SM80, SCALAR)
    assert not nodes(k, ir.Select) and not nodes(k, ir.If)


def test_safe_value_annotation():
    k, _ = run_passes(_rows_kernel(100, safe=-1.0), "guard_global", SM80, SCALAR)
    (sel,) = _guarded_loads(k, "A")
    assert sel.false_value.value == -1.0


def test_disabled_by_pass_config():
    cfg = dict(SCALAR, **{PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True})
    k, _ = run_passes(_rows_kernel(100), "guard_global", SM80, cfg)
    assert not _guarded_loads(k, "A") and not nodes(k, ir.If)


def test_vector_accesses_fall_back_to_guarded_elements():
    """With vectorisation the whole-vector test is the vectoriser's; the element path it falls
    back to is guarded here."""
    k, ctx = run_passes(_rows_kernel(100), "guard_global", SM80)
    assert externs(k, "tl::copy_vec")
    assert _guarded_loads(k, "A")


def _atomics(M, with_result):
    @T.prim_func
    def f(A: T.Tensor((M,), "int32"), B: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                if with_result:
                    old = T.atomic_add(A[i], 1, return_prev=True)
                    B[i] = old
                else:
                    T.atomic_add(A[i], 1)
    return f


def test_atomic_statement_out_of_bounds_is_skipped():
    k, _ = run_passes(_atomics(100, False), "guard_global", SM80)
    (atomic,) = nodes(k, ir.Call, lambda c: c.op == "atomic_add")
    (guard,) = nodes(k, ir.If)
    assert nodes(guard.then_body, ir.Call, lambda c: c is atomic)


def test_atomic_with_a_result_out_of_bounds_is_skipped_and_reads_zero():
    """Regression: an atomic whose previous value is used (a let) was not guarded at all."""
    k, _ = run_passes(_atomics(100, True), "guard_global", SM80)
    (atomic,) = nodes(k, ir.Call, lambda c: c.op == "atomic_add")
    sels = nodes(k, ir.Select, lambda e: e.true_value is atomic)
    assert len(sels) == 1 and sels[0].false_value.value == 0
    src = tilelang.lower(_atomics(100, True), target=SM80)
    assert "((tx < 100) ? tl::atomic_add((&A[tx]), 1) : 0)" in src


def test_in_bounds_atomics_are_left_alone():
    for with_result in (False, True):
        k, _ = run_passes(_atomics(128, with_result), "guard_global", SM80)
        assert not nodes(k, ir.Select) and not nodes(k, ir.If)


def test_cp_async_addresses_are_left_to_their_producer():
    @T.prim_func
    def f(A: T.Tensor((100, 100), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float16")
            T.copy(A[64, 64], S)
            T.copy(S, B)

    before, ctx = run_passes(f, "widen_indices", SM80)
    after = guard_global_accesses(before, ctx)
    cp_async = lambda k: [c for c in nodes(k, ir.Call, lambda c: c.op == "call_extern")
                          if c.args[0].startswith("tl::cp_async_zfill")]
    assert cp_async(before)
    assert all(a is b for a, b in zip(cp_async(before), cp_async(after)))


@requires_compiler
def test_guarded_kernels_compile():
    compile_cuda(tilelang.lower(_atomics(100, True), target=SM90), "sm_90a", name="atomics")
    compile_cuda(tilelang.lower(_rows_kernel(100, shift=5), target=SM90), "sm_90a",
                 name="rows")


@requires_gpu
def test_guarded_kernels_match_the_interpreter():
    import torch

    for make, args in ((lambda: _rows_kernel(100, safe=-1.0, shift=5),
                        lambda: [torch.randn(100, 64), torch.zeros(100, 64), torch.randn(64)]),
                       (lambda: _atomics(100, True),
                        lambda: [torch.arange(100, dtype=torch.int32),
                                 torch.full((128,), 7, dtype=torch.int32)])):
        cpu = [a.clone() for a in args()]
        gpu = [a.cuda() for a in cpu]
        tilelang.compile(make(), target="cpu")(*cpu)
        tilelang.compile(make(), target="cuda")(*gpu)
        for a, b in zip(cpu, gpu):
            np.testing.assert_allclose(a.numpy(), b.cpu().numpy(), rtol=1e-6)
