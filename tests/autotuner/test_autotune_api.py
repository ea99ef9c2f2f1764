"""The autotuner's reference API beyond the basics: the cache key's rules, early stopping,
per-configuration pass_configs, scalar inputs, explicit configurations (including `T.const`
names of kernel-style functions), and `T.Var`."""

import inspect
from dataclasses import replace

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.autotuner import AutoTuner, set_autotune_inputs
from tilelang.autotuner.param import CompileArgs, ProfileArgs
from tilelang.profiler import Profiler

FAST = dict(warmup=0.1, rep=0.5)



def scale_factory(built, **jit_options):
    @tilelang.jit(out_idx=[-1], target="cpu", **jit_options)
    def axpy(n, block=32):
        built.append(block)

        @T.prim_func
        def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32),
                 C: T.Tensor((n,), T.float32)):
            with T.Kernel(n // block, threads=32) as bx:
                for i in T.Parallel(block):
                    C[bx * block + i] = A[bx * block + i] * 2 + B[bx * block + i]

        return main

    return axpy


# ---- the cache key ------------------------------------------------------------------------------

def _key(compile_args=None, profile_args=None):
    def factory(block=128):
        return block

    tuner = AutoTuner(factory, configs=[{"block": 128}])
    tuner.compile_args = compile_args or CompileArgs()
    tuner.profile_args = profile_args or ProfileArgs()
    return tuner.generate_cache_key(inspect.signature(factory).parameters, {})


def test_cache_key_covers_outputs_and_validation_options():
    base = _key()
    assert base is not None and base == _key()
    assert _key(compile_args=CompileArgs(out_idx=[1])) != _key(compile_args=CompileArgs(out_idx=[0]))
    for change in (dict(skip_check=True), dict(cache_input_tensors=True), dict(atol=0.5),
                   dict(supply_type=tilelang.TensorSupplyType.Integer)):
        assert _key(profile_args=replace(ProfileArgs(), **change)) != base, change


@pytest.mark.parametrize("field", ["ref_prog", "supply_prog", "manual_check_prog"])
def test_user_functions_disable_the_cache_key(field):
    assert _key(profile_args=ProfileArgs(**{field: lambda *a: a})) is None


def test_a_tuning_checked_by_ref_prog_is_not_stored(isolated_cache):
    tilelang.autotune(configs=[{"block": 16}, {"block": 32}], ref_prog=lambda a, b: 2 * a + b,
                      **FAST)(scale_factory([]))(64)
    assert not (isolated_cache / "autotune").exists()
    assert not AutoTuner._memory_cache
    tilelang.autotune(configs=[{"block": 16}, {"block": 32}], **FAST)(scale_factory([]))(64)
    assert len(list((isolated_cache / "autotune").glob("*.json"))) == 1


# ---- early stop ---------------------------------------------------------------------------------

def _record_baselines(monkeypatch, latencies):
    """Profiler.do_bench replaced: returns `latencies[block]` and records the early-stop
    baseline each configuration was timed with."""
    seen = []

    def fake(self, func=None, *args, early_stop_baseline=None, **kwargs):
        if func is not None:  # the reference program
            return 1.0
        block = self.kernel.prim_func.params[0].shape[0] // 4
        seen.append((block, early_stop_baseline))
        return latencies[block]

    monkeypatch.setattr(Profiler, "do_bench", fake)
    return seen


def test_early_stop_times_later_configs_against_the_best_so_far(monkeypatch):
    import tilelang.autotuner.tuner as tuner_mod

    monkeypatch.setattr(tuner_mod, "FINALISTS", 0)
    monkeypatch.setenv("TILELANG_AUTO_TUNING_DISABLE_CACHE", "1")  # each run() tunes
    seen = _record_baselines(monkeypatch, {16: 2.0, 32: 5.0, 64: 1.0})

    def factory(block=None):
        n = block * 4

        @T.prim_func
        def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
            with T.Kernel(4, threads=32) as bx:
                for i in T.Parallel(block):
                    B[bx * block + i] = A[bx * block + i]

        return main

    def tune(**run_args):
        seen.clear()
        AutoTuner._memory_cache.clear()
        tuner = (AutoTuner.from_kernel(factory, [{"block": b} for b in (16, 32, 64)])
                 .set_compile_args(out_idx=[-1], target="cpu").set_profile_args(**FAST))
        tuner._compile_all = lambda records: _compile_in_order(tuner, records)
        return tuner.run(**run_args)

    result = tune(early_stop=True, early_stop_factor=1.5)
    assert seen == [(16, None), (32, 3.0), (64, 3.0)] and result.config == {"block": 64}
    tune()
    assert [b for _, b in seen] == [None, None, None]  # off by default, as in the reference
    with pytest.raises(ValueError, match="early_stop_factor must be >= 1.0"):
        tune(early_stop=True, early_stop_factor=0.5)


def _compile_in_order(tuner, records):
    for r in records:
        r.kernel, r.status = tuner._compile_one(r.config), "compiled"


def test_do_bench_returns_the_estimate_above_the_baseline():
    from tilelang.profiler.bench import do_bench

    calls = []
    do_bench(lambda: calls.append(1), early_stop_baseline=-1.0, device="cpu")
    assert len(calls) == 1
    calls.clear()
    do_bench(lambda: calls.append(1), _n_warmup=2, _n_repeat=3, device="cpu")
    assert len(calls) == 1 + 2 + 3


def test_decorator_passes_early_stop_on(monkeypatch):
    seen = []
    real_run = AutoTuner.run

    def run(self, *a, **kw):
        seen.append((kw.get("early_stop"), kw.get("early_stop_factor")))
        return real_run(self, *a, **kw)

    monkeypatch.setattr(AutoTuner, "run", run)
    tilelang.autotune(configs=[{"block": 32}], early_stop=True, early_stop_factor=1.25,
                      **FAST)(scale_factory([]))(64)
    assert seen == [(True, 1.25)]
    with pytest.raises(ValueError, match="early_stop_factor"):
        tilelang.autotune(configs=[{"block": 32}], early_stop=True, early_stop_factor=0.9)(
            scale_factory([]))


def test_run_accepts_the_reference_scheduling_options():
    def factory(block=None):
        return scale_factory([]).func(64, block)

    tuner = (AutoTuner.from_kernel(factory, [{"block": 32}])
             .set_compile_args(out_idx=[-1], target="cpu").set_profile_args(**FAST))
    assert tuner.run(use_pipeline=True, benchmark_multi_gpu=False).config == {"block": 32}
    with pytest.raises(TypeError, match="unexpected keyword"):
        tuner.run(no_such_option=1)


# ---- per-configuration pass_configs --------------------------------------------------------------

KEY = tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED


def test_pass_configs_of_one_configuration_apply_to_it_only():
    configs = [{"block": 16, "pass_configs": {KEY: True}}, {"block": 32}]
    compiled = []

    def factory(block=None):
        return scale_factory([]).func(64, block)

    tuner = (AutoTuner.from_kernel(factory, configs)
             .set_compile_args(out_idx=[-1], target="cpu",
                               pass_configs={tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True})
             .set_profile_args(**FAST))
    real = tuner._compile_one

    def spy(config):
        kernel = real(config)
        compiled.append((config.get("block"), kernel.options["pass_configs"]))
        return kernel

    tuner._compile_one = spy
    result = tuner.run()
    by_block = dict(compiled)
    assert by_block[16].get(KEY) is True and len(by_block[16]) == 2  # merged over the global
    assert KEY not in by_block[32] and len(by_block[32]) == 1
    assert result.config["block"] in (16, 32)


def test_decorator_pass_configs_merge_over_the_jit_options():
    tuned = tilelang.autotune(configs=[{"block": 16, "pass_configs": {KEY: True}}], **FAST)(
        scale_factory([], pass_configs={tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True}))
    kernel = tuned(64, __return_kernel=True)
    assert kernel.options["pass_configs"].get(KEY) is True
    assert len(kernel.options["pass_configs"]) == 2
    a, b = torch.randn(64), torch.randn(64)
    torch.testing.assert_close(kernel(a, b), 2 * a + b)


# ---- scalar inputs --------------------------------------------------------------------------------

def add_scalar_factory():
    @tilelang.autotune(configs=[{"block": 16}, {"block": 32}], **FAST)
    @tilelang.jit(target="cpu")
    def add_scalar(n=64, block=16):
        @T.prim_func
        def main(A: T.Tensor((n,), T.float32), s: T.float32):
            with T.Kernel(n // block, threads=32) as bx:
                for i in T.Parallel(block):
                    A[bx * block + i] += s

        return main

    return add_scalar


def test_scalar_inputs_need_given_inputs():
    with pytest.raises(ValueError, match="set_autotune_inputs") as info:
        add_scalar_factory()()
    assert "'s'" in str(info.value)


def test_scalar_inputs_from_set_autotune_inputs():
    tuned = add_scalar_factory()
    with set_autotune_inputs(torch.zeros(64), 0.5):
        kernel = tuned()
    a = torch.randn(64)
    before = a.clone()
    kernel(a, 0.25)
    torch.testing.assert_close(a, before + 0.25)


# ---- explicit configurations ---------------------------------------------------------------------

def test_explicit_configuration_with_t_const_names_compiles_it_only(capsys):
    traced = []

    @tilelang.autotune(configs=[{"block": 16}, {"block": 32}], **FAST)
    @tilelang.jit(target="cpu")
    def scale(A, block: int = 64):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        traced.append(block)
        B = T.empty((N,), T.float32)
        with T.Kernel(N // block, threads=32) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 3
        return B

    kernel = scale.compile(N=128, block=32)  # N is a T.const name, block a tuned parameter
    assert set(traced) == {32}
    assert "configurations" not in capsys.readouterr().out
    a = torch.randn(128)
    torch.testing.assert_close(kernel(a), a * 3)

    tuned = scale.compile(N=128)  # no tuned parameter given: every configuration is tried
    assert "2 configurations, 2 ok" in capsys.readouterr().out
    assert set(traced) == {16, 32} and tuned.config in ({"block": 16}, {"block": 32})


def test_explicit_configuration_by_position():
    built = []
    tuned = tilelang.autotune(configs=[{"block": 16}, {"block": 32}], **FAST)(
        scale_factory(built))
    tuned(64, 16)
    assert built == [16]


# ---- T.Var -------------------------------------------------------------------------------------

def test_t_var_is_the_class_of_symbolic_sizes():
    m = T.symbolic("m")
    assert isinstance(m, T.Var) and isinstance(T.dynamic("n"), T.Var)
    assert not isinstance(1024, T.Var)


def test_t_var_as_a_macro_annotation_is_a_reference():
    @T.macro
    def bump(x: T.Var):
        x = x + 1  # noqa: F841 - stores through the reference

    @T.prim_func
    def main(A: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=1):
            v = T.alloc_var(T.int32)
            v = 41
            bump(v)
            A[0] = v

    a = torch.zeros(1, dtype=torch.int32)
    tilelang.compile(main, target="cpu")(a)
    assert a.item() == 42
