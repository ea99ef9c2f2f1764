"""`tilelang.ir.visitor`: Visitor dispatch, a Mutator that returns the very same node when nothing
changed (and rebuilds only the path to a change), `collect`/`any_node` order, `substitute` and
`free_vars`."""

import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.ir.dtype import DType
from tilelang.ir.visitor import Mutator, Visitor, any_node, any_stmt, children, collect, \
    collect_stmts, free_vars, substitute


def sample_func():
    @T.prim_func
    def f(A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16),
          C: T.Tensor((64, 64), T.float32), n: T.int32):
        with T.Kernel(2, threads=128) as bx:
            As = T.alloc_shared((64, 32), T.float16)
            Bs = T.alloc_shared((32, 64), T.float16)
            Cf = T.alloc_fragment((64, 64), T.float32)
            R = T.alloc_fragment((64,), T.float32)
            T.clear(Cf)
            for k in T.Pipelined(1, num_stages=2):
                T.copy(A[0:64, k * 32:(k + 1) * 32], As)
                T.copy(B, Bs)
                T.gemm(As, Bs, Cf)
            T.reduce_max(Cf, R, dim=1)
            acc = T.alloc_var(T.float32, 0.0)
            for i in T.serial(n):
                x = C[i, 0] * 2.0
                if x > acc and i < 10:
                    acc = x
                else:
                    acc = acc - 1.0
            while acc > 0.0:
                acc = acc - 2.0
            for i, j in T.Parallel(64, 64):
                C[i, j] = T.if_then_else(Cf[i, j] > acc, Cf[i, j], T.exp(R[i]))
            T.atomic_add(C[bx, 0], 1.0)
            T.print(acc, msg="acc")
    return f


class Identity(Mutator):
    pass


def test_identity_mutator_returns_the_same_objects():
    f = sample_func()
    assert Identity().visit(f) is f
    assert Identity().visit(f.body) is f.body
    e = ir.Var("x") * 2 + 1
    assert Identity().visit(e) is e
    t = (e, 3, "s", None, DType("float16"))
    assert Identity().visit(t) is t


class RenameLoadsOf(Mutator):
    """Replace loads of one buffer by loads of another."""

    def __init__(self, old, new):
        self.old, self.new = old, new

    def visit_Load(self, node):
        node = self.generic(node)
        if node.buffer is self.old:
            return ir.Load(self.new, node.indices, node.dtype)
        return node


def test_mutator_rebuilds_only_the_path_to_a_change():
    f = sample_func()
    C, D = f.params[2], ir.Buffer("D", (64, 64), "float32")
    g = RenameLoadsOf(C, D).visit(f)
    assert g is not f and g.params is f.params and g.name == f.name
    kernel_f, = collect(f.body, lambda n: isinstance(n, ir.Kernel))
    kernel_g, = collect(g.body, lambda n: isinstance(n, ir.Kernel))
    assert kernel_g is not kernel_f and kernel_g.allocs is kernel_f.allocs
    # statements that do not read C are shared, the ones that do are new
    def stmts(k):
        return list(k.body.stmts) if isinstance(k.body, ir.Seq) else [k.body]

    fs, gs = stmts(kernel_f), stmts(kernel_g)
    assert len(fs) == len(gs)
    shared = [a is b for a, b in zip(fs, gs)]
    assert any(shared) and not all(shared)
    reads = [ld.buffer.name for ld in collect(g.body, lambda n: isinstance(n, ir.Load))]
    assert "C" not in reads and "D" in reads
    # the original is untouched (nodes are immutable)
    assert "C" in [ld.buffer.name for ld in collect(f.body, lambda n: isinstance(n, ir.Load))]
    assert ir.structural_equal(RenameLoadsOf(D, C).visit(g).body, f.body)


def test_visitor_dispatches_by_class_name_and_descends_with_generic():
    f = sample_func()
    seen = []

    class V(Visitor):
        def visit_For(self, node):
            seen.append(node.kind)
            self.generic(node)

        def visit_If(self, node):
            seen.append("if")  # no generic(): the branches are not visited

    V().visit(f)
    assert seen == ["pipelined", "serial", "if", "parallel", "parallel"]


class DoubleStoredValues(Mutator):
    """Acts on statements alone: its walks pass expressions by as leaves."""

    def visit_Store(self, node):
        return ir.Store(node.buffer, node.indices, node.value * 2)


def test_a_walk_acting_on_statements_alone_passes_expressions_by():
    from tilelang.ir import visitor

    entered = []

    class Counting(DoubleStoredValues):
        pass

    real_generic = Mutator.generic

    def counting_generic(self, node):
        entered.append(node)
        return real_generic(self, node)

    f = sample_func()
    Mutator.generic = counting_generic
    try:
        g = Counting().visit(f)
    finally:
        Mutator.generic = real_generic
    assert entered and not any(isinstance(n, ir.Expr) for n in entered)
    stores = collect(g.body, lambda n: isinstance(n, ir.Store))
    assert stores and all(isinstance(s.value, ir.Binary) for s in stores)
    # every statement is still reached, however deep (the stores under For / If / While)
    assert len(stores) == len(collect(f.body, lambda n: isinstance(n, ir.Store)))
    assert visitor.Mutator._statements_only() and Counting._statements_only()


def test_a_walk_that_acts_on_expressions_or_every_node_enters_them():
    class OnLoads(DoubleStoredValues):
        def visit_Load(self, node):
            return node

    class OnBuffers(Visitor):
        def visit_Buffer(self, node):
            pass

    class EveryNode(Visitor):
        def visit(self, node):
            return Visitor.visit(self, node)

    class OwnGeneric(Mutator):
        def generic(self, node):
            return Mutator.generic(self, node)

    class OwnLeaf(Visitor):
        def leaf(self, node):
            pass

    class OnRegions(Visitor):
        def visit_BufferRegion(self, node):
            pass

    for cls in (OnLoads, OnBuffers, EveryNode, OwnGeneric, OwnLeaf, OnRegions):
        assert not cls._statements_only(), cls.__name__
    loads = []

    class FindLoads(Visitor):
        def visit_Load(self, node):
            loads.append(node)

    FindLoads().visit(sample_func())
    assert loads


def test_collect_is_preorder_left_to_right_and_any_node_short_circuits():
    x, y = ir.Var("x"), ir.Var("y")
    e = (x + y) * (y - x)
    names = [v.name for v in collect(e, lambda n: isinstance(n, ir.Var))]
    assert names == ["x", "y", "y", "x"]
    ops = [n.op for n in collect(e, lambda n: isinstance(n, ir.Binary))]
    assert ops == ["mul", "add", "sub"]
    assert any_node(e, lambda n: n is y) and not any_node(e, lambda n: isinstance(n, ir.Load))
    f = sample_func()
    kinds = [type(n).__name__ for n in collect(f.body, lambda n: isinstance(
        n, (ir.Copy, ir.Gemm, ir.Reduce, ir.Fill, ir.While, ir.Print)))]
    assert kinds == ["Fill", "Copy", "Copy", "Gemm", "Reduce", "While", "Print"]


def test_walks_offer_no_leaf_values():
    x = ir.Var("x")
    seen = collect((x + 1) * 2, lambda n: True)
    assert seen and all(isinstance(n, ir.Node) for n in seen)  # no op names, ints, dtypes
    assert [type(n).__name__ for n in seen] == ["Binary", "Binary", "Var", "Const", "Const"]
    assert not any_node(x + 1, lambda n: isinstance(n, (int, str)))
    assert collect(None, lambda n: True) == [] and not any_node(None, lambda n: True)


def test_any_stmt_finds_statements_without_entering_expressions():
    f = sample_func()
    seen = []

    def is_gemm(n):
        seen.append(n)
        return isinstance(n, ir.Gemm)

    assert any_stmt(f.body, is_gemm)
    assert seen and all(isinstance(n, ir.Stmt) for n in seen)
    assert not any_stmt(f.body, lambda n: isinstance(n, ir.Assert))
    # the same answers as any_node wherever only statements can match
    for kind in (ir.Gemm, ir.While, ir.Print, ir.Reduce, ir.Assert, ir.TmaCopy):
        assert any_stmt(f.body, lambda n: isinstance(n, kind)) == \
            any_node(f.body, lambda n: isinstance(n, kind))


def test_collect_stmts_is_collect_restricted_to_statements_and_skips_expressions():
    f = sample_func()
    offered = []

    def every_statement(n):
        offered.append(n)
        return True

    found = collect_stmts(f.body, every_statement)
    assert offered and all(isinstance(n, ir.Stmt) for n in offered)
    # the same statements, in the same (pre-)order, as collect finds
    assert found == [n for n in collect(f.body, lambda n: True) if isinstance(n, ir.Stmt)]
    assert [type(n) for n in collect_stmts(f.body, lambda n: isinstance(n, (ir.Gemm, ir.While)))] \
        == [ir.Gemm, ir.While]
    assert collect_stmts(None, lambda n: True) == []


def test_children_of_buffers_and_functions():
    f = sample_func()
    assert children(f) == (f.body,)
    assert children(f.params[0]) == ()  # buffers are leaves
    x = ir.Var("x")
    op, a, b, dt = children(x + 1)
    assert op == "add" and a is x and b.value == 1 and dt is DType("int32")


def test_substitute_replaces_vars_by_identity():
    x, y, x2 = ir.Var("x"), ir.Var("y"), ir.Var("x")
    e = x * 2 + x2
    s = substitute(e, {x: y + 1})
    assert ir.structural_equal(s, (y + 1) * 2 + x2)
    assert substitute(e, {}) is e
    assert substitute(e, {ir.Var("z"): 1}) is e  # nothing to replace: same object
    c = substitute(x + 1, {x: 4})  # Python values are converted with as_expr
    assert isinstance(c.a, ir.Const) and c.a.value == 4


def test_free_vars_skip_bound_loop_let_and_kernel_vars():
    f = sample_func()
    names = sorted(v.name for v in free_vars(f.body))
    assert names == ["n"]
    x, i = ir.Var("x"), ir.Var("i")
    body = ir.For(i, ir.const(0), ir.Var("m"), "serial",
                  ir.LetStmt(x, i * 2, ir.Evaluate(x + ir.Var("k"))))
    assert [v.name for v in free_vars(body)] == ["m", "k"]
