"""Per-thread random streams: `T.rng_init(seed, seq, off)`, then `T.rng_rand()` (uint32) and
`T.rng_rand_float(bit=32|64, dist="uniform"|"normal")`.

Each thread holds one generator state, declared for the whole kernel (so a `T.rng_init` under
a condition and draws after it share it). The generator is Philox4x32-10 keyed by the seed;
`seq` picks the thread's subsequence (by default its global thread index, block-major) and
`off` the first 32-bit word drawn. The reference's three curand generator names are accepted;
all draw from Philox (the reference's MRG32k3a and XORWOW streams are other sequences). The
streams exist on the GPU only (tl/random.cuh): the CPU interpreter rejects a kernel that
draws random numbers.
"""

from __future__ import annotations

from ..frontend.builder import current_builder, current_loc, emit, error
from ..ir import nodes as ir
from ..ir.dtype import DType

GENERATORS = ("curandStateMRG32k3a_t", "curandStatePhilox4_32_10_t", "curandStateXORWOW_t")
_STATE_WORDS = 6  # seed, subsequence, offset: two 32-bit words each (tl/random.cuh)
_U64 = DType("uint64")


def _kernel_frame(what):
    b = current_builder(what=what)
    if not b.in_kernel():
        raise error(RuntimeError, f"{what} must be called inside `with T.Kernel(...)`")
    return b.kernel


def _state_pointer(what, create=False):
    """`&state[0]` of the kernel's generator state (declared at the top of the kernel the
    first time `T.rng_init` asks)."""
    frame = _kernel_frame(what)
    state = frame.data.get("rng_state")
    if state is None:
        if not create:
            raise error(RuntimeError, f"{what} draws from the thread's generator: call "
                                      "T.rng_init(seed, ...) earlier in the kernel")
        state = ir.Buffer("rng_state", (_STATE_WORDS,), DType("uint32"), "local",
                          loc=current_loc())
        frame.items.insert(0, ("alloc", state, None, current_loc()))
        frame.data["rng_state"] = state
    return ir.address_of(state, (0,))


def _u64(value, what, name):
    e = ir.as_expr(value)
    if not e.dtype.is_int:
        raise error(TypeError, f"{what}: {name} must be an integer, got {e.dtype}")
    return ir.cast_to(e, _U64)


def rng_init(seed, seq=None, off=0, generator="curandStatePhilox4_32_10_t"):
    """Start this thread's random stream: `seed` keys the generator, `seq` selects the
    subsequence (default `tx + bx * blockDim.x`), `off` skips that
    many 32-bit draws. `generator` is one of the reference's curand names (all Philox here)."""
    what = "T.rng_init"
    if generator not in GENERATORS:
        raise error(ValueError, f"{what}: generator must be one of {list(GENERATORS)}, got "
                                f"{generator!r}")
    frame = _kernel_frame(what)
    if seq is None:
        kernel = frame.data["kernel"]  # as the reference: tx + bx * blockDim.x
        seq = ir.binary("add", kernel.thread_vars[0],
                        ir.binary("mul", kernel.block_vars[0], kernel.threads[0]))
    args = (_state_pointer(what, create=True), _u64(seed, what, "seed"),
            _u64(seq, what, "seq"), _u64(off, what, "off"))
    emit(ir.Evaluate, ir.Call("call_extern", ("tl::rng_init",) + args, DType("void")))


def rng_rand():
    """The next 32 random bits of this thread's stream (a uint32)."""
    ptr = _state_pointer("T.rng_rand")
    return ir.Call("call_extern", ("tl::rng_rand", ptr), DType("uint32"))


def rng_rand_float(bit=32, dist="uniform"):
    """The next random float32 (`bit=32`) or float64 (`bit=64`) of this thread's stream:
    uniform on (0, 1], or standard normal (`dist="normal"`)."""
    what = "T.rng_rand_float"
    if bit not in (32, 64):
        raise error(ValueError, f"{what}: bit must be 32 or 64, got {bit!r}")
    if dist not in ("uniform", "normal"):
        raise error(ValueError, f"{what}: dist must be 'uniform' or 'normal', got {dist!r}")
    ptr = _state_pointer(what)
    return ir.Call("call_extern", (f"tl::rng_{dist}_f{bit}", ptr), DType(f"float{bit}"))
