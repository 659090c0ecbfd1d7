"""The NE16 datapath compiled: one numba function computes a job straight from the L1 bytes.

``start(job, l1, bias_add, rounding)`` reads everything a job reads when it starts (weights,
input patches, streamin words, scale, shift and bias) and returns the commit that stores its
outputs, exactly as ``ne16_datapath.run_job`` does (its numpy twin: the same streamer address
arithmetic and arithmetic, and the sources, are documented there; the tests compare the two over
every mode). The differences are how, not what:

* one compiled call per job walks the registers' strides over the L1 bytes instead of gathering
  through index plans; the job's modes and geometry are one small integer array per job
  signature (``ne16_words``), the pointers are passed as they are;
* the weights (and linear mode's input vector) are gathered and decoded by the twin, in numpy,
  once per distinct set: the tiles of a layer read the same weights at the same address, so
  they are kept per job signature and pointer with a copy of the bytes they came from, and
  decoded again only when those bytes change (a weight block reloaded into the same slot);
* only the outputs the streamer stores are computed (positions past a patch's remainder, the
  skipped positions of strided mode and channels past the k_out remainder are not), and the
  commit writes them in streamer order (so a later store to the same byte wins, as there);
* a job that reads or writes outside L1 is handed to the twin, which raises the fault naming the
  stream (the kernel checks the same bytes the twin gathers).
"""

from __future__ import annotations

import numba
import numpy as np

from hwsim.memory.space import AddressSpace
from hwsim.targets.gap9 import ne16_datapath as twin
from hwsim.targets.gap9.ne16_job import Ne16Job
from hwsim.targets.gap9.ne16_words import (DEPTHWISE, FILTER, IN_D0, IN_D1, LINEAR, MODE16,
                                           NB_HO, NB_KI, NB_KO, NB_WO, NO_ROUND, NORM_BIAS,
                                           NORM_BITS, NORM_SHIFT, OUT_BITS, OUT_D0, OUT_D1,
                                           OUT_D2, PAD_B, PAD_L, PAD_R, PAD_T, PAD_VALUE,
                                           POINTWISE, QUANT, REM_HI, REM_HO, REM_KI, REM_KO,
                                           REM_WI, REM_WO, RELU, SHIFT, STREAMIN, STRIDED,
                                           last, words)

W_PTR, IN_PTR, OUT_PTR, SCALE_PTR, SHIFT_PTR, BIAS_PTR = range(6)    # register indices
OK, FAULT = 0, 1
_WEIGHTS: dict = {}         # (signature, WEIGHTS_PTR offset) -> (first byte, bytes, weights)
_WEIGHT_BYTES = 32 << 20    # decoded weights kept at most (then the cache starts again)


def start(job: Ne16Job, l1: AddressSpace, bias_add: str = "wrap", rounding: str = "none"):
    """Compute ``job`` from L1 now; returns the commit that stores its outputs."""
    g, shape = words(job)
    regs = job.regs
    w = _weights(job, l1)                        # a read outside L1 raises, as in the twin
    values = np.zeros(shape, np.int64)
    rest = (l1.data, l1.base, g, regs[OUT_PTR], regs[SCALE_PTR], regs[SHIFT_PTR],
            regs[BIAS_PTR], bias_add == "saturate", rounding == "config0", values)
    if job.linear:
        x = twin.linear_inputs(job, l1)
        x = np.ascontiguousarray(twin.as_channels(x, job.mode16)).reshape(-1)
        status = linear(x.astype(np.int32), w, *rest)
    elif job.depthwise:
        status = depthwise(regs[IN_PTR], w, *rest)
    else:
        status = conv(regs[IN_PTR], w.reshape(w.shape[0], -1), *rest)
    if status != OK:
        offsets, data = twin.run_job(job, l1, bias_add, rounding)     # raises the fault
        return lambda: l1.data.__setitem__(offsets, data)
    out = regs[OUT_PTR] - l1.base
    return lambda: store(l1.data, out, g, values)


def _weights(job: Ne16Job, l1: AddressSpace) -> np.ndarray:
    """The twin's effective weights (3x3 / 1x1 [K, KI, taps, channels], depthwise [K, 9],
    linear [K, KI * 256]), kept while the bytes they come from are unchanged."""
    off = job.regs[W_PTR] - l1.base
    key = (job.signature, off)
    found = _WEIGHTS.get(key)
    if found is not None:
        first, raw, w = found
        if l1.data[off + first:off + first + len(raw)].tobytes() == raw:
            return w
    w, first, end = twin.weights(job, l1)
    if sum(entry[2].nbytes for entry in _WEIGHTS.values()) + w.nbytes > _WEIGHT_BYTES:
        _WEIGHTS.clear()
    _WEIGHTS[key] = (first, l1.data[off + first:off + end].tobytes(), w)
    return w


# -- the kernels: one per mode, each ends with the same normalisation ---------------------------
@numba.njit(cache=True)
def conv(in_ptr, w, mem, base, g, out_ptr, scale_ptr, shift_ptr, bias_ptr, saturate,
         round_config0, values):
    """3x3 and 1x1 modes: fill ``values`` [positions, K] (zeros) with the output of every
    stored position and channel; ``OK``, or ``FAULT`` when the job reads or would write
    outside L1. Per stored position, the (ki, tap, channel) input vector times the weights
    ``w`` [K, KI * taps * channels] of each output channel."""
    valid = _valid(g)
    pointwise = g[FILTER] == POINTWISE
    side, taps = (3, 1) if pointwise else (5, 9)
    channels = 8 if g[MODE16] else 16
    nb_ki = g[NB_KI]
    xb = np.zeros((nb_ki, side, side, channels), np.int32)
    x = np.zeros(nb_ki * taps * channels, np.int32)
    for i in range(g[NB_HO]):
        for j in range(g[NB_WO]):
            if not _patch(mem, in_ptr - base, g, i, j, xb):
                return FAULT
            for p in range(9):
                if not _position(g, i, j, p)[0]:
                    continue
                pr, pc = p // 3, p % 3
                for ki in range(nb_ki):
                    for t in range(taps):
                        r, c = (pr, pc) if pointwise else (pr + t // 3, pc + t % 3)
                        at = (ki * taps + t) * channels
                        xr = xb[ki, r, c]
                        for q in range(channels):
                            x[at + q] = xr[q]
                m = (i * g[NB_WO] + j) * 9 + p
                for k in range(valid.size):
                    if valid[k]:
                        values[m, k] = _dot(x, w[k])
    return _normalise(mem, base, g, out_ptr, scale_ptr, shift_ptr, bias_ptr, saturate,
                      round_config0, values, valid)


@numba.njit(cache=True)
def depthwise(in_ptr, w, mem, base, g, out_ptr, scale_ptr, shift_ptr, bias_ptr, saturate,
              round_config0, values):
    """3x3 depthwise (as ``conv``): channel c of k_out subtile ko reads channel c of input
    subtile ko; ``w`` [K, 9]."""
    nb_ko, nb_wo = g[NB_KO], g[NB_WO]
    xb = np.zeros((nb_ko, 5, 5, 16), np.int32)
    for i in range(g[NB_HO]):
        for j in range(nb_wo):
            if not _patch(mem, in_ptr - base, g, i, j, xb):
                return FAULT
            for p in range(9):
                if not _position(g, i, j, p)[0]:
                    continue
                pr, pc = p // 3, p % 3
                row = values[(i * nb_wo + j) * 9 + p]
                for ko in range(nb_ko):
                    for kk in range(16):        # a sum in a register: numba vectorises it
                        wk = w[ko * 16 + kk]
                        acc = np.int32(0)
                        for t in range(9):
                            acc = np.int32(acc + np.int32(
                                xb[ko, pr + t // 3, pc + t % 3, kk] * wk[t]))
                        row[ko * 16 + kk] = acc
    return _normalise(mem, base, g, out_ptr, scale_ptr, shift_ptr, bias_ptr, saturate,
                      round_config0, values, _valid(g))


@numba.njit(cache=True)
def linear(x, w, mem, base, g, out_ptr, scale_ptr, shift_ptr, bias_ptr, saturate,
           round_config0, values):
    """Linear mode (as ``conv``): the input vector ``x`` [KI * 256] times ``w``
    [K, KI * 256]."""
    valid = _valid(g)
    for k in range(valid.size):
        if valid[k]:
            values[0, k] = _dot(x, w[k])
    return _normalise(mem, base, g, out_ptr, scale_ptr, shift_ptr, bias_ptr, saturate,
                      round_config0, values, valid)


@numba.njit(cache=True)
def _valid(g):
    """The output channels of the k_out subtiles, False past the last one's remainder."""
    tp = 16 if g[FILTER] == DEPTHWISE else 32
    valid = np.zeros(g[NB_KO] * tp, np.bool_)
    for k in range(valid.size):
        valid[k] = k % tp < last(k // tp, g[NB_KO], g[REM_KO], tp)
    return valid


@numba.njit(cache=True)
def _normalise(mem, base, g, out_ptr, scale_ptr, shift_ptr, bias_ptr, saturate, round_config0,
               values, valid):
    tp = 16 if g[FILTER] == DEPTHWISE else 32
    ok, norm = _norm_params(mem, g, tp, scale_ptr - base, shift_ptr - base, bias_ptr - base)
    if ok and _finish(mem, g, values, valid, norm, out_ptr - base, saturate, round_config0):
        return OK
    return FAULT


@numba.njit(cache=True, inline="always")
def _wrap(value, bits):
    """The low ``bits`` bits of ``value`` as a signed number."""
    return (value << (64 - bits)) >> (64 - bits)


@numba.njit(cache=True, inline="always")
def _dot(x, w):
    """sum x w in wrapping 32-bit arithmetic (1-D operands: numba vectorises the loop)."""
    acc = np.int32(0)
    for n in range(x.size):
        acc = np.int32(acc + np.int32(x[n] * w[n]))
    return acc


@numba.njit(cache=True)
def _norm_params(mem, g, tp, scale_off, shift_off, bias_off):
    """(ok, [scale, bias, shift] x K) of the valid channels (``ne16_datapath.normquant``); read
    only with quant, bias and shift only when CONFIG0 asks."""
    size, k_count = mem.size, g[NB_KO] * tp
    norm = np.zeros((3, k_count), np.int64)
    norm[2, :] = g[SHIFT]
    if not g[QUANT]:
        return True, norm
    nb = g[NORM_BITS] // 8
    for k in range(k_count):
        if k % tp >= last(k // tp, g[NB_KO], g[REM_KO], tp):
            continue
        a = scale_off + k * nb
        if a < 0 or a + nb > size:
            return False, norm
        for b in range(nb):
            norm[0, k] |= np.int64(mem[a + b]) << (8 * b)
        if g[NORM_BIAS]:
            a = bias_off + 4 * k
            if a < 0 or a + 4 > size:
                return False, norm
            word = np.int64(0)
            for b in range(4):
                word |= np.int64(mem[a + b]) << (8 * b)
            norm[1, k] = _wrap(word, 32)
        if g[NORM_SHIFT]:
            if shift_off + k < 0 or shift_off + k >= size:
                return False, norm
            norm[2, k] = mem[shift_off + k] & 0x3F
    return True, norm


@numba.njit(cache=True, inline="always")
def _position(g, i, j, p):
    """(stored?, byte offset from OUTFEAT_PTR) of position ``p`` of output patch (i, j)."""
    pr, pc = p // 3, p % 3
    stored = pr < last(i, g[NB_HO], g[REM_HO], 3) and pc < last(j, g[NB_WO], g[REM_WO], 3)
    if g[STRIDED] and (pr == 1 or pc == 1):
        stored = False
    return stored, (3 * i + pr) * g[OUT_D2] + (3 * j + pc) * g[OUT_D1]


@numba.njit(cache=True)
def _finish(mem, g, values, valid, norm, out_off, saturate, round_config0):
    """The accumulators in ``values`` (stored positions, valid channels) through streamin,
    normalisation and quantisation, in place; False if an output word lies outside L1.
    Channels past the k_out remainder are computed too (from zero scales) and never stored."""
    size, mode, nb_wo = mem.size, g[FILTER], g[NB_WO]
    tp = 16 if mode == DEPTHWISE else 32
    quant, streamin, bias_on = g[QUANT] != 0, g[STREAMIN] != 0, g[NORM_BIAS] != 0
    nbytes = g[OUT_BITS] // 8 if quant else 4
    bits = g[OUT_BITS]
    if g[RELU]:
        lo, hi = np.int64(0), (np.int64(1) << bits) - 1
    else:
        lo, hi = -(np.int64(1) << (bits - 1)), (np.int64(1) << (bits - 1)) - 1
    low, high = -(np.int64(1) << 31), (np.int64(1) << 31) - 1
    k_count = values.shape[1]
    lanes = np.zeros(k_count, np.int64)         # byte offset of each channel in a pixel
    first, last = size, -size
    for k in range(k_count):
        lanes[k] = _lane_offset(k, tp, nbytes, g[OUT_D0])
        if valid[k]:
            first, last = min(first, lanes[k]), max(last, lanes[k] + nbytes)
    scale, bias, shift = norm[0], norm[1], norm[2]
    half = np.zeros(k_count, np.int64)          # the rounding term, if added
    if round_config0 and g[NO_ROUND] == 0:
        for k in range(k_count):
            if shift[k] > 0:
                half[k] = np.int64(1) << (shift[k] - 1)
    for m in range(values.shape[0]):
        if mode == LINEAR:
            stored, pos = True, 0
        else:
            stored, pos = _position(g, m // 9 // nb_wo, m // 9 % nb_wo, m % 9)
        if not stored:
            continue
        a = out_off + pos
        if a + first < 0 or a + last > size:
            return False
        row = values[m]
        if streamin:                # 32-bit output: add the word the output overwrites
            for k in range(k_count):
                if valid[k]:
                    b = a + lanes[k]
                    word = (np.int64(mem[b]) | (np.int64(mem[b + 1]) << 8)
                            | (np.int64(mem[b + 2]) << 16) | (np.int64(mem[b + 3]) << 24))
                    row[k] = _wrap(row[k] + word, 32)
        if not quant:
            continue
        for k in range(k_count):
            v = _wrap(row[k] * scale[k], 48)
            if bias_on:
                v = _wrap(v, 32) + bias[k]
                v = min(max(v, low), high) if saturate else _wrap(v, 32)
            row[k] = min(max((v + half[k]) >> shift[k], lo), hi)
    return True


@numba.njit(cache=True, inline="always")
def _lane_offset(k, tp, nbytes, d0):
    """Byte offset of output channel ``k`` from its pixel: 32-byte words ``d0`` apart."""
    ko, kk = k // tp, k % tp
    lane = kk * nbytes if nbytes == 1 else \
        (kk // (32 // nbytes)) * d0 + (kk % (32 // nbytes)) * nbytes
    return ko * tp * nbytes + lane


@numba.njit(cache=True)
def _patch(mem, in_off, g, i, j, xb):
    """Fill ``xb`` [KI, side, side, channels] with the input buffer of patch (i, j): loaded
    bytes, the PADDING value on explicit padding, zeros past a last subtile (channels: bytes,
    or little-endian byte pairs in 16-bit mode); False on a read outside L1."""
    size, nb_ho, nb_wo, nb_ki, rem_ki = mem.size, g[NB_HO], g[NB_WO], g[NB_KI], g[REM_KI]
    side, channels = xb.shape[1], xb.shape[3]
    rows = last(i, nb_ho, g[REM_HI], side)
    cols = last(j, nb_wo, g[REM_WI], side)
    d0, d1, value = g[IN_D0], g[IN_D1], g[PAD_VALUE]
    pad_t, pad_b, pad_l, pad_r = g[PAD_T], g[PAD_B], g[PAD_L], g[PAD_R]
    mode16 = g[MODE16] != 0
    pad = np.zeros(16, np.int32)                # the PADDING value's bytes
    for b in range(16):
        pad[b] = (value >> 8) & 0xFF if mode16 and b % 2 else value & 0xFF
    byte = np.zeros(16, np.int32)
    for ki in range(nb_ki):
        width = last(ki, nb_ki, rem_ki, 16)
        for r in range(side):
            edge_row = (i == 0 and r < pad_t) or (i == nb_ho - 1 and r >= 5 - pad_b)
            for c in range(side):
                explicit = edge_row or (j == 0 and c < pad_l) or (j == nb_wo - 1 and
                                                                   c >= 5 - pad_r)
                a = in_off + (3 * i + r) * d1 + (3 * j + c) * d0 + 16 * ki
                loaded = width if r < rows and c < cols else 0
                if loaded and not explicit and (a < 0 or a + loaded > size):
                    return False
                for b in range(16):
                    byte[b] = 0 if b >= loaded else (pad[b] if explicit else mem[a + b])
                xr = xb[ki, r, c]
                if mode16:
                    for q in range(8):
                        xr[q] = byte[2 * q] | (byte[2 * q + 1] << 8)
                else:
                    xr[:] = byte
    return True


@numba.njit(cache=True)
def store(mem, out_off, g, values):
    """Write the computed outputs in streamer order (k_out subtile, position, channel), each
    value's low bytes little-endian."""
    mode = g[FILTER]
    tp = 16 if mode == DEPTHWISE else 32
    nb_ko, nb_wo = g[NB_KO], g[NB_WO]
    nbytes = g[OUT_BITS] // 8 if g[QUANT] else 4
    lanes = np.zeros(tp, np.int64)
    for ko in range(nb_ko):
        lim = last(ko, nb_ko, g[REM_KO], tp)
        for kk in range(lim):
            lanes[kk] = _lane_offset(ko * tp + kk, tp, nbytes, g[OUT_D0])
        for m in range(values.shape[0]):
            if mode == LINEAR:
                stored, pos = True, 0
            else:
                stored, pos = _position(g, m // 9 // nb_wo, m // 9 % nb_wo, m % 9)
            if not stored:
                continue
            row = values[m, ko * tp:ko * tp + lim]
            a = out_off + pos
            if nbytes == 1:                 # channels side by side
                first = a + lanes[0]
                for kk in range(lim):
                    mem[first + kk] = row[kk] & 0xFF
                continue
            for kk in range(lim):
                v = row[kk]
                for b in range(nbytes):
                    mem[a + lanes[kk] + b] = (v >> (8 * b)) & 0xFF
