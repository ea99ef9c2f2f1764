"""Profiler on CPU-target kernels: generated inputs, reference checks, timing."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.profiler import TensorSupplyType

N = 96


def _add_kernel(op="add", out_idx=(-1,), n=N, dtype="float32"):
    @T.prim_func
    def add(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if op == "add":
                    C[bx * 32 + i] = A[bx * 32 + i] + B[bx * 32 + i]
                else:  # a wrong kernel
                    C[bx * 32 + i] = A[bx * 32 + i] - B[bx * 32 + i]

    return tilelang.compile(add, out_idx=list(out_idx) if out_idx else None, target="cpu")


@pytest.fixture(scope="module")
def good():
    return _add_kernel()


def test_profiler_inputs_on_cpu_follow_supply_type(good):
    prof = good.get_profiler(tensor_supply_type=TensorSupplyType.One)
    assert [p.name for p in prof.params] == ["A", "B", "C"] and prof.result_idx == [2]
    ins = prof._get_inputs()
    assert len(ins) == 2 and all(t.device.type == "cpu" and t.shape == (N,) for t in ins)
    assert all(torch.all(t == 1) for t in ins)
    out = prof.run_once()
    assert torch.all(out == 2)


def test_assert_allclose_accepts_right_and_catches_wrong_kernel(good):
    prof = good.get_profiler(tensor_supply_type=TensorSupplyType.Normal)
    assert prof.assert_allclose(lambda a, b: a + b, rtol=1e-5, atol=1e-5)
    wrong = _add_kernel(op="sub").get_profiler(tensor_supply_type=TensorSupplyType.Normal)
    with pytest.raises(AssertionError, match="kernel output 'C' differs"):
        wrong.assert_allclose(lambda a, b: a + b)


def test_assert_allclose_mismatch_ratio_is_honoured(good):
    prof = good.get_profiler(tensor_supply_type=TensorSupplyType.Randn)

    def ref_with_two_errors(a, b):
        c = a + b
        c[:2] += 100.0
        return c

    with pytest.raises(AssertionError, match="2 > 0"):
        prof.assert_allclose(ref_with_two_errors, max_mismatched_ratio=0.0)
    assert prof.assert_allclose(ref_with_two_errors, max_mismatched_ratio=2 / N)


def test_reference_program_gets_its_own_copies(good):
    prof = good.get_profiler()
    a, b = torch.randn(N), torch.randn(N)
    a0 = a.clone()

    def ref(x, y):
        out = x + y
        x.zero_()  # must not disturb the kernel's inputs
        return out

    prof.assert_allclose(ref, input_tensors=[a, b])
    assert torch.equal(a, a0)


def test_in_place_kernel_without_out_idx():
    kernel = _add_kernel(out_idx=None)
    prof = kernel.get_profiler()
    assert prof.result_idx == []
    # reference returns C: compared with the kernel's last argument
    assert prof.assert_allclose(lambda a, b, c: a + b)

    def ref_in_place(a, b, c):
        c.copy_(a + b)

    assert prof.assert_allclose(ref_in_place)
    with pytest.raises(AssertionError, match="differs"):
        prof.assert_allclose(lambda a, b, c: a * b)


def test_output_count_mismatch_is_reported(good):
    prof = good.get_profiler()
    with pytest.raises(AssertionError, match="returned 1 outputs but the reference program "
                                             "returned 2"):
        prof.assert_allclose(lambda a, b: (a + b, a))


def test_manual_assert_close_and_consistency(good):
    prof = good.get_profiler()
    seen = {}

    def check(lib_outs, ref_outs):
        seen["n"] = (len(lib_outs), len(ref_outs))
        torch.testing.assert_close(lib_outs[0], ref_outs[0])

    prof.manual_assert_close(lambda a, b: a + b, manual_check_prog=check)
    assert seen["n"] == (1, 1)
    prof.assert_consistent(repeat=2)


def test_do_bench_returns_positive_milliseconds(good):
    prof = good.get_profiler()
    ms = prof.do_bench(warmup=1, rep=5)
    assert isinstance(ms, float) and 0 < ms < 10_000
    q = prof.do_bench(n_warmup=1, n_repeat=4, quantiles=[0.5, 0.9])
    assert len(q) == 2 and 0 < q[0] <= q[1]
    # timing another function on the same generated inputs
    ref_ms = prof.do_bench(lambda a, b: a + b, n_repeat=3)
    assert ref_ms > 0


def test_scalar_parameter_needs_explicit_inputs():
    @T.prim_func
    def scale(A: T.Tensor((32,), "float32"), s: T.float32, B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                B[i] = A[i] * s

    kernel = tilelang.compile(scale, out_idx=[-1], target="cpu")
    prof = kernel.get_profiler()
    with pytest.raises(ValueError, match="'s' is a scalar"):
        prof.do_bench()
    a = torch.randn(32)
    assert prof.assert_allclose(lambda x, s: x * s, input_tensors=[a, 0.5])
    assert prof.do_bench(input_tensors=[a, 0.5], n_repeat=2) > 0
