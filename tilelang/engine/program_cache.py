"""Disk cache of whole compiled programs: a process that compiles a program some earlier process
already compiled skips lowering and NVRTC, loading the CUDA source, the launch description and
the cubin (the warm path of issue 23: milliseconds instead of the whole pipeline).

Expects: a traced `PrimFunc`, the concrete CUDA `Target` and the `JITKernel` options.
Guarantees:
  * `lookup` returns None whenever the cache cannot answer exactly: caching off, options that
    print or dump while compiling (verbose, TL_ENABLE_DUMP_IR / TILELANG_DUMP_IR, ptxas
    verbose output), a program that cannot be keyed (it holds Python functions or classes
    from outside tilelang, whose edits the key could not see), no entry, a damaged entry, or
    a compiler or CUDA header file that changed since the entry was written;
  * the key changes with the traced program (`fingerprint`: every node, name, dtype, shape,
    attribute and source line, and which objects are the same object), the target
    architecture, the pass configs and compile flags, the compiler the user asked for
    (TILELANG_CUDA_COMPILER), the CUDA include directory, the package version, the
    TL_EXPERIMENT switches and a stamp of tilelang's own files (cache.package_stamp: an
    edited compiler misses). A compiler changed in memory (a monkeypatched pass) is not
    seen: disable the cache around such changes;
  * a hit gives the very module and cubin the miss produced: the entry stores the generated
    source, each kernel's launch description and TMA descriptors with the program's own
    objects (parameters, workspaces, symbolic sizes) named by position, and the key of the
    cubin entry (verified by its sha256 when read);
  * `store` writes nothing when the launch description refers to a variable that is not the
    program's (it could not be rebuilt against another trace of the program).
"""

from __future__ import annotations

import hashlib
import io
import pickle
import time
import types

from ..errors import SourceLoc
from ..ir import nodes as ir
from ..ir.dtype import DType

_PROTOCOL = 5
# Python objects a traced program may hold by reference (pickled by name): tilelang's own,
# covered by the package stamp, and the standard reconstructors of builtin and numpy values.
_TRUSTED_MODULES = ("tilelang", "builtins", "copyreg", "numpy", "_codecs", "collections",
                    "enum", "fractions", "decimal")


class _Unkeyable(Exception):
    pass


_ATOMS = (str, int, float, bool, bytes, complex, type(None))


def fingerprint(obj, h) -> None:
    """Feed a canonical serialisation of `obj` (a traced program) into the hash `h`.

    Canonical: two traces of the same program give the same bytes in any process, whatever
    Python object sharing they happen to have (pickle's bytes depend on it), but the identity
    of objects is kept: an object met again is written as a back reference, so one symbol `n`
    used twice differs from two symbols both named `n`. A function of tilelang's (a layout's
    index function) is written as its name (its code is in the package stamp) with its
    defaults and closure values. Raises _Unkeyable for what has no canonical form here:
    functions, classes and objects from outside tilelang (their code could change unseen) and
    sets of objects."""
    out: list = []
    _fp(obj, out, {})
    h.update("\x1f".join(out).encode("utf-8", "surrogatepass"))


def _fp(obj, out, seen):
    cls = obj.__class__
    if cls in _ATOMS:
        out.append(f"{cls.__name__}:{obj!r}")
        return
    if cls is tuple or cls is list:
        out.append(f"{cls.__name__}{len(obj)}")
        for x in obj:
            _fp(x, out, seen)
        return
    if cls is DType:
        out.append("dt:" + obj.name)
        return
    ref = seen.get(id(obj))
    if ref is not None:
        out.append(f"@{ref[0]}")
        return
    seen[id(obj)] = (len(seen), obj)  # holds obj: ids stay unique during the walk
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _plan(cls)
    kind, header, names = plan
    if kind is _OBJECT:
        out.append(header)
        for name in names:
            out.append(name)
            _fp(getattr(obj, name, None), out, seen)
        d = getattr(obj, "__dict__", None)
        if d:
            for name, value in sorted(d.items()):
                out.append(name)
                _fp(value, out, seen)
    elif kind is _DICT:
        out.append(f"dict{len(obj)}")
        for k, v in obj.items():
            _fp(k, out, seen)
            _fp(v, out, seen)
    elif kind is _SET:
        items = []
        for x in obj:
            if x.__class__ not in _ATOMS and x.__class__ is not DType:
                raise _Unkeyable("a set of objects")
            items.append(f"{x.__class__.__name__}:{x!r}")
        out.append(f"{cls.__name__}{len(items)}:" + "\x1e".join(sorted(items)))
    elif kind is _METHOD:  # a bound method: its function and its object
        out.append("method")
        _fp(obj.__func__, out, seen)
        _fp(obj.__self__, out, seen)
    elif kind is _GLOBAL:  # a class, function or module, named
        module = getattr(obj, "__module__", None) or getattr(obj, "__name__", "")
        if str(module).split(".")[0] not in _TRUSTED_MODULES:
            raise _Unkeyable(f"{obj!r} from {module}")
        out.append(f"g:{module}.{getattr(obj, '__qualname__', obj)}")
        if cls is types.FunctionType:  # its code is in the package stamp; its values are not
            try:
                cells = tuple(c.cell_contents for c in obj.__closure__ or ())
            except ValueError:  # an empty cell
                raise _Unkeyable(f"{obj!r} has an unbound closure variable") from None
            _fp((obj.__defaults__, obj.__kwdefaults__, cells), out, seen)
    elif kind is _LOCATION:
        # file and line: columns only place an error's caret, and reading them costs the
        # tracer's locations their laziness. (Not the instruction either: Python 3.12
        # reports a call's as one of two offsets once the call is specialised.)
        out.append(f"loc:{obj.filename}:{obj.lineno}")
    elif kind is _NUMPY:
        out.append(header)
        out.append(f"{obj.dtype}{obj.shape}{obj.tobytes()!r}" if hasattr(obj, "tobytes")
                   else repr(obj))
    else:
        raise _Unkeyable(header)


# How `_fp` writes an object of a class, decided once per class: (kind, header, field names).
_OBJECT, _DICT, _SET, _METHOD, _GLOBAL, _NUMPY, _LOCATION, _FOREIGN = range(8)
_PLANS: dict = {}


def _plan(cls):
    if cls is dict:
        return _DICT, "", ()
    if cls is set or cls is frozenset:
        return _SET, "", ()
    if cls is types.MethodType:
        return _METHOD, "", ()
    if cls is SourceLoc:
        return _LOCATION, "", ()
    if issubclass(cls, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
        return _GLOBAL, "", ()
    module = cls.__module__
    header = f"o:{module}.{cls.__qualname__}"
    if module.split(".")[0] not in _TRUSTED_MODULES:
        return _FOREIGN, f"an object of {module}.{cls.__qualname__}", ()
    if module.startswith("numpy"):
        return _NUMPY, header, ()
    names = []  # the slots of its classes, then (per object) its instance dict sorted by name
    for c in cls.__mro__:
        slots = getattr(c, "__slots__", ())
        for n in (slots,) if isinstance(slots, str) else slots:
            if n not in ("__weakref__", "__dict__") and n not in names:
                names.append(n)
    return _OBJECT, header, tuple(names)


def _bypass(options: dict) -> bool:
    from ..env import env
    from ..transform.pass_config import PassConfigKey, config_flag

    configs = options.get("pass_configs", {})
    return (not env.cache_enabled or options.get("verbose") or env.dump_ir
            or config_flag(configs, PassConfigKey.TL_ENABLE_DUMP_IR)
            or config_flag(configs, PassConfigKey.TL_ENABLE_PTXAS_VERBOSE_OUTPUT))


def program_key(func: ir.PrimFunc, target, options: dict):
    """The key of `func` compiled for `target` with `options`, or None (see module doc)."""
    from .. import __version__
    from ..env import env
    from ..runtime import cache, toolkit

    h = hashlib.sha256()
    try:
        fingerprint(func, h)
        configs = sorted((str(k), repr(v)) for k, v in options.get("pass_configs", {}).items())
    except (_Unkeyable, RecursionError):
        return None
    h.update(repr((str(target.arch), configs, list(options.get("compile_flags", ())),
                   toolkit.requested_compiler(), toolkit.include_dirs()[1:],
                   __version__, cache.package_stamp(), sorted(env.experiments))).encode())
    return h.hexdigest()


_ENTRY_FIELDS = {"source", "kernels", "tma", "arch", "cubin_key", "compiler", "ident", "options",
                 "compiler_files", "zeroed", "aligned"}
_DEVICE_SM_COUNT = "device_sm_count"  # the one object of tilelang's a grid may name


def _own_objects(func: ir.PrimFunc, symbols) -> list:
    """The objects of `func` an entry refers to by position: parameters, workspaces, symbols."""
    return list(func.params) + list(func.workspaces) + list(symbols)


class _EntryPickler(pickle.Pickler):
    def __init__(self, file, own):
        super().__init__(file, protocol=_PROTOCOL)
        self.positions = {id(o): i for i, o in enumerate(own)}

    def persistent_id(self, obj):
        if obj is ir.DEVICE_SM_COUNT:
            return _DEVICE_SM_COUNT
        if isinstance(obj, (ir.Var, ir.Buffer)):
            return self.positions.get(id(obj))
        return None


class _EntryUnpickler(pickle.Unpickler):
    def __init__(self, file, own):
        super().__init__(file)
        self.own = own

    def persistent_load(self, pid):
        return ir.DEVICE_SM_COUNT if pid == _DEVICE_SM_COUNT else self.own[pid]


def lookup(func: ir.PrimFunc, target, options: dict):
    """(key, hit): `hit` is (CudaModuleSource, CompileResult) or None; `key` (None: do not
    store) is what `store` takes after a miss."""
    if _bypass(options):
        return None, None
    t0 = time.perf_counter()
    key = program_key(func, target, options)
    if key is None:
        return None, None
    from ..runtime import cache, toolkit

    payload = cache.load_blob(key, "prog")
    if payload is None:
        return key, None
    from ..codegen.launch import CudaModuleSource, signature_params

    params, symbols, workspaces = signature_params(func)
    try:
        entry = _EntryUnpickler(io.BytesIO(payload), _own_objects(func, symbols)).load()
    except Exception:  # noqa: BLE001 - a damaged or foreign entry is a miss
        return key, None
    if not isinstance(entry, dict) or not _ENTRY_FIELDS <= entry.keys():
        return key, None  # written by another version of this module
    if toolkit.file_stamps([p for p, _, _ in entry["compiler_files"]]) != \
            entry["compiler_files"]:
        return key, None  # the compiler or the CUDA headers changed
    hit = cache.load(entry["cubin_key"])
    if hit is None:
        return key, None
    module = CudaModuleSource(entry["source"], entry["kernels"], params, symbols, workspaces,
                              entry["arch"], entry["tma"], entry["zeroed"], entry["aligned"])
    compiled = cache.CompileResult(hit["cubin"], hit["log"], entry["compiler"], True,
                             time.perf_counter() - t0, entry["arch"], tuple(entry["options"]),
                             entry["cubin_key"], entry["ident"])
    return key, (module, compiled)


def store(key: str, func: ir.PrimFunc, module, compiled) -> bool:
    """Record `module` and `compiled` (a fresh or cubin-cache compile of `func`) under `key`."""
    from ..ir.visitor import collect
    from ..runtime import cache, toolkit

    if key is None or not compiled.key:
        return False
    own = _own_objects(func, module.symbols)
    known = {id(o) for o in own} | {id(ir.DEVICE_SM_COUNT)}
    for k in module.kernels:
        for g in k.grid:
            if any(id(v) not in known for v in collect(g, lambda n: isinstance(n, ir.Var))):
                return False
    which = compiled.compiler
    backend = toolkit.nvrtc_backend() if which == "nvrtc" else None
    files = toolkit.compiler_files(which, backend)
    if files is None:
        return False
    entry = {"source": module.source, "kernels": module.kernels, "tma": module.tma,
             "arch": module.arch, "cubin_key": compiled.key, "compiler": which,
             "ident": compiled.compiler_version, "options": list(compiled.options),
             "compiler_files": toolkit.file_stamps(files), "zeroed": tuple(module.zeroed),
             "aligned": tuple(module.aligned)}
    buf = io.BytesIO()
    try:
        _EntryPickler(buf, own).dump(entry)
    except (pickle.PicklingError, TypeError, AttributeError):
        return False
    return cache.store_blob(key, "prog", buf.getvalue()) is not None
