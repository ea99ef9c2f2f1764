"""Dump SASS instruction counts (HGMMA/HMMA/LDSM/spills) of core kernels (run on the device)."""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import tilelang  # noqa: E402
from tests.gpu import kernels as K  # noqa: E402


def report(name, func):
    k = tilelang.compile(func, out_idx=[-1] if name != "flash" else [3])
    cubin = k.adapter.compiled.cubin
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    sass = subprocess.run(["cuobjdump", "--dump-sass", f.name], capture_output=True,
                          text=True).stdout
    counts = {op: sass.count(op) for op in ("HGMMA", "HMMA", "LDSM", "LDL", "STL", "BAR.SYNC")}
    print(f"{name}: regs={k.n_regs} spill_bytes={k.n_spills} {counts}", flush=True)


report("gemm", K.gemm(4096, 4096, 4096, 128, 128, 32, dtype="float16", accum_dtype="float32",
                      out_dtype="float16", num_stages=3, threads=128))
report("flash", K.flash_fwd(8, 32, 4096, 128, False, 128, 64, 2, 256))
