"""`JITKernel`: a compiled kernel program, callable with tensors.

A kernel holds the traced `PrimFunc`, its calling convention (`CallPlan`) and one backend
adapter per device kind it has been built for: the CPU interpreter and/or CUDA. An adapter
implements `run(args, symbols, device, stream)` and exposes `source`. `get_kernel_source()`
is CUDA C++ in every case (a kernel on the interpreter lowers its program for a GPU
architecture on request).
"""

from __future__ import annotations

import re
from typing import Optional

from ..ir import nodes as ir
from ..transform.pass_config import normalize_pass_configs
from .args import CallPlan
from .target import (DEFAULT_CUDA_ARCH, Target, device_arch, gpu_available, parse_target,
                     resolve_auto)


def check_launch_limits(func: ir.PrimFunc):
    """A located error for a T.Kernel whose static grid is past CUDA's limits (both targets
    refuse it, so that they accept the same programs; an extent of 0 is refused per call), or the first error the trace deferred
    to compilation (frontend.builder.defer_error)."""
    from ..errors import located
    from ..ir.visitor import collect

    deferred = func.attrs.get("deferred_errors")
    if deferred:  # found while tracing (frontend.builder.defer_error)
        raise deferred[0]
    for k in collect(func.body, lambda n: isinstance(n, ir.Kernel)):
        # a static extent of 0 compiles, and every call is refused at launch (the reference
        # compiles it too: its issue 1993), like a size-dependent extent that comes out as 0
        grid = tuple(ir.int_value(g) for g in k.grid)
        problem = ir.launch_limit_problem(tuple(None if g == 0 else g for g in grid))
        if problem:
            raise located(ValueError)(f"T.Kernel {problem}; launch fewer blocks (loop inside "
                                      "each block, or use T.Persistent)", k.loc)


def build_adapter(func: ir.PrimFunc, target: Target, options: dict):
    if target.kind == "cpu":
        check_launch_limits(func)  # the CUDA build checks in lower_cuda
        from ..interp.adapter import CPUAdapter
        from .diagnostics import jit_phase

        with jit_phase("adapter", verbose=options.get("verbose", False), kernel=func.name,
                       target="cpu"):
            return CPUAdapter(func, options)
    if target.kind == "cuda":
        from ..engine.build import build_cuda

        return build_cuda(func, target, options)
    raise ValueError(f"cannot build for target {target}")


class JITKernel:
    """A compiled kernel: `kernel(*inputs)` checks the arguments, allocates the `out_idx`
    outputs, runs, and returns the outputs (one tensor, or a list)."""

    _fast = None  # the generated fast call path (CUDA), built after the first call
    _fast_tried = False

    def __init__(self, func: ir.PrimFunc, out_idx=None, target="auto", target_host=None,
                 execution_backend="auto", verbose=False, pass_configs=None,
                 debug_root_path=None, compile_flags=None, **_ignored):
        if not isinstance(func, ir.PrimFunc):
            raise TypeError(f"tilelang.compile expects a @T.prim_func, got "
                            f"{type(func).__name__}")
        self.prim_func = func
        if out_idx is not None and func.outputs:
            raise ValueError("Out index conflict: out_idx is specified and prim_func have "
                             "returned `T.empty` tensors")
        # the function's own T.annotate_pass_configs / T.annotate_compile_flags, under the
        # caller's (as the reference merges them)
        own_configs = func.attrs.get("tilelang_pass_configs")
        if own_configs:
            pass_configs = {**own_configs, **(pass_configs or {})}
        own_flags = func.attrs.get("tilelang_compile_flags")
        if own_flags:
            pass_flags = [] if compile_flags is None else (
                [compile_flags] if isinstance(compile_flags, str) else list(compile_flags))
            compile_flags = list(own_flags) + pass_flags
        self.plan = CallPlan(func, out_idx)
        self.out_idx = list(self.plan.out_idx) if out_idx is not None or func.outputs else None
        self.target = parse_target(target)
        self.execution_backend = execution_backend
        self.verbose = bool(verbose)
        self.options = {
            "pass_configs": normalize_pass_configs(pass_configs),
            "compile_flags": _flags(compile_flags),
            "verbose": self.verbose,
            "debug_root_path": debug_root_path,
        }
        self._adapters: dict = {}
        # set by the autotuner on the kernel it picks (reference attributes)
        self.latency = None
        self.config = None
        self.ref_latency = None
        from ..transform.uninitialized_reads import warn_uninitialized_reads

        warn_uninitialized_reads(func)  # for the interpreter and the GPU alike
        concrete = resolve_auto(self.target)
        self._adapter(concrete)  # compile now: errors surface at compile time

    # ---- backends --------------------------------------------------------------------------
    def _adapter(self, target: Target):
        a = self._adapters.get(target.kind)
        if a is None:
            a = self._adapters[target.kind] = build_adapter(self.prim_func, target, self.options)
        return a

    def _kind_for_call(self, args) -> str:
        if self.target.kind != "auto":
            return self.target.kind
        for a in args:
            dev = getattr(a, "device", None)
            if dev is not None and getattr(dev, "type", None) in ("cpu", "cuda"):
                return dev.type
        return resolve_auto(self.target).kind

    @property
    def adapter(self):
        return self._adapter(resolve_auto(self.target))

    # ---- calling ----------------------------------------------------------------------------
    def __call__(self, *args, stream: Optional[int] = None):
        fast = self._fast
        if fast is not None and stream is None:
            return fast(args)
        return self._call_general(args, stream)

    def _call_general(self, args, stream=None):
        """Check every argument (descriptive errors), allocate outputs, run; on CUDA, also
        prepare the fast path for the device used."""
        kind = self._kind_for_call(args)
        adapter = self._adapters.get(kind)
        if adapter is None:
            adapter = self._adapter(resolve_auto(Target(kind)) if kind == "cuda"
                                    else Target("cpu"))
        full, symbols, outputs, device = self.plan.prepare(args, kind)
        adapter.run(full, symbols, device, stream)
        if kind == "cuda" and self._fast is None and not self._fast_tried:
            self._fast_tried = True
            maker = getattr(adapter, "make_fast_call", None)
            if maker is not None:
                self._fast = maker(self.plan, self._call_general)
        if self._fast is not None and device is not None and device.type == "cuda":
            seen = self.__dict__.setdefault("_fast_devices", set())
            if device.index not in seen:
                self._fast.register(device.index)
                seen.add(device.index)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    def run_once(self, func=None):
        """Run `func` (default: this kernel) once on inputs generated by the profiler (the
        reference's meaning); returns the result."""
        return self.get_profiler().run_once(func)

    # ---- introspection (reference API) -----------------------------------------------------
    @property
    def params(self):
        return list(self.prim_func.params)

    @property
    def func(self):
        return self.prim_func

    def get_kernel_source(self, kernel_only: bool = True, arch: Optional[str] = None) -> str:
        """The generated CUDA C++ of this kernel.

        A kernel built for a GPU gives the source it was compiled from. A kernel that runs on
        the CPU interpreter (no GPU here, or `target="cpu"`) gives the CUDA that the same
        program lowers to for the current GPU's architecture, or for `DEFAULT_CUDA_ARCH`
        (sm_90a) where there is no GPU; it is generated on the first request, not compiled.
        `arch="sm_80"` (any `sm_XY`) asks for another architecture. The program the
        interpreter runs prints with `print(kernel.get_tir())`."""
        cuda = self._adapters.get("cuda")
        if arch is not None and not re.fullmatch(r"sm_\d+a?", arch):
            raise ValueError(f"arch must name a GPU architecture such as 'sm_90a' or 'sm_80', "
                             f"got {arch!r}")
        if cuda is not None and arch in (None, cuda.target.arch):
            return cuda.source
        if arch is None:
            arch = device_arch() if gpu_available() else DEFAULT_CUDA_ARCH
        sources = self.__dict__.setdefault("_cuda_sources", {})
        if arch not in sources:
            from ..engine.build import lower_cuda

            sources[arch] = lower_cuda(self.prim_func, Target("cuda", arch), self.options).source
        return sources[arch]

    @property
    def kernel_source(self) -> str:
        return self.get_kernel_source()

    def get_host_source(self) -> str:
        return getattr(self.adapter, "host_source", "") or self.plan_description()

    @property
    def host_source(self) -> str:
        return self.get_host_source()

    def export_library(self, kernel_file: str):
        raise NotImplementedError(
            "JITKernel.export_library is not supported: kernels are compiled to cubins kept in "
            "the kernel cache, not to a shared library; use export_sources(kernel_path=...) to "
            "save the generated source")

    def plan_description(self) -> str:
        lines = [f"# host launcher for {self.prim_func.name}"]
        for p in self.plan.params:
            role = "output" if p.index in self.plan.out_idx else "input"
            lines.append(f"#   {role} {p.name}: {p.kind} {p.dtype} {list(p.shape)}")
        return "\n".join(lines) + "\n"

    def show_source(self, which: str = "kernel"):
        print(self.get_host_source() if which == "host" else self.get_kernel_source())

    def export_sources(self, kernel_path: Optional[str] = None, host_path: Optional[str] = None):
        if kernel_path:
            with open(kernel_path, "w") as f:
                f.write(self.get_kernel_source())
        if host_path:
            with open(host_path, "w") as f:
                f.write(self.get_host_source())

    def get_tir(self):
        return self.prim_func

    @property
    def n_regs(self):
        return getattr(self.adapter, "n_regs", None)

    @property
    def n_spills(self):
        return getattr(self.adapter, "n_spills", None)

    def update_tuner_result(self, latency=None, config=None, ref_latency=None):
        """Record the autotuner's verdict on this kernel; returns the kernel."""
        self.latency, self.config, self.ref_latency = latency, config, ref_latency
        return self

    def get_profiler(self, tensor_supply_type=None):
        from ..profiler import Profiler

        return Profiler(self, tensor_supply_type)

    def __repr__(self):
        return f"<JITKernel {self.prim_func.name} target={self.target}>"

    def __str__(self):
        return str(self.prim_func)


def _flags(flags):
    if flags is None:
        return ()
    if isinstance(flags, str):
        return tuple(flags.split())
    return tuple(flags)


_ = gpu_available
