"""The GAP9 quantisation formulas of GreenWaves' note (docs/sources.md#gap9-quantisation), on
worked numbers."""

import numpy as np
import pytest

from hwsim.errors import ProgramError
from hwsim.targets.gap9 import quant


def test_asymmetric_activation():
    # r in [-1, 3] on int8: S = 4/255, zero at q = -128 + 63.75 -> -64
    s, z = quant.asymmetric(-1.0, 3.0, 8)
    assert s == pytest.approx(4 / 255) and z == -64
    # unsigned 8 bit: the note's |qmin - rmin/S| = 63.75 -> 64
    assert quant.asymmetric(-1.0, 3.0, 8, signed=False) == (pytest.approx(4 / 255), 64)
    # 16 bit, all positive range: zero at qmin
    s16, z16 = quant.asymmetric(0.0, 6.5535, 16)
    assert s16 == pytest.approx(1e-4) and z16 == -32768
    q = quant.quantize([0.0, -1.0, 3.0], s, z)
    assert q.tolist() == [-64, -128, 127]


@pytest.mark.parametrize("bits, formula, clipped", [(8, (-128, 126), (-127, 127)),
                                                    (4, (-8, 6), (-7, 7)),
                                                    (3, (-4, 2), (-3, 3))])
def test_symmetric_ranges_both_readings(bits, formula, clipped):
    assert quant.symmetric_range(bits) == formula
    assert quant.symmetric_range(bits, "clipped") == clipped


def test_two_bit_weights_need_the_clipped_reading():
    with pytest.raises(ProgramError, match="use reading='clipped'"):
        quant.symmetric_range(2)
    assert quant.symmetric_range(2, "clipped") == (-1, 1)


def test_symmetric_per_channel_weights():
    # channel 0: max |r| on the negative side; channel 1: on the positive side
    s = quant.symmetric([-0.64, -0.1], [0.5, 1.26], 8)
    assert s == pytest.approx([0.64 / 128, 1.26 / 126])
    s_c = quant.symmetric([-0.64, -0.1], [0.5, 1.26], 8, "clipped")
    assert s_c == pytest.approx([0.64 / 127, 1.26 / 127])
    w = quant.quantize(np.array([[-0.64, 0.5], [-0.1, 1.26]]), s, q_range=(-128, 126))
    assert w.tolist() == [[-128, 100], [-10, 126]]


def test_bias_scale_and_zero_point_folding():
    s_x, s_w = 0.02, np.array([0.001, 0.004])
    assert quant.bias([0.5, -0.3], s_x, s_w).tolist() == [25000, -3750]     # S_b = S_x S_w
    w = np.array([[1, -2, 3], [4, 0, -1]])
    # B' = B - Z_x sum(W) (Z_w = 0 for symmetric weights)
    assert quant.fold_zero_points([10, 20], w, z_x=-5).tolist() == [20, 35]
    assert quant.fold_zero_points([10, 20], w, z_x=2, z_w=1).tolist() == [12, 20]


def test_requantisation_factor_is_unsigned_8_bit():
    # S_x S_w / S_y = 0.02 * 0.001 / 0.05 = 0.0004 -> M = 210, N = 19 (210 / 2^19 = 0.00040054)
    m, n = quant.requant(0.02, [0.001], 0.05)
    assert m.tolist() == [210] and n.tolist() == [19]
    m, n = quant.fixed_point([0.75, 1.5, 200.0])
    assert m.tolist() == [192, 192, 200] and n.tolist() == [8, 7, 0]
    assert np.all(m <= 255) and np.all(n <= 255)
    with pytest.raises(ProgramError, match="outside"):
        quant.fixed_point([300.0])


def test_matadd_both_readings():
    # S_a = 0.1 > S_b = 0.04: the formula rescales B by 0.4 into A's range, then times 0.1/S_y
    assert quant.matadd(0.1, 0.04, 0.2) == ("b", pytest.approx(0.4), pytest.approx(0.5))
    assert quant.matadd(0.04, 0.1, 0.2) == ("a", pytest.approx(0.4), pytest.approx(0.5))
    # the prose: the input with the greater S is rescaled (by S_a/S_b = 2.5)
    assert quant.matadd(0.1, 0.04, 0.2, "prose") == ("a", pytest.approx(2.5),
                                                      pytest.approx(0.2))
    # either way y = S_a (A - Z_a) + S_b (B - Z_b) over S_y
    a, b = 7, -3
    for reading in ("formula", "prose"):
        which, inner, outer = quant.matadd(0.1, 0.04, 0.2, reading)
        kept, moved = (a, b) if which == "b" else (b, a)
        assert outer * (kept + inner * moved) == pytest.approx((0.1 * a + 0.04 * b) / 0.2)


def test_concat_softmax_scales():
    assert quant.common_scale([0.01, 0.05, 0.02]) == 0.05
    assert quant.pow2_scale(0.3) == 0.5 and quant.pow2_scale(0.25) == 0.25
    assert quant.SOFTMAX_OUTPUT == (16, 2.0 ** -15)


def test_tosa_rescale_to_ne16_scale_and_shift():
    # TOSA 1<<30, shift 38 is 2^-8 exactly: 8-bit scale 128, shift 15
    scale, shift, dev = quant.ne16_scale_shift([1 << 30], [38])
    assert (scale * 2.0 ** -shift).tolist() == [2.0 ** -8] and dev.tolist() == [0.0]
    # 0.000123 with an 8-bit scale: nearest within 1/2 of the scale's last bit
    m, s = int(0.000123 * 2 ** 45), 45
    scale, shift, dev = quant.ne16_scale_shift([m], [s])
    assert scale[0] <= 255 and shift[0] <= 31 and abs(dev[0]) < 0.5 / 128
    # a 16-bit scale is finer, a 5-bit shift range limits tiny factors
    _, _, dev16 = quant.ne16_scale_shift([m], [s], norm_bits=16)
    assert abs(dev16[0]) < abs(dev[0])
    scale, shift, dev = quant.ne16_scale_shift([3 << 29], [62])     # 1.5 x 2^-32
    assert (scale[0], shift[0], dev[0]) == (1, 31, pytest.approx(1 / 3))     # 2^-31 nearest
    scale, shift, dev = quant.ne16_scale_shift([1 << 29], [62])     # 2^-33: 0 is nearest
    assert (scale[0], shift[0], dev[0]) == (0, 31, -1.0)
