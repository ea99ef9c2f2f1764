"""A float32 register operand of an mma.sync gemm holding only TF32 numbers (filled by
converting bfloat16, float16, int8, ...) reaches the mma unrounded: `tl::as_tf32_exact`
(transform/analysis/exact_values.py); any other float32 operand is rounded with cvt.rna as
before. mHC pre's gemm rounded its 128 converted registers per k-step for nothing (256 of its
1,704 loop instructions)."""

import pytest

import tilelang
from tilelang.ir import nodes as ir
from tilelang.transform.analysis.exact_values import tf32_exact_fragments

from exact_operand_kernels import converted_a, converted_b

SM80 = "cuda -arch=sm_80"


@pytest.mark.parametrize("fill,src,exact", [
    ("copy", "bfloat16", True),
    ("copy", "float16", True),
    ("parallel", "bfloat16", True),
    ("parallel", "int8", True),
    ("shifted", "bfloat16", False),   # x + 0.1 needs more than 10 mantissa bits
    ("shared32", "float32", False),   # arbitrary float32 values
])
def test_register_a_operand(fill, src, exact):
    text = tilelang.lower(converted_a(96, 32, 256, src=src, fill=fill), target=SM80)
    gemm = next(line for line in text.splitlines() if "tl::gemm_rs<" in line)
    assert ("tl::as_tf32_exact(a32)" in gemm) is exact, gemm


def test_register_b_operand():
    text = tilelang.lower(converted_b(64, 96, 128), target=SM80)
    gemm = next(line for line in text.splitlines() if "tl::gemm_sr<" in line)
    assert "tl::as_tf32_exact(b32)" in gemm, gemm


def _frag(name):
    return ir.Buffer(name, (8,), ir.DType("float32"), "local.fragment")


def _store(buf, value):
    return ir.Store(buf, (ir.const(0),), value)


def test_analysis_follows_copies_between_fragments():
    narrow = ir.Buffer("h", (8,), ir.DType("float16"), "local.fragment")
    a, b, c = _frag("a"), _frag("b"), _frag("c")
    load = lambda buf: ir.Load(buf, (ir.const(0),), buf.dtype)  # noqa: E731
    body = ir.Seq((
        _store(a, ir.Cast(load(narrow), ir.DType("float32"))),
        _store(b, load(a)),                          # exact because a is
        _store(b, ir.const(0.5, "float32")),         # an exact constant
        _store(c, load(a)),
        _store(c, ir.const(0.1, "float32")),         # not a TF32 number
    ))
    assert tf32_exact_fragments(body) == {a, b}


def test_a_fragment_whose_address_is_taken_is_not_exact():
    narrow = ir.Buffer("h", (8,), ir.DType("bfloat16"), "local.fragment")
    a = _frag("a")
    load = ir.Load(a, (ir.const(0),), a.dtype)
    body = ir.Seq((
        _store(a, ir.Cast(ir.Load(narrow, (ir.const(0),), narrow.dtype), ir.DType("float32"))),
        ir.Evaluate(ir.Call("call_extern", ("tl::fill_from_somewhere",
                                            ir.Call("address_of", (load,), ir.DType("handle"))),
                            ir.DType("void"))),
    ))
    assert tf32_exact_fragments(body) == frozenset()


def test_interpreter_gives_the_rounded_product():
    """The CPU interpreter rounds every float32 operand (a no-op on TF32 numbers): the same
    meaning as the unrounded registers of the CUDA path."""
    import numpy as np
    import torch
    from tilelang.interp.numerics import tf32

    rng = np.random.default_rng(7)
    M, N, K = 40, 32, 128
    kernel = tilelang.compile(converted_a(M, N, K, src="bfloat16"), target="cpu")
    a = torch.from_numpy(rng.standard_normal((M, K)).astype(np.float32)).bfloat16()
    b = torch.from_numpy(rng.standard_normal((N, K)).astype(np.float32))
    c = torch.full((M, N), float("nan"))
    kernel(a, b, c)
    expect = a.double().numpy() @ tf32(b.numpy()).astype(np.float64).T
    np.testing.assert_allclose(c.double().numpy(), expect, rtol=1e-5, atol=1e-4)
