"""`tvm.testing` for reference test files: `requires_package`, `requires_cuda`, `parameter`,
`assert_prim_expr_equal`, `main` (pytest underneath; imported only when used)."""

from __future__ import annotations

import inspect
import sys

from ..testing.requirements import requires_cuda, requires_gpu, requires_package  # noqa: F401

__all__ = ["requires_package", "requires_cuda", "requires_gpu", "parameter",
           "assert_prim_expr_equal", "main"]


def parameter(*values, ids=None):
    """A pytest fixture taking each of `values` in turn (`x = tvm.testing.parameter(1, 2)` at
    module level; tests that take `x` run once per value)."""
    import pytest

    @pytest.fixture(params=list(values), ids=ids)
    def fixture(request):
        return request.param
    return fixture


def assert_prim_expr_equal(lhs, rhs):
    """Assert two integer expressions are equal (proved by the analyzer; ints compare as ints)."""
    from ..arith import Analyzer
    from ..ir import nodes as ir

    analyzer = Analyzer()
    diff = analyzer.simplify(ir.as_expr(lhs) - ir.as_expr(rhs))
    if not (isinstance(diff, ir.Const) and diff.value == 0):
        raise AssertionError(f"{lhs} != {rhs} (difference simplifies to {diff})")


def main():
    """Run pytest on the calling file (`if __name__ == "__main__": tvm.testing.main()`)."""
    import pytest

    test_file = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([test_file] + sys.argv[1:]))
