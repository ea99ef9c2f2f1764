"""`SwizzleMode`: the shared-memory swizzles the TMA and wgmma hardware know (none, 32, 64 and
128 bytes), with the fields their descriptors encode them as (PTX ISA, "Shared memory matrix
layout" / "Tensor-map swizzle")."""

from __future__ import annotations

import enum

__all__ = ["SwizzleMode"]


class SwizzleMode(enum.Enum):
    NONE = 0
    SWIZZLE_32B = 1
    SWIZZLE_64B = 2
    SWIZZLE_128B = 3

    def is_none(self) -> bool:
        return self is SwizzleMode.NONE

    def is_swizzle_32b(self) -> bool:
        return self is SwizzleMode.SWIZZLE_32B

    def is_swizzle_64b(self) -> bool:
        return self is SwizzleMode.SWIZZLE_64B

    def is_swizzle_128b(self) -> bool:
        return self is SwizzleMode.SWIZZLE_128B

    def wgmma_layout_type(self) -> int:
        """The wgmma descriptor's layout_type field (none 0, 128B 1, 64B 2, 32B 3)."""
        return (0, 3, 2, 1)[self.value]

    def tcgen05_layout_type(self) -> int:
        """The tcgen05 descriptor's swizzle field (none 0, 128B 2, 64B 4, 32B 6)."""
        return (0, 6, 4, 2)[self.value]

    def swizzle_byte_size(self) -> int:
        """The swizzle span in bytes (1 for none)."""
        return 1 if self.is_none() else 16 << self.value

    def swizzle_atom_size(self) -> int:
        """The swizzle span in 16-byte chunks (1 for none)."""
        return 1 if self.is_none() else self.swizzle_byte_size() // 16

    def smem_alignment(self) -> int:
        """The shared-memory base alignment the swizzle needs, in bytes (128 for none)."""
        return 128 if self.is_none() else 8 * self.swizzle_byte_size()

    @staticmethod
    def from_ordinal(ordinal: int) -> "SwizzleMode":
        """0..3 -> NONE, 32B, 64B, 128B."""
        if not 0 <= int(ordinal) <= 3:
            raise ValueError(f"invalid SwizzleMode ordinal: {ordinal}")
        return SwizzleMode(int(ordinal))
