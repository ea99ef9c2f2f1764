"""What the IR borrows from the layers above it, which it does not import (ir/ is the bottom
layer: tests/test_import_graph.py fails on an import of tilelang.language, frontend, interp
or arith from here). The module that defines each one installs it when `tilelang` is
imported (tilelang/__init__.py imports them all):

- `getitem(buffer, key)`, `setitem(buffer, key, value)`: buffer indexing in kernel code
  (`A[i, j]`, `A[i:i + 4]`, `A[i, j] = v`) builds loads, regions and stores as the kernel
  language defines it (language/indexing.py);
- `access_ptr(buffer, mode, offset=, extent=)`: `A.access_ptr(...)` (language/misc.py);
- `error(exc_type, message)`: an error located at the user's line being traced
  (frontend/builder.py; before that, an error without a location);
- `simplify(expr)`: the printer shows the end of a loop range simplified (arith);
- `vector(lanes)`: a vector value of one expression per lane, what `T.float16x2(a, b)` builds
  (language/vectors.py).
"""

from __future__ import annotations

from ..errors import located

getitem = None
setitem = None
access_ptr = None
simplify = None
vector = None


def error(exc_type, message):
    return located(exc_type)(message, None)
