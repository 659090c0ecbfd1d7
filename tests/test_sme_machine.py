"""The SME machine: state layout, each instruction's effect, PSTATE checks and error messages."""

import numpy as np
import pytest

import hwsim
from hwsim.errors import ConfigError, ProgramError, TraceSyntaxError
from hwsim.isa import sme
from hwsim.targets.sme.state import row_tile, tile_rows


@pytest.fixture
def m():
    machine = hwsim.machine("sme", svl=512, mem_size=1 << 20)
    machine.run("smstart\nptrue p0.b\nptrue p1.h\nptrue p2.s\nptrue p3.d")
    return machine


def run(m, text):
    return m.run(text + "\n")


def test_machine_is_registered_with_its_parameters():
    assert "sme" in hwsim.targets()
    m = hwsim.machine("sme", svl=256)
    assert m.state.z.shape == (32, 32) and m.state.za.shape == (32, 32)
    assert m.state.p.shape == (16, 32)
    assert m.memory("mem").size == m.params.mem_size
    with pytest.raises(ConfigError, match="svl"):
        hwsim.machine("sme", svl=384)


@pytest.mark.parametrize("esize", [1, 2, 4, 8])
def test_tile_to_array_mapping_and_its_inverse(esize):
    m = hwsim.machine("sme", svl=256)
    n = 32
    for tile in range(esize):
        rows = tile_rows(esize, tile, n)
        assert [row_tile(r, esize) for r in rows] == [(tile, i) for i in range(n // esize)]
        dtype = m.state.tile(esize, tile).dtype
        values = (np.arange((n // esize) ** 2).reshape(n // esize, -1) * 7 + tile).astype(dtype)
        m.state.write_tile(esize, tile, values)
        for i, r in enumerate(rows):   # tile row i is array row i * esize + tile
            assert np.array_equal(m.state.za[r].view(dtype), values[i])
        assert np.array_equal(m.state.read_tile(esize, tile), values)


def test_h_tile_aliases_two_s_tiles():
    m = hwsim.machine("sme", svl=128)
    m.state.tile(2, 0)[...] = 0xABCD
    assert np.all(m.state.tile(4, 0) == 0xABCDABCD) and np.all(m.state.tile(4, 2) == 0xABCDABCD)
    assert np.all(m.state.tile(4, 1) == 0) and np.all(m.state.tile(4, 3) == 0)


def test_sve_loads_and_stores_honour_predicates_and_addressing(m):
    mem = m.memory("mem")
    mem.write(0x1000, np.arange(64, dtype=np.uint32))
    run(m, "mov x0, #0x1000\nmov x1, #3\nmov x4, #5\nwhilelt p4.s, xzr, x4\n"
           "ld1w {z0.s}, p4/z, [x0, x1, lsl #2]\nld1w {z1.s}, p2/z, [x0, #2, mul vl]\n"
           "mov x2, #0x2000\nst1w {z1.s}, p4, [x2]\nld1h {z2.h}, p1/z, [x0]\n"
           "ld1b {z3.b}, p0/z, [x0]\nld1d {z4.d}, p3/z, [x0]")
    assert m.state.zv[4][0].tolist() == [3, 4, 5, 6, 7] + [0] * 11
    assert m.state.zv[4][1].tolist() == list(range(32, 48))
    assert mem.read(0x2000, 32).view(np.uint32).tolist() == [32, 33, 34, 35, 36, 0, 0, 0]
    assert np.array_equal(m.state.z[2], mem.read(0x1000, 64))
    assert np.array_equal(m.state.z[3], mem.read(0x1000, 64))
    assert np.array_equal(m.state.z[4], mem.read(0x1000, 64))


@pytest.mark.parametrize("vertical", [False, True])
def test_za_slice_loads_and_stores(m, vertical):
    mem = m.memory("mem")
    mem.write(0x1000, np.arange(16, dtype=np.uint32) + 100)
    d = "v" if vertical else "h"
    run(m, f"zero {{za}}\nmov x0, #0x1000\nmov w13, #5\nld1w {{za2{d}.s[w13, 2]}}, p2/z, [x0]\n"
           f"mov x1, #4\nmov x2, #0x2000\nst1w {{za2{d}.s[w13, 2]}}, p2, [x2, x1, lsl #2]")
    tile = m.state.tile(4, 2)
    line = tile[:, 7] if vertical else tile[7]
    assert line.tolist() == list(range(100, 116))
    assert np.count_nonzero(m.state.za.view(np.uint32)) == 16
    row = 7 * 4 + 2   # horizontal: ZA array row i*4 + 2
    if not vertical:
        assert m.state.za[row].view(np.uint32).tolist() == list(range(100, 116))
    assert mem.read(0x2010, 64).view(np.uint32).tolist() == list(range(100, 116))


def test_za_slice_index_wraps_and_byte_tiles(m):
    mem = m.memory("mem")
    mem.write(0x1000, np.arange(64, dtype=np.uint8))
    run(m, "mov x0, #0x1000\nmov w12, #66\nld1b {za0v.b[w12, 15]}, p0/z, [x0, xzr]")
    assert m.state.za[:, (66 + 15) % 64].tolist() == list(range(64))


def test_ldr_str_za_rows(m):
    mem = m.memory("mem")
    mem.write(0x1000 + 3 * 64, np.arange(64, dtype=np.uint8))
    run(m, "mov x0, #0x1000\nmov w14, #10\nldr za[w14, 3], [x0, #3, mul vl]\n"
           "mov x1, #0x4000\nstr za[w14, 3], [x1, #3, mul vl]")
    assert m.state.za[13].tolist() == list(range(64))
    assert mem.read(0x4000 + 3 * 64, 64).tolist() == list(range(64))


def test_mova_both_directions_merge_inactive_elements(m):
    m.state.zv[2][5][:] = np.arange(32, dtype=np.uint16) + 1
    run(m, "mov x9, #7\nwhilelt p6.h, xzr, x9\nzero {za}\nmov w15, #2\n"
           "mov za1v.h[w15, 1], p6/m, z5.h\nmov z7.h, p1/m, za1v.h[w15, 1]")
    assert m.state.tile(2, 1)[:, 3].tolist() == list(range(1, 8)) + [0] * 25
    assert m.state.zv[2][7].tolist() == list(range(1, 8)) + [0] * 25
    m.state.zv[2][8][:] = 9
    run(m, "mov z8.h, p6/m, za1h.h[w15, 0]")   # row 2 holds column 3's element 2
    assert m.state.zv[2][8].tolist() == [0, 0, 0, 3, 0, 0, 0] + [9] * 25


def test_zero_masks_only_the_named_tiles(m):
    m.state.za[...] = 1
    run(m, "zero {za1.s, za3.d}")
    rows = np.flatnonzero(m.state.za.any(axis=1) == 0)
    assert rows.tolist() == sorted(set(range(1, 64, 4)) | set(range(3, 64, 8)))


@pytest.mark.parametrize("pattern,count", [("", 16), (", vl8", 8), (", vl32", 0), (", pow2", 16),
                                           (", mul3", 15), (", #14", 0)])
def test_ptrue_patterns(m, pattern, count):
    run(m, f"ptrue p5.s{pattern}")
    assert m.state.active(5, 4).sum() == count and m.state.p[5].sum() == count


@pytest.mark.parametrize("text,esize,count", [
    ("mov x1, #3\nmov x2, #10\nwhilelt p7.s, x1, x2", 4, 7),
    ("mov x1, #-5\nmov x2, #40\nwhilelt p7.b, x1, x2", 1, 45),
    ("mov x1, #9\nmov x2, #2\nwhilelt p7.d, x1, x2", 8, 0),
    ("mov w1, #-1\nmov w2, #1\nwhilelt p7.h, w1, w2", 2, 2),
    ("mov x1, #-1\nmov x2, #1\nwhilelt p7.h, w1, w2", 2, 2),     # W operands: 32-bit
    ("mov x1, #0xffffffff\nmov x2, #1\nwhilelt p7.h, x1, x2", 2, 0)])
def test_whilelt_signed_counts(m, text, esize, count):
    run(m, text)
    assert m.state.active(7, esize).sum() == count == m.state.p[7].sum()


def test_scalar_moves_and_arithmetic(m):
    run(m, "mov x0, #0x123456789abcdef0\nmovk x0, #0x1111, lsl #16\nmov w1, #-1\n"
           "add x2, x1, #1, lsl #12\nsub x3, x2, #4095\nmov x4, #0\nsub x4, x4, #1\n"
           "add sp, x2, #16\nmov x5, sp\nmov x6, #-2")
    x = m.state.x
    assert x[0] == 0x123456781111DEF0 and x[1] == 0xFFFFFFFF
    assert x[2] == 0xFFFFFFFF + 4096 and x[3] == 0xFFFFFFFF + 1
    assert x[4] == (1 << 64) - 1 and x[31] == x[2] + 16 and x[5] == x[31]
    assert x[6] == (1 << 64) - 2


def test_fpcr_round_trip_and_reserved_bits(m):
    run(m, "mov x0, #0xffffffff\nmsr fpcr, x0\nmrs x1, fpcr")
    assert m.state.x[1] == 0x07C8BF07 & ~(1 << 13)   # RES0 bits and EBF (no FEAT_EBF16) drop
    plain = hwsim.machine("sme", feat_afp=False)
    plain.run("mov x0, #3\nmsr fpcr, x0\nmrs x1, fpcr")
    assert plain.state.x[1] == 0


def test_fpcr_rounding_mode_reaches_the_outer_product(m):
    # 1 + 2**-24 * 1 is a tie-breaking case for FP32: RNE keeps 1.0, RP rounds up
    m.state.zv[4][0][:] = 0x33800000   # 2**-24
    m.state.zv[4][1][:] = 0x3F800000
    run(m, "zero {za}\nfmopa za0.s, p2/m, p2/m, z1.s, z1.s\nfmopa za0.s, p2/m, p2/m, z0.s, z1.s")
    assert m.state.tile(4, 0)[0, 0] == 0x3F800000
    run(m, "mov x0, #0x400000\nmsr fpcr, x0\nfmopa za0.s, p2/m, p2/m, z0.s, z1.s")
    assert m.state.tile(4, 0)[0, 0] == 0x3F800001


def test_smstart_zeroes_vectors_and_za(m):
    m.state.z[...] = 7
    m.state.za[...] = 7
    run(m, "smstart")               # already in streaming mode with ZA on: no change
    assert m.state.z.all() and m.state.za.all()
    run(m, "smstop sm\nsmstart sm")
    assert not m.state.z.any() and not m.state.p.any() and m.state.za.all()
    run(m, "smstart za")            # ZA was on: kept
    assert m.state.za.all()
    run(m, "smstop za\nsmstart za")
    assert not m.state.za.any()


def test_outer_products_need_streaming_mode_and_za_before_anything_runs():
    m = hwsim.machine("sme")
    with pytest.raises(ProgramError, match=r"fmopa za0.s.*: needs PSTATE.SM ZA = 1"):
        m.run([sme.assemble("mov x0, #1"), "fmopa za0.s, p0/m, p0/m, z0.s, z0.s"])
    assert m.state.x[0] == 0   # nothing ran
    with pytest.raises(ProgramError, match=r"t.trace:2:1: ld1w .*needs PSTATE.SM = 1"):
        m.run(_trace_file("smstart za\nld1w {z0.s}, p0/z, [x0]\n"))
    m.run("smstart za\nzero {za}")  # ZA alone is enough for ZERO
    with pytest.raises(ProgramError, match="FEAT_SME_B16B16"):
        hwsim.machine("sme", feat_sme_b16b16=False).run(
            "smstart\nbfmopa za0.h, p0/m, p0/m, z0.h, z0.h")


def test_the_first_instruction_run_in_the_wrong_mode_is_refused_in_any_stretch():
    """Each stretch between SMSTART/SMSTOP is judged with the PSTATE it runs in: a routine
    before SMSTART, an instruction after SMSTOP that ran fine before it."""
    add = "vec add a=mem:0x1000:f32:4 b=mem:0x1010:f32:4 out=mem:0x1020:f32:4"
    m = hwsim.machine("sme")
    with pytest.raises(ProgramError, match=r"t.trace:2:1: vec add: needs PSTATE.SM = 1"):
        m.run(_trace_file(f"mov x0, #1\n{add}\nsmstart\n{add}\n"))
    load = "ld1w {z0.s}, p0/z, [x0]"
    with pytest.raises(ProgramError, match=r"t.trace:5:1: ld1w .*needs PSTATE.SM = 1"):
        m.run(_trace_file(f"smstart\n{load}\n{add}\nsmstop sm\n{load}\n{load}\n"))
    assert not m.state.z.any()    # nothing ran


def _trace_file(text, name="t.trace"):
    import tempfile
    from pathlib import Path
    path = Path(tempfile.mkdtemp()) / name
    path.write_text(text)
    return path


def test_memory_fault_names_the_instruction_and_line(m):
    with pytest.raises(ProgramError, match=r"t.trace:2:1: ld1w \{ z0.s \}.*outside"):
        m.run(_trace_file("mov x0, #0xffff0\nld1w {z0.s}, p2/z, [x0]\n"))


def test_inactive_elements_do_not_fault(m):
    m.memory("mem").write(0xFFFF0, np.arange(4, dtype=np.uint32) + 1)
    m.run("mov x0, #0xffff0\nmov x1, #4\nwhilelt p4.s, xzr, x1\nld1w {z0.s}, p4/z, [x0]")
    assert m.state.zv[4][0].tolist() == [1, 2, 3, 4] + [0] * 12


def test_syntax_errors_name_the_trace_line(m):
    with pytest.raises(TraceSyntaxError, match=r"t.trace:2:17: fmopa: expected zada in 0..3, "
                                               r"found '9'"):
        m.run(_trace_file("smstart\n        fmopa za9.s, p0/m, p0/m, z0.s, z0.s\n"))


def test_programs_from_python_words_text_and_instructions(m):
    program = [sme.encode("movz_x", rd=3, imm16=7, hw=1), 0xD2800024,   # mov x4, #1
               "add x5, x3, #1"]
    m.run(program)
    assert (m.state.x[3], m.state.x[4], m.state.x[5]) == (7 << 16, 1, (7 << 16) + 1)
    with pytest.raises(ProgramError, match="assemble_program"):
        m.run(["mov x0, #0x123456789"])
    m.run(sme.assemble_program("mov x0, #0x123456789"))
    assert m.state.x[0] == 0x123456789


def test_bfmopa_through_the_machine_matches_the_kernel(m):
    rng = np.random.default_rng(1)
    bits = ((rng.integers(0, 2, (3, 32)) << 15) | (rng.integers(120, 135, (3, 32)) << 7)
            | rng.integers(0, 128, (3, 32))).astype(np.uint16)
    m.state.zv[2][0][:], m.state.zv[2][1][:] = bits[0], bits[1]
    m.state.tile(2, 1)[...] = bits[2][None, :]
    before = m.state.read_tile(2, 1)
    run(m, "mov x0, #17\nwhilelt p5.h, xzr, x0\nbfmops za1.h, p5/m, p1/m, z0.h, z1.h")
    from hwsim.targets.sme import kernels, numerics
    want = before.copy()
    pn = np.zeros(64, bool)
    pn[:34:2] = True
    kernels.mopa_fma_twin(want, 0, 1, bits[0], bits[1], pn, np.ones(64, bool), 2, True, 8, 7,
                          numerics.controls(0, True, "pseudocode"))
    assert np.array_equal(m.state.read_tile(2, 1), want)
    assert np.array_equal(want[17:], before[17:])   # inactive rows unmodified


@pytest.mark.parametrize("feat,ebf,mode", [(False, 1, 2), (True, 0, 2), (True, 1, 1)])
def test_widening_bfmopa_follows_fpcr_ebf_when_implemented(feat, ebf, mode):
    m = hwsim.machine("sme", feat_ebf16=feat)
    m.run("smstart\nptrue p1.h\n")
    rng = np.random.default_rng(2)
    bits = ((rng.integers(0, 2, (2, 32)) << 15) | (rng.integers(118, 136, (2, 32)) << 7)
            | rng.integers(0, 128, (2, 32))).astype(np.uint16)
    m.state.zv[2][0][:], m.state.zv[2][1][:] = bits
    m.run(f"mov x0, #{ebf << 13}\nmsr fpcr, x0\nzero {{za}}\n"
          "bfmopa za3.s, p1/m, p1/m, z0.h, z1.h\nbfmopa za3.s, p1/m, p1/m, z1.h, z0.h\n")
    from hwsim.targets.sme import kernels, numerics
    want = np.zeros((16, 16), np.uint32)
    ones = np.ones(64, bool)
    for zn, zm in ((bits[0], bits[1]), (bits[1], bits[0])):
        kernels.mopa_dot2(want, 0, 1, zn, zm, ones, ones, False, mode,
                          numerics.controls(0, True, "pseudocode"))
    assert np.array_equal(m.state.read_tile(4, 3), want)
