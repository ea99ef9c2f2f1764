"""Register count and local-memory frame of each kernel, read from a cubin without a GPU.

Expects an ELF64 little-endian cubin as NVRTC/ptxas write it. Guarantees:
`resource_usage(cubin)` maps each kernel's symbol name to `(registers, frame_bytes)`, the same
numbers the driver reports as CU_FUNC_ATTRIBUTE_NUM_REGS and _LOCAL_SIZE_BYTES (and cuobjdump
as REG and LOCAL), so `kernel.n_regs` / `kernel.n_spills` work on a machine without a GPU;
`code_bytes(cubin)` maps each kernel to the size of its machine code (16 bytes an
instruction on sm_70 and later), which tests compare between two ways of writing a kernel.

The numbers live in the `.nv.info` section: a list of attributes, each
`u8 format, u8 attribute, ...`; format 0x04 carries a u16 length and that many bytes, and
for the per-kernel attributes read here the payload is `u32 symbol index, u32 value`.
"""

from __future__ import annotations

import struct

EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F
_FORMAT_SIZED = 0x04
_FORMAT_HALF = 0x03
_FORMAT_FLAG = 0x01


def _sections(elf: bytes):
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF cubin")
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize)
               for i in range(shnum)]
    names_at = headers[shstrndx][4]

    def name(offset):
        end = elf.index(b"\0", names_at + offset)
        return elf[names_at + offset:end].decode()

    return {name(h[0]): h for h in headers}


def _symbol_names(elf: bytes, sections) -> list[str]:
    symtab, strtab = sections.get(".symtab"), sections.get(".strtab")
    if symtab is None or strtab is None:
        return []
    names = []
    for off in range(symtab[4], symtab[4] + symtab[5], 24):  # Elf64_Sym is 24 bytes
        name_off = struct.unpack_from("<I", elf, off)[0]
        end = elf.index(b"\0", strtab[4] + name_off)
        names.append(elf[strtab[4] + name_off:end].decode())
    return names


def resource_usage(cubin: bytes) -> dict[str, tuple[int, int]]:
    sections = _sections(cubin)
    info = sections.get(".nv.info")
    if info is None:
        return {}
    symbols = _symbol_names(cubin, sections)
    regs: dict[int, int] = {}
    frame: dict[int, int] = {}
    pos, end = info[4], info[4] + info[5]
    while pos + 2 <= end:
        fmt, attr = cubin[pos], cubin[pos + 1]
        if fmt == _FORMAT_SIZED:
            size = struct.unpack_from("<H", cubin, pos + 2)[0]
            if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and size == 8:
                sym, value = struct.unpack_from("<II", cubin, pos + 4)
                (regs if attr == EIATTR_REGCOUNT else frame)[sym] = value
            pos += 4 + size
        else:
            pos += 2 if fmt == _FORMAT_FLAG else 4
    return {symbols[s] if s < len(symbols) else str(s): (n, frame.get(s, 0))
            for s, n in regs.items()}


def code_bytes(cubin: bytes) -> dict[str, int]:
    """Bytes of machine code of each kernel (its `.text.<name>` section)."""
    return {name[len(".text."):]: header[5] for name, header in _sections(cubin).items()
            if name.startswith(".text.")}
