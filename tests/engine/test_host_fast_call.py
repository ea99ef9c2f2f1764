"""The generated fast call's failure handler (engine/host.py), without a GPU."""

import pytest

from tilelang.engine.host import _failure_handler


class _Driver:
    CUDA_ERROR_INVALID_CONTEXT = 201

    def __init__(self, unbound):
        self.unbound = unbound
        self.bound = []

    def bind_if_unbound(self, device):
        if self.unbound:
            self.unbound = False
            self.bound.append(device)
            return True
        return False


class _Adapter:
    def launch_failed(self, res, k_index, device):
        raise RuntimeError(f"launch {k_index} failed with {res} on device {device}")


def test_fresh_thread_binds_the_context_and_asks_for_a_rerun():
    driver = _Driver(unbound=True)
    fail = _failure_handler(_Adapter(), driver)
    assert fail(201, 0, 1) is True
    assert driver.bound == [1]


def test_invalid_context_with_a_context_bound_is_an_error():
    fail = _failure_handler(_Adapter(), _Driver(unbound=False))
    with pytest.raises(RuntimeError, match="launch 0 failed with 201 on device 0"):
        fail(201, 0, 0)


def test_other_errors_raise_with_the_launch_described():
    driver = _Driver(unbound=True)
    fail = _failure_handler(_Adapter(), driver)
    with pytest.raises(RuntimeError, match="launch 2 failed with 1 "):
        fail(1, 2, 0)
    assert driver.bound == []  # no rebinding for errors other than a missing context
