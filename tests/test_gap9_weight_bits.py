"""--weight-bits 2..8 on GAP9: RESCALE scales below 2^-32 keep shift 62 with a smaller
multiplier (checked against an exact rational oracle at the edges), NE16's normalisation rounds a
factor below its smallest step to scale 0, and the four MLPerf Tiny models run at every weight
width in both numeric modes."""

from fractions import Fraction

import numpy as np
import pytest

from hwsim.errors import TosaError
from hwsim.schedule import estimate
from hwsim.tosa.builder import GraphBuilder, quantize_scale

from tests.models import model

MLPERF = ["kws_ref_model", "vww_96_int8", "resnet8_int8", "ad01_int8"]


def oracle(scale: float, bits: int) -> tuple[int, int]:
    """The closest multiplier * 2^-shift to ``scale`` with 0 <= multiplier < 2^bits and
    2 <= shift <= 62, ties to the even multiplier: the largest shift whose rounded multiplier
    still fits (a larger shift is a finer step), in exact rational arithmetic."""
    exact = Fraction(scale)
    for shift in range(62, 1, -1):
        multiplier = round(exact * 2 ** shift)      # Fraction rounds half to even
        if multiplier < 1 << bits:
            return multiplier, shift
    raise TosaError("RESCALE", "too large")


EDGES = [2.0 ** -32, 2.0 ** -32 * (1 - 2 ** -40), 2.0 ** -33, 2.2897e-10, 3 * 2.0 ** -40,
         2.0 ** -62, 1.5 * 2.0 ** -62, 2.0 ** -63, 1.5 * 2.0 ** -63, 2.0 ** -64, 1e-300,
         5e-324, 1.0, 0.75, (2 ** 31 - 1) / 2 ** 33, 2.0 ** 28 * (2 - 2.0 ** -30)]


@pytest.mark.parametrize("scale", EDGES)
@pytest.mark.parametrize("scale32", [True, False])
def test_scale_encoding_matches_the_exact_oracle(scale, scale32):
    bits = 31 if scale32 else 15
    try:
        want = oracle(scale, bits)
    except TosaError:
        with pytest.raises(TosaError, match="outside 2..62"):
            quantize_scale(scale, scale32)
        return
    multiplier, shift = quantize_scale(scale, scale32)
    assert (multiplier, shift) == want
    error = abs(Fraction(multiplier, 2 ** shift) - Fraction(scale))
    assert error <= Fraction(1, 2 ** (shift + 1))
    if shift < 62:          # normalised while the shift allows it (TOSA 1.0 4.5.5)
        assert 1 << (bits - 1) <= multiplier < 1 << bits


def test_scales_past_shift_62_use_a_smaller_multiplier():
    assert quantize_scale(2.2897e-10) == (1055937748, 62)      # shift 63 before
    assert quantize_scale(2.0 ** -40) == (1 << 22, 62)
    assert quantize_scale(2.0 ** -64) == (0, 62)                 # rounds to 0 (allowed: >= 0)
    assert quantize_scale(2.0 ** -50, scale32=False) == (1 << 12, 62)
    with pytest.raises(TosaError, match="needs shift 1, outside 2..62"):
        quantize_scale(2.0 ** 29)


def test_vww_with_five_bit_weights_estimates_in_both_modes():
    """The failing case: channels with all-zero weights keep RESCALE factors down to 2.3e-10,
    which needed shift 63."""
    path = model("vww_96_int8.tflite")
    exact = estimate(path, "gap9", weight_bits=5, numerics=False)
    native = estimate(path, "gap9", mode="ne16", weight_bits=5, numerics=False)
    assert (exact.cycles, native.cycles) == (493805, 414732)


def test_an_ne16_factor_below_its_smallest_step_becomes_scale_0():
    """A live channel scaled by 2^-40: NE16's nearest scale is 0 (the channel outputs its zero
    point, as TOSA's RESCALE does here); the note bounds the error."""
    rng = np.random.default_rng(3)
    b = GraphBuilder("tiny")
    x = b.input((1, 4, 4, 32), "int8")
    w = b.const(rng.integers(-100, 101, (32, 1, 1, 32)), "int8")
    acc = b.conv2d(x, w, b.const(rng.integers(-900, 900, 32), "int32"))
    scales = np.full(32, 1 / 600)
    scales[5] = 2.0 ** -40
    report = estimate(b.build(b.rescale(acc, scales, "int8", output_zp=-5)), "gap9",
                      mode="ne16", check=True)
    notes = [n for r in report.layers for n in r.notes]
    assert any(n.startswith("1 channels scale by less than NE16's smallest step: scale 0, "
                            "off by at most 0.00") for n in notes), notes
    assert max(r.verdict.max_err for r in report.layers) <= 1
    assert np.all(report.outputs[next(iter(report.outputs))][..., 5] == -5)


@pytest.mark.slow
@pytest.mark.parametrize("name", MLPERF)
def test_mlperf_tiny_weight_bits_sweep(name):
    """Every width 2..8 in both modes, with numerics (the datapaths run on every layer)."""
    path = model(f"{name}.tflite")
    inputs = np.load(model("kws_sample_input.npy")) if name == "kws_ref_model" else None
    for mode in ("exact", "ne16"):
        cycles = [estimate(path, "gap9", mode=mode, weight_bits=bits, inputs=inputs).cycles
                  for bits in range(2, 9)]
        assert cycles == sorted(cycles)         # fewer weight bits, fewer NE16 cycles
