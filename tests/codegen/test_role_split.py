"""The CUDA printer writes the condition of a top-level split of the block into thread groups
(warp specialisation: producer / consumers) on lane 0's thread index, so that ptxas knows each
role runs warp-converged; every other branch keeps its condition as the IR has it."""

import pytest

from tilelang.codegen.cuda import CudaPrinter
from tilelang.ir import nodes as ir

TX = ir.Var("tx")
LANE0 = "__shfl_sync(0xffffffffu, tx, 0, 32)"


def _split(cond, roles=("producer", "consumer")):
    then, other = (ir.Attr("thread_group", (r, 128), ir.Seq(())) for r in roles)
    return ir.If(cond, then, other)


def _first_line(stmt, block_thread=TX, indent=1):
    p = CudaPrinter()
    p.block_thread, p.indent = block_thread, indent
    p.var_names[TX] = "tx"
    p.stmt(stmt)
    return p.lines[0].strip()


@pytest.mark.parametrize("op,c,text", [("gt", 127, "> 127"), ("ge", 256, ">= 256"),
                                       ("lt", 128, "< 128"), ("le", 95, "<= 95")])
def test_warp_aligned_role_split_reads_lane_zero(op, c, text):
    assert _first_line(_split(ir.Compare(op, TX, ir.const(c)))) == f"if ({LANE0} {text}) {{"


@pytest.mark.parametrize("stmt,kw", [
    (_split(ir.Compare("gt", TX, ir.const(100))), {}),            # mid-warp boundary
    (_split(ir.Compare("eq", TX, ir.const(128))), {}),            # one thread
    (ir.If(ir.Compare("gt", TX, ir.const(127)), ir.Seq(()), None), {}),  # not a role split
    (_split(ir.Compare("gt", TX, ir.const(127))), {"indent": 2}),  # nested: lanes may differ
    (_split(ir.Compare("gt", TX, ir.const(127))), {"block_thread": None}),  # 2-D block
])
def test_other_branches_keep_their_condition(stmt, kw):
    line = _first_line(stmt, **kw)
    assert "__shfl_sync" not in line and line.startswith("if (tx ")
