"""Options of the whole test suite.

`slow` tests (soak and growth measurements that take tens of seconds each) are skipped unless
`--run-slow` is given, so that the README's `python -m pytest -q` stays short on a 2-core
machine without a GPU; `gpu` tests are skipped by the per-directory conftests where there is
no CUDA GPU. A test skipped where NVRTC is missing (its `skipif` reason says NVRTC is not installed) is marked
`nvrtc`: CI installs nvcc only, so those run on the GPU machine with `-m "gpu or nvrtc"`.
"""

import re

import pytest

# skip reasons of tests that need NVRTC itself (not "NVRTC or nvcc": any compiler)
_NEEDS_NVRTC = re.compile(r"NVRTC (is )?not installed")


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the tests marked slow (soak and growth measurements)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(_NEEDS_NVRTC.match(str(m.kwargs.get("reason", "")))
               for m in item.iter_markers("skipif")):
            item.add_marker(pytest.mark.nvrtc)
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
