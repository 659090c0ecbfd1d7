"""SME GEMM kernels: every mode against an exact oracle (sequential Arm fused multiply-adds in
exact rationals, or int64), edge blocks, grouped GEMMs, the instructions used, throughput, and
the program as arrays against the same program written line by line through the assembler."""

import numpy as np
import pytest

import hwsim
from hwsim.isa import sme
from hwsim.schedule.sme.gemm import MODES, Gemm, gemm_words
from hwsim.targets.sme import layouts
from hwsim.targets.sme.program import SmeProgram
from tests.sme_gemm_oracle import gemm_text_words
from tests.test_sme_numerics import BF16, FP32, Fpcr, o_bf16_sop, o_fma

W_ADDR, X_ADDR, C_ADDR = 0x10000, 0x200000, 0x400000


STORAGE = {"f32": np.uint32, "bf16": np.uint16, "i8": np.int8}   # panels as bit patterns


def run(gemm: Gemm, w: np.ndarray, x: np.ndarray, **params):
    """Pack ``w [n, k]`` and ``x [m, k]`` (integers, or float bit patterns), run, return C (as
    bit patterns for floats) and the result."""
    m = hwsim.machine("sme")
    mode = gemm.mode
    if gemm.group:
        panels = [layouts.pack_panels(w[g:g + gemm.group, g // gemm.group * gemm.k:
                                          (g // gemm.group + 1) * gemm.k], gemm.dim, 1,
                                      mode.depth) for g in range(0, gemm.n, gemm.group)]
        wp = np.concatenate(panels)
        xp = np.concatenate([layouts.pack_panels(x[:, g * gemm.k:(g + 1) * gemm.k],
                                                 *gemm.x_panel()) for g in range(gemm.groups)])
    else:
        wp = layouts.pack_panels(w, *gemm.w_panel())
        xp = layouts.pack_panels(x, *gemm.x_panel())
    m.memory("mem").write(W_ADDR, wp.astype(STORAGE[mode.src]))
    m.memory("mem").write(X_ADDR, xp.astype(STORAGE[mode.src]))
    words = np.concatenate([[sme.assemble("smstart")], gemm_words(gemm)]).astype(np.uint32)
    result = m.run(SmeProgram(words), params=params)
    raw = m.memory("mem").read(C_ADDR, gemm.m * gemm.n * mode.tile_bytes)
    view = {"f32": np.uint32, "bf16": np.uint16, "i32": np.int32}[mode.acc]
    return raw.view(view).reshape(gemm.m, gemm.n), result


def gemm(mode, m, n, k, **kw):
    return Gemm(MODES[mode], m, n, k, W_ADDR, X_ADDR, C_ADDR, **kw)


def texts(g: Gemm) -> list[str]:
    return [sme.disassemble(int(word)) for word in gemm_words(g)]


def random_bits(rng, shape, fmt):
    values = rng.standard_normal(shape).astype(np.float32)
    return layouts.bf16_bits(values) if fmt == BF16 else values.view(np.uint32)


@pytest.mark.parametrize("mode,fmt,m,n,k", [("fp32", FP32, 34, 20, 5),
                                            ("bf16", BF16, 40, 36, 5)])
def test_fused_modes_match_sequential_fmas(mode, fmt, m, n, k):
    rng = np.random.default_rng(2)
    w, x = random_bits(rng, (n, k), fmt), random_bits(rng, (m, k), fmt)
    got, _ = run(gemm(mode, m, n, k), w, x)
    for i in range(m):
        for j in range(n):
            c = 0
            for s in range(k):
                c = o_fma(c, int(w[j, s]), int(x[i, s]), fmt, Fpcr())
            assert got[i, j] == c, (i, j)


def test_widening_bf16_matches_round_to_odd_sums_of_pairs():
    rng = np.random.default_rng(3)
    m, n, k = 20, 18, 7
    w, x = random_bits(rng, (n, k), BF16), random_bits(rng, (m, k), BF16)
    got, _ = run(gemm("bf16-widening", m, n, k), w, x)
    wp, xp = np.pad(w, ((0, 0), (0, 1))), np.pad(x, ((0, 0), (0, 1)))   # K padded with +0
    for i in range(m):
        for j in range(n):
            c = 0
            for s in range(0, k + 1, 2):
                c = o_bf16_sop(c, int(wp[j, s]), int(wp[j, s + 1]), int(xp[i, s]),
                               int(xp[i, s + 1]), 0)
            assert got[i, j] == c, (i, j)


@pytest.mark.parametrize("unsigned", [False, True])
def test_int8_is_exact_signed_and_unsigned(unsigned):
    rng = np.random.default_rng(4)
    m, n, k = 50, 40, 37
    w = rng.integers(-128, 128, (n, k))
    x = rng.integers(0, 256, (m, k)) if unsigned else rng.integers(-128, 128, (m, k))
    g = gemm("int8", m, n, k, unsigned=unsigned)
    got, _ = run(g, w, x)
    assert np.array_equal(got, x @ w.T)
    text = [line.split()[0] for line in texts(g)]
    assert ("sumopa" in text) == unsigned and ("smopa" in text) != unsigned


@pytest.mark.parametrize("mode", ["int8", "bf16"])
def test_grouped_gemm_gives_each_group_its_own_operands(mode):
    rng = np.random.default_rng(5)
    dim = 64 // MODES[mode].tile_bytes
    g = gemm(mode, 37, 3 * dim, 12, group=dim)
    x = rng.integers(-4, 4, (37, 3 * 12))
    w = np.zeros((g.n, 3 * 12), np.int64)
    for grp in range(3):
        w[grp * g.dim:(grp + 1) * g.dim, grp * 12:(grp + 1) * 12] = \
            rng.integers(-4, 4, (g.dim, 12))
    want = x @ w.T
    if mode == "int8":
        got, _ = run(g, w, x)
    else:    # small integers and their partial sums (|s| <= 192) are exact in BF16
        bits, _ = run(g, layouts.bf16_bits(w), layouts.bf16_bits(x))
        got = layouts.bf16_values(bits)
    assert np.array_equal(got, want)


def test_blocks_use_every_tile_and_stores_respect_edges():
    g = gemm("fp32", 17, 18, 4)
    text = "\n".join(texts(g))
    for tile in range(4):
        assert f"fmopa za{tile}.s" in text
    assert "whilelt p1.s, xzr, x10" in text         # 2 channels in the second channel tile
    bf = "\n".join(texts(gemm("bf16", 40, 30, 4)))
    assert "bfmopa za0.h" in bf and "bfmopa za1.h" in bf and "st1h {za1v.h" in bf


@pytest.mark.parametrize("mode,m,n,k,floor", [("fp32", 64, 64, 256, 0.85),
                                              ("int8", 64, 64, 512, 0.8),
                                              ("bf16-widening", 64, 64, 256, 0.85),
                                              ("bf16", 64, 64, 256, 0.85)])
def test_four_accumulation_chains_keep_the_pipeline_nearly_full(mode, m, n, k, floor):
    g = gemm(mode, m, n, k)
    machine = hwsim.machine("sme")
    path = {"fp32": "fp32", "int8": "int8", "bf16-widening": "wide16", "bf16": "b16b16"}[mode]
    peak = getattr(machine.params, f"{path}_macs_per_cycle")
    _, result = run(g, np.zeros((n, k), np.int64), np.zeros((m, k), np.int64))
    assert g.macs / result.cycles >= floor * peak


def _shapes():
    """GEMMs covering every branch of the writer: each mode, grouped or not, partial tiles in
    both dimensions, K steps below, at and above the loads issued ahead (the register rotation),
    unsigned int8, n past 4095 (x9 advanced by ADD #n >> 12, lsl #12), other vector lengths and
    panel addresses that take MOVZ + MOVKs or a single MOV #0."""
    cases = []
    for mode in MODES.values():
        dim, depth = 64 // mode.tile_bytes, mode.depth
        for steps in (3, 7, 40):
            for m, n in ((5, 3), (2 * dim + 7, dim + 1), (4 * dim, 2 * dim)):
                cases.append((mode.name, m, n, steps * depth - 1, {}))
            cases.append((mode.name, 2 * dim + 3, 3 * dim - 2, steps * depth, {"group": dim}))
    return cases + [
        ("int8", 37, 45, 70, {"unsigned": True}),
        ("int8", 20, 40, 30, {"unsigned": True, "group": 16}),
        ("fp32", 3, 4096, 2, {}), ("bf16", 9, 5000, 3, {}),
        ("fp32", 40, 70, 30, {"svl_bytes": 256}),
        ("bf16", 70, 70, 9, {"svl_bytes": 128, "group": 64})]


def test_words_are_the_instructions_written_line_by_line():
    for mode, m, n, k, kw in _shapes():
        g = Gemm(MODES[mode], m, n, k, 0, 0x200000, 0x1_2345_6780, **kw)
        words = gemm_words(g)
        assert words.dtype == np.uint32
        assert words.tolist() == gemm_text_words(g), (mode, m, n, k, kw)


def test_compiled_movs_are_the_assemblers():
    """``gemm._mov`` expands ``mov Xd, #value`` as ``sme.mov_words`` does: MOVZ or MOVN and
    MOVKs, for values with halfwords of zeros, of ones and mixed."""
    from hwsim.isa import sme
    from hwsim.schedule.sme.gemm import _mov, _tables
    tables = _tables(MODES["fp32"], False, 64, 64)
    moves, imm_at = tables[-2], tables[-1]
    rng = np.random.default_rng(1)
    halves = np.array([0, 0xFFFF, 0x1234, 0x8000])
    values = [0, 1, 0xFFFF, 0x1_0000, 0x1_2345_6780, 0x7FFF_FFFF_FFFF_FFFF] + [
        int(sum(int(h) << (16 * i) for i, h in enumerate(rng.choice(halves, 3)))) |
        int(rng.choice([0, 0x7FFF, 0x1234])) << 48 for _ in range(200)]   # addresses: < 2^63
    for rd in (0, 8, 10):
        for value in values:
            words, used = sme.mov_words(rd, value)
            out = np.zeros(4, np.uint32)
            count = _mov(out, True, 0, rd, value, moves, imm_at)
            assert out[:count].tolist() == words[used].tolist(), (rd, hex(value))
