"""Integer arithmetic: simplification and bound proofs for index expressions."""

from .analyzer import Analyzer
from .simplify import simplify, prove, const_int_bound

__all__ = ["simplify", "prove", "const_int_bound", "Analyzer"]
