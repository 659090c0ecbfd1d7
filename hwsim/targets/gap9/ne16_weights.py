"""NE16 weights as the compiled datapath multiplies them, decoded from L1 once per distinct set.

The streamer reads weights as bit-planes (``layout``): each byte holds one bit of 8 channels.
``decode`` turns the bytes a job reads into its effective weights (stored value plus
WEIGHT_OFFSET, wrapped to int32, zero on the taps FILTER_MASK disables), one row per output
channel in the order ``ne16_kernel`` walks its input:

* 3x3 and 1x1: [K, KI * taps * channels] (channels 16, or 8 in 16-bit mode);
* depthwise: [KO, 9 * 16], the 16 channels of a subtile sharing each bit-plane word;
* linear: [K, KI * 256].

Channels past the k_out remainder are not read (zero rows). The addresses are those of the
numpy twin (``ne16_datapath._weight_plan``), which documents their sources.

The tiles of a layer read the same weights at the same address, so ``effective`` keeps the
decoded weights with a copy of the bytes they came from, per job signature and pointer, and
decodes again only when those bytes differ (a weight block reloaded into the same slot).
"""

from __future__ import annotations

import numba
import numpy as np

from hwsim.memory.space import AddressSpace
from hwsim.targets.gap9.ne16_job import Ne16Job
from hwsim.targets.gap9.ne16_words import (DEPTHWISE, FILTER, LINEAR, MASK_B, MASK_L, MASK_R,
                                            MASK_T, MODE16, NB_KI, NB_KO, POINTWISE, QW, REM_KO,
                                            W_D0, W_D1, W_D2, W_OFFSET, last)

_CACHE: dict = {}           # (signature, pointer offset) -> (first byte, bytes, weights)
_CACHE_BYTES = 32 << 20     # decoded weights kept at most (then the cache starts again)


def effective(job: Ne16Job, l1: AddressSpace, g: np.ndarray):
    """The job's effective weights (``decode``), or None when it reads outside L1."""
    off = job.regs[0] - l1.base                 # WEIGHTS_PTR
    key = (job.signature, off)
    found = _CACHE.get(key)
    if found is not None:
        first, raw, w = found
        if l1.data[off + first:off + first + len(raw)].tobytes() == raw:
            return w
    ok, w, first, end = decode(l1.data, off, g)
    if not ok:
        return None
    if sum(entry[2].nbytes for entry in _CACHE.values()) + w.nbytes > _CACHE_BYTES:
        _CACHE.clear()
    _CACHE[key] = (first, l1.data[off + first:off + end].tobytes(), w)
    return w


# A bit-plane byte spread over its 8 channels: lane b (bits 8b..8b+7) of _SPREAD[v] is bit b of
# v. Lanes hold at most 8 weight bits, so planes shifted by their bit number add without carry.
_SPREAD = np.array([sum(((v >> b) & 1) << (8 * b) for b in range(8)) for v in range(256)],
                   np.int64)


@numba.njit(cache=True, inline="always")
def _lane(lanes, c):
    return (lanes >> (8 * c)) & 0xFF


@numba.njit(cache=True)
def decode(mem, w_off, g):
    """(ok, weights, first, end): the effective weights of the job ``g`` (module docstring)
    from the bytes at ``w_off``, and the byte range [first, end) it read, relative to
    ``w_off``; ok is False on a read outside ``mem``."""
    if g[FILTER] == DEPTHWISE:
        return _depthwise(mem, w_off, g)
    if g[FILTER] == LINEAR:
        return _linear(mem, w_off, g)
    return _conv(mem, w_off, g)


@numba.njit(cache=True)
def _tap_mask(g):
    """1 for the 3x3 taps FILTER_MASK leaves enabled."""
    mask = np.ones(9, np.int32)
    for t in range(9):
        r, c = t // 3, t % 3
        if r < g[MASK_T] or r >= 3 - g[MASK_B] or c < g[MASK_L] or c >= 3 - g[MASK_R]:
            mask[t] = 0
    return mask


@numba.njit(cache=True)
def _conv(mem, w_off, g):
    size, qw, offset = mem.size, g[QW], g[W_OFFSET]
    nb_ko, nb_ki = g[NB_KO], g[NB_KI]
    pointwise = g[FILTER] == POINTWISE
    taps = 1 if pointwise else 9
    bpp = 1 if g[MODE16] else 2
    channels = 8 * bpp
    plane = bpp if pointwise else g[W_D0]        # 1x1 reads all planes in one word
    mask = _tap_mask(g) if not pointwise else np.ones(1, np.int32)
    w = np.zeros((nb_ko * 32, nb_ki * taps * channels), np.int32)
    first, end = size, -size
    for ko in range(nb_ko):
        for kk in range(last(ko, nb_ko, g[REM_KO], 32)):
            for ki in range(nb_ki):
                base = (ko * 32 * nb_ki * qw + ki * qw) * taps * bpp + kk * g[W_D1]
                for t in range(taps):
                    lo, hi = np.int64(0), np.int64(0)
                    for bit in range(qw):
                        rel = base + bit * plane + t * bpp
                        a = w_off + rel
                        if a < 0 or a + bpp > size:
                            return False, w, first, end
                        first, end = min(first, rel), max(end, rel + bpp)
                        lo |= _SPREAD[mem[a]] << bit
                        if bpp == 2:
                            hi |= _SPREAD[mem[a + 1]] << bit
                    at = (ki * taps + t) * channels
                    for c in range(channels):
                        v = _lane(lo, c) if c < 8 else _lane(hi, c - 8)
                        w[ko * 32 + kk, at + c] = np.int32(v + offset) * mask[t]
    return True, w, first, end


@numba.njit(cache=True)
def _depthwise(mem, w_off, g):
    size, qw, offset, nb_ko = mem.size, g[QW], g[W_OFFSET], g[NB_KO]
    mask = _tap_mask(g)
    w = np.zeros((nb_ko, 9 * 16), np.int32)
    first, end = size, -size
    for ko in range(nb_ko):
        lim = last(ko, nb_ko, g[REM_KO], 16)
        for t in range(9):
            lo, hi = np.int64(0), np.int64(0)
            for bit in range(qw):
                rel = ko * qw * 18 + bit * g[W_D0] + t * 2
                a = w_off + rel
                if a < 0 or a + 2 > size:
                    return False, w, first, end
                first, end = min(first, rel), max(end, rel + 2)
                lo |= _SPREAD[mem[a]] << bit
                hi |= _SPREAD[mem[a + 1]] << bit
            for c in range(lim):
                v = _lane(lo, c) if c < 8 else _lane(hi, c - 8)
                w[ko, t * 16 + c] = np.int32(v + offset) * mask[t]
    return True, w, first, end


@numba.njit(cache=True)
def _linear(mem, w_off, g):
    size, qw, offset, nb_ko, nb_ki = mem.size, g[QW], g[W_OFFSET], g[NB_KO], g[NB_KI]
    w = np.zeros((nb_ko * 32, nb_ki * 256), np.int32)
    first, end = size, -size
    for ko in range(nb_ko):
        for kk in range(last(ko, nb_ko, g[REM_KO], 32)):
            for ki in range(nb_ki):
                for byte in range(32):
                    lanes = np.int64(0)
                    for bit in range(qw):
                        rel = ko * g[W_D2] + ki * 32 + kk * g[W_D1] + bit * g[W_D0] + byte
                        a = w_off + rel
                        if a < 0 or a >= size:
                            return False, w, first, end
                        first, end = min(first, rel), max(end, rel + 1)
                        lanes |= _SPREAD[mem[a]] << bit
                    for b in range(8):
                        w[ko * 32 + kk, ki * 256 + byte * 8 + b] = np.int32(
                            _lane(lanes, b) + offset)
    return True, w, first, end
