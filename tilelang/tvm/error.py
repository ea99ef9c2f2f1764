"""`tvm.error` for reference programs: the exception classes the reference raises when it
rejects a program. Here the compiler's rejections are `tilelang.errors.KernelError`s (located
at the user's line), so `TVMError` and `InternalError` name that class: `pytest.raises(
tvm.error.InternalError)` catches what this compiler raises for the same program."""

from ..errors import KernelError as TVMError

InternalError = TVMError

__all__ = ["TVMError", "InternalError"]
