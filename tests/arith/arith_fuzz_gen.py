"""Random integer expressions over bound variables, and assignments within the bounds
(shared by the fuzz tests)."""

from __future__ import annotations

import random

from tilelang.ir import nodes as ir

I32, I64 = ir.INT32, ir.DType("int64")


class ExprGen:
    """Builds random int expressions from `+ - * // % min max select`, comparisons, trunc
    division, shifts and masks by constants, and division by a positive variable."""

    def __init__(self, rng: random.Random, leaves, pos_divisors=(), dtype=I32):
        self.rng = rng
        self.leaves = list(leaves)
        self.pos_divisors = list(pos_divisors)  # expressions known to be >= 1
        self.dtype = dtype

    def const(self, lo=-20, hi=70):
        return ir.const(self.rng.randint(lo, hi), self.dtype)

    def leaf(self):
        r = self.rng.random()
        if r < 0.7:
            v = self.rng.choice(self.leaves)
            if v.dtype is not self.dtype:
                return ir.cast_to(v, self.dtype)
            return v
        return self.const()

    def cond(self, depth):
        r = self.rng.random()
        if r < 0.15:  # two conditions on one expression: implication / contradiction bait
            x = self.expr(depth - 1)
            c = self.rng.randint(-3, 20)
            ops = ["lt", "le", "gt", "ge"]
            a = ir.compare(self.rng.choice(ops), x, c)
            b = ir.compare(self.rng.choice(ops), x, c + self.rng.randint(-2, 2))
            return (ir.logical_and if self.rng.random() < 0.5 else ir.logical_or)(a, b)
        if r < 0.8:
            op = self.rng.choice(["lt", "le", "gt", "ge", "eq", "ne"])
            return ir.compare(op, self.expr(depth - 1), self.expr(depth - 1))
        a, b = self.cond(depth - 1), self.cond(depth - 1)
        if r < 0.9:
            return ir.logical_and(a, b)
        if r < 0.97:
            return ir.logical_or(a, b)
        return ir.logical_not(a)

    def expr(self, depth):
        rng = self.rng
        if depth <= 0 or rng.random() < 0.15:
            return self.leaf()
        d = depth - 1
        op = rng.choices(
            ["add", "sub", "mul", "mulv", "fdiv", "fmod", "tdiv", "tmod", "min", "max",
             "select", "shl", "shr", "and", "xor", "neg", "not", "sdiv", "smod", "nested",
             "narrow"],
            weights=[14, 10, 10, 4, 10, 10, 3, 3, 5, 5, 4, 2, 3, 3, 1, 2, 1, 2, 2, 6, 2])[0]
        x = self.expr(d)
        if op == "add":
            return x + self.expr(d)
        if op == "sub":
            return x - self.expr(d)
        if op == "mul":
            return x * ir.const(rng.choice([-4, -1, 2, 3, 4, 8, 16, 32, 5]), self.dtype)
        if op == "mulv":
            return x * self.leaf()
        if op in ("fdiv", "fmod", "tdiv", "tmod"):
            c = rng.choice([1, 2, 3, 4, 4, 8, 8, 16, 32, 64, 6, -4, -3])
            name = {"fdiv": "floordiv", "fmod": "floormod", "tdiv": "truncdiv",
                    "tmod": "truncmod"}[op]
            return ir.binary(name, x, ir.const(c, self.dtype))
        if op == "nested":  # patterns the rules target: (x*c + y) // c, (x % a) // b ...
            c = rng.choice([2, 4, 8, 16])
            y = self.expr(d)
            kind = rng.randrange(6)
            if kind == 0:
                return ir.binary("floordiv", x * c + y, c)
            if kind == 1:
                return ir.binary("floormod", x * c + y, c)
            if kind == 2:
                return ir.binary("floordiv", ir.binary("floormod", x, c * 4), c)
            if kind == 3:
                return ir.binary("floormod", x, c) + ir.binary("floordiv", x, c) * c
            if kind == 4:  # (x*c + small) // (c*m): the small part may or may not stay below c
                small = self.leaf() + rng.randint(-1, 1)
                op = rng.choice(["floordiv", "floormod"])
                return ir.binary(op, x * c + small, c * rng.choice([1, 2, 4]))
            a = rng.choice([1, c - 1, c, 2 * c, -c])
            b = rng.choice([1, c, c * c, 2 * c, -c, c + 1])
            return ir.binary("floormod", x, c) * a + ir.binary("floordiv", x, c) * b + y
        if op in ("min", "max"):
            return ir.binary(op, x, self.expr(d))
        if op == "select":
            return ir.select(self.cond(d), x, self.expr(d))
        if op == "shl":
            return ir.binary("shl", x, ir.const(rng.randint(0, 3), self.dtype))
        if op == "shr":
            return ir.binary("shr", x, ir.const(rng.randint(0, 4), self.dtype))
        if op == "and":
            return ir.binary("bitand", x, ir.const(rng.choice([1, 3, 7, 15, 31, 6, 12]),
                                                   self.dtype))
        if op == "xor":
            return ir.binary("bitxor", x, self.expr(d))
        if op == "narrow":  # through a narrower type and back: wraps
            mid = ir.DType("int32") if self.dtype.bits == 64 else ir.DType("int16")
            return ir.cast_to(ir.cast_to(x * 65536 * 4096, mid), self.dtype)
        if op == "neg":
            return -x
        if op == "not":
            return ~x
        if op in ("sdiv", "smod") and self.pos_divisors:
            div = rng.choice(self.pos_divisors)
            if div.dtype is not self.dtype:
                div = ir.cast_to(div, self.dtype)
            if rng.random() < 0.5:
                x = x + div * self.expr(d)
            return ir.binary("floordiv" if op == "sdiv" else "floormod", x, div)
        return x


def pick(rng: random.Random, lo: int, hi: int) -> int:
    """A value in [lo, hi], often an end point."""
    r = rng.random()
    if r < 0.15:
        return lo
    if r < 0.3:
        return hi
    return rng.randint(lo, hi)


def wide_int(rng: random.Random) -> int:
    """A value for an unbounded variable: small, large, positive and negative."""
    r = rng.random()
    if r < 0.5:
        return rng.randint(-70, 70)
    if r < 0.8:
        return rng.randint(-5000, 5000)
    return rng.randint(-10**7, 10**7)
