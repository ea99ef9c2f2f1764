"""Shared helpers of the pass tests: run the CUDA pipeline of one kernel up to (and
including) a named pass, and look at the IR it leaves."""

import inspect

import pytest

import tilelang.language as T
from tilelang.engine import pipeline as P
from tilelang.engine.build import kernels_of
from tilelang.engine.context import KernelContext
from tilelang.ir import nodes as ir
from tilelang.ir.printer import print_node
from tilelang.ir.visitor import collect
from tilelang.jit.target import parse_target
from tilelang.runtime import toolkit
from tilelang.transform.inline_lets import inline_pure_lets
from tilelang.transform.pass_config import normalize_pass_configs

def marked_line(fn) -> int:
    """The line number of the line of `fn`'s source marked `# <-` (where an error or a
    warning must point)."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if "# <-" in line)


SM80 = "cuda -arch=sm_80"
SM90 = "cuda -arch=sm_90a"

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")

PASS_NAMES = [name for name, _ in P.PASSES]


def run_passes(func, until, target=SM80, configs=None, index=0):
    """(kernel, ctx) after running the pipeline on kernel `index` of `func` up to and
    including the pass named `until` (as lower_cuda does: lets inlined in the function
    first)."""
    assert until in PASS_NAMES, f"unknown pass {until!r}; passes are {PASS_NAMES}"
    func = func.with_body(inline_pure_lets(func.body))
    kernel = kernels_of(func)[index]
    ctx = KernelContext(func, kernel, parse_target(target),
                        normalize_pass_configs(configs or {}), index)
    k = kernel
    for name, step in P.PASSES:
        k = step(k, ctx)
        if name == until:
            return k, ctx
    raise AssertionError("unreachable")


def kernel_of(func, index=0) -> ir.Kernel:
    return kernels_of(func)[index]


def nodes(root, cls, pred=None):
    return collect(root, lambda n: isinstance(n, cls) and (pred is None or pred(n)))


def externs(root, prefix=""):
    """Names of the call_extern calls under `root` that start with `prefix`, in order."""
    out = []
    for c in nodes(root, ir.Call, lambda c: c.op == "call_extern"):
        if isinstance(c.args[0], str) and c.args[0].startswith(prefix):
            out.append(c.args[0])
    return out


def show(node) -> str:
    return print_node(node)


def eval_with_memory(e, env, memory):
    """The integer value of `e` (numeric.eval_index) with its loads read from `memory`
    (buffer name -> numpy array)."""
    from tilelang.ir.visitor import Mutator
    from tilelang.transform.analysis.numeric import eval_index

    class Loads(Mutator):
        def visit_Load(self, load):
            idx = tuple(int(eval_with_memory(i, env, memory)) for i in load.indices)
            return ir.const(int(memory[load.buffer.name][idx]))

    return eval_index(Loads().visit(ir.as_expr(e)), env)


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # pragma: no cover
        return False


def requires_gpu(fn):
    """Marked `gpu` (selected by `pytest -m gpu` on the device machine), skipped without one."""
    return pytest.mark.gpu(pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU")(fn))


# ---- kernels shared by several pass tests -----------------------------------------------------

BK = 32


def pipelined_gemm(K, stages, start=0, M=64, N=64):
    """C = A @ B over a T.Pipelined K loop of BK-wide tiles (one block)."""
    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((M, BK), "float16")
            Bs = T.alloc_shared((BK, N), "float16")
            Cl = T.alloc_fragment((M, N), "float32")
            T.clear(Cl)
            for ko in T.Pipelined(start, T.ceildiv(K, BK), num_stages=stages):
                T.copy(A[0, ko * BK], As)
                T.copy(B[ko * BK, 0], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C)
    return f


def guarded_gemm(K, stages, start=0, M=64, N=64, threads=128):
    """C = sum over the K tiles ko with Mask[ko] of A[:, ko] @ B[ko, :]: the whole body of the
    T.Pipelined loop (copies and gemm) under `if Mask[ko]` (a block-sparse GEMM's)."""
    n_tiles = -(-K // BK)

    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          Mask: T.Tensor((n_tiles,), "bool"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            As = T.alloc_shared((M, BK), "float16")
            Bs = T.alloc_shared((BK, N), "float16")
            Cl = T.alloc_fragment((M, N), "float32")
            T.clear(Cl)
            for ko in T.Pipelined(start, n_tiles, num_stages=stages):
                if Mask[ko]:
                    T.copy(A[0, ko * BK], As)
                    T.copy(B[ko * BK, 0], Bs)
                    T.gemm(As, Bs, Cl)
            T.copy(Cl, C)
    return f


def two_phases(in_loop):
    """Shared tiles X then Y, each filled and read transposed (by other threads); in
    sequence (disjoint lifetimes), or both inside the body of one loop."""
    @T.prim_func
    def f(A: T.Tensor((4, 64, 64), "float32"), B: T.Tensor((4, 64, 64), "float32")):
        with T.Kernel(1, threads=128):
            X = T.alloc_shared((64, 64), "float32")
            Y = T.alloc_shared((64, 64), "float32")
            if in_loop:
                for t in T.serial(4):
                    T.copy(A[t, 0, 0], X)
                    for i, j in T.Parallel(64, 64):
                        B[t, i, j] = X[j, i]
                    T.copy(A[t, 0, 0], Y)
                    for i, j in T.Parallel(64, 64):
                        B[t, i, j] += Y[j, i]
            else:
                T.copy(A[0, 0, 0], X)
                for i, j in T.Parallel(64, 64):
                    B[0, i, j] = X[j, i]
                T.copy(A[1, 0, 0], Y)
                for i, j in T.Parallel(64, 64):
                    B[1, i, j] = Y[j, i]
    return f


def gemm_with_epilogue(stages=3):
    """A 128x128 gemm tile with a pipelined K loop and a shared-memory epilogue."""
    @T.prim_func
    def f(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
          C: T.Tensor((256, 256), "float16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            As = T.alloc_shared((128, 32), "float16")
            Bs = T.alloc_shared((32, 128), "float16")
            Cs = T.alloc_shared((128, 128), "float16")
            Cl = T.alloc_fragment((128, 128), "float32")
            T.clear(Cl)
            for ko in T.Pipelined(8, num_stages=stages):
                T.copy(A[by * 128, ko * 32], As)
                T.copy(B[ko * 32, bx * 128], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, Cs)
            T.copy(Cs, C[by * 128, bx * 128])
    return f
