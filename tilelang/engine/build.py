"""From a PrimFunc to runnable CUDA: lower every kernel, render the module, compile it with
NVRTC/nvcc (disk-cached) and wrap it in a `CUDAAdapter` the JITKernel calls."""

from __future__ import annotations

import math

import time

from ..errors import located, user_facing
from ..ir import nodes as ir
from ..ir.dtype import PACKED_INTS
from ..jit.diagnostics import jit_phase
from ..jit.target import Target
from ..transform.pass_config import PassConfigKey, config_flag


def kernels_of(func: ir.PrimFunc):
    """The T.Kernel launches of a function body, in order."""
    out = []

    def walk(s):
        if isinstance(s, ir.Kernel):
            out.append(s)
        elif isinstance(s, ir.Seq):
            for x in s.stmts:
                walk(x)
        elif isinstance(s, (ir.LetStmt, ir.Allocate)):
            walk(s.body)
        elif isinstance(s, ir.Evaluate) and isinstance(s.value, ir.Call) and \
                s.value.op == "comment":
            pass
        else:
            raise located(NotImplementedError)(
                f"statements outside `with T.Kernel(...)` are not supported on CUDA "
                f"({type(s).__name__}); move them into a kernel", s.loc)

    walk(func.body)
    if not out:
        raise located(ValueError)(f"{func.name} launches no kernel (no `with T.Kernel(...)`)",
                                  None)
    return out


@user_facing
def lower_cuda(func: ir.PrimFunc, target: Target, options: dict):
    from ..codegen.module import render_module
    from ..transform.inline_lets import inline_pure_lets
    from .pipeline import lower_kernel

    from ..jit.kernel import check_launch_limits

    check_launch_limits(func)
    configs = options.get("pass_configs", {})
    verbose = options.get("verbose", False)
    body = inline_pure_lets(func.body)
    func = func.with_body(body)
    lowered = [lower_kernel(func, k, i, target, configs, verbose)
               for i, k in enumerate(kernels_of(func))]
    return render_module(func, lowered, target.arch)


_PTR = "ptr"


def _param_type(p) -> str:
    if isinstance(p, ir.Buffer) or p.dtype.is_handle:
        return _PTR
    return p.dtype.name


class CUDAAdapter:
    """Compiled kernels of one PrimFunc and the host code that launches them."""

    def __init__(self, func: ir.PrimFunc, target: Target, options: dict):
        from ..runtime.launcher import CudaKernelFunction
        from . import program_cache

        t0 = time.perf_counter()
        self.func = func
        self.target = target
        from .callback import apply_postproc, get_postproc

        # a registered `register_cuda_postproc_callback` rewrites the code before it is
        # compiled (the cubin cache is keyed by the text compiled); its Python code is not in
        # the program cache's key, so programs built with one are not taken from there
        postproc = get_postproc("cuda") is not None
        # a program some process compiled before: no lowering, no NVRTC (program_cache.py)
        key, hit = (None, None) if postproc else program_cache.lookup(func, target, options)
        if hit is not None:
            self.module, self.compiled = hit
            self.source = self.module.source
            self.lower_seconds = 0.0
        else:
            from .. import runtime  # runtime.compile_cuda, the name tools replace (dump_cuda.py)

            verbose = options.get("verbose", False)
            with jit_phase("lower", verbose=verbose, kernel=func.name, target=str(target)):
                self.module = lower_cuda(func, target, options)
            self.source = apply_postproc("cuda", self.module.source, target)
            configs = options.get("pass_configs", {})
            self.lower_seconds = time.perf_counter() - t0
            fast = config_flag(configs, PassConfigKey.TL_ENABLE_FAST_MATH) and not config_flag(
                configs, PassConfigKey.TL_DISABLE_FAST_MATH)
            verbose_ptx = config_flag(configs, PassConfigKey.TL_ENABLE_PTXAS_VERBOSE_OUTPUT)
            with jit_phase("compile", verbose=verbose, kernel=func.name, target=str(target)):
                self.compiled = runtime.compile_cuda(
                    self.source, target.arch, options.get("compile_flags", ()), name=func.name,
                    fast_math=fast, verbose=verbose_ptx or verbose)
            if not postproc:
                program_cache.store(key, func, self.module, self.compiled)
        self.program_cache_hit = hit is not None
        if options.get("verbose"):
            print(f"[tilelang] {func.name}: lowered in {self.lower_seconds * 1e3:.1f} ms, "
                  f"{self.compiled.compiler} {'cache hit' if self.compiled.cache_hit else ''}"
                  f" {self.compiled.seconds * 1e3:.1f} ms")
        debug_root = options.get("debug_root_path")
        if debug_root:
            import os

            os.makedirs(debug_root, exist_ok=True)
            with open(os.path.join(debug_root, f"{func.name}.cu"), "w") as f:
                f.write(self.source)
        sig = self.module.params + self.module.symbols + self.module.workspaces
        types = [_param_type(p) for p in sig] + ["tensor_map"] * len(self.module.tma)
        self.param_types = types
        self.tma_sources = [self._tma_source(d) for d in self.module.tma]
        self.functions = [CudaKernelFunction(self.compiled.cubin, k.name, types,
                                             cooperative=k.cooperative)
                          for k in self.module.kernels]
        # the reference adapters' `kernels`: this adapter's own kernel handles by name
        self.kernels = {k.name: fn for k, fn in zip(self.module.kernels, self.functions)}
        self.sized_at_launch = any(k.sized_at_launch for k in self.module.kernels)

    # ---- calling --------------------------------------------------------------------------
    def run(self, full_args, symbols, device, stream=None):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError(f"{self.func.name} was compiled for {self.target.arch} but no "
                               "CUDA GPU is available to run it; use target='cpu' to run on "
                               "the interpreter")
        from ..jit.args import eval_shape_expr

        dev_index = device.index if device is not None and device.index is not None else \
            torch.cuda.current_device()
        args = []
        for p, a in zip(self.module.params, full_args):
            if isinstance(p, ir.Buffer):
                args.append(0 if a is None else a.data_ptr())  # None: a null pointer
            else:
                args.append(a)
        for i, nbytes in self.module.aligned:
            if args[i] % nbytes:
                raise ValueError(
                    f"{self.func.name}: parameter {self.module.params[i].name!r} starts at "
                    f"address {args[i]:#x}, which is not {nbytes}-byte aligned, but the kernel "
                    f"accesses it {nbytes} bytes at a time (a view at an element offset? pass "
                    "a tensor of its own, e.g. .clone())")
        for v in self.module.symbols:
            args.append(symbols[v])
        workspaces = []
        for j, w in enumerate(self.module.workspaces):
            shape = tuple(eval_shape_expr(s, symbols) for s in w.shape)
            alloc = torch.zeros if j in self.module.zeroed else torch.empty
            t = alloc(shape, dtype=w.dtype.torch, device=device)
            workspaces.append(t)
            args.append(t.data_ptr())
        for d, (index, swizzle) in zip(self.module.tma, self.tma_sources):
            tensor = full_args[index] if index >= 0 else workspaces[-1 - index]
            if tensor is None:
                raise ValueError(f"kernel {self.func.name}: parameter "
                                 f"{self.module.params[index].name!r} was passed as None, but "
                                 "the kernel copies it with TMA")
            args.append(encode_tma(d, tensor, swizzle))
        if self.sized_at_launch:
            from ..runtime import driver

            symbols = {**symbols, ir.DEVICE_SM_COUNT: driver.sm_count(dev_index)}
        grids = [tuple(eval_shape_expr(g, symbols) if not isinstance(g, int) else g
                       for g in k.grid) for k in self.module.kernels]
        for k, grid in zip(self.module.kernels, grids):  # all checked before any launch
            problem = ir.launch_limit_problem(grid)
            if problem:
                raise ValueError(f"{self.func.name}: cannot launch {k.name}: its {problem} "
                                 f"for the sizes of this call ({_sizes(symbols)})")
        for fn, k, grid in zip(self.functions, self.module.kernels, grids):
            fn.launch(grid, k.block, k.smem_bytes, stream, args, dev_index)

    def _tma_source(self, d):
        """(tensor, TMA swizzle enum) of a descriptor: the tensor is parameter `i` for i >= 0,
        workspace `-1 - i` (a `T.alloc_global` buffer, allocated per call) for i < 0."""
        swizzle = {0: 0, 32: 1, 64: 2, 128: 3}[d.swizzle]
        for i, p in enumerate(self.module.params):
            if p is d.buffer or p is d.buffer.view_of:  # a view T.Tensor(.., X.data) is X's
                return i, swizzle
        for j, w in enumerate(self.module.workspaces):
            if w is d.buffer or w is d.buffer.view_of:
                return -1 - j, swizzle
        raise ValueError(f"TMA descriptor {d.name} is over neither a parameter nor a "
                         f"T.alloc_global workspace")

    def make_fast_call(self, plan, slow):
        from .host import make_fast_call

        try:
            return make_fast_call(self, plan, slow)
        except NotImplementedError:
            return None

    def launch_failed(self, res, k_index, device):
        fn, k = self.functions[k_index], self.module.kernels[k_index]
        # the fast path launches only non-empty grids within the limits: any failure is real
        fn._launch_failed(res, None, k.block, k.smem_bytes, device)

    # ---- introspection ------------------------------------------------------------------------
    @property
    def n_regs(self):
        return [fn.num_regs() for fn in self.functions] if len(self.functions) > 1 else \
            self.functions[0].num_regs()

    @property
    def n_spills(self):
        vals = [fn.local_bytes() for fn in self.functions]
        return vals if len(vals) > 1 else vals[0]

    @property
    def host_source(self) -> str:
        """The launches described (JITKernel.get_host_source); written when asked for."""
        lines = [f"# host side of {self.func.name} ({self.target.arch})"]
        for k in self.module.kernels:
            lines.append(f"# launch {k.name}<<<{list(k.grid)}, {list(k.block)}, "
                         f"{k.smem_bytes} B>>>" + (" cooperative" if k.cooperative else ""))
            for note in k.notes:
                lines.append(f"#   {note}")
        return "\n".join(lines) + "\n"


def _sizes(symbols) -> str:
    return ", ".join(f"{getattr(v, 'name', v)} = {x}" for v, x in symbols.items()) or "static"


def encode_tma(d, tensor, swizzle: int) -> bytes:
    """The CUtensorMap of descriptor `d` over `tensor` (cached by address, shape, strides)."""
    from ..runtime.tensor_map import encode_im2col_nhwc, encode_tiled_rowmajor

    if d.im2col is not None:
        lower, upper, channels, pixels, stride = d.im2col
        return encode_im2col_nhwc(d.buffer.dtype.name, tensor.data_ptr(), tuple(tensor.shape),
                                  tuple(tensor.stride()), lower, upper, channels, pixels,
                                  conv_stride=stride, swizzle=swizzle)
    root = d.buffer.view_of
    if root is not None and root.dtype.base in PACKED_INTS:
        # the bytes of packed 4-bit values (transform/pack_sub_byte.py): the argument is that
        # byte tensor already, of the view's shape and strides
        tensor = tensor.view(d.buffer.dtype.torch)
    elif root is not None:  # the tensor re-viewed at the view's (static) shape
        shape = tuple(int(s) for s in d.buffer.shape)
        flat = tensor.reshape(-1)
        if d.buffer.dtype.torch != tensor.dtype:  # the bytes read as the view's dtype
            flat = flat.view(d.buffer.dtype.torch)
        tensor = flat[:math.prod(shape)].view(shape)
    return encode_tiled_rowmajor(d.buffer.dtype.name, tensor.data_ptr(), tuple(tensor.shape),
                                 tuple(tensor.stride()), d.box, swizzle=swizzle)


class AlignedCUDAAdapter:
    """A function with dynamic sizes, compiled for the calls whose row-stride sizes are
    multiples of 16 bytes (transform/align_sizes.py: TMA and 16-byte vectors become provable)
    and, on the first call that is not, as written. Presents the aligned build (its source,
    registers, fast call) and routes each call by the sizes it binds."""

    def __init__(self, func: ir.PrimFunc, target: Target, options: dict, alignment: dict):
        from ..transform.align_sizes import align_sizes

        self.func, self.target, self.options = func, target, options
        self.alignment = alignment
        aligned_func, derived = align_sizes(func, alignment)
        self.aligned = CUDAAdapter(aligned_func, target, options)
        self.aligned.derived_symbols = derived
        self._exact = None

    @property
    def exact(self) -> CUDAAdapter:
        """The function as written, for sizes that are not multiples (built on first use)."""
        if self._exact is None:
            self._exact = CUDAAdapter(self.func, self.target, self.options)
        return self._exact

    def __getattr__(self, name):  # source, module, n_regs, ... of the aligned build
        if name in ("aligned", "func"):
            raise AttributeError(name)
        return getattr(self.aligned, name)

    def fits(self, symbols) -> bool:
        return all(symbols[v] % a == 0 for v, a in self.alignment.items())

    def run(self, full_args, symbols, device, stream=None):
        if not self.fits(symbols):
            return self.exact.run(full_args, symbols, device, stream)
        ext = dict(symbols)
        for vq, (v, a) in self.aligned.derived_symbols.items():
            ext[vq] = symbols[v] // a
        return self.aligned.run(full_args, ext, device, stream)

    def make_fast_call(self, plan, slow):
        # the fast path checks the alignment and leaves other calls to `slow` (-> run)
        return self.aligned.make_fast_call(plan, slow)


def build_cuda(func: ir.PrimFunc, target: Target, options: dict):
    from ..transform.align_sizes import alignment_of_sizes

    configs = options.get("pass_configs", {})
    cap = configs.get(PassConfigKey.TL_DYNAMIC_ALIGNMENT.value)
    alignment = alignment_of_sizes(func)
    if cap is not None:  # the reference's knob: the alignment assumed, in elements (1: none)
        alignment = {v: min(a, int(cap)) for v, a in alignment.items() if min(a, int(cap)) > 1}
    if alignment:
        return AlignedCUDAAdapter(func, target, options, alignment)
    return CUDAAdapter(func, target, options)
