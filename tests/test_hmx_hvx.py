"""HVX work: FP16 elementwise kernels against exact rationals and their twins; layout ops."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import hwsim
from hwsim.targets.hmx import hvx_kernels as hvx
from hwsim.targets.hmx import layouts as L
from tests import hmx_oracle as O
from tests.profiles import examples

fp16 = st.one_of(st.integers(0, 0xFFFF), st.sampled_from(
    [0x0000, 0x8000, 0x0001, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x3C00, 0x0400, 0x03FF]))
arrays = st.lists(st.tuples(fp16, fp16), min_size=1, max_size=64)


def oracle_binary(x: int, y: int, mul: bool) -> int:
    v = (O.mul if mul else O.add)(O.value(x, 5, 10), O.value(y, 5, 10))
    if O.is_nan(v[0]):
        return hvx.FP16_NAN
    if O.is_inf(v[0]):
        return O.inf_bits(v[0] < 0, 5, 10)
    if v[0] == 0:
        return int(v[1]) << 15
    return O.oracle.round_to(v[0], 5, 10)


@settings(max_examples=examples(300), deadline=None)
@given(pairs=arrays, mul=st.booleans())
def test_fp16_add_mul_exact(pairs, mul):
    a = np.array([p[0] for p in pairs], dtype=np.uint16)
    b = np.array([p[1] for p in pairs], dtype=np.uint16)
    out, twin = np.empty_like(a), np.empty_like(a)
    hvx.fp16_binary(a, b, out, mul)
    hvx.fp16_binary_twin(a, b, twin, mul)
    assert out.tolist() == [oracle_binary(int(x), int(y), mul) for x, y in zip(a, b)]
    assert out.tolist() == twin.tolist()


@pytest.mark.parametrize("mul", [False, True])
def test_fp16_add_mul_match_twin_on_many_pairs(mul):
    # every FP16 value against random partners, plus pairs that meet at a midpoint (a tie)
    rng = np.random.default_rng(int(mul))
    a = np.concatenate([np.arange(1 << 16), rng.integers(0, 1 << 16, 1 << 18)]).astype(np.uint16)
    b = rng.integers(0, 1 << 16, a.size).astype(np.uint16)
    x = rng.integers(0x0800, 0x7800, 4096).astype(np.uint16)  # normal, from 2^-13
    exponent = np.floor(np.log2(x.view(np.float16).astype(np.float64)))
    half_ulp = np.exp2(exponent - 11).astype(np.float16).view(np.uint16)  # exact: >= 2^-24
    a = np.concatenate([a, x, x])
    b = np.concatenate([b, half_ulp, half_ulp ^ np.uint16(0x8000)])
    out, twin = np.empty_like(a), np.empty_like(a)
    hvx.fp16_binary(a, b, out, mul)
    hvx.fp16_binary_twin(a, b, twin, mul)
    assert (out == twin).all()


@settings(max_examples=examples(300), deadline=None)
@given(values=st.lists(fp16, min_size=1, max_size=64),
       lo=fp16.filter(lambda v: not O.is_nan(O.value(v, 5, 10)[0])),
       hi=fp16.filter(lambda v: not O.is_nan(O.value(v, 5, 10)[0])))
def test_clamp_matches_twin_and_order(values, lo, hi):
    a = np.array(values, dtype=np.uint16)
    out, twin = np.empty_like(a), np.empty_like(a)
    hvx.fp16_clamp(a, out, lo, hi)
    hvx.fp16_clamp_twin(a, twin, lo, hi)
    assert out.tolist() == twin.tolist()


def test_relu_and_clamp_values():
    a = np.array([0x8000, 0x0000, 0xBC00, 0x3C00, 0x7E00, 0x4A00], dtype=np.uint16)  # -0 .. 12
    out = np.empty_like(a)
    hvx.fp16_clamp(a, out, 0x0000, 0x7C00)
    assert out.tolist() == [0x0000, 0x0000, 0x0000, 0x3C00, 0x7E00, 0x4A00]
    hvx.fp16_clamp(a, out, 0xBC00, 0x4600)  # [-1, 6]
    assert out.tolist() == [0x8000, 0x0000, 0xBC00, 0x3C00, 0x7E00, 0x4600]
    hvx.fp16_clamp(a, out, 0x4600, 0xBC00)  # lo above hi: min(max(x, lo), hi) is hi
    assert out.tolist() == [0xBC00] * 4 + [0x7E00, 0xBC00]


def test_hvx_instructions_in_a_trace():
    m = hwsim.machine("hmx")
    vtcm = m.memory("vtcm")
    x = (np.arange(200) / 16 - 6).astype(np.float16)
    y = (np.arange(200)[::-1] / 8).astype(np.float16)
    vtcm.write(0x0, x)
    vtcm.write(0x400, y)
    rows = np.array([[0.5, 2.0, -1.0]] * 40, dtype=np.float16)  # b_i, s, b_o per filter
    vtcm.write(0x800, rows)
    r = m.run("hvx_add(0x1000, 0x0, 0x400, 200)\nhvx_mul(0x1400, 0x0, 0x400, 200)\n"
              "hvx_clamp(0x1800, 0x0, 200, 0xbc00, 0x4600)\nhvx_pack_bias(0x2000, 0x800, 40, 2)\n")
    f = lambda addr: vtcm.read(addr, 400).view(np.float16)  # noqa: E731
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    assert (f(0x1000) == (x64 + y64).astype(np.float16)).all()
    assert (f(0x1400) == (x64 * y64).astype(np.float16)).all()
    assert (f(0x1800) == np.clip(x, -1, 6)).all()
    assert (vtcm.read(0x2000, 512) == L.pack_bias(rows[:, 1], rows[:, 2], rows[:, 0], 2)).all()
    # 400 bytes = 4 vectors each at 1 cycle; 4 bias vectors at 11.5; add and mul move 3 x 400
    # bytes through the 256 B/cycle port, a cycle more than their own 4
    hvx_stats = r.stats["units"]["hvx"]
    assert hvx_stats["busy"] == 4 + 4 + 4 + int(np.ceil(4 * 11.5))
    assert hvx_stats["stalls"]["port vtcm.hvx"] == 2


@pytest.mark.parametrize("mask", [0b11100, 0b00011, 0b10101])
def test_hvx_pack_and_unpack_match_layouts(mask):
    m = hwsim.machine("hmx")
    vtcm = m.memory("vtcm")
    x = (np.random.default_rng(mask).standard_normal((5, 9, 40))).astype(np.float16)
    vtcm.write(0x20000, x)
    n = int(np.prod(L.crouton_grid(5, 9, 40, mask))) * 2048
    m.run(f"hvx_pack_act(0x0, 0x20000, 5, 9, 40, {mask})\n"
          f"hvx_unpack_act(0x30000, 0x0, 5, 9, 40, {mask})\n")
    assert (vtcm.read(0x0, n) == L.pack_nhwc(x, mask)).all()
    assert (vtcm.read(0x30000, x.nbytes) == x.view(np.uint8).reshape(-1)).all()
