"""The loops around a T.Pipelined loop inside a persistent kernel's tile loop (sm_90a).

warp_specialize/__init__.py gives such a loop a TMA producer when it sits under serial loops and
branches on block-uniform values only (`levels_to` finds that path, `depends_on` tells a
value that reads a block or thread index through lets). Producer and consumers then both run
the nest (`TileNest.wrap`): the producer with the lets it can compute from parameters alone,
the consumers with everything. Ring positions count the iterations of the pipelined loop run
in earlier tiles (`pipe_done`) and, for a tile's own loads, the tiles run (`tiles_done`), so
every tile, whatever its trip count, waits on the mbarrier phase its data arrives on;
`slot_and_phase` turns a position into a ring slot and parity.
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import collect
from ..analysis.buffer_use import buffers_read
from ..analysis.loop_items import flatten, rebuild
from ..analysis.uniform import depends_on


class TileNest:
    """The serial loops and block-uniform branches between the kernel's top level and a
    T.Pipelined loop inside them (a persistent kernel's tile loop). Producer and consumers both
    run the nest, the producer with only the lets it can compute from parameters; the ring
    position of an iteration counts every iteration of the pipelined loop run before it
    (`pipe_done`, a per-thread counter advanced after each run of the loop), so that the
    mbarrier phases stay in step from one tile to the next."""

    def __init__(self, levels, ctx):
        self.levels = levels  # [(items, index)], top level first; the last indexes the loop
        self.done = ir.Buffer("pipe_done", (1,), ir.DType("int32"), "local.var")
        self.tiles = ir.Buffer("tiles_done", (1,), ir.DType("int32"), "local.var")
        self.counts_tiles = False  # whether tile loads use `tiles`
        self.counted_in_loop = False  # whether the loop advances `done` itself (a guard)
        params = {b for b in ctx.func.params if isinstance(b, ir.Buffer)}
        self.lets = {it.var: it for items, _ in levels for it in items if isinstance(it, tuple)}
        self.computable = set()
        for items, i in levels:
            for it in items[:i]:
                if isinstance(it, tuple) and not (buffers_read(it.value) - params) and \
                        self._known(it.value):
                    self.computable.add(it.var)

    def _known(self, expr) -> bool:
        return all(v in self.computable for v in collect(expr, lambda n: isinstance(n, ir.Var))
                   if v in self.lets)

    def producer_can_compute(self, exprs) -> bool:
        return all(self._known(ir.as_expr(e)) for e in exprs)

    def position(self, rel):
        return ir.binary("add", rel, _value(self.done))

    def tile_ring_position(self, depth):
        """(slot, parity) of this tile on a ring of `depth` buffers loaded once per tile."""
        self.counts_tiles = True
        return slot_and_phase(_value(self.tiles), depth, counted=True)

    def describe(self) -> str:
        return ", ".join(f"for {its[i].var.name}" if isinstance(its[i], ir.For) else "if"
                         for its, i in self.levels[:-1])

    def wrap(self, producer, consumer, n, replace):
        """(producer, consumer): each list of statements (the loop and what the tile loads
        add around it) inside its own copy of the nest; the consumers' statements whose id
        is in `replace` become its value (None: removed)."""
        advance = [] if self.counted_in_loop else [ir.Store(
            self.done, (ir.const(0),),
            ir.binary("add", _value(self.done), ir.binary("max", n, ir.const(0))))]
        if self.counts_tiles:
            advance.append(ir.Store(self.tiles, (ir.const(0),),
                                    ir.binary("add", _value(self.tiles), 1)))
        p, c = producer + advance, consumer + advance
        for level in range(len(self.levels) - 1, -1, -1):
            items, i = self.levels[level]
            if level < len(self.levels) - 1:
                p, c = [_with_body(items[i], p)], [_with_body(items[i], c)]
            if level == 0:
                break
            lets = [it for it in items[:i] if isinstance(it, tuple) and it.var in self.computable]
            p = rebuild(lets + p)
            mine = [replace.get(id(it), it) if not isinstance(it, tuple) else it
                    for it in items[:i]]
            c = rebuild([it for it in mine if it is not None] + c + items[i + 1:])
        zero = ir.const(0, "int32")
        p, c = ir.Allocate(self.done, p[0], zero), ir.Allocate(self.done, c[0], zero)
        if self.counts_tiles:
            p, c = ir.Allocate(self.tiles, p, zero), ir.Allocate(self.tiles, c, zero)
        return p, c


def _value(counter):
    """The value of a per-thread counter (a local.var)."""
    return ir.Load(counter, (ir.const(0),), counter.dtype)


def slot_and_phase(position, S, counted):
    """(slot, mbarrier parity) of ring position `position` on a ring of S. A position counted
    across tiles (`pipe_done`, `tiles_done`) is not provably non-negative, so it is taken as
    unsigned: `%` and `/` by S are then a mask and a shift instead of Python's floor rounding
    (a dozen instructions an iteration; a persistent FlashAttention measured 1-2% slower
    than one block per tile with them)."""
    if counted:
        u = ir.Cast(position, ir.DType("uint32"))
        return (ir.Cast(ir.binary("floormod", u, S), ir.DType("int32")),
                ir.Cast(ir.binary("floormod", ir.binary("floordiv", u, S), 2),
                        ir.DType("int32")))
    return ir.binary("floormod", position, S), \
        ir.binary("floormod", ir.binary("floordiv", position, S), 2)


def _with_body(node, body):
    return ir.with_fields(node, body=body) if isinstance(node, ir.For) else \
        ir.with_fields(node, then_body=body)


def levels_to(items, loop, thread_vars):
    """[(items, index)] from the kernel's top level down to `loop` through serial loops and
    branches without an else on block-uniform values, or None."""
    levels = []
    while True:
        at = [i for i, it in enumerate(items) if not isinstance(it, tuple)
              and (it is loop or collect(it, lambda n: n is loop))]
        if len(at) != 1:
            return None
        node = items[at[0]]
        levels.append((items, at[0]))
        if node is loop:
            return levels
        if isinstance(node, ir.For) and node.kind == "serial" and node.step == 1 and \
                _uniform((node.start, node.extent), levels, thread_vars):
            items = flatten(node.body)
        elif isinstance(node, ir.If) and node.else_body is None and \
                _uniform((node.cond,), levels, thread_vars):
            items = flatten(node.then_body)
        else:
            return None


def _uniform(exprs, levels, thread_vars) -> bool:
    """No thread index in `exprs`, directly or through the lets of `levels`."""
    values = {it.var: it.value for items, _ in levels for it in items if isinstance(it, tuple)}
    return not depends_on(exprs, thread_vars, values)
