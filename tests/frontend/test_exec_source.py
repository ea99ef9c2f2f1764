"""Kernels whose source is unavailable (built with exec): frontend/rewrite.py warns and traces
the function as it is, without the control-flow rewrite. Straight-line kernels and kernel loops
(LoopSpec iterates without the rewrite) still work; a condition on a kernel value fails with
a message that says what to do. A source file edited after import is detected rather than
traced as whichever function now sits at the old line."""

import importlib.util
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.frontend.rewrite import rewrite
from tilelang.ir import nodes as ir
from tilelang.ir.visitor import collect

SIMPLE = '''
@T.prim_func
def axpb(A: T.Tensor((16,), T.float32), B: T.Tensor((17,), T.float32)):
    with T.Kernel(2, threads=8) as bx:
        for i in T.Parallel(8):
            x = A[bx * 8 + i] * 2.0
            B[bx * 8 + i] = x + 1.0
        if SCALE > 1:
            B[16] = SCALE
'''

KERNEL_IF = '''
@T.prim_func
def relu(A: T.Tensor((8,), T.float32)):
    with T.Kernel(1, threads=1):
        for i in T.serial(8):
            if A[i] < 0.0:
                A[i] = 0.0
'''

MACRO = '''
@T.macro
def twice(x):
    return x * 2.0
'''


def exec_source(src, **names):
    ns = {"T": T, **names}
    exec(compile(src, "<generated>", "exec"), ns)
    return ns


def test_exec_kernel_warns_and_still_traces_and_runs():
    with pytest.warns(UserWarning, match="source of axpb is unavailable") as rec:
        f = exec_source(SIMPLE, SCALE=3.0)["axpb"]
    assert "without the control-flow rewrite" in str(rec[0].message)
    # attributed to the kernel's own definition, not to a compiler file
    assert rec[0].filename == "<generated>" and rec[0].lineno >= 1
    assert isinstance(f, ir.PrimFunc) and f.name == "axpb"
    # no rewrite: `x = ...` is a plain Python name, so the expression is inlined (no let)
    assert collect(f.body, lambda n: isinstance(n, ir.LetStmt)) == []
    (loop,) = collect(f.body, lambda n: isinstance(n, ir.For))
    assert loop.kind == "parallel" and loop.extent.value == 8
    # the Python `if` on a closure value ran natively: its store is there, no IR If
    assert collect(f.body, lambda n: isinstance(n, ir.If)) == []
    assert len(collect(f.body, lambda n: isinstance(n, ir.Store))) == 2
    a = torch.from_numpy(np.random.default_rng(2).standard_normal(16).astype(np.float32))
    b = torch.zeros(17)
    tilelang.compile(f, target="cpu")(a, b)
    want = np.append(a.numpy() * 2 + 1, 3.0)
    np.testing.assert_allclose(b.numpy(), want, rtol=1e-6)


def test_exec_kernel_ir_has_no_user_locations():
    with pytest.warns(UserWarning):
        f = exec_source(SIMPLE, SCALE=1)["axpb"]
    stores = collect(f.body, lambda n: isinstance(n, ir.Store))
    assert len(stores) == 1 and stores[0].loc is None


def test_exec_kernel_condition_on_kernel_value_fails_with_advice():
    with pytest.warns(UserWarning, match="conditions on kernel values will fail"):
        with pytest.raises(TypeError, match="concrete bool.*T.if_then_else"):
            exec_source(KERNEL_IF)


def test_rewrite_returns_the_function_itself_when_source_is_unavailable():
    ns = {}
    exec(compile("def g(x):\n    return x + 1\n", "<nowhere>", "exec"), ns)
    with pytest.warns(UserWarning, match="source of g is unavailable"):
        assert rewrite(ns["g"]) is ns["g"]


def test_exec_macro_used_from_a_normal_kernel():
    twice = exec_source(MACRO)["twice"]

    with pytest.warns(UserWarning, match="source of twice is unavailable"):
        @T.prim_func
        def f(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=4):
                for i in T.Parallel(4):
                    A[i] = twice(A[i])

    a = torch.arange(4, dtype=torch.float32)
    tilelang.compile(f, target="cpu")(a)
    assert a.tolist() == [0.0, 2.0, 4.0, 6.0]


def test_normal_kernels_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @T.prim_func
        def f(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1):
                if A[0] > 0.0:
                    A[0] = 0.0

    assert len(collect(f.body, lambda n: isinstance(n, ir.If))) == 1


MODULE = '''\
import tilelang.language as T


def make():
    @T.prim_func
    def kern(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                x = A[i] * 3.0
                A[i] = x
    return kern
'''


def import_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_source_edited_after_import_is_not_traced_as_another_function(tmp_path):
    # Regression: the rewrite read the function's lines from the file as it is now; after an
    # edit those lines belonged to another function, which was silently traced instead.
    path = tmp_path / "edited_kernels.py"
    path.write_text(MODULE)
    module = import_file(path, "edited_kernels")
    shifted = MODULE.replace("def make():", "def other():\n    return 1\n\n\ndef make():")
    shifted = shifted.replace("    def kern(", "    def kern_renamed(")
    path.write_text(shifted)
    with pytest.warns(UserWarning, match="no longer matches"):
        f = module.make()
    assert f.name == "kern"
    (store,) = collect(f.body, lambda n: isinstance(n, ir.Store))
    assert isinstance(store.value, ir.Binary) and store.value.op == "mul"


def test_identical_kernels_in_two_files_keep_their_own_locations(tmp_path):
    # Regression: the rewrite cache was keyed by the code object, which compares by value and
    # ignores the file, so the second file's kernel reported the first file's locations.
    files = []
    for name in ("twin_a", "twin_b"):
        path = tmp_path / f"{name}.py"
        path.write_text(MODULE)
        files.append((str(path), import_file(path, name).make()))
    for path, f in files:
        (store,) = collect(f.body, lambda n: isinstance(n, ir.Store))
        assert store.loc.filename == path


STDIN_PROGRAM = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1], target="cpu")
def double(N, block=32):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=32) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2.0
    return main


@tilelang.jit(out_idx=[1], target="cpu")
def first_block_only(N, block=32):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=32) as bx:
            if bx == 0:
                for i in T.Parallel(block):
                    B[i] = A[i]
    return main


a = torch.arange(64, dtype=torch.float32)
assert torch.equal(double(64)(a), a * 2)
print("straight-line kernel: ok")
try:
    first_block_only(64)
except TypeError as e:
    print("condition on a kernel value:", e)
'''


def test_a_kernel_typed_into_python_stdin_runs_as_debugging_md_says():
    """docs/debugging.md: code typed into `python -` is traced without the rewrite, with a
    warning; straight-line kernels work, a condition on a kernel value is a TypeError."""
    proc = subprocess.run([sys.executable, "-"], input=STDIN_PROGRAM, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "source of double.<locals>.main is unavailable" in proc.stderr
    assert "without the control-flow rewrite" in proc.stderr
    assert "straight-line kernel: ok" in proc.stdout
    assert "condition on a kernel value: a symbolic kernel value" in proc.stdout
