"""`tvm.arith` for reference programs: `Analyzer` (this project's: `simplify`, `can_prove`,
`can_prove_equal`, `bind`, `const_int_bound`)."""

from ..arith import Analyzer as _Analyzer

__all__ = ["Analyzer"]


class Analyzer(_Analyzer):
    """The integer analyzer under TVM's names (`can_prove` is `prove`)."""

    __slots__ = ()

    def can_prove(self, cond, *_strength) -> bool:
        return self.prove(cond)
