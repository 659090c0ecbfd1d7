"""Register words are packed and unpacked by their field tables (``hwsim.isa``), not by hand.

An AST scan of the modules that build or read register words (HMX's USR and bias sets, the
NE16 job registers): a shift, or an AND/OR with a constant, fails unless it is listed here with
the reason it is not a register field.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# module -> the expressions in it that are not register fields
REGISTER_MODULES = {
    "hwsim/targets/hmx/machine.py": (),
    "hwsim/targets/hmx/state.py": (),
    "hwsim/targets/hmx/semantics.py": (),
    "hwsim/targets/hmx/datapath.py": ("cvt[s, c] >> 4",),   # a convert cell: FP16 << 4 | extra
    "hwsim/schedule/hmx/lower.py": ("64 << 10",),           # a size in bytes
    "hwsim/schedule/hmx/program.py": (
        # the spatial mask's bits (Table 8) spread over a crouton's rows: a geometry, not a word
        "mask >> bit & 1", "mask >> bit", "(y >> taken & 1) << bit", "y >> taken & 1", "y >> taken",
        "1 << ybits", "((1 << ybits) - 1) << (5 - ybits)", "(1 << ybits) - 1",
        "value |= (y >> taken & 1) << bit"),
    "hwsim/targets/gap9/ne16/driver.py": (),
    "hwsim/targets/gap9/ne16/job.py": ("value >> 31", "1 << 32"),   # int32 of a 32-bit word
}
BIT_OPS = (ast.LShift, ast.RShift, ast.BitAnd, ast.BitOr)


def bit_twiddling(source: str) -> list[str]:
    """The shifts, and the ANDs and ORs with an integer constant, of ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, BIT_OPS):
            operands = (node.left, node.right) if isinstance(node, ast.BinOp) else (
                node.target, node.value)
            if isinstance(node.op, (ast.LShift, ast.RShift)) or any(
                    isinstance(o, ast.Constant) and isinstance(o.value, int) for o in operands):
                found.append(ast.get_source_segment(source, node))
    return found


def test_the_scan_finds_a_field_read_by_hand():
    assert bit_twiddling("infnan = state.usr >> 20 & 1\nword = (hi << 16) | lo\nx = a + b\n") \
        == ["state.usr >> 20 & 1", "state.usr >> 20", "hi << 16"]


@pytest.mark.parametrize("module", sorted(REGISTER_MODULES))
def test_register_fields_go_through_the_codec(module):
    found = bit_twiddling((ROOT / module).read_text())
    assert [s for s in found if s not in REGISTER_MODULES[module]] == []
