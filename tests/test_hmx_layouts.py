"""HMX VTCM layouts: round trips, and the manual's own address orders."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hwsim.targets.hmx import layouts as L
from hwsim.targets.hmx.machine import single_rows
from tests.profiles import examples

rng = np.random.default_rng(7)


def random_fp16(*shape):
    return rng.integers(0, 1 << 16, shape).astype(np.uint16).view(np.float16)


def test_crouton_follows_write_act_vtcm():
    # section 3.1: for vec, for ch, for sp_in_vec: spatial vec * 2 + sp_in_vec, channel ch
    cells = random_fp16(32, 32)
    manual = [cells[vec * 2 + sp, ch] for vec in range(16) for ch in range(32) for sp in range(2)]
    packed = L.pack_crouton(cells)
    assert packed.tobytes() == np.array(manual, dtype=np.float16).tobytes()
    assert (L.unpack_crouton(packed) == cells.view(np.uint16)).all()
    # the first 32 bits hold spatials 0 and 1 of channel 0 (Figure 4)
    assert packed[:4].view(np.uint16).tolist() == cells[:2, 0].view(np.uint16).tolist()


def test_weights_follow_write_wgt_vtcm():
    w = random_fp16(32, 32)  # [o, i]
    manual = [w[o, vec * 2 + i] for vec in range(16) for o in range(32) for i in range(2)]
    packed = L.pack_weights(w)
    assert packed.tobytes() == np.array(manual, dtype=np.float16).tobytes()
    # Figure 8: the FP16 at byte address 4 is output channel 1, input channel 0
    assert packed[4:6].view(np.float16)[0].view(np.uint16) == w[1, 0].view(np.uint16)
    assert (L.weights_matrix(packed) == w.view(np.uint16).T).all()


@settings(max_examples=examples(40), deadline=None)
@given(k_out=st.integers(1, 70), k_in=st.integers(1, 70))
def test_weights_round_trip(k_out, k_in):
    w = random_fp16(k_out, k_in)
    packed = L.pack_weights(w)
    assert packed.size == -(-k_out // 32) * L.weight_vectors(k_in) * 128
    assert (L.unpack_weights(packed, k_out, k_in).view(np.uint16) == w.view(np.uint16)).all()


@settings(max_examples=examples(60), deadline=None)
@given(h=st.integers(1, 20), w=st.integers(1, 20), c=st.integers(1, 70), mask=st.integers(0, 31))
def test_nhwc_round_trip(h, w, c, mask):
    x = random_fp16(h, w, c)
    packed = L.pack_nhwc(x, mask)
    th, tw, groups = L.crouton_grid(h, w, c, mask)
    assert packed.size == th * tw * groups * 2048
    assert (L.unpack_nhwc(packed, h, w, c, mask).view(np.uint16) == x.view(np.uint16)).all()


def test_nhwc_crouton_order_and_spatial_mask():
    # mask 11100: croutons 4 wide and 8 tall, s = 4 y + x (section 2.2.1: "4x8 spatial croutons")
    grid = L.spatial_grid(0b11100)
    assert grid.shape == (8, 4) and grid[5, 0] == 20 and grid[7, 3] == 31
    x = random_fp16(8, 8, 64)
    packed = L.pack_nhwc(x, 0b11100).reshape(4, 2048)  # (tile column, channel group)
    crouton = L.unpack_crouton(packed[3])  # tile column 1, channels 32-63
    assert crouton[4 * 6 + 2, 5] == x[6, 4 + 2, 32 + 5].view(np.uint16)
    tall = L.pack_nhwc(random_fp16(32, 1, 32), 0b11111)  # all Y bits: one column of 32
    assert tall.size == 2048


def test_bias_sets_split_low_and_high_halves():
    words = rng.integers(0, 1 << 63, 64, dtype=np.int64).astype(np.uint64)
    packed = L.pack_bias_words(words)
    low = packed[:128].view("<u4")
    high = packed[128:256].view("<u4")
    assert (low == (words[:32] & np.uint64(0xFFFFFFFF))).all()
    assert (high == (words[:32] >> np.uint64(32))).all()
    assert (L.unpack_bias_words(packed) == words).all()
    # write_bias_vtcm (section 3.1): scale 1.0 in bits [15:0] of each low word
    fields = L.unpack_bias(L.pack_bias(np.ones(32), 0.5, -2.0, 2))
    assert (fields["scale"] == 0x3C00 << 4).all() and (fields["shape"] == 2).all()
    assert (fields["output_bias"] == 0x3800 << 4).all()
    assert (fields["input_bias"] == 0xC000 << 5).all()
    assert L.pack_bias(np.ones(32))[:4].view("<u4")[0] == 0x3C00
    raw = dict(input_bias=[0x1FFFFF], shape=[7], scale=[0xFFFFF], output_bias=[0x12345])
    assert {k: v[0] for k, v in L.unpack_bias(L.pack_bias_fields(**raw)).items()} == \
        {k: v[0] for k, v in raw.items()}


def test_single_row_map_of_figure_24():
    rows = single_rows(0b10100, 0b11100)  # Y = 5
    assert rows[0] == 20 and rows[1] == 21  # "spatial 21 is stored in accumulator spatial 1"
    assert rows[31] == 32 + 19  # "spatial 19 of the 2nd crouton ... accumulator spatial 31"
    assert rows[11] == 31 and rows[12] == 32 + 0
    assert (single_rows(0, 0b11100) == np.arange(32)).all()


@pytest.mark.parametrize("bad, message", [
    (lambda: L.pack_crouton(np.zeros((32, 31), np.float16)), "expected shape"),
    (lambda: L.unpack_crouton(np.zeros(100, np.uint8)), "expected 2048 bytes"),
    (lambda: L.pack_nhwc(np.zeros((2, 2), np.float16), 0), r"expected an \(H, W, C\)"),
    (lambda: L.pack_weights(np.zeros((2, 2), np.float32)), "expected float16"),
    (lambda: L.spatial_grid(32), "5 bits"),
    (lambda: L.unpack_bias_words(np.zeros(100, np.uint8)), "multiple of 256"),
])
def test_bad_shapes_are_clear_errors(bad, message):
    with pytest.raises((ValueError, TypeError), match=message):
        bad()


@settings(max_examples=examples(60), deadline=None)
@given(h=st.integers(1, 13), w=st.integers(1, 40), c=st.integers(1, 70),
       mask=st.integers(0, 31), start=st.integers(0, 5))
def test_hvx_layout_kernels_match_the_layouts(h, w, c, mask, start):
    from hwsim.targets.hmx import hvx_kernels as K
    tensor = random_fp16(h, w, c)
    grid = L.spatial_grid(mask)
    words = np.concatenate([random_fp16(start), tensor.reshape(-1)]).view(np.uint16)
    packed = L.pack_nhwc(tensor, mask).view(np.uint16)
    out = random_fp16(packed.size).view(np.uint16)  # stale contents: padding is rewritten
    K.pack_act(words, start, h, w, c, grid, out)
    assert (out == packed).all()
    back = np.empty(h * w * c, dtype=np.uint16)
    K.unpack_act(np.concatenate([words[:start], packed]), start, h, w, c, grid, back)
    assert (back == L.unpack_nhwc(packed.view(np.uint8), h, w, c, mask).view(np.uint16)
            .reshape(-1)).all()
