"""Tensor supply rules and the free do_bench function (CPU wall clock)."""

import time
import warnings

import pytest
import torch

import tilelang
from tilelang.ir.dtype import DType
from tilelang.profiler import KernelParam, TensorSupplyType, do_bench, make_tensor
from tilelang.profiler.bench import summarize


def _param(dtype, shape=(64, 33), name="A"):
    dt = DType(dtype)
    return KernelParam(name, dt.torch, list(shape), dt)


CPU = torch.device("cpu")


def test_tensor_supply_type_is_exported_at_top_level():
    assert tilelang.TensorSupplyType is TensorSupplyType
    assert [m.name for m in TensorSupplyType] == [
        "Integer", "Uniform", "Normal", "Randn", "Zero", "One", "Auto"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_auto_floats_are_uniform_minus_one_to_one(dtype):
    t = make_tensor(_param(dtype, (256, 64)), TensorSupplyType.Auto, CPU)
    assert t.dtype == DType(dtype).torch and t.shape == (256, 64) and t.device == CPU
    assert t.float().min() >= -1.0 and t.float().max() <= 1.0
    assert t.float().std() > 0.4  # not constant


@pytest.mark.parametrize("dtype,lo,hi", [("int32", -2, 2), ("int8", -2, 2), ("uint8", 0, 2),
                                         ("float64", -2, 2)])
def test_auto_ints_are_small(dtype, lo, hi):
    t = make_tensor(_param(dtype, (4096,)), TensorSupplyType.Auto, CPU)
    assert int(t.min()) == lo and int(t.max()) == hi
    assert torch.equal(t, t.round())


def test_auto_bool_and_fp8():
    b = make_tensor(_param("bool", (1000,)), TensorSupplyType.Auto, CPU)
    assert b.dtype == torch.bool and 0 < int(b.sum()) < 1000
    f8 = make_tensor(_param("float8_e4m3", (1000,)), TensorSupplyType.Auto, CPU)
    assert f8.dtype == torch.float8_e4m3fn


def test_other_supply_types():
    p = _param("float32", (20000,))
    assert torch.all(make_tensor(p, TensorSupplyType.Zero, CPU) == 0)
    assert torch.all(make_tensor(p, TensorSupplyType.One, CPU) == 1)
    integer = make_tensor(p, TensorSupplyType.Integer, CPU)
    assert torch.equal(integer, integer.round()) and integer.min() == -2 and integer.max() == 2
    uniform = make_tensor(p, TensorSupplyType.Uniform, CPU)
    assert uniform.min() >= -1 and uniform.max() <= 1
    normal = make_tensor(p, TensorSupplyType.Normal, CPU)  # mean -1, std 1 (reference)
    assert abs(normal.mean().item() + 1.0) < 0.05 and abs(normal.std().item() - 1.0) < 0.05
    randn = make_tensor(p, TensorSupplyType.Randn, CPU)
    assert abs(randn.mean().item()) < 0.05 and abs(randn.std().item() - 1.0) < 0.05
    ones = make_tensor(_param("int8", (10,)), TensorSupplyType.Normal, CPU)
    assert torch.all(ones == 1)


def test_supply_rejects_dynamic_shapes_and_scalars():
    from tilelang.ir import nodes as ir

    m = ir.Var("m", DType("int32"))
    p = KernelParam("A", torch.float32, [m, 4], DType("float32"))
    with pytest.raises(ValueError, match="static shape"):
        make_tensor(p, TensorSupplyType.Auto, CPU)
    s = KernelParam("scale", torch.float32, [], DType("float32"), is_scalar_param=True)
    with pytest.raises(ValueError, match="scalar"):
        make_tensor(s, TensorSupplyType.Auto, CPU)


def test_do_bench_wall_clock_measures_the_calls(monkeypatch):
    """On the CPU do_bench reads time.perf_counter around each call. A fake clock that only the
    timed function advances makes the result exact, however loaded the machine is."""
    from tilelang.profiler import bench

    class Clock:
        now = 0.0

        def perf_counter(self):
            return self.now

    clock = Clock()
    monkeypatch.setattr(bench, "time", clock)
    # powers of two, so every difference of clock readings is exact: a slower first call of
    # 3.90625 ms, then 1.953125 ms per call
    durations = iter([2.0 ** -8] + [2.0 ** -9] * 200)

    def call():
        clock.now += next(durations)

    ms = do_bench(call, warmup=10, rep=20, device="cpu")
    assert ms == 1.953125
    # the counts come from the first call: 10 ms / 3.9 -> 2 warm-up calls (one of them that
    # first call), 20 ms / 3.9 -> 5 timed calls
    assert len(list(durations)) == 200 - 1 - 5


def test_do_bench_counts_and_modes():
    """CPU timing (device="cpu" also on GPU machines): the call counts are exact."""
    calls = []
    do_bench(lambda: calls.append(1), _n_warmup=3, _n_repeat=7, device="cpu")
    assert len(calls) == 1 + 3 + 7  # one settling call, warm-up, timed calls
    calls.clear()
    do_bench(lambda: calls.append(1), warmup=0, rep=0, device="cpu")
    assert len(calls) == 3  # settle, at least one warm-up, at least one timed call
    times = do_bench(lambda: None, _n_repeat=5, return_mode="all")
    assert isinstance(times, list) and len(times) == 5 and all(t >= 0 for t in times)
    q = do_bench(lambda: time.sleep(0.001), _n_repeat=5, quantiles=[0.2, 0.5, 0.8])
    assert len(q) == 3 and q[0] <= q[1] <= q[2]
    one = do_bench(lambda: None, _n_repeat=3, quantiles=[0.5])
    assert isinstance(one, float)
    with pytest.raises(ValueError, match="return_mode"):
        do_bench(lambda: None, return_mode="avg")
    with pytest.raises(ValueError, match="backend"):
        do_bench(lambda: None, backend="nsight")


def test_summarize_statistics():
    assert summarize([1, 2, 3, 10]) == 4.0
    assert summarize([1, 2, 3, 10], return_mode="median") == 2.5
    assert summarize([1, 2, 3, 10], return_mode="min") == 1.0
    assert summarize([1, 2, 3, 10], return_mode="max") == 10.0


def test_do_bench_early_stop_returns_estimate():
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.01)

    ms = do_bench(slow, warmup=100, rep=1000, early_stop_baseline=1.0, device="cpu")
    assert len(calls) == 1 and ms >= 9


def test_cpu_device_times_by_wall_clock_for_every_backend():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for backend in ("event", "cupti", "cudagraph"):
            ms = do_bench(lambda: time.sleep(0.001), backend=backend, _n_repeat=3, device="cpu")
            assert ms >= 0.9
