"""Fragments indexed the ways the reference's examples index them, on the GPU against torch
(kernels: tests/transform/fragment_access_kernels.py; the CPU side of the same programs:
tests/transform/test_fragment_access.py). Fresh random inputs, outputs poisoned first; each
program with the default compile and with warp specialisation and vectorisation off.
Marked `gpu`; skipped without a GPU."""

import os
import sys

import pytest
import torch

import tilelang

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "transform"))
from fragment_access_kernels import CASES  # noqa: E402

pytestmark = pytest.mark.gpu

CONFIGS = [{}, {"tl.disable_warp_specialized": True, "tir.disable_vectorize": True}]


@pytest.mark.parametrize("configs", CONFIGS, ids=["default", "plain"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name, configs):
    func, inputs, reference = CASES[name]()
    kernel = tilelang.compile(func, target="cuda", pass_configs=configs)
    for trial in range(2):  # twice: the second call takes the generated fast path
        ins = inputs(torch.Generator().manual_seed(100 + trial), "cuda")
        expected = reference(ins)
        for pos in expected:
            ins[pos].fill_(float("nan") if ins[pos].dtype.is_floating_point else -12345)
        kernel(*ins)
        torch.cuda.synchronize()
        for pos, want in expected.items():
            got = ins[pos].double().cpu()
            want = want.double().cpu()
            assert not torch.isnan(got).any(), f"{name}: output {pos} not fully written"
            tol = 2e-2 * max(1.0, float(want.abs().max()))
            assert torch.allclose(got, want, atol=tol, rtol=0), \
                f"{name}: output {pos} max error {(got - want).abs().max().item()}"


@pytest.mark.parametrize("seed", range(0, 40))
def test_fuzz_family_on_the_gpu(seed):
    """The "fragments" fuzz family: GPU against the interpreter and the oracle."""
    import numpy as np

    from tilelang.testing import fuzz

    from tilelang.testing.fuzz.known import expected_rejection

    case = fuzz.generate(seed, "fragments")
    inputs = case.make_inputs(np.random.default_rng(seed))
    want = fuzz.expected(case, inputs)
    try:
        gpu = fuzz.run_case(case, "cuda", inputs)
    except Exception as e:  # noqa: BLE001 - an unsupported feature (float64 gemm) only
        if fuzz.classify(e) == "rejected" and expected_rejection(e):
            pytest.skip(f"unsupported on this target: {expected_rejection(e)}")
        raise
    cpu = fuzz.run_case(case, "cpu", inputs)
    problems = fuzz.check(case, gpu, want, "gpu vs oracle: ")
    problems += fuzz.agree(gpu, cpu, want, "gpu vs interpreter: ")
    assert not problems, "\n".join(problems) + "\n\n" + case.source
