"""NE16 layouts (pack/unpack inverses, known bytes) and the register table."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hwsim.errors import EncodingError, ProgramError
from hwsim.isa import ne16 as isa
from hwsim.targets.gap9.ne16 import layout
from tests.profiles import examples


@settings(max_examples=examples(40), deadline=None)
@given(bits=st.integers(1, 8), cout=st.integers(1, 40), cin=st.integers(1, 40),
       kernel=st.sampled_from([1, 3]), mode16=st.booleans(), depthwise=st.booleans(),
       seed=st.integers(0, 1 << 30))
def test_conv_weights_round_trip(bits, cout, cin, kernel, mode16, depthwise, seed):
    rng = np.random.default_rng(seed)
    shape = (cout, 1 if depthwise else cin, kernel, kernel)
    w = rng.integers(0, 1 << bits, shape).astype(np.uint8)
    packed = layout.pack_conv_weights(w, bits, mode16, depthwise)
    rows, cols = (1, cout) if depthwise else (cout, cin)
    assert packed.size == layout.conv_weight_bytes(rows, cols, kernel * kernel, bits, mode16)
    back = layout.unpack_conv_weights(packed, bits, *shape, mode16=mode16, depthwise=depthwise)
    assert np.array_equal(back, w)


@settings(max_examples=examples(30), deadline=None)
@given(bits=st.integers(1, 8), cout=st.integers(1, 20), cin=st.integers(1, 300),
       seed=st.integers(0, 1 << 30))
def test_linear_weights_round_trip(bits, cout, cin, seed):
    w = np.random.default_rng(seed).integers(0, 1 << bits, (cout, cin)).astype(np.uint8)
    packed = layout.pack_linear_weights(w, bits)
    assert packed.size == cout * bits * -(-cin // 16) * 2
    assert np.array_equal(layout.unpack_linear_weights(packed, bits, cout, cin), w)


@pytest.mark.parametrize("values, zero", [([[4]], 0), ([[-1]], 0), ([[300]], 0), ([[1]], 4),
                                          ([[1]], -1)])
def test_weights_or_padding_beyond_their_bits_are_refused(values, zero):
    """A weight or padding code outside 0..2^bits - 1 is refused, not wrapped into a byte."""
    w = np.array(values, np.int64)
    with pytest.raises(ProgramError, match="do not fit 2 unsigned bits"):
        layout.pack_linear_weights(w, 2, zero)
    with pytest.raises(ProgramError, match="do not fit 2 unsigned bits"):
        layout.pack_conv_weights(w[:, :, None, None], 2, zero=zero)


def test_bit_plane_bytes_are_lsb_first_per_16_channels():
    # one output channel, 16 inputs, 1x1, 2 bits: weights 1, 2, 3, 0, ...
    w = np.zeros((1, 16, 1, 1), np.uint8)
    w[0, :3, 0, 0] = [1, 2, 3]
    w[0, 9, 0, 0] = 2
    # bit 0 plane: channels 0 and 2 -> 0b101; bit 1 plane: channels 1, 2 and 9 -> 0b110, 0b10
    assert layout.pack_conv_weights(w, 2).tolist() == [0b101, 0, 0b110, 0b10]
    # 3x3: (cout, cin/16, bits, 9 taps, 2 bytes): tap 4 of channel 0 = 1 in bit-plane 0
    w3 = np.zeros((1, 1, 3, 3), np.uint8)
    w3[0, 0, 1, 1] = 1
    assert np.flatnonzero(layout.pack_conv_weights(w3, 2)).tolist() == [8]
    # 16-bit mode: 8 channels a byte, one byte per tap
    assert layout.pack_conv_weights(w[:, :8], 2, mode16=True).tolist() == [0b101, 0b110]


def test_signed_weights_and_norm_parameters():
    assert layout.weight_offset(4) == -8
    assert layout.to_unsigned([-8, 0, 7], 4).tolist() == [0, 8, 15]
    with pytest.raises(ProgramError, match="signed 4-bit range"):
        layout.to_unsigned([8], 4)
    for bits in (8, 16, 32):
        s = np.array([1, 200, (1 << bits) - 1])
        assert np.array_equal(layout.unpack_scale(layout.pack_scale(s, bits), bits), s)
    assert layout.pack_bias([-1]).tolist() == [255, 255, 255, 255]
    with pytest.raises(ProgramError, match="0..63"):
        layout.pack_shift([64])


def test_register_table():
    assert [r.offset for r in isa.REGISTERS[:3]] == [0x20, 0x24, 0x28]
    assert isa.register("config0").offset == 0x20 + 4 * 23
    word = isa.encode_fields(isa.register("CONFIG0"), {"filter_mode": "1x1", "out_mode": "32bit",
                                                       "weight_bits_m1": 3, "norm_bias": 1})
    assert word == (2 << 5) | (2 << 21) | 3 | (1 << 25)
    assert isa.CONFIG0.decode(word)["filter_mode"] == 2
    assert isa.encode_fields(isa.register("SUBTILE_NB0"), {"ko": 2, "ki": 5}) == 0x20005
    with pytest.raises(EncodingError, match="PADDING: field value = 0x10000"):
        isa.PADDING.encode(value=1 << 16)
    with pytest.raises(EncodingError, match="has no fields"):
        isa.encode_fields(isa.register("WEIGHTS_PTR"), {"x": 1})
    assert isa.word(-1) == 0xFFFFFFFF


def test_docs_config0_table_is_the_register_table():
    from pathlib import Path
    page = (Path(__file__).resolve().parents[1] / "docs" / "gap9.md").read_text()
    table = page.split("<!-- config0 table")[1].split("<!-- /config0 table -->")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == [f"| {bits} | {name} | {doc} |" for bits, name, doc in
                        isa.CONFIG0.describe()]
