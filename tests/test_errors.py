"""`tilelang.errors.SourceLoc`: the tracer's locations find their columns only when asked (an
error, a print), and behave as the eager ones otherwise: equality, hashing, pickling, the
program key."""

import hashlib
import pickle
import sys

import pytest

import tilelang.language as T
from tilelang import errors
from tilelang.engine.program_cache import fingerprint
from tilelang.errors import SourceLoc
from tilelang.ir.visitor import collect


def _site():
    frame = sys._getframe(0)
    x = [1,  2][0]  # an instruction with columns on this line
    return frame.f_code, frame.f_lineno, frame.f_lasti, x


def test_a_deferred_location_equals_the_eager_one():
    code, lineno, lasti, _ = _site()
    lazy = SourceLoc.at(code, lineno, lasti)
    assert lazy._columns is None  # nothing read yet
    eager = SourceLoc(code.co_filename, lineno, *lazy.columns())
    assert lazy == eager and hash(lazy) == hash(eager) and str(lazy) == str(eager)
    assert isinstance(lazy.col, int)  # Python >= 3.11 records columns
    back = pickle.loads(pickle.dumps(lazy))
    assert back == eager and back._site is None
    assert "^" in lazy.render()
    with pytest.raises(AttributeError):
        lazy.lineno = 3


def kernel():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                A[i] = A[i] * 2.0
    return f


def test_tracing_reads_no_positions_and_the_key_does_not_depend_on_them(monkeypatch):
    read = []
    real = errors._positions
    monkeypatch.setattr(errors, "_positions", lambda code: read.append(code) or real(code))
    f = kernel()
    assert read == []
    locs = [n.loc for n in collect(f.body, lambda n: getattr(n, "loc", None) is not None)]
    assert locs and all(loc._columns is None for loc in locs)  # none read yet
    before = hashlib.sha256()
    fingerprint(f, before)
    assert all(loc.col is not None for loc in locs) and read  # now asked for
    after = hashlib.sha256()
    fingerprint(f, after)
    assert before.hexdigest() == after.hexdigest()


def test_an_error_in_a_kernel_shows_its_columns():
    with pytest.raises(errors.KernelError) as info:
        @T.prim_func
        def f(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                S = T.alloc_shared((32,), "float32")
                for i in T.Parallel(64):
                    S[i] = A[i]
    loc = info.value.loc
    assert loc.col is not None and "^" in str(info.value)
