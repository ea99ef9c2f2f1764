"""Where the host time of one tiny-kernel call goes (issue 4's host-overhead target).

    python benchmarks/host_overhead.py

Times, per call, with the GPU kept busy only by the calls themselves (a 1-block kernel, so the
launch queue never fills): the driver's cuLaunchKernel alone (parameters packed once), the
generated fast call `kernel._fast(args)`, the user-facing `kernel(a, b, c)`, and `torch.add`
in the same loop shape. Median and best of 100 batches of 200 calls each.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import tilelang  # noqa: E402
from tests.gpu import kernels as K  # noqa: E402


def per_call_us(fn, batches=100, n=200):
    """Host time per call. Batches stay well below the driver's launch queue (about 1000
    entries) and the GPU drains between batches, so the loop measures the host, not how fast
    the GPU retires tiny kernels."""
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times), min(times)


def _launch_ex(block, stream):
    """cuLaunchKernelEx through ctypes with its CUlaunchConfig built once (4 arguments to
    convert per call instead of 11)."""
    import ctypes

    from tilelang.runtime import driver

    class LaunchConfig(ctypes.Structure):
        _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                    ("smem", ctypes.c_uint), ("stream", ctypes.c_void_p),
                    ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]

    cfg = LaunchConfig((ctypes.c_uint * 3)(*block[:3]), (ctypes.c_uint * 3)(*block[3:6]),
                       block[6], stream.value, None, 0)
    addr = ctypes.cast(driver.lib().cuLaunchKernelEx, ctypes.c_void_p).value
    fn = ctypes.PYFUNCTYPE(ctypes.c_int)(addr)
    main.keep = cfg
    return fn, ctypes.c_void_p(ctypes.addressof(cfg))


def main():
    n = 1024
    kernel = tilelang.compile(K.vector_add(n, block=n))
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    kernel(a, b, c)
    torch.testing.assert_close(c, a + b)
    fast = kernel._fast
    g = fast.__globals__
    launch, funcs, params = g["launch"], g["FUNCS"][a.get_device()], g["params"]
    g["pack"]((a.data_ptr(), b.data_ptr(), c.data_ptr()))
    import ctypes
    stream = ctypes.c_void_p(torch._C._cuda_getCurrentRawStream(a.get_device()))
    k0 = kernel.adapter.module.kernels[0]
    block = [int(getattr(x, "value", x)) for x in k0.grid] + list(k0.block) + [k0.smem_bytes]
    args = (a, b, c)
    launch_ex, config = _launch_ex(block, stream)
    rows = [
        ("cuLaunchKernel only (ctypes, packed once)",
         lambda: launch(funcs[0], *block, stream, params, None)),
        ("cuLaunchKernelEx only (config built once)",
         lambda: launch_ex(config, funcs[0], params, None)),
        ("generated fast call kernel._fast(args)", lambda: fast(args)),
        ("kernel(a, b, c)", lambda: kernel(a, b, c)),
        ("torch.add(a, b, out=c)", lambda: torch.add(a, b, out=c)),
        ("torch._C._cuda_getCurrentRawStream", lambda: torch._C._cuda_getCurrentRawStream(0)),
    ]
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    for name, fn in rows:
        med, best = per_call_us(fn)
        print(f"{name:44s} median {med:6.2f} us   best {best:6.2f} us", flush=True)
    torch.testing.assert_close(c, a + b)


if __name__ == "__main__":
    main()
