"""SME GEMM operand layouts: panels round-trip; a convolution's panels against direct loops, the
depthwise block-diagonal form against the convolution, and both against a NumPy twin (im2col,
per-group matrices, ``pack_panels``) over random geometries; BF16 conversion against the
exact-rational oracle."""

from fractions import Fraction

import numpy as np
from hypothesis import assume, given, settings, strategies as st

from hwsim.targets.sme import layouts
from tests import oracle
from tests.profiles import examples


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(1, 70), st.integers(1, 30), st.sampled_from([16, 32]), st.integers(1, 2),
       st.sampled_from([1, 2, 4]))
def test_panels_round_trip_and_place_each_value(r, k, rows, vectors, depth):
    mat = np.arange(r * k, dtype=np.int64).reshape(r, k) + 1
    flat = layouts.pack_panels(mat, rows, vectors, depth)
    assert flat.size == layouts.panel_elements(r, k, rows, vectors, depth)
    assert np.array_equal(layouts.unpack_panels(flat, r, k, rows, vectors, depth), mat)
    block, steps = rows * vectors, -(-k // depth)
    i, j = r - 1, k - 1                 # the last value sits where the formula says
    b, v, row = i // block, i % block // rows, i % rows
    at = (((b * steps + j // depth) * vectors + v) * rows + row) * depth + j % depth
    assert flat[at] == mat[i, j] and np.count_nonzero(flat) == r * k


def _im2col(x, kernel, stride, pad, dilation, fill):
    """The twin's ``[pixels, KH * KW * C]`` matrix, from sliding windows."""
    win = layouts.windows(x, kernel, stride, pad, dilation, fill)
    return win.reshape(-1, win.shape[3] * win.shape[4] * win.shape[5])


def _twin(x, kernel, stride, pad, dilation, group, rows, vectors, depth, fill):
    """``conv_panels`` the NumPy way: the im2col matrix or, per channel group, its depthwise
    matrix (k = (channel, tap), taps padded with ``fill``), each through ``pack_panels``."""
    cols = _im2col(x, kernel, stride, pad, dilation, fill)
    mats = [cols]
    if group:
        pixels, channels = cols.shape[0], x.shape[3]
        taps = kernel[0] * kernel[1]
        per_tap = cols.reshape(pixels, taps, channels)
        mats = []
        for g in range(0, channels, group):
            block = np.full((pixels, group, layouts.padded(taps, depth)), fill, x.dtype)
            chunk = per_tap[:, :, g:g + group].transpose(0, 2, 1)
            block[:, :chunk.shape[1], :taps] = chunk
            mats.append(block.reshape(pixels, -1))
    return np.concatenate([layouts.pack_panels(m, rows, vectors, depth, fill) for m in mats])


def test_conv_panels_hold_the_im2col_matrix_with_padding_stride_and_dilation():
    rng = np.random.default_rng(0)
    x = rng.integers(-9, 9, (2, 7, 6, 3)).astype(np.int16)
    kernel, stride, pad, dilation = (3, 2), (2, 1), (1, 2, 0, 1), (1, 2)
    flat = layouts.conv_panels(x, kernel, stride, pad, dilation, 0, 16, 2, 4, fill=100)
    rows = []
    for n in range(2):
        for oy in range((7 + 3 - 3) // 2 + 1):
            for ox in range((6 + 1 - 3) // 1 + 1):
                row = []
                for ky in range(3):
                    for kx in range(2):
                        y, c = oy * 2 + ky - 1, ox + kx * 2
                        inside = 0 <= y < 7 and 0 <= c < 6
                        row.extend(x[n, y, c] if inside else [100] * 3)
                rows.append(row)
    cols = np.array(rows)
    assert np.array_equal(layouts.unpack_panels(flat, *cols.shape, 16, 2, 4), cols)
    assert np.array_equal(_im2col(x, kernel, stride, pad, dilation, 100), cols)


def test_depthwise_as_block_diagonal_gemm_equals_the_convolution():
    rng = np.random.default_rng(1)
    x = rng.integers(-9, 9, (1, 5, 4, 20))
    w = rng.integers(-9, 9, (3, 3, 20, 1))
    taps = 12
    flat = layouts.conv_panels(x, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 16, 16, 1, 4)
    xs = [layouts.unpack_panels(part, 20, 16 * taps, 16, 1, 4) for part in np.split(flat, 2)]
    ws = layouts.depthwise_weights(w, 16, taps)
    out = np.concatenate([xg @ wg.T for xg, wg in zip(xs, ws)], axis=1)[:, :20]
    xp = np.pad(x[0], ((1, 1), (1, 1), (0, 0)))
    want = np.stack([(xp[y:y + 3, c:c + 3] * w[:, :, :, 0]).sum(axis=(0, 1))
                     for y in range(5) for c in range(4)])
    assert np.array_equal(out, want)


def _pair(lo, hi):
    return st.tuples(st.integers(lo, hi), st.integers(lo, hi))


@settings(max_examples=examples(60), deadline=None)
@given(n=st.integers(1, 2), h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 40),
       kernel=_pair(1, 3), stride=_pair(1, 2), pad=st.tuples(*[st.integers(0, 2)] * 4),
       dilation=_pair(1, 2), group=st.sampled_from([0, 4, 16]), rows=st.sampled_from([4, 16]),
       vectors=st.integers(1, 2), depth=st.sampled_from([1, 2, 4]),
       dtype=st.sampled_from([np.int16, np.int64, np.float32]), fill=st.integers(-128, 127),
       seed=st.integers(0, 2**32 - 1))
def test_conv_panels_equal_the_numpy_twin(n, h, w, c, kernel, stride, pad, dilation, group,
                                          rows, vectors, depth, dtype, fill, seed):
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    assume(h + pad[0] + pad[1] >= span[0] and w + pad[2] + pad[3] >= span[1])
    x = np.random.default_rng(seed).integers(-128, 128, (n, h, w, c)).astype(dtype)
    args = (kernel, stride, pad, dilation, group, rows, vectors, depth, fill)
    got = layouts.conv_panels(x, *args)
    want = _twin(x, *args)
    assert got.dtype == want.dtype == dtype and np.array_equal(got, want)


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(0, (1 << 32) - 1))
def test_bf16_conversion_rounds_to_nearest_even(bits):
    x = np.array([bits], np.uint32).view(np.float32)
    got = int(layouts.bf16_bits(x)[0])
    v = oracle.fmt_value(bits, 8, 23)
    if v == "nan":
        assert got & 0x7F80 == 0x7F80 and got & 0x7F and got & 0x40
        return
    if isinstance(v, float):
        assert got == (bits >> 16)
        return
    want = oracle.round_to(abs(Fraction(v)), 8, 7) | (bits >> 31) << 15
    assert got == want
    assert layouts.bf16_values(np.uint16([got])).view(np.uint32)[0] == got << 16


def test_bf16_conversion_of_an_array_is_that_of_each_element():
    """The array path (NaNs replaced after the rounding) gives each element what it gives
    alone, which the test above checks against the oracle: every rounding boundary of every
    exponent, the NaNs of both signs, the infinities and random patterns, shaped 2-D."""
    exponent = np.arange(256, dtype=np.uint32)[:, None] << 23
    low = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x10000, 0x17FFF, 0x18000, 0x18001,
                    0x7F7FFF, 0x7F8000, 0x7FFFFF], np.uint32)
    bits = (exponent | low).reshape(-1)
    bits = np.concatenate([bits, bits | 1 << 31, np.random.default_rng(3).integers(
        0, 1 << 32, 4096, dtype=np.uint64).astype(np.uint32)])
    x = bits[:len(bits) // 2 * 2].view(np.float32).reshape(2, -1)
    assert np.isnan(x).any() and np.isinf(x).any()
    each = np.array([layouts.bf16_bits(v[None])[0] for v in x.reshape(-1)], np.uint16)
    assert np.array_equal(layouts.bf16_bits(x).reshape(-1), each)
