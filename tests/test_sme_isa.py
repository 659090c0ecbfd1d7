"""SME encodings, assembly and disassembly: published encodings, round trips, error messages."""

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from hwsim.errors import EncodingError, Location, TraceSyntaxError
from hwsim.isa import sme
from tests.profiles import examples

# (text as LLVM prints it, word) pairs checked against LLVM's MC tests: CHECK-INST and
# CHECK-ENCODING lines of llvm/test/MC/AArch64/SME/{bfmopa,bfmops,fmopa,fmops,smopa-32,smops-32,
# sumopa-32,sumops-32,usmopa-32,usmops-32,umopa-32,umops-32,ld1b,ld1w,st1w,ldr,str,mova,zero,
# smstart,smstop}.s, SME2p1/{bfmopa,bfmops}.s, SVE/{ld1h,ld1w,st1w,ptrue,whilelt}.s and
# basic-a64-instructions.s (add/sub immediate, msr/mrs fpcr).
LLVM_MC = [
    ("bfmopa za0.h, p0/m, p0/m, z0.h, z0.h", 0x81A00008),
    ("bfmopa za1.h, p5/m, p2/m, z10.h, z21.h", 0x81B55549),
    ("bfmopa za1.h, p7/m, p7/m, z31.h, z31.h", 0x81BFFFE9),
    ("bfmops za1.h, p5/m, p2/m, z10.h, z21.h", 0x81B55559),
    ("bfmopa za1.s, p5/m, p2/m, z10.h, z21.h", 0x81955541),
    ("bfmopa za3.s, p3/m, p7/m, z13.h, z8.h", 0x8188EDA3),
    ("bfmops za1.s, p5/m, p2/m, z10.h, z21.h", 0x81955551),
    ("fmopa za1.s, p5/m, p2/m, z10.h, z21.h", 0x81B55541),
    ("fmops za3.s, p3/m, p7/m, z13.h, z8.h", 0x81A8EDB3),
    ("fmopa za0.s, p0/m, p0/m, z0.s, z0.s", 0x80800000),
    ("fmopa za3.s, p3/m, p7/m, z13.s, z8.s", 0x8088EDA3),
    ("fmops za1.s, p5/m, p2/m, z10.s, z21.s", 0x80955551),
    ("smopa za1.s, p5/m, p2/m, z10.b, z21.b", 0xA0955541),
    ("smops za1.s, p5/m, p2/m, z10.b, z21.b", 0xA0955551),
    ("sumopa za1.s, p5/m, p2/m, z10.b, z21.b", 0xA0B55541),
    ("sumops za1.s, p5/m, p2/m, z10.b, z21.b", 0xA0B55551),
    ("usmopa za1.s, p5/m, p2/m, z10.b, z21.b", 0xA1955541),
    ("usmops za1.s, p5/m, p2/m, z10.b, z21.b", 0xA1955551),
    ("umopa za3.s, p7/m, p7/m, z31.b, z31.b", 0xA1BFFFE3),
    ("umops za1.s, p5/m, p2/m, z10.b, z21.b", 0xA1B55551),
    ("ld1w {za0h.s[w12, 0]}, p0/z, [x0, x0, lsl #2]", 0xE0800000),
    ("ld1w {za1h.s[w14, 1]}, p5/z, [x10, x21, lsl #2]", 0xE0955545),
    ("ld1w {za3v.s[w15, 3]}, p7/z, [sp]", 0xE09FFFEF),
    ("ld1w {za0v.s[w12, 0]}, p0/z, [x0, x0, lsl #2]", 0xE0808000),
    ("ld1b {za0h.b[w14, 5]}, p5/z, [x10, x21]", 0xE0155545),
    ("ld1b {za0v.b[w15, 15]}, p7/z, [sp]", 0xE01FFFEF),
    ("st1w {za0h.s[w12, 0]}, p0, [x0, x0, lsl #2]", 0xE0A00000),
    ("ldr za[w12, 0], [x0]", 0xE1000000),
    ("ldr za[w14, 5], [x10, #5, mul vl]", 0xE1004145),
    ("ldr za[w15, 15], [sp, #15, mul vl]", 0xE10063EF),
    ("str za[w12, 0], [x0]", 0xE1200000),
    ("str za[w14, 5], [x10, #5, mul vl]", 0xE1204145),
    ("mov z21.b, p5/m, za0h.b[w14, 10]", 0xC0025555),
    ("mov z31.h, p7/m, za1h.h[w15, 7]", 0xC0427DFF),
    ("mov z0.b, p0/m, za0v.b[w12, 0]", 0xC0028000),
    ("mov za0h.b[w15, 15], p7/m, z31.b", 0xC0007FEF),
    ("mov za1h.h[w15, 7], p7/m, z31.h", 0xC0407FEF),
    ("mov za0v.h[w14, 5], p5/m, z10.h", 0xC040D545),
    ("zero {}", 0xC0080000),
    ("zero {za0.h}", 0xC0080055),
    ("zero {za}", 0xC00800FF),
    ("zero {za0.s,za1.s}", 0xC0080033),
    ("zero {za0.d, za1.d, za2.d, za4.d, za5.d, za7.d}", 0xC00800B7),
    ("smstart", 0xD503477F), ("smstart sm", 0xD503437F), ("smstart za", 0xD503457F),
    ("smstop", 0xD503467F), ("smstop sm", 0xD503427F), ("smstop za", 0xD503447F),
    ("ld1w { z21.s }, p5/z, [x10, x21, lsl #2]", 0xA5555555),
    ("ld1w { z21.s }, p5/z, [sp, x21, lsl #2]", 0xA55557F5),
    ("ld1w { z0.s }, p0/z, [x0]", 0xA540A000),
    ("ld1w { z31.s }, p7/z, [sp, #-1, mul vl]", 0xA54FBFFF),
    ("ld1h { z5.h }, p3/z, [x17, x16, lsl #1]", 0xA4B04E25),
    ("ld1h { z21.h }, p5/z, [x10, #5, mul vl]", 0xA4A5B555),
    ("st1w { z0.s }, p0, [x0]", 0xE540E000),
    ("st1w { z31.s }, p7, [sp, #-1, mul vl]", 0xE54FFFFF),
    ("st1w { z0.s }, p0, [x0, x0, lsl #2]", 0xE5404000),
    ("ptrue p15.b", 0x2518E3EF),
    ("ptrue p7.s, vl1", 0x2598E027),
    ("ptrue p7.s, mul3", 0x2598E3C7),
    ("ptrue p7.s, #14", 0x2598E1C7),
    ("ptrue p0.d, pow2", 0x25D8E000),
    ("whilelt p15.b, xzr, x0", 0x252017EF),
    ("whilelt p15.s, w0, wzr", 0x25BF040F),
    ("whilelt p15.d, x0, xzr", 0x25FF140F),
    ("msr fpcr, x12", 0xD51B440C),
    ("mrs x9, fpcr", 0xD53B4409),
    ("add w2, w3, #4095", 0x113FFC62),
    ("add w30, w29, #1, lsl #12", 0x114007BE),
    ("add x5, x7, #1638", 0x911998E5),
    ("add x8, sp, #1074", 0x9110CBE8),
    ("add sp, x29, #3816", 0x913BA3BF),
    ("add w4, w5, #0", 0x110000A4),
    ("sub w4, w20, #546, lsl #12", 0x51488A84),
    ("sub sp, sp, #288", 0xD10483FF),
    ("sub w0, wsp, #4077", 0x513FB7E0),
]

# Move-wide words whose fixed bits LLVM's MC test large-relocs.s shows (its immediates are
# relocations, zero in the word); the printed text follows LLVM's MOV-alias rules.
MOVE_WIDE = [
    ("mov x2, #0", 0xD2800002),
    ("movk w3, #0", 0x72800003),
    ("movk x7, #0, lsl #32", 0xF2C00007),
    ("movz x8, #0, lsl #48", 0xD2E00008),
]


@pytest.mark.parametrize("text,word", LLVM_MC + MOVE_WIDE)
def test_published_encodings(text, word):
    assert sme.assemble(text) == word
    assert sme.disassemble(word) == text


@pytest.mark.parametrize("text,word", [
    ("ld1w za3h.s[w15, 3], p7/z, [sp]", 0xE09F7FEF),            # braces are optional
    ("ld1w z0.s, p0/z, [x0]", 0xA540A000),
    ("ld1w {z0.s}, p0/z, [x0, #0, mul vl]", 0xA540A000),
    ("mova z0.b, p0/m, za0h.b[w12, 0]", 0xC0020000),            # mova is accepted, mov printed
    ("zero {za0.d, za2.d, za4.d, za6.d}", 0xC0080055),
    ("zero {za0.b}", 0xC00800FF),
    ("ptrue p7.s, all", 0x2598E3E7),
    ("ptrue p7.s, #1", 0x2598E027),
    ("SMSTART SM", 0xD503437F),
    ("add w4, w5, #0x0", 0x110000A4),
    ("add w20, wsp, #801, lsl #0", 0x110C87F4),
    ("movz x0, #0x1000", 0xD2820000),
    (".inst 0x81a00008", 0x81A00008),
])
def test_accepted_spellings(text, word):
    assert sme.assemble(text) == word


@pytest.mark.parametrize("text,printed", [
    ("mov x0, #4096", "mov x0, #4096"),
    ("mov x0, #-1", "mov x0, #-1"),                # MOVN x0, #0
    ("mov w0, #0xffffffff", "mov w0, #-1"),
    ("mov w0, #0xffff0000", "mov w0, #-65536"),    # MOVZ takes precedence over MOVN
    ("movn w0, #65535", "movn w0, #65535"),        # a value MOVZ holds: MOVN prints plainly
    ("movz x0, #0, lsl #16", "movz x0, #0, lsl #16"),
    ("add x0, sp, #0", "mov x0, sp"),
    ("add x0, x1, #0", "add x0, x1, #0"),
])
def test_mov_aliases_print_as_llvm_does(text, printed):
    assert sme.disassemble(sme.assemble(text)) == printed


@pytest.mark.parametrize("value", [0x123456789, 0xFFFF_0000_FFFF_0000, 0x8000_0000_0000_0001,
                                   -0x12345678_9ABC, 0x1_0001])
def test_mov_pseudo_expands_to_movz_movn_movk(value):
    words = sme.parse_line(f"mov x3, #{value:#x}" if value >= 0 else f"mov x3, #{value}")
    assert len(words) >= 2
    result = 0
    for ins in words:
        f = ins.fields
        if ins.form.attrs["opc"] == "movz":
            result = f["imm16"] << 16 * f["hw"]
        elif ins.form.attrs["opc"] == "movn":
            result = ~(f["imm16"] << 16 * f["hw"]) & (1 << 64) - 1
        else:
            mask = 0xFFFF << 16 * f["hw"]
            result = result & ~mask | f["imm16"] << 16 * f["hw"]
    assert result == value & (1 << 64) - 1
    with pytest.raises(TraceSyntaxError, match="needs"):
        sme.assemble(f"mov x3, #{value}")


@pytest.mark.parametrize("bits", [64, 32])
def test_mov_words_are_what_the_assembler_makes_of_each_value(bits):
    rng = np.random.default_rng(0)
    halfwords = rng.choice([0, 0xFFFF, 0x1234, 0x8000, 1], (400, bits // 16))
    values = [0, 1, 0xFFFF, 0x10000, (1 << bits) - 1, (1 << bits) - 0x10000] + [
        sum(int(h) << 16 * i for i, h in enumerate(row)) for row in halfwords]
    rd = rng.integers(0, 31, len(values))
    words, used = sme.mov_words(rd, np.array(values, np.uint64), bits)
    wide = "x" if bits == 64 else "w"
    for r, value, row, keep in zip(rd, values, words, used):
        assert row[keep].tolist() == [i.word for i in sme.parse_line(f"mov {wide}{r}, #{value}")]


def _field_values(form, draw):
    values = {}
    for name, field in form.word.fields.items():
        lo, hi = field.value_range()
        values[name] = draw(st.integers(lo, hi).filter(field.allowed or (lambda v: True)))
    values.update(form.fixed)
    return values


@settings(max_examples=examples(1500), deadline=None)
@given(form=st.sampled_from(sme.FORMS), data=st.data())
def test_random_fields_round_trip(form, data):
    values = _field_values(form, data.draw)
    assume(form.when is None or form.when(values))
    word = form.word.encode(**values)
    text = sme.disassemble(word)
    assert sme.assemble(text) == word
    assert sme.decode(word).fields == values or sme.decode(word).form is not form
    assert sme.assemble(form.text(values)) == word      # every spelling, printed or not


@pytest.mark.parametrize("line,message", [
    ("fadd z0.s, z1.s, z2.s", r"t.s:3:5: fadd: expected a supported instruction"),
    ("bfmopa za2.h, p0/m, p0/m, z0.h, z0.h", r"t.s:3:14: bfmopa: expected zada in 0..1, "
                                             r"found '2'"),
    ("bfmopa za0.h, p9/m, p0/m, z0.h, z0.h", r"t.s:3:20: bfmopa: expected pn in 0..7"),
    ("fmopa za0.s, p0/m, p0/m, z0.d, z0.d", r"t.s:3:33: fmopa: expected 's' or 'h', "
                                            r"found 'd'"),
    ("ld1w {za0h.s[w11, 0]}, p0/z, [x0]", r"t.s:3:19: ld1w: expected a slice index "
                                          r"register w12-w15, found '11'"),
    ("ld1w {z0.s}, p0/z, [x0, xzr, lsl #2]", r"rm|xzr is unallocated"),
    ("ldr za[w12, 1], [x0, #2, mul vl]", r"t.s:3:27: ldr: expected 1 \(as before\)"),
    ("add x0, x1, #4096", r"t.s:3:17: add: expected imm12 in 0..4095, found '#4096'"),
    ("mov x1, x2", r"mov: expected"),
    ("zero {za4.s}", r"zero: expected a list of ZA tiles"),
    (".inst 0x12345678", r"t.s:3:11: \.inst: expected a supported SME/SVE/A64 encoding, "
                         r"found .0x12345678."),
    ("smstart zz", r"t.s:3:13: smstart: expected .*'sm'.*, found 'zz'"),
])
def test_errors_name_line_column_expected_found(line, message):
    with pytest.raises(TraceSyntaxError, match=message):
        sme.parse_line(line, Location("t.s", 3, 5))


def test_program_and_python_builders():
    program = sme.assemble_program("ptrue p0.s   // all lanes\n\n  fmopa za0.s, p0/m, p0/m, "
                                   "z0.s, z1.s\nmov x0, #0x100000000", source="k.s")
    assert [i.text for i in program] == ["ptrue p0.s", "fmopa za0.s, p0/m, p0/m, z0.s, z1.s",
                                         "mov x0, #4294967296"]
    assert program[1].loc.line == 3 and program[1].loc.column == 3
    built = sme.encode("fmopa_ss", zada=0, pn=0, pm=0, zn=0, zm=1)
    assert built.word == program[1].word
    with pytest.raises(EncodingError, match="zada"):
        sme.encode("fmopa_ss", zada=4)


def test_decode_rejects_unsupported_words():
    with pytest.raises(EncodingError, match="supported"):
        sme.decode(0)
    with pytest.raises(EncodingError, match="rm"):
        sme.decode(0xA55F4000)   # ld1w {z0.s}, p0/z, [x0, xzr, lsl #2] is unallocated
