"""do_bench on the GPU: events, CUPTI and CUDA-graph backends agree on a torch matmul."""

import pytest
import torch

from tilelang.profiler import do_bench

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_gpu_backends_time_a_matmul():
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    b = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    fn = lambda: a @ b  # noqa: E731
    event = do_bench(fn, warmup=5, rep=50)
    median = do_bench(fn, warmup=5, rep=50, return_mode="median")
    cupti = do_bench(fn, warmup=5, rep=50, backend="cupti")
    graph = do_bench(fn, warmup=5, rep=50, backend="cudagraph")
    flops = 2 * 2048 ** 3
    for ms in (event, median, cupti, graph):
        assert 0 < ms < 100
        assert flops / (ms * 1e-3) < 5e15  # slower than any GPU's peak: a real measurement
    # kernel-only and replayed timings cannot be much slower than event timing
    assert cupti < event * 1.5 and graph < event * 1.5



def test_cupti_excludes_the_cache_flush():
    from tilelang.profiler.bench import _bench_with_cupti

    cache = torch.empty(1 << 20, dtype=torch.int32, device="cuda")
    assert _bench_with_cupti(lambda: None, cache, n_repeat=3) == 0.0
    # the same kind of kernel as the flush (a fill) is counted when fn launches it
    zeros = lambda: torch.zeros(cache.numel(), dtype=cache.dtype, device="cuda")  # noqa: E731
    assert _bench_with_cupti(zeros, cache, n_repeat=3) > 0
