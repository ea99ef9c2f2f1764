"""`SwizzleMode`: the shared-memory XOR swizzle widths (layout/swizzle.py, HARDWARE.md §4) and
how TMA and wgmma descriptors encode them.

    SwizzleMode.SWIZZLE_128B.wgmma_layout_type()   # 1: the descriptor's bits 62-63
    SwizzleMode.from_bytes(layout.swizzle_bytes)   # None -> NONE

The same swizzle has a different code in each descriptor: wgmma (sm_90) none/128B/64B/32B =
0/1/2/3, tcgen05 (sm_100) 0/2/4/6, and TMA's CU_TENSOR_MAP_SWIZZLE_* 0/3/2/1.
"""

from __future__ import annotations

import enum

__all__ = ["SwizzleMode"]


class SwizzleMode(enum.Enum):
    """A swizzle width; the value is the pattern width in bytes (0: no swizzle)."""

    NONE = 0
    SWIZZLE_32B = 32
    SWIZZLE_64B = 64
    SWIZZLE_128B = 128

    def is_none(self) -> bool:
        return self is SwizzleMode.NONE

    def is_swizzle_32b(self) -> bool:
        return self is SwizzleMode.SWIZZLE_32B

    def is_swizzle_64b(self) -> bool:
        return self is SwizzleMode.SWIZZLE_64B

    def is_swizzle_128b(self) -> bool:
        return self is SwizzleMode.SWIZZLE_128B

    def wgmma_layout_type(self) -> int:
        """The wgmma descriptor's layout field: none 0, 128B 1, 64B 2, 32B 3."""
        return {0: 0, 128: 1, 64: 2, 32: 3}[self.value]

    def tcgen05_layout_type(self) -> int:
        """The sm_100 (tcgen05) descriptor's swizzle field: none 0, 128B 2, 64B 4, 32B 6."""
        return {0: 0, 128: 2, 64: 4, 32: 6}[self.value]

    def tma_swizzle(self) -> int:
        """CU_TENSOR_MAP_SWIZZLE_*: none 0, 32B 1, 64B 2, 128B 3."""
        return {0: 0, 32: 1, 64: 2, 128: 3}[self.value]

    def swizzle_byte_size(self) -> int:
        """The pattern width in bytes (1 for no swizzle)."""
        return self.value or 1

    def swizzle_atom_size(self) -> int:
        """The pattern width in 16-byte chunks (1 for no swizzle)."""
        return self.value // 16 if self.value else 1

    def smem_alignment(self) -> int:
        """The shared-memory base alignment the pattern needs: 8 rows of it (128 bytes for no
        swizzle), so that the XOR phase of the address equals the row's."""
        return 8 * self.value if self.value else 128

    @staticmethod
    def from_ordinal(ordinal: int) -> "SwizzleMode":
        """By declaration order: 0 NONE, 1 32B, 2 64B, 3 128B."""
        return list(SwizzleMode)[int(ordinal)]

    @staticmethod
    def from_bytes(width) -> "SwizzleMode":
        """From a pattern width in bytes (None or 0: NONE), e.g. a Layout's `swizzle_bytes`."""
        return SwizzleMode(int(width or 0))
