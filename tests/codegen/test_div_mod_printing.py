"""Integer floor division and modulo in the generated CUDA. By a power of two of an operand
known to be non-negative they print as a shift / mask (what they mean on such a value: nvcc
keeps `tx / 4` of a signed index as signed division); by any other divisor as C's `/` and `%`;
of an operand that may be negative as tl::floordiv / tl::floormod. C ranks `&` below comparisons and shifts below `+`: what
the printed text means in C is checked by the CUDA compiler itself, which evaluates the
kernel's statements as a constant expression against Python's `//` and `%`."""

import re

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.arith import Analyzer
from tilelang.codegen.cuda import CudaPrinter
from tilelang.ir import nodes as ir
from tilelang.runtime import toolkit
from tilelang.runtime.compiler import CudaCompileError, compile_cuda

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")

BLOCKS, THREADS, ROWS = 4, 128, 10
SM90 = "cuda -arch=sm_90a"


def _indices():
    @T.prim_func
    def main(A: T.Tensor((THREADS,), "int32"), Out: T.Tensor((ROWS, BLOCKS * THREADS), "int32")):
        with T.Kernel(BLOCKS, threads=THREADS) as bx:
            tx = T.get_thread_binding()
            n = T.alloc_var("int32")
            m = T.alloc_var("int32")
            Out[0, bx * THREADS + tx] = (tx + bx) // 4
            Out[1, bx * THREADS + tx] = bx + tx % 4
            Out[2, bx * THREADS + tx] = tx // 4 % 8
            Out[3, bx * THREADS + tx] = T.if_then_else(tx % 32 == 0, 1, 0)
            Out[4, bx * THREADS + tx] = tx // 3 + tx % 3 * 2
            Out[5, bx * THREADS + tx] = A[tx] // 8  # may be negative
            Out[6, bx * THREADS + tx] = A[tx] % 8
            Out[7, bx * THREADS + tx] = (tx * 2 + bx) % 16 ^ bx
            n = 0
            for k in T.serial((tx + bx) % 4):  # a trip count under a mask
                n = n + k + 1
            Out[8, bx * THREADS + tx] = n
            m = 0
            for k in T.serial(tx % 4 | bx):  # and under a bitwise or of one
                m = m + 1
            Out[9, bx * THREADS + tx] = m

    return main


def _expected(a: np.ndarray) -> np.ndarray:
    """The rows of _indices() with Python's `//` and `%`."""
    want = np.zeros((ROWS, BLOCKS * THREADS), np.int64)
    for bx in range(BLOCKS):
        for tx in range(THREADS):
            col = bx * THREADS + tx
            want[:, col] = [(tx + bx) // 4, bx + tx % 4, tx // 4 % 8, int(tx % 32 == 0),
                            tx // 3 + tx % 3 * 2, a[tx] // 8, a[tx] % 8,
                            (tx * 2 + bx) % 16 ^ bx, sum(k + 1 for k in range((tx + bx) % 4)),
                            tx % 4 | bx]
    return want


def _body(src: str) -> str:
    """The kernel's statements after its index declarations."""
    start = src.index("const int tx = threadIdx.x;\n") + len("const int tx = threadIdx.x;\n")
    return src[start:src.rindex("}")]


def _source() -> str:
    return tilelang.lower(_indices(), target=SM90)


def test_powers_of_two_of_a_non_negative_index_print_as_shifts_and_masks():
    body = _body(_source())
    assert "= (bx + tx) >> 2;" in body, body
    assert "= bx + (tx & 3);" in body, body
    assert "= (tx >> 2) & 7;" in body, body
    assert "(((tx & 31) == 0) ? 1 : 0)" in body, body
    assert "= ((tx * 2 + bx) & 15) ^ bx;" in body, body
    assert re.search(r"for \(int k = 0; k < \(\(bx \+ tx\) & 3\); \+\+k\)", body), body
    assert re.search(r"for \(int k_1 = 0; k_1 < \(\(tx & 3\) \| bx\); \+\+k_1\)", body), body
    # a divisor other than a power of two: C's operators, the operand being non-negative
    assert "tx / 3" in body and "tx % 3" in body, body
    # an operand that may be negative: the sign-correcting helpers, whatever the divisor
    assert "tl::floordiv(A[tx], 8)" in body and "tl::floormod(A[tx], 8)" in body, body
    assert not re.search(r"[/%] (2|4|8|16|32)\b", body), body


def test_values_on_the_interpreter():
    a = torch.randint(-100, 100, (THREADS,), dtype=torch.int32)
    out = torch.full((ROWS, BLOCKS * THREADS), -12345, dtype=torch.int32)
    tilelang.compile(_indices(), target="cpu")(a, out)
    np.testing.assert_array_equal(out.numpy(), _expected(a.numpy()))


def _check_c(src: str):
    """The kernel's statements (but the tl:: helpers, which are not constexpr) run for every
    (bx, tx) inside a constexpr function; the compiler rejects the file unless every element
    they write equals Python's value."""
    lines = _body(src).splitlines()
    helpers = [line for line in lines if "tl::" in line]
    assert len(helpers) == 2 and all("+ 2560]" in h or "+ 3072]" in h for h in helpers), helpers
    want = _expected(np.zeros(THREADS, np.int64))
    size, width = ROWS * BLOCKS * THREADS, BLOCKS * THREADS
    statements = "\n".join(line for line in lines if "tl::" not in line)
    test = f"""
constexpr int want[{size}] = {{{", ".join(str(v) for v in want.reshape(-1))}}};
__host__ __device__ constexpr int first_mismatch() {{
  int Out[{size}] = {{}};
  for (int bx = 0; bx < {BLOCKS}; ++bx) {{
    for (int tx = 0; tx < {THREADS}; ++tx) {{
{statements}
    }}
  }}
  for (int i = 0; i < {size}; ++i) {{
    const bool by_helper = i / {width} == 5 || i / {width} == 6;  // the rows left out
    if (!by_helper && Out[i] != want[i]) return i;
  }}
  return -1;
}}
template <int Element> struct MismatchAt {{
  static_assert(Element == -1, "the generated statements disagree with Python here");
}};
template struct MismatchAt<first_mismatch()>;
"""
    compile_cuda(test, "sm_90a", use_cache=False)


@requires_compiler
def test_the_printed_text_means_the_same_in_c():
    src = _source()
    compile_cuda(src, "sm_90a", use_cache=False)
    _check_c(src)


@requires_compiler
def test_the_c_check_catches_a_misread_mask():
    """The check can fail: `k < bx + tx & 3`, which C reads as `(k < bx + tx) & 3`."""
    src = _source()
    assert "k < ((bx + tx) & 3)" in src
    with pytest.raises(CudaCompileError, match=r"MismatchAt<Element> \[with Element=\d+\]"):
        _check_c(src.replace("k < ((bx + tx) & 3)", "k < bx + tx & 3"))


def test_offsets_added_to_a_pointer_keep_their_mask():
    """A vector access and an access_ptr add their offset to a pointer: a masked or shifted
    offset is parenthesized (`p + i & 7` would mask the pointer)."""
    i = ir.Var("i")
    analyzer = Analyzer()
    analyzer.bind(i, 0, 64)
    printer = CudaPrinter(analyzer)
    buf = ir.Buffer("B", (64,), ir.DType("float32"), "global")
    vector = ir.Load(buf, (ir.binary("floormod", i, 8),), ir.DType("float32x4"))
    assert printer.expr(vector) == "(*(tl::vec<float, 4>*)(B + (i & 7)))"
    ptr = ir.Call("access_ptr", (buf, ir.binary("floordiv", i, 2)), ir.DType("handle"))
    assert printer.expr(ptr) == "(B + (i >> 1))"
