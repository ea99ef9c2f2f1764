"""`tilelang.jit`, `tilelang.lazy_jit`, `tilelang.compile`, `tilelang.lower`.

`@tilelang.jit` accepts two styles and tells them apart by the function's source:
  * a *factory* returns a `@T.prim_func` built from its (compile-time) arguments; calling the
    decorated factory returns a cached `JITKernel`;
  * a *kernel* function contains `with T.Kernel(...)` itself; calling it with tensors
    specialises, compiles (cached by the specialisation) and runs it (the lazy JIT).
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import threading

from ..ir import nodes as ir
from .kernel import JITKernel

_JIT_OPTIONS = ("out_idx", "target", "target_host", "execution_backend", "verbose",
                "pass_configs", "debug_root_path", "compile_flags")


def compile(func, out_idx=None, target="auto", target_host=None, execution_backend="auto",
            verbose=False, pass_configs=None, debug_root_path=None, compile_flags=None,
            **kwargs) -> JITKernel:  # noqa: A001
    """Compile a prim_func into a callable kernel."""
    return JITKernel(func, out_idx=out_idx, target=target, target_host=target_host,
                     execution_backend=execution_backend, verbose=verbose,
                     pass_configs=pass_configs, debug_root_path=debug_root_path,
                     compile_flags=compile_flags)


class LoweredSource(str):
    """What `tilelang.lower` returns: the generated source, a `str`, that also answers to the
    field of the reference's `CompiledArtifact` that holds it, `kernel_source` (the same
    text). The reference's other fields (TVM modules) have no counterpart here."""

    __slots__ = ()

    @property
    def kernel_source(self) -> str:
        return str(self)

    def __getattr__(self, name):
        if name in ("host_mod", "device_mod", "rt_mod", "params"):
            raise AttributeError(f"the result of tilelang.lower has no {name}: it is the "
                                 "generated source (also as .kernel_source); TVM modules do "
                                 "not exist here (docs/compatibility.md)")
        raise AttributeError(name)


def lower(func, target="auto", target_host=None, pass_configs=None, **kwargs) -> LoweredSource:
    """The generated source of `func` for `target`, without compiling it (CUDA C++ for cuda
    targets, the printed IR for the CPU interpreter), as a `str` that also has the
    reference's `.kernel_source`."""
    from ..transform.uninitialized_reads import warn_uninitialized_reads
    from .target import parse_target, resolve_auto

    t = resolve_auto(parse_target(target))
    warn_uninitialized_reads(func)
    if t.kind == "cpu":
        return LoweredSource(str(func))
    from ..engine.build import lower_cuda
    from ..transform.pass_config import normalize_pass_configs

    return LoweredSource(lower_cuda(func, t, {
        "pass_configs": normalize_pass_configs(pass_configs)}).source)


def _is_kernel_style(func) -> bool:
    """A function whose own body (not a nested def) opens `with T.Kernel(...)`, calls
    T.const / T.empty, annotates a parameter (`A: T.Tensor[...]`), or whose signature carries
    tensor annotations, is a kernel; anything else is a factory."""
    from ..language.types import DynSpec, TensorSpec

    try:
        hints = inspect.get_annotations(func, eval_str=False)
    except Exception:
        hints = {}
    for ann in hints.values():
        if isinstance(ann, (TensorSpec, DynSpec)) or getattr(ann, "__name__", "") == "ptr":
            return True
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False
    fn = tree.body[0]

    class Finder(ast.NodeVisitor):
        found = False

        def visit_FunctionDef(self, node):
            if node is fn:
                self.generic_visit(node)

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_With(self, node):
            for item in node.items:
                c = item.context_expr
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and \
                        c.func.attr == "Kernel":
                    self.found = True
            self.generic_visit(node)

        def visit_Call(self, node):
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("const", "empty"):
                self.found = True
            self.generic_visit(node)

    finder = Finder()
    finder.visit(fn)
    # `A: T.Tensor[...]` annotating a parameter in the body (the kernel may open its
    # `T.Kernel` in a macro it calls)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):  # e.g. a lambda's line
        return finder.found
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    annotates_param = any(isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
                          and st.target.id in params and st.value is None for st in fn.body)
    return finder.found or annotates_param


def _freeze(value):
    """A hashable key for a factory argument."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return ("dict",) + tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    try:
        hash(value)
        return value
    except TypeError:
        return ("repr", repr(value))


class JITFactory:
    """A `@tilelang.jit` factory: calling it with compile-time arguments returns a kernel,
    compiled once per distinct arguments."""

    def __init__(self, func, options: dict):
        self.func = func
        self.options = options
        self._cache: dict = {}
        self._lock = threading.Lock()
        functools.update_wrapper(self, func)

    def get_tir(self, *args, **kwargs) -> ir.PrimFunc:
        prim = self.func(*args, **kwargs)
        if not isinstance(prim, ir.PrimFunc):
            raise TypeError(f"@tilelang.jit factory {self.func.__name__} must return a "
                            f"@T.prim_func, got {type(prim).__name__}")
        return prim

    def compile(self, *args, **kwargs) -> JITKernel:
        key = (_freeze(args), _freeze(kwargs))
        with self._lock:
            kernel = self._cache.get(key)
        if kernel is None:
            kernel = JITKernel(self.get_tir(*args, **kwargs), **self.options)
            with self._lock:
                self._cache.setdefault(key, kernel)
        return kernel

    __call__ = compile

    def get_kernel_source(self, *args, **kwargs) -> str:
        """The generated CUDA of the kernel compiled for these factory arguments."""
        return self.compile(*args, **kwargs).get_kernel_source()

    def par_compile(self, configs, num_workers=None, ignore_error=False):
        from .parallel import par_compile_factory

        return par_compile_factory(self, configs, num_workers=num_workers,
                                   ignore_error=ignore_error)

    def __repr__(self):
        return f"<tilelang.jit factory {self.func.__qualname__}>"


def jit(func=None, *, out_idx=None, target="auto", target_host=None, execution_backend="auto",
        verbose=False, pass_configs=None, debug_root_path=None, compile_flags=None, **kwargs):
    """Decorate a kernel factory (returns a @T.prim_func) or a kernel function (contains
    `with T.Kernel`); see the module docstring."""
    options = dict(out_idx=out_idx, target=target, target_host=target_host,
                   execution_backend=execution_backend, verbose=verbose,
                   pass_configs=pass_configs, debug_root_path=debug_root_path,
                   compile_flags=compile_flags)

    def wrap(f):
        if isinstance(f, (JITFactory,)):
            return f
        if _is_kernel_style(f):
            from .lazy import LazyJIT

            return LazyJIT(f, options)
        return JITFactory(f, options)

    return wrap if func is None else wrap(func)


def lazy_jit(func=None, **options):
    """Decorate a kernel function whose body is the kernel: calling it with tensors
    specialises on their shapes/dtypes (and compile-time arguments), compiles, and runs."""
    from .lazy import LazyJIT

    def wrap(f):
        opts = {k: options.get(k) for k in _JIT_OPTIONS}
        opts["target"] = options.get("target", "auto")
        opts["execution_backend"] = options.get("execution_backend", "auto")
        opts["verbose"] = options.get("verbose", False)
        return LazyJIT(f, opts)

    return wrap if func is None else wrap(func)
