"""`Record`: the base of the few data classes a process imports to load a kernel from the disk
cache (codegen/launch.py, runtime/cache.py). A subclass lists its fields in `__slots__` and
writes its `__init__`; `Record` gives equality, repr and pickling over those fields.

Why not dataclasses: making one runs generated code, about 0.3 ms per class on import (1 ms
of a 2-core VM's 3-10 ms to load a cached kernel in a fresh process, issue 23).
"""

from __future__ import annotations


class Record:
    __slots__ = ()

    def __eq__(self, other):
        return type(other) is type(self) and \
            all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # mutable, compared by value

    def __repr__(self):
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def __getstate__(self):  # no __dict__: pickled as {field: value}
        return {n: getattr(self, n) for n in self.__slots__}

    def __setstate__(self, state):
        for n, v in state.items():
            setattr(self, n, v)
