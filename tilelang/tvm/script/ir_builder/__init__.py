"""`tvm.script.ir_builder`: see base.py."""

from . import base  # noqa: F401
