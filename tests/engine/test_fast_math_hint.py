"""The verbose note that points at fast math when float32 exp/exp2 compile to the accurate
library functions (engine/pipeline.py)."""

import tilelang
import tilelang.language as T


def _softmax_row(N=64, divide=False):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(N):
                if divide:
                    Y[i] = T.exp2(X[i]) / X[0]
                else:
                    Y[i] = T.exp2(X[i])

    return main


def _notes(configs=None, divide=False):
    from tilelang.engine.build import kernels_of
    from tilelang.engine.pipeline import lower_kernel
    from tilelang.jit.target import parse_target
    from tilelang.transform.pass_config import normalize_pass_configs

    func = _softmax_row(divide=divide)
    kernel = kernels_of(func)[0]
    _, ctx = lower_kernel(func, kernel, 0, parse_target("cuda -arch=sm_90a"),
                          normalize_pass_configs(configs or {}))
    return ctx.notes


def test_hint_without_fast_math():
    assert any("exp2 without fast math" in n for n in _notes())


def test_no_hint_with_fast_math():
    assert not any("fast math" in n for n in _notes({"tl.enable_fast_math": True}))


def test_hint_names_divisions_where_there_are_some():
    plain = [n for n in _notes() if "without fast math" in n]
    with_division = [n for n in _notes(divide=True) if "without fast math" in n]
    assert plain and "division" not in plain[0]
    assert with_division and "divisions IEEE-rounded" in with_division[0]
    assert "a division approximate" in with_division[0]
