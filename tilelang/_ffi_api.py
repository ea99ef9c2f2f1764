"""`tilelang._ffi_api`: in the reference, the functions its C++ library registers through the
TVM FFI; some of its test programs import the module at the top. This TileLang has no C++
library: the one function given here is the implementation behind a public method
(`Layout_repeat(layout, dim, factor)` is `layout.repeat(dim, factor)`), and every other name is
an AttributeError saying why."""

from __future__ import annotations

__all__ = ["Layout_repeat"]


def Layout_repeat(layout, dim, factor):  # noqa: N802 - the reference's FFI name
    return layout.repeat(dim, factor)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"tilelang._ffi_api.{name}: the reference's C++ (TVM FFI) functions are "
                         "not part of this pure-Python TileLang (tcgen05 / sm_100 descriptors "
                         "belong to a backend it does not have); see docs/compatibility.md")
