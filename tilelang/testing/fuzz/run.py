"""Running a fuzz case on a backend and classifying the outcome.

`run_case(case, target, inputs)` compiles `main` for `target` ("cpu", "cuda", "cuda -arch=...")
with every parameter passed explicitly (no out_idx), runs it on tensors made from `inputs`
(outputs pre-filled with poison) and returns {name: numpy array} of the "out"/"inout"
parameters. `classify(exc)` sorts a compile failure into "rejected" (a located `KernelError`: the
compiler refused the program and said where) or "crash" (anything else: an internal error such
as KeyError/AttributeError, an unlocated error, or generated CUDA that NVRTC refuses).

Pass-config variation: `pass_configs_for(seed)` draws, from a random stream of its own (the
program and its inputs do not change), the switches a runner compiles the seed with when asked
to vary them: `{}` (defaults) for about half the seeds, otherwise 1-3 of `VARIED_CONFIGS`,
switches that change the generated code and must never change results. `describe_configs`
and `parse_configs` turn a set into one line and back. To reproduce a finding:

    python scripts/fuzz_family.py auto SEED 1 --vary-configs          # the seed's drawn set
    python scripts/fuzz_family.py auto SEED 1 --configs 'tl.disable_wgmma,tl.config_index_bitwidth=64'
    python -c "from tilelang.testing import fuzz; print(fuzz.reproduce(SEED))"

(`auto` draws the family from the seed as scripts/device_reliability.py does; name a family for
seeds from `fuzz_family.py <family>`; `--configs ''` compiles with the defaults.)
"""

from __future__ import annotations

import numpy as np

from .case import Case, agree, check, load, poison, to_numpy, to_torch

def arrays_for(case: Case, inputs: dict) -> dict:
    """All parameters: inputs as given, outputs poisoned."""
    out = dict(inputs)
    for p in case.params:
        if p.role == "out":
            out[p.name] = poison(p.shape, p.dtype)
    return out


def compile_case(case: Case, target: str, pass_configs: dict | None = None):
    """`main` compiled for `target` with `pass_configs` (None or {}: the defaults). The source
    is loaded afresh, so every compile starts from a function no earlier lowering touched."""
    import tilelang

    return tilelang.compile(load(case), target=target, pass_configs=pass_configs)


def run_kernel(case: Case, kernel, inputs: dict, device="cpu") -> dict:
    arrs = arrays_for(case, inputs)
    tensors = [to_torch(arrs[p.name], p.dtype, device) for p in case.params]
    kernel(*tensors)
    if device != "cpu":
        import torch

        torch.cuda.synchronize()
    return {p.name: to_numpy(t) for p, t in zip(case.params, tensors) if p.role != "in"}


def run_case(case: Case, target: str, inputs: dict, pass_configs: dict | None = None) -> dict:
    kernel = compile_case(case, target, pass_configs)
    device = "cpu" if target == "cpu" else "cuda"
    return run_kernel(case, kernel, inputs, device)


def classify(exc: BaseException) -> str:
    from ...errors import KernelError

    from ...runtime.compiler import CudaCompileError

    if isinstance(exc, KernelError) and not isinstance(exc, CudaCompileError):
        return "rejected"
    return "crash"


def expected(case: Case, inputs: dict) -> dict:
    return case.oracle({k: np.asarray(v) for k, v in inputs.items()})


# ---- pass-config variation -------------------------------------------------------------------

# Switches that turn an optimisation off, with the value that does so. Each is read by the
# compiler (the pass in the comment) and changes the generated code, never the results.
# Left out on purpose: fast math (changes rounding; the oracle's bounds assume precise math),
# tl.disable_thread_storage_sync (drops barriers: data races) and
# tl.disable_safe_memory_legalize (drops bounds guards: ragged tiles would read out of bounds),
# and keys no pass reads. There is no rasterization switch (T.use_swizzle is part of the
# program, and the automatic panelling needs grids far larger than the fuzzer's).
# Changing this table changes the draw of every seed; findings record their configs
# explicitly (`describe_configs`), so they stay reproducible with `--configs`.
VARIED_CONFIGS = {
    "tl.disable_wgmma_overlap": True,        # pipeline, warp_specialize: no gemm/copy overlap
    "tl.disable_warpgroup_pingpong": True,   # pingpong: consumer warpgroups do not take turns
    "tl.disable_staged_epilogue": True,      # stage_epilogue: fragments stored directly
    "tl.disable_tma_store": True,            # stage_epilogue: staged stores without TMA
    "tl.disable_tma_lower": True,            # warp_specialize, tma_reduce, stage_epilogue
    "tl.disable_warp_specialized": True,     # warp_specialize: no producer warpgroup
    "tl.disable_wgmma": True,                # gemm backends: mma.sync on sm_90a
    "tl.disable_shared_memory_reuse": True,  # plan_shared, stage_epilogue: no lifetime overlap
    "tir.disable_vectorize": True,           # partition_parallel: no vector lanes
    "tl.config_index_bitwidth": 64,          # widen_indices, lower_copy: int64 offsets
}
VARY_PROBABILITY = 0.5  # share of seeds compiled with a non-default set
MAX_SWITCHES = 3
# a stream of its own: the program streams of `generate` never see it, so every seed keeps
# its program and inputs whether or not configs are varied
_CONFIG_STREAM = 0xC0F


def pass_configs_for(seed: int) -> dict:
    """The pass configs `seed` is compiled with when a runner varies them: {} (defaults) with
    probability 1 - VARY_PROBABILITY, otherwise 1..MAX_SWITCHES distinct keys of
    VARIED_CONFIGS (in table order) with their values. Depends on `seed` alone (not on the
    family, the program or numpy's global state): the same on every machine."""
    rng = np.random.default_rng([seed, _CONFIG_STREAM])
    if rng.random() >= VARY_PROBABILITY:
        return {}
    names = list(VARIED_CONFIGS)
    count = int(rng.integers(1, MAX_SWITCHES + 1))
    picked = sorted(int(i) for i in rng.choice(len(names), size=count, replace=False))
    return {names[i]: VARIED_CONFIGS[names[i]] for i in picked}


def describe_configs(configs: dict | None) -> str:
    """One line for reports: "defaults", or "key,key=value,..." (True values print as the key
    alone). `parse_configs` reads it back."""
    if not configs:
        return "defaults"
    return ",".join(k if v is True else f"{k}={v}" for k, v in configs.items())


def parse_configs(text: str) -> dict:
    """The configs of a `describe_configs` line ("", "defaults" -> {}); values that are
    integers become ints, a bare key means True."""
    configs = {}
    for item in text.split(","):
        item = item.strip()
        if not item or item == "defaults":
            continue
        key, sep, value = item.partition("=")
        configs[key] = (int(value) if value.lstrip("-").isdigit() else value) if sep else True
    return configs


def reproduce(seed: int, family: str | None = None, target: str = "cuda",
              pass_configs: dict | None = None) -> list:
    """Reruns one fuzz case: the program of `seed` (family drawn from the seed unless given),
    compiled for `target` with `pass_configs` (None: the seed's drawn set,
    `pass_configs_for(seed)`; {}: the defaults), run on the inputs the runners use. Returns
    the mismatches against the oracle, and for a GPU target also against the interpreter
    (empty: the case passes). Compile and run errors propagate unchanged."""
    from . import generate

    case = generate(seed, family)
    configs = pass_configs_for(seed) if pass_configs is None else pass_configs
    inputs = case.make_inputs(np.random.default_rng(seed))
    want = expected(case, inputs)
    device = "cpu" if target == "cpu" else "cuda"
    got = run_kernel(case, compile_case(case, target, configs), inputs, device)
    label = f"{target} [{describe_configs(configs)}] vs "
    problems = check(case, got, want, label + "oracle: ")
    if device == "cuda":
        cpu = run_case(case, "cpu", inputs)
        problems += agree(got, cpu, want, label + "interpreter: ")
    return problems
