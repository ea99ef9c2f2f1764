"""`tilelang._ffi_api`: the reference's private TVM FFI namespace, importable because some of
its test programs import it. This TileLang has no FFI; the one function given here is the
implementation behind a public method (`Layout_repeat(layout, dim, factor)` is
`layout.repeat(dim, factor)`). Any other name raises AttributeError."""

from __future__ import annotations

__all__ = ["Layout_repeat"]


def Layout_repeat(layout, dim, factor):  # noqa: N802 - the reference's FFI name
    return layout.repeat(dim, factor)


def __getattr__(name):
    raise AttributeError(f"tilelang._ffi_api.{name} is the reference's private TVM FFI, which "
                         "this TileLang does not have; see docs/compatibility.md")
