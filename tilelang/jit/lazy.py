"""The lazy JIT: a kernel-style function is the kernel, specialised and compiled per call.

    @tilelang.lazy_jit                    (or @tilelang.jit on a function with `T.Kernel`)
    def gemm(A: T.Tensor[[int, T.dyn["K"]], T.float16], B: ..., block_M: int = 128):
        ...
        return C                          # C = T.empty(...): allocated per call, returned

A call binds the arguments to the signature, computes the specialisation key from the
annotations (`annot.py`), and looks it up: a hit runs the cached kernel (no re-trace); a miss
traces the body with the key's compile-time values (a `PrimFunc` whose parameters are the
runtime parameters followed by the `T.empty` outputs), compiles it into a `JITKernel`, caches
it and runs it.

The newer style leaves tensor parameters unannotated and declares them in the body:
`M, N, K = T.const("M, N, K")` then `A: T.Tensor((M, K), T.float16)`. Which tensor dims give
M, N and K is learnt by a first trace ("phase 1") in which the `T.const` names are placeholder
variables; it stops as soon as every tensor parameter has been annotated and is cached per
compile-time arguments. The specialising trace ("phase 2") then gives `T.const` the concrete
ints, read from the tensors, or from keyword arguments (`.compile(M=1024, ...)` needs no
tensors at all).
"""

from __future__ import annotations

import inspect
import threading
from typing import TYPE_CHECKING, Any, Optional

from ..frontend.annotations import resolve_annotations
from ..frontend.builder import error
from ..ir import nodes as ir
from ..ir.dtype import DType
from . import annot as A
from .annot import MISSING
from .lazy_trace import (_annotate_other, _annotated_buffer, _const_int, _Hooks, _Pending,
                         _Phase1Done, _phase1_dim, _return_struct, _scan_body, _tensor_spec)

if TYPE_CHECKING:
    from .kernel import JITKernel

_TENSOR = ("<tensor>",)
_NOT_GIVEN = ("<not given>",)
_NO_EXTRAS = ()


class _Param:
    __slots__ = ("name", "index", "annot", "default", "kind", "kwonly", "posonly", "key")

    def __init__(self, name, index, annot, default, kwonly, posonly):
        self.name, self.index, self.annot, self.default = name, index, annot, default
        self.kwonly, self.posonly = kwonly, posonly
        self.kind = annot.kind if annot is not None else "auto"
        if self.kind == "tensor":
            k = annot.key
            self.key = lambda v: _NOT_GIVEN if v is MISSING else k(v)
        elif self.kind == "const":
            self.key = A.as_dtype if annot.ctype == "dtype" else A.freeze
        elif self.kind == "auto":
            def key(v):
                if v is MISSING:
                    return _NOT_GIVEN
                return _TENSOR if A.is_tensor_like(v) else A.freeze(v)
            self.key = key
        else:
            self.key = None  # runtime parameters do not specialise


class LazyFunc:
    """`jit_obj.func`: the user's function plus its parsed signature (`annot`)."""

    def __init__(self, jit):
        self._jit = jit
        self.orig_func = jit._py

    @property
    def annot(self) -> dict:
        self._jit._prepare()
        return {p.name: p.annot for p in self._jit._params if p.annot is not None}

    def __call__(self, *args, **kwargs):
        return self.orig_func(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.orig_func, name)

    def __repr__(self):
        return f"<lazy-JIT function {self.orig_func.__qualname__}>"


class Plan:
    """What one family of calls (equal compile-time arguments) knows: the annotation of every
    tensor parameter, where each `T.const` name comes from, and the specialisations keyed by
    the tensors' compile-time facts."""

    __slots__ = ("annots", "auto", "body_annotated", "const_sources", "entries")

    def __init__(self, annots, auto, body_annotated, const_sources):
        self.annots = annots  # param index -> TensorAnnot (signature or derived)
        self.auto = [(i, _missing_ok(annots[i].key)) for i in auto]  # keyed per call
        self.body_annotated = body_annotated
        self.const_sources = const_sources  # T.const name -> (param index, dim)
        self.entries: dict = {}

    def key2(self, values):
        if not self.auto:
            return ()
        return tuple(k(values[i]) for i, k in self.auto)


def _missing_ok(key):
    return lambda v: _NOT_GIVEN if v is MISSING else key(v)


class Specialization:
    """One traced (and, once needed, compiled) specialisation."""

    __slots__ = ("prim_func", "kernel", "runtime_idx", "ret", "dyn_checks", "name", "lock")

    def __init__(self, prim_func, runtime_idx, ret, dyn_checks, name):
        self.prim_func = prim_func
        self.kernel = None
        self.runtime_idx = runtime_idx
        self.ret = ret
        self.dyn_checks = dyn_checks
        self.name = name
        self.lock = threading.Lock()

    def compiled(self, options):
        if self.kernel is None:
            with self.lock:
                if self.kernel is None:
                    from .kernel import JITKernel

                    opts = dict(options)
                    opts["out_idx"] = None
                    self.kernel = JITKernel(self.prim_func, **opts)
        return self.kernel

    def run(self, values, stream=None):
        if self.dyn_checks:
            _check_dyn(self.name, self.dyn_checks, values)
        inputs = [values[i] for i in self.runtime_idx]
        out = self.kernel(*inputs) if stream is None else self.kernel(*inputs, stream=stream)
        ret = self.ret
        if ret is None:
            return None
        outs = [] if out is None else (out if isinstance(out, list) else [out])
        return _rebuild(ret, outs, values)


def _rebuild(ret, outs, values):
    if isinstance(ret, tuple) and ret and ret[0] in ("out", "in"):
        return outs[ret[1]] if ret[0] == "out" else values[ret[1]]
    _, items = ret
    # several results come back as a list, tuple or list in the body alike (the reference's
    # kernels return a list; `b, c = kernel(a)` unpacks either)
    return [_rebuild(r, outs, values) for r in items]


def _check_dyn(fname, checks, values):
    for name, positions in checks:
        first = None
        for i, what, d, pname, dtype in positions:
            v = values[i]
            actual = A.arg_shape(v, dtype)[d] if what == "shape" else A.arg_strides(v, dtype)[d]
            if first is None:
                first = (actual, f"{pname}.{what}[{d}]")
            elif actual != first[0]:
                raise ValueError(
                    f"{fname}: T.dyn[{name!r}] must have one value, but {first[1]} = {first[0]} "
                    f"and {pname}.{what}[{d}] = {actual} (parameters "
                    f"{first[1].split('.')[0]!r} and {pname!r})")


class LazyJIT:
    """A kernel-style JIT function: call it with tensors, or `.compile(...)` / `.get_tir(...)`
    / `.par_compile(configs)` ahead of time."""

    def __init__(self, func, options: dict):
        self._py = func
        self.options = dict(options or {})
        self.__name__ = getattr(func, "__name__", "kernel")
        self.__qualname__ = getattr(func, "__qualname__", self.__name__)
        self.__doc__ = func.__doc__
        # no `__wrapped__`: a jitted kernel is not the plain function (pytest does not
        # collect a kernel named `test_*` as a test, as with the reference's JIT object)
        self.func = LazyFunc(self)
        self._params = None
        self._plans: dict = {}
        self._lock = threading.RLock()
        self.trace_count = 0  # traces run (phase 1 and 2); tests use it to see cache hits

    # ---- signature --------------------------------------------------------------------------
    def _prepare(self):
        if self._params is not None:
            return
        func = self._py
        sig = inspect.signature(func)
        hints = resolve_annotations(func)
        params = []
        for i, (name, p) in enumerate(sig.parameters.items()):
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"{self.__name__}: *args/**kwargs parameters are not supported "
                                "by the lazy JIT")
            default = MISSING if p.default is p.empty else p.default
            an = A.annotation_of(name, hints.get(name, p.empty), default, p.empty)
            if an is not None and an.kind == "const" and default is not MISSING:
                an.default = default
            params.append(_Param(name, i, an, default, p.kind == p.KEYWORD_ONLY,
                                 p.kind == p.POSITIONAL_ONLY))
        self._index = {p.name: p.index for p in params if not p.posonly}
        self._n_positional = sum(1 for p in params if not p.kwonly)
        self._simple = all(not p.kwonly for p in params)
        self._defaults = [p.default for p in params]
        self._keyed = [(p.index, p.key) for p in params if p.key is not None]
        self._sig_tensors = {p.index: p.annot for p in params if p.kind == "tensor"}
        self._needs_phase1, self._uses_const = _scan_body(func, {p.name for p in params})
        self._sig_text = ", ".join(
            p.name + ("" if p.default is MISSING else f"={p.default!r}") for p in params)
        self._params = params

    # ---- binding and keys (the per-call hot path) -------------------------------------------
    def _bind(self, args, kwargs, require_all=True):
        params = self._params
        n = len(params)
        if not kwargs and len(args) == n and self._simple:
            return list(args), None
        if len(args) > self._n_positional:
            raise TypeError(f"{self.__name__}() takes {self._n_positional} positional "
                            f"argument(s) ({self._sig_text}) but {len(args)} were given")
        values = list(args) + [MISSING] * (n - len(args))
        extras = None
        for k, v in kwargs.items():
            i = self._index.get(k)
            if i is None:
                if not self._uses_const:
                    raise TypeError(f"{self.__name__}() got an unexpected keyword argument "
                                    f"{k!r} (parameters: {self._sig_text})")
                if extras is None:
                    extras = {}
                extras[k] = v
            elif values[i] is not MISSING:
                raise TypeError(f"{self.__name__}() got multiple values for argument {k!r}")
            else:
                values[i] = v
        missing = []
        for i in range(n):
            if values[i] is MISSING:
                d = self._defaults[i]
                if d is not MISSING:
                    values[i] = d
                elif require_all or params[i].kind == "const":
                    missing.append(params[i].name)
        if missing:
            raise TypeError(f"{self.__name__}() missing {len(missing)} required argument(s): "
                            f"{', '.join(repr(m) for m in missing)} (parameters: "
                            f"{self._sig_text})")
        return values, extras

    def _lookup(self, values, extras, compile_now=True):
        """The specialisation for bound arguments: cached, or traced (and compiled) now."""
        key1 = tuple([k(values[i]) for i, k in self._keyed])
        if extras:
            key1 = (key1, A.freeze(extras))
        plan = self._plans.get(key1)
        if plan is None:
            plan = self._make_plan(key1, values, extras)
        key2 = plan.key2(values) if plan.auto else ()
        entry = plan.entries.get(key2)
        if entry is None:
            with self._lock:
                entry = plan.entries.get(key2)
                if entry is None:
                    entry = self._specialise(plan, values, extras)
                    plan.entries[key2] = entry
        if compile_now and entry.kernel is None:
            entry.compiled(self.options)
        return entry

    # ---- public API -------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._params is None:
            self._prepare()
        values, extras = self._bind(args, kwargs, True)
        entry = self._lookup(values, extras)
        return entry.run(values)

    def compile(self, *args: Any, **kwargs: Any) -> "JITKernel":
        """The `JITKernel` for these arguments (tensors, `T.Tensor(shape, dtype)`
        placeholders, compile-time values, `T.const` names by keyword). Its call takes the
        runtime parameters in order and returns the `T.empty` outputs."""
        self._prepare()
        values, extras = self._bind(args, kwargs, False)
        kernel = self._lookup(values, extras).kernel
        assert kernel is not None
        return kernel

    def get_kernel_source(self, *args: Any, **kwargs: Any) -> str:
        """The generated CUDA of the kernel for these arguments (as `compile`: tensors or
        placeholders, compile-time values, `T.const` names by keyword)."""
        return self.compile(*args, **kwargs).get_kernel_source()

    def get_tir(self, *args: Any, **kwargs: Any) -> ir.PrimFunc:
        """The specialised PrimFunc (printable), without compiling it."""
        self._prepare()
        values, extras = self._bind(args, kwargs, False)
        return self._lookup(values, extras, compile_now=False).prim_func

    def par_compile(self, configs: Any, num_workers: Optional[int] = None,
                    ignore_error: bool = False) -> list:
        """Trace every config (a dict of parameter name -> tensor / placeholder / value, or a
        tuple of positional arguments), then compile them in a thread pool; returns the
        kernels in config order."""
        from .parallel import run_parallel, split_config

        self._prepare()

        def elaborate(cfg):
            args, kwargs = split_config(cfg)
            values, extras = self._bind(args, kwargs, False)
            return self._lookup(values, extras, compile_now=False)

        return run_parallel(configs, elaborate, lambda e: e.compiled(self.options),
                            num_workers, ignore_error)

    def dispatch(self, *args: Any, **kwargs: Any) -> "Specialization":
        """Key computation and cache lookup only (what a call costs besides running)."""
        values, extras = self._bind(args, kwargs, True)
        return self._lookup(values, extras)

    def __repr__(self):
        return f"<tilelang.lazy_jit {self.__qualname__}>"

    # ---- plans (phase 1) --------------------------------------------------------------------
    def _make_plan(self, key1, values, extras):
        with self._lock:
            plan = self._plans.get(key1)
            if plan is not None:
                return plan
            annots = dict(self._sig_tensors)
            cands = [p.index for p in self._params if p.kind == "auto" and (
                values[p.index] is MISSING or A.is_tensor_like(values[p.index]))]
            derived, body, sources = {}, set(), {}
            if self._needs_phase1 and cands:
                derived, sources = self._phase1(values, extras, cands)
                body = set(derived)
            missing = [self._params[i].name for i in cands
                       if i not in derived and values[i] is MISSING]
            if missing:
                raise self._missing_error(missing)
            for i in cands:
                if i not in derived:
                    derived[i] = A.TensorAnnot.any_tensor(self._params[i].name)
            annots.update(derived)
            plan = Plan(annots, cands, body, sources)
            self._plans[key1] = plan
            return plan

    def _missing_error(self, missing):
        return TypeError(f"{self.__name__}() missing {len(missing)} required argument(s): "
                         f"{', '.join(map(repr, missing))} (parameters: {self._sig_text}); only "
                         "tensor parameters declared in the body (`A: T.Tensor[shape, dtype]`) "
                         "may be left out of compile()/get_tir()")

    def _phase1(self, values, extras, cands):
        consts: dict = {}  # name -> placeholder Var
        const_ids: dict = {}
        markers = {}
        derived = {}
        params = self._params

        def const_hook(name, dtype):
            if extras and name in extras:
                return _const_int(extras[name], name, self.__name__)
            v = consts.get(name)
            if v is None:
                v = consts[name] = ir.Var(name, dtype)
                const_ids[id(v)] = v
            return v

        def annotate_hook(name, prev, annotation):
            i = markers.get(id(prev))
            if i is None:
                return _annotate_other(self.__name__, name, prev, annotation)
            pname = params[i].name
            spec = _tensor_spec(annotation, pname, self.__name__)
            an = A.TensorAnnot.from_spec(pname, spec, const_ids)
            derived[i] = an
            if len(derived) == len(cands):
                raise _Phase1Done
            v = values[i]
            dyn_vars: dict = {}
            shape = [_phase1_dim(e, v, d, dyn_vars, pname) for d, e in enumerate(spec.shape)]
            dt = spec.dtype if isinstance(spec.dtype, DType) else (
                A.as_dtype(v.dtype) if v is not MISSING else DType("float32"))
            return ir.Buffer(pname, shape, dt, "global")

        hooks = _Hooks(self, values, const_hook, annotate_hook)
        trace_vals = {i: an.make_buffer(values[i], self.__name__, hooks.dyn_vars)
                      for i, an in self._sig_tensors.items()}
        for i in cands:
            trace_vals[i] = m = _Pending(params[i].name)
            markers[id(m)] = i
        try:
            self._trace(values, trace_vals, hooks)
        except _Phase1Done:
            pass
        except Exception as exc:
            missing = [params[i].name for i in cands if values[i] is MISSING and i not in derived]
            if missing:
                raise self._missing_error(missing) from exc
            raise
        sources = {}
        for i in sorted(derived):
            for d, dim in enumerate(derived[i].shape):
                if dim.kind == "const" and dim.name in consts and dim.name not in sources:
                    sources[dim.name] = (i, d)
        # a T.const met only as a stride (`T.StridedTensor[[N, M], [S0, S1], ...]`) takes the
        # argument's stride, as the reference does
        for i in sorted(derived):
            for d, dim in enumerate(derived[i].strides or ()):
                if dim.kind == "const" and dim.name in consts and dim.name not in sources:
                    sources[dim.name] = (i, d, "stride")
        return derived, sources

    # ---- specialisation (phase 2) -----------------------------------------------------------
    def _specialise(self, plan: Plan, values, extras) -> Specialization:
        params = self._params
        fname = self.__name__
        used_consts = set()
        pending = {}

        def const_hook(name, dtype):
            used_consts.add(name)
            if extras and name in extras:
                return _const_int(extras[name], name, fname)
            src = plan.const_sources.get(name)
            if src is None:
                raise error(TypeError, f"T.const {name!r} has no value: no tensor annotation "
                                       f"has {name} as a dimension; pass {name}=... by keyword")
            i, d = src[:2]
            v = values[i]
            if v is MISSING:
                raise error(TypeError, f"T.const {name!r} is taken from parameter "
                                       f"{params[i].name!r} (dim {d}), which was not given; "
                                       f"pass a tensor for it or {name}=... by keyword")
            # in elements of the annotated dtype: a byte tensor carries packed sub-byte ones
            dt = getattr(plan.annots[i], "dtype", None)
            return int(A.arg_strides(v, dt)[d] if src[2:] == ("stride",) else
                       A.arg_shape(v, dt)[d])

        def annotate_hook(name, prev, annotation):
            i = pending.get(id(prev))
            if i is None:
                return _annotate_other(fname, name, prev, annotation)
            buf = _annotated_buffer(fname, params[i].name, annotation, values[i],
                                    plan.annots[i], plan.const_sources, params, hooks.dyn_vars)
            hooks.param_values[i] = buf
            del pending[id(prev)]
            return buf

        trace_vals = {}
        hooks = _Hooks(self, values, const_hook, annotate_hook)
        for i in plan.body_annotated:  # rank/dtype first: T.const reads the tensors' dims
            if values[i] is not MISSING:
                plan.annots[i].check(values[i], fname)
        for i, an in plan.annots.items():
            if i in plan.body_annotated:
                m = trace_vals[i] = _Pending(params[i].name)
                pending[id(m)] = i
            else:
                trace_vals[i] = an.make_buffer(values[i], fname, hooks.dyn_vars)
        b, ret = self._trace(values, trace_vals, hooks)
        if pending:
            names = ", ".join(repr(params[i].name) for i in pending.values())
            raise TypeError(f"{fname}: parameter(s) {names} were not annotated in this "
                            "specialisation (the annotation statement did not run)")
        if extras:
            unused = [k for k in extras if k not in used_consts]
            if unused:
                raise TypeError(f"{fname}() got unexpected keyword argument(s) "
                                f"{', '.join(map(repr, unused))}: neither parameters "
                                f"({self._sig_text}) nor T.const names")
        return self._finish(b, ret, hooks)

    def _trace(self, values, trace_vals, hooks):
        """Run the body once under a builder with the hooks installed."""
        from ..frontend.trace import trace

        args, kwargs = [], {}
        for p in self._params:
            i = p.index
            if i in trace_vals:
                v = trace_vals[i]
            elif p.kind == "ptr":
                v = hooks.param_values[i] = ir.Var(p.name, DType("handle"))
            elif p.kind == "scalar":
                v = hooks.param_values[i] = ir.Var(p.name, p.annot.dtype)
            elif p.kind == "const":
                v = p.annot.normalize(values[i], self.__name__)
            else:
                v = values[i]
            if i in trace_vals and not isinstance(v, _Pending):
                hooks.param_values[i] = v
            if p.kwonly:
                kwargs[p.name] = v
            else:
                args.append(v)
        self.trace_count += 1
        return trace(self._py, args, kwargs, name=self.__name__, setup=hooks.install)

    def _finish(self, b, ret, hooks) -> Specialization:
        from ..frontend.trace import finish

        fname = self.__name__
        params, runtime_idx = [], []
        for p in self._params:
            v = hooks.param_values.get(p.index)
            if v is None:
                continue
            if p.kind == "ptr" and not isinstance(v, ir.Buffer):
                raise TypeError(f"{fname}: parameter {p.name!r} is a T.ptr and needs "
                                f"`{p.name} = T.match_buffer({p.name}, shape, dtype)` in the body")
            params.append(v)
            runtime_idx.append(p.index)
        for k, o in enumerate(b.outputs):
            if o.name == "__unnamed":
                o.name = f"out_{k}"
        b.params = params + list(b.outputs)
        input_pos = {id(v): runtime_idx[j] for j, v in enumerate(params)}
        out_pos = {id(o): k for k, o in enumerate(b.outputs)}
        ret_struct = _return_struct(fname, ret, out_pos, input_pos)
        pf = finish(b, self._py, fname)
        plan_checks = hooks.plan_dyn_checks()
        return Specialization(pf, runtime_idx, ret_struct, plan_checks, fname)
