"""Errors point at the user's kernel source (frontend/trace.py, frontend/builder.py, errors.py).

Each failing kernel marks the offending line with a `# <-` comment; the error must be a
`KernelError` that is also the matching builtin, name the problem, carry this file and that
line, and render the source line with a caret. Compiler files never appear in the message."""

import pickle
import traceback

import pytest

import tilelang.language as T
from tilelang.errors import KernelError, KernelNotSupportedError, SourceLoc, located

THIS_FILE = __file__
with open(THIS_FILE) as _f:
    _LINES = _f.read().splitlines()


def line_of(marker: str) -> int:
    """1-based line number of the unique line of this file containing `# <- marker`."""
    hits = [n for n, text in enumerate(_LINES, 1) if text.rstrip().endswith(f"# <- {marker}")]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


def check_located(err, marker, *fragments):
    lineno = line_of(marker)
    assert isinstance(err, KernelError)
    assert err.loc is not None and err.loc.filename == THIS_FILE and err.loc.lineno == lineno
    text = str(err)
    for frag in fragments:
        assert frag in text, (frag, text)
    assert f"test_located_errors.py:{lineno}" in text
    assert f"{lineno:>5} | " in text and f"# <- {marker}" in text  # the source line is shown
    assert "tilelang/" not in text.replace(THIS_FILE, "")  # no compiler paths in the message
    return text


def test_copy_shape_mismatch():
    with pytest.raises(ValueError) as e:
        @T.prim_func
        def f(A: T.Tensor((8, 8), T.float32)):
            with T.Kernel(1, threads=32):
                S = T.alloc_shared((4, 8), T.float32)
                T.copy(A, S)  # <- copy
    text = check_located(e.value, "copy", "T.copy(A, S)", "equal shapes", "[8, 8]", "[4, 8]")
    # the caret underlines the call expression (column of `T.copy`, its whole width)
    src = _LINES[line_of("copy") - 1]
    col = src.index("T.copy")
    assert e.value.loc.col == col
    assert "      | " + " " * col + "^" * len("T.copy(A, S)") in text.splitlines()
    # the traceback stops where tracing began: no frames of the T ops or the IR below it
    files = [fr.filename for fr in traceback.extract_tb(e.value.__traceback__)]
    assert not any("/tilelang/language/" in p or "/tilelang/ir/" in p for p in files), files


def test_undefined_name():
    with pytest.raises(NameError) as e:
        @T.prim_func
        def f(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=1):
                A[0] = no_such_name_here  # noqa: F821  # <- undefined
    check_located(e.value, "undefined", "name 'no_such_name_here' is not defined")
    assert type(e.value).__name__ == "KernelNameError"


def test_unknown_dtype_in_allocation():
    with pytest.raises(ValueError) as e:
        @T.prim_func
        def f(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=1):
                S = T.alloc_shared((8,), "float17")  # <- dtype
                T.copy(A, S)
    check_located(e.value, "dtype", "unknown dtype 'float17'")


def test_wrong_operand_dtype_for_operator():
    with pytest.raises(TypeError) as e:
        @T.prim_func
        def f(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=1):
                A[0] = A[1] // 2  # <- floordiv
    check_located(e.value, "floordiv", "`//` needs integer operands")

    with pytest.raises(TypeError) as e:
        @T.prim_func
        def g(A: T.Tensor((8,), T.int32)):
            with T.Kernel(1, threads=1):
                A[0] = A[1] / 2  # <- intdiv
    check_located(e.value, "intdiv", "ambiguous", "use `//`")


def test_python_condition_on_kernel_value_outside_rewrite_names_the_fix():
    with pytest.raises(TypeError) as e:
        @T.prim_func
        def f(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=1):
                A[0] = bool(A[1] > 0.0)  # <- bool
    check_located(e.value, "bool", "concrete bool", "T.if_then_else")


def test_tile_op_inside_prim_func_but_outside_kernel():
    with pytest.raises(RuntimeError) as e:
        @T.prim_func
        def f(A: T.Tensor((8,), T.float32)):
            T.fill(A, 0.0)  # <- outside kernel
    check_located(e.value, "outside kernel", "T.fill must be inside `with T.Kernel(...)`")


def test_kernel_loop_outside_kernel():
    with pytest.raises(RuntimeError) as e:
        @T.prim_func
        def f(A: T.Tensor((8,), T.float32)):
            for i in T.Parallel(8):  # <- parallel outside
                A[i] = 0.0
    check_located(e.value, "parallel outside", "T.parallel loops must be inside")


def test_t_op_outside_any_kernel_body():
    # no trace is active: no kernel location to give, but the message names the problem and
    # the traceback's innermost frame of this file is the call
    with pytest.raises(RuntimeError) as e:
        T.fill(None, 0.0)  # <- no trace
    assert isinstance(e.value, KernelError) and e.value.loc is None
    assert "T.fill can only be used inside a kernel body" in str(e.value)
    frames = [fr for fr in traceback.extract_tb(e.value.__traceback__)
              if fr.filename == THIS_FILE]
    assert frames[-1].lineno == line_of("no trace")

    with pytest.raises(RuntimeError, match="only be used inside a kernel body"):
        T.alloc_var(T.int32, 0)


def test_error_in_macro_points_at_the_macro_line():
    @T.macro
    def stage(src, dst):
        T.copy(src, dst)  # <- in macro

    with pytest.raises(ValueError) as e:
        @T.prim_func
        def f(A: T.Tensor((8, 8), T.float32)):
            with T.Kernel(1, threads=32):
                S = T.alloc_shared((8, 4), T.float32)
                stage(A, S)
    check_located(e.value, "in macro", "equal shapes")


def test_trace_time_assertion_is_located():
    with pytest.raises(AssertionError) as e:
        @T.prim_func
        def f(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=1):
                assert A.shape[0] % 16 == 0, "need a multiple of 16"  # <- assert
    check_located(e.value, "assert", "need a multiple of 16")


def test_missing_parameter_annotation_points_at_the_def():
    with pytest.raises(TypeError) as e:
        @T.prim_func
        def f(A: T.Tensor((8,), T.float32), n):  # <- annotation
            with T.Kernel(1, threads=1):
                A[0] = 0.0
    # the location is the first line of the definition (the decorator)
    assert e.value.loc.filename == THIS_FILE
    assert e.value.loc.lineno == line_of("annotation") - 1
    assert "parameter 'n'" in str(e.value) and "needs an annotation" in str(e.value)


def test_builtin_errors_are_reraised_without_compiler_frames_or_chaining():
    def make():
        @T.prim_func
        def f(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=1):
                A[0] = {}["missing"]  # <- key error
        return f

    with pytest.raises(KeyError) as e:
        make()
    err = e.value
    assert isinstance(err, KernelError) and err.loc.lineno == line_of("key error")
    assert err.__cause__ is None and err.__suppress_context__
    files = [fr.filename for fr in traceback.extract_tb(err.__traceback__)]
    # the kernel body's own frame and anything below it are cut: the message has the location
    assert not any("/tilelang/language/" in p or "/tilelang/ir/" in p for p in files), files
    assert files.count(THIS_FILE) == 2  # the `make()` call and the decorator line
    # rendered like every located error (KeyError's own __str__ would print a quoted repr)
    check_located(err, "key error", "'missing'")
    assert str(err).splitlines()[0] == "'missing'"


def test_located_errors_pickle_and_render():
    loc = SourceLoc(THIS_FILE, line_of("render me"), 4, 9)  # <- render me
    err = KernelError("something is wrong", loc)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is KernelError and back.message == err.message and back.loc == loc
    lines = str(back).splitlines()
    assert lines[0] == "something is wrong"
    assert lines[1] == f"  --> {THIS_FILE}:{loc.lineno}:5"
    assert lines[2].endswith("# <- render me") and lines[3] == "      | " + "    " + "^" * 5
    assert str(KernelError("no location")) == "no location"


@pytest.mark.parametrize("base", [NameError, KeyError, AssertionError, RuntimeError, ValueError,
                                  TypeError, KernelNotSupportedError])
def test_every_located_error_class_pickles(base):
    # Regression: classes made by `located` (KernelNameError, ...) are not attributes of
    # tilelang.errors, so pickling them by reference failed (only Type/ValueError worked).
    loc = SourceLoc(THIS_FILE, 3)
    err = located(base)("bad thing", loc)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and isinstance(back, base) and isinstance(back, KernelError)
    assert back.loc == loc and str(back) == str(err)


def test_subclass_of_located_error_pickles_as_itself():
    back = pickle.loads(pickle.dumps(_MyError("sub", SourceLoc(THIS_FILE, 1))))
    assert type(back) is _MyError and back.message == "sub"


class _MyError(located(ValueError)):
    pass


def test_break_inside_parallel_is_rejected():
    with pytest.raises(KernelNotSupportedError) as e:
        @T.prim_func
        def f(A: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64):
                    if A[i] < 0:
                        break  # <- parallel break
                    A[i] = A[i] * 2.0
    check_located(e.value, "parallel break", "continue")
