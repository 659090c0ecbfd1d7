"""The HMX datapaths as functions of the state: what a multiply computes when it starts, into
a buffer that its commit stores when its results are ready, and what the write of the convert
state stores.

The machine (``machine.py``) calls these from its instructions' semantics; they know nothing of
timing. A multiply reads its operands straight from the VTCM bytes in one numba call
(``multiply_vtcm``): the croutons of the activation (section 2.2.1: plain, deep over dC + 1
croutons, or the single's two croutons dY apart with the Y offset; Figures 4, 19, 24), the
weight vectors (Figure 8; missing vectors read as zeros, 2.2.2), and the accumulator(s) it adds
to; the results go to ``MpyBuffers.acc``, never to the state, so that an op starting before
the multiply's results are ready still reads the old accumulators. ``act_matrix`` and
``wgt_matrices`` are the numpy twins of the gathers, used by the tests. ``write_convert`` gives
the bytes a write of the convert state stores (twin: ``layouts.pack_crouton``).
"""

from __future__ import annotations

import numpy as np

from hwsim.isa.hmx import CROUTON_BYTES, VECTOR_BYTES
from hwsim.targets.floats import jit
from hwsim.targets.hmx import layouts, numerics

CELLS = 32  # spatials and filters of an accumulator (Figure 9)
MAX_CHANNELS = 32 * 32  # an activation of 32 croutons (dC <= 31, 4.2.1)


class MpyBuffers:
    """Scratch for the multiply: the operands as FP16 bits, the accumulator results, and the
    last decoded weights of each of the (up to two) filter groups, with the bits and the
    parameters they were decoded from (``key``: channels, negate, USR[20], rounding group; -1
    when empty): convolution and GEMM tiles reuse their weights, and decoding is a pure
    function of these."""

    def __init__(self):
        self.act = np.empty((MAX_CHANNELS, CELLS), dtype=np.uint16)
        self.wgt = np.empty((2 * MAX_CHANNELS, CELLS), dtype=np.uint16)
        self.acc = np.empty((2, CELLS, CELLS), dtype=np.uint64)
        self.act_values = np.empty((MAX_CHANNELS, CELLS))
        self.act_ratio = np.empty(CELLS * MAX_CHANNELS)  # [spatial, chunk]
        self.act_special = np.zeros(CELLS, dtype=np.bool_)
        self.seen = np.empty((2, MAX_CHANNELS, CELLS), dtype=np.uint16)
        self.key = np.full((2, 4), -1, dtype=np.int64)
        self.values = np.empty((2, MAX_CHANNELS, CELLS))
        self.ratio = np.empty((2, CELLS * MAX_CHANNELS))  # [filter, chunk] each
        self.special = np.zeros((2, CELLS), dtype=np.bool_)
        self.pending = np.zeros((2, CELLS, CELLS), dtype=np.bool_)  # cells left to the rest


def multiply(vtcm, state, plan, targets: list, acc_format: tuple, group: int,
             buffers: MpyBuffers) -> None:
    """The multiply of ``plan`` (``machine.MpyPlan``) into accumulators ``targets`` (the
    primary, then the other for weight deep): new accumulators in ``buffers.acc[target]``.
    The accumulator is a resource every multiply into it reads and writes, so the next one
    starts only once this one's results are committed: one buffer per accumulator is enough."""
    first, step, count, start, stop, rows, wgt_start = plan.operands
    b, infnan = buffers, state.usr_field("infnan_propagate")
    if multiply_vtcm(vtcm.data.view(np.uint16), first, step, count, start, stop, rows,
                     wgt_start, plan.given, plan.needed, plan.deep_weights, state.acc,
                     targets[0], b.acc, plan.negate, infnan, acc_format[0], acc_format[1], group,
                     b.act, b.wgt, b.act_values, b.act_ratio, b.act_special, b.seen, b.key,
                     b.values, b.ratio, b.special, b.pending):
        _multiply_rest(state, plan, targets, infnan, acc_format, group, b)


def _multiply_rest(state, plan, targets, infnan, acc_format, group, b: MpyBuffers) -> None:
    """The cells ``multiply_vtcm`` left, by ``numerics.multiply_rest`` (compiled on demand)
    from the operands it gathered and decoded."""
    k = plan.channels
    chunks = -(-k // (k if group <= 0 else group))
    floats_a = (b.act_values[:k], b.act_ratio[:CELLS * chunks].reshape(CELLS, chunks),
                b.act_special)
    for i, target in enumerate(targets):
        if b.pending[i].any():
            floats_w = (b.values[i, :k], b.ratio[i, :CELLS * chunks].reshape(CELLS, chunks),
                        b.special[i])
            numerics.multiply_rest(b.act[:k], b.wgt[i * k:(i + 1) * k], *floats_a, *floats_w,
                                   state.acc[target], b.acc[target], plan.negate, infnan,
                                   *acc_format, group, b.pending[i])


@jit
def gather_act(mem, first, step, count, start, stop, rows, out):
    """The activation operand as ``out[k, s]`` FP16 bits (channel by accumulator spatial) from
    the FP16 words ``mem`` of the VTCM; returns k. ``count`` croutons from word ``first``,
    ``step`` words apart, channels from ``start`` in the first to ``stop`` in the last; a
    single's two croutons give channels ``start..stop`` of each, accumulator spatial s from
    spatial ``rows[s]`` of the two (32..63: the second's). The FP16 of spatial s, channel c
    of a crouton is word ``(s // 2) * 64 + c * 2 + s % 2`` (``layouts.crouton_order``)."""
    k = 0
    if rows.size:
        for c in range(start, stop + 1):
            for s in range(CELLS):
                r = rows[s] % CELLS
                out[k, s] = mem[first + rows[s] // CELLS * step + (r // 2) * 64 + c * 2 + r % 2]
            k += 1
        return k
    for i in range(count):
        lo = start if i == 0 else 0
        hi = stop if i == count - 1 else CELLS - 1
        for c in range(lo, hi + 1):
            base = first + i * step + c * 2
            for s in range(CELLS):
                out[k, s] = mem[base + (s // 2) * 64 + s % 2]
            k += 1
    return k


@jit
def gather_wgt(mem, start, given, needed, out):
    """``needed`` weight vectors from word ``start`` as ``out[k, o]`` FP16 bits (input channel
    by filter): word ``v * 64 + o * 2 + i`` is filter o, input 2v + i; vectors beyond the
    ``given`` ones read as zeros (2.2.2)."""
    used = min(given, needed)
    for v in range(needed):
        for i in range(2):
            for o in range(CELLS):
                out[2 * v + i, o] = mem[start + v * 64 + o * 2 + i] if v < used else 0


@jit
def multiply_vtcm(mem, first, step, count, start, stop, rows, wgt_start, given, needed, deep,
                  acc, primary, out, negate, infnan, ebits, mbits, group, act_buf, wgt_buf,
                  act_values, act_ratio, act_special, seen, key, values, ratio, special,
                  pending):
    """Gather and decode the operands and multiply into ``out[primary]`` (and ``out[1 -
    primary]`` with the second filter group when ``deep``), from ``acc``, by
    ``numerics.multiply_floats``: the number of cells it leaves (marked in ``pending``). The
    weights are decoded unless they are the ones last decoded (``MpyBuffers``)."""
    k = gather_act(mem, first, step, count, start, stop, rows, act_buf)
    gather_wgt(mem, wgt_start, given, needed, wgt_buf)
    chunks = -(-k // (k if group <= 0 else group))
    # C-contiguous views and an int64 zero: numerics' kernels compile once for every caller
    ratio_a = act_ratio[:CELLS * chunks].reshape(CELLS, chunks)
    numerics.operand_floats(act_buf[:k], np.int64(0), infnan, group, act_values[:k], ratio_a,
                            act_special)
    waiting = 0
    for i in range(2 if deep else 1):
        wgt = wgt_buf[i * k:(i + 1) * k]
        ratio_w = ratio[i, :CELLS * chunks].reshape(CELLS, chunks)
        if not _seen(seen[i], key[i], wgt, negate, infnan, group):
            numerics.operand_floats(wgt, negate, infnan, group, values[i, :k], ratio_w,
                                    special[i])
            for j in range(k):  # loops, not array assignments (their checks cost compiling)
                for o in range(CELLS):
                    seen[i, j, o] = wgt[j, o]
            key[i, 0], key[i, 1], key[i, 2], key[i, 3] = k, negate, infnan, group
        target = primary if i == 0 else 1 - primary
        waiting += numerics.multiply_floats(act_values[:k], ratio_a, act_special,
                                            values[i, :k], ratio_w, special[i], acc[target],
                                            out[target], ebits, mbits, group, pending[i])
    return waiting


@jit
def _seen(seen, key, wgt, negate, infnan, group):
    """These weights and parameters are the ones decoded last."""
    k = wgt.shape[0]
    if key[0] != k or key[1] != negate or key[2] != infnan or key[3] != group:
        return False
    for j in range(k):
        for o in range(CELLS):
            if seen[j, o] != wgt[j, o]:
                return False
    return True


def write_convert(state) -> np.ndarray:
    """The bytes the write of the convert state stores (2.4): its FP16 part (the upper 16 bits;
    chapter 5) as a crouton, state row s at spatial s (Figure 18)."""
    out = np.empty(CELLS * CELLS, dtype=np.uint16)
    crouton_of_cvt(state.cvt, out)
    return out.view(np.uint8)


@jit
def crouton_of_cvt(cvt, out):
    """``cvt[s, c] >> 4`` at word ``(s // 2) * 64 + c * 2 + s % 2`` of ``out``."""
    for s in range(CELLS):
        for c in range(CELLS):
            out[(s // 2) * 64 + c * 2 + s % 2] = cvt[s, c] >> 4


# -- numpy twins -------------------------------------------------------------------------------

def act_matrix(vtcm, plan) -> np.ndarray:
    """numpy twin of ``gather_act``: the activation operand as ``[k, s]`` FP16 bits."""
    if plan.rows is not None:
        both = np.concatenate([layouts.unpack_crouton(vtcm.view(a, CROUTON_BYTES))
                               for a, _, _ in plan.croutons])  # [64 spatials, c]
        _, lo, hi = plan.croutons[0]
        return np.ascontiguousarray(both[plan.rows, lo:hi + 1].T)
    count = len(plan.croutons)
    cells = vtcm.view(plan.croutons[0][0], count * CROUTON_BYTES).view(np.uint16)
    cells = cells.reshape(count, 16, 32, 2).transpose(0, 2, 1, 3).reshape(count, 32, CELLS)
    parts = [cells[i, lo:hi + 1] for i, (_, lo, hi) in enumerate(plan.croutons)]
    return np.ascontiguousarray(parts[0] if count == 1 else np.concatenate(parts))


def wgt_matrices(vtcm, plan) -> list[np.ndarray]:
    """numpy twin of ``gather_wgt``: the weight operand(s) as ``[k, o]`` FP16 bits."""
    used = min(plan.given, plan.needed)
    matrix = np.zeros((plan.needed * 2, CELLS), dtype=np.uint16)
    matrix[:used * 2] = layouts.weights_matrix(vtcm.view(plan.wgt_addr, used * VECTOR_BYTES))
    k = plan.channels
    return [matrix[:k], matrix[k:]] if plan.deep_weights else [matrix]
