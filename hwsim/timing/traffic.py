"""Contention for a banked memory between masters, priced per op from overlapping traffic.

Used by machines whose masters share a word-interleaved memory (GAP9's L1: the cores, the DMA and
the NE16 streamer). Every op that moves data through that memory leaves an interval of traffic
(start, end, words per cycle, master). An op that pays (``TRAFFIC_PAY``) and starts at ``start``
for ``cycles`` meets the other masters' traffic overlapping its window: with ``rho`` their mean
words per cycle over the window, each of its accesses of ``k`` words costs
``min(1, k * rho / banks)`` expected conflict cycles; the total, rounded to a whole number of
cycles, extends the op, and its own interval (stall included) is recorded. An op that records
(``TRAFFIC_RECORD``, a DMA transfer) leaves its interval and never pays.

Ops are priced in the order they start (both engines start ops in (cycle, program order)), so
traffic that ended before an op starts can never matter again and is dropped. The intervals live
in one float64 array of rows (start, end, rate, master); both engines call these same compiled
functions, so they agree to the last bit.
"""

from __future__ import annotations

import numba
import numpy as np

jit = numba.njit(cache=True, nogil=True)


def intervals(capacity: int = 64) -> np.ndarray:
    return np.zeros((capacity, 4))


@jit
def _append(iv, count, start, end, rate, master):
    if count == iv.shape[0]:
        grown = np.zeros((2 * iv.shape[0] + 1, 4))
        for k in range(count):      # element by element: a slice assignment compiles slowly
            for c in range(4):
                grown[k, c] = iv[k, c]
        iv = grown
    iv[count, 0], iv[count, 1], iv[count, 2], iv[count, 3] = start, end, rate, master
    return iv, count + 1


@jit
def record(iv, count, master, start, cycles, words):
    """Leave ``words`` of traffic over ``cycles`` from ``start``: (intervals, count)."""
    if cycles > 0 and words > 0:
        return _append(iv, count, start, start + cycles, words / cycles, master)
    return iv, count


@jit
def pay(iv, count, master, start, cycles, acc_words, acc_count, lo, hi, total_words, banks):
    """The conflict cycles of an op starting now, making the accesses ``lo:hi`` of the
    pattern arrays, which then records its own traffic: (stall, intervals, count)."""
    kept = np.int64(0)   # typed: a literal 0 would compile record and _append once more
    for k in range(count):            # drop what ended; keep the order of the rest
        if iv[k, 1] > start:
            if kept != k:
                for c in range(4):
                    iv[kept, c] = iv[k, c]
            kept += 1
    count = kept
    window = max(cycles, 1)
    end = start + window
    other = 0.0
    for k in range(count):
        if iv[k, 3] != master and iv[k, 0] < end:
            other += iv[k, 2] * (min(end, iv[k, 1]) - max(start, iv[k, 0]))
    stall = 0
    if other != 0.0:
        rho = other / window
        expected = 0.0
        for a in range(lo, hi):
            expected += acc_count[a] * min(1.0, acc_words[a] * rho / banks)
        stall = np.int64(np.rint(expected))
    iv, count = record(iv, count, master, start, cycles + stall, total_words)
    return stall, iv, count
