"""The shared trace reader."""

import pytest

from hwsim.errors import TraceSyntaxError
from hwsim.traces.reader import parse_trace, read_trace, strip_comment


def test_comments_keep_a64_immediates():
    assert strip_comment("mov x0, #0x1000  # set base") == "mov x0, #0x1000  "
    assert strip_comment("# whole line").strip() == ""
    assert strip_comment("add x1, x1, #4 // step") == "add x1, x1, #4 "
    assert strip_comment("#") == ""


def test_directives_by_phase_and_locations():
    t = parse_trace(".target hmx\n.param clock_hz 1e9\n.fill vtcm 0 16 0xff\n\n"
                    "Q6_mxclracc_hf()\n.store vtcm 0 16 out.bin\n", "t.trace")
    assert t.target.text == "hmx"
    assert [d.name for d in t.setup] == [".fill"]
    assert [d.name for d in t.after] == [".store"]
    assert t.lines == [("Q6_mxclracc_hf()", t.lines[0][1])]
    assert str(t.lines[0][1]) == "t.trace:5:1"


def test_errors_carry_file_line_column():
    with pytest.raises(TraceSyntaxError, match=r"t:1:1: .load takes 3 arguments"):
        parse_trace(".load vtcm 0", "t")
    with pytest.raises(TraceSyntaxError, match=r"t:2:1: .fill must come before"):
        parse_trace("insn\n.fill vtcm 0 1 1\n", "t")
    with pytest.raises(TraceSyntaxError, match="contradicts"):
        parse_trace(".target a\n.target b\n", "t")


def test_machine_directives_pass_through():
    t = parse_trace(".inst 0x80800000\n", "t")
    assert t.lines[0][0] == ".inst 0x80800000"


def test_one_line_program_ending_like_a_file_name_is_a_program():
    trace = read_trace("ptrue p0.s")
    assert [text for text, _ in trace.lines] == ["ptrue p0.s"]
    with pytest.raises(TraceSyntaxError, match="no such trace file"):
        read_trace("missing.s")
