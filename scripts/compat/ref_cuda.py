"""The reference TileLang 0.1.15's generated CUDA for a kernel, on this GPU-less machine
(Python 3.12 with torch; the reference package at /tmp/tlsite; target sm_90a).

    PYTHONPATH=/tmp/tlsite /root/.pyenv/versions/3.12.1/bin/python scripts/compat/ref_cuda.py \
        path/to/example.py "gemv_alloc_reducer.compile(M=4096, N=4096, block_M=128, block_N=128)"

The expression is evaluated in the example module's namespace and must give a compiled
kernel (something with get_kernel_source()); run from a scratch copy of the example's
directory (the reference writes logs next to it). Read the output for facts; never copy it.
"""
import importlib.util
import os
import sys

import tilelang  # noqa: F401
import tilelang.backend.target as bt
from tvm.target import Target


def _sm90a():
    return Target({"kind": "cuda", "arch": "sm_90a"})


bt.auto_detect_target = _sm90a
for m in list(sys.modules.values()):
    if m is not None and m is not bt and getattr(m, "auto_detect_target", None) is not None:
        try:
            m.auto_detect_target = _sm90a
        except Exception:
            pass
path, expr = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
spec = importlib.util.spec_from_file_location("example", path)
mod = importlib.util.module_from_spec(spec)
sys.argv = [path]
spec.loader.exec_module(mod)
k = eval(expr, vars(mod))
print(k.get_kernel_source())
