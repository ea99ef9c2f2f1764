"""The compiler's passes (one per module, or per package for a pass with parts of its own;
engine/pipeline.py lists them in order; what they share is in transform/analysis/, and no
pass imports another), plus the reference's public names of this package: `PassConfigKey`
(keys of `pass_configs`) and the `simplify_prim_func` decorator."""

from .pass_config import PassConfigKey, PassContext  # noqa: F401


def simplify_prim_func(func):
    """Decorate a function that returns a PrimFunc (the reference simplifies the result's
    index arithmetic). Here every index is simplified while lowering (the `simplify` step of
    engine/pipeline.py), so the decorated function returns its PrimFunc as it built it; the
    decorator checks that it is one."""
    import functools

    from ..ir.nodes import PrimFunc

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        out = func(*args, **kwargs)
        if not isinstance(out, PrimFunc):
            raise TypeError(f"@simplify_prim_func: {func.__qualname__} returned "
                            f"{type(out).__name__}, not a PrimFunc (@T.prim_func)")
        return out
    return wrapper


__all__ = ["PassConfigKey", "PassContext", "simplify_prim_func"]
