"""`tilelang.tools.cuda`: the reference's CUDA developer tools. Its `iket` (in-kernel event
tracing through the external IKET profiler) is not provided by this compiler; importing it
says so (see docs/compatibility.md)."""


def __getattr__(name):
    if name == "iket":
        raise ImportError("tilelang.tools.cuda.iket (in-kernel event tracing for the IKET "
                          "profiler) is not provided by this TileLang; see "
                          "docs/compatibility.md")
    raise AttributeError(f"module 'tilelang.tools.cuda' has no attribute {name!r}")
