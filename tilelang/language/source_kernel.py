"""`T.CUDASourceCodeKernel(grid..., threads=, source_code_or_path=, entry_name=)`: launch a
`__global__` function of hand-written CUDA (inline text or a file) in place of a traced kernel.

The entry receives what the reference passes: the data pointers of the function's tensor
parameters and the size variables of their shapes and strides, pointers first, each group
sorted by name (`external_copy(float* A, float* B, int N)` for tensors A, B of shape (N,)).
Here the source is compiled into the kernel file with its `__global__` functions as device
functions (their `__launch_bounds__` dropped), and the generated kernel, launched with the
given grid and threads, calls the entry with those arguments: the same blocks, threads and
memory as a direct launch. GPU only: the CPU interpreter rejects the kernel.
"""

from __future__ import annotations

import os
import re

from ..frontend.builder import current_builder, emit, error
from ..ir import nodes as ir
from ..ir.dtype import DType

# the __global__ functions a CUDA source declares: `__global__ void [__launch_bounds__(..)] f(`
_GLOBAL_FN = re.compile(r"__global__\s+(?:[\w:<>,\s*]*?\s)?(?:__launch_bounds__\s*\([^)]*\)\s*)?"
                        r"(\w+)\s*\(")
_SOURCE_MARKERS = ("\n", "__global__", 'extern "C"', "#include")
_CUDA_SUFFIXES = (".cu", ".cuh", ".cuda", ".cpp", ".cc", ".c")
# a __global__ function becomes a device function the generated kernel calls; attributes only
# a __global__ function may carry are dropped (the generated kernel has its own launch bounds)
_AS_DEVICE_FUNCTIONS = ("__global__", "__launch_bounds__", "__cluster_dims__", "__maxnreg__")


def load_cuda_source(source_code_or_path) -> str:
    """The source text: the file's contents when the argument names an existing file, else the
    argument itself when it looks like CUDA source."""
    source = os.fspath(source_code_or_path)
    if not isinstance(source, str) or not source.strip():
        raise error(ValueError, "source_code_or_path must be a non-empty source string or "
                                "source path")
    path = os.path.expanduser(source)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    if any(marker in source for marker in _SOURCE_MARKERS):
        return source
    if os.path.sep in source or (os.path.altsep and os.path.altsep in source) or \
            source.endswith(_CUDA_SUFFIXES):
        raise error(FileNotFoundError, f"CUDA source file not found: {source}")
    return source


def kernel_names(source: str) -> list:
    """The `__global__` functions of `source`, in order (comments ignored)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    names = []
    for m in _GLOBAL_FN.finditer(text):
        if m.group(1) not in names and m.group(1) not in ("void", "__launch_bounds__"):
            names.append(m.group(1))
    return names


def _as_device_functions(source: str) -> str:
    lines = []
    for macro in _AS_DEVICE_FUNCTIONS:
        lines += [f'#pragma push_macro("{macro}")', f"#undef {macro}"]
    lines += ["#define __global__ __device__", "#define __launch_bounds__(...)",
              "#define __cluster_dims__(...)", "#define __maxnreg__(...)", source.rstrip()]
    # undefine before restoring: where the name was no macro to begin with (NVRTC's
    # `__global__` is a keyword), popping restores nothing and the stand-in would stay
    lines += [f"#undef {macro}" for macro in _AS_DEVICE_FUNCTIONS]
    lines += [f'#pragma pop_macro("{macro}")' for macro in reversed(_AS_DEVICE_FUNCTIONS)]
    return "\n".join(lines) + "\n"


def _entry_arguments(params) -> list:
    """The reference's signature of a source kernel: tensor data pointers, then the size
    variables of their shapes and strides, each group sorted by name."""
    pointers, sizes, seen = [], [], set()
    for p in params:
        if not isinstance(p, ir.Buffer):
            continue
        pointers.append(p)
        for s in list(p.shape) + list(p.strides or ()):
            if isinstance(s, ir.Var) and s.name not in seen:
                seen.add(s.name)
                sizes.append(s)
    return sorted(pointers, key=lambda b: b.name) + sorted(sizes, key=lambda v: v.name)


def CUDASourceCodeKernel(*blocks, threads=None, source_code_or_path, entry_name="main_kernel",  # noqa: N802
                         cluster_dims=None, prelude=None):
    """Launch the `__global__` function `entry_name` of CUDA source (inline text, or a path to
    a file) over the grid `blocks` with `threads`, passing the tensor parameters' data
    pointers and their size variables (see the module docstring). `prelude` is prepended to
    the source."""
    from .kernel import Kernel

    b = current_builder(what="T.CUDASourceCodeKernel")
    if b.in_kernel():
        raise error(ValueError, "T.CUDASourceCodeKernel cannot be nested in a T.Kernel")
    source = load_cuda_source(source_code_or_path)
    if prelude is not None:
        source = prelude + "\n" + source
    if not isinstance(entry_name, str) or not entry_name.strip():
        raise error(ValueError, "entry_name must be a non-empty string when provided")
    names = kernel_names(source)
    if not names:
        raise error(ValueError, "T.CUDASourceCodeKernel expects external CUDA source to declare "
                                "at least one __global__ kernel")
    if entry_name not in names:
        raise error(ValueError, f"T.CUDASourceCodeKernel: no __global__ kernel `{entry_name}` "
                                f"in the provided CUDA source. Available entries: "
                                f"{', '.join(names)}")
    b.attrs.setdefault("import_source", []).append(_as_device_functions(source))
    args = tuple(_entry_arguments(b.params))
    with Kernel(*blocks, threads=threads, cluster_dims=cluster_dims):
        emit(ir.Evaluate, ir.Call("call_extern", (entry_name,) + args, DType("void")))
