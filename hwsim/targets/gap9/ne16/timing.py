"""NE16 timing: a job as its sequence of controller states, each with the cycles it returns.

Follows the GVSoC NE16 state machine (gvsoc-pulp ``pulp/ne16/src/ne16_fsm.cpp``): per output
patch and k_out subtile, [streamin], then per k_in subtile load -> matrix-vector, then
norm/quant, then streamout. Each state's cost is its streamer accesses (``ne16_access_cycles``
each, one per cycle) plus the fixed bubbles GVSoC adds when entering or leaving a state; a
state's L1 traffic is priced against other masters by the machine (``hwsim.timing.traffic``).

Per state: load reads one 16-byte word per input pixel of the patch (25 in 3x3 modes; 1x1 pads
its 9 or fewer to ``ne16_1x1_slots``; linear loads 16 words, 32 in 16-bit mode); matrix-vector
reads one weight word per output channel and weight bit in 3x3 modes (the bit-serial loop, so
fewer bits are faster), one per output channel in 1x1 mode (the 9 rows hold the bit-planes, so
the bit width does not matter), and per channel in depthwise mode; norm/quant reads the shifts,
one 4-byte scale word per iteration (``norm_bits`` iterations) and 4 bias words; streamout
writes one word per output pixel (8-bit) or one 32-byte word per 8 channels (32-bit), visiting
disabled positions too. 1x1 streamout is padded to ``ne16_1x1_slots``. GVSoC's 1x1 streamout
formula can go negative for 32-bit output; here the padding is ``max(stores, slots)``.

``job_totals`` adds up the same states without listing them (each distinct state once, times
how often it occurs), for machines that run a whole job as one engine op.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hwsim.targets.gap9.ne16.job import PATCH, TP_IN, Ne16Job

# Bytes one streamer access moves: with the realignment port, they decide the TCDM words (and
# so the banks) it touches. The streamer's ports: 9 x 32 bit, 256 bits after realignment
# (ne16 rtl/ne16_package.sv); the widths as GVSoC's streamer model requests them.
TCDM_WORD_BYTES = 4
REALIGN_BYTES = 4               # the ninth port: an access reads its width plus one word
STREAM_WORD_BYTES = 32          # 256 bits: streamout, streamin and a linear weight word
WEIGHT_WORD_3X3_BYTES = PATCH * PATCH * TP_IN // 8   # one bit of 9 taps x 16 channels: 18
NORM_ACCESS_BYTES = 16          # a norm/quant access (GVSoC pulp/ne16, normquant state)


@dataclass(frozen=True)
class State:
    name: str
    cycles: int
    l1_bytes: int
    accesses: int
    words_per_access: float


class _Costs:
    """The parameters the states use, read once per job (reading a ParamSet records it)."""

    NAMES = ("ne16_access_cycles", "ne16_load_enter_cycles", "ne16_mv_enter_3x3_cycles",
             "ne16_mv_enter_1x1_cycles", "ne16_dw_first_cycles", "ne16_mv_exit_cycles",
             "ne16_1x1_slots")

    def __init__(self, t):
        for name in self.NAMES:
            setattr(self, name, getattr(t, name))


def _words(nbytes: int) -> float:
    """TCDM words one streamer access touches (GVSoC reads the width plus the realignment
    word)."""
    return -(-(nbytes + REALIGN_BYTES) // TCDM_WORD_BYTES)


def _load(job: Ne16Job, t, n: int, width: int) -> State:
    slots = t.ne16_1x1_slots if job.pointwise and not job.linear else n
    cycles = t.ne16_load_enter_cycles + n * t.ne16_access_cycles + max(0, slots - n)
    return State("load", cycles, n * width, n, _words(width))


def _matrixvec(job: Ne16Job, t, k_out: int) -> State:
    qw, access = job.weight_bits, t.ne16_access_cycles
    plane = TP_IN // 8 // (2 if job.mode16 else 1)   # bytes of one weight bit of a subtile
    if job.depthwise:
        cycles = t.ne16_dw_first_cycles + k_out * qw * access
        return State("matrix-vector", cycles, k_out * qw * WEIGHT_WORD_3X3_BYTES, k_out * qw,
                     _words(WEIGHT_WORD_3X3_BYTES))
    if job.linear or job.pointwise:
        per_k = qw if job.linear else 1
        width = STREAM_WORD_BYTES if job.linear else qw * plane
        cycles = (t.ne16_mv_enter_1x1_cycles + k_out * per_k * access + t.ne16_mv_exit_cycles)
        return State("matrix-vector", cycles, k_out * per_k * width, k_out * per_k, _words(width))
    cycles = t.ne16_mv_enter_3x3_cycles + k_out * qw * access + t.ne16_mv_exit_cycles
    width = PATCH * PATCH * plane
    return State("matrix-vector", cycles, k_out * qw * width, k_out * qw, _words(width))


def _normquant(job: Ne16Job, t, k_out: int) -> State:
    bits = job.norm_bits
    scales = bits if k_out == job.tp_out else -(-k_out * bits // 32)
    shifts = 1 if job.config["norm_shift"] else 0
    biases = 4 if job.config["norm_bias"] else 0
    n = scales + shifts + biases
    nbytes = 4 * scales + 32 * shifts + 32 * biases
    return State("norm/quant", n * t.ne16_access_cycles, nbytes, n, _words(NORM_ACCESS_BYTES))


def _streamout(job: Ne16Job, t, rows: int, cols: int, k_out: int) -> State:
    words = job.out_words(k_out)
    nbytes = job.out_bits // 8 if job.quant else 4
    if job.linear:
        stores, pixels = words, 1
    else:
        stores = ((rows - 1) * 3 + cols) * words
        pixels = rows * cols if not job.strided else ((rows + 1) // 2) * ((cols + 1) // 2)
    slots = t.ne16_1x1_slots if job.pointwise and not job.linear else stores
    cycles = max(stores, slots) * t.ne16_access_cycles
    return State("streamout", cycles, pixels * k_out * nbytes, stores,
                 _words(STREAM_WORD_BYTES))


def _streamin(job: Ne16Job, t, rows: int, cols: int, k_out: int) -> State:
    n = (1 if job.linear else rows * cols) * job.out_words(k_out)
    return State("streamin", n * t.ne16_access_cycles, n * STREAM_WORD_BYTES, n,
                 _words(STREAM_WORD_BYTES))


def job_states(job: Ne16Job, t) -> list[State]:
    """The states of ``job`` in execution order (equal states are one shared object)."""
    costs, cache = _Costs(t), {}

    def state(fn, *args) -> State:
        key = (fn, args)
        if key not in cache:
            cache[key] = fn(job, costs, *args)
        return cache[key]

    states: list[State] = []
    patches = [(0, 0)] if job.linear else [(i, j) for i in range(job.nb_ho)
                                           for j in range(job.nb_wo)]
    for ko in range(job.nb_ko):
        k_out = job.k_out_lim(ko)
        for i, j in patches:
            rows, cols = job.h_out(i), job.w_out(j)
            if job.streamin:
                states.append(state(_streamin, rows, cols, k_out))
            for ki in range(job.k_in_subtiles):
                if job.linear:
                    states.append(state(_load, job.linear_vectors(ki), TP_IN))
                else:
                    width = job.k_in_bytes(ko if job.depthwise else ki)
                    states.append(state(_load, job.h_in(i) * job.w_in(j), width))
                states.append(state(_matrixvec, k_out))
            if job.quant:
                states.append(state(_normquant, k_out))
            states.append(state(_streamout, rows, cols, k_out))
    return states


@dataclass(frozen=True)
class Totals:
    """A job's states added up: cycles, L1 bytes, and the streamer accesses by their width
    (``{words per access: accesses}``), for pricing contention over the whole job."""

    cycles: int
    l1_bytes: int
    accesses: dict


_TOTALS: dict = {}


def job_totals(job: Ne16Job, t) -> Totals:
    """The sum of ``job_states(job, t)``, from the distinct states and their counts (cached
    per job signature and cost parameters: the tiles of a layer share one)."""
    costs = _Costs(t)
    key = (job.signature, tuple(getattr(costs, n) for n in _Costs.NAMES))
    found = _TOTALS.get(key)
    if found is None:
        if len(_TOTALS) >= 4096:
            _TOTALS.clear()
        found = _TOTALS[key] = _totals(job, costs)
    return found


def _totals(job: Ne16Job, costs) -> Totals:
    counts: Counter = Counter()
    if job.linear:
        patches = Counter({(job.h_out(0), job.w_out(0), 0, 0): 1})
    else:
        rows = Counter((job.h_out(i), job.h_in(i)) for i in range(job.nb_ho))
        cols = Counter((job.w_out(j), job.w_in(j)) for j in range(job.nb_wo))
        patches = Counter({(ho, wo, hi, wi): m * n for (ho, hi), m in rows.items()
                           for (wo, wi), n in cols.items()})
    k_outs = Counter((job.k_out_lim(ko), job.k_in_bytes(ko) if job.depthwise else 0)
                     for ko in range(job.nb_ko))
    loads = Counter(job.linear_vectors(ki) if job.linear else job.k_in_bytes(ki)
                    for ki in range(job.k_in_subtiles))
    for (k_out, dw_width), n_ko in k_outs.items():
        for (rows_out, cols_out, rows_in, cols_in), n_patch in patches.items():
            n = n_ko * n_patch
            if job.streamin:
                counts[_streamin(job, costs, rows_out, cols_out, k_out)] += n
            for size, n_ki in loads.items():
                if job.linear:
                    counts[_load(job, costs, size, TP_IN)] += n * n_ki
                else:
                    width = dw_width if job.depthwise else size
                    counts[_load(job, costs, rows_in * cols_in, width)] += n * n_ki
                counts[_matrixvec(job, costs, k_out)] += n * n_ki
            if job.quant:
                counts[_normquant(job, costs, k_out)] += n
            counts[_streamout(job, costs, rows_out, cols_out, k_out)] += n
    accesses: Counter = Counter()
    for state, n in counts.items():
        accesses[state.words_per_access] += state.accesses * n
    return Totals(sum(s.cycles * n for s, n in counts.items()),
                  sum(s.l1_bytes * n for s, n in counts.items()), dict(accesses))
