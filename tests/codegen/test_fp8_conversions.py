"""Copies that convert between float8 and 16-bit floats build for sm_90a (the header's
integer-sign trait must not compare float8 values) and convert like torch on the CPU
interpreter."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import toolkit

HAS_COMPILER = toolkit.nvrtc_backend() is not None or toolkit.nvcc_path() is not None
PAIRS = [("float8_e4m3fn", "float16"), ("float8_e5m2", "float16"), ("float8_e4m3fn", "bfloat16"),
         ("float16", "float8_e4m3fn"), ("bfloat16", "float8_e5m2")]


def _copy(src, dst, M=512):
    @T.prim_func
    def main(A: T.Tensor((M,), src), B: T.Tensor((M,), dst)):
        with T.Kernel(1, threads=128):
            T.copy(A, B)
    return main


@pytest.mark.parametrize("src,dst", PAIRS)
def test_float8_copies_convert(src, dst):
    a = (torch.randn(512) * 4).to(getattr(torch, src))
    b = torch.zeros(512, dtype=getattr(torch, dst))
    tilelang.compile(_copy(src, dst), target="cpu")(a, b)
    assert torch.equal(b.float(), a.to(getattr(torch, dst)).float())
    if HAS_COMPILER:
        tilelang.compile(_copy(src, dst), target="cuda -arch=sm_90a")
