"""Device descriptions for the tile-configuration recommender (`tilelang.carver`): `CUDA(target)`
describes an NVIDIA GPU with the reference's attribute names (`sm_version`, `smem_cap`,
`compute_max_core`, `compute_capability`, `bandwidth`, ...).

The facts come from the visible GPU (torch's device properties); a target naming an arch
(`CUDA("cuda -arch=sm_90a")`) on a machine without one takes the flagship part of that
generation from a table (A100 for sm_80, H100 for sm_90), so configurations can be recommended
for code generated without a GPU. `CDNA`/`RDNA`/`METAL` exist so that programs importing them
load; constructing one is an error (no such backends here).
"""

from __future__ import annotations

import re

__all__ = ["TileDevice", "CUDA", "CDNA", "RDNA", "METAL", "is_cuda_arch", "is_volta_arch",
           "is_ampere_arch", "is_ada_arch", "is_hopper_arch", "has_mma_support",
           "is_tensorcore_supported_precision", "is_cdna_arch", "is_rdna_arch",
           "is_metal_arch", "get_arch", "auto_infer_current_arch"]

# sm -> (name, SMs, shared memory per block opt-in, L2 bytes, HBM bandwidth MB/s)
_PARTS = {
    80: ("NVIDIA A100-SXM4-80GB", 108, 166912, 40 << 20, 2_039_000),
    86: ("NVIDIA RTX A6000", 84, 101376, 6 << 20, 768_000),
    89: ("NVIDIA L40S", 142, 101376, 96 << 20, 864_000),
    90: ("NVIDIA H100 80GB HBM3", 132, 232448, 50 << 20, 3_350_000),
}


class TileDevice:
    """What the recommender knows about a device (the reference's attribute names)."""

    def __init__(self) -> None:
        self.reg_cap = 0
        self.smem_cap = 0
        self.compute_max_core = 0
        self.warp_size = 0
        self.sm_partition = 0
        self.transaction_size = [0, 0]
        self.max_smem_usage = 0
        self.bandwidth = [0, 0]  # MB/s: [shared/L2-ish, global], the reference's convention
        self.platform = "unknown"
        self.compute_capability = "unknown"
        self.l2_cache_size_bytes = 0

    def get_avaliable_tensorintrin_shapes(self):  # noqa: D401 - the reference's spelling
        raise NotImplementedError


class TensorInstruction:
    def __init__(self, name: str, shape: list):
        self.name = name
        self.shape = shape


def _sm_of(target) -> int | None:
    m = re.search(r"sm_(\d+)", str(getattr(target, "arch", None) or target))
    return int(m.group(1)) if m else None


class CUDA(TileDevice):
    """An NVIDIA GPU: `CUDA("cuda")` (the visible one) or `CUDA("cuda -arch=sm_90a")`."""

    def __init__(self, target="cuda"):
        super().__init__()
        from ...jit.target import gpu_available

        sm = _sm_of(target)
        props = None
        if gpu_available():
            import torch

            props = torch.cuda.get_device_properties(0)
            if sm is None:
                sm = props.major * 10 + props.minor
        if sm is None:
            raise RuntimeError("CUDA('cuda') describes the visible GPU, but none is visible; "
                               "name an architecture, e.g. CUDA('cuda -arch=sm_90a')")
        part = _PARTS.get(sm) or _PARTS[max(k for k in _PARTS if k <= sm)] if sm >= 80 else None
        if props is None and part is None:
            raise RuntimeError(f"no description of sm_{sm} without a GPU (known: "
                               f"{', '.join(f'sm_{k}' for k in sorted(_PARTS))})")
        self.target = target
        self.sm_version = sm
        self.platform = "CUDA"
        self.warp_size = 32
        self.reg_cap = 65536
        self.sm_partition = 4
        self.transaction_size = [32, 128]
        self.compute_capability = str(sm)
        if props is not None:
            self.name = props.name
            self.compute_max_core = int(props.multi_processor_count)
            self.smem_cap = int(getattr(props, "shared_memory_per_block_optin",
                                        None) or getattr(props,
                                                         "max_shared_memory_per_block_optin",
                                                         48 * 1024))
            self.l2_cache_size_bytes = int(getattr(props, "L2_cache_size", 0) or 0)
        else:
            self.name, self.compute_max_core, self.smem_cap, self.l2_cache_size_bytes = part[:4]
        global_bw = part[4] if part is not None else 2_000_000
        # the reference's bandwidth pair: [750, 12080] for every part; the global figure here
        # is the part's HBM bandwidth in MB/s (what Analyzer and the recommender divide by)
        self.bandwidth = [750, global_bw]
        self.max_smem_usage = 2 * self.smem_cap

    def get_avaliable_tensorintrin_shapes(self):
        self.available_tensor_instructions = (TensorInstruction("mma", [16, 16]),
                                              TensorInstruction("wmma", [16, 16]))
        return [t.shape for t in self.available_tensor_instructions]

    def __repr__(self):
        return f"CUDA({self.target})"


def _absent(kind: str, backend: str):
    class _Absent(TileDevice):
        __doc__ = f"The reference's {backend} device description (absent here)."

        def __init__(self, *args, **kwargs):
            raise NotImplementedError(f"carver.arch.{kind}: the {backend} backend is not "
                                      "available in this TileLang (NVIDIA CUDA and the CPU "
                                      "interpreter only); use CUDA(...)")
    _Absent.__name__ = _Absent.__qualname__ = kind
    return _Absent


CDNA = _absent("CDNA", "AMD CDNA (ROCm/HIP)")
RDNA = _absent("RDNA", "AMD RDNA (ROCm/HIP)")
METAL = _absent("METAL", "Apple Metal")


def is_cuda_arch(arch) -> bool:
    return isinstance(arch, CUDA)


def is_volta_arch(arch) -> bool:
    return is_cuda_arch(arch) and 70 <= arch.sm_version < 80


def is_ampere_arch(arch) -> bool:
    return is_cuda_arch(arch) and 80 <= arch.sm_version < 89


def is_ada_arch(arch) -> bool:
    return is_cuda_arch(arch) and arch.sm_version == 89


def is_hopper_arch(arch) -> bool:
    return is_cuda_arch(arch) and arch.sm_version == 90


def has_mma_support(arch) -> bool:
    return is_cuda_arch(arch) and arch.sm_version >= 80


def is_cdna_arch(arch) -> bool:
    return False


def is_rdna_arch(arch) -> bool:
    return False


def is_metal_arch(arch) -> bool:
    return False


_TC = {
    "volta": {("float16", "float32"), ("float16", "float16")},
    "ampere": {("bfloat16", "float32"), ("float16", "float32"), ("float16", "float16"),
               ("int8", "int32")},
    "ada": {("bfloat16", "float32"), ("float16", "float32"), ("float16", "float16"),
            ("int8", "int32"), ("float8_e4m3", "float32"), ("float8_e5m2", "float32")},
}


def is_tensorcore_supported_precision(in_dtype, accum_dtype, arch) -> bool:
    """Whether `arch`'s tensor cores take `in_dtype` operands into `accum_dtype`."""
    from ...ir.dtype import DType

    pair = (DType(in_dtype).name, DType(accum_dtype).name)
    if is_volta_arch(arch):
        return pair in _TC["volta"]
    if is_ampere_arch(arch):
        return pair in _TC["ampere"]
    if is_ada_arch(arch) or is_hopper_arch(arch):
        return pair in _TC["ada"]
    raise ValueError(f"unsupported architecture: {arch}")


def get_arch(target="cuda") -> TileDevice:
    """The device description of a target: CUDA for "cuda ..." (others are not available)."""
    text = str(getattr(target, "kind", target)).lower()
    if text.startswith(("cuda", "nvidia", "sm_")):
        return CUDA(target)
    raise NotImplementedError(f"carver.arch.get_arch({target!r}): only CUDA targets are "
                              "available in this TileLang")


def auto_infer_current_arch() -> TileDevice:
    """The visible GPU's description (an error without one)."""
    return CUDA("cuda")
