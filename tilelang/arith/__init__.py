"""Integer arithmetic: simplification and bound proofs for index expressions."""

from .simplify import simplify, prove, const_int_bound, Analyzer  # noqa: F401
