"""Reference-style programs run unchanged: kernels from compat_programs.py called the way the
reference docs call them, checked against torch in float32. Each runs on the CPU target, and on
the GPU (marked gpu) where there is one."""

import itertools
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compat_programs as P  # noqa: E402

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
import tilelang.testing  # noqa: E402
from tilelang.autotuner import AutoTuner, autotune  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=[
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")])]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    AutoTuner._memory_cache.clear()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (80, 72, 96)])
def test_gemm_factory_style(device, M, N, K):
    tilelang.testing.set_random_seed(0)
    kernel = P.matmul(M, N, K, 32, 32, 32)
    a = torch.randn(M, K, device=device, dtype=torch.float16)
    b = torch.randn(K, N, device=device, dtype=torch.float16)
    c = kernel(a, b)
    ref_c = torch.relu(a.float() @ b.float()).half()
    torch.testing.assert_close(c, ref_c, rtol=1e-2, atol=1e-2)
    # the seed documents' profiler usage
    profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    profiler.assert_allclose(lambda A, B: torch.relu(A.float() @ B.float()).half(),
                             rtol=1e-2, atol=1e-2)
    assert profiler.do_bench(warmup=1, rep=3) > 0


@pytest.mark.parametrize("device", DEVICES)
def test_split_k_gemm_with_atomics(device):
    M, N, K, split_k = 80, 72, 128, 4
    kernel = P.matmul_splitk(M, N, K, 32, 32, 16, split_k)
    a = torch.randn(M, K, device=device, dtype=torch.float16)
    b = torch.randn(N, K, device=device, dtype=torch.float16)
    c = torch.zeros(M, N, device=device, dtype=torch.float32)
    kernel(a, b, c)
    tilelang.testing.torch_assert_close(c, a.float() @ b.float().T, rtol=1e-3, atol=1e-3,
                                        max_mismatched_ratio=0.0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("N,K", [(8, 256), (7, 300)])
def test_gemv_alloc_local_and_shuffles(device, N, K):
    kernel = P.gemv_shuffle(N, K)
    a = torch.randn(K, device=device, dtype=torch.float16)
    b = torch.randn(N, K, device=device, dtype=torch.float16)
    c = kernel(a, b)
    torch.testing.assert_close(c.float(), b.float() @ a.float(), rtol=1e-2, atol=2e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_direct_form_and_math_helpers(device):
    n = 100
    kernel = tilelang.compile(P.elementwise_add(n), out_idx=-1)
    assert tilelang.math.cdiv(n, 32) == 4 and tilelang.math.next_power_of_2(n) == 128
    a, b = torch.randn(n, device=device), torch.randn(n, device=device)
    torch.testing.assert_close(kernel(a, b), a + b)
    assert isinstance(kernel.get_kernel_source(), str)


def get_configs():
    iter_params = dict(block_M=[32, 64], block_N=[32], num_stages=[0, 2],
                       enable_rasteration=[False])
    return [dict(zip(iter_params, values)) for values in itertools.product(*iter_params.values())]


@autotune(configs=get_configs(), warmup=0.1, rep=0.5)
@tilelang.jit(out_idx=[-1])
def matmul_tuned(M, N, K, block_M=64, block_N=64, block_K=32, num_stages=0,
                 enable_rasteration=False, dtype="float16", accum_dtype="float"):

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(panel_size=10, enable=enable_rasteration)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@pytest.mark.parametrize("device", DEVICES)
def test_autotune_example_style(device, capsys):
    matmul_tuned._tuner_cache.clear()  # tune afresh for each device
    kernel = matmul_tuned(64, 64, 64)
    assert kernel.config in get_configs() and kernel.latency > 0
    a = torch.randn(64, 64, device=device, dtype=torch.float16)
    b = torch.randn(64, 64, device=device, dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float().T, rtol=1e-2,
                               atol=1e-2)
    assert "4 configurations, 4 ok" in capsys.readouterr().out
