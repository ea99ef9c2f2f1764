"""Reference-style programs run unchanged: kernels from compat_programs.py called the way the
reference docs call them, checked against torch in float32 (float64 for the attention and
quantised programs). Each runs on the CPU target, and on the GPU (marked gpu) where there is
one; a kernel with injected CUDA is refused by the CPU target and compiled for sm_80/sm_90a."""

import itertools
import math
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
from tilelang.runtime import compile_cuda, toolkit  # noqa: E402
from device_params import DEVICES


requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


def rel_err(out, ref):
    """Relative error in float64 (after checking nothing was left unwritten)."""
    assert not torch.isnan(out).any(), "NaN in the output"
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm()).item()


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


# ---- FlashAttention forward (T.macro pieces, T.Pipelined, online softmax) ----------------------
def attention_ref(q, k, v, is_causal):
    """softmax(Q K^T / sqrt(d)) V in float64; causal: query i (the last seq_q positions of the
    sequence) sees keys 0 .. i + seq_kv - seq_q."""
    q, k, v = (x.double() for x in (q, k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        seq_q, seq_kv = s.shape[-2:]
        visible = torch.ones(seq_q, seq_kv, dtype=torch.bool, device=s.device).tril(
            seq_kv - seq_q)
        s = s.masked_fill(~visible, -math.inf)
    return torch.softmax(s, dim=-1) @ v


FA_CASES = [
    # (device, batch, heads, seq_q, seq_kv, dim, is_causal, tile config)
    ("cpu", 1, 2, 80, 80, 64, False, {}),
    ("cpu", 1, 2, 80, 80, 64, True, {}),
    ("cpu", 1, 2, 64, 100, 64, True, {}),      # past_len 36, ragged last key tile
    ("cpu", 1, 2, 72, 128, 64, False, {}),
    ("cuda", 2, 4, 512, 512, 64, False, {}),
    ("cuda", 2, 4, 512, 512, 64, True, {}),
    ("cuda", 2, 4, 512, 512, 128, False, dict(block_M=128, num_stages=2, threads=256)),
    ("cuda", 2, 4, 512, 512, 128, True, dict(block_M=128, num_stages=2, threads=256)),
    ("cuda", 2, 4, 448, 500, 128, True, dict(block_M=128, num_stages=2, threads=256)),
]


def _on(device, *values):
    return values if device == "cpu" else pytest.param(*values, marks=DEVICES[1].marks)


@pytest.mark.parametrize("device,B,H,seq_q,seq_kv,D,causal,cfg",
                         [_on(c[0], *c) for c in FA_CASES])
def test_flash_attention_bhsd_macros(device, B, H, seq_q, seq_kv, D, causal, cfg):
    kernel = P.flashattn_bhsd(B, H, seq_q, seq_kv, D, causal, **cfg)
    q = torch.randn(B, H, seq_q, D, device=device, dtype=torch.float16)
    k = torch.randn(B, H, seq_kv, D, device=device, dtype=torch.float16)
    v = torch.randn(B, H, seq_kv, D, device=device, dtype=torch.float16)
    out = kernel(q, k, v)
    assert out.shape == q.shape and out.dtype == torch.float16 and out.device == q.device
    assert rel_err(out, attention_ref(q, k, v, causal)) < 2e-3


# ---- dequantising GEMM: T.import_source + T.call_extern ---------------------------------------
DQ_CPU = (64, 128, 256, 64, 64, 64, {})
DQ_GPU = (200, 512, 1024, 128, 128, 64, dict(num_stages=3))


def _dequant_inputs(M, N, K, device):
    a = torch.randn(M, K, device=device, dtype=torch.float16)
    packed = torch.randint(0, 256, (N, K // 2), device=device, dtype=torch.uint8)
    scale = (torch.rand(N, device=device) + 0.5).half()
    c = torch.full((M, N), float("nan"), device=device, dtype=torch.float16)
    return a, packed, scale, c


def _dequant_ref(a, packed, scale):
    codes = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(packed.shape[0], -1)
    w = (codes.double() - 8) * scale.double()[:, None]
    return a.double() @ w.t()


def test_dequant_gemm_injected_cuda_is_refused_on_cpu():
    M, N, K, bm, bn, bk, cfg = DQ_CPU
    msg = ("kernel main contains injected CUDA (T.call_extern of `decode_u4s8_to_f16`) and "
           "runs only on the GPU; the CPU interpreter cannot execute it")
    func = P.dequant_gemm_u4.get_tir(M, N, K, bm, bn, bk, **cfg)
    with pytest.raises(NotImplementedError) as info:
        tilelang.compile(func, target="cpu")
    assert str(info.value) == msg
    # called the reference way on CPU tensors: the same error, and nothing was written
    a, packed, scale, c = _dequant_inputs(M, N, K, "cpu")
    with pytest.raises(NotImplementedError) as info:
        P.dequant_gemm_u4(M, N, K, bm, bn, bk, **cfg)(a, packed, scale, c)
    assert str(info.value) == msg
    assert torch.isnan(c).all()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_dequant_gemm_injected_cuda_lowers(arch):
    M, N, K, bm, bn, bk, cfg = DQ_GPU
    src = tilelang.lower(P.dequant_gemm_u4.get_tir(M, N, K, bm, bn, bk, **cfg),
                         target=f"cuda -arch={arch}")
    # the device function is emitted once, before the kernel that calls it
    assert src.count("__device__ void decode_u4s8_to_f16(") == 1
    call = "decode_u4s8_to_f16((&B_local[0]), (&B_dequantize_local[0]), 8);"
    assert call in src
    assert src.index("__device__ void decode_u4s8_to_f16(") < src.index("__global__")


@requires_compiler
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_dequant_gemm_injected_cuda_compiles(arch):
    M, N, K, bm, bn, bk, cfg = DQ_GPU
    func = P.dequant_gemm_u4.get_tir(M, N, K, bm, bn, bk, **cfg)
    compile_cuda(tilelang.lower(func, target=f"cuda -arch={arch}"), arch)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_dequant_gemm_injected_cuda_on_gpu():
    M, N, K, bm, bn, bk, cfg = DQ_GPU
    kernel = P.dequant_gemm_u4(M, N, K, bm, bn, bk, **cfg)
    a, packed, scale, c = _dequant_inputs(M, N, K, "cuda")
    kernel(a, packed, scale, c)
    assert rel_err(c, _dequant_ref(a, packed, scale)) < 2e-3


# ---- MLA decode: split-KV kernel + combine kernel, T.alloc_global workspaces -------------------
def mla_ref(q, q_pe, kv, k_pe):
    """Every head attends to the one latent cache: keys KV ++ K_pe, values KV (float64)."""
    qf = torch.cat([q, q_pe], dim=-1).double()               # B, H, dim + pe
    kf = torch.cat([kv, k_pe], dim=-1).double()[:, :, 0]     # B, S, dim + pe
    p = torch.softmax(qf @ kf.transpose(1, 2) / math.sqrt(qf.shape[-1]), dim=-1)
    return p @ kv.double()[:, :, 0]                          # B, H, dim


MLA_CASES = [
    # (device, batch, heads, seqlen_kv, dim, pe_dim, block_N, block_H, num_split, threads)
    ("cpu", 2, 16, 200, 64, 16, 32, 16, 2, 128),  # splits of 100 keys: the last tile masked
    ("cpu", 1, 32, 128, 64, 16, 32, 16, 4, 128),
    ("cuda", 2, 128, 2000, 256, 64, 64, 64, 4, 256),
    ("cuda", 4, 64, 4096, 256, 64, 64, 64, 8, 256),
]


@pytest.mark.parametrize("device,B,H,S,D,PE,block_N,block_H,num_split,threads",
                         [_on(c[0], *c) for c in MLA_CASES])
def test_mla_decode_split_kv_two_kernels(device, B, H, S, D, PE, block_N, block_H, num_split,
                                         threads):
    kernel = P.mla_decode_split(B, H, 1, S, D, PE, block_N, block_H, num_split,
                                threads=threads)
    q = torch.randn(B, H, D, device=device, dtype=torch.float16)
    q_pe = torch.randn(B, H, PE, device=device, dtype=torch.float16)
    kv = torch.randn(B, S, 1, D, device=device, dtype=torch.float16)
    k_pe = torch.randn(B, S, 1, PE, device=device, dtype=torch.float16)
    out = kernel(q, q_pe, kv, k_pe)
    assert out.shape == (B, H, D) and out.device == q.device
    assert rel_err(out, mla_ref(q, q_pe, kv, k_pe)) < 2e-3
