"""Launching on a real GPU: compilers, the argument ABI, large dynamic shared memory, streams,
CUDA graphs, launches from a fresh thread, module unload, and device printing (SEMANTICS §14).
Skipped without a GPU."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

from rt_helpers import DEV, build, compilers, ptr, run, sm
from tilelang.runtime import CudaDriverError, launch

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
rng = np.random.default_rng(7)


ADD = r"""
#include "tl.cuh"
extern "C" __global__ void add(float* __restrict__ c, const float* __restrict__ a,
                               const float* __restrict__ b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""


@pytest.mark.parametrize("compiler", compilers())
def test_vector_add(compiler):
    fn = build(ADD, "add", ["ptr", "ptr", "ptr", "int32"], compiler=compiler)
    for n in (1, 1000, 4097):
        a, b = torch.randn(n, device=DEV), torch.randn(n, device=DEV)
        c = torch.full((n + 5,), float("nan"), device=DEV)
        run(fn, ((n + 127) // 128, 1, 1), (128, 1, 1), [ptr(c), ptr(a), ptr(b), n])
        torch.testing.assert_close(c[:n], a + b, rtol=0, atol=0)
        assert torch.isnan(c[n:]).all()
    assert fn.num_regs() > 0 and fn.local_bytes() == 0
    assert fn.max_threads_per_block() >= 128


ABI = r"""
#include "tl.cuh"
extern "C" __global__ void abi(long long* oi, double* of, signed char a, unsigned char b,
                               bool c, short d, half_t e, bfloat16_t f, int g, unsigned h,
                               float i, long long j, unsigned long long k, double l, int* tail,
                               fp8_e4_t m, unsigned short n) {
  oi[0] = a; oi[1] = b; oi[2] = c; oi[3] = d; oi[4] = g; oi[5] = h; oi[6] = j;
  oi[7] = (long long)k; oi[8] = n;
  of[0] = tl::cast<double>(e); of[1] = tl::cast<double>(f); of[2] = i; of[3] = l;
  of[4] = tl::cast<double>(m);
  tail[0] = 77;
}
"""


def test_scalar_arguments_reach_the_kernel_exactly():
    types = ["ptr", "ptr", "int8", "uint8", "bool", "int16", "float16", "bfloat16", "int32",
             "uint32", "float32", "int64", "uint64", "float64", "ptr", "float8_e4m3", "uint16"]
    fn = build(ABI, "abi", types)
    for _ in range(5):
        oi = torch.zeros(9, dtype=torch.int64, device=DEV)
        of = torch.zeros(5, dtype=torch.float64, device=DEV)
        tail = torch.zeros(1, dtype=torch.int32, device=DEV)
        v = dict(a=int(rng.integers(-128, 128)), b=int(rng.integers(0, 256)),
                 c=bool(rng.integers(0, 2)), d=int(rng.integers(-2**15, 2**15)),
                 e=float(rng.standard_normal()), f=float(rng.standard_normal()),  # noqa
                 g=int(rng.integers(-2**31, 2**31)), h=int(rng.integers(0, 2**32)),
                 i=float(rng.standard_normal()), j=int(rng.integers(-2**63, 2**63)),
                 k=int(rng.integers(0, 2**63)) * 2 + 1, l=float(rng.standard_normal()),
                 m=float(rng.uniform(-400, 400)), n=int(rng.integers(0, 2**16)))
        run(fn, (1, 1, 1), (1, 1, 1),
            [ptr(oi), ptr(of), v["a"], v["b"], v["c"], v["d"], v["e"], v["f"], v["g"], v["h"],
             v["i"], v["j"], v["k"], v["l"], ptr(tail), v["m"], v["n"]])
        k_signed = v["k"] - 2**64 if v["k"] >= 2**63 else v["k"]
        assert oi.tolist() == [v["a"], v["b"], int(v["c"]), v["d"], v["g"], v["h"], v["j"],
                               k_signed, v["n"]]
        # half scalars round once from the double; bf16 ones through float32, as torch does
        want = [float(np.float16(v["e"])), float(torch.tensor(v["f"]).bfloat16()),
                float(np.float32(v["i"])), v["l"],
                float(torch.tensor(v["m"]).to(torch.float8_e4m3fn).float())]
        assert of.tolist() == want
        assert tail.item() == 77


SMEM = r"""
#include "tl.cuh"
extern "C" __global__ void big_smem(int* out, int words) {
  extern __shared__ int buf[];
  for (int i = threadIdx.x; i < words; i += blockDim.x) buf[i] = i * 3 + blockIdx.x;
  __syncthreads();
  long long s = 0;
  for (int i = threadIdx.x; i < words; i += blockDim.x) s += buf[words - 1 - i];
  atomicAdd(reinterpret_cast<unsigned long long*>(out) + blockIdx.x, (unsigned long long)s);
}
"""


def test_dynamic_shared_memory_above_48k():
    fn = build(SMEM, "big_smem", ["ptr", "int32"])
    for kb in (16, 100, 160 if sm() >= 80 else 48):
        words = kb * 1024 // 4
        out = torch.zeros(4, dtype=torch.int64, device=DEV)
        run(fn, (4, 1, 1), (256, 1, 1), [ptr(out), words], smem=words * 4)
        want = [sum(i * 3 + b for i in range(words)) for b in range(4)]
        assert out.tolist() == want
    with pytest.raises(CudaDriverError, match="more than device 0 allows"):
        run(fn, (1, 1, 1), (32, 1, 1), [ptr(out), 16], smem=1 << 20)


def test_modules_are_unloaded_when_the_kernel_is_dropped():
    out = torch.zeros(3, device=DEV)
    finalizers = []
    for _ in range(50):
        fn = build(ADD, "add", ["ptr", "ptr", "ptr", "int32"])
        run(fn, (1, 1, 1), (32, 1, 1), [ptr(out), ptr(out), ptr(out), 3])
        modules = fn._modules
        assert len(modules) == 1
        finalizers.append((fn._finalizer, modules))
        del fn
    gc.collect()
    for fin, modules in finalizers:
        assert not fin.alive and modules == {}


def test_cuda_graph_capture_and_replay():
    inc = r"""
    extern "C" __global__ void inc(float* x, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) x[i] += 1.0f;
    }"""
    fn = build(inc, "inc", ["ptr", "int32"])
    x = torch.zeros(1000, device=DEV)
    fn.prepare(0)  # load before capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        launch(fn, (8, 1, 1), (128, 1, 1), 0, None, [ptr(x), 1000])  # None: current stream
    torch.cuda.synchronize()
    assert x.sum().item() == 0  # capture does not run the kernel
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    assert (x == 3).all()


def test_launch_follows_torch_current_stream():
    fn = build(ADD, "add", ["ptr", "ptr", "ptr", "int32"])
    s = torch.cuda.Stream()
    n = 1 << 20
    a = torch.ones(n, device=DEV)
    c = torch.zeros(n, device=DEV)
    with torch.cuda.stream(s):
        torch.cuda._sleep(10_000_000)  # keeps the side stream busy
        launch(fn, (n // 256, 1, 1), (256, 1, 1), 0, None, [ptr(c), ptr(a), ptr(a), n])
        r = c.sum()  # ordered after the kernel only if the kernel used stream s
    torch.cuda.synchronize()
    assert r.item() == 2 * n


def test_jit_fast_path_from_fresh_threads():
    """A compiled kernel whose fast call path is already built, called from new Python threads
    whose first CUDA call is the launch (no current context there): every call computes."""
    import tilelang
    import tilelang.language as T

    @T.prim_func
    def scale(A: T.Tensor((1000,), "float32"), B: T.Tensor((1000,), "float32")):
        with T.Kernel(T.ceildiv(1000, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 3.0

    kernel = tilelang.compile(scale, out_idx=[1], target="cuda")
    a = torch.randn(1000, device=DEV)
    torch.testing.assert_close(kernel(a), a * 3.0)  # builds the fast path
    assert kernel._fast is not None
    results, errors = [], []

    def work():
        try:
            results.append(kernel(a))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    for _ in range(3):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    torch.cuda.synchronize()
    assert not errors, errors
    assert len(results) == 3
    for out in results:
        torch.testing.assert_close(out, a * 3.0)


def test_launch_from_a_fresh_thread():
    fn = build(ADD, "add", ["ptr", "ptr", "ptr", "int32"])
    a = torch.arange(100, dtype=torch.float32, device=DEV)
    c = torch.zeros(100, device=DEV)
    fn.prepare(0)  # loaded here: the thread's first driver call is the launch itself
    torch.cuda.synchronize()
    errors = []

    def work():
        try:
            launch(fn, (1, 1, 1), (128, 1, 1), 0, 0, [ptr(c), ptr(a), ptr(a), 100])
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    torch.cuda.synchronize()
    assert not errors, errors
    assert torch.equal(c, 2 * a)


PRINT = r"""
#include "tl.cuh"
extern "C" __global__ void pr(int n) {
  if (threadIdx.x == 1 && blockIdx.x == 0) {
    tl::print_msg("hello");
    tl::print_var("x", 1.5f);
    tl::print_var("h", tl::cast<half_t>(2.25f));
    tl::print_var("b", tl::cast<bfloat16_t>(-3.0f));
    tl::print_var("i", n);
    tl::print_var("u", (unsigned)n);
    tl::print_var("ll", (long long)n * 1000000000LL);
    tl::print_var("t", n > 0);
    tl::print_var("f8", tl::cast<fp8_e4_t>(0.5f));
    tl::print_var("d", 0.1);
    tl::print_var("c", (signed char)n);
    tl::print_buffer_value("buffer<A, float>", "A", 7, 0.125f);
  }
}
"""


def test_print_formats(capfd):
    fn = build(PRINT, "pr", ["int32"])
    capfd.readouterr()
    run(fn, (2, 1, 1), (2, 1, 1), [-7])
    out = capfd.readouterr().out.strip().split("\n")
    head = "BlockIdx=(0, 0, 0), ThreadIdx=(1, 0, 0)"
    assert out == [
        f"msg='hello' {head}",
        f"msg='x' {head}: dtype=float value=1.500000",
        f"msg='h' {head}: dtype=half_t value=2.250000",
        f"msg='b' {head}: dtype=bfloat16_t value=-3.000000",
        f"msg='i' {head}: dtype=int value=-7",
        f"msg='u' {head}: dtype=uint value=4294967289",
        f"msg='ll' {head}: dtype=long long value=-7000000000",
        f"msg='t' {head}: dtype=bool value=false",
        f"msg='f8' {head}: dtype=fp8_e4_t value=0.500000",
        f"msg='d' {head}: dtype=double value=0.100000",
        f"msg='c' {head}: dtype=signed char value=-7",
        f"msg='buffer<A, float>' {head}: buffer=A, index=7, dtype=float value=0.125000",
    ]


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.device_count() < 2,
                    reason="needs two GPUs")
def test_launch_on_another_device():
    from tilelang.runtime import current_stream_handle

    fn = build(ADD, "add", ["ptr", "ptr", "ptr", "int32"])
    n = 3000
    for dev in (1, 0, 1):
        a = torch.randn(n, device=f"cuda:{dev}")
        c = torch.zeros(n, device=f"cuda:{dev}")
        assert torch.cuda.current_device() == 0
        launch(fn, ((n + 127) // 128, 1, 1), (128, 1, 1), 0, current_stream_handle(dev),
               [ptr(c), ptr(a), ptr(a), n], device=dev)
        torch.cuda.synchronize(dev)
        assert torch.equal(c, 2 * a)
        assert torch.cuda.current_device() == 0  # the caller's device is left as it was
    assert sorted(fn._modules) == [0, 1]
