"""The generic bit-field codec."""

import gc

import numpy as np
import pytest
from hypothesis import given, strategies as st

import hwsim.isa.gap9  # noqa: F401  (the ISA tables, whose words the tests below decode)
import hwsim.isa.hmx  # noqa: F401
import hwsim.isa.ne16  # noqa: F401
import hwsim.isa.sme  # noqa: F401
from hwsim.errors import EncodingError
from hwsim.isa.fields import Const, Field, Reserved, Word

ACT_RT = Word("act.Rt", [
    Field("dy", "31:11", signed=True, in_place=True),
    Field("spatial_mask", "10:7,1"),
    Field("channel_stop", "6:2"),
    Reserved("0:0"),
])


def test_split_field_msb_first():
    # the HMX manual's example: mask 0b11100 -> ((m >> 1) << 7) | ((m & 1) << 1)
    word = ACT_RT.encode(spatial_mask=0b11100, channel_stop=31)
    assert word == ((0b11100 >> 1) << 7) | (31 << 2) | ((0b11100 & 1) << 1)
    assert ACT_RT.decode(word)["spatial_mask"] == 0b11100


def test_signed_in_place_field():
    word = ACT_RT.encode(dy=-2048)
    assert word >> 11 == (1 << 21) - 1
    assert ACT_RT.decode(word)["dy"] == -2048
    with pytest.raises(EncodingError, match="dy"):
        ACT_RT.encode(dy=100)  # not a multiple of 2048


def test_reserved_bits_are_checked_with_the_field_name():
    with pytest.raises(EncodingError, match=r"act.Rt: field reserved\[0:0\] = 1, expected zero"):
        ACT_RT.decode(1)


def test_ones_reserved_and_const():
    w = Word("w", [Const("31:28", 0b1010), Field("x", "27:4"), Reserved("3:0", ones=True)])
    assert w.encode(x=5) == 0xA000005F
    assert w.matches(0xA000005F) and not w.matches(0xB000005F)
    with pytest.raises(EncodingError, match="opcode"):
        w.decode(0xB000005F)


def test_table_is_checked_when_built():
    with pytest.raises(ValueError, match="overlap"):
        Word("bad", [Field("a", "7:4"), Field("b", "4:0")], width=8)
    with pytest.raises(ValueError, match="not covered"):
        Word("bad", [Field("a", "7:4")], width=8)
    with pytest.raises(ValueError, match="outside"):
        Word("bad", [Field("a", "8:0")], width=8)


def test_allowed_values():
    w = Word("w", [Field("n", "3:0", allowed=lambda v: v % 2 == 0, expect="an even number")],
             width=4)
    with pytest.raises(EncodingError, match="expected an even number"):
        w.decode(3)


@given(st.integers(0, (1 << 32) - 1))
def test_decode_encode_round_trip(word):
    try:
        values = ACT_RT.decode(word)
    except EncodingError:
        assert word & 1
        return
    assert ACT_RT.encode(**values) == word


@given(st.integers(0, (1 << 32) - 1))
def test_fields_of_is_decode_of_encode(word):
    # fields_of gives what encoding and decoding give, and fails where either fails
    try:
        values = ACT_RT.decode(word)
    except EncodingError:
        return
    assert ACT_RT.fields_of(values) == values
    partial = {k: v for k, v in values.items() if v}
    assert ACT_RT.fields_of(partial) == ACT_RT.decode(ACT_RT.encode(**partial))


def test_fields_of_raises_the_codec_errors():
    with pytest.raises(EncodingError, match="dy"):
        ACT_RT.fields_of({"dy": 100})                # not a multiple of 2048
    with pytest.raises(EncodingError, match="channel_stop"):
        ACT_RT.fields_of({"channel_stop": 32})       # 5 bits
    with pytest.raises(EncodingError, match="nope"):
        ACT_RT.fields_of({"nope": 1})
    w = Word("w", [Field("n", "3:0", allowed=lambda v: v % 2 == 1, expect="an odd number")],
             width=4)
    with pytest.raises(EncodingError, match="expected an odd number"):
        w.fields_of({})                              # the unnamed field's zero, as decode


@pytest.mark.parametrize("shape", [(), (7,), (3, 5)])
def test_decode_array_is_decode_of_each_word(shape):
    """``decode_array`` (every piece of every field at once) against ``decode`` word by word,
    on every word of the ISA tables, signed and split fields among them."""
    words = [w for w in gc.get_objects() if isinstance(w, Word)]
    rng = np.random.default_rng(len(shape))
    for word in words:
        values = rng.integers(0, 1 << min(word.width, 63), size=shape, dtype=np.uint64)
        if word.width == 64:
            values |= rng.integers(0, 2, size=shape).astype(np.uint64) << np.uint64(63)
        found = word.decode_array(values)
        want = [word.decode(int(v), check=False) for v in values.reshape(-1)]
        assert list(found) == list(word.fields)
        for name, array in found.items():
            assert array.shape == shape and array.dtype == np.int64
            assert array.reshape(-1).tolist() == [w[name] for w in want], (word.name, name)
