"""The per-kernel fast call path: Python source generated for one compiled kernel.

A JITKernel call must cost about as much Python as a torch op. `make_fast_call` writes a
function specialised to the kernel's signature: it checks each argument with the cheapest
test that decides it (type and dtype identity, a tuple compare for static shapes, one
attribute for contiguity), reads the symbolic sizes off the shapes, allocates the outputs,
packs the parameter block with one `struct.pack_into` and calls cuLaunchKernelEx with a
launch configuration built once per stream (cuLaunchKernel on drivers without it). Anything
unexpected — a wrong argument, a first call on a new device — goes to the general path, which
raises the descriptive error or prepares the device and then succeeds.
"""

from __future__ import annotations

import struct
import threading

from ..ir import nodes as ir

_PY_BIN = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "floormod": "%"}
_PY_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def py_expr(e, names: dict) -> str:
    """Python source of an integer shape/grid expression over symbols named in `names`."""
    if isinstance(e, int):
        return str(e)
    if isinstance(e, ir.Const):
        return str(int(e.value))
    if isinstance(e, ir.Var):
        if e not in names:  # a size bound only by the general path's solver
            raise NotImplementedError(f"symbol {e.name} is not read from an argument's shape")
        return names[e]
    if isinstance(e, ir.Binary):
        a, b = py_expr(e.a, names), py_expr(e.b, names)
        if e.op in _PY_BIN:
            return f"({a} {_PY_BIN[e.op]} {b})"
        if e.op in ("min", "max"):
            return f"{e.op}({a}, {b})"
        if e.op == "truncdiv":
            return f"int({a} / {b})"
    if isinstance(e, ir.Cast):
        return py_expr(e.value, names)
    if isinstance(e, ir.Compare):  # conditions on sizes (T.assume checked by the host)
        return f"({py_expr(e.a, names)} {_PY_CMP[e.op]} {py_expr(e.b, names)})"
    if isinstance(e, ir.Logical):
        return f"({py_expr(e.a, names)} {e.op} {py_expr(e.b, names)})"
    if isinstance(e, ir.Unary) and e.op in ("not", "neg"):
        return f"({'not ' if e.op == 'not' else '-'}{py_expr(e.a, names)})"
    raise NotImplementedError(f"shape expression {e}")


def make_fast_call(adapter, plan, slow):
    """A function `call(args)` equivalent to `slow(args)` for well-formed calls."""
    import torch

    from ..runtime import driver
    from ..runtime.launcher import ArgLayout
    from ..runtime.stream import cached_stream_arg, current_stream_handle

    module = adapter.module
    if module.zeroed or any(k.cooperative for k in module.kernels):
        return None  # cooperative launches and zero-filled workspaces: the general path
    if any(p.packed for p in plan.params):
        return None  # byte tensors carrying sub-byte elements: sizes counted by jit/args.py
    layout = ArgLayout(adapter.param_types)  # params, symbols, workspaces, TMA maps
    # torch's own accessor when it has one: one C call instead of a Python wrapper around it
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or current_stream_handle
    launch_ex = driver.fast_launcher_ex()
    g = {"Tensor": torch.Tensor, "empty": torch.empty, "slow": slow, "pack": layout.pack,
         "raw_stream": raw_stream, "launch": driver.fast_launcher(), "launch_ex": launch_ex,
         "params": layout.params_arg, "lock": threading.Lock(), "FUNCS": {}, "DEVS": {},
         "fail": _failure_handler(adapter, driver), "STREAMS": {}, "stream_arg": cached_stream_arg,
         "set_grid": struct.Struct("=3I").pack_into, "SMS": {}}
    names: dict = {ir.DEVICE_SM_COUNT: "SMS[dev]"}  # a grid sized at the launch
    lines = ["def call(args):", f"    if len(args) != {len(plan.inputs)}: return slow(args)"]
    arg_names = [f"a{i}" for i in range(len(plan.inputs))]
    if arg_names:
        lines.append(f"    {', '.join(arg_names)}{',' if len(arg_names) == 1 else ''} = args")
    first_tensor = None
    checks_after = []
    for name, p in zip(arg_names, plan.inputs):
        if p.kind == "scalar":
            if p.dtype.is_float:
                lines.append(f"    t = type({name})")
                lines.append("    if t is not float and t is not int: return slow(args)")
            elif p.dtype.is_int or p.dtype.is_bool:
                lo, hi = p.dtype.min_value(), p.dtype.max_value()
                lines.append(f"    if type({name}) is not int or not ({lo} <= {name} <= {hi}):"
                             " return slow(args)")
            else:
                lines.append("    return slow(args)")
            names.setdefault(p.var, name)
            continue
        g[f"DT_{name}"] = p.dtype.torch
        lines.append(f"    if type({name}) is not Tensor or {name}.dtype is not DT_{name}: "
                     "return slow(args)")
        if first_tensor is None:  # get_device() is -1 off the GPU: one call checks both
            first_tensor = name
            lines.append(f"    dev = {name}.get_device()")
            lines.append("    if dev < 0: return slow(args)")
        else:
            lines.append(f"    if {name}.get_device() != dev: return slow(args)")
        shape = f"{name}.shape"
        if all(isinstance(s, int) for s in p.shape):
            g[f"SH_{name}"] = torch.Size(p.shape)
            lines.append(f"    if {shape} != SH_{name}: return slow(args)")
        else:
            lines.append(f"    if len({shape}) != {len(p.shape)}: return slow(args)")
            for d, s in enumerate(p.shape):
                if isinstance(s, ir.Var) and s not in names:
                    names[s] = f"s_{len(names)}"
                    lines.append(f"    {names[s]} = {shape}[{d}]")
                else:
                    checks_after.append((f"{shape}[{d}]", s))
        if not all(isinstance(s, int) for s in p.shape):
            # offsets of int32-sized tensors must fit in 32 bits (the general path says so)
            lines.append(f"    if {name}.numel() > 2147483647: return slow(args)")
        if p.strides is None:
            lines.append(f"    if not {name}.is_contiguous(): return slow(args)")
        else:
            lines.append("    return slow(args)")  # strided views take the general path
    if first_tensor is None:
        return None
    for text, s in checks_after:
        lines.append(f"    if {text} != {py_expr(s, names)}: return slow(args)")
    # sizes of a build specialised on aligned sizes (transform/align_sizes.py): other sizes
    # take the general path, which runs the exact build
    for vq, (v, a) in getattr(adapter, "derived_symbols", {}).items():
        if v not in names:
            return None
        lines.append(f"    if {names[v]} % {a}: return slow(args)")
        names[vq] = f"({names[v]} // {a})"
    for v in module.symbols:
        if v not in names:
            return None
    for cond in plan.func.attrs.get("host_assumptions", ()):  # the general path raises
        try:
            lines.append(f"    if not {py_expr(cond, names)}: return slow(args)")
        except (NotImplementedError, KeyError):
            return None
    lines.append("    funcs = FUNCS.get(dev)")
    lines.append("    if funcs is None: return slow(args)")
    if plan.outputs or module.workspaces:
        lines.append("    device = DEVS[dev]")
    by_param = {p.index: n for p, n in zip(plan.inputs, arg_names) if p.kind != "scalar"}
    pointers = {}  # parameter index -> the name holding its data pointer, read once
    for i, nbytes in module.aligned:  # the general path says which and why
        if i in by_param:
            pointers[i] = f"ptr{i}"
            lines.append(f"    ptr{i} = {by_param[i]}.data_ptr()")
            lines.append(f"    if ptr{i} % {nbytes}: return slow(args)")
    for k_index, k in enumerate(module.kernels):
        if static_grid(k, names) is None:  # every grid checked before anything is launched
            lines.append(f"    grid{k_index} = "
                         f"({', '.join(py_expr(x, names) for x in k.grid)},)")
            past = " or ".join(f"not 0 < grid{k_index}[{a}] <= {lim}"
                               for a, lim in enumerate(ir.GRID_LIMITS[:len(k.grid)]))
            lines.append(f"    if {past}: return slow(args)  # which says why")
    outs = []
    for j, p in enumerate(plan.outputs):
        g[f"ODT{j}"] = p.dtype.torch
        dims = ", ".join(py_expr(s, names) for s in p.shape)
        lines.append(f"    o{j} = empty(({dims},), dtype=ODT{j}, device=device)")
        outs.append((p.index, f"o{j}"))
    for j, w in enumerate(module.workspaces):
        g[f"WDT{j}"] = w.dtype.torch
        dims = ", ".join(py_expr(s, names) for s in w.shape)
        lines.append(f"    w{j} = empty(({dims},), dtype=WDT{j}, device=device)")
    by_index = {p.index: n for p, n in zip(plan.inputs, arg_names)}
    by_index.update(dict(outs))
    values = []
    for i, p in enumerate(module.params):
        text = by_index[i]
        values.append(pointers.get(i, f"{text}.data_ptr()") if isinstance(p, ir.Buffer)
                      else text)
    values += [names[v] for v in module.symbols]
    values += [f"w{j}.data_ptr()" for j in range(len(module.workspaces))]
    for j, (d, (index, swizzle)) in enumerate(zip(module.tma, adapter.tma_sources)):
        over = module.params[index] if index >= 0 else module.workspaces[-1 - index]
        static = all(isinstance(x, int) for x in over.shape)
        g[f"TMA{j}"] = tma_encoder(d, swizzle, static)
        tensor = by_index[index] if index >= 0 else f"w{-1 - index}"
        lines.append(f"    t{j} = TMA{j}({tensor})")
        values.append(f"t{j}")
    lines.append("    s = raw_stream(dev)")
    if launch_ex is not None:  # one CUlaunchConfig per kernel and stream, built once
        g["configs_for"] = _launch_configs(module.kernels, names, driver)
        lines.append("    cfg = STREAMS.get(s)")
        lines.append("    if cfg is None: cfg = configs_for(STREAMS, s)")
        lines.append("    ptrs, structs = cfg")
    else:
        lines.append("    stream = STREAMS.get(s)")
        lines.append("    if stream is None: stream = stream_arg(STREAMS, s)")
    # one parameter block per signature: pack and launch must not interleave across threads
    lines.append("    lock.acquire()")
    lines.append("    try:")
    lines.append(f"        pack(({', '.join(values)}{',' if len(values) == 1 else ''}))")
    for k_index, k in enumerate(module.kernels):
        block = ", ".join(str(b) for b in k.block)

        def launch_line(grid_text, indent, per_call):
            out = []
            if launch_ex is not None:
                if per_call:  # the config holds the static grid; this one is written per call
                    out.append(f"{indent}set_grid(structs[{k_index}], 0, {grid_text})")
                call = f"launch_ex(ptrs[{k_index}], funcs[{k_index}], params, None)"
            else:
                call = (f"launch(funcs[{k_index}], {grid_text}, {block}, {k.smem_bytes}, "
                        "stream, params, None)")
            return out + [f"{indent}res = {call}",
                          f"{indent}if res and fail(res, {k_index}, dev): return slow(args)"]

        static = static_grid(k, names)
        if static is not None:  # decided here
            if all(x > 0 for x in static):
                lines += launch_line(", ".join(map(str, static)), " " * 8, False)
            continue
        lines.append(f"        gx, gy, gz = grid{k_index}")
        lines.append("        if gx > 0 and gy > 0 and gz > 0:")
        lines += launch_line("gx, gy, gz", " " * 12, True)
    lines.append("    finally:")
    lines.append("        lock.release()")
    if not outs:
        lines.append("    return None")
    elif len(outs) == 1:
        lines.append(f"    return {outs[0][1]}")
    else:
        lines.append(f"    return [{', '.join(o for _, o in outs)}]")
    source = "\n".join(lines) + "\n"
    namespace: dict = {}
    exec(compile(source, f"<tilelang fast call {adapter.func.name}>", "exec"), g, namespace)
    call = namespace["call"]
    call.source = source

    def register(dev: int):
        """Load the kernels on `dev` (the general path calls this once per device)."""
        funcs = [ctypes_handle(fn.prepare(dev, k.smem_bytes)[0])
                 for fn, k in zip(adapter.functions, module.kernels)]
        g["DEVS"][dev] = torch.device("cuda", dev)
        if adapter.sized_at_launch:
            g["SMS"][dev] = driver.sm_count(dev)
        g["FUNCS"][dev] = funcs

    call.register = register
    return call


def tma_encoder(d, swizzle: int, static: bool):
    """`encode(tensor)`: the CUtensorMap of descriptor `d` over `tensor`, remembered per
    tensor address, so that a call whose tensors sit where they sat before pays one dict
    lookup (encode_tma normalises its arguments, and re-views a tensor whose buffer is a view:
    tens of microseconds for a kernel with three maps). With `static` the call has checked the
    tensor's shape and contiguity already (or allocated it), so the address is the whole key;
    otherwise the shape and strides are part of it."""
    from .build import encode_tma

    cache: dict = {}

    def encode(tensor):
        key = tensor.data_ptr() if static else (tensor.data_ptr(), tensor.shape,
                                                 tensor.stride())
        hit = cache.get(key)
        if hit is None:
            if len(cache) >= 64:  # a program cycling through many buffers
                cache.clear()
            hit = cache[key] = encode_tma(d, tensor, swizzle)
        return hit

    return encode


def static_grid(kernel, names):
    """The grid of `kernel` as ints when it does not depend on the call's symbols, else None."""
    texts = [py_expr(x, names) for x in kernel.grid]
    if all(t.lstrip("-").isdigit() for t in texts):
        return tuple(int(t) for t in texts)
    return None


def _launch_configs(kernels, names, driver):
    """`configs_for(cache, stream)`: the CUlaunchConfig of every kernel on raw stream
    `stream` (static grids filled in; a grid computed per call is written by the call), kept
    in `cache` with pointers to them (cleared if a program cycles through many streams)."""
    import ctypes

    # a grid computed per call is written by the call; an empty static grid is never launched
    static = [tuple(max(x, 0) for x in static_grid(k, names) or (0, 0, 0)) for k in kernels]

    def configs_for(cache, stream):
        if len(cache) > 64:
            cache.clear()
        structs = tuple(driver.LaunchConfig(grid, tuple(k.block) + (1,) * (3 - len(k.block)),
                                            k.smem_bytes, stream, None, 0)
                        for k, grid in zip(kernels, static))
        ptrs = tuple(ctypes.c_void_p(ctypes.addressof(c)) for c in structs)
        cache[stream] = entry = (ptrs, structs)
        return entry

    return configs_for


def _failure_handler(adapter, driver):
    """What the fast call does when cuLaunchKernel fails: on a thread with no current CUDA
    context (a fresh Python thread whose first CUDA call is ours), bind the device's primary
    context and answer True so the call runs again through the general path; any other
    error raises with the launch described."""

    def fail(res, k_index, device) -> bool:
        if res == driver.CUDA_ERROR_INVALID_CONTEXT and driver.bind_if_unbound(device):
            return True
        adapter.launch_failed(res, k_index, device)
        return False

    return fail


def ctypes_handle(handle):
    """A CUfunction as cuLaunchKernel's untyped binding wants it (a c_void_p)."""
    import ctypes

    if isinstance(handle, ctypes.c_void_p):
        return handle
    return ctypes.c_void_p(int(handle))
