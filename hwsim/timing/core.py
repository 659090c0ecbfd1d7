"""The compiled timing engine: the semantics of ``hwsim.timing.engine`` over an op table, in numba.

It computes, for every op of an ``OpTable``, when it is dispatched, taken by its unit, started,
ended and ready, with the same rules as the simpy reference twin (``engine``'s docstring states
them) and identical results: cycles, stalls by reason, port slots, contention. No Python runs
per op: a first pass turns the resource scoreboard into dependency edges (program order), and the
main loop starts ops in (cycle, program order) from the head op of each unit:

* an op is *taken* when it is dispatched and its unit's previous op has started (its take time
  is the later of its dispatch and that op's end); it is *resolved* when every op it depends on
  has started (an op waiting on one registers with it and is looked at again when it starts);
* a resolved op's start follows from its take time, its dependencies (each resource's edges are
  one run, whose latest time decides the stall charged to ``wait KIND``) and, on a decoupled
  unit, the transfers in flight;
* at most one op per unit is resolved and not started, so choosing the next op to start is a
  scan over the units, smallest (start, index) first;
* the front end dispatches in program order and stops while the unit it needs is full (queue
  depth), until the op whose take frees half the queue is known; ops taken in the very cycle of
  the front end's check are no longer in the queue.

``simulate`` returns ``Records``; it runs in slices of ``budget`` starts so that a caller can
report progress between them.
"""

from __future__ import annotations

import numba
import numpy as np

from hwsim.errors import HwsimError
from hwsim.timing import traffic
from hwsim.timing.optable import DEP_PART, DEP_READ, TRAFFIC_PAY, TRAFFIC_RECORD, OpTable
from hwsim.timing.records import Records

jit = numba.njit(cache=True, nogil=True)

RAW, NEW_RUN = 1, 2          # edge flags


@jit
def _edges(n, units, nunits, dep_ptr, dep_res, dep_mode, res_kind, nres, ptr, dep, flags,
           reason):
    """``edges`` in one pass; the number of edges, of which those that fit are written."""
    cap = len(dep)
    writer = np.full(nres, -1, np.int64)
    readers = np.full(nres * nunits, -1, np.int64)
    part_head = np.full(nres, -1, np.int64)
    # the partial writes since each resource's last write, as linked lists of one node per
    # partial write: programs have few, and a node per scoreboard entry would be fresh pages
    nodes = 0
    for d in range(len(dep_mode)):
        nodes += dep_mode[d] == DEP_PART
    part_next = np.empty(max(nodes, 1), np.int64)
    part_op = np.empty(max(nodes, 1), np.int64)
    nodes = 0
    m = 0
    for i in range(n):
        for d in range(dep_ptr[i], dep_ptr[i + 1]):
            r, mode = dep_res[d], dep_mode[d]
            first, kind = m, res_kind[r]
            w = writer[r]
            if w >= 0 and w != i:
                if m < cap:
                    dep[m], flags[m], reason[m] = w, RAW | NEW_RUN, kind
                m += 1
            if mode != DEP_PART:
                node = part_head[r]
                while node >= 0:
                    if part_op[node] != i:
                        if m < cap:
                            dep[m], flags[m], reason[m] = part_op[node], \
                                RAW | (NEW_RUN if m == first else 0), kind
                        m += 1
                    node = part_next[node]
            if mode != DEP_READ:
                for u in range(nunits):
                    rd = readers[r * nunits + u]
                    if rd >= 0 and rd != i:
                        if m < cap:
                            dep[m], flags[m], reason[m] = rd, NEW_RUN if m == first else 0, kind
                        m += 1
            if mode == DEP_READ:
                readers[r * nunits + units[i]] = i
            elif mode == DEP_PART:
                part_op[nodes] = i
                part_next[nodes] = part_head[r]
                part_head[r] = nodes
                nodes += 1
            else:
                part_head[r] = -1
                for u in range(nunits):
                    readers[r * nunits + u] = -1
                writer[r] = i
        ptr[i + 1] = m
    return m


def edges(n, units, nunits, dep_ptr, dep_res, dep_mode, res_kind, nres):
    """The dependency edges of every op, from the scoreboard in program order: a read waits for
    the last writer's results and the partial writes since (RAW); a partial write for the last
    writer (RAW) and the readers since it (WAR: their start); a write for all of them. Readers
    are kept per unit (the last one on each unit starts last). Returns (ptr, dep, flags,
    reason): ``flags`` RAW and NEW_RUN (the first edge of one resource), ``reason`` the
    resource's kind. One pass into room for twice as many edges as scoreboard entries
    (programs have about one each); a second, with room for all, if that was too little."""
    args = (n, units, nunits, dep_ptr, dep_res, dep_mode, res_kind, nres)
    ptr, cap = np.zeros(n + 1, np.int64), 2 * len(dep_res) + 1
    while True:
        # the narrowest types that hold an op index and a resource kind: fewer fresh pages
        dep, flags, reason = (np.empty(cap, np.int32), np.empty(cap, np.int8),
                              np.empty(cap, np.int16))
        m = _edges(*args, ptr, dep, flags, reason)
        if m <= cap:
            return ptr, dep[:m], flags[:m], reason[:m]
        cap = m


@jit
def _unit_lists(units, ptr, ops, prev, nxt):
    """Each unit's ops in program order, ``ops[ptr[u]:ptr[u + 1]]`` (a counting sort), and each
    op's neighbours on its unit (``prev``, ``nxt``; -1 at the ends)."""
    for i in range(units.size):
        ptr[units[i] + 1] += 1
    for u in range(ptr.size - 1):
        ptr[u + 1] += ptr[u]
    fill = ptr[:-1].copy()
    last = np.full(ptr.size - 1, -1, np.int64)
    for i in range(units.size):
        u = units[i]
        ops[fill[u]] = i
        fill[u] += 1
        prev[i], nxt[i] = last[u], -1
        if last[u] >= 0:
            nxt[last[u]] = i
        last[u] = i


# state[...] scalar slots
FE, FE_TIME, STARTED, IV_COUNT, LAST = range(5)


@jit
def _run(budget, state, n, unit, cycles, latency, macs, stall, stall_reason, xfer_ptr,
         xfer_port, xfer_bytes, tr_kind, tr_master, tr_words, tr_rate, acc_ptr, acc_words,
         acc_count, banks, depth, in_flight, unit_ptr, unit_list, unit_prev, unit_next,
         port_width, port_latency, group_ptr, group_ports, ptr, dep, flags, reason,
         nkinds, nports, inflight_reason, static_base, traffic_reason,
         D, P, S, E, R, rank, started, dispatched, scan, wait_head, wait_next, cand_t, cand_op,
         dcount, pend, pend_cap, pend_size, free_at, x_start, x_cycles, x_port, busy, ops, umacs,
         stalls, todo, iv):
    """Start up to ``budget`` ops (module docstring). Everything is written inline, without
    helper functions taking arrays: each such call costs a reference count per array."""
    nunits = len(depth)
    iv_count = state[IV_COUNT]
    ntodo = 0             # taken ops to resolve (``todo``: a stack, empty between slices)
    while True:
        # the front end: dispatch while it can decide
        while state[FE] < n:
            f = state[FE]
            u = unit[f]
            m = dcount[u]
            if m >= depth[u]:
                first = unit_list[unit_ptr[u] + m - depth[u]]
                if P[first] < 0:
                    break
                if P[first] > state[FE_TIME]:
                    wake = unit_list[unit_ptr[u] + m - depth[u] // 2 - 1]
                    if P[wake] < 0:
                        break
                    state[FE_TIME] = P[wake]
            D[f] = state[FE_TIME]
            dispatched[f] = True
            dcount[u] += 1
            pred = unit_prev[f]
            if pred < 0 or started[pred]:
                P[f] = D[f] if pred < 0 else max(D[f], E[pred])
                todo[ntodo] = f
                ntodo += 1
            state[FE] = f + 1
        # resolve the taken ops: wait on a dependency that has not started, or become the
        # unit's candidate at the start their dependencies and transfers in flight allow
        while ntodo > 0:
            ntodo -= 1
            e = todo[ntodo]
            k = scan[e]
            last = ptr[e + 1]
            while k < last and started[dep[k]]:
                k += 1
            scan[e] = k
            if k < last:
                d = dep[k]
                wait_next[e] = wait_head[d]
                wait_head[d] = e
                continue
            u = unit[e]
            t = P[e]
            run_max = np.int64(-1)
            run_reason = -1
            for k in range(ptr[e], last):
                if flags[k] & NEW_RUN:
                    if run_max > t:
                        stalls[u, run_reason] += run_max - t
                        t = run_max
                    run_max = np.int64(-1)
                    run_reason = reason[k]
                d = dep[k]
                v = R[d] if flags[k] & RAW else S[d]
                if v > run_max:
                    run_max = v
            if run_max > t:
                stalls[u, run_reason] += run_max - t
                t = run_max
            if in_flight[u] > 0:        # its heap of ready times: drop what landed, wait if full
                base = u * pend_cap
                while pend_size[u] > 0 and (pend[base] <= t or pend_size[u] >= in_flight[u]):
                    if pend[base] > t:
                        stalls[u, inflight_reason] += pend[base] - t
                        t = pend[base]
                    size = pend_size[u] - 1
                    pend[base] = pend[base + size]
                    h = 0
                    while True:
                        child = 2 * h + 1
                        if child >= size:
                            break
                        if child + 1 < size and pend[base + child + 1] < pend[base + child]:
                            child += 1
                        if pend[base + h] <= pend[base + child]:
                            break
                        pend[base + h], pend[base + child] = pend[base + child], pend[base + h]
                        h = child
                    pend_size[u] = size
            cand_t[u] = t
            cand_op[u] = e
        if budget == 0:
            break
        # the next op to start: the smallest (start, index) among the units' candidates
        best = -1
        for u in range(nunits):
            if cand_op[u] >= 0 and (best < 0 or cand_t[u] < cand_t[best] or (
                    cand_t[u] == cand_t[best] and cand_op[u] < cand_op[best])):
                best = u
        if best < 0:
            break
        j = cand_op[best]
        t = cand_t[best]
        cand_op[best] = -1
        u = best
        S[j] = t
        rank[j] = state[STARTED]
        state[STARTED] += 1
        started[j] = True
        budget -= 1
        end = t + cycles[j] + stall[j]
        if stall[j] > 0:
            stalls[u, static_base + stall_reason[j]] += stall[j]
        if tr_kind[j] == TRAFFIC_PAY:
            extra, iv, iv_count = traffic.pay(
                iv, iv_count, tr_master[j], t, cycles[j], acc_words, acc_count, acc_ptr[j],
                acc_ptr[j + 1], tr_words[j], banks)
            if extra > 0:
                stalls[u, traffic_reason] += extra
                end += extra
        elif tr_kind[j] == TRAFFIC_RECORD and xfer_ptr[j + 1] > xfer_ptr[j]:
            p = xfer_port[xfer_ptr[j]]
            if p < 0:
                p = group_ports[group_ptr[-1 - p]]
            begin = max(t, free_at[p])
            span = np.int64(np.ceil(xfer_bytes[xfer_ptr[j]] / tr_rate[j]))
            iv, iv_count = traffic.record(iv, iv_count, tr_master[j], begin, span, tr_words[j])
        arrival = end
        for k in range(xfer_ptr[j], xfer_ptr[j + 1]):
            p = xfer_port[k]
            if p < 0:                   # a group: the port that frees first
                g = -1 - p
                p = group_ports[group_ptr[g]]
                for q in range(group_ptr[g] + 1, group_ptr[g + 1]):
                    if free_at[group_ports[q]] < free_at[p]:
                        p = group_ports[q]
            nbytes = xfer_bytes[k]
            begin = max(t, free_at[p])
            held = np.int64(0)
            if nbytes > 0:
                held = max(np.int64(1), np.int64(np.ceil(nbytes / port_width[p])))
            free_at[p] = begin + held
            x_start[k], x_cycles[k], x_port[k] = begin, held, p
            slot_end = begin + held
            if slot_end > end and in_flight[u] == 0:
                stalls[u, nkinds + p] += slot_end - end
                end = slot_end
            if slot_end + port_latency[p] > arrival:
                arrival = slot_end + port_latency[p]
        ready = max(end, arrival) + latency[j]
        E[j], R[j] = end, ready
        if ready > state[LAST]:
            state[LAST] = ready
        if in_flight[u] > 0:            # onto its heap of ready times
            base = u * pend_cap
            h = pend_size[u]
            pend[base + h] = ready
            while h > 0:
                parent = (h - 1) >> 1
                if pend[base + parent] <= pend[base + h]:
                    break
                pend[base + parent], pend[base + h] = pend[base + h], pend[base + parent]
                h = parent
            pend_size[u] += 1
        busy[u] += cycles[j]
        ops[u] += 1
        umacs[u] += macs[j]
        # what this start unblocks: the next op on the unit, the ops waiting on this one
        y = unit_next[j]
        if y >= 0 and dispatched[y]:
            P[y] = max(D[y], end)
            todo[ntodo] = y
            ntodo += 1
        w = wait_head[j]
        wait_head[j] = -1
        while w >= 0:
            todo[ntodo] = w
            ntodo += 1
            w = wait_next[w]
    state[IV_COUNT] = iv_count
    return iv


class Core:
    """One run of the compiled engine over ``table``; ``advance`` runs a slice."""

    def __init__(self, table: OpTable):
        self.table = t = table
        n, nunits, nports = len(t), len(t.units), len(t.ports)
        self.n = n
        self.units = np.asarray(t.unit, np.int64)
        self.depth = np.asarray([max(1, u.depth) for u in t.units], np.int64)
        self.in_flight = np.asarray([u.in_flight for u in t.units], np.int64)
        self.unit_ptr = np.zeros(nunits + 1, np.int64)
        self.unit_list, self.unit_prev, self.unit_next = (np.empty(n, np.int64)
                                                          for _ in range(3))
        _unit_lists(self.units, self.unit_ptr, self.unit_list, self.unit_prev, self.unit_next)
        self.port_width = np.asarray([p.width for p in t.ports], np.float64)
        self.port_latency = np.asarray([p.latency for p in t.ports], np.int64)
        self.group_ptr = np.zeros(len(t.groups) + 1, np.int64)
        np.cumsum([len(g) for g in t.groups], out=self.group_ptr[1:])
        self.group_ports = np.asarray([p for g in t.groups for p in g] or [0], np.int64)
        nres = max(len(t.res_kind), 1)
        self.ptr, self.dep, self.flags, self.reason = edges(
            n, self.units, nunits, t.dep_ptr, np.asarray(t.dep_res, np.int32), t.dep_mode,
            np.asarray(t.res_kind, np.int32), nres)
        nkinds = len(t.kinds)
        self.nkinds, self.inflight_reason = nkinds, nkinds + nports
        self.static_base = nkinds + nports + 1
        self.traffic_reason = self.static_base + len(t.reasons)
        # columns the compiled loop reads with one integer type
        self.stall_reason = t.stall_reason.astype(np.int64)
        self.xfer_port = t.xfer_port.astype(np.int64)
        self.traffic_master = t.traffic_master.astype(np.int64)
        self.state = np.zeros(5, np.int64)
        # an op's times and rank are written when it is dispatched or starts, before they are
        # read; only P (-1: not taken) and the waiting lists' heads are read unset
        self.D, self.S, self.E, self.R, self.rank = (np.empty(n, np.int64) for _ in range(5))
        self.P = np.full(n, -1, np.int64)
        self.started = np.zeros(n, np.bool_)
        self.dispatched = np.zeros(n, np.bool_)
        self.scan = self.ptr[:-1].copy()
        self.wait_head = np.full(n, -1, np.int64)
        self.wait_next = np.empty(n, np.int64)
        self.cand_t = np.zeros(nunits, np.int64)
        self.cand_op = np.full(nunits, -1, np.int64)
        self.dcount = np.zeros(nunits, np.int64)
        self.pend_cap = int(self.in_flight.max(initial=0)) + 2
        self.pend = np.zeros(nunits * self.pend_cap, np.int64)
        self.pend_size = np.zeros(nunits, np.int64)
        self.free_at = np.zeros(nports, np.int64)
        nx = len(t.xfer_port)
        self.x_start, self.x_cycles, self.x_port = (np.zeros(nx, np.int64) for _ in range(3))
        self.busy, self.ops, self.macs = (np.zeros(nunits, np.int64) for _ in range(3))
        self.stalls = np.zeros((nunits, self.traffic_reason + 1), np.int64)
        self.iv = traffic.intervals()
        self.todo = np.empty(n + 1, np.int64)

    def advance(self, budget: int) -> bool:
        """Start up to ``budget`` ops; True when every op has started."""
        t = self.table
        self.iv = _run(
            budget, self.state, self.n, self.units, t.cycles, t.latency, t.macs, t.stall,
            self.stall_reason, t.xfer_ptr, self.xfer_port, t.xfer_bytes, t.traffic,
            self.traffic_master, t.traffic_words,
            t.traffic_rate, t.acc_ptr, t.acc_words, t.acc_count, float(max(t.traffic_banks, 1)),
            self.depth, self.in_flight, self.unit_ptr, self.unit_list, self.unit_prev,
            self.unit_next, self.port_width, self.port_latency, self.group_ptr,
            self.group_ports, self.ptr, self.dep, self.flags, self.reason, self.nkinds,
            len(t.ports), self.inflight_reason, self.static_base, self.traffic_reason,
            self.D, self.P, self.S, self.E, self.R, self.rank, self.started, self.dispatched,
            self.scan, self.wait_head, self.wait_next, self.cand_t, self.cand_op, self.dcount,
            self.pend, self.pend_cap, self.pend_size, self.free_at, self.x_start, self.x_cycles,
            self.x_port, self.busy, self.ops, self.macs, self.stalls, self.todo, self.iv)
        return self.state[STARTED] == self.n

    def records(self) -> Records:
        if self.state[STARTED] != self.n:
            raise HwsimError(f"internal: {self.n - self.state[STARTED]} ops never started "
                             "(a dependency cycle)")
        cycles = int(max(self.state[LAST], self.E.max(initial=0)))
        return Records(self.table, cycles, self.S, self.E, self.R, self.rank, self.x_start,
                       self.x_cycles, self.x_port, self.busy, self.ops, self.macs, self.stalls)


def simulate(table: OpTable, progress=None, budget: int = 1 << 20) -> Records:
    """Every op's timing (module docstring); ``progress(started, cycle)`` between slices."""
    core = Core(table)
    while not core.advance(budget):
        if core.cand_op.max(initial=-1) < 0:     # nothing can start: records() says why
            break
        if progress is not None:
            progress(int(core.state[STARTED]), int(core.state[LAST]))
    return core.records()
