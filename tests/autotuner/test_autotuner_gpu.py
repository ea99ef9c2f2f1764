"""Autotuning CUDA kernels: correctness check, disk-cache reuse, several GPUs."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.autotuner import AutoTuner

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

CONFIGS = [{"block_M": bm, "block_N": bn, "num_stages": s}
           for bm in (64, 128) for bn in (64, 128) for s in (2, 3)]



def make_matmul(check=True):
    ref = (lambda A, B: (A.float() @ B.float()).half()) if check else None

    @tilelang.autotune(configs=CONFIGS, warmup=2, rep=10, ref_prog=ref, skip_check=not check)
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=2,
               dtype="float16", accum_dtype="float"):

        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                 C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                A_s = T.alloc_shared((block_M, block_K), dtype)
                B_s = T.alloc_shared((block_K, block_N), dtype)
                C_l = T.alloc_fragment((block_M, block_N), accum_dtype)
                T.clear(C_l)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[by * block_M, k * block_K], A_s)
                    T.copy(B[k * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, C_l)
                T.copy(C_l, C[by * block_M, bx * block_N])

        return main

    return matmul


@pytest.mark.parametrize("check", [True, False])
def test_cuda_autotune_checks_times_and_reuses_cache(capsys, check):
    """With a reference program the tuning is not cached on disk (its Python code is not in
    the key: the reference's rule), so a fresh decorator tunes again; without one it reuses
    the stored winner."""
    kernel = make_matmul(check)(1024, 1024, 1024)
    out = capsys.readouterr().out
    assert f"{len(CONFIGS)} configurations, {len(CONFIGS)} ok" in out
    assert kernel.config in CONFIGS and 0 < kernel.latency < 50
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b), (a.float() @ b.float()).half(), rtol=1e-2,
                               atol=1e-2)
    AutoTuner._memory_cache.clear()
    again = make_matmul(check)(1024, 1024, 1024)  # a fresh decorator: only the disk cache
    out = capsys.readouterr().out
    if check:
        assert f"{len(CONFIGS)} configurations, {len(CONFIGS)} ok" in out
    else:
        assert "using cached best config" in out
        assert again.config == kernel.config


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_benchmarking_uses_every_gpu(monkeypatch, capsys):
    seen = []
    original = AutoTuner._bench_record

    def spy(self, record, *args, **kwargs):
        seen.append(torch.cuda.current_device())
        return original(self, record, *args, **kwargs)

    monkeypatch.setattr(AutoTuner, "_bench_record", spy)
    result_kernel = make_matmul()(512, 512, 512)
    assert set(seen) == set(range(torch.cuda.device_count()))
    assert f"{len(CONFIGS)} configurations, {len(CONFIGS)} ok" in capsys.readouterr().out
    assert result_kernel.config in CONFIGS
