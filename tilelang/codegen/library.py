"""Which headers of the device library (tilelang/include) a generated kernel includes.

Generated kernels include tl/common.cuh and each other header of the library (the list in
tl.cuh) whose names their code uses: parsing headers a kernel does not use was about a third of
NVRTC's front end in a process's first compile (the as-written GEMM: 74 -> 53 ms on the
development VM, 126 -> 98 on the H200 machine; the kernel's code is the same).

What a header defines, as written there: `TL_DEVICE ... name(` (or `__device__`), a set made by
one of its macros (`TL_MATH_UNARY_(exp, ...)`), a struct, class, enum or alias at the start of a
line. Code uses a name as `tl::name` (`tl::detail::name`), or plainly where the header defines
it outside `namespace tl { ... }  // namespace tl` (the PDL functions of barrier.cuh).

Reading the names from the headers takes about 24 ms (1.5 MB of generated wgmma wrappers), more
than the parse it saves on a small kernel, so the names are read once, when the headers change,
into library_names.py:

    python -m tilelang.codegen.library            # rewrite library_names.py
    python -m tilelang.codegen.library --check    # exit 1 if it is out of date

Guarantees: `library_headers()` is what the headers define now. The table is used only while
every header it was read from has the size it recorded and no header was added or removed;
otherwise (a header edited in a checkout) the headers are read again in this process. A test
(tests/codegen/test_library_includes.py) keeps the file equal to a fresh reading.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path

from ..runtime.toolkit import TILELANG_INCLUDE

LIBRARY = Path(TILELANG_INCLUDE)
COMMON = "tl/common.cuh"
TABLE = Path(__file__).with_name("library_names.py")

_DEFINED = [re.compile(p, re.M) for p in (
    r"\b(?:TL_(?:HOST_)?DEVICE|__device__)\b[^;{}()]*?\b(\w+)\s*\(",
    r"^\s*TL_[A-Z0-9_]+_\(\s*(\w+)",
    r"^\s*(?:template\s*<[^>]*>\s*)?(?:struct|class|enum(?:\s+class)?)\s+(\w+)",
    r"^\s*using\s+(\w+)\s*=")]
_FUNDAMENTAL = {"operator", "bool", "char", "short", "int", "long", "float", "double", "void",
                "signed", "unsigned"}
_TL_OPEN = re.compile(r"^namespace tl\s*\{")
_TL_CLOSE = re.compile(r"^\}\s*//\s*namespace tl\s*$")
# a use in generated code of a name in namespace tl
_TL_USE = re.compile(r"\btl::(?:detail::)?(\w+)")


def _outside_namespace(text: str) -> str:
    """The lines of a header outside its `namespace tl` blocks."""
    depth, out = 0, []
    for line in text.splitlines():
        if _TL_OPEN.match(line):
            depth += 1
        elif _TL_CLOSE.match(line):
            depth -= 1
        elif depth == 0 and not line.lstrip().startswith("//"):
            out.append(line)
    return "\n".join(out)


def _defined_in(header: str, members=()) -> tuple:
    """(every name `header` defines, those it defines outside namespace tl), with the names of
    the headers it includes that are not `members` of the library themselves (tl/wgmma.cuh's
    generated tl/wgmma_ops.cuh)."""
    text = (LIBRARY / header).read_text()
    names = {m for pattern in _DEFINED for m in pattern.findall(text)}
    plain = {m for pattern in _DEFINED for m in pattern.findall(_outside_namespace(text))}
    for part in re.findall(r'#include "(\w+\.cuh)"', text):
        part = f"tl/{part}"
        if part not in members and part != COMMON and part != header:
            more, more_plain = _defined_in(part, (*members, header))
            names |= more
            plain |= more_plain
    return names, plain


def read_headers() -> tuple:
    """(header, names used as tl::name, names used plainly) for every header tl.cuh includes
    after tl/common.cuh, in tl.cuh's order, read from the headers; names common.cuh defines,
    macro parameters (all capitals) and C++'s own types are left out."""
    headers = re.findall(r'#include "(tl/\w+\.cuh)"', (LIBRARY / "tl.cuh").read_text())
    assert headers[0] == COMMON, "tl.cuh must start with tl/common.cuh"
    common = _defined_in(COMMON)[0]

    def kept(names):
        return tuple(sorted(n for n in names - common - _FUNDAMENTAL if not n.isupper()))

    out = []
    for h in headers[1:]:
        names, plain = (kept(n) for n in _defined_in(h, headers))
        if names or plain:
            out.append((h, names, plain))
    return tuple(out)


def header_sizes() -> dict:
    """{path under include/: size} of every header of the library."""
    out = {}
    for sub in ("", "tl"):
        with os.scandir(LIBRARY / sub) as it:
            for e in it:
                if e.name.endswith((".cuh", ".h")) and e.is_file():
                    out[f"{sub}/{e.name}" if sub else e.name] = e.stat().st_size
    return dict(sorted(out.items()))


def _wrapped(texts, indent: str) -> str:
    """`texts` joined with commas, a new line (after `indent`) every about 100 columns."""
    lines, line = [], ""
    for text in (t + "," for t in texts):
        if line and len(indent) + len(line) + len(text) > 98:
            lines.append(line)
            line = ""
        line += (" " if line else "") + text
    lines.append(line)
    return ("\n" + indent).join(lines)


def render_table() -> str:
    """The text of library_names.py."""
    sizes = _wrapped([f"{k!r}: {v}" for k, v in header_sizes().items()], "    ")
    rows = "".join(f"    ({h!r},\n     ({_wrapped(map(repr, names), '      ')}),\n"
                   f"     ({_wrapped(map(repr, plain), '      ')})),\n"
                   for h, names, plain in read_headers())
    return ("# Generated by `python -m tilelang.codegen.library` from the headers of "
            "tilelang/include:\n# do not edit. The names each header of tl.cuh defines "
            "(codegen/library.py), and the\n# size of every header they were read from.\n"
            f"SIZES = {{\n    {sizes}\n}}\n\nHEADERS = (\n{rows})\n")


@functools.lru_cache(maxsize=None)
def library_headers() -> tuple:
    """(header, frozenset of names used as tl::name, frozenset of names used plainly) for every
    header tl.cuh includes after tl/common.cuh, in tl.cuh's order."""
    try:
        from . import library_names as table
        current = table.SIZES == header_sizes()
    except (ImportError, OSError, AttributeError):
        current = False
    rows = table.HEADERS if current else read_headers()
    return tuple((h, frozenset(names), frozenset(plain)) for h, names, plain in rows)


def _uses_plainly(source: str, names) -> bool:
    """Whether `source` uses one of `names` (defined outside namespace tl) as an identifier
    not qualified by a namespace."""
    return any(n in source and re.search(r"(?<![\w:])" + n + r"\b", source) for n in names)


def library_includes(kernel_sources, imported=()) -> str:
    """The `#include`s of the device library the kernels need: tl/common.cuh and every other
    header whose names they use; the whole library (tl.cuh) next to hand-written CUDA, which
    may use anything."""
    if imported:
        return '#include "tl.cuh"\n'
    tl_uses = {n for s in kernel_sources for n in _TL_USE.findall(s)}
    used = [h for h, names, plain in library_headers() if not names.isdisjoint(tl_uses)
            or any(_uses_plainly(s, plain) for s in kernel_sources)]
    return "".join(f'#include "{h}"\n' for h in [COMMON] + used)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render_table()
    if "--check" in argv:
        if not TABLE.exists() or TABLE.read_text() != text:
            print("out of date (run python -m tilelang.codegen.library):", TABLE.name)
            return 1
        return 0
    TABLE.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
