"""A minimal stand-in for the `tvm` names that reference example programs use at the Python
level (`from tvm import DataType`, `from tilelang import tvm as tvm`; `tvm.DataType(dtype).bits`).

There is no TVM underneath this project. The reference's `import tilelang` puts TVM's Python
package on the path; here, when no real `tvm` is installed, `import tilelang` registers this
module as `tvm` so those programs run unchanged. Only `DataType` is provided; any other name
raises an AttributeError that says so (see docs/compatibility.md)."""

from __future__ import annotations

from .ir.dtype import DType

# TVM's DataTypeCode values, for code that compares `.type_code`
_CODES = {"int": 0, "uint": 1, "float": 2, "handle": 3, "bfloat": 4, "bool": 1}


class DataType:
    """`tvm.DataType("float16")`: the bits, lanes and kind of a dtype string (or a `T.*`
    dtype). Compares equal to the dtype's name."""

    __slots__ = ("_dt",)

    def __init__(self, dtype):
        self._dt = DType(str(dtype) if isinstance(dtype, DataType) else dtype)

    @property
    def bits(self) -> int:
        return self._dt.bits

    @property
    def lanes(self) -> int:
        return self._dt.lanes

    @property
    def type_code(self) -> int:
        base = self._dt.base
        if base == "bool":
            return _CODES["uint"]
        if base.startswith("bfloat"):
            return _CODES["bfloat"]
        for k in ("uint", "int", "float", "handle"):
            if base.startswith(k):
                return _CODES[k]
        return -1

    def is_float(self) -> bool:
        return self._dt.is_float

    def is_int(self) -> bool:
        return self._dt.is_int

    def is_bool(self) -> bool:
        return self._dt.base == "bool"

    def is_float16(self) -> bool:
        return self._dt.name == "float16"

    def is_bfloat16(self) -> bool:
        return self._dt.name == "bfloat16"

    def is_float8(self) -> bool:
        return self._dt.base.startswith("float8")

    def with_lanes(self, lanes: int) -> "DataType":
        base = self._dt.base
        return DataType(base if lanes == 1 else f"{base}x{int(lanes)}")

    def __str__(self):
        return self._dt.name

    def __repr__(self):
        return f"DataType({self._dt.name!r})"

    def __eq__(self, other):
        try:
            return DType(str(other)).name == self._dt.name
        except Exception:
            return NotImplemented

    def __hash__(self):
        return hash(self._dt.name)


class _TE:
    """`tvm.te.var(name, dtype)`: the symbolic size of the reference's dynamic-shape examples,
    the same as `T.dynamic(name, dtype)`."""

    @staticmethod
    def var(name="v", dtype="int32"):
        from .language.types import dynamic

        return dynamic(name, dtype)

    def __getattr__(self, name):
        raise AttributeError(f"tvm.te.{name} is not available: the tvm stand-in provides only "
                             "tvm.te.var; see docs/compatibility.md")


te = _TE()


def __getattr__(name):
    raise AttributeError(
        f"tvm.{name} is not available: this TileLang has no TVM underneath and provides only "
        "tvm.DataType and tvm.te.var for reference programs; see docs/compatibility.md")
