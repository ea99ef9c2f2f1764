"""transform/reducer_fragments.py: reducers updated from T.Parallel loops become register
partials combined once at T.finalize_reducer (no atomics); other reducers keep shared memory
and atomics. The interpreter (which runs the traced, atomic form) is checked against numpy in
both of the reference's forms, sum / max / min, ragged sizes."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tilelang
from tilelang.ir import nodes as ir
from tilelang.runtime import compile_cuda

from transform_helpers import SM80, SM90, requires_compiler, run_passes

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu import reducer_kernels as R  # noqa: E402

REF = {"sum": lambda a: a.sum(1), "max": lambda a: a.max(1), "min": lambda a: a.min(1)}


def _kernel_body(src: str) -> str:
    return src[src.index("threadIdx"):]


# ---- the interpreter against numpy ------------------------------------------------------------

@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("M,N", [(64, 64), (100, 200), (37, 75)])
def test_legacy_form_on_the_interpreter(op, M, N):
    rng = np.random.default_rng(M * N)
    a = torch.from_numpy(rng.standard_normal((M, N))).half()
    x = torch.from_numpy(rng.standard_normal(N)).half()
    o = torch.full((M,), float("nan"))
    tilelang.compile(R.gemv_legacy(M, N, op=op), target="cpu")(a, x, o)
    prod = (a * x).float().numpy()
    np.testing.assert_allclose(o.numpy(), REF[op](prod), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op,start", [("sum", None), ("sum", 5.0), ("max", None),
                                      ("max", 1.5), ("min", None), ("min", -0.5)])
@pytest.mark.parametrize("M,N", [(32, 128), (70, 300)])
def test_v2_form_on_the_interpreter(op, start, M, N):
    A = torch.from_numpy(np.random.default_rng(N).standard_normal((M, N)).astype(np.float32))
    o = torch.full((M,), float("nan"))
    tilelang.compile(R.rows_v2(M, N, op=op, start=start), target="cpu")(A, o)
    want = REF[op](A.numpy())
    if start is not None:
        want = {"sum": want + start, "max": np.maximum(want, start),
                "min": np.minimum(want, start)}[op]
    np.testing.assert_allclose(o.numpy(), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_two_update_sites_count_each_contribution_once(op):
    A = torch.arange(1, 9, dtype=torch.float32)
    B = torch.arange(1, 17, dtype=torch.float32) * -0.5
    o = torch.full((1,), float("nan"))
    tilelang.compile(R.total_two_sites(8, 16, op=op), target="cpu")(A, B, o)
    both = torch.cat([A, B]).numpy()
    assert o.item() == {"sum": both.sum(), "max": both.max(), "min": both.min()}[op]


def test_block_level_contributions_on_the_interpreter():
    A = torch.randn(64)
    o = torch.full((1,), float("nan"))
    tilelang.compile(R.per_thread_sum(64), target="cpu")(A, o)
    np.testing.assert_allclose(o.item(), A.sum().item(), rtol=1e-5)


# ---- the CUDA form ----------------------------------------------------------------------------

def test_gemv_reducer_is_register_partials():
    kernel, ctx = run_passes(R.gemv_legacy(128, 256, block_M=128, block_N=128, threads=256),
                             "infer_layouts", target=SM90)
    (partial, op), = ctx.reducer_partials.items()
    assert op == "add" and partial.scope == "local.fragment"
    layout = ctx.layouts[partial]
    # 16 threads share a row of the 128x128 tile: 16 copies, 8 rows per thread
    assert layout.replication == 16 and layout.num_values == 8
    assert layout.replica_plan().masks == (1, 2, 4, 8)
    assert not layout.replica_plan().cross_warp


@pytest.mark.parametrize("target", [SM90, SM80])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_no_atomics_and_one_combine(target, op):
    src = _kernel_body(tilelang.lower(R.gemv_legacy(200, 264, block_M=128, block_N=128,
                                                    threads=256, op=op), target=target))
    assert "atomic" not in src
    loop = src.index("for (int bn")
    first_shuffle = src.index("shfl_xor")
    assert first_shuffle > loop  # the combine comes after the main loop
    assert src.count("shfl_xor") == 4  # one butterfly over the 16 threads of a row
    assert "__syncthreads" not in src[first_shuffle:]  # the copies are all in one warp


@requires_compiler
@pytest.mark.parametrize("target,arch", [(SM90, "sm_90a"), (SM80, "sm_80")])
@pytest.mark.parametrize("make", [
    lambda: R.gemv_legacy(200, 264, block_M=128, block_N=128, threads=256),
    lambda: R.gemv_legacy(100, 200, op="max", pipelined=False),
    lambda: R.rows_v2(70, 300, op="sum", start=5.0),
    lambda: R.rows_v2(70, 300, op="min"),
    lambda: R.total_two_sites(8, 16),
    lambda: R.per_thread_sum(64),
], ids=["gemv", "gemv-max", "v2-seeded", "v2-min", "two-sites", "per-thread"])
def test_builds(make, target, arch):
    compile_cuda(tilelang.lower(make(), target=target), arch)


def test_a_replicated_loop_contributes_from_one_thread_per_iteration():
    src = _kernel_body(tilelang.lower(R.total_two_sites(8, 16), target=SM90))
    assert "atomic" not in src
    # 8 and 16 iterations over 128 threads: each runs on several threads, one adds
    assert src.count("if ((tx >> 1) == 0)") == 1 and src.count("if ((tx >> 2) == 0)") == 1
    # one element held by all 128 threads: a warp butterfly, then across the 4 warps
    assert src.count("shfl_xor") == 5 and "acc_partials" in src


def test_a_sum_start_value_is_added_once_after_the_combine():
    src = _kernel_body(tilelang.lower(R.rows_v2(70, 300, op="sum", start=5.0), target=SM90))
    assert "acc_start" in src and "atomic" not in src
    last_shuffle = src.rindex("shfl_xor")
    assert src.index("acc_start[", last_shuffle) > last_shuffle
    plain = _kernel_body(tilelang.lower(R.rows_v2(70, 300, op="max", start=5.0),
                                        target=SM90))
    assert "acc_start" not in plain  # max and min may start every copy at the value


def test_block_level_contributions_keep_shared_atomics():
    kernel, ctx = run_passes(R.per_thread_sum(64), "reducer_fragments", target=SM90)
    assert not ctx.reducer_partials
    assert any("shared memory with atomic" in n for n in ctx.notes)
    src = _kernel_body(tilelang.lower(R.per_thread_sum(64), target=SM90))
    assert "atomic_add" in src and "shfl_xor" not in src


def _shared_form_row_sums(func):
    """`func` (A (64, 64) -> o = row sums of A) keeps the shared form and, on the
    interpreter, gives the row sums."""
    _, ctx = run_passes(func, "reducer_fragments", target=SM90)
    assert not ctx.reducer_partials
    A = torch.randn(64, 64)
    o = torch.full((64,), float("nan"))
    tilelang.compile(func, target="cpu")(A, o)
    np.testing.assert_allclose(o.numpy(), A.sum(1).numpy(), rtol=1e-5, atol=1e-5)


def test_reading_the_running_total_keeps_shared_atomics():
    import tilelang.language as T

    @T.prim_func
    def running(A: T.Tensor((64, 64), "float32"), o: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            r = T.alloc_reducer((64,), "float32", replication="all")
            T.clear(r)
            for i, j in T.Parallel(64, 64):
                r[i] += A[i, j]
            for i in T.Parallel(64):
                o[i] = r[i]  # before the finalize: the running total
            T.finalize_reducer(r)

    _shared_form_row_sums(running)


def test_force_baseline_keeps_shared_atomics():
    src = _kernel_body(tilelang.lower(R.gemv_legacy(100, 200), target=SM90, pass_configs={
        "tl.reducer_force_baseline": True}))
    assert "atomic_add" in src and "shfl_xor" not in src


def test_update_markers_do_not_survive():
    kernel, _ = run_passes(R.gemv_legacy(100, 200), "partition_parallel", target=SM90)
    from tilelang.ir.visitor import collect

    assert not collect(kernel.body, lambda n: isinstance(n, ir.Attr) and n.key in (
        "reducer_update", "reducer_finalize"))


def test_contributions_of_some_threads_keep_shared_atomics():
    import tilelang.language as T

    @T.prim_func
    def half_block(A: T.Tensor((64, 64), "float32"), o: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            r = T.alloc_reducer((64,), "float32", replication="all")
            T.clear(r)
            if tx < 64:
                for i, j in T.Parallel(64, 64):
                    r[i] += A[i, j]
            T.finalize_reducer(r)
            T.copy(r, o)

    _shared_form_row_sums(half_block)


# ---- bitwise reducers (bitand / bitor / bitxor, integer dtypes) ------------------------------

BITWISE = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}


def _bitwise_rows(op, a, start=None):
    want = BITWISE[op].reduce(a, axis=1)
    return want if start is None else BITWISE[op](want, start)


@pytest.mark.parametrize("op", sorted(BITWISE))
@pytest.mark.parametrize("start", [None, 0x5A5A5A5A])
@pytest.mark.parametrize("M,N", [(32, 128), (70, 300)])
def test_bitwise_v2_on_the_interpreter(op, start, M, N):
    a = np.random.default_rng(M + N).integers(0, 2**31 - 1, (M, N), dtype=np.int32)
    o = torch.full((M,), -7, dtype=torch.int32)
    tilelang.compile(R.rows_v2(M, N, op=op, start=start, dtype="int32"), target="cpu")(
        torch.from_numpy(a), o)
    np.testing.assert_array_equal(o.numpy(), _bitwise_rows(op, a, start))


@pytest.mark.parametrize("op", sorted(BITWISE))
def test_bitwise_partials_combine_with_their_op(op):
    src = _kernel_body(tilelang.lower(R.rows_v2(70, 300, op=op, start=3, dtype="int32"),
                                      target=SM90))
    assert "atomic" not in src and "shfl_xor" in src
    sign = {"bitand": "&", "bitor": "|", "bitxor": "^"}[op]
    assert f" {sign} " in src[src.index("shfl_xor"):]
    # only xor counts a start value once per copy: it is kept aside and combined once
    assert ("acc_start" in src) == (op == "bitxor")


@pytest.mark.parametrize("op", sorted(BITWISE))
def test_bitwise_shared_form_uses_its_atomic(op):
    src = _kernel_body(tilelang.lower(R.rows_v2(70, 300, op=op, dtype="int32"), target=SM90,
                                      pass_configs={"tl.reducer_force_baseline": True}))
    assert f"tl::atomic_{op[3:]}(" in src and "shfl_xor" not in src


@requires_compiler
@pytest.mark.parametrize("op", sorted(BITWISE))
@pytest.mark.parametrize("baseline", [False, True], ids=["partials", "atomics"])
@pytest.mark.parametrize("target,arch", [(SM90, "sm_90a"), (SM80, "sm_80")])
def test_bitwise_builds(op, baseline, target, arch):
    compile_cuda(tilelang.lower(R.rows_v2(70, 300, op=op, start=3, dtype="int32"),
                                target=target,
                                pass_configs={"tl.reducer_force_baseline": baseline}), arch)
