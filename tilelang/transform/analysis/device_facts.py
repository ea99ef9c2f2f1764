"""Facts about the GPU kernels are compiled for, where a schedule choice needs one.

Guarantees: `streaming_multiprocessors()` is the SM count of the current GPU, or of an
H100/H200 (132) when there is none to ask; asked of torch where the program has imported it
(its current device), else of the CUDA driver (device 0): importing torch here cost a
process's first compile a second. Only performance may depend on it: a kernel compiled for
one count runs correctly on a GPU with another.
"""

from __future__ import annotations

import functools
import sys


def streaming_multiprocessors() -> int:
    torch = sys.modules.get("torch")
    try:
        if torch is not None:
            if torch.cuda.is_available():
                return torch.cuda.get_device_properties(torch.cuda.current_device()) \
                    .multi_processor_count
            return 132
        return _driver_sm_count()
    except Exception:  # noqa: BLE001 - no usable GPU: the Hopper part's count
        return 132


@functools.lru_cache(maxsize=1)
def _driver_sm_count() -> int:
    from ...runtime import driver

    return driver.device_attribute(driver.DEV_MULTIPROCESSOR_COUNT, 0)
