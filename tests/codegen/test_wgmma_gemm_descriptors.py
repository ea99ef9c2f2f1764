"""Every wgmma gemm builds its own shared-memory descriptors (tl/gemm_sm90.cuh,
`detail::gemm_local_addr`): two gemms that read the same shared tile (the stages of a
`T.unroll` loop, like the score gemm of an attention consumer reading Q) issue their wgmmas
with descriptor registers of their own in the PTX. When the compiler may share them
(TL_WGMMA_SHARED_DESC, the `shared_wgmma_desc` experiment) it computes them once and keeps
them live across everything between the gemms, which spilled the sparse MLA forward's
consumer."""

import os
import re
import subprocess
import tempfile

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import toolkit

requires_nvcc = pytest.mark.skipif(toolkit.nvcc_path() is None, reason="nvcc not installed")


def score_stages(M=64, N=64, K=128, stages=2, rounds=2):
    """S[:, block] = Q @ KV[block]^T for rounds * stages blocks of N rows, Q staged once in
    shared memory and read by the gemm of every stage of the unrolled stage loop."""
    W = rounds * stages * N

    @T.prim_func
    def kernel(Q: T.Tensor((M, K), "bfloat16"), KV: T.Tensor((W, K), "bfloat16"),
               S: T.Tensor((M, W), "float32")):
        with T.Kernel(1, threads=128) as _:
            q = T.alloc_shared((M, K), "bfloat16")
            kv = T.alloc_shared((stages, N, K), "bfloat16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(Q, q)
            for r in T.serial(rounds):
                for s in T.unroll(stages):
                    blk = r * stages + s
                    T.copy(KV[blk * N:(blk + 1) * N, :], kv[s, :, :])
                    T.gemm(q, kv[s, :, :], acc, transpose_B=True, clear_accum=True)
                    T.copy(acc, S[0, blk * N])
    return kernel


def _ptx(source: str, defines=()) -> str:
    with tempfile.TemporaryDirectory(prefix="tl-wgmma-desc-") as d:
        cu, out = os.path.join(d, "k.cu"), os.path.join(d, "k.ptx")
        with open(cu, "w") as f:
            f.write(source)
        cmd = [toolkit.nvcc_path(), "-ptx", "-arch=sm_90a", "-std=c++17", "-O3", *defines,
               *[f"-I{i}" for i in toolkit.include_dirs()], "-o", out, cu]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        with open(out) as f:
            return f.read()


def _a_descriptors_per_gemm(ptx: str) -> list[set]:
    """For each gemm (wgmmas between a wgmma.fence and the next commit), the registers that
    hold its A descriptors (the operand after the accumulator list)."""
    gemms = []
    for chunk in ptx.split("wgmma.fence.sync.aligned")[1:]:
        body = chunk.split("wgmma.commit_group.sync.aligned")[0]
        regs = set(re.findall(r"wgmma\.mma_async[^{]*\{[^}]*\},\s*(%rd\d+),", body))
        if regs:
            gemms.append(regs)
    return gemms


@requires_nvcc
def test_each_gemm_builds_its_own_descriptors():
    src = tilelang.lower(score_stages(), target="cuda -arch=sm_90a")
    assert "tl::wgmma_gemm_ss<" in src
    gemms = _a_descriptors_per_gemm(_ptx(src))
    assert len(gemms) == 2 and all(len(g) == 8 for g in gemms)  # 2 stages x 8 k-steps
    assert not gemms[0] & gemms[1]
    # the switch that lets the compiler share them: the stage-1 gemm reuses stage 0's
    shared = _a_descriptors_per_gemm(_ptx(src, ["-DTL_WGMMA_SHARED_DESC"]))
    assert shared[0] == shared[1]


def test_the_experiment_switch_defines_the_macro(monkeypatch):
    monkeypatch.delenv("TL_EXPERIMENT", raising=False)
    assert "TL_WGMMA_SHARED_DESC" not in tilelang.lower(score_stages(), target="cuda -arch=sm_90a")
    monkeypatch.setenv("TL_EXPERIMENT", "shared_wgmma_desc")
    src = tilelang.lower(score_stages(), target="cuda -arch=sm_90a")
    assert src.index("#define TL_WGMMA_SHARED_DESC") < src.index('#include "tl/common.cuh"')


def test_interpreter():
    q, kv = torch.randn(64, 128).bfloat16(), torch.randn(256, 128).bfloat16()
    s = torch.full((64, 256), float("nan"))
    tilelang.compile(score_stages(), target="cpu")(q, kv, s)
    torch.testing.assert_close(s, q.float() @ kv.float().T, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("experiment", ["", "shared_wgmma_desc"])
def test_gpu_matches_torch(monkeypatch, experiment):
    monkeypatch.setenv("TL_EXPERIMENT", experiment)
    q = torch.randn(64, 192, device="cuda").bfloat16()
    kv = torch.randn(3 * 2 * 64, 192, device="cuda").bfloat16()
    s = torch.full((64, 384), float("nan"), device="cuda")
    tilelang.compile(score_stages(K=192, rounds=3), target="cuda")(q, kv, s)
    torch.testing.assert_close(s, q.float() @ kv.float().T, rtol=1e-3, atol=1e-3)
