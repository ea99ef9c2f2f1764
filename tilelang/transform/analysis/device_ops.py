"""What each device operation does, in one table: the barrier pass (insert_sync), the wgmma
wait placement (wgmma_wait), the TMA store wait deferral (defer_store_waits) and the CUDA
renderer (codegen/intrinsics.py) read it instead of keeping lists of names of their own.

A header call (`call_extern`) is described by the rows whose name prefix its name starts with
(`tl::cp_async` also describes `tl::cp_async<16>`; a name matching several rows has the effects
of all of them: `tl::mbarrier_wait` is an mbarrier operation and an acquire). Names no row
describes are opaque: each pass treats them conservatively.
"""

from __future__ import annotations

import re
from enum import Flag, auto
from functools import lru_cache
from typing import NamedTuple

from ...ir import nodes as ir


class Effect(Flag):
    NONE = 0
    # -- shared memory as the barrier pass counts it (insert_sync) --
    ORDERED = auto()        # synchronisation, or asynchronous-proxy traffic that mbarriers order:
                            # its shared operands are not counted as accesses
    READS_SHARED = auto()   # reads its shared operands, writes none
    WRITES_FIRST = auto()   # writes the shared tile its first pointer names, reads the rest
    ASYNC_PROXY_READ = auto()  # reads shared memory through the asynchronous proxy (wgmma): a
                               # proxy fence must separate it from generic-proxy writes
    # -- registers of a wgmma in flight (wgmma_wait) --
    QUIET = auto()          # touches no registers of a gemm in flight and publishes nothing
    PUBLISHES = auto()      # makes shared memory written before it visible to other threads
    # -- mbarriers (defer_store_waits) --
    ACQUIRES = auto()       # waits on an mbarrier phase
    ARRIVES = auto()        # arrives on an mbarrier (releases its waiters)


class DeviceOp(NamedTuple):
    prefix: str
    effects: Effect


E = Effect
DEVICE_OPS = (
    DeviceOp("__syncthreads", E.PUBLISHES),
    DeviceOp("tl::named_barrier", E.ORDERED | E.PUBLISHES),
    DeviceOp("tl::mbarrier", E.ORDERED),
    DeviceOp("tl::mbarrier_init", E.QUIET),
    DeviceOp("tl::mbarrier_wait", E.QUIET | E.ACQUIRES),
    DeviceOp("tl::mbarrier_try_wait", E.ACQUIRES),
    DeviceOp("tl::mbarrier_arrive", E.PUBLISHES | E.ARRIVES),
    DeviceOp("tl::fence", E.ORDERED),
    DeviceOp("tl::fence_proxy_async", E.QUIET),
    DeviceOp("tl::fence_mbarrier_init", E.QUIET),
    DeviceOp("tl::setmaxnreg", E.ORDERED | E.QUIET),
    DeviceOp("tl::wg_turn", E.ORDERED | E.QUIET),
    DeviceOp("tl::tma_load", E.ORDERED | E.PUBLISHES),
    DeviceOp("tl::tma_store", E.READS_SHARED),
    DeviceOp("tl::gemm_ss", E.READS_SHARED),
    DeviceOp("tl::gemm_rs", E.READS_SHARED),
    DeviceOp("tl::print", E.READS_SHARED),
    DeviceOp("tl::wgmma", E.READS_SHARED | E.ASYNC_PROXY_READ),
    DeviceOp("tl::wgmma_fence", E.QUIET),
    DeviceOp("tl::cp_async", E.WRITES_FIRST),
    DeviceOp("tl::cp_async_commit", E.QUIET),
    DeviceOp("tl::cp_async_wait", E.QUIET),
    DeviceOp("tl::copy_zfill", E.WRITES_FIRST),
    DeviceOp("tl::copy_vec", E.WRITES_FIRST),
    DeviceOp("tl::stmatrix", E.WRITES_FIRST),  # (shared row address, registers)
    # T.lds*/T.sts* (tl/wide_access.cuh): (words, shared src) and (shared dst, words...)
    DeviceOp("tl::load_shared", E.WRITES_FIRST),
    DeviceOp("tl::store_shared", E.WRITES_FIRST),
)
del E


@lru_cache(maxsize=None)
def prefixes(effect: Effect) -> tuple:
    """The name prefixes of the rows with any of `effect`'s flags (for `str.startswith`)."""
    return tuple(op.prefix for op in DEVICE_OPS if op.effects & effect)


def has_effect(name, effect: Effect) -> bool:
    """Whether the header call `name` has any of `effect`'s flags (False for a name that is
    not a string)."""
    return isinstance(name, str) and name.startswith(prefixes(effect))


# waits with a count in the name: the wgmma groups / TMA stores still allowed in flight
WGMMA_WAIT = re.compile(r"tl::wgmma_wait<(\d+)>$")
WGMMA_WAIT_PREFIX = "tl::wgmma_wait"
TMA_STORE_WAIT_ALL = "tl::tma_store_wait<0>"
# bulk stores reading a shared tile
TMA_STORES = ("tl::tma_store", "tl::tma_store_add", "tl::tma_store_1d")

# Header calls whose names say they synchronise or publish (barriers, arrivals, cluster syncs,
# warpgroup turns, TMA stores; "sync" as a word, not the end of "async"). A TMA store's wait
# may not move past them; calls outside the header (a user's extern) count as such too.
_RELEASING_NAME = re.compile(r"(^|[_:])sync|barrier|arrive|cluster|tma_store|wg_turn")


def may_release(name: str) -> bool:
    return not name.startswith("tl::") or bool(_RELEASING_NAME.search(name))


# ---- calls the IR has as operations of their own (ir.Call.op) ------------------------------

# update one element, may return it
ATOMIC_RMW = ("atomic_add", "atomic_max", "atomic_min", "atomic_or", "atomic_and",
              "atomic_xor")
ATOMIC_VECTOR_ADD = ("atomic_addx2", "atomic_addx4")     # add 2 or 4 consecutive elements
# operations that write the element their first argument loads (as well as reading it)
ATOMIC_UPDATES = ATOMIC_RMW + ATOMIC_VECTOR_ADD + ("atomic_store",)


# ---- header calls other passes emit ---------------------------------------------------------

_FLOAT_VECTORS = {4: "float", 8: "float2", 16: "float4"}


def copy_vec_name(nbytes: int, dtype) -> str:
    """The header call moving `nbytes` (4, 8 or 16) of `dtype` elements in one access each
    way: float32 lanes are named by their CUDA vector type (`tl::copy_vec<float4>`, the
    spelling a reader of the kernel looks for), other elements by the byte count."""
    if dtype.name == "float32" and dtype.lanes == 1:
        return f"tl::copy_vec<{_FLOAT_VECTORS[nbytes]}>"
    return f"tl::copy_vec<{nbytes}>"


def inserted_proxy_fence():
    """`tl::fence_proxy_async()` placed by a pass before one of its barriers (marked: the
    barrier pass may drop it where a later fence + barrier covers it; a fence the program
    wrote always stays)."""
    return ir.Evaluate(ir.Call("call_extern", ("tl::fence_proxy_async",), ir.DType("void"),
                               (("inserted", True),)))


def is_inserted_proxy_fence(s) -> bool:
    return (isinstance(s, ir.Evaluate) and ir.extern_name(s.value) == "tl::fence_proxy_async"
            and dict(s.value.attrs).get("inserted", False))

