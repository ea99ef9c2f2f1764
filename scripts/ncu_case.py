"""Run one benchmark case of an example once inside an NVTX range "profile", for Nsight
Compute to pick out (the example's own checks and warm-up launches stay outside it):

    ncu --nvtx --nvtx-include "profile/" --section SpeedOfLight --section WarpStateStats \
        python scripts/ncu_case.py examples/convolution/example_convolution.py 0

The case index counts the rows that the example's run(size="bench") returns.
"""

import importlib.util
import sys

import torch


def main():
    path, index = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
    spec = importlib.util.spec_from_file_location("ncu_case", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    case = module.run("cuda", "bench")[index]
    case["tilelang"]()  # warm: modules loaded, caches hot
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("profile")
    case["tilelang"]()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    print(f"profiled: {case['name']}")


if __name__ == "__main__":
    main()
