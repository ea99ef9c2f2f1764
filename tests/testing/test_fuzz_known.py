"""fuzz/known.py: which refusals of generated programs are expected (unsupported features) and
which are defects; the device script reports the latter as findings."""

import importlib.util
from pathlib import Path

import tilelang
from tilelang.errors import KernelError
from tilelang.testing import fuzz
from tilelang.testing.fuzz.known import expected_rejection, known_bug

ROOT = Path(__file__).resolve().parents[2]


def _device_script():
    spec = importlib.util.spec_from_file_location("device_reliability",
                                                  ROOT / "scripts" / "device_reliability.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _refusal(seed, arch="sm_90a"):
    try:
        tilelang.lower(fuzz.load(fuzz.generate(seed)), target=f"cuda -arch={arch}")
    except KernelError as e:
        return e
    raise AssertionError(f"seed {seed} lowered")


def test_unsupported_features_are_expected_rejections():
    e = _refusal(51350)  # a float64 T.gemm
    assert expected_rejection(e) == "float64-gemm" and known_bug(e) is None
    assert _device_script()._compile_outcome(e, known_bug) == "rejected"


def test_any_other_refusal_of_a_generated_program_is_a_finding():
    e = KernelError("fragment C is read across threads in this T.Parallel loop")
    assert expected_rejection(e) is None
    script = _device_script()
    assert script._compile_outcome(e, known_bug) == "rejected_valid"
    assert "rejected_valid" in script.FINDING_KINDS



def test_a_draw_larger_than_shared_memory_is_an_expected_rejection():
    e = _refusal(21604)  # float64 128 x 128 x 64 tiles in 3 stages: 384 KB
    assert expected_rejection(e) == "shared-memory-limit" and known_bug(e) is None
