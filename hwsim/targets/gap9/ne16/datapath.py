"""NE16 functional datapath: what a job reads from L1, computes and writes back, bit-exactly.

Reads follow the streamers' address arithmetic (gvsoc-pulp ``ne16_load.cpp``,
``ne16_matrixvec.cpp``, ``ne16_normquant.cpp``, ``ne16_streamout.cpp``; for linear mode the RTL
``ne16_ctrl.sv`` streamer bindings): input patch (i, j, k_in subtile ki), row r, column c, byte b
at ``INFEAT_PTR + (3i + r) D1 + (3j + c) D0 + 16 ki + b``. Inside a patch the input buffer takes
implicit zeros past the loaded rows/columns of a last subtile, then the PADDING value on the
sides of edge patches, then the loaded bytes (priority as in ``ne16_input_buffer.sv``).

Arithmetic (RTL accumulators and ``ne16_normquant*.sv``; pulp-nnx functional model):

* accumulators are 32-bit and wrap; a product is (stored unsigned weight + WEIGHT_OFFSET) times
  the unsigned input, over the taps not masked by FILTER_MASK. The bit-serial sum of weight bits
  equals this direct product because nothing saturates, so the datapath multiplies directly;
* streamin adds the int32 words at the output addresses first;
* normalisation: times the unsigned scale into a 48-bit product; with a bias, the product is
  truncated to 32 bits and the int32 bias added (parameter ``ne16_bias_add``: ``wrap`` as the
  32-bit adder does, or ``saturate``); arithmetic right shift (per channel: low 6 bits of the
  shift byte; else CONFIG0.shift); clamp to the output type (unsigned with ReLU).

Rounding: the RTL shifter computes a rounding term but never adds it; parameter ``ne16_rounding``
selects ``none`` (that) or ``config0`` (add 2^(shift-1) when CONFIG0.no_round is 0).

The inner products run in a numba kernel with 32-bit wrapping arithmetic; ``*_np`` twins with
the same signatures compute the same in int64 numpy.

Every address a job touches is its pointer register plus an offset that depends only on the
other registers, so the offsets, masks and store order are worked out once per job signature
(``Ne16Job.signature``) and reused by the tiles of a layer; the bytes are read every time.

The machine runs the compiled datapath ``kernel`` (one numba call per job); this module is
its numpy twin, the reference the tests compare it against in every mode.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from hwsim.errors import MemoryFault
from hwsim.memory.space import AddressSpace
from hwsim.targets.gap9.ne16.job import BUFFER, PATCH, TP_IN, Ne16Job

# Output position p = 3 * row + column of a 3x3 patch; strided mode keeps the corners.
_PIX_R, _PIX_C = np.divmod(np.arange(9), 3)
_STRIDED = np.isin(np.arange(9), (0, 2, 6, 8))


@numba.njit(cache=True)
def gemm_wrap32(x, w):
    """out[m, k] = sum_n x[m, n] * w[k, n] in wrapping 32-bit arithmetic."""
    m_count, n_count = x.shape
    k_count = w.shape[0]
    out = np.empty((m_count, k_count), np.int32)
    for m in range(m_count):
        row = x[m]
        for k in range(k_count):
            wk = w[k]
            acc = np.int32(0)
            for n in range(n_count):
                acc = np.int32(acc + np.int32(np.int32(row[n]) * wk[n]))
            out[m, k] = acc
    return out


def gemm_wrap32_np(x, w):
    wide = x.astype(np.int64) @ w.astype(np.int64).T
    return wide.astype(np.uint32).view(np.int32) if wide.size else wide.astype(np.int32)


@numba.njit(cache=True)
def depthwise_wrap32(x, w):
    """out[m, c] = sum_t x[m, t, c] * w[c, t] in wrapping 32-bit arithmetic."""
    m_count, t_count, c_count = x.shape
    out = np.zeros((m_count, c_count), np.int32)
    for m in range(m_count):
        for t in range(t_count):
            for c in range(c_count):
                out[m, c] = np.int32(out[m, c] + np.int32(np.int32(x[m, t, c]) * w[c, t]))
    return out


def depthwise_wrap32_np(x, w):
    wide = np.einsum("mtc,ct->mc", x.astype(np.int64), w.astype(np.int64))
    return wide.astype(np.uint32).view(np.int32)


def _fetch(space: AddressSpace, addr: np.ndarray, what: str, job: Ne16Job) -> np.ndarray:
    """Bytes at absolute addresses ``addr`` (any shape) of L1, or a fault naming the stream."""
    if addr.size == 0:
        return np.zeros(addr.shape, np.uint8)
    off = addr - space.base
    lo, hi = int(off.min()), int(off.max())
    if lo < 0 or hi >= space.size:
        bad = int(addr.flat[np.argmax((off < 0) | (off >= space.size))])
        raise MemoryFault(space.name, bad, 1, f"ne16 job {job.index} reads {what} outside "
                                              f"{space.base:#x}..{space.end:#x}")
    return space.data[off]


class _Plans(dict):
    """Per-signature results, bounded (cleared when ``limit`` entries are held)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def get_or(self, key, make):
        found = self.get(key)
        if found is None:
            if len(self) >= self.limit:
                self.clear()
            found = self[key] = make()
        return found


_PLANS = _Plans(2048)
_WEIGHTS = _Plans(64)        # effective weights by their bytes: a few layers' worth


@dataclass(frozen=True)
class _Gather:
    """Bytes at ``pointer + offsets`` (flat), scattered to ``index`` of an array of ``shape``."""

    shape: tuple
    offsets: np.ndarray
    index: np.ndarray
    lo: int
    hi: int

    @staticmethod
    def of(shape: tuple, offsets: np.ndarray, index: np.ndarray) -> "_Gather":
        lo = int(offsets.min()) if offsets.size else 0
        hi = int(offsets.max()) if offsets.size else 0
        return _Gather(shape, offsets, index, lo, hi)

    def read(self, space: AddressSpace, pointer: int, what: str, job: Ne16Job) -> np.ndarray:
        out = np.zeros(self.shape, np.uint8)
        if self.offsets.size:
            off = pointer - space.base
            if off + self.lo < 0 or off + self.hi >= space.size:
                _fetch(space, pointer + self.offsets, what, job)       # raises the fault
            out.reshape(-1)[self.index] = space.data[off + self.offsets]
        return out


def _grid(*sizes: int) -> list[np.ndarray]:
    """Index arrays broadcastable against each other, one axis per size."""
    return list(np.ix_(*[np.arange(s) for s in sizes]))


def _sizes(job: Ne16Job, fn, count: int) -> np.ndarray:
    return np.array([fn(k) for k in range(count)])


def input_buffers(job: Ne16Job, l1: AddressSpace) -> np.ndarray:
    """Input buffers of every patch and k_in subtile: uint8 [I, J, KI, B, B, 16]."""
    gather, explicit, pad = _PLANS.get_or(("input", job.signature), lambda: _input_plan(job))
    buf = gather.read(l1, job.reg("INFEAT_PTR"), "input", job)
    buf.reshape(-1)[explicit] = pad
    return buf


def _input_plan(job: Ne16Job) -> tuple:
    nb_i, nb_j, nb_k, side = job.nb_ho, job.nb_wo, job.nb_ki, job.buffer
    i, j, k, r, c, b = _grid(nb_i, nb_j, nb_k, side, side, TP_IN)
    d0, d1 = job.reg("INFEAT_D0_STRIDE"), job.reg("INFEAT_D1_STRIDE")
    addr = (PATCH * i + r) * d1 + (PATCH * j + c) * d0 + TP_IN * k + b
    rows_ok = r < _sizes(job, job.h_in, nb_i)[i]
    cols_ok = c < _sizes(job, job.w_in, nb_j)[j]
    bytes_ok = b < _sizes(job, job.k_in_bytes, nb_k)[k]
    p = job.pad
    explicit = (((i == 0) & (r < p["top"])) | ((i == nb_i - 1) & (r >= BUFFER - p["bottom"]))
                | ((j == 0) & (c < p["left"])) | ((j == nb_j - 1) & (c >= BUFFER - p["right"])))
    explicit = np.broadcast_to(explicit & rows_ok & cols_ok & bytes_ok, addr.shape)
    # bytes under explicit padding are fetched and discarded by the hardware; not fetching
    # them keeps a tensor at the edge of L1 from faulting
    loaded = (np.broadcast_to(rows_ok & cols_ok & bytes_ok, addr.shape) & ~explicit).reshape(-1)
    value = p["value"]
    pad_byte = np.where(b % 2 == 1, value >> 8, value & 0xFF) if job.mode16 else value & 0xFF
    pad = np.broadcast_to(np.asarray(pad_byte, np.uint8), addr.shape).reshape(-1)
    where = np.flatnonzero(explicit.reshape(-1))
    loaded_at = np.flatnonzero(loaded)
    return (_Gather.of(addr.shape, np.broadcast_to(addr, addr.shape).reshape(-1)[loaded_at],
                       loaded_at), where, pad[where])


def linear_inputs(job: Ne16Job, l1: AddressSpace) -> np.ndarray:
    """Linear mode input words: uint8 [KI, vectors, 16]."""
    gather = _PLANS.get_or(("linear", job.signature), lambda: _linear_plan(job))
    return gather.read(l1, job.reg("INFEAT_PTR"), "input", job)


def _linear_plan(job: Ne16Job) -> _Gather:
    per = 32 if job.mode16 else 16
    k, n, b = _grid(job.nb_ki, per, TP_IN)
    addr = k * per * TP_IN + n * job.reg("INFEAT_D0_STRIDE") + b
    loaded = np.broadcast_to(n < _sizes(job, job.linear_vectors, job.nb_ki)[k], addr.shape)
    at = np.flatnonzero(loaded.reshape(-1))
    return _Gather.of(addr.shape, np.broadcast_to(addr, addr.shape).reshape(-1)[at], at)


# bit i of byte v, LSB first: spreads a byte of a bit-plane over its 8 channels
_SPREAD = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little")


def _bits_to_values(planes: np.ndarray) -> np.ndarray:
    """(..., bits, nbytes) bit-plane bytes, LSB first -> (..., nbytes*8) unsigned values."""
    out = np.zeros(planes.shape[:-2] + (planes.shape[-1] * 8,), np.uint8)
    for bit in range(planes.shape[-2]):
        out |= _SPREAD[planes[..., bit, :]].reshape(out.shape) << bit
    return out


def _weight_plan(job: Ne16Job) -> _Gather:
    qw, d0, d1 = job.weight_bits, job.reg("WEIGHTS_D0_STRIDE"), job.reg("WEIGHTS_D1_STRIDE")
    tp = job.tp_out
    valid = (np.arange(job.nb_ko * tp) % tp) < np.repeat(_sizes(job, job.k_out_lim, job.nb_ko), tp)
    if job.linear:
        ko, kk, ki, bit, byte = _grid(job.nb_ko, tp, job.nb_ki, qw, 32)
        addr = ko * job.reg("WEIGHTS_D2_STRIDE") + ki * 32 + kk * d1 + bit * d0 + byte
    elif job.depthwise:
        ko, bit, tap, byte = _grid(job.nb_ko, qw, 9, 2)
        addr = ko * qw * 18 + bit * d0 + tap * 2 + byte
        flat = np.broadcast_to(addr, addr.shape).reshape(-1)
        return _Gather.of(addr.shape, flat, np.arange(flat.size))
    else:
        bpp = 1 if job.mode16 else 2
        ko, kk, ki, bit, tap, byte = _grid(job.nb_ko, tp, job.nb_ki, qw, job.taps, bpp)
        plane = d0 if not job.pointwise else bpp           # 1x1 reads all planes in one word
        addr = ((ko * tp * job.nb_ki * qw + ki * qw) * job.taps * bpp + kk * d1
                + bit * plane + tap * bpp + byte)
    shape = addr.shape
    keep = np.broadcast_to(valid.reshape(job.nb_ko, tp).reshape(
        (job.nb_ko, tp) + (1,) * (len(shape) - 2)), shape).reshape(-1)
    at = np.flatnonzero(keep)
    return _Gather.of(shape, np.broadcast_to(addr, shape).reshape(-1)[at], at)


def _weight_values(job: Ne16Job, raw: np.ndarray) -> np.ndarray:
    """Unsigned weights from the bytes the streamer reads (``_weight_plan``).

    3x3 / 1x1: [KO*32, KI, taps, channels]; depthwise: [KO*16, 9]; linear: [KO*32, KI*256].
    Channels of output subtiles past their remainder read as zero (they are not fetched).
    """
    tp = job.tp_out
    if job.depthwise:                                                 # [KO, qw, 9, 2]
        valid = (np.arange(job.nb_ko * tp) % tp) < np.repeat(
            _sizes(job, job.k_out_lim, job.nb_ko), tp)
        values = _bits_to_values(raw.transpose(0, 2, 1, 3))           # [KO, 9, 16]
        return values.transpose(0, 2, 1).reshape(-1, 9) * valid[:, None]
    raw = raw.reshape((job.nb_ko * tp,) + raw.shape[2:])
    if job.linear:                                                    # [K, KI, qw, 32]
        return _bits_to_values(raw).reshape(job.nb_ko * tp, -1)
    return _bits_to_values(raw.transpose(0, 1, 3, 2, 4))              # [K, KI, taps, ch]


def _tap_mask(job: Ne16Job) -> np.ndarray:
    """1 for the 3x3 taps FILTER_MASK leaves enabled (RTL filter_mask_map)."""
    m = job.mask
    r, c = np.divmod(np.arange(9), 3)
    masked = (r < m["top"]) | (r >= 3 - m["bottom"]) | (c < m["left"]) | (c >= 3 - m["right"])
    return (~masked).astype(np.int64)


def effective_weights(job: Ne16Job, stored: np.ndarray) -> np.ndarray:
    """(stored + WEIGHT_OFFSET) as wrapping int32, zero on masked taps."""
    w = stored.astype(np.int64) + job.weight_offset
    if not job.pointwise:
        mask = _tap_mask(job)
        w = w * (mask[None, :] if job.depthwise else mask[None, None, :, None])
    return w.astype(np.uint32).view(np.int32) if w.size else w.astype(np.int32)


def _effective(job: Ne16Job, l1: AddressSpace) -> np.ndarray:
    """``effective_weights`` of the weights in L1, reused while their bytes are unchanged."""
    gather = _PLANS.get_or(("weights", job.signature), lambda: _weight_plan(job))
    raw = gather.read(l1, job.reg("WEIGHTS_PTR"), "weights", job)
    return _WEIGHTS.get_or((job.signature, raw.tobytes()),
                           lambda: effective_weights(job, _weight_values(job, raw)))


def weights(job: Ne16Job, l1: AddressSpace) -> tuple[np.ndarray, int, int]:
    """``job``'s effective weights from L1 (3x3 / 1x1 [K, KI, taps, channels], depthwise
    [K, 9], linear [K, KI * 256]) and the range [first, end) of the bytes they come from,
    relative to WEIGHTS_PTR."""
    gather = _PLANS.get_or(("weights", job.signature), lambda: _weight_plan(job))
    return _effective(job, l1), gather.lo, gather.hi + 1


def as_channels(x: np.ndarray, mode16: bool) -> np.ndarray:
    """Input bytes (..., 16) as unsigned channels: uint8, or uint16 pairs in 16-bit mode."""
    return np.ascontiguousarray(x).view("<u2") if mode16 else x


def accumulate(job: Ne16Job, l1: AddressSpace, kernels=None) -> np.ndarray:
    """The 32-bit accumulators of every output position: int32 [positions, KO * tp]."""
    gemm, depthwise = kernels or (gemm_wrap32, depthwise_wrap32)
    w = _effective(job, l1)
    if job.linear:
        x = as_channels(linear_inputs(job, l1), job.mode16).reshape(1, -1)
        return gemm(np.ascontiguousarray(x), np.ascontiguousarray(w[:, :x.shape[1]]))
    buf = input_buffers(job, l1)                                      # [I, J, KI, B, B, 16]
    if job.pointwise:
        patches = buf[:, :, :, _PIX_R, _PIX_C][:, :, :, :, None]      # [I, J, KI, 9, 1, 16]
    else:
        rows = _PIX_R[:, None] + _PIX_R[None, :]
        cols = _PIX_C[:, None] + _PIX_C[None, :]
        patches = buf[:, :, :, rows, cols]                            # [I, J, KI, 9p, 9t, 16]
    patches = as_channels(patches, job.mode16)
    if job.depthwise:
        out = np.zeros((job.nb_ho * job.nb_wo * 9, job.nb_ko * TP_IN), np.int32)
        for ko in range(job.nb_ko):
            x = np.ascontiguousarray(patches[:, :, ko].reshape(-1, 9, TP_IN))
            w_k = np.ascontiguousarray(w[ko * TP_IN:(ko + 1) * TP_IN])
            out[:, ko * TP_IN:(ko + 1) * TP_IN] = depthwise(x, w_k)
        return out
    x = patches.transpose(0, 1, 3, 2, 4, 5).reshape(job.nb_ho * job.nb_wo * 9, -1)
    return gemm(np.ascontiguousarray(x), np.ascontiguousarray(w.reshape(w.shape[0], -1)))


def output_addresses(job: Ne16Job, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Start address of every (position, channel) value of ``nbytes`` bytes, and whether the
    streamer writes it: ([positions, K], [positions, K])."""
    rel, ok = _PLANS.get_or(("out", job.signature, nbytes), lambda: _output_plan(job, nbytes))
    return job.reg("OUTFEAT_PTR") + rel, ok


def _output_plan(job: Ne16Job, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    pos, pos_ok, chan_off, k_ok = output_layout(job, nbytes)
    return pos[:, None] + chan_off[None, :], pos_ok[:, None] & k_ok[None, :]


def output_layout(job: Ne16Job, nbytes: int) -> tuple:
    """Where the streamer writes values of ``nbytes`` bytes: the offset from OUTFEAT_PTR of
    every output position's pixel (patch row and column, then position in the patch; one in
    linear mode) and whether it is written, and the offset of every channel in its pixel and
    whether it is written: (pos, pos_ok [positions], chan_off, k_ok [K])."""
    tp, d0 = job.tp_out, job.reg("OUTFEAT_D0_STRIDE")
    d1, d2 = job.reg("OUTFEAT_D1_STRIDE"), job.reg("OUTFEAT_D2_STRIDE")
    per_word = max(1, 32 // nbytes)
    k = np.arange(job.nb_ko * tp)
    ko, kk = np.divmod(k, tp)
    lane = kk * nbytes if nbytes == 1 else (kk // per_word) * d0 + (kk % per_word) * nbytes
    chan_off = ko * tp * nbytes + lane
    k_ok = kk < _sizes(job, job.k_out_lim, job.nb_ko)[ko]
    if job.linear:
        return np.zeros(1, np.int64), np.ones(1, bool), chan_off, k_ok
    i, j, p = _grid(job.nb_ho, job.nb_wo, 9)
    pos = (PATCH * i + _PIX_R[p]) * d2 + (PATCH * j + _PIX_C[p]) * d1
    pos_ok = (_PIX_R[p] < _sizes(job, job.h_out, job.nb_ho)[i]) & \
             (_PIX_C[p] < _sizes(job, job.w_out, job.nb_wo)[j])
    if job.strided:
        pos_ok = pos_ok & _STRIDED[p]
    return pos.reshape(-1), pos_ok.reshape(-1), chan_off, k_ok


def _wrap(values: np.ndarray, bits: int) -> np.ndarray:
    half = 1 << (bits - 1)
    return ((values + half) & ((1 << bits) - 1)) - half


def _norm_param(job, l1, pointer: str, nbytes: int, signed: bool = False) -> np.ndarray:
    gather = _PLANS.get_or(("norm", job.signature, nbytes), lambda: _norm_plan(job, nbytes))
    raw = gather.read(l1, job.reg(pointer), pointer.lower().replace("_ptr", ""), job)
    values = (raw.astype(np.int64) << (8 * np.arange(nbytes))).sum(axis=1)
    return _wrap(values, 8 * nbytes) if signed else values


def _norm_plan(job: Ne16Job, nbytes: int) -> _Gather:
    tp = job.tp_out
    k = np.arange(job.nb_ko * tp)
    valid = (k % tp) < np.repeat(_sizes(job, job.k_out_lim, job.nb_ko), tp)
    index = (np.flatnonzero(valid)[:, None] * nbytes + np.arange(nbytes)).reshape(-1)
    offsets = (k[valid, None] * nbytes + np.arange(nbytes)).reshape(-1)
    return _Gather.of((k.size, nbytes), offsets, index)


def normquant(job: Ne16Job, l1: AddressSpace, acc: np.ndarray, bias_add: str,
              rounding: str) -> np.ndarray:
    """Output values (int64) from the accumulators, per CONFIG0."""
    value = acc.astype(np.int64)
    if not job.quant:
        return value
    scale = _norm_param(job, l1, "SCALE_PTR", job.norm_bits // 8)
    value = _wrap(value * scale, 48)
    if job.config["norm_bias"]:
        bias = _norm_param(job, l1, "SCALE_BIAS_PTR", 4, signed=True)
        value = _wrap(value, 32) + bias
        value = _wrap(value, 32) if bias_add == "wrap" else np.clip(value, -(1 << 31),
                                                                     (1 << 31) - 1)
    if job.config["norm_shift"]:
        shift = _norm_param(job, l1, "SCALE_SHIFT_PTR", 1) & 0x3F
    else:
        shift = np.full(value.shape[-1], job.config["shift"], np.int64)
    if rounding == "config0" and not job.config["no_round"]:
        value = value + np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)
    value = value >> shift
    bits = job.out_bits
    lo, hi = (0, (1 << bits) - 1) if job.relu else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return np.clip(value, lo, hi)


def streamin(job: Ne16Job, l1: AddressSpace, acc: np.ndarray) -> np.ndarray:
    """The accumulators plus the int32 partial sums at the output addresses."""
    addr, ok = output_addresses(job, 4)
    words = np.zeros(addr.shape, np.int64)
    raw = _fetch(l1, addr[ok][:, None] + np.arange(4), "streamin", job)
    words[ok] = _wrap((raw.astype(np.int64) << (8 * np.arange(4))).sum(axis=1), 32)
    return _wrap(acc.astype(np.int64) + words, 32).astype(np.int32)


def run_job(job: Ne16Job, l1: AddressSpace, bias_add: str = "wrap", rounding: str = "none",
            kernels=None) -> tuple[np.ndarray, np.ndarray]:
    """Everything a job reads and computes: (byte offsets into L1, byte values) it writes, in
    streamer order (a later store to the same byte wins)."""
    acc = accumulate(job, l1, kernels)
    if job.streamin:
        acc = streamin(job, l1, acc)
    values = normquant(job, l1, acc, bias_add, rounding)
    nbytes = job.out_bits // 8 if job.quant else 4
    elements, rel, keep = _PLANS.get_or(("stores", job.signature, nbytes),
                                        lambda: _store_plan(job, nbytes))
    off = job.reg("OUTFEAT_PTR") - l1.base + rel
    if off.size and (off[0] + rel.min() - rel[0] < 0 or off[0] + rel.max() - rel[0] >= l1.size):
        bad = int(l1.base + off[np.argmax((off < 0) | (off >= l1.size))])
        raise MemoryFault(l1.name, bad, 1, f"ne16 job {job.index} writes its output outside "
                                           f"{l1.base:#x}..{l1.end:#x}")
    # in-range values: their low bytes, little-endian, are the stored bytes
    data = values.reshape(-1)[elements].astype(f"<u{nbytes}").view(np.uint8)
    return (off, data) if keep is None else (off, data[keep])


def _store_plan(job: Ne16Job, nbytes: int) -> tuple:
    """The written elements in streamer order (k_out subtile, position, channel), the offset
    of each byte they write from OUTFEAT_PTR, and which bytes survive (the last store to a
    byte wins; None: no byte is written twice)."""
    rel, ok = _output_plan(job, nbytes)
    order = np.arange(ok.size).reshape(ok.shape)

    def streamer_order(a):
        return a.reshape(a.shape[0], job.nb_ko, -1).transpose(1, 0, 2)
    rel, ok, order = streamer_order(rel), streamer_order(ok), streamer_order(order)
    elements = order[ok]
    offsets = (rel[ok][:, None] + np.arange(nbytes)).reshape(-1)
    _, last = np.unique(offsets[::-1], return_index=True)
    if last.size == offsets.size:
        return elements, offsets, None
    keep = np.sort(offsets.size - 1 - last)
    return elements, offsets[keep], keep
