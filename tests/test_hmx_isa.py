"""HMX register words, the intrinsic-call syntax and the program rules."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hwsim.errors import EncodingError, Location, ProgramError, TraceSyntaxError
from hwsim.isa import hmx
from hwsim.isa.fields import Word
from tests.profiles import examples

WORDS = [getattr(hmx, name) for name in dir(hmx) if isinstance(getattr(hmx, name), Word)]
LOC = Location("t.trace", 3, 1)


def parse(*lines):
    return hmx.parse_program([(line, Location("t.trace", i + 1, 1))
                              for i, line in enumerate(lines)])


def test_manual_register_values():
    # section 3.2: mask 11100 and stop 31 -> ((m >> 1) << 7) | (31 << 2) | ((m & 1) << 1)
    assert hmx.ACT_RT.encode(spatial_mask=0b11100, channel_stop=31) == 0x77C
    # section 4.4.2: offset 10100 (Y = 5) in Rs, dY one crouton away in Rt
    rs = hmx.ACT_SINGLE_RS.decode(((0b10100 >> 1) << 7) | ((0b10100 & 1) << 1))
    assert rs == dict(address=0, offset=0b10100, channel_start=0)
    assert hmx.ACT_SINGLE_RT.decode(2048 | 0x77C)["dy"] == 2048
    word = hmx.ACT_SINGLE_RT.encode(dy=-4096, channel_stop=31)
    assert hmx.ACT_SINGLE_RT.decode(word)["dy"] == -4096
    # section 4.2.2: dC + 1 = 3 croutons; weights: Rt = size - 1 (dW plus all-ones bits 6:0)
    assert hmx.ACT_DEEP_RT.decode((2 << 11) | 0x77C)["dc"] == 2
    assert hmx.WGT_RT.decode(2048 - 1) == {"dw": 2048 - 128}
    assert hmx.WGT_RS.decode(0x800 | 1 << 5) == {"address": 0x800, "negate": 1}
    # chapter 5: bias index 1 at 0x1100; convert (1 << 12) | (1 << 4) | (2 << 2)
    assert hmx.BIAS_RS.decode(0x1100 | 1) == {"address": 0x1100, "index": 1}
    assert hmx.CVT_RS.decode((1 << 8) | 1)["rnd"] == 1
    assert hmx.WR_RT.decode(0x700) == {"spatial_mask": 0b11100}
    assert hmx.USR.decode(0x30_0000) == {"nan_propagate": 1, "infnan_propagate": 1}


@pytest.mark.parametrize("word", WORDS, ids=lambda w: w.name)
def test_random_words_decode_or_raise_encoding_error(word):
    @settings(max_examples=examples(300), deadline=None)
    @given(st.integers(0, (1 << word.width) - 1))
    def check(value):
        try:
            fields = word.decode(value)
        except EncodingError as exc:
            assert exc.field and word.name in str(exc) and "expected" in str(exc)
            return
        assert word.encode(**fields) == value
        array = word.decode_array(np.array([value], dtype=np.uint64))
        assert {k: int(v[0]) for k, v in array.items()} == fields
        assert int(word.encode_array(**{k: [v] for k, v in fields.items()})[0]) == value
    check()


def test_encode_array_checks_ranges_with_the_field_name():
    with pytest.raises(EncodingError, match="field shape = 8"):
        hmx.BIAS_REG.encode_array(shape=[1, 8])


@pytest.mark.parametrize("text, value", [
    ("0x7ff", 0x7FF), ("2047", 2047), ("03777", 2047), ("0b11111111111", 2047), ("2047u", 2047),
    ("0x7FFul", 2047), ("2048 - 1", 2047), ("(1 << 11) - 1", 2047), ("~0 & 0x7ff", 2047),
    ("128 * 24 / 2 | 0x7f", 1663), ("-7 / 2 + 3", 0), ("-7 % 4 + 3", 0), ("1 + 2 * 3 << 1", 14),
])
def test_c_constant_expressions(text, value):
    name, args = hmx.parse_call(f"  f( {text} );", LOC)
    assert name == "f" and args[0][0] == value


@pytest.mark.parametrize("line, message", [
    ("Q6_mxclracc_hf(", r"t.trace:3:16: expected an integer"),
    ("Q6_weight_hf_mxmem_RR(0x800 0x7ff)", r"t.trace:3:29: expected '\)', found '0x7ff'"),
    ("Q6_bias_mxmem2_A(09)", r"t.trace:3:18: octal literal '09'"),
    ("Q6_bias_mxmem2_A(1 / 0)", r"t.trace:3:20: division by zero"),
    ("Q6_bias_mxmem2_A(0x100) x", r"t.trace:3:25: expected end of line, found 'x'"),
    ("Q6_bias_mxmem2_A(0x100$)", r"t.trace:3:23: unexpected character '\$'"),
    ("Q6_bias_mxmem2_B(0x100)", r"t.trace:3:1: unknown instruction 'Q6_bias_mxmem2_B' \(did you"),
    ("Q6_bias_mxmem2_A(1u2)", r"t.trace:3:20: expected '\)', found '2'"),
])
def test_syntax_errors_name_the_column(line, message):
    with pytest.raises(TraceSyntaxError, match=message):
        hmx.parse_program([(line, LOC)])


@pytest.mark.parametrize("lines, message", [
    (["Q6_activation_hf_mxmem_RR(0x0, 0x77c)", "Q6_mxclracc_hf()"],
     r"t.trace:1:1: .*not followed by its weight \(found Q6_mxclracc_hf at t.trace:2"),
    (["Q6_activation_hf_mxmem_RR(0x0, 0x77c)"], r"t.trace:1:1: .*end of program"),
    (["Q6_weight_hf_mxmem_RR(0x800, 0x7ff)"], r"t.trace:1:1: .*weight without an activation"),
    (["Q6_activation_hf_mxmem_RR_deep(0x0, (32 << 11) | 0x77c)"],
     r"t.trace:1:37: .*field dc = 0x20, expected 0..31"),
    (["Q6_activation_hf_mxmem_RR(0x0 | 4 << 2, 0x77c)"],
     r"t.trace:1:27: .*field channel_start = 4, expected 0, 8, 16 or 24"),
    (["Q6_activation_hf_mxmem_RR(0x0, 0x700 | 14 << 2)"],
     r"t.trace:1:32: .*field channel_stop = 0xe, expected 7, 15, 23 or 31"),
    (["Q6_activation_hf_mxmem_RR(16 << 2, 0x700 | 15 << 2)"],
     r"t.trace:1:27: .*channel_start 16 is above channel_stop 15"),
    (["Q6_activation_hf_mxmem_RR(0x0, 0x800 | 0x77c)"],
     r"t.trace:1:32: .*field dY_dC \(0 unless deep or single\)\[31:11\] = 1, expected zero"),
    (["Q6_activation_hf_mxmem_RR(0x80, 0x77c)"], r"field offset \(only the single takes one\)"),
    (["Q6_activation_hf_mxmem_RR_single(0x80 | 0x2, 0x800 | 0x77c)"],
     r"t.trace:1:34: .*offset = 0b00011 has X bits set under spatial_mask 0b11100"),
    (["Q6_weight_hf_mxmem_RR(0x800, 0x780)"], r"t.trace:1:30: .*reserved\[6:0\] = 0, expected all"),
    (["Q6_weight_hf_mxmem_RR(0x840, 0x7ff)"],
     r"t.trace:1:23: .*weight.Rs: field reserved \(128-byte alignment\)\[6\]"),
    (["Q6_bias_mxmem2_A(0x1010)"], r"t.trace:1:18: .*256-byte alignment\)\[7:2\] = 4"),
    (["Q6_cvt_hf_acc_R(3 << 2)"], r"field fb_dest = 3, expected 0 \(none\), 1 \(output bias\)"),
    (["Q6_cvt_hf_acc_R(1 << 14)"], r"convert.Rs: field reserved\[31:14\]"),
    (["Q6_mxmem_cvt_RR(0x1800, 0x77c)"], r"write.Rt: field reserved\[6:2\] = 0x1f"),
    (["Q6_mxmem_cvt_RR(0x1810, 0x700)"], r"write.Rs: field reserved \(2 KB alignment\)\[10:0\]"),
    (["USR = 0x300001"], r"t.trace:1:6: USR: USR: field unmodelled USR bits\[19:0\] = 1"),
    (["Q6_bias_mxmem2_A(0x1000, 1)"], r"t.trace:1:1: Q6_bias_mxmem2_A takes 1 arguments, found 2"),
    (["Q6_bias_mxmem2_A(1 << 32)"], r"bias.Rs = 0x100000000: expected a 32-bit value"),
])
def test_program_errors_name_line_column_and_field(lines, message):
    with pytest.raises(ProgramError, match=message):
        parse(*lines)


def test_pairs_and_usr_lines():
    program = parse("USR = 1 << 20;", "Q6_activation_hf_mxmem_RR_deep(0x0, 0x77c)",
                    "Q6_weight_hf_mxmem_RR_deep(0x800, 0xfff)", "Q6_mxclracc_hf()")
    assert [item.kind for item in program] == ["usr", "mpy", "clracc"]
    assert program[0].fields == {"nan_propagate": 0, "infnan_propagate": 1}
    assert program[1].act.kind == "act_deep" and program[1].wgt.kind == "wgt_deep"
    assert program[1].wgt.fields["dw"] == 0xF80
    # negative register values are the 32-bit two's complement, as C passes them
    single = parse("Q6_activation_hf_mxmem_RR_single(0x800, -2048 | 0x77c)",
                   "Q6_weight_hf_mxmem_RR(0x1000, 0x7ff)")[0]
    assert single.act.fields["dy"] == -2048


def test_spatial_split():
    assert hmx.spatial_split(0b10100, 0b11100) == (0, 5)
    assert hmx.spatial_split(31, 0b00000) == (31, 0)
    assert hmx.spatial_split(0b10110, 0b10101) == (0b01, 0b110)  # Y bits 0, 2, 4; X bits 1, 3


def test_made_instructions_are_what_parsing_their_text_gives():
    from hwsim.schedule.hmx.program import HmxProgram
    p = HmxProgram()
    p.usr(infnan_propagate=1)
    p.act(0x800, 0b11100, 31)
    p.wgt(0x10000, 16)
    p.act(0x800, 0b11000, 15, count=3)
    p.wgt(0x10000, 40, deep=True)
    p.act_single(0x1000, 0b11100, 23, -4096, 5)
    p.wgt(0x10080, 12)
    p.bias_load(0x2100, 3)
    p.convert(2)
    p.write(0x3000, 0b00111)
    p.hvx("copy", 0x4000, 0x5000, 64, 3, 128, -64)
    p.dma_in(0x6000, 0x8000_0000, 256)
    parsed = hmx.parse_program([(line, Location("t", i + 1, 1))
                                for i, line in enumerate(p.text().splitlines()[1:])])

    def fields(item):
        return (item.act.fields, item.wgt.fields) if isinstance(item, hmx.Multiply) else \
            item.fields
    assert [fields(i) for i in p.items] == [fields(i) for i in parsed]
    assert [i.kind for i in p.items] == [i.kind for i in parsed]


def test_make_instr_errors():
    spec = hmx.SPECS["Q6_activation_hf_mxmem_RR"]
    with pytest.raises(ProgramError, match="takes 2 arguments, found 1"):
        hmx.make_instr(spec, LOC, ({"address": 0},))
    with pytest.raises(EncodingError, match="channel_stop"):
        hmx.make_instr(spec, LOC, ({"address": 0}, {"channel_stop": 8}))   # not 7 mod 8
    with pytest.raises(ProgramError, match=r"channel_start 16 is above channel_stop 7"):
        hmx.make_instr(spec, LOC, ({"address": 0, "channel_start": 16}, {"channel_stop": 7}))
