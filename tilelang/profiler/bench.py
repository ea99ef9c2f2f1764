"""`do_bench(fn, ...)`: how long `fn()` takes, in milliseconds.

On the GPU (backend "event", the default): one call to settle, five calls to estimate, then
`warmup` ms of warm-up calls and `rep` ms of timed calls, each timed with its own pair of CUDA
events and preceded by writing a `cache_size` MB buffer so the L2 cache holds nothing of the
inputs, and by a short GPU sleep so that the host's launch latency is not timed (`gpu_lead`).
Backend "cupti" measures device time of the kernels alone (via torch.profiler, which uses
CUPTI) with the flush subtracted; "cudagraph" captures the calls in a CUDA graph and times the
replay (no per-call launch overhead, no flush). Where one of these cannot work here it says so once
(warnings.warn) and uses events.

On the CPU (no GPU, `device="cpu"`, or backend "wall"): the same counts from host wall-clock time
(`time.perf_counter`), no flush. The CPU interpreter is slow, so the count estimate uses the first
call instead of five.

The result is `return_mode` ("mean", "median", "min", "max", or "all" for the list) of the timed
calls, or the given `quantiles` (a float for one quantile, else a list).
"""

from __future__ import annotations

import time
import warnings
from typing import Callable, Optional

_CACHE_FLUSH_ID = "tilelang::cache_flush"
_RETURN_MODES = ("min", "max", "mean", "median", "all")
_BACKENDS = ("event", "cupti", "cudagraph", "wall")
_warned: set = set()


def _warn_once(key: str, message: str):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def summarize(times_ms, quantiles=None, return_mode: str = "mean"):
    """Reduce a list of per-call times (ms) as do_bench does."""
    import torch

    times = torch.tensor([float(t) for t in times_ms], dtype=torch.float64)
    if quantiles is not None:
        q = torch.quantile(times, torch.tensor(list(quantiles), dtype=torch.float64)).tolist()
        return q[0] if len(q) == 1 else q
    if return_mode == "all":
        return times.tolist()
    if return_mode == "median":
        # the mean of the two middle values for even counts (torch.median takes the lower one)
        return float(torch.quantile(times, 0.5).item())
    return float(getattr(torch, return_mode)(times).item())


def _is_cpu_device(device) -> bool:
    if device is None:
        return False
    if isinstance(device, str):
        return device.startswith("cpu")
    return getattr(device, "type", None) == "cpu"


def do_bench(fn: Callable, warmup: float = 25, rep: float = 100, _n_warmup: int = 0,
             _n_repeat: int = 0, quantiles: Optional[list] = None, fast_flush: bool = True,
             backend: str = "event", return_mode: str = "mean", device=None,
             cache_size: int = 256, early_stop_baseline: Optional[float] = None,
             grad_to_none=None):
    """Time `fn()` in milliseconds (see the module docstring). `_n_warmup` / `_n_repeat` > 0
    override the counts derived from `warmup` / `rep` (milliseconds). With
    `early_stop_baseline`, a function whose first estimate already exceeds the baseline returns
    that estimate without the full measurement (the autotuner's `early_stop`: the baseline is
    the best latency so far times `early_stop_factor`)."""
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode must be one of {_RETURN_MODES}, got {return_mode!r}")
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    import torch

    if backend == "wall" or _is_cpu_device(device) or not torch.cuda.is_available():
        return _bench_wall(fn, warmup, rep, _n_warmup, _n_repeat, quantiles, return_mode,
                           early_stop_baseline, grad_to_none)
    ctx = torch.cuda.device(device) if device is not None else _nullcontext()
    with ctx:
        return _bench_gpu(fn, warmup, rep, _n_warmup, _n_repeat, quantiles, fast_flush,
                          backend, return_mode, cache_size, early_stop_baseline, grad_to_none)


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _counts(estimate_ms, warmup, rep, n_warmup, n_repeat):
    estimate_ms = max(estimate_ms, 1e-6)
    nw = n_warmup if n_warmup > 0 else max(1, int(warmup / estimate_ms))
    nr = n_repeat if n_repeat > 0 else max(1, int(rep / estimate_ms))
    return nw, nr


def _early(estimate_ms, quantiles, return_mode):
    """An early-stopped measurement in the shape the caller asked for."""
    return summarize([estimate_ms], quantiles, return_mode)


def _clear_grads(grad_to_none):
    for x in grad_to_none or ():
        x.grad = None


# ---- CPU: wall clock ---------------------------------------------------------------------------
def _bench_wall(fn, warmup, rep, n_warmup, n_repeat, quantiles, return_mode, baseline,
                grad_to_none):
    t0 = time.perf_counter()
    fn()
    first_ms = (time.perf_counter() - t0) * 1e3
    if baseline is not None and first_ms > baseline:
        return _early(first_ms, quantiles, return_mode)
    nw, nr = _counts(first_ms, warmup, rep, n_warmup, n_repeat)
    if n_warmup <= 0:
        # the first call was a warm-up call too, but first calls carry one-time costs (caches,
        # lazy initialisation), so at least one more runs before timing
        nw = max(1, nw - 1)
    for _ in range(nw):
        fn()
    times = []
    for _ in range(nr):
        _clear_grads(grad_to_none)
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return summarize(times, quantiles, return_mode)


# ---- GPU ---------------------------------------------------------------------------------------
def _flush_buffer(cache_size, fast_flush):
    import torch

    nbytes = int(cache_size) * 1024 * 1024
    if fast_flush:
        return torch.empty(nbytes // 4, dtype=torch.int32, device="cuda")
    return torch.empty(nbytes, dtype=torch.int8, device="cuda")


def _bench_gpu(fn, warmup, rep, n_warmup, n_repeat, quantiles, fast_flush, backend,
               return_mode, cache_size, baseline, grad_to_none):
    import torch

    fn()
    torch.cuda.synchronize()
    cache = _flush_buffer(cache_size, fast_flush)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end.record()
    end.synchronize()
    estimate_ms = start.elapsed_time(end) / 5
    if baseline is not None and estimate_ms > baseline:
        return _early(estimate_ms, quantiles, return_mode)
    nw, nr = _counts(estimate_ms, warmup, rep, n_warmup, n_repeat)
    for _ in range(nw):
        fn()
    if backend == "cupti":
        times = _times_cupti(fn, nr, cache, grad_to_none)
        if times is not None:
            return summarize(times, quantiles, return_mode)
    elif backend == "cudagraph":
        times = _times_cudagraph(fn, nr)
        if times is not None:
            return summarize(times, quantiles, return_mode)
    return summarize(_times_events(fn, nr, cache, grad_to_none), quantiles, return_mode)


# GPU cycles of work queued ahead of each timed call (~250 µs at 2 GHz): the host enqueues
# the call while the GPU is still busy, so the time from the start event to the call's first
# kernel is not the host's launch latency. Without it a call whose host side takes longer than
# the cache flush (tens of µs: tensor checks, TMA descriptors, allocations) is timed with that
# gap in it, and the result moves with the host's speed from one process to the next.
LEAD_CYCLES = 500_000


def gpu_lead(cycles: int = LEAD_CYCLES):
    """Queue `cycles` of idle GPU work on the current stream (see LEAD_CYCLES)."""
    import torch

    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        sleep(cycles)


def _times_events(fn, n, cache, grad_to_none):
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        _clear_grads(grad_to_none)
        cache.zero_()
        gpu_lead()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def _self_device_us(evt) -> float:
    t = getattr(evt, "self_device_time_total", None)  # torch >= 2.4; older: self_cuda_...
    return float(t if t is not None else getattr(evt, "self_cuda_time_total", 0.0))


def _is_device_event(evt) -> bool:
    dev = getattr(evt, "device_type", None)
    return str(getattr(dev, "name", dev)).endswith("CUDA")


def _bench_with_cupti(fn: Callable, cache, n_repeat: int) -> float:
    """Device time (ms) per call of the GPU kernels `fn` launches, measured by CUPTI (through
    torch.profiler): `n_repeat` times a cache flush then `fn`, profiled in one session. The
    flush runs inside a `record_function` range, and that range's device time is subtracted,
    so the flush never counts, even when `fn` launches the same kind of kernel (torch.zeros).
    An `fn` that launches nothing measures 0. Raises RuntimeError when the profiler records no
    GPU activity at all (CUPTI unavailable)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    with warnings.catch_warnings():
        # torch warns about its own event-cycle bookkeeping; nothing for our users to do
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(n_repeat):
                with record_function(_CACHE_FLUSH_ID):
                    cache.zero_()
                fn()
            torch.cuda.synchronize()
    kernels = flush = 0.0
    seen = False
    for evt in prof.events():
        if not _is_device_event(evt):
            continue
        seen = True
        if getattr(evt, "is_user_annotation", False):
            if evt.key == _CACHE_FLUSH_ID:
                flush += _self_device_us(evt)
        else:
            kernels += _self_device_us(evt)
    if not seen:
        raise RuntimeError("the profiler recorded no GPU activity (CUPTI unavailable?)")
    return max(kernels - flush, 0.0) / n_repeat * 1e-3


def _times_cupti(fn, n, cache, grad_to_none):
    """Per-call device time of `fn`'s kernels (see _bench_with_cupti), as a one-element list;
    None (after one warning) where CUPTI timing does not work here."""
    if grad_to_none:
        def call():
            _clear_grads(grad_to_none)
            fn()
    else:
        call = fn
    try:
        return [_bench_with_cupti(call, cache, n)]
    except Exception as exc:  # CUPTI missing, profiler busy, ...
        _warn_once("cupti", f"do_bench(backend='cupti'): CUPTI timing is unavailable here "
                            f"({type(exc).__name__}: {exc}); timing with CUDA events instead")
        return None


def _times_cudagraph(fn, n):
    """Per-call time from replaying a CUDA graph of `n` calls (several replays)."""
    import torch

    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):
            fn()
            stream.synchronize()
            with torch.cuda.graph(graph, stream=stream):
                for _ in range(n):
                    fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph.replay()
        torch.cuda.synchronize()
    except Exception as exc:
        _warn_once("cudagraph", f"do_bench(backend='cudagraph'): this function cannot be "
                                f"captured in a CUDA graph ({type(exc).__name__}: {exc}); "
                                "timing with CUDA events instead")
        return None
    times = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graph.replay()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / n)
    return times
