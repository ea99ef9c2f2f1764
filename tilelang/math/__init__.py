"""Integer helpers users call on the host side (`tilelang.math.cdiv`, `next_power_of_2`).

Plain Python ints in, plain Python ints out; nothing here builds IR (for a symbolic ceil-div
inside a kernel use `T.ceildiv`).
"""

from __future__ import annotations

__all__ = ["cdiv", "next_power_of_2", "prev_power_of_2"]


def cdiv(a: int, b: int) -> int:
    """Ceil division of non-negative ints: `cdiv(10, 4) == 3`."""
    return (a + b - 1) // b


def next_power_of_2(x: int) -> int:
    """The smallest power of two >= x (1 for x <= 1): `next_power_of_2(5) == 8`."""
    return 1 << (int(x) - 1).bit_length() if x > 1 else 1


def prev_power_of_2(x: int) -> int:
    """The largest power of two <= x (x >= 1): `prev_power_of_2(5) == 4`."""
    if x < 1:
        raise ValueError(f"prev_power_of_2 needs x >= 1, got {x}")
    return 1 << (int(x).bit_length() - 1)
