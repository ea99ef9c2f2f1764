"""Autotuning CPU-target kernels: skipped configurations, the disk cache, the two API forms."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.autotuner import AutoTuner, default_attention_configs, default_gemm_configs
from tilelang.autotuner import cache as tcache

HERE = Path(__file__).resolve().parent
FAST = dict(warmup=0.1, rep=0.5)



def _scale_factory(built, wrong_for=()):
    """A factory computing C = 2A + B; `block` values in `wrong_for` compute 3A + B."""

    @tilelang.jit(out_idx=[-1], target="cpu")
    def axpy(n, block=32, dtype="float32"):
        built.append(block)
        assert n % block == 0, f"n={n} is not a multiple of block={block}"
        k = 3 if block in wrong_for else 2

        @T.prim_func
        def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
            with T.Kernel(n // block, threads=32) as bx:
                for i in T.Parallel(block):
                    C[bx * block + i] = A[bx * block + i] * k + B[bx * block + i]

        return main

    return axpy


def ref(a, b):
    return a * 2 + b


def test_decorator_skips_failing_config_with_reason(capsys):
    built = []
    tuned = tilelang.autotune(configs=[{"block": b} for b in (16, 32, 48, 64)], ref_prog=ref,
                              **FAST)(_scale_factory(built))
    kernel = tuned(128)
    out = capsys.readouterr().out
    assert "skipped config 2 {'block': 48}: compile error: AssertionError: n=128 is not a " \
           "multiple of block=48" in out
    assert "4 configurations, 3 ok, skipped 1 compile error" in out
    assert kernel.config["block"] in (16, 32, 64) and kernel.latency > 0
    a, b = torch.randn(128), torch.randn(128)
    torch.testing.assert_close(kernel(a, b), a * 2 + b)
    n_built = len(built)
    assert tuned(128) is kernel and len(built) == n_built  # tuned once per call signature


def test_wrong_result_is_skipped_and_never_chosen(capsys):
    built = []
    tuned = tilelang.autotune(configs=[{"block": 16}, {"block": 32}], ref_prog=ref,
                              **FAST)(_scale_factory(built, wrong_for=(16,)))
    kernel = tuned(64)
    out = capsys.readouterr().out
    assert "skipped config 0 {'block': 16}: wrong result: kernel output 'C' differs" in out
    assert kernel.config == {"block": 32}


def test_all_configs_failing_raises_with_every_reason():
    tuned = tilelang.autotune(configs=[{"block": 24}, {"block": 40}], **FAST)(
        _scale_factory([]))
    with pytest.raises(RuntimeError) as info:
        tuned(64)
    msg = str(info.value)
    assert "none of the 2 configurations" in msg
    assert "block=24" in msg and "block=40" in msg


def test_unknown_config_key_is_rejected():
    tuned = tilelang.autotune(configs=[{"blk": 16}], **FAST)(_scale_factory([]))
    with pytest.raises(ValueError, match=r"Unused keys in config: \['blk'\]"):
        tuned(64)


def test_explicit_tunable_argument_skips_tuning(capsys):
    built = []
    tuned = tilelang.autotune(configs=[{"block": 16}, {"block": 32}], **FAST)(
        _scale_factory(built))
    kernel = tuned(64, block=16)
    assert built == [16]
    assert "configurations" not in capsys.readouterr().out
    a, b = torch.randn(64), torch.randn(64)
    torch.testing.assert_close(kernel(a, b), a * 2 + b)


def test_configs_as_callable_and_dict_of_lists():
    built = []
    tuned = tilelang.autotune(configs=lambda n, **_: [{"block": n // 4}, {"block": n // 2}],
                              **FAST)(_scale_factory(built))
    kernel = tuned(64)
    assert sorted(set(built)) == [16, 32] and kernel.config["block"] in (16, 32)
    built2 = []
    tuned2 = tilelang.autotune(configs={"block": [16, 32], "dtype": ["float32"]}, **FAST)(
        _scale_factory(built2))
    assert tuned2(32).config["dtype"] == "float32" and sorted(set(built2)) == [16, 32]


def test_from_kernel_form_returns_autotune_result():
    n = 64

    def kernel(block=None):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"),
                 C: T.Tensor((n,), "float32")):
            with T.Kernel(n // block, threads=32) as bx:
                for i in T.Parallel(block):
                    C[bx * block + i] = A[bx * block + i] * 2 + B[bx * block + i]

        return main

    tuner = (AutoTuner.from_kernel(kernel=kernel, configs=[{"block": 16}, {"block": 32}])
             .set_compile_args(out_idx=[-1], target="cpu")
             .set_profile_args(supply_type=tilelang.TensorSupplyType.Integer, ref_prog=ref))
    result = tuner.run(warmup=0.1, rep=0.5)
    assert result.config in ({"block": 16}, {"block": 32})
    assert result.latency > 0 and result.ref_latency > 0
    assert result.kernel.config == result.config and result.kernel.latency == result.latency
    assert [r.status for r in result.records] == ["ok", "ok"]
    assert "T.Kernel" in result.libcode or result.libcode


def test_key_ignores_config_list_but_not_arguments_or_source():
    def make(configs, args, fn):
        t = AutoTuner(fn, configs)
        t.set_compile_args(out_idx=[-1], target="cpu")
        t.set_kernel_parameters((args, {}))
        return t.generate_cache_key()

    f = _scale_factory([]).func

    def other(n, block=32, dtype="float32"):
        return n

    base = make([{"block": 16}], (64,), f)
    assert make([{"block": 16}, {"block": 32}, {"block": 64}], (64,), f) == base
    assert make([{"block": 16}], (128,), f) != base
    assert make([{"block": 16}], (64,), other) != base
    tensor_key = make([{"block": 16}], (torch.zeros(4, 8),), f)
    assert make([{"block": 16}], (torch.ones(4, 8),), f) == tensor_key  # values don't matter
    assert make([{"block": 16}], (torch.zeros(4, 9),), f) != tensor_key  # shapes do


def test_disk_cache_hit_in_a_second_process(isolated_cache):
    root = str(Path(tilelang.__file__).resolve().parent.parent)  # also without an install
    env = dict(os.environ, TILELANG_CACHE_DIR=str(isolated_cache),
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, str(HERE / "autotune_child.py"), "128"]
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "BUILT 4" in first.stdout
    files = list((isolated_cache / "autotune").glob("*"))
    assert len(files) == 1 and files[0].suffix == ".json"  # no temporary left behind
    data = json.loads(files[0].read_text())
    assert data["best"]["config"]["block"] in (16, 32, 64)
    assert {r["status"] for r in data["records"]} == {"ok", "compile error"}

    second = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "BUILT 1" in second.stdout and "using cached best config" in second.stdout
    chosen = lambda out: out.split("CONFIG ")[1].split()[0]  # noqa: E731
    assert chosen(first.stdout) == chosen(second.stdout)


def test_disabled_cache_writes_nothing(isolated_cache, monkeypatch):
    monkeypatch.setenv("TILELANG_AUTO_TUNING_DISABLE_CACHE", "1")
    tilelang.autotune(configs=[{"block": 32}], **FAST)(_scale_factory([]))(64)
    assert not (isolated_cache / "autotune").exists()


def test_set_autotune_inputs_feeds_given_tensors():
    from tilelang.autotuner import set_autotune_inputs

    seen = []

    def checking_ref(a, b):
        seen.append(a)
        return a * 2 + b

    a, b = torch.full((64,), 3.0), torch.full((64,), 1.0)
    tuned = tilelang.autotune(configs=[{"block": 32}, {"block": 16}], ref_prog=checking_ref,
                              **FAST)(_scale_factory([]))
    with set_autotune_inputs([a, b]):
        tuned(64)
    assert seen and all(torch.equal(x, a) for x in seen)


def test_config_round_trip_through_json():
    cfg = {"block": 16, "shape": (2, 3), "name": "x", "flag": True, "policy": object()}
    stored = json.loads(json.dumps(tcache.encode_config_dict(cfg)))
    assert tcache.find_config(stored, [dict(cfg, block=32), cfg]) is cfg
    assert tcache.find_config(stored, []) is None
    plain = {"block": 16, "shape": (2, 3)}
    stored_plain = json.loads(json.dumps(tcache.encode_config_dict(plain)))
    assert tcache.find_config(stored_plain, [{"block": 16, "shape": (2, 3)}]) == plain
    # a stored configuration is only a pointer into the candidates, never used on its own
    assert tcache.find_config(stored_plain, [{"block": 16, "shape": [2, 3]}]) is None
    assert tcache.find_config(stored_plain, []) is None


def test_default_config_spaces_respect_limits():
    for cfg in default_gemm_configs(arch="sm_80"):
        smem = (cfg["block_M"] + cfg["block_N"]) * cfg["block_K"] * 2 * cfg["num_stages"]
        assert smem <= 163 * 1024
        assert cfg["block_M"] * cfg["block_N"] // cfg["threads"] <= 128
    small = default_gemm_configs(M=40, N=64, K=16)
    assert small and all(c["block_M"] == 64 and c["block_N"] == 64 and c["block_K"] == 32
                         for c in small)
    renamed = default_gemm_configs(names={"threads": "thread_num"})
    assert all("thread_num" in c and "threads" not in c for c in renamed)
    assert len(default_gemm_configs(arch="sm_90a")) > len(default_gemm_configs(arch="sm_75"))
    att = default_attention_configs(dim=64, arch="sm_90a")
    assert att and all(set(c) == {"block_M", "block_N", "num_stages", "threads"} for c in att)


def test_kernel_style_function_is_tuned_then_run():
    @tilelang.autotune(configs=[{"block": 16}, {"block": 32}], ref_prog=ref, **FAST)
    @tilelang.jit(target="cpu")
    def axpy(A: T.Tensor[[int], T.float32], B: T.Tensor[[int], T.float32], block: int = 64):
        (n,) = A.shape
        C = T.empty((n,), T.float32)
        with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] * 2 + B[bx * block + i]
        return C

    a, b = torch.randn(96), torch.randn(96)
    torch.testing.assert_close(axpy(a, b), a * 2 + b)  # the call runs the best kernel
    kernel = axpy.compile(a, b)
    assert kernel.config in ({"block": 16}, {"block": 32}) and kernel.latency > 0


def test_clear_cache_forgets_tuning_results(isolated_cache):
    tilelang.autotune(configs=[{"block": 16}, {"block": 32}], **FAST)(_scale_factory([]))(64)
    assert list((isolated_cache / "autotune").glob("*.json"))
    tilelang.cache.clear_cache()
    assert not list((isolated_cache / "autotune").glob("*.json"))
    assert not AutoTuner._memory_cache


def test_finalists_are_retimed_side_by_side(monkeypatch):
    """On a GPU the fastest configs of the first round are timed again, alternately, and the
    winner is the best median of those runs, not of one short first measurement."""
    from tilelang.autotuner import tuner as T_

    first = {16: 1.0, 32: 1.1, 64: 1.2, 128: 5.0}   # config 16 looks fastest at first
    again = {16: [1.3, 1.4, 1.3], 32: [1.05, 1.0, 1.02], 64: [1.5, 1.5, 1.5]}
    calls = []

    def fake_bench(self, record, warmup, rep, best_so_far, check=True):
        block = record.config["block"]
        if check:
            return first[block], None
        calls.append(block)
        return again[block][sum(c == block for c in calls) - 1], None

    monkeypatch.setattr(T_.AutoTuner, "_bench", fake_bench)
    monkeypatch.setattr(T_.AutoTuner, "_target_kind", lambda self: "cuda")
    monkeypatch.setattr(T_.AutoTuner, "_gpu_workers", lambda self: [])
    tuned = tilelang.autotune(configs=[{"block": b} for b in (16, 32, 64, 128)],
                              **FAST)(_scale_factory([]))
    kernel = tuned(256)
    assert kernel.config == {"block": 32} and kernel.latency == pytest.approx(1.02)
    assert calls == [16, 32, 64] * 3  # the three fastest, alternating, never the slow one
