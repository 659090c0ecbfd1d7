"""The NE16 datapath compiled: one numba call computes a job straight from the L1 bytes.

``start(job, l1, bias_add, rounding)`` reads everything a job reads when it starts (weights,
input patches, streamin words, scale, shift and bias) and returns the commit that stores its
outputs, exactly as ``datapath.run_job`` does (its numpy twin: the same streamer address
arithmetic and arithmetic, and the sources, are documented there; the tests compare the two over
every mode). The differences are how, not what:

* one compiled call per job (one kernel per filter mode) walks the registers' strides over the
  L1 bytes instead of gathering through index plans; the job's modes, geometry and output
  layout are a few small arrays per job signature (``words``), the pointers are passed as
  they are;
* the weights (and linear mode's input vector) are gathered and decoded by the twin, in numpy,
  once per distinct set: the tiles of a layer read the same weights at the same address, so
  they are kept per job signature and pointer with a copy of the bytes they came from, and
  decoded again only when those bytes change (a weight block reloaded into the same slot);
* only the outputs the streamer stores are computed (positions past a patch's remainder, the
  skipped positions of strided mode and channels past the k_out remainder are not), and the
  commit writes them in streamer order (so a later store to the same byte wins, as there);
* a job that reads or writes outside L1 raises the twin's fault: the weights and linear inputs
  come from the twin, and a kernel that finds a stream outside L1 hands the job to the twin.

The kernels avoid what makes numba slow to compile (slice assignments, many small functions):
the first run after install compiles them in a few seconds.
"""

from __future__ import annotations

import numba
import numpy as np

from hwsim.memory.space import AddressSpace
from hwsim.targets.gap9.ne16 import datapath as twin
from hwsim.targets.gap9.ne16.job import Ne16Job
from hwsim.targets.gap9.ne16.words import (FILTER, IN_D0, IN_D1, MODE16, NB_HO, NB_KI, NB_KO,
                                           NB_WO, NO_ROUND, NORM_BIAS, NORM_BITS, NORM_SHIFT,
                                           OUT_BITS, PAD_B, PAD_L, PAD_R, PAD_T, PAD_VALUE,
                                           POINTWISE, QUANT, RELU, REM_HI, REM_KI, REM_WI,
                                           SHIFT, STREAMIN, last, words)

W_PTR, IN_PTR, OUT_PTR, SCALE_PTR, SHIFT_PTR, BIAS_PTR = range(6)    # register indices
OK, FAULT = 0, 1
_WEIGHTS: dict = {}         # (signature, WEIGHTS_PTR offset) -> (first byte, bytes, weights)
_WEIGHT_BYTES = 32 << 20    # decoded weights kept at most (then the cache starts again)


def start(job: Ne16Job, l1: AddressSpace, bias_add: str = "wrap", rounding: str = "none"):
    """Compute ``job`` from L1 now; returns the commit that stores its outputs."""
    lay, regs = words(job), job.regs
    w = _weights(job, l1)                        # a read outside L1 raises, as in the twin
    values = np.zeros((lay.pos.size, lay.valid.size), np.int64)
    rest = (l1.data, l1.base, lay.g, lay.valid, lay.lanes, lay.stored, lay.pos, regs[OUT_PTR],
            regs[SCALE_PTR], regs[SHIFT_PTR], regs[BIAS_PTR], bias_add == "saturate",
            rounding == "config0", values)
    if job.linear:
        x = twin.as_channels(twin.linear_inputs(job, l1), job.mode16)
        status = linear(x.reshape(-1).astype(np.int32), w, *rest)
    elif job.depthwise:
        status = depthwise(regs[IN_PTR], w, *rest)
    else:
        status = conv(regs[IN_PTR], w.reshape(w.shape[0], -1), *rest)
    if status != OK:
        offsets, data = twin.run_job(job, l1, bias_add, rounding)     # raises the fault
        return lambda: l1.data.__setitem__(offsets, data)
    out = regs[OUT_PTR] - l1.base
    nbytes = job.out_bits // 8 if job.quant else 4
    return lambda: store(l1.data, out, lay.valid, lay.lanes, lay.stored, lay.pos,
                         lay.g[NB_KO], nbytes, values)


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


# -- the kernels: one per filter mode, each ends with the same normalisation --------------------
@numba.njit(cache=True)
def conv(in_ptr, w, mem, base, g, valid, lanes, stored, pos, out_ptr, scale_ptr, shift_ptr,
         bias_ptr, saturate, round_config0, values):
    """3x3 and 1x1 modes: fill ``values`` [positions, K] (zeros) with the output of every
    stored position and valid channel; ``OK``, or ``FAULT`` when the job reads or would write
    outside L1. Per stored position, the (ki, tap, channel) input vector times the weights
    ``w`` [K, KI * taps * channels] of each output channel."""
    pointwise = g[FILTER] == POINTWISE
    side, taps = (3, 1) if pointwise else (5, 9)
    channels = 8 if g[MODE16] else 16
    nb_ki, nb_wo = g[NB_KI], g[NB_WO]
    xb = np.zeros((nb_ki, side, side, channels), np.int32)
    x = np.zeros(nb_ki * taps * channels, np.int32)
    for patch in range(g[NB_HO] * nb_wo):
        if not _patch(mem, in_ptr - base, g, patch // nb_wo, patch % nb_wo, xb):
            return FAULT
        for p in range(9):
            m = patch * 9 + p
            if not stored[m]:
                continue
            pr, pc = p // 3, p % 3
            for ki in range(nb_ki):
                for t in range(taps):
                    r, c = (pr, pc) if pointwise else (pr + t // 3, pc + t % 3)
                    at, xr = (ki * taps + t) * channels, xb[ki, r, c]
                    for q in range(channels):
                        x[at + q] = xr[q]
            for k in range(valid.size):
                if valid[k]:
                    wk = w[k]                   # 1-D operands: numba vectorises the sum
                    acc = np.int32(0)
                    for n in range(x.size):
                        acc = np.int32(acc + np.int32(x[n] * wk[n]))
                    values[m, k] = acc
    return _finish(mem, base, g, valid, lanes, stored, pos, out_ptr, scale_ptr, shift_ptr,
                   bias_ptr, saturate, round_config0, values)


@numba.njit(cache=True)
def depthwise(in_ptr, w, mem, base, g, valid, lanes, stored, pos, out_ptr, scale_ptr, shift_ptr,
              bias_ptr, saturate, round_config0, values):
    """3x3 depthwise (as ``conv``): channel c of k_out subtile ko reads channel c of input
    subtile ko; ``w`` [K, 9]."""
    nb_ko, nb_wo = g[NB_KO], g[NB_WO]
    xb = np.zeros((nb_ko, 5, 5, 16), np.int32)
    for patch in range(g[NB_HO] * nb_wo):
        if not _patch(mem, in_ptr - base, g, patch // nb_wo, patch % nb_wo, xb):
            return FAULT
        for p in range(9):
            m = patch * 9 + p
            if not stored[m]:
                continue
            pr, pc = p // 3, p % 3
            for ko in range(nb_ko):
                for kk in range(16):            # a sum in a register: numba vectorises it
                    wk = w[ko * 16 + kk]
                    acc = np.int32(0)
                    for t in range(9):
                        acc = np.int32(acc + np.int32(
                            xb[ko, pr + t // 3, pc + t % 3, kk] * wk[t]))
                    values[m, ko * 16 + kk] = acc
    return _finish(mem, base, g, valid, lanes, stored, pos, out_ptr, scale_ptr, shift_ptr,
                   bias_ptr, saturate, round_config0, values)


@numba.njit(cache=True)
def linear(x, w, mem, base, g, valid, lanes, stored, pos, out_ptr, scale_ptr, shift_ptr,
           bias_ptr, saturate, round_config0, values):
    """Linear mode (as ``conv``): the input vector ``x`` [KI * 256] times ``w``
    [K, KI * 256]."""
    for k in range(valid.size):
        if valid[k]:
            wk = w[k]
            acc = np.int32(0)
            for n in range(x.size):
                acc = np.int32(acc + np.int32(x[n] * wk[n]))
            values[0, k] = acc
    return _finish(mem, base, g, valid, lanes, stored, pos, out_ptr, scale_ptr, shift_ptr,
                   bias_ptr, saturate, round_config0, values)


@numba.njit(cache=True)
def _patch(mem, in_off, g, i, j, xb):
    """Fill ``xb`` [KI, side, side, channels] with the input buffer of patch (i, j): loaded
    bytes, the PADDING value on explicit padding, zeros past a last subtile (channels: bytes,
    or little-endian byte pairs in 16-bit mode); False on a read outside L1."""
    size, nb_ho, nb_wo, nb_ki, rem_ki = mem.size, g[NB_HO], g[NB_WO], g[NB_KI], g[REM_KI]
    side = xb.shape[1]
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
                    if b >= loaded:
                        byte[b] = 0
                    elif explicit:
                        byte[b] = pad[b]
                    else:
                        byte[b] = mem[a + b]
                if mode16:
                    for q in range(8):
                        xb[ki, r, c, q] = byte[2 * q] | (byte[2 * q + 1] << 8)
                else:
                    for q in range(16):
                        xb[ki, r, c, q] = byte[q]
    return True


@numba.njit(cache=True)
def _finish(mem, base, g, valid, lanes, stored, pos, out_ptr, scale_ptr, shift_ptr, bias_ptr,
            saturate, round_config0, values):
    """The accumulators in ``values`` through streamin, normalisation and quantisation, in
    place: ``OK``, or ``FAULT`` if a word read or written lies outside L1. Channels past the
    k_out remainder are computed too (from zero scales) and never stored."""
    size, k_count = mem.size, valid.size
    quant = g[QUANT] != 0
    nbytes = g[OUT_BITS] // 8 if quant else 4
    first, end = size, -size                    # the bytes of a pixel the job writes
    for k in range(k_count):
        if valid[k]:
            first, end = min(first, lanes[k]), max(end, lanes[k] + nbytes)
    ok, scale, bias, shift, half = _norm_params(mem, g, valid, scale_ptr - base,
                                                shift_ptr - base, bias_ptr - base,
                                                round_config0)
    if not ok:
        return FAULT
    bits, bias_on = g[OUT_BITS], g[NORM_BIAS] != 0
    lo = np.int64(0) if g[RELU] else -(np.int64(1) << (bits - 1))
    hi = (np.int64(1) << bits) - 1 if g[RELU] else (np.int64(1) << (bits - 1)) - 1
    low, high = -(np.int64(1) << 31), (np.int64(1) << 31) - 1
    for m in range(pos.size):
        if not stored[m]:
            continue
        a = out_ptr - base + pos[m]
        if a + first < 0 or a + end > size:
            return FAULT
        row = values[m]
        if g[STREAMIN]:             # 32-bit output: add the word the output overwrites
            for k in range(k_count):
                if valid[k]:
                    b = a + lanes[k]
                    word = (np.int64(mem[b]) | (np.int64(mem[b + 1]) << 8)
                            | (np.int64(mem[b + 2]) << 16) | (np.int64(mem[b + 3]) << 24))
                    row[k] = ((row[k] + word) << 32) >> 32
        if not quant:
            continue
        for k in range(k_count):
            v = ((row[k] * scale[k]) << 16) >> 16                  # 48-bit product
            if bias_on:
                v = ((v << 32) >> 32) + bias[k]                     # truncated, plus the bias
                v = min(max(v, low), high) if saturate else (v << 32) >> 32
            row[k] = min(max((v + half[k]) >> shift[k], lo), hi)
    return OK


@numba.njit(cache=True)
def _norm_params(mem, g, valid, scale_off, shift_off, bias_off, round_config0):
    """(ok, scale, bias, shift, rounding term) per valid channel (``datapath.normquant``):
    read only with quant, the bias and shift only when CONFIG0 asks; ok is False on a read
    outside L1."""
    size, k_count = mem.size, valid.size
    scale, bias = np.zeros(k_count, np.int64), np.zeros(k_count, np.int64)
    shift, half = np.zeros(k_count, np.int64), np.zeros(k_count, np.int64)
    nb = g[NORM_BITS] // 8
    for k in range(k_count):
        shift[k] = g[SHIFT]
        if not g[QUANT] or not valid[k]:
            continue
        a = scale_off + k * nb
        if a < 0 or a + nb > size:
            return False, scale, bias, shift, half
        for b in range(nb):
            scale[k] |= np.int64(mem[a + b]) << (8 * b)
        if g[NORM_BIAS]:
            a = bias_off + 4 * k
            if a < 0 or a + 4 > size:
                return False, scale, bias, shift, half
            word = np.int64(0)
            for b in range(4):
                word |= np.int64(mem[a + b]) << (8 * b)
            bias[k] = (word << 32) >> 32
        if g[NORM_SHIFT]:
            if shift_off + k < 0 or shift_off + k >= size:
                return False, scale, bias, shift, half
            shift[k] = mem[shift_off + k] & 0x3F
        if round_config0 and not g[NO_ROUND] and shift[k] > 0:
            half[k] = np.int64(1) << (shift[k] - 1)
    return True, scale, bias, shift, half


@numba.njit(cache=True)
def store(mem, out_off, valid, lanes, stored, pos, nb_ko, nbytes, values):
    """Write the computed outputs in streamer order (k_out subtile, position, channel), each
    value's low bytes little-endian."""
    tp = valid.size // nb_ko
    for ko in range(nb_ko):
        first, lim = ko * tp, 0                 # the subtile's channels, valid ones first
        while lim < tp and valid[first + lim]:
            lim += 1
        for m in range(pos.size):
            if not stored[m]:
                continue
            a, row = out_off + pos[m], values[m]
            if nbytes == 1:                     # one byte per channel, side by side
                at = a + lanes[first]
                for kk in range(lim):
                    mem[at + kk] = row[first + kk] & 0xFF
                continue
            for k in range(first, first + lim):
                for b in range(nbytes):
                    mem[a + lanes[k] + b] = (row[k] >> (8 * b)) & 0xFF
