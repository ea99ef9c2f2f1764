"""The generated fast call path, exercised without a GPU: the driver launch, the stream and
the device tensors are stand-ins, so the test checks the Python the generator writes (argument
checks, symbol binding, output allocation, packing, launch arguments)."""

import ctypes

import pytest
import torch

import tilelang.language as T
from tilelang.engine.build import CUDAAdapter
from tilelang.engine.host import _failure_handler
from tilelang.jit.args import CallPlan
from tilelang.jit.target import Target


class FakeCudaTensor:
    is_cuda = True

    def __init__(self, shape, dtype, ptr=4096, device=0):
        self.shape = torch.Size(shape)
        self.dtype = dtype
        self._ptr = ptr
        self._device = device

    def get_device(self):
        return self._device

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return self._ptr

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def stride(self):
        out, acc = [], 1
        for s in reversed(self.shape):
            out.append(acc)
            acc *= s
        return tuple(reversed(out))


def _kernel():
    m = T.dynamic("m")

    @T.prim_func
    def scale(A: T.Tensor((m, 64), "float32"), B: T.Tensor((m, 64), "float32"),
              alpha: T.float32):
        with T.Kernel(T.ceildiv(m, 32), threads=128) as bx:
            for i, j in T.Parallel(32, 64):
                B[bx * 32 + i, j] = A[bx * 32 + i, j] * alpha
    return scale


def _fake_call(monkeypatch, func, out_idx, launch_ex=True):
    """The generated fast path of `func`, wired to stand-ins; returns (call, launches, slow).
    Each launch is recorded as cuLaunchKernel's arguments (function, grid, block, smem,
    stream, ...), read back from the CUlaunchConfig when the path uses cuLaunchKernelEx."""
    from tilelang.runtime import driver
    from tilelang.runtime import launcher

    calls = []

    def fake_ex(cfg, fn, params, extra):
        c = driver.LaunchConfig.from_address(cfg.value)
        calls.append((fn, *c.grid, *c.block, c.smem, c.stream, params, extra))
        return 0

    monkeypatch.setattr(driver, "fast_launcher", lambda: lambda *a: calls.append(a) or 0)
    monkeypatch.setattr(driver, "fast_launcher_ex", lambda: fake_ex if launch_ex else None)
    adapter = CUDAAdapter(func, Target("cuda", "sm_90a"), {"pass_configs": {}})
    plan = CallPlan(func, out_idx)
    slow_calls = []
    call = adapter.make_fast_call(plan, lambda args: slow_calls.append(args) or "slow")
    monkeypatch.setattr(launcher.CudaKernelFunction, "prepare",
                        lambda self, dev=None, smem=0: (ctypes.c_void_p(1234), 49152))
    call.register(0)
    g = call.__globals__
    g["Tensor"] = FakeCudaTensor
    g["empty"] = lambda shape, dtype, device: FakeCudaTensor(shape, dtype, ptr=8192)
    g["raw_stream"] = lambda dev: 0
    return call, calls, slow_calls


@pytest.mark.parametrize("launch_ex", [True, False])
def test_fast_call_checks_binds_and_launches(monkeypatch, launch_ex):
    call, calls, slow_calls = _fake_call(monkeypatch, _kernel(), [1], launch_ex)
    a = FakeCudaTensor((70, 64), torch.float32)
    out = call((a, 2.5))
    assert isinstance(out, FakeCudaTensor) and tuple(out.shape) == (70, 64)
    assert not slow_calls and len(calls) == 1
    fn, gx, gy, gz, bx, by, bz = calls[0][:7]
    assert fn.value == 1234 and (gx, gy, gz) == (3, 1, 1) and (bx, by, bz) == (128, 1, 1)
    # the grid follows the symbolic size on every call (written into the launch config)
    call((FakeCudaTensor((200, 64), torch.float32), 1.0))
    assert calls[-1][1:4] == (7, 1, 1) and len(calls) == 2
    # anything unexpected goes to the general path (which raises the descriptive errors)
    assert call((a,)) == "slow"
    assert call((FakeCudaTensor((70, 32), torch.float32), 1.0)) == "slow"
    assert call((FakeCudaTensor((70, 64), torch.float16), 1.0)) == "slow"
    assert call((a, "x")) == "slow"
    assert call((FakeCudaTensor((70, 64), torch.float32, device=-1), 1.0)) == "slow"  # CPU
    assert len(slow_calls) == 5


@pytest.mark.parametrize("launch_ex", [True, False])
def test_static_grid_is_decided_when_the_path_is_generated(monkeypatch, launch_ex):
    @T.prim_func
    def add_one(A: T.Tensor((1000,), "float32"), B: T.Tensor((1000,), "float32")):
        with T.Kernel(T.ceildiv(1000, 256), threads=256) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = A[bx * 256 + i] + 1.0

    call, calls, slow_calls = _fake_call(monkeypatch, add_one, [1], launch_ex)
    assert "gx, gy, gz =" not in call.source and "set_grid" not in call.source
    if not launch_ex:
        assert "launch(funcs[0], 4, 1, 1, 256" in call.source
    out = call((FakeCudaTensor((1000,), torch.float32),))
    assert tuple(out.shape) == (1000,) and not slow_calls
    assert calls[0][1:7] == (4, 1, 1, 256, 1, 1)
    assert call((FakeCudaTensor((999,), torch.float32),)) == "slow"


@pytest.mark.parametrize("launch_ex", [True, False])
def test_grid_past_the_launch_limits_goes_to_the_general_path_first(monkeypatch, launch_ex):
    """A grid known only at the call and past CUDA's limits (y <= 65535) is checked before
    anything is allocated or launched; the general path raises the error that says why."""
    m = T.dynamic("m")

    @T.prim_func
    def rows(A: T.Tensor((m, 32), "float32")):
        with T.Kernel(1, m, threads=32) as (bx, by):
            for j in T.Parallel(32):
                A[by, j] = 1.0

    call, calls, slow_calls = _fake_call(monkeypatch, rows, None, launch_ex)
    assert call((FakeCudaTensor((65535, 32), torch.float32),)) is None and len(calls) == 1
    assert call((FakeCudaTensor((70000, 32), torch.float32),)) == "slow"
    assert len(calls) == 1 and len(slow_calls) == 1


def test_a_failed_launch_is_never_ignored(monkeypatch):
    """The fast path used to report a failed launch as if its grid were empty, which an
    invalid-value failure then passed silently (the kernel did not run)."""
    from tilelang.runtime import driver
    from tilelang.runtime.driver import CudaDriverError

    call, calls, _ = _fake_call(monkeypatch, _kernel(), [1])
    call.__globals__["launch_ex"] = lambda *a: driver.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(CudaDriverError, match="cuLaunchKernel failed"):
        call((FakeCudaTensor((70, 64), torch.float32), 2.5))


def _tma_gemm(m):
    @T.prim_func
    def gemm(A: T.Tensor((m, 256), "float16"), B: T.Tensor((256, 256), "float16"),
             C: T.Tensor((m, 256), "float16")):
        with T.Kernel(2, T.ceildiv(m, 128), threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * 128, bx * 128])
    return gemm


def test_tensor_maps_are_encoded_once_per_address(monkeypatch):
    """The fast path keeps each tensor map by the tensor's address: a call on tensors where
    earlier ones sat encodes nothing."""
    from tilelang.engine import build

    encoded = []

    def fake_encode(d, tensor, swizzle):
        encoded.append((d.buffer.name, tensor.data_ptr(), tuple(tensor.shape)))
        return bytes([len(encoded)]) * 128

    monkeypatch.setattr(build, "encode_tma", fake_encode)
    call, calls, slow_calls = _fake_call(monkeypatch, _tma_gemm(384), [2])
    assert "encode_tma" not in call.source
    a, b = FakeCudaTensor((384, 256), torch.float16), FakeCudaTensor((256, 256), torch.float16,
                                                                      ptr=1 << 20)
    call((a, b))
    n_maps = len(encoded)
    assert n_maps >= 2 and not slow_calls
    call((a, b))
    assert len(encoded) == n_maps  # same addresses: nothing encoded again
    call((FakeCudaTensor((384, 256), torch.float16, ptr=1 << 30), b))
    assert len(encoded) == n_maps + 1 and encoded[-1][1] == 1 << 30  # only A's map is new
    assert len(calls) == 3 and not slow_calls


def test_tensor_map_of_a_symbolic_shape_is_keyed_by_shape_too(monkeypatch):
    from tilelang.engine import build
    from tilelang.engine.host import tma_encoder

    encoded = []
    monkeypatch.setattr(build, "encode_tma",
                        lambda d, t, sw: encoded.append(tuple(t.shape)) or b"x" * 128)
    encode = tma_encoder(None, 3, static=False)
    for shape in ((256, 64), (256, 64), (128, 64)):
        encode(FakeCudaTensor(shape, torch.float16, ptr=1 << 20))
    assert encoded == [(256, 64), (128, 64)]


if __name__ == "__main__":
    pytest.main([__file__])


# ---- the failure handler ------------------------------------------------------------------
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
