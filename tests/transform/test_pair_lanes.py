"""pair_lanes: a vector of 16-bit floats computed two lanes at a time when lanes 2p and 2p+1
are the halves of one 32-bit word (then scaled alike); other loops keep one lane per step.
Checked on the generated CUDA; the CPU interpreter runs the element-wise program, and the
GPU tests compare the paired kernels with torch (tests/gpu/test_computed_operands.py)."""

from __future__ import annotations

import pytest

import tilelang
import tilelang.language as T

from transform_helpers import SM80, SM90, requires_compiler, requires_gpu


def expand(dtype="float16", paired_words=True, scaled=True, N=64, K=64):
    """Rows of 4-bit codes (eight per int32 word) expanded to `dtype` in shared memory and
    stored; `paired_words`: elements 2m and 2m+1 sixteen bits apart (one AND/OR per pair)."""
    # the bits of 1024.0 (float16) or 128.0 (bfloat16), whose last mantissa bits count by one
    mantissa, offset = (0x6400, 1024.0) if dtype == "float16" else (0x4300, 128.0)

    @T.prim_func
    def main(W: T.Tensor((N, K // 8), "int32"), S: T.Tensor((N,), dtype),
             Out: T.Tensor((N, K), dtype)):
        with T.Kernel(1, threads=128) as _:
            Ws = T.alloc_shared((N, K // 8), "int32")
            Bs = T.alloc_shared((N, K), dtype)
            T.copy(W, Ws)
            for i, j in T.Parallel(N, K):
                word = T.cast(Ws[i, j // 8], "uint32")
                if paired_words:
                    pair = (word >> (j % 8 // 2 * 4)) & 0x000F000F | (mantissa * 0x10001)
                    bits = T.cast(pair >> (j % 2 * 16), "uint16")
                else:
                    bits = T.cast((word >> (j % 8 * 4)) & 0xF | mantissa, "uint16")
                w = T.reinterpret(bits, dtype) - T.cast(offset, dtype)
                Bs[i, j] = w * S[i] if scaled else w
            T.copy(Bs, Out)

    return main


def _expansion(src):
    start = src.index("Bs_vec[32]")  # four groups of eight, stored after all are computed
    return src[start:src.index("tl::copy_vec<16>((&Bs[", start)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("target", [SM80, SM90])
def test_halves_of_one_word_pair_up(dtype, target):
    code = _expansion(tilelang.lower(expand(dtype), target=target))
    ctype = "half_t" if dtype == "float16" else "bfloat16_t"
    assert "vp < 4" in code and f"tl::bit_cast<tl::vec<{ctype}, 2>>" in code
    # the scale and the offset are the same in both lanes
    assert code.count(f"tl::broadcast<{ctype}, 2>") == 2
    assert ">> 16" not in code  # the odd lane is the high half, not a shifted copy


def test_unscaled_expansion_pairs_too():
    code = _expansion(tilelang.lower(expand(scaled=False), target=SM90))
    assert "vp < 4" in code and code.count("tl::broadcast<half_t, 2>") == 1


def test_codes_from_separate_shifts_stay_per_lane():
    code = _expansion(tilelang.lower(expand(paired_words=False), target=SM90))
    assert "vi < 8" in code and "tl::vec<half_t, 2>" not in code


@requires_compiler
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_paired_expansion_compiles(dtype):
    tilelang.compile(expand(dtype), target=SM90)
    tilelang.compile(expand(dtype), target=SM80)


def _run(target, dtype="float16", device="cpu", N=64, K=64):
    """The expansion of fresh random codes on `target`, and torch's (code * scale, one
    rounding: both must agree bit for bit)."""
    import torch

    tdt = getattr(torch, dtype)
    codes = torch.randint(0, 16, (N, K), dtype=torch.int64)
    # elements 2m and 2m+1 of a word in nibbles m and m + 4
    c = codes.reshape(N, K // 8, 8)
    nib = torch.cat([c[..., 0::2], c[..., 1::2]], dim=-1)
    words = sum(nib[..., m] << (4 * m) for m in range(8))
    words = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
    scale = (torch.rand(N) + 0.5).to(tdt)
    out = torch.full((N, K), float("nan"), dtype=tdt, device=device)
    tilelang.compile(expand(dtype), target=target)(words.to(device), scale.to(device), out)
    return out.cpu(), codes.to(tdt) * scale[:, None]


def test_the_interpreter_runs_the_element_wise_program():
    out, ref = _run("cpu")
    assert torch_equal(out, ref)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_paired_expansion_on_the_gpu_matches_bit_for_bit(dtype):
    out, ref = _run("cuda", dtype, "cuda")
    assert torch_equal(out, ref)


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a.view(torch.int16), b.view(torch.int16))
