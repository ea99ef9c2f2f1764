"""`tilelang._ffi_api`: in the reference, the functions its C++ library registers through the
TVM FFI. This TileLang has no C++ library, so the module exists (programs and tests that import
it at the top still load) and every name in it is an AttributeError saying why."""


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"tilelang._ffi_api.{name}: the reference's C++ (TVM FFI) functions are "
                         "not part of this pure-Python TileLang (tcgen05 / sm_100 descriptors "
                         "belong to a backend it does not have); see docs/compatibility.md")
