"""L1 (TCDM) bank contention, priced analytically per access pattern instead of per cycle.

L1 is ``banks`` word-interleaved banks: word address ``a // word_bytes`` lives in bank
``(a // word_bytes) % banks``; a bank serves one word a cycle, and a master whose request loses
the bank retries the next cycle ("a conflict costs a cycle"). Two effects are priced:

* **Within the cluster**: the 8 worker cores stream through their parts of a kernel's tensors.
  ``core_stalls`` runs their request streams against the banks, cycle by cycle, in a numba kernel
  (round-robin grant among the cores that hit one bank; a loser retries the next cycle, so cores
  drift apart as on silicon). Each core issues one request every ``1 + gap`` cycles; the
  simulation stops after ``window`` cycles and extrapolates its steady stall rate.
* **Between masters** (cores, DMA, the NE16 streamer): each op records its L1 traffic as an
  interval (start, end, words per cycle). An op that starts while others' traffic overlaps its
  window pays, per access of ``k`` words, ``min(1, k * rho / banks)`` expected conflict cycles,
  where ``rho`` is the others' mean words per cycle over the window. The op that starts later
  pays; DMA transfers are recorded but never pay (their time is bound by L2). Both timing engines
  price it with ``hwsim.timing.traffic``; the machine declares each op's traffic in its table.

Approximate by construction: the cross-master term is an expectation over uniformly spread bank
hits, not a replay of addresses; the core term assumes the streams of the cost model.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def core_stalls(bases, offsets, steps, counts, gap, banks, word_bytes, window):
    """Stall cycles of each core. Core ``c`` makes ``counts[c]`` iterations; iteration ``i``
    requests, for each stream ``s``, word ``bases[s] + offsets[s, c] + i * steps[s]``."""
    n_streams, n_cores = offsets.shape
    done = np.zeros(n_cores, np.int64)          # requests completed
    ready = np.zeros(n_cores, np.int64)         # cycle of the next request
    stalls = np.zeros(n_cores, np.int64)
    total = counts * n_streams
    owner = np.full(banks, -1, np.int64)
    cycle = 0
    first = 0
    while cycle < window:
        busy = False
        owner[:] = -1
        for k in range(n_cores):
            c = (first + k) % n_cores           # round-robin priority
            if done[c] >= total[c] or ready[c] > cycle:
                busy = busy or done[c] < total[c]
                continue
            busy = True
            i, s = done[c] // n_streams, done[c] % n_streams
            bank = ((bases[s] + offsets[s, c] + i * steps[s]) // word_bytes) % banks
            if owner[bank] < 0:
                owner[bank] = c
                done[c] += 1
                ready[c] = cycle + 1 + gap
            else:
                stalls[c] += 1
        if not busy:
            break
        first = (first + 1) % n_cores
        cycle += 1
    # extrapolate the unfinished requests at the stall rate seen so far
    for c in range(n_cores):
        if done[c] < total[c] and done[c] > 0:
            stalls[c] += stalls[c] * (total[c] - done[c]) // done[c]
    return stalls


def core_stalls_np(bases, offsets, steps, counts, gap, banks, word_bytes, window):
    """Plain-Python twin of ``core_stalls`` (same signature and result)."""
    n_streams, n_cores = offsets.shape
    done, ready = [0] * n_cores, [0] * n_cores
    stalls = np.zeros(n_cores, np.int64)
    total = [int(n) * n_streams for n in counts]
    cycle = first = 0
    while cycle < window:
        owner, busy = {}, False
        for k in range(n_cores):
            c = (first + k) % n_cores
            if done[c] >= total[c] or ready[c] > cycle:
                busy = busy or done[c] < total[c]
                continue
            busy = True
            i, s = divmod(done[c], n_streams)
            bank = ((int(bases[s]) + int(offsets[s, c]) + i * int(steps[s])) // word_bytes) % banks
            if bank not in owner:
                owner[bank] = c
                done[c] += 1
                ready[c] = cycle + 1 + gap
            else:
                stalls[c] += 1
        if not busy:
            break
        first = (first + 1) % n_cores
        cycle += 1
    for c in range(n_cores):
        if 0 < done[c] < total[c]:
            stalls[c] += stalls[c] * (total[c] - done[c]) // done[c]
    return stalls
