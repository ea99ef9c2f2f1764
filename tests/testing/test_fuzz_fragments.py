"""The fuzzer's "fragments" family (tilelang/testing/fuzz/fam_fragments.py): every kind of
program it makes matches its numpy oracle on the interpreter and builds for sm_80 and sm_90a
(a sample covering every kind; the device script runs thousands: `scripts/fuzz_family.py
fragments 0 2000` or `scripts/device_reliability.py --sections fuzz --family fragments`)."""

import importlib.util
import os

import numpy as np
import pytest

import tilelang
from tilelang.runtime import compile_cuda, toolkit
from tilelang.testing import fuzz
from tilelang.testing.fuzz import fam_fragments
from tilelang.testing.fuzz.known import expected_rejection

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")

# two seeds of each kind (the first ones the family draws)
SAMPLE = [0, 3, 1, 7, 2, 9, 4, 45, 5, 6, 11, 13, 26, 27, 42, 55]
INTERP = sorted(set(SAMPLE) | set(range(16, 40)))


def test_the_sample_covers_every_kind():
    kinds = {fuzz.generate(s, "fragments").spec["kind"] for s in SAMPLE}
    assert kinds == set(fam_fragments.KINDS)


def test_programs_are_deterministic_and_distinct():
    a = [fuzz.generate(s, "fragments").source for s in range(12)]
    assert a == [fuzz.generate(s, "fragments").source for s in range(12)]
    assert len(set(a)) == len(a)


@pytest.mark.parametrize("seed", INTERP)
def test_interpreter_matches_the_oracle(seed):
    case = fuzz.generate(seed, "fragments")
    inputs = case.make_inputs(np.random.default_rng(seed))
    want = fuzz.expected(case, inputs)
    got = fuzz.run_case(case, "cpu", inputs)
    assert not fuzz.check(case, got, want), case.source
    # the oracle notices a wrong element
    name, (value, tol) = next(iter(want.items()))
    bad = {k: np.array(v, copy=True) for k, v in got.items()}
    idx = tuple(s // 2 for s in value.shape)
    bad[name][idx] += max(3 * float(np.broadcast_to(tol, value.shape)[idx]), 1)
    assert fuzz.check(case, bad, want)


@requires_compiler
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("seed", SAMPLE)
def test_builds(seed, arch):
    case = fuzz.generate(seed, "fragments")
    try:
        source = tilelang.lower(fuzz.load(case), target=f"cuda -arch={arch}")
    except Exception as e:  # noqa: BLE001 - only the listed unsupported features may refuse
        assert fuzz.classify(e) == "rejected" and expected_rejection(e), \
            f"{type(e).__name__}: {e}\n\n{case.source}"
        return
    assert compile_cuda(source, arch, name=case.name).cubin


def test_the_device_scripts_run_just_this_family():
    spec = importlib.util.spec_from_file_location(
        "device_reliability", os.path.join(ROOT, "scripts", "device_reliability.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    res = script.run_one(5, "cpu", dry_run=True, family="fragments")
    assert res["family"] == "fragments" and res["outcome"] == "ok", res
    assert "fuzz_family.py fragments 5 1" in script.repro_command(res)
    spec = importlib.util.spec_from_file_location(
        "fuzz_family", os.path.join(ROOT, "scripts", "fuzz_family.py"))
    ff = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ff)
    assert ff.parse_args(["fragments", "0", "3"]).family in fuzz.FAMILIES
