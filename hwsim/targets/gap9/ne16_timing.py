"""NE16 timing: a job as its sequence of controller states, each with the cycles it returns.

Follows the GVSoC NE16 state machine (gvsoc-pulp ``pulp/ne16/src/ne16_fsm.cpp``): per output
patch and k_out subtile, [streamin], then per k_in subtile load -> matrix-vector, then
norm/quant, then streamout. Each state's cost is its streamer accesses (``ne16_access_cycles``
each, one per cycle) plus the fixed bubbles GVSoC adds when entering or leaving a state; a
state's L1 traffic is priced against other masters by the machine (``tcdm.Traffic``).

Per state: load reads one 16-byte word per input pixel of the patch (25 in 3x3 modes; 1x1 pads
its 9 or fewer to ``ne16_1x1_slots``; linear loads 16 words, 32 in 16-bit mode); matrix-vector
reads one weight word per output channel and weight bit in 3x3 modes (the bit-serial loop, so
fewer bits are faster), one per output channel in 1x1 mode (the 9 rows hold the bit-planes, so
the bit width does not matter), and per channel in depthwise mode; norm/quant reads the shifts,
one 4-byte scale word per iteration (``norm_bits`` iterations) and 4 bias words; streamout
writes one word per output pixel (8-bit) or one 32-byte word per 8 channels (32-bit), visiting
disabled positions too. 1x1 streamout is padded to ``ne16_1x1_slots``. GVSoC's 1x1 streamout
formula can go negative for 32-bit output; here the padding is ``max(stores, slots)``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hwsim.targets.gap9.ne16_job import TP_IN, Ne16Job


@dataclass(frozen=True)
class State:
    name: str
    cycles: int
    l1_bytes: int
    accesses: int
    words_per_access: float
    macs: int = 0


def _words(nbytes: int) -> float:
    """TCDM words one streamer access touches (GVSoC reads the width plus 4 alignment bytes)."""
    return -(-(nbytes + 4) // 4)


def _load(job: Ne16Job, t, i: int, j: int, ki: int) -> State:
    if job.linear:
        n, width = job.linear_vectors(ki), TP_IN
    else:
        n, width = job.h_in(i) * job.w_in(j), job.k_in_bytes(ki)
    slots = t.ne16_1x1_slots if job.pointwise and not job.linear else n
    cycles = t.ne16_load_enter_cycles + n * t.ne16_access_cycles + max(0, slots - n)
    return State("load", cycles, n * width, n, _words(width))


def _matrixvec(job: Ne16Job, t, k_out: int) -> State:
    qw, access = job.weight_bits, t.ne16_access_cycles
    bpp = 1 if job.mode16 else 2
    if job.depthwise:
        cycles = t.ne16_dw_first_cycles + k_out * qw * access
        return State("matrix-vector", cycles, k_out * qw * 18, k_out * qw, _words(18))
    if job.linear or job.pointwise:
        per_k = qw if job.linear else 1
        width = 32 if job.linear else qw * bpp
        cycles = (t.ne16_mv_enter_1x1_cycles + k_out * per_k * access + t.ne16_mv_exit_cycles)
        return State("matrix-vector", cycles, k_out * per_k * width, k_out * per_k, _words(width))
    cycles = t.ne16_mv_enter_3x3_cycles + k_out * qw * access + t.ne16_mv_exit_cycles
    return State("matrix-vector", cycles, k_out * qw * 9 * bpp, k_out * qw, _words(9 * bpp))


def _normquant(job: Ne16Job, k_out: int, t) -> State:
    bits = job.norm_bits
    full = k_out == job.tp_out
    scales = bits if full else -(-k_out * bits // 32)
    shifts = 1 if job.config["norm_shift"] else 0
    biases = 4 if job.config["norm_bias"] else 0
    n = scales + shifts + biases
    nbytes = 4 * scales + 32 * shifts + 32 * biases
    return State("norm/quant", n * t.ne16_access_cycles, nbytes, n, _words(16))


def _streamout(job: Ne16Job, t, i: int, j: int, k_out: int) -> State:
    words = job.out_words(k_out)
    nbytes = job.out_bits // 8 if job.quant else 4
    if job.linear:
        stores, pixels = words, 1
    else:
        rows, cols = job.h_out(i), job.w_out(j)
        stores = ((rows - 1) * 3 + cols) * words
        pixels = rows * cols if not job.strided else ((rows + 1) // 2) * ((cols + 1) // 2)
    slots = t.ne16_1x1_slots if job.pointwise and not job.linear else stores
    cycles = max(stores, slots) * t.ne16_access_cycles
    return State("streamout", cycles, pixels * k_out * nbytes, stores, _words(32))


def job_states(job: Ne16Job, t) -> list[State]:
    """The states of ``job`` in execution order; the job's MACs are spread over its
    matrix-vector states, and the start and end latencies folded into the first and last."""
    states: list[State] = []
    patches = [(0, 0)] if job.linear else [(i, j) for i in range(job.nb_ho)
                                           for j in range(job.nb_wo)]
    for ko in range(job.nb_ko):
        k_out = job.k_out_lim(ko)
        for i, j in patches:
            if job.streamin:
                n = (1 if job.linear else job.h_out(i) * job.w_out(j)) * job.out_words(k_out)
                states.append(State("streamin", n * t.ne16_access_cycles, n * 32, n, _words(32)))
            for ki in range(job.k_in_subtiles):
                states.append(_load(job, t, i, j, ko if job.depthwise else ki))
                states.append(_matrixvec(job, t, k_out))
            if job.quant:
                states.append(_normquant(job, k_out, t))
            states.append(_streamout(job, t, i, j, k_out))
    mv = [n for n, s in enumerate(states) if s.name == "matrix-vector"]
    share, extra = divmod(job.macs, len(mv))
    for rank, n in enumerate(mv):
        states[n] = replace(states[n], macs=share + (extra if rank == len(mv) - 1 else 0))
    states[0] = replace(states[0], cycles=states[0].cycles + t.ne16_start_cycles)
    states[-1] = replace(states[-1], cycles=states[-1].cycles + t.ne16_end_cycles)
    return states
