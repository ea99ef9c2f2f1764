"""`@tilelang.autotune(configs=...)` stacked on `@tilelang.jit`.

    @tilelang.autotune(configs=[{"block_M": 64, ...}, ...], warmup=10, rep=50)
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=2, threads=128): ...

    kernel = matmul(1024, 1024, 1024)     # tunes once per distinct call, returns the best kernel
    kernel.config, kernel.latency         # the winning configuration and its time (ms)

Factory style: calling returns the best `JITKernel`. Kernel style (the lazy JIT, whose call runs
the kernel): the call tunes, then runs the best kernel on the call's arguments. A call that itself
passes every tuned parameter compiles that configuration without tuning (as in the reference).
Results are cached in memory per call and on disk (see `cache.py`), so a second process compiles
only the winner. `do_not_specialize` names parameters left out of the cache key.
"""

from __future__ import annotations

import inspect
from typing import Callable, Optional

from ..profiler.supply import TensorSupplyType
from . import cache as tcache
from .tuner import PASS_CONFIGS_KEY, AutoTuner


class AutoTuneImpl:
    """An autotuned `@tilelang.jit` function (see the module docstring)."""

    def __init__(self, jit_impl, configs, warmup=25, rep=100, timeout=100,
                 supply_type=TensorSupplyType.Auto, ref_prog=None, supply_prog=None,
                 rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01, skip_check=False,
                 manual_check_prog=None, cache_input_tensors=False, do_not_specialize=None,
                 backend="event", early_stop=False, early_stop_factor=2.0):
        if early_stop and not early_stop_factor >= 1.0:
            raise ValueError(f"early_stop_factor must be >= 1.0, got {early_stop_factor}")
        self.early_stop = bool(early_stop)
        self.early_stop_factor = early_stop_factor
        self.jit_impl = jit_impl
        self.configs = configs
        self.profile = dict(warmup=warmup, rep=rep, timeout=timeout, supply_type=supply_type,
                            ref_prog=ref_prog, supply_prog=supply_prog, rtol=rtol, atol=atol,
                            max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
                            manual_check_prog=manual_check_prog,
                            cache_input_tensors=cache_input_tensors, backend=backend)
        self.do_not_specialize = tuple(do_not_specialize or ())
        self._tuner_cache: dict = {}
        # the user's Python function (LazyJIT keeps it as `_py`; its `.func` is a wrapper)
        self.func = getattr(jit_impl, "_py", None) or jit_impl.func
        self.__name__ = getattr(self.func, "__name__", "kernel")
        self.__doc__ = getattr(self.func, "__doc__", None)
        self.__wrapped__ = self.func

    @property
    def is_lazy(self) -> bool:
        """True for kernel-style functions (the call runs the kernel)."""
        return type(self.jit_impl).__name__ == "LazyJIT"

    def get_tuner(self, args=(), kwargs=None) -> AutoTuner:
        options = dict(getattr(self.jit_impl, "options", {}) or {})
        tuner = AutoTuner(self.func, configs=self.configs)
        tuner.set_profile_args(**self.profile)
        tuner.set_compile_args(out_idx=options.get("out_idx"), target=options.get("target"),
                               execution_backend=options.get("execution_backend"),
                               target_host=options.get("target_host"),
                               verbose=options.get("verbose"),
                               pass_configs=options.get("pass_configs"),
                               compile_flags=options.get("compile_flags"))
        return tuner

    get_tunner = get_tuner  # the reference's spelling

    def _key(self, args, kwargs):
        if not self.do_not_specialize:
            return tcache.normalize_value((tuple(args), dict(kwargs)))
        bound = inspect.signature(self.func).bind_partial(*args, **kwargs)
        kept = {k: v for k, v in bound.arguments.items() if k not in self.do_not_specialize}
        return tcache.normalize_value(kept)

    def _tune(self, args, kwargs):
        import json

        key = json.dumps(self._key(args, kwargs), sort_keys=True, default=repr)
        entry = self._tuner_cache.get(key)
        if entry is not None:
            return entry
        tuner = self.get_tuner()
        impl = self.jit_impl

        def jit_compile(pass_configs=None, **config):
            merged = dict(kwargs)
            merged.update(config)
            if pass_configs:
                return _compile_with_pass_configs(impl, args, merged, pass_configs)
            return impl.compile(*args, **merged)

        tuner.jit_compile = jit_compile
        key_args, key_kwargs = args, kwargs
        if self.do_not_specialize:
            bound = inspect.signature(self.func).bind_partial(*args, **kwargs)
            key_args = ()
            key_kwargs = {k: v for k, v in bound.arguments.items()
                          if k not in self.do_not_specialize}
        tuner.set_kernel_parameters((key_args, key_kwargs), self._parameters())
        if self.do_not_specialize:
            # configs callables and the "already given" check need the real call
            tuner.configs = _bind_configs(self.configs, args, kwargs)
        result = tuner.run(early_stop=self.early_stop, early_stop_factor=self.early_stop_factor)
        config = result.config
        if config is not None and PASS_CONFIGS_KEY in config:
            config = {k: v for k, v in config.items() if k != PASS_CONFIGS_KEY}
        entry = (result.kernel, config)
        self._tuner_cache[key] = entry
        return entry

    def _parameters(self):
        try:
            return inspect.signature(self.func).parameters
        except (TypeError, ValueError):
            return None

    def __call__(self, *args, **kwargs):
        return_kernel = kwargs.pop("__return_kernel", False)
        kernel, config = self._tune(args, kwargs)
        if not self.is_lazy or return_kernel:
            return kernel
        merged = dict(kwargs)
        merged.update(config or {})
        return self.jit_impl(*args, **merged)

    def compile(self, *args, **kwargs):
        """Tune (or reuse the tuning) and return the best kernel, whatever the style."""
        return self(*args, __return_kernel=True, **kwargs)

    def get_tir(self, *args, **kwargs):
        return self.jit_impl.get_tir(*args, **kwargs)

    def __repr__(self):
        return f"<tilelang.autotune {self.__name__}>"


def _compile_with_pass_configs(impl, args, kwargs, pass_configs):
    """Compile one configuration of a `@tilelang.jit` factory whose configuration carries its
    own "pass_configs" (merged over the decorator's)."""
    from ..jit.kernel import JITKernel

    if type(impl).__name__ == "LazyJIT":
        raise NotImplementedError(
            f"autotune: a configuration with its own 'pass_configs' needs a kernel factory "
            f"(a function returning a @T.prim_func); {impl.__name__} is a kernel-style function "
            "whose pass_configs are those of its @tilelang.jit(pass_configs=...)")
    options = dict(impl.options)
    options["pass_configs"] = {**(options.get("pass_configs") or {}), **pass_configs}
    return JITKernel(impl.get_tir(*args, **kwargs), **options)


def _bind_configs(configs, args, kwargs):
    if callable(configs) and not isinstance(configs, (list, tuple, dict)):
        return configs(*args, **kwargs)
    return configs


def autotune(func: Optional[Callable] = None, *, configs=None, warmup: float = 25,
             rep: float = 100, timeout: float = 100,
             supply_type: TensorSupplyType = TensorSupplyType.Auto, ref_prog=None,
             supply_prog=None, rtol: float = 1e-2, atol: float = 1e-2,
             max_mismatched_ratio: float = 0.01, skip_check: bool = False,
             manual_check_prog=None, cache_input_tensors: bool = False,
             do_not_specialize=None, backend: str = "event", early_stop: bool = False,
             early_stop_factor: float = 2.0, **legacy):
    """Decorate a `@tilelang.jit` function to tune `configs` (a list of dicts, a dict of lists,
    or a function of the call's arguments returning either). See the module docstring.
    `early_stop`: configurations whose first estimate exceeds `early_stop_factor` times the
    best latency so far are not timed in full. A configuration may carry "pass_configs" (compile
    options of that configuration, merged over the jit's). `legacy` accepts (and ignores) older
    keywords such as `keys=`."""
    from ..ir import nodes as ir

    if isinstance(func, ir.PrimFunc):
        raise ValueError("Use tilelang.jit to decorate prim_func is not supported yet.")
    if callable(func):
        raise ValueError("Use tilelang.autotune to decorate func without arguments is not "
                         "supported yet: write @tilelang.autotune(configs=...)")
    unknown = set(legacy) - {"keys", "profiler", "rep_runs"}
    if unknown:
        raise TypeError(f"autotune() got unexpected keyword arguments {sorted(unknown)}")

    def decorator(impl):
        from ..jit.api import JITFactory, jit

        if not (isinstance(impl, JITFactory) or type(impl).__name__ == "LazyJIT"):
            if isinstance(impl, ir.PrimFunc) or not callable(impl):
                raise TypeError("@tilelang.autotune decorates a @tilelang.jit function (or a "
                                f"plain kernel factory), got {type(impl).__name__}")
            impl = jit(impl)  # a plain factory: jit it with default options
        return AutoTuneImpl(impl, configs, warmup=warmup, rep=rep, timeout=timeout,
                            supply_type=supply_type, ref_prog=ref_prog,
                            supply_prog=supply_prog, rtol=rtol, atol=atol,
                            max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
                            manual_check_prog=manual_check_prog,
                            cache_input_tensors=cache_input_tensors,
                            do_not_specialize=do_not_specialize, backend=backend,
                            early_stop=early_stop, early_stop_factor=early_stop_factor)

    return decorator
