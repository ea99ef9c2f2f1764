"""The CUDA header library (tilelang/include/tl) compiles under NVRTC, not only nvcc.

CI and this machine compile with nvcc when NVRTC is missing, and nvcc accepts compiler builtins
that NVRTC does not declare (`__builtin_memcpy` broke the register-operand sparse GEMMs on the
GPU machine while every CPU build passed). The device-side `memcpy` works under both."""

import pathlib
import re

import tilelang

HEADERS = pathlib.Path(tilelang.__file__).parent / "include" / "tl"
NVRTC_UNDECLARED = re.compile(r"\b__builtin_(memcpy|memset|memmove|memcmp)\b")


def test_headers_use_no_builtins_nvrtc_lacks():
    found = [f"{path.name}:{n}: {line.strip()}"
             for path in sorted(HEADERS.rglob("*.cuh"))
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if NVRTC_UNDECLARED.search(line)]
    assert not found, "use memcpy/memset, which NVRTC declares:\n" + "\n".join(found)
