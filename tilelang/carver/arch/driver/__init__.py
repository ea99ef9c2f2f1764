"""Device queries with the reference's names, answered from `torch.cuda.get_device_properties`
(no direct libcudart calls). Each raises RuntimeError("Failed to get device properties.")
without a GPU, as the reference does when the CUDA runtime call fails.

Sizes take `format="bytes" | "kb" | "mb"`.
"""

from __future__ import annotations

_FORMATS = {"bytes": 1, "kb": 1024, "mb": 1024 * 1024}


def get_cuda_device_properties(device_id: int = 0):
    """torch's properties object for the GPU (None without one)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        return torch.cuda.get_device_properties(device_id)
    except Exception:
        return None


def _props(device_id):
    p = get_cuda_device_properties(device_id)
    if p is None:
        raise RuntimeError("Failed to get device properties.")
    return p


def _sized(value: int, format: str) -> int:
    if format not in _FORMATS:
        raise ValueError("Invalid format. Must be one of: bytes, kb, mb")
    return int(value) // _FORMATS[format]


def get_device_name(device_id: int = 0) -> str:
    return _props(device_id).name


def get_num_sms(device_id: int = 0) -> int:
    """Number of streaming multiprocessors."""
    return int(_props(device_id).multi_processor_count)


def get_shared_memory_per_block(device_id: int = 0, format: str = "bytes") -> int:
    p = _props(device_id)
    return _sized(getattr(p, "shared_memory_per_block", 48 * 1024), format)


def get_max_dynamic_shared_size_bytes(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory per multiprocessor (what the reference reports under this name)."""
    p = _props(device_id)
    value = getattr(p, "shared_memory_per_multiprocessor", None)
    if value is None:
        value = getattr(p, "shared_memory_per_block_optin", 48 * 1024)
    return _sized(value, format)


def get_registers_per_block(device_id: int = 0) -> int:
    p = _props(device_id)
    return int(getattr(p, "regs_per_block", getattr(p, "regs_per_multiprocessor", 65536)))


def get_persisting_l2_cache_max_size(device_id: int = 0) -> int:
    """Bytes of L2 that can be set aside for persisting accesses (the driver attribute; 0 where
    it cannot be read)."""
    try:
        from ....runtime import driver

        # CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE
        return int(driver.device_attribute(108, device_id))
    except Exception:
        _props(device_id)
        return 0


def get_device_attribute(attr: int, device_id: int = 0):
    """A raw `CUdevice_attribute` value, or None (with a printed reason) where it cannot be read."""
    try:
        from ....runtime import driver

        return int(driver.device_attribute(attr, device_id))
    except Exception as exc:
        print(f"Error getting device attribute: {exc}")
        return None


def get_l2_cache_size(device_id: int = 0, format: str = "bytes") -> int:
    return _sized(getattr(_props(device_id), "L2_cache_size", 0), format)
