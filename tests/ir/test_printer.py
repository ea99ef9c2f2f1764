"""`tilelang.ir.printer`: IR printed as TileLang source. Checks the text of a small traced
kernel, that `func.script()`/`str`/`repr` agree, that the printed source traces back to the same
text (round trip), that expressions keep their meaning (precedence), and that every node type
prints."""

import importlib.util
import random
import sys

import pytest

import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.ir.dtype import DType
from tilelang.ir.printer import print_node


def small():
    @T.prim_func
    def add_one(A: T.Tensor((128,), T.float16), B: T.Tensor((128,), T.float16), n: T.int32):
        with T.Kernel(T.ceildiv(128, 64), threads=64) as bx:
            S = T.alloc_shared((64,), T.float16)
            T.copy(A[bx * 64:(bx + 1) * 64], S)
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    B[bx * 64 + i] = S[i] + 1
    return add_one


SMALL_TEXT = '''\
# from tilelang import language as T

@T.prim_func
def add_one(A: T.Tensor((128,), "float16"), B: T.Tensor((128,), "float16"), n: T.int32):
    with T.Kernel(2, threads=64) as bx:
        S = T.alloc_shared((64,), "float16")
        T.copy(A[bx * 64:bx * 64 + 64], S)
        for i in T.Parallel(64):
            if bx * 64 + i < n:
                B[bx * 64 + i] = S[i] + T.float16(1.0)
'''


def test_small_kernel_prints_exactly():
    f = small()
    assert f.script() == SMALL_TEXT
    assert str(f) == repr(f) == print_node(f) == SMALL_TEXT


def test_statement_and_expression_entry_points():
    f = small()
    (kernel,) = [s for s in [f.body] if isinstance(s, ir.Kernel)]
    text = str(kernel)
    assert text.splitlines()[0] == "with T.Kernel(2, threads=64) as bx:"
    assert str(kernel.body).splitlines()[0] == "T.copy(A[bx * 64:bx * 64 + 64], S)"
    x = ir.Var("x")
    assert str(x * 2 + 1) == "x * 2 + 1" and repr(x + 1) == "<Binary: x + 1>"


def rich(N, chunks):
    m = T.dynamic("m")

    @T.prim_func
    def rich_kernel(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16),
                    C: T.Tensor((64, 64), T.float32), D: T.Tensor((m, 4), T.float32),
                    s: T.float32, n: T.int32):
        with T.Kernel(1, 2, threads=128) as (bx, by):
            As = T.alloc_shared((64, 32), T.float16)
            Bs = T.alloc_shared((32, 64), T.float16)
            Cf = T.alloc_fragment((64, 64), T.float32)
            Rf = T.alloc_fragment((64,), T.float32)
            T.clear(Cf)
            for k in T.Pipelined(chunks, num_stages=2):
                T.copy(A[0:64, k * 32:(k + 1) * 32], As)
                T.copy(B, Bs)
                T.gemm(As, Bs, Cf, transpose_B=False)
            T.reduce_max(Cf, Rf, dim=1)
            T.reduce_sum(Cf, Rf, dim=1, clear=False)
            T.cumsum(Cf, dim=1, reverse=True)
            T.copy(Cf, C)
            v = T.alloc_var(T.int32, 0)
            for i in T.unroll(2, 10, 2):
                v = v + i
            x = C[0, 0] * s
            x = x + 1.0
            tx = T.get_thread_binding()
            if tx < n and not (x > 3.0):
                C[tx, 0] = -x
            elif tx == N:
                C[0, 1] = T.infinity("float32")
            else:
                C[1, 1] = T.max(C[1, 1], 0.0)
            while v > 0:
                v = v - 3
                if v == 4:
                    break
            for i in T.serial(m):
                if i % 2 == 0:
                    continue
                D[i, 0] = T.if_then_else(D[i, 1] > 0.0, T.exp(D[i, 1]), T.cast(v, "float32"))
            for i, j in T.Parallel(64, 64):
                C[i, j] = C[i, j] + Cf[i, j]
            T.atomic_add(C[0, 0], 1.0)
            old = T.atomic_max(C[0, 2], 2.0, return_prev=True)
            C[0, 3] = old
            T.print(C[0, 0], msg="c00")
            T.device_assert(v < 100, "v too big")

    return rich_kernel


def load_printed(tmp_path, func, name):
    """Write the printed source as a module and import it (the frontend needs real source)."""
    src = func.script().replace("# from tilelang import language as T",
                                "from tilelang import language as T")
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return getattr(module, func.name)


@pytest.mark.parametrize("make", [small, lambda: rich(100, 1)], ids=["small", "rich"])
def test_printed_source_traces_back_to_the_same_text(tmp_path, make):
    f = make()
    g = load_printed(tmp_path, f, f"printed_{f.name}")
    assert g.script() == f.script()
    assert isinstance(g, ir.PrimFunc) and len(g.params) == len(f.params)


def test_rich_kernel_key_lines():
    text = rich(100, 1).script()
    for line in [
        'm = T.dynamic("m")',
        "def rich_kernel(A: T.Tensor((64, 32), \"float16\"), B: T.Tensor((32, 64), \"float16\"), "
        "C: T.Tensor((64, 64), \"float32\"), D: T.Tensor((m, 4), \"float32\"), s: T.float32, "
        "n: T.int32):",
        "    with T.Kernel(1, 2, threads=128) as (bx, by):",
        "        tx = T.get_thread_binding(0)",
        "        T.fill(Cf, 0.0)",
        "        for k in T.Pipelined(1, num_stages=2):",
        "            T.copy(A[:, k * 32:k * 32 + 32], As)",
        "            T.gemm(As, Bs, Cf)",
        "        T.reduce_max(Cf, Rf, dim=1, clear=True)",
        "        T.reduce_sum(Cf, Rf, dim=1, clear=False)",
        "        T.cumsum(Cf, Cf, dim=1, reverse=True)",
        "        for i in T.unroll(2, 10, 2):",
        "        x: T.float32 = C[0, 0] * s",
        "        x_1: T.float32 = x + 1.0",
        "        if (tx < n) and (not (x_1 > 3.0)):",
        "        elif tx == 100:",
        "            C[0, 1] = T.infinity(\"float32\")",
        "        while v > 0:",
        "                break",
        "        for i_1 in T.serial(m):",
        "                continue",
        "        for i_2, j in T.Parallel(64, 64):",
        # a statement atomic drops return_prev (it would re-trace as a let binding)
        "        T.atomic_add(C[0, 0], 1.0)",
        "        prev: T.float32 = T.atomic_max(C[0, 2], 2.0, return_prev=True)",
        "        T.print(C[0, 0], msg='c00')",
        "        T.device_assert(v < 100, 'v too big')",
    ]:
        assert line in text.splitlines(), line


def test_names_are_unique_per_function():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                A[i] = 0.0
            for i in T.serial(4):
                A[i + 4] = 1.0

    text = f.script()
    assert "for i in T.serial(4):" in text and "for i_1 in T.serial(4):" in text
    assert "A[i_1 + 4] = 1.0" in text


# ---- expressions ------------------------------------------------------------------------------


@pytest.mark.parametrize("build,text", [
    (lambda x, y, z: (x + y) * z, "(x + y) * z"),
    (lambda x, y, z: x - (y - z), "x - (y - z)"),
    (lambda x, y, z: x - y - z, "x - y - z"),
    (lambda x, y, z: x * (y // z), "x * (y // z)"),
    (lambda x, y, z: (x + y) % z, "(x + y) % z"),
    (lambda x, y, z: x & (y | z), "x & (y | z)"),
    (lambda x, y, z: (x << y) + z, "(x << y) + z"),
    (lambda x, y, z: -(x + y), "-(x + y)"),
    (lambda x, y, z: (x < y) + 1, 'T.cast(x < y, "int32") + 1'),
    (lambda x, y, z: ir.logical_and(x < y, ir.logical_not(y < z)), "(x < y) and (not (y < z))"),
    (lambda x, y, z: ir.select(x < y, x, y), "T.if_then_else(x < y, x, y)"),
    (lambda x, y, z: ir.binary("min", x, y), "T.min(x, y)"),
    (lambda x, y, z: ir.binary("truncmod", x, 7), "T.truncmod(x, 7)"),
    (lambda x, y, z: ir.call("exp", [ir.cast_to(x, "float32")]), 'T.exp(T.cast(x, "float32"))'),
])
def test_expression_text(build, text):
    x, y, z = ir.Var("x"), ir.Var("y"), ir.Var("z")
    assert print_node(build(x, y, z)) == text


@pytest.mark.parametrize("value,text", [
    (ir.const(3), "3"), (ir.const(-3), "(-3)"), (ir.const(True), "True"),
    (ir.const(0.5), "0.5"), (ir.const(0.5, "float16"), "T.float16(0.5)"),
    (ir.const(2**40), "T.int64(1099511627776)"), (ir.const(7, "uint8"), "T.uint8(7)"),
    (ir.const(float("inf")), 'T.infinity("float32")'),
    (ir.const(float("-inf"), "float16"), '-T.infinity("float16")'),
    (ir.const(float("nan")), "T.cast(float('nan'), \"float32\")"),
])
def test_constant_text(value, text):
    assert print_node(value) == text


def _random_expr(rng, vars_, depth):
    if depth == 0 or rng.random() < 0.2:
        return rng.choice(vars_) if rng.random() < 0.7 else ir.const(rng.randint(2, 9))
    kind = rng.random()
    a, b = _random_expr(rng, vars_, depth - 1), _random_expr(rng, vars_, depth - 1)
    if kind < 0.1:
        return -a
    if kind < 0.2:
        return ir.binary(rng.choice(["min", "max"]), a, b)
    if kind < 0.3:
        # a literal on the left of a comparison re-evaluates reflected (`7 < x` is `x > 7`)
        lhs = a if not isinstance(a, ir.Const) else rng.choice(vars_)
        return ir.select(ir.compare(rng.choice(["lt", "ge", "eq"]), lhs, b), a, b)
    op = rng.choice(["add", "sub", "mul", "floordiv", "floormod", "bitand", "bitor", "bitxor",
                     "shl", "shr"])
    return ir.binary(op, a, b)


def test_printed_expressions_evaluate_back_to_the_same_tree():
    # precedence and parentheses: eval(print(e)) with the same vars rebuilds e exactly
    rng = random.Random(1234)
    x, y, z = ir.Var("x"), ir.Var("y"), ir.Var("z")
    ns = {"x": x, "y": y, "z": z, "T": T}
    for _ in range(300):
        e = _random_expr(rng, [x, y, z], 4)
        text = print_node(e)
        back = eval(text, ns)  # noqa: S307 - our own printer's output
        assert ir.structural_equal(ir.as_expr(back), e), text


# ---- every node type --------------------------------------------------------------------------


def node_samples():
    A = ir.Buffer("A", (8, 16), "float16")
    S = ir.Buffer("S", (8, 16), "float16", scope="shared.dyn")
    F = ir.Buffer("F", (8, 16), "float32", scope="local.fragment")
    R = ir.Buffer("R", (8,), "float32", scope="local.fragment")
    v = ir.Buffer("v", (1,), "int32", scope="local.var")
    i, j, bx, tx = ir.Var("i"), ir.Var("j"), ir.Var("bx"), ir.Var("tx")
    x = ir.Var("x", DType("float32"))
    ld = ir.Load(A, (i, j), DType("float16"))
    st = ir.Store(A, (i, j), ir.const(1.0, "float16"))
    lt = ir.Compare("lt", i, j)
    kernel = ir.Kernel((ir.const(4),), (128,), (bx,), (tx,),
                       ir.Store(A, (bx, tx), ir.const(0.0, "float16")), (S, F),
                       (("use_swizzle", (8, "row")),))
    return {
        ir.Var: (i, "i"),
        ir.Const: (ir.const(2.5, "float16"), "T.float16(2.5)"),
        ir.Binary: (ir.Binary("add", i, j, DType("int32")), "i + j"),
        ir.Compare: (lt, "i < j"),
        ir.Logical: (ir.Logical("or", lt, ir.Compare("gt", i, j)), "(i < j) or (i > j)"),
        ir.Unary: (ir.Unary("neg", i, DType("int32")), "-i"),
        ir.Select: (ir.Select(lt, i, j, DType("int32")), "T.if_then_else(i < j, i, j)"),
        ir.Cast: (ir.Cast(i, DType("float32")), 'T.cast(i, "float32")'),
        ir.Call: (ir.call("exp", [x]), "T.exp(x)"),
        ir.Load: (ld, "A[i, j]"),
        ir.Buffer: (A, "A"),
        ir.BufferRegion: (ir.BufferRegion(A, ((i, 1), (0, 16))), "A[i, :]"),
        ir.Seq: (ir.Seq((st, ir.Break())), "A[i, j] = T.float16(1.0)\nbreak"),
        ir.Evaluate: (ir.Evaluate(ir.call("call_extern", ["foo", i], dtype="int32")),
                      "T.call_extern(\"int32\", 'foo', i)"),
        ir.Store: (st, "A[i, j] = T.float16(1.0)"),
        ir.LetStmt: (ir.LetStmt(x, ir.Cast(ld, DType("float32")), ir.Evaluate(ir.call(
            "call_extern", ["g", x], dtype="int32"))),
            "x: T.float32 = T.cast(A[i, j], \"float32\")\nT.call_extern(\"int32\", 'g', x)"),
        ir.Allocate: (ir.Allocate(v, ir.Store(v, (ir.const(0),), ir.const(3)), ir.const(0)),
                      'v = T.alloc_var("int32", 0)\nv = 3'),
        ir.If: (ir.If(lt, st, ir.If(ir.Compare("gt", i, j), st, ir.Break())),
                "if i < j:\n    A[i, j] = T.float16(1.0)\nelif i > j:\n"
                "    A[i, j] = T.float16(1.0)\nelse:\n    break"),
        ir.For: (ir.For(i, ir.const(2), ir.const(3), "serial", st, step=2),
                 "for i in T.serial(2, 8, 2):\n    A[i, j] = T.float16(1.0)"),
        ir.While: (ir.While(lt, ir.Continue()), "while i < j:\n    continue"),
        ir.Break: (ir.Break(), "break"),
        ir.Continue: (ir.Continue(), "continue"),
        ir.Attr: (ir.Attr("warp_role", (0,), st), "# warp_role: (0,)\nA[i, j] = T.float16(1.0)"),
        ir.Kernel: (kernel, "with T.Kernel(4, threads=128) as bx:\n"
                            "    S = T.alloc_shared((8, 16), \"float16\")\n"
                            "    F = T.alloc_fragment((8, 16), \"float32\")\n"
                            "    T.use_swizzle(panel_size=8, order='row')\n"
                            "    tx = T.get_thread_binding(0)\n"
                            "    A[bx, tx] = T.float16(0.0)"),
        ir.Assert: (ir.Assert(lt, "i < j"), "T.device_assert(i < j, 'i < j')"),
        ir.Copy: (ir.Copy(ir.BufferRegion.full(A), ir.BufferRegion.full(S)), "T.copy(A, S)"),
        ir.Fill: (ir.Fill(ir.BufferRegion(F, ((0, 4), (0, 16))), ir.const(0.0)),
                  "T.fill(F[0:4, :], 0.0)"),
        ir.Gemm: (ir.Gemm(ir.BufferRegion.full(S), ir.BufferRegion.full(S),
                          ir.BufferRegion.full(F), trans_B=True, policy="FullRow",
                          clear_accum=True),
                  "T.gemm(S, S, F, transpose_B=True, policy=T.GemmWarpPolicy.FullRow, "
                  "clear_accum=True)"),
        ir.GemmSp: (ir.GemmSp(ir.BufferRegion.full(S), ir.BufferRegion.full(S),
                              ir.BufferRegion.full(F), E=ir.BufferRegion.full(S), trans_E=True),
                    "T.gemm_sp(S, S, S, F, transpose_E=True)"),
        ir.Reduce: (ir.Reduce("sum", F, R, 1, clear=False),
                    "T.reduce_sum(F, R, dim=1, clear=False)"),
        ir.CumSum: (ir.CumSum(F, F, 0, reverse=True), "T.cumsum(F, F, dim=0, reverse=True)"),
        ir.AtomicTile: (ir.AtomicTile("add", ir.BufferRegion.full(F), ir.BufferRegion.full(A)),
                        "T.atomic_add(A, F)"),
        ir.Print: (ir.Print(ld, "a"), "T.print(A[i, j], msg='a')"),
        ir.PrimFunc: (ir.PrimFunc("k", (A, ir.Var("n")), kernel),
                      "@T.prim_func\ndef k(A: T.Tensor((8, 16), \"float16\"), n: T.int32):"),
    }


def test_every_node_type_prints():
    samples = node_samples()
    node_types = {getattr(ir, name) for name in ir.__all__
                  if isinstance(getattr(ir, name), type) and issubclass(getattr(ir, name), ir.Node)
                  and getattr(ir, name) not in (ir.Node, ir.Expr, ir.Stmt)}
    assert node_types <= set(samples), f"no printer sample for {node_types - set(samples)}"
    for cls, (node, text) in samples.items():
        assert isinstance(node, cls)
        out = print_node(node)
        assert text in out, (cls.__name__, out)
        str(node), repr(node)  # the dunder paths too


def test_degenerate_statements():
    assert print_node(ir.Seq(())) == "pass"
    assert print_node(ir.Stmt()) == "# <Stmt>"  # unknown statements do not crash
    assert print_node(ir.If(ir.Var("c", DType("bool")), ir.Seq(()))) == "if c:\n    pass"
    assert print_node(ir.Print(None, "hello")) == "T.print(msg='hello')"
