"""`Profiler`: feed a compiled kernel generated inputs, check it against a reference program,
time it. Made by `kernel.get_profiler(tensor_supply_type=...)`.

Inputs are made per `TensorSupplyType` for every non-output parameter, on the kernel's device
(the CPU for target="cpu", the current GPU otherwise). `assert_allclose` gives the reference
program its own copies of the inputs, so neither side sees the other's in-place writes, and
compares every output with the reference's (mismatch-ratio tolerance, see
`tilelang.testing.torch_assert_close`; dtypes and devices are reconciled first). A kernel
compiled without `out_idx` returns nothing: its outputs are then the last arguments (as many as
the reference returns), or, when the reference returns nothing either, every tensor argument.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional

from ..testing.compare import torch_assert_close
from .bench import do_bench
from .supply import KernelParam, TensorSupplyType, make_tensor, normalize_supply_type


def _as_list(outs) -> list:
    import torch

    if outs is None:
        return []
    if isinstance(outs, torch.Tensor):
        return [outs]
    if isinstance(outs, (list, tuple)):
        return list(outs)
    return [outs]


def _clone(x):
    import torch

    return x.clone() if isinstance(x, torch.Tensor) else x


def kernel_device(kernel):
    """The device a kernel's inputs live on: the CPU for CPU-target kernels, else the GPU."""
    import torch

    from ..jit.target import resolve_auto

    target = getattr(kernel, "target", None)
    kind = getattr(target, "kind", None)
    if kind == "auto":
        kind = resolve_auto(target).kind
    if kind == "cpu" or (kind is None and not torch.cuda.is_available()):
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device())


class Profiler:
    """Benchmarking and validation of one compiled kernel."""

    def __init__(self, kernel, tensor_supply_type=None, device=None):
        self.kernel = kernel
        self.supply_type = normalize_supply_type(tensor_supply_type)
        self.device = device if device is not None else kernel_device(kernel)
        plan = getattr(kernel, "plan", None)
        self._infos = list(plan.params) if plan is not None else []
        self.params = [KernelParam.from_param_info(p) for p in self._infos]
        self.result_idx = list(plan.out_idx) if plan is not None else []

    # ---- reference API: adapter / func ------------------------------------------------------
    @property
    def adapter(self):
        return self.kernel

    @property
    def func(self):
        return self.kernel

    mod = func  # older reference spelling (`profiler.do_bench(profiler.mod)`)

    def with_default_adapter(self, adapter) -> "Profiler":
        self.kernel = adapter
        return self

    def __call__(self, *args, **kwargs):
        return self.kernel(*args, **kwargs)

    # ---- inputs -------------------------------------------------------------------------------
    def _get_params(self, with_output: bool = False) -> list:
        return [p for i, p in enumerate(self.params) if with_output or i not in self.result_idx]

    def _get_inputs(self, with_output: bool = False,
                    dynamic_symbolic_constraints: Optional[dict] = None) -> list:
        params = self._get_params(with_output)
        if dynamic_symbolic_constraints:
            params = [_with_sizes(p, dynamic_symbolic_constraints) for p in params]
        return [make_tensor(p, self.supply_type, self.device) for p in params]

    def get_inputs(self, with_output: bool = False) -> list:
        """Fresh generated inputs (every non-output parameter, in order)."""
        return self._get_inputs(with_output)

    def _sync(self):
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _output_names(self, n):
        names = [self.params[i].name for i in self.result_idx]
        return names if len(names) == n else [f"#{i}" for i in range(n)]

    def _run_both(self, reference_program, input_tensors):
        ins = self._get_inputs() if input_tensors is None else list(input_tensors)
        ref_ins = [_clone(x) for x in ins]
        ref_outs = _as_list(reference_program(*ref_ins))
        self._sync()
        lib_outs = _as_list(self.kernel(*ins))
        self._sync()
        return ins, ref_ins, lib_outs, ref_outs

    # ---- checks -------------------------------------------------------------------------------
    def assert_allclose(self, reference_program: Callable, input_tensors: Optional[list] = None,
                        atol: float = 1e-2, rtol: float = 1e-2,
                        max_mismatched_ratio: float = 0.01):
        """Run the kernel and `reference_program` on the same (generated or given) inputs and
        assert every output is close (at most `max_mismatched_ratio` of the elements differ)."""
        import torch

        ins, ref_ins, lib_outs, ref_outs = self._run_both(reference_program, input_tensors)
        names = None
        if not lib_outs:
            tensors = [i for i, x in enumerate(ins) if isinstance(x, torch.Tensor)]
            if ref_outs:
                if len(ref_outs) > len(tensors):
                    raise AssertionError(
                        f"the reference program returned {len(ref_outs)} outputs but the kernel "
                        f"has only {len(tensors)} tensor arguments")
                picked = tensors[len(tensors) - len(ref_outs):]
            else:
                picked = tensors
                ref_outs = [ref_ins[i] for i in picked]
            lib_outs = [ins[i] for i in picked]
            names = [self._input_name(i) for i in picked]
        if len(lib_outs) != len(ref_outs):
            raise AssertionError(f"the kernel returned {len(lib_outs)} outputs but the "
                                 f"reference program returned {len(ref_outs)}")
        names = names or self._output_names(len(lib_outs))
        for name, lhs, rhs in zip(names, lib_outs, ref_outs):
            if not isinstance(rhs, torch.Tensor):
                rhs = torch.as_tensor(rhs)
            if rhs.shape != lhs.shape and rhs.numel() == lhs.numel():
                rhs = rhs.reshape(lhs.shape)
            try:
                torch_assert_close(lhs, rhs, rtol=rtol, atol=atol,
                                   max_mismatched_ratio=max_mismatched_ratio,
                                   check_device=False, check_dtype=False,
                                   base_name="tilelang", ref_name="ref")
            except AssertionError as exc:
                raise AssertionError(f"kernel output {name!r} differs from the reference "
                                     f"program: {exc}") from None
        return True

    def _input_name(self, position: int) -> str:
        params = self._get_params()
        return params[position].name if position < len(params) else f"#{position}"

    def manual_assert_close(self, reference_program: Callable,
                            input_tensors: Optional[list] = None,
                            manual_check_prog: Optional[Callable] = None):
        """Run both programs and hand (kernel outputs, reference outputs) to
        `manual_check_prog`, which raises on mismatch."""
        if manual_check_prog is None:
            raise ValueError("manual_assert_close needs manual_check_prog=f(lib_outs, ref_outs)")
        _, _, lib_outs, ref_outs = self._run_both(reference_program, input_tensors)
        if len(lib_outs) != len(ref_outs):
            raise AssertionError(f"the kernel returned {len(lib_outs)} outputs but the "
                                 f"reference program returned {len(ref_outs)}")
        manual_check_prog(lib_outs, ref_outs)

    def assert_consistent(self, repeat: int = 10):
        """Run the kernel `repeat` more times on the same inputs; outputs must not change
        (catches races)."""
        import torch

        ins = self._get_inputs()
        first = [_clone(x) for x in _as_list(self.kernel(*ins))]
        for _ in range(repeat):
            outs = _as_list(self.kernel(*ins))
            for i, (lhs, rhs) in enumerate(zip(outs, first)):
                if not torch.allclose(lhs.float(), rhs.float(), equal_nan=True):
                    raise AssertionError(f"result is not consistent across runs (output {i})")

    def run_once(self, func: Optional[Callable] = None):
        """Call `func` (default: the kernel) once on fresh generated inputs; return its result."""
        ins = self._get_inputs()
        return (func or self.kernel)(*ins)

    # ---- timing -------------------------------------------------------------------------------
    def do_bench(self, func: Optional[Callable] = None, warmup: float = 25, rep: float = 100,
                 n_warmup: int = 0, n_repeat: int = 0, input_tensors: Optional[list] = None,
                 backend: str = "event", quantiles: Optional[list] = None,
                 return_mode: str = "mean",
                 dynamic_symbolic_constraints: Optional[dict] = None, device=None,
                 early_stop_baseline: Optional[float] = None, **kwargs) -> float:
        """Milliseconds per call of `func` (default: the kernel) on generated (or given)
        inputs. `warmup` / `rep` are time budgets in ms; `n_warmup` / `n_repeat` > 0 fix the
        counts instead. A kernel with dynamic (symbolic) sizes gets inputs of the sizes in
        `dynamic_symbolic_constraints` (`{"m": 2048}`; every symbol of the inputs' shapes must
        be given). `device`: where to time (default: the kernel's device). CPU-target kernels
        are timed by wall clock."""
        kwargs.pop("profiler", None)  # older reference keyword ("torch"/"tvm"/"auto")
        target = func if func is not None else self.kernel
        if target is None:
            raise ValueError("benchmarking function should be provided")
        if input_tensors is not None:
            ins = list(input_tensors)
        else:
            ins = self._get_inputs(dynamic_symbolic_constraints=dynamic_symbolic_constraints)
        return do_bench(partial(target, *ins), warmup=warmup, rep=rep, _n_warmup=n_warmup,
                        _n_repeat=n_repeat, quantiles=quantiles, backend=backend,
                        return_mode=return_mode,
                        device=self.device if device is None else device,
                        early_stop_baseline=early_stop_baseline, **kwargs)

    def __repr__(self):
        name = getattr(getattr(self.kernel, "prim_func", None), "name", type(self.kernel).__name__)
        return f"<Profiler {name} supply={self.supply_type.name} device={self.device}>"


def _with_sizes(param: KernelParam, sizes: dict) -> KernelParam:
    """`param` with its symbolic dimensions replaced by the values `sizes` gives by name (the
    profiler's `dynamic_symbolic_constraints`); a symbol it does not name is an error."""
    from ..interp.evaluate import eval_int
    from ..ir.visitor import free_vars

    shape = []
    for dim in param.shape:
        if isinstance(dim, int):
            shape.append(dim)
            continue
        symbols = free_vars(dim)
        missing = sorted(v.name for v in symbols if v.name not in sizes)
        if missing:
            raise ValueError(f"Dynamic symbolic variable {missing[0]!r} (in the shape of "
                             f"parameter {param.name!r}) not found in "
                             f"dynamic_symbolic_constraints; available: {sorted(sizes)}")
        shape.append(eval_int(dim, {v: int(sizes[v.name]) for v in symbols}))
    return KernelParam(param.name, param.dtype, shape, param.tl_dtype, param.is_scalar_param)


__all__ = ["Profiler", "TensorSupplyType", "kernel_device"]
