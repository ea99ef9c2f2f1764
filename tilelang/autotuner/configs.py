"""Default search spaces: `default_gemm_configs()` and `default_attention_configs()`.

Each returns a list of dicts keyed `block_M`, `block_N`, `block_K` (GEMM only), `num_stages`,
`threads` (rename with `names={"threads": "thread_num"}` to match your factory's parameters).
Candidates are pruned by three rules so every entry is worth compiling:
  * tiles no larger than the (power-of-two rounded) problem when the sizes are given;
  * the pipelined shared-memory tiles fit the GPU's per-block limit (227 KB on sm_90, 163 KB on
    sm_80, 99 KB on sm_86/89, 64 KB on sm_75; 99 KB when unknown);
  * the fp32 accumulator tile needs at most 128 values per thread (no register spills).
"""

from __future__ import annotations

import itertools
from typing import Optional

from ..math import next_power_of_2

_SMEM_KB = {90: 227, 100: 227, 80: 163, 87: 163, 86: 99, 89: 99, 75: 64, 70: 96}


def shared_memory_limit(arch: Optional[str] = None) -> int:
    """Per-block shared memory (bytes) for `arch` ("sm_90a", "sm_80", ...) or the current GPU."""
    sm = None
    if arch:
        digits = "".join(ch for ch in str(arch) if ch.isdigit())
        sm = int(digits) if digits else None
    else:
        try:
            import torch

            if torch.cuda.is_available():
                major, minor = torch.cuda.get_device_capability()
                sm = major * 10 + minor
        except Exception:
            sm = None
    return _SMEM_KB.get(sm, 99) * 1024


def _bytes(dtype) -> int:
    from ..ir.dtype import DType

    return DType(dtype).bytes


def _limit(choices, size):
    if size is None:
        return list(choices)
    cap = max(min(choices), next_power_of_2(int(size)))
    return [c for c in choices if c <= cap]


def _rename(configs, names):
    if not names:
        return configs
    return [{names.get(k, k): v for k, v in c.items()} for c in configs]


def default_gemm_configs(M: Optional[int] = None, N: Optional[int] = None,
                         K: Optional[int] = None, dtype="float16", arch: Optional[str] = None,
                         names: Optional[dict] = None) -> list:
    """Block sizes, pipeline stages and thread counts for a GEMM-like kernel (see the module
    docstring). Sorted from large tiles to small."""
    elem = _bytes(dtype)
    smem = shared_memory_limit(arch)
    out = []
    for bm, bn, bk, stages, threads in itertools.product(
            _limit((256, 128, 64), M), _limit((256, 128, 64), N), _limit((64, 32), K),
            (4, 3, 2), (256, 128)):
        if (bm * bk + bk * bn) * elem * stages > smem:
            continue
        if bm * bn // threads > 128:  # fp32 accumulators per thread
            continue
        if threads == 256 and bm * bn < 128 * 128:  # too little work for 8 warps
            continue
        out.append({"block_M": bm, "block_N": bn, "block_K": bk, "num_stages": stages,
                    "threads": threads})
    return _rename(out, names)


def default_attention_configs(seq_len: Optional[int] = None, dim: int = 128, dtype="float16",
                              arch: Optional[str] = None, names: Optional[dict] = None) -> list:
    """Query/key block sizes, stages and threads for a FlashAttention-style forward kernel with
    head dimension `dim`."""
    elem = _bytes(dtype)
    smem = shared_memory_limit(arch)
    out = []
    for bm, bn, stages, threads in itertools.product(
            _limit((128, 64), seq_len), _limit((128, 64, 32), seq_len), (2, 1), (256, 128)):
        # Q tile once, K and V tiles per stage, plus the P tile (block_M x block_N)
        need = (bm * dim + 2 * bn * dim * stages + bm * bn) * elem
        if need > smem:
            continue
        if threads == 256 and bm < 128:
            continue
        if bm * dim // threads > 128:  # output accumulator per thread
            continue
        out.append({"block_M": bm, "block_N": bn, "num_stages": stages, "threads": threads})
    return _rename(out, names)
