"""`tvm.script` for reference programs: only `ir_builder.base.IRBuilderFrame`, the class of the
objects a kernel body opens with `with` / `for` (see ir_builder/base.py)."""

from . import ir_builder  # noqa: F401
