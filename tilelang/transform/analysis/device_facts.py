"""Facts about the GPU a schedule choice needs, known without asking a GPU.

Guarantees: `nominal_sm_count(target)` is the SM count of the architecture's data-centre part
(132 for sm_90a: H100 SXM and H200), the same on every machine. A schedule choice that weighs
a grid against the SMs (warp specialisation, a persistent grid) uses it, so a kernel's code is
a function of the program, the target and the options alone: the program cache keys on
nothing else, a build machine without a GPU compiles what the GPU machine would, and the CUDA
driver's initialisation (about 0.1 s in a fresh process) stays out of the compile. Where the
code must match the GPU it runs on (one block per SM), the grid names `ir.DEVICE_SM_COUNT`,
which the launcher reads from the device at the call (engine/host.py, engine/build.py).
"""

from __future__ import annotations

# by compute capability: A100, A10, L40S, H100/H200, B200; others the Hopper part's
_NOMINAL = {80: 108, 86: 84, 89: 142, 90: 132, 100: 148}


def nominal_sm_count(target) -> int:
    return _NOMINAL.get(target.sm, 132)
