"""The autotuner's argument bundles and its result, with the reference's names.

`CompileArgs` says how each configuration is compiled (the `tilelang.compile` options);
`ProfileArgs` how it is checked and timed; `AutotuneResult` is what `AutoTuner.run()` returns:
the best `kernel`, its `config` and `latency` (ms), the reference program's latency, the kernel
source (`libcode`), the traced `func`, and one record per configuration tried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..profiler.supply import TensorSupplyType


@dataclass(frozen=True)
class CompileArgs:
    """Options for compiling each configuration (see `tilelang.compile`)."""

    out_idx: Any = None
    target: Any = "auto"
    target_host: Any = None
    execution_backend: str = "auto"
    verbose: bool = False
    pass_configs: Optional[dict] = None
    compile_flags: Any = None

    def compile_program(self, program):
        """Compile a prim_func with these options."""
        from ..jit.api import compile as tl_compile

        return tl_compile(program, out_idx=self.out_idx, target=self.target,
                          target_host=self.target_host,
                          execution_backend=self.execution_backend, verbose=self.verbose,
                          pass_configs=self.pass_configs, compile_flags=self.compile_flags)

    def key_data(self) -> dict:
        """The options that change the generated code (part of the tuning-cache key)."""
        configs = {str(getattr(k, "value", k)): repr(v)
                   for k, v in (self.pass_configs or {}).items()}
        out_idx = list(self.out_idx) if isinstance(self.out_idx, (list, tuple)) else self.out_idx
        return {"out_idx": out_idx, "target": str(self.target),
                "pass_configs": dict(sorted(configs.items())),
                "compile_flags": repr(self.compile_flags)}


@dataclass(frozen=True)
class ProfileArgs:
    """How each compiled configuration is checked and timed."""

    warmup: float = 25
    rep: float = 100
    timeout: float = 30
    supply_type: TensorSupplyType = TensorSupplyType.Auto
    ref_prog: Optional[Callable] = None
    supply_prog: Optional[Callable] = None
    rtol: float = 1e-2
    atol: float = 1e-2
    max_mismatched_ratio: float = 0.01
    skip_check: bool = False
    manual_check_prog: Optional[Callable] = None
    cache_input_tensors: bool = False
    backend: str = "event"

    def key_data(self) -> dict:
        """The options that decide which configurations qualify (part of the tuning-cache
        key): a winner found without the check, or on other inputs, is not reused."""
        return {"skip_check": bool(self.skip_check),
                "cache_input_tensors": bool(self.cache_input_tensors),
                "supply_type": getattr(self.supply_type, "name", str(self.supply_type)),
                "rtol": self.rtol, "atol": self.atol,
                "max_mismatched_ratio": self.max_mismatched_ratio, "backend": self.backend}

    def has_callbacks(self) -> bool:
        """True when a user function takes part (ref_prog, supply_prog, manual_check_prog)."""
        return any(cb is not None
                   for cb in (self.ref_prog, self.supply_prog, self.manual_check_prog))


@dataclass
class Record:
    """The outcome of one configuration: status "ok" (with latency) or the reason it was
    skipped ("compile error", "wrong result", "run error", "timeout")."""

    index: int
    config: dict
    status: str = "pending"
    latency: Optional[float] = None
    reason: str = ""
    kernel: Any = field(default=None, repr=False)


@dataclass
class AutotuneResult:
    """Result of an autotuning run (the reference's fields, plus `records`)."""

    latency: Optional[float] = None
    config: Optional[dict] = None
    ref_latency: Optional[float] = None
    libcode: Optional[str] = None
    func: Any = None
    kernel: Any = None
    records: list = field(default_factory=list)
    from_cache: bool = False

