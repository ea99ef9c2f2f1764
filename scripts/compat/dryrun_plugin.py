"""pytest plugin: run a test file written for the GPU without one, compiling every kernel for
sm_90a and executing nothing ("dry run").

Loaded by `dry_run.py` (`python -m pytest -p dryrun_plugin ...` with this folder on sys.path).
CUDA tensors become `meta` tensors (shapes and dtypes, no data), so the test's own torch code
costs nothing; a `JITKernel` call compiles for sm_90a (NVRTC or nvcc: the generated code must
build), checks the arguments against the signature, and returns `meta` outputs. Timing returns
1 ms and comparisons pass. What the test does with values (`.item()`, `.tolist()`, printing)
fails in meta mode: such failures are reported as `harness`, not as project errors.

Every kernel build is recorded (`DRYRUN_LOG`, one JSON line per build: ok or the error) so the
driver can tell "compiled and then hit the harness" from "the project rejected the program".
"""

import json
import os
import traceback

import pytest

os.environ["TILELANG_TARGET"] = "cuda -arch=sm_90a"
_LOG = os.environ.get("DRYRUN_LOG")
_ARCH = os.environ.get("DRYRUN_ARCH", "sm_90a")
# DRYRUN_DEVICE: what a CUDA tensor becomes: "meta" (no data; fastest) or "cpu" (real values,
# so `.item()` and data-dependent setup work). DRYRUN_EXEC: "none" (kernels are compiled, not
# run; comparisons pass) or "interp" (after compiling for sm_90a, each call runs on the CPU
# interpreter and the test's own comparisons decide; needs DRYRUN_DEVICE=cpu).
_DEVICE = os.environ.get("DRYRUN_DEVICE", "meta")
_EXEC = os.environ.get("DRYRUN_EXEC", "none")


def _record(entry):
    if _LOG:
        with open(_LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")


def _install():
    import torch
    from torch.overrides import TorchFunctionMode

    def fix(dev):
        if dev is None:
            return None
        if isinstance(dev, int):
            return torch.device(_DEVICE)
        s = str(dev)
        if s.startswith("cuda"):
            return torch.device(_DEVICE)
        return dev

    class MetaMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                kwargs["device"] = fix(kwargs["device"])
            if func in (torch.Tensor.to,) and args:
                args = tuple(fix(a) if isinstance(a, (str, torch.device)) and str(a).startswith("cuda")
                             else a for a in args)
            return func(*args, **kwargs)

    mode = MetaMode()
    mode.__enter__()
    torch.Tensor.cuda = lambda self, *a, **k: self.to(_DEVICE)
    torch.Tensor.is_cuda = property(lambda self: self.device.type in ("cuda", _DEVICE))

    class _Props:
        name = "NVIDIA H100 80GB HBM3 (dry run)"
        major, minor = 9, 0
        multi_processor_count = 132
        total_memory = 80 * 2**30
        max_shared_memory_per_block_optin = 232448
        shared_memory_per_block_optin = 232448
        L2_cache_size = 50 * 2**20
        warp_size = 32
        regs_per_multiprocessor = 65536
        max_threads_per_multi_processor = 2048

    class _Event:
        def __init__(self, *a, **k):
            pass

        def record(self, *a, **k):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return 1.0

    class _Stream:
        cuda_stream = 0
        device = torch.device("meta")

        def __init__(self, *a, **k):
            pass

        def synchronize(self):
            pass

        def wait_stream(self, *a):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    c = torch.cuda
    c.is_available = lambda: True
    c.device_count = lambda: 1
    c.current_device = lambda: 0
    c.set_device = lambda *a: None
    c.get_device_capability = lambda *a: (9, 0)
    c.get_device_name = lambda *a: _Props.name
    c.get_device_properties = lambda *a: _Props()
    c.synchronize = lambda *a, **k: None
    c.empty_cache = lambda: None
    c.manual_seed = lambda *a: None
    c.manual_seed_all = lambda *a: None
    c.Event = _Event
    c.Stream = _Stream
    c.current_stream = lambda *a: _Stream()
    c.default_stream = lambda *a: _Stream()
    c.stream = lambda s: _Stream()
    c.max_memory_allocated = lambda *a: 0
    c.reset_peak_memory_stats = lambda *a: None
    c.memory_allocated = lambda *a: 0
    c.is_bf16_supported = lambda *a, **k: True
    c._lazy_init = lambda: None

    import tilelang
    import tilelang.testing
    from tilelang.jit.args import _row_major_strides, eval_shape_expr  # noqa: F401
    from tilelang.jit.kernel import JITKernel
    from tilelang.jit.target import parse_target

    target = parse_target(f"cuda -arch={_ARCH}")
    orig_adapter = JITKernel._adapter

    def adapter(self, t):
        if t.kind == "cuda" and not t.arch:
            t = target  # the "current GPU" is the dry run's; an explicit arch is kept
        key = t.kind
        if key in self._adapters:
            return self._adapters[key]
        name = self.prim_func.name
        try:
            a = orig_adapter(self, t)
        except Exception as e:
            _record_build({"kernel": name, "ok": False, "error": f"{type(e).__name__}: {str(e)[:600]}"})
            raise
        _record_build({"kernel": name, "ok": True})
        return a

    JITKernel._adapter = adapter

    orig_general = JITKernel._call_general

    def call(self, *args, stream=None):
        self._adapter(target)
        if _EXEC == "interp":
            saved = self.target
            self.target = parse_target("cpu")
            try:
                return orig_general(self, args)
            finally:
                self.target = saved
        plan = self.plan
        if len(args) != len(plan.inputs):
            raise ValueError(f"Kernel expected {len(plan.inputs)} inputs, but {len(args)} are given")
        full = [None] * len(plan.params)
        for p, a in zip(plan.inputs, args):
            full[p.index] = a
        for p in plan.inputs:
            a = full[p.index]
            if p.kind == "scalar":
                full[p.index] = plan._check_scalar(p, a)
            elif a is not None and not isinstance(a, torch.Tensor):
                raise TypeError(f"{p.name}: expects a tensor, got {type(a).__name__}")
        symbols = plan._bind_symbols(full)
        for p in plan.inputs:
            if p.kind == "buffer" and full[p.index] is not None:
                plan._check_shape(p, full[p.index], symbols)
        plan.check_assumptions(symbols)
        outs = []
        for p in plan.outputs:
            shape = tuple(eval_shape_expr(s, symbols) for s in p.shape)
            outs.append(torch.empty(shape, dtype=p.dtype.torch, device=_DEVICE))
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs

    JITKernel.__call__ = call
    JITKernel._call_general = lambda self, args, stream=None: call(self, *args)

    from tilelang.profiler import Profiler
    import tilelang.profiler as prof
    import tilelang.profiler.profiler as prof_impl

    def run_once_then_1ms(fn, *a, **k):
        fn()
        return 1.0

    prof.do_bench = lambda *a, **k: 1.0
    tilelang.profiler.do_bench = prof.do_bench
    if _EXEC == "interp":
        # Profiler.do_bench itself runs (inputs made as the test asks, dynamic sizes, the
        # kernel called once on the interpreter); only the timing loop is replaced
        prof_impl.do_bench = run_once_then_1ms
    else:
        Profiler.do_bench = lambda self, *a, **k: 1.0
    try:
        import triton.testing as tt
        tt.do_bench = lambda *a, **k: 1.0
    except Exception:  # noqa: BLE001
        pass
    if _EXEC == "interp":
        return
    Profiler.assert_allclose = lambda self, *a, **k: None
    Profiler.manual_assert_close = lambda self, *a, **k: None
    import tilelang.profiler as prof
    prof.do_bench = lambda *a, **k: 1.0
    tilelang.testing.torch_assert_close = lambda *a, **k: None
    import tilelang.utils.tensor as tensor_utils
    tensor_utils.torch_assert_close = lambda *a, **k: None
    torch.testing.assert_close = lambda *a, **k: None
    torch.allclose = lambda *a, **k: True
    if hasattr(tilelang, "profiler"):
        tilelang.profiler.do_bench = prof.do_bench
    try:
        import triton.testing as tt
        tt.do_bench = lambda *a, **k: 1.0
    except Exception:  # noqa: BLE001
        pass


_install()


_builds = []


def _record_build(entry):
    _builds.append(entry)


def pytest_runtest_setup(item):
    _builds.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "setup" and rep.outcome != "passed" or rep.when == "call":
        entry = {"test": item.nodeid, "outcome": rep.outcome, "builds": list(_builds)}
        if call.excinfo is not None and rep.outcome == "failed":
            e = call.excinfo
            frames = traceback.extract_tb(e.tb)
            last = frames[-1] if frames else None
            entry["error"] = f"{e.typename}: {str(e.value)[:1000]}"
            entry["where"] = f"{last.filename}:{last.lineno}" if last else ""
            entry["project"] = (type(e.value).__module__.startswith("tilelang")
                                or any("/tilelang/" in f.filename and "site-packages" not in f.filename
                                       for f in frames[-3:])
                                or any(not b["ok"] for b in _builds))
        elif rep.outcome == "skipped":
            entry["error"] = str(rep.longrepr)[-300:]
        _record(entry)


def pytest_collectreport(report):
    if report.failed:
        text = str(report.longrepr)
        lines = [ln for ln in text.splitlines() if ln.startswith("E ")]
        _record({"test": report.nodeid or "<collect>", "outcome": "collect-error",
                 "error": " | ".join(ln[1:].strip() for ln in lines[-3:])[:1000] or text[-600:],
                 "project": True, "builds": []})
