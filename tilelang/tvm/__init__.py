"""A stand-in for the `tvm` names that reference example programs use at the Python level
(`from tvm import DataType`, `from tilelang import tvm as tvm`, `from tvm import tirx`,
`tvm.testing`).

There is no TVM underneath this project. The reference's `import tilelang` puts TVM's Python
package on the path; here, when no real `tvm` is installed, `import tilelang` registers this
package as `tvm` (and its modules as `tvm.tirx`, `tvm.testing`) so those programs run
unchanged. Provided: `DataType` (the dtype class itself, as in the reference, where `T.float16`
is a `tvm.DataType`), `te.var`, `tirx` (expression builders: `const`, `reinterpret`, `Select`,
`Cast`, `Min`, `Max`, `PrimExpr`, `IndexMap`, ...), `testing` (pytest helpers), `target`
(`Target`), `transform` (`PassContext`), `error` (`TVMError`, `InternalError`), `arith`
(`Analyzer`), `ir` (`structural_equal`, `Range`) and `script.ir_builder.base.IRBuilderFrame`
(what `isinstance(T.serial(n), IRBuilderFrame)` asks). Any other
name raises an AttributeError that says so (see docs/compatibility.md)."""

from __future__ import annotations

import importlib

from ..ir.dtype import DType as DataType

__all__ = ["DataType", "DataTypeCode", "te", "tirx", "testing", "target", "transform", "error",
           "arith", "ir"]


class DataTypeCode:
    """DLPack type codes (`DataType(...).type_code` compares equal to these)."""

    INT = 0
    UINT = 1
    FLOAT = 2
    HANDLE = 3
    BFLOAT = 4
    BOOL = 6
    Float8E4M3FN = 10
    Float8E5M2 = 12
    Float8E8M0FNU = 14
    Float4E2M1FN = 17


class _TE:
    """`tvm.te.var(name, dtype)`: the symbolic size of the reference's dynamic-shape examples,
    the same as `T.dynamic(name, dtype)`."""

    @staticmethod
    def var(name="v", dtype="int32"):
        from ..language.types import dynamic

        return dynamic(name, dtype)

    def __getattr__(self, name):
        raise AttributeError(f"tvm.te.{name} is not available: the tvm stand-in provides only "
                             "tvm.te.var; see docs/compatibility.md")


te = _TE()

_SUBMODULES = ("tirx", "testing", "target", "transform", "error", "arith", "ir", "script")
# modules below those that reference programs import by their full dotted name, and the
# stand-in module behind each (`tvm.tirx.expr` holds the expression classes `tvm.tirx`
# re-exports, so it is `tvm.tirx` itself)
_NESTED_MODULES = {"tirx.expr": "tirx", "script.ir_builder": "script.ir_builder",
                   "script.ir_builder.base": "script.ir_builder.base"}


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(
        f"tvm.{name} is not available: this TileLang has no TVM underneath and provides only "
        "tvm.DataType, tvm.te.var, tvm.tirx, tvm.testing, tvm.target, tvm.transform, "
        "tvm.error, tvm.arith, tvm.ir and tvm.script.ir_builder.base.IRBuilderFrame for "
        "reference programs; see "
        "docs/compatibility.md")


def register_as_tvm(sys_modules) -> None:
    """Make `import tvm`, `import tvm.tirx` and `import tvm.testing` name this package and its
    modules (one module object each, so classes and isinstance agree)."""
    this = sys_modules[__name__]
    sys_modules["tvm"] = this
    for sub in _SUBMODULES:
        sys_modules[f"tvm.{sub}"] = importlib.import_module(f"{__name__}.{sub}")
    for sub, standin in _NESTED_MODULES.items():
        sys_modules[f"tvm.{sub}"] = importlib.import_module(f"{__name__}.{standin}")
