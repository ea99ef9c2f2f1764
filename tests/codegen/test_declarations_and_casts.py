"""Generated CUDA that NVRTC must accept: a value bound inside a `T.Pipelined` loop and used by
two copies (the pipeliner copies its binding into the prologue and the prefetch: each copy is a
declaration of its own), and conversions from and to the 8-bit float types (the signedness
test of tl/common.cuh must not be instantiated on them)."""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.codegen.cuda import CudaPrinter
from tilelang.ir import nodes as ir
from tilelang.runtime import toolkit
from tilelang.runtime.compiler import compile_cuda

requires_nvrtc = pytest.mark.skipif(toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
                                    reason="needs NVRTC or nvcc")
ARCHS = ("sm_80", "sm_90a")


def test_a_var_bound_twice_in_one_scope_gets_a_second_name():
    x = ir.Var("kv_start")
    i = ir.Var("i")
    buf = ir.Buffer("out", (4,), ir.DType("int32"), "global")
    first = ir.LetStmt(x, ir.const(1), ir.Store(buf, (ir.const(0),), x))
    second = ir.LetStmt(x, ir.const(5), ir.Store(buf, (i,), x))
    p = CudaPrinter()
    p.stmt(ir.Seq((first, second)))
    text = "\n".join(p.lines)
    assert "const int kv_start = 1;" in text and "out[0] = kv_start;" in text, text
    assert "const int kv_start_1 = 5;" in text and "out[i] = kv_start_1;" in text, text


def test_a_rebinding_reads_the_outer_binding_in_its_value():
    x = ir.Var("x")
    buf = ir.Buffer("out", (4,), ir.DType("int32"), "global")
    inner = ir.LetStmt(x, ir.binary("add", x, ir.const(1)), ir.Store(buf, (ir.const(1),), x))
    p = CudaPrinter()
    p.stmt(ir.LetStmt(x, ir.const(3), ir.Seq((ir.Store(buf, (ir.const(0),), x), inner))))
    text = "\n".join(p.lines)
    assert "const int x_1 = x + 1;" in text and "out[1] = x_1;" in text, text


def _paged_copies(stages):
    @T.prim_func
    def paged(A: T.Tensor((256, 32), "float16"), B: T.Tensor((256, 32), "float16"),
              table: T.Tensor((8,), "int32"), O: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((32, 32), "float16")
            B_s = T.alloc_shared((32, 32), "float16")
            Q_s = T.alloc_shared((32, 32), "float16")
            acc = T.alloc_fragment((32, 32), "float32")
            T.clear(acc)
            T.copy(A[0:32, :], Q_s)
            for k in T.Pipelined(8, num_stages=stages):
                start = table[k] * 32  # one binding, two copies use it
                T.copy(A[start:start + 32, :], A_s)
                T.copy(B[start:start + 32, :], B_s)
                T.gemm(Q_s, A_s, acc, transpose_B=True)
                T.gemm(Q_s, B_s, acc, transpose_B=True)
            T.copy(acc, O[0:32, :])

    return paged


@requires_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("configs", [{}, {"tl.disable_warp_specialized": True}])
def test_let_used_by_two_pipelined_copies_compiles(arch, stages, configs):
    src = tilelang.lower(_paged_copies(stages), target=f"cuda -arch={arch}",
                         pass_configs=configs)
    assert compile_cuda(src, arch, name="paged", use_cache=False).cubin


def test_let_used_by_two_pipelined_copies_on_the_interpreter():
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.uniform(-1, 1, (256, 32))).half()
    b = torch.from_numpy(rng.uniform(-1, 1, (256, 32))).half()
    table = torch.tensor(rng.permutation(8), dtype=torch.int32)
    out = torch.full((32, 32), float("nan"))
    tilelang.compile(_paged_copies(2), target="cpu")(a, b, table, out)
    want = torch.zeros(32, 32)
    q = a[:32].float()
    for k in range(8):
        s = int(table[k]) * 32
        want += q @ a[s:s + 32].float().T + q @ b[s:s + 32].float().T
    torch.testing.assert_close(out, want, rtol=1e-3, atol=1e-3)


DTYPES = ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32", "float64", "int8",
          "uint8", "int16", "int32", "int64", "bool")


def _casts_from(src):
    """One kernel converting a `src` vector into every dtype of DTYPES."""
    outs = [d for d in DTYPES if d != src]

    @T.prim_func
    def casts(A: T.Tensor((64,), src), O: T.Tensor((len(outs), 64), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                for k, d in enumerate(outs):
                    O[k, i] = T.cast(T.cast(A[i], d), "float32")

    return casts


def _every_cast():
    """One kernel converting a vector of every dtype into every other dtype."""
    n = len(DTYPES)

    @T.prim_func
    def casts(A: T.Tensor((n, 64), "float32"), O: T.Tensor((n, n, 64), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                for a, src in enumerate(DTYPES):
                    for b, dst in enumerate(DTYPES):
                        O[a, b, i] = T.cast(T.cast(T.cast(A[a, i], src), dst), "float32")

    return casts


@requires_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_every_conversion_compiles(arch):
    source = tilelang.lower(_every_cast(), target=f"cuda -arch={arch}")
    assert compile_cuda(source, arch, name="casts", use_cache=False).cubin


@pytest.mark.parametrize("src", ["float8_e4m3", "float8_e5m2"])
def test_fp8_conversions_on_the_interpreter(src):
    vals = torch.tensor([-2.0, -0.5, 0.0, 0.25, 1.0, 1.5, 3.0, 96.0] * 8)  # exact in both
    a = vals.to(torch.float8_e4m3fn if src.endswith("m3") else torch.float8_e5m2)
    outs = [d for d in DTYPES if d != src]
    o = torch.full((len(outs), 64), float("nan"))
    tilelang.compile(_casts_from(src), target="cpu")(a, o)
    for k, d in enumerate(outs):
        want = a.float()
        if d in ("int8", "uint8", "int16", "int32", "int64"):
            want = want.trunc()
            if d == "uint8":
                continue  # negative values to unsigned wrap: implementation-defined in C
            if d == "int8":
                want = torch.where(want.abs() > 127, o[k], want)  # out of range: undefined
        elif d == "bool":
            want = (want != 0).float()
        torch.testing.assert_close(o[k], want, msg=f"{src} -> {d}")
