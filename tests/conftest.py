"""Options of the whole test suite.

`slow` tests (soak and growth measurements that take tens of seconds each) are skipped unless
`--run-slow` is given, so that the README's `python -m pytest -q` stays short on a 2-core
machine without a GPU; `gpu` tests are skipped by the per-directory conftests where there is
no CUDA GPU.
"""

import pytest


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the tests marked slow (soak and growth measurements)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
