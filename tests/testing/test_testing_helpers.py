"""tilelang.testing: mismatch-ratio comparison, requirement decorators, seeding."""

import random

import numpy as np
import pytest
import torch

import tilelang.testing
from tilelang.testing import requirements


def test_torch_assert_close_counts_mismatches_against_ratio():
    torch.manual_seed(0)
    a = torch.randn(1000, dtype=torch.float32)
    b = a.clone()
    b[:5] += 10.0  # 5 of 1000 elements way off
    # int(1000 * 0.005) = 5 allowed -> passes; int(1000 * 0.004) = 4 -> fails
    assert tilelang.testing.torch_assert_close(a, b, rtol=1e-3, atol=1e-3,
                                               max_mismatched_ratio=0.005) is True
    with pytest.raises(AssertionError) as info:
        tilelang.testing.torch_assert_close(a, b, rtol=1e-3, atol=1e-3,
                                            max_mismatched_ratio=0.004)
    msg = str(info.value)
    assert "Too many mismatched elements: 5 > 4" in msg
    assert "First mismatch at index [0]" in msg


def test_torch_assert_close_tolerances_are_isclose_rule():
    b = torch.tensor([1.0, 100.0, 0.0], dtype=torch.float64)
    # |a - b| <= atol + rtol * |b|
    ok = b + torch.tensor([0.0109, 1.0009, 0.0009], dtype=torch.float64)
    bad = b + torch.tensor([0.0, 1.02, 0.0], dtype=torch.float64)
    assert tilelang.testing.torch_assert_close(ok, b, rtol=1e-2, atol=1e-3,
                                               max_mismatched_ratio=0.0)
    with pytest.raises(AssertionError, match="1 > 0"):
        tilelang.testing.torch_assert_close(bad, b, rtol=1e-2, atol=1e-3,
                                            max_mismatched_ratio=0.0)


def test_torch_assert_close_checks_shape_and_dtype():
    a = torch.zeros(4, 4)
    with pytest.raises(AssertionError, match="shape"):
        tilelang.testing.torch_assert_close(a, torch.zeros(16))
    with pytest.raises(AssertionError, match="dtype"):
        tilelang.testing.torch_assert_close(a, a.half())
    assert tilelang.testing.torch_assert_close(a, a.half(), check_dtype=False)


def test_torch_assert_close_nan_equal_by_default():
    a = torch.tensor([float("nan"), 1.0])
    assert tilelang.testing.torch_assert_close(a, a.clone(), max_mismatched_ratio=0.0)
    with pytest.raises(AssertionError):
        tilelang.testing.torch_assert_close(a, a.clone(), max_mismatched_ratio=0.0,
                                            equal_nan=False)


def test_half_inputs_compared_in_double():
    a = torch.full((64,), 1000.0, dtype=torch.float16)
    b = a.clone()
    b[0] = 1001.0  # within rtol 1e-2 of 1000 (fp16 spacing there is 0.5)
    assert tilelang.testing.torch_assert_close(a, b, rtol=1e-2, atol=0.0,
                                               max_mismatched_ratio=0.0)


def test_assert_allclose_numpy_style():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    tilelang.testing.assert_allclose(torch.from_numpy(a), a, rtol=0, atol=0)
    with pytest.raises(AssertionError):
        tilelang.testing.assert_allclose(a + 1e-3, a, rtol=1e-7, atol=1e-7)
    with pytest.raises(AssertionError, match="shape"):
        tilelang.testing.assert_allclose(a, a.reshape(3, 2))


def test_set_random_seed_makes_all_generators_repeat():
    tilelang.testing.set_random_seed(123)
    first = (random.random(), np.random.rand(), torch.rand(3))
    tilelang.testing.set_random_seed(123)
    second = (random.random(), np.random.rand(), torch.rand(3))
    assert first[0] == second[0] and first[1] == second[1]
    assert torch.equal(first[2], second[2])


def _skip_marks(obj):
    return [m for m in getattr(obj, "pytestmark", []) if m.name == "skipif"]


def test_requires_cuda_marks_gpu_and_skips_without_gpu():
    @tilelang.testing.requires_cuda
    def f():
        pass

    names = [m.name for m in f.pytestmark]
    assert "gpu" in names
    (skip,) = _skip_marks(f)
    assert skip.args[0] == (not torch.cuda.is_available())

    @tilelang.testing.requires_cuda()  # called form works too
    def g():
        pass

    assert _skip_marks(g)


def test_compute_version_requirement_modes(monkeypatch):
    monkeypatch.setattr(requirements, "cuda_compute_version", lambda device=None: (8, 0))
    monkeypatch.setattr(requirements, "_cuda_available", lambda: True)
    expect = {("ge", 8, 0): True, ("ge", 9, 0): False, ("gt", 8, 0): False,
              ("lt", 9, 0): True, ("le", 8, 0): True, ("eq", 8, 0): True, ("eq", 8, 6): False}
    for (mode, major, minor), ok in expect.items():
        req = tilelang.testing.requires_cuda_compute_version(major, minor, mode=mode)
        assert req.satisfied() is ok, (mode, major, minor)
    req = tilelang.testing.requires_cuda_compute_version_ge(9, 0)

    @req
    def f():
        pass

    reasons = [m.kwargs["reason"] for m in _skip_marks(f)]
    assert "Requires CUDA compute ge 9.0, but have 8.0" in reasons
    assert tilelang.testing.requires_cuda_compute_version_le(8, 9).satisfied()
    assert not tilelang.testing.requires_cuda_compute_version_gt(8, 0).satisfied()
    assert not tilelang.testing.requires_cuda_compute_version_lt(8, 0).satisfied()
    assert tilelang.testing.requires_cuda_compute_version_eq(8, 0).satisfied()
    with pytest.raises(ValueError, match="Invalid mode"):
        tilelang.testing.requires_cuda_compute_version(8, 0, mode="ne")


def test_amd_requirements_never_hold_and_cuda_or_cdna_is_cuda(monkeypatch):
    monkeypatch.setattr(requirements, "_cuda_available", lambda: True)
    assert tilelang.testing.requires_cuda_or_cdna.satisfied()
    assert not tilelang.testing.requires_cdna.satisfied()
    assert not tilelang.testing.requires_gfx950.satisfied()
    monkeypatch.setattr(requirements, "_cuda_available", lambda: False)
    assert not tilelang.testing.requires_cuda_or_cdna.satisfied()

    @tilelang.testing.requires_cdna
    def f():
        pass

    (skip,) = _skip_marks(f)
    assert skip.args[0] is True and "CDNA" in skip.kwargs["reason"]


def test_requires_package():
    assert tilelang.testing.requires_package("numpy").satisfied()
    req = tilelang.testing.requires_package("numpy", "surely_not_a_package_xyz")
    assert not req.satisfied()

    @req
    def f():
        pass

    (skip,) = _skip_marks(f)
    assert skip.args[0] is True and "surely_not_a_package_xyz" in skip.kwargs["reason"]


def test_requirement_on_class():
    @tilelang.testing.requires_package("surely_not_a_package_xyz")
    class TestThing:
        def test_x(self):
            pass

    assert _skip_marks(TestThing)


def test_main_runs_pytest_on_calling_file(tmp_path):
    import subprocess
    import sys

    test_file = tmp_path / "test_sample_main.py"
    test_file.write_text(
        "import tilelang.testing\n"
        "def test_one():\n    assert 1 + 1 == 2\n"
        "def test_two():\n    assert False, 'boom'\n"
        "if __name__ == '__main__':\n    tilelang.testing.main()\n")
    import os
    from pathlib import Path

    root = str(Path(tilelang.__file__).resolve().parent.parent)  # also without an install
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(test_file), "-q", "-p", "no:cacheprovider"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in proc.stdout
