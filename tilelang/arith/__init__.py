"""Integer arithmetic: simplification and bound proofs for index expressions."""

from .analyzer import Analyzer
from .simplify import simplify, prove, const_int_bound
from ..ir import hooks as _ir_hooks

_ir_hooks.simplify = simplify  # the IR printer simplifies the ends of loop ranges

__all__ = ["simplify", "prove", "const_int_bound", "Analyzer"]
