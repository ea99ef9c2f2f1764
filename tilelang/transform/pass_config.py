"""Pass configuration keys (`pass_configs={...}`), with the reference system's names.

Keys this compiler acts on are marked in `EFFECTIVE`; the others are accepted and have no
effect (docs/compatibility.md lists them).
"""

from __future__ import annotations

import enum
import warnings


class PassConfigKey(str, enum.Enum):
    TL_SIMPLIFY = "tl.Simplify"
    TL_DYNAMIC_ALIGNMENT = "tl.dynamic_alignment"
    TL_DISABLE_DYNAMIC_TAIL_SPLIT = "tl.disable_dynamic_tail_split"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_dir"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_ENABLE_PDL = "tl.enable_pdl"
    TL_DISABLE_PIPELINE_STAGE_FUSION = "tl.disable_pipeline_stage_fusion"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tir.disable_cse_tir"
    TIR_SIMPLIFY = "tir.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tir.disable_storage_rewrite"
    TIR_DISABLE_VECTORIZE = "tir.disable_vectorize"
    TIR_USE_ASYNC_COPY = "tir.use_async_copy"
    TIR_ENABLE_DEBUG = "tir.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tir.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tir.add_lower_pass"
    TIR_NOALIAS = "tir.noalias"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"
    # Names present in reference releases up to 0.1.15 and shortly after (accepted, no effect
    # unless listed in EFFECTIVE).
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = (
        "propagate_knowns_to_simplify_expressions")
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    # this implementation's own keys (not in the reference)
    TL_DISABLE_STAGED_EPILOGUE = "tl.disable_staged_epilogue"
    TL_DISABLE_TMA_STORE = "tl.disable_tma_store"
    TL_DISABLE_WG_PINGPONG = "tl.disable_warpgroup_pingpong"
    TL_DISABLE_WGMMA_OVERLAP = "tl.disable_wgmma_overlap"
    TL_DISABLE_DEFERRED_STORE_WAIT = "tl.disable_deferred_store_wait"
    TL_DISABLE_CLEAR_FOLD = "tl.disable_clear_fold"
    TL_DISABLE_MASK_UNSWITCHING = "tl.disable_mask_unswitching"
    # a warp-specialised stage gets one full barrier per tile, waited for before the tile's
    # first reader: True / False force it (default: loops known to run at most 4 times)
    TL_WS_TILE_BARRIERS = "tl.ws_tile_barriers"
    # reducers keep the always-available form: shared memory, one atomic per contribution
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"

    def __str__(self):
        return self.value


EFFECTIVE = {
    PassConfigKey.TL_ENABLE_FAST_MATH, PassConfigKey.TL_DISABLE_FAST_MATH,
    PassConfigKey.TL_DISABLE_WARP_SPECIALIZED, PassConfigKey.TL_DISABLE_TMA_LOWER,
    PassConfigKey.TL_DISABLE_WGMMA, PassConfigKey.TL_ENABLE_PTXAS_VERBOSE_OUTPUT,
    PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS, PassConfigKey.TIR_DISABLE_VECTORIZE,
    PassConfigKey.TL_ENABLE_DUMP_IR, PassConfigKey.TL_DUMP_IR_DIR,
    PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC, PassConfigKey.TIR_USE_ASYNC_COPY,
    PassConfigKey.TL_CONFIG_INDEX_BITWIDTH, PassConfigKey.TL_DISABLE_SHARED_MEMORY_REUSE,
    PassConfigKey.TL_DISABLE_STAGED_EPILOGUE, PassConfigKey.TL_DISABLE_TMA_STORE,
    PassConfigKey.TL_DISABLE_WG_PINGPONG, PassConfigKey.TL_DISABLE_WGMMA_OVERLAP,
    PassConfigKey.TL_DISABLE_DEFERRED_STORE_WAIT, PassConfigKey.TL_DISABLE_CLEAR_FOLD,
    PassConfigKey.TL_DISABLE_MASK_UNSWITCHING,
    PassConfigKey.TL_REDUCER_FORCE_BASELINE, PassConfigKey.TL_ENABLE_ASYNC_COPY,
    PassConfigKey.TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE, PassConfigKey.TL_WS_TILE_BARRIERS,
}

_KNOWN = {k.value: k for k in PassConfigKey}
# Other spellings of the same keys in reference releases -> the spelling used here.
_ALIASES = {
    "tl.dump_ir_path": PassConfigKey.TL_DUMP_IR_DIR.value,
    "tirx.disable_cse_tir": PassConfigKey.TIR_DISABLE_CSE.value,
    "tirx.Simplify": PassConfigKey.TIR_SIMPLIFY.value,
    "tirx.disable_storage_rewrite": PassConfigKey.TIR_DISABLE_STORAGE_REWRITE.value,
    "tirx.disable_vectorize": PassConfigKey.TIR_DISABLE_VECTORIZE.value,
    "tirx.use_async_copy": PassConfigKey.TIR_USE_ASYNC_COPY.value,
    "tirx.enable_debug": PassConfigKey.TIR_ENABLE_DEBUG.value,
    "tirx.merge_static_smem": PassConfigKey.TIR_MERGE_STATIC_SMEM.value,
    "tirx.add_lower_pass": PassConfigKey.TIR_ADD_LOWER_PASS.value,
    "tirx.noalias": PassConfigKey.TIR_NOALIAS.value,
}


class PassContext:
    """`with tvm.transform.PassContext(config={...}):` (the reference's pass context): the
    pass configs given here apply to every `tilelang.compile` / `tilelang.lower` / JIT build
    inside the block, under those the call passes itself. `opt_level`, `required_pass`,
    `disabled_pass` and `instruments` are accepted and have no effect (there are no TVM passes
    to select)."""

    _stack: list = []

    def __init__(self, opt_level=2, required_pass=None, disabled_pass=None, instruments=None,
                 config=None, **_ignored):
        self.opt_level = opt_level
        self.required_pass = list(required_pass or [])
        self.disabled_pass = list(disabled_pass or [])
        self.instruments = list(instruments or [])
        self.config = dict(config or {})

    def __enter__(self):
        PassContext._stack.append(self)
        return self

    def __exit__(self, *exc):
        PassContext._stack.remove(self)
        return False

    @staticmethod
    def current() -> "PassContext":
        return PassContext._stack[-1] if PassContext._stack else PassContext()


def normalize_pass_configs(configs) -> dict:
    """Map user keys (enum members or strings) to canonical strings; warn on unknown keys.
    The configs of the enclosing `PassContext`s come first; `configs` overrides them."""
    out = {}
    merged = {}
    for ctx in PassContext._stack:
        merged.update(ctx.config)
    merged.update(configs or {})
    for key, value in merged.items():
        name = key.value if isinstance(key, PassConfigKey) else str(key)
        name = _ALIASES.get(name, name)
        if name not in _KNOWN:
            warnings.warn(f"unknown pass config key {name!r} is ignored", stacklevel=3)
        out[name] = value
    return dict(sorted(out.items()))


def config_flag(configs: dict, key: PassConfigKey, default=False):
    value = configs.get(key.value, default)
    if isinstance(value, str):
        return value.lower() not in ("0", "false", "no", "off", "")
    return value
