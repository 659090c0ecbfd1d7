"""The reference timing engine: an op table run on a simpy event timeline, one event per op.

This is the readable statement of hwsim's timing rules; ``hwsim.timing.core`` is its compiled
twin and must give identical records (the tests run both over every example, test program and
model). Time is integer cycles of the machine clock.

* **Front end.** Ops are dispatched in program order. An op goes to its unit's queue; when that
  queue holds ``depth`` ops the front end waits until the unit has taken enough of them to leave
  ``depth // 2`` (it refills in batches). Ops the unit takes in the cycle the front end looks
  are no longer in the queue.
* **Units** are in order: a unit takes its next op when that op is dispatched and the unit is
  free (its previous op has ended).
* **Dependencies** are tracked per resource (``OpTable``): a reader waits for the last writer's
  results (RAW) and the partial writes since; a partial writer waits for the last writer's
  results and for the readers since it to have started (WAR); a writer waits for all of them.
  Partial writes do not wait for each other. Waiting is a stall of the taking unit, charged to
  ``wait KIND`` of the resource.
* **Decoupled units** (``in_flight`` > 0, DMA engines) hold at most ``in_flight`` ops whose
  results are not ready; the next op waits for the earliest ("transfers in flight").
* **Start.** An op starts when taken and not waiting. It occupies its unit ``cycles``, plus its
  static stall and, where the machine models L1 contention, the conflict cycles it meets
  (``hwsim.timing.traffic``). Its transfers each reserve their port from the start: a port is a
  pipe of ``width`` bytes per cycle shared first come first served (a group: its port that frees
  first), plus a latency. A transfer that holds its port past the op's end stalls the unit there
  (``port NAME``), except on a decoupled unit, whose transfers proceed in the ports.
* **Ready** = max(end, last data arrival) + ``latency``. The run lasts until the last result is
  ready.
* **Same cycle.** Ops that can start in the same cycle start one at a time in program order, each
  after everything the previous start caused in that cycle (so ports are reserved and contention
  priced in (cycle, program order)); commits due in a cycle are applied before any op starts in
  it (``hwsim.timing.effects``).

simpy priorities make the same-cycle order explicit: unit processes run at NORMAL priority,
grants to start at ``GRANT`` (after every NORMAL event of the cycle, one op per grant), the front
end at ``FRONT`` (after every grant of the cycle). Dependencies are recorded at dispatch, leaving
out those already met (a writer whose results are ready, a reader that started), which change no
time.
"""

from __future__ import annotations

import gc
import heapq
from collections import deque

import numpy as np
import simpy

from hwsim.errors import HwsimError
from hwsim.timing import traffic
from hwsim.timing.effects import Effects
from hwsim.timing.optable import (DEP_PART, DEP_READ, DEP_WRITE, TRAFFIC_PAY, TRAFFIC_RECORD,
                                  OpTable, slot_cycles)
from hwsim.timing.records import Records

GRANT, FRONT = 2, 3     # simpy priorities after NORMAL (1)


class _Track:
    """The scoreboard entry of one resource: its last writer, the readers and partial writers
    since."""

    __slots__ = ("writer", "readers", "parts")

    def __init__(self):
        self.writer = -1
        self.readers: list[int] = []
        self.parts: list[int] = []


class Engine:
    """One run of ``table``; ``effects`` performs the ops' functional actions at their start."""

    def __init__(self, table: OpTable, effects: Effects | None = None):
        self.t = t = table
        self.env = simpy.Environment()
        self.effects = effects or Effects({})
        n, nunits = len(t), len(t.units)
        self.start, self.end, self.ready, self.rank = (np.full(n, -1, np.int64)
                                                       for _ in range(4))
        nx = len(t.xfer_port)
        self.slot_start, self.slot_cycles, self.slot_port = (np.zeros(nx, np.int64)
                                                             for _ in range(3))
        self.busy, self.ops, self.macs = (np.zeros(nunits, np.int64) for _ in range(3))
        names = t.reason_names()
        self.stalls = np.zeros((nunits, len(names)), np.int64)
        nkinds, nports = len(t.kinds), len(t.ports)
        self.reason_port = nkinds
        self.reason_inflight = nkinds + nports
        self.reason_static = nkinds + nports + 1
        self.reason_traffic = len(names) - 1
        self.free_at = [0] * nports
        self.tracks: dict[int, _Track] = {}
        self.deps: list = [None] * n          # per op: [(kind, [(op, raw), ...]), ...]
        self.started_event: dict[int, simpy.Event] = {}
        self.queues = [deque() for _ in range(nunits)]
        self.work: list = [None] * nunits
        self.space: list = [None] * nunits
        self.pending = [[] for _ in range(nunits)]
        self.waiting: list = []               # (op, grant event) asking to start now
        self.granting = False
        self.started = 0
        self.last_ready = 0
        self.iv, self.iv_count = traffic.intervals(), 0
        self.progress = None

    # -- the front end -------------------------------------------------------------------------
    def _later(self, priority: int) -> simpy.Event:
        event = simpy.Event(self.env)
        event._ok, event._value = True, None
        self.env.schedule(event, priority)
        return event

    def _front_end(self):
        t, queues, depth = self.t, self.queues, [u.depth for u in self.t.units]
        for j in range(len(t)):
            u = int(t.unit[j])
            if len(queues[u]) >= depth[u]:
                yield self._later(FRONT)          # takes in this cycle leave the queue
                while len(queues[u]) >= depth[u]:
                    self.space[u] = self.env.event()
                    yield self.space[u]
                    yield self._later(FRONT)
            self._dispatch(j, u)
            if self.progress is not None and (j + 1) % 4096 == 0:
                self.progress(j + 1, int(self.env.now))

    def _dispatch(self, j: int, u: int) -> None:
        """Record op ``j``'s dependencies (program order) and queue it on its unit."""
        t, now = self.t, self.env.now
        runs = []
        for r, mode in t.deps(j):
            track = self.tracks.get(r)
            if track is None:
                track = self.tracks[r] = _Track()
            found = []
            if track.writer >= 0 and track.writer != j and self._unfinished(track.writer, now):
                found.append((track.writer, True))
            if mode != DEP_PART:
                found += [(p, True) for p in track.parts if p != j]
            if mode != DEP_READ:
                found += [(rd, False) for rd in track.readers
                          if rd != j and self.start[rd] < 0]
            if found:
                runs.append((int(t.res_kind[r]), found))
            if mode == DEP_READ:
                if len(track.readers) >= 64:      # readers that started hold no writer back
                    track.readers = [rd for rd in track.readers if self.start[rd] < 0]
                track.readers.append(j)
            elif mode == DEP_PART:
                track.parts.append(j)
            elif mode == DEP_WRITE:
                track.parts, track.readers, track.writer = [], [], j
        self.deps[j] = runs
        self.queues[u].append(j)
        if self.work[u] is not None:
            self.work[u].succeed()
            self.work[u] = None

    def _unfinished(self, op: int, now: int) -> bool:
        return self.ready[op] < 0 or self.ready[op] > now

    # -- units -----------------------------------------------------------------------------------
    def _serve(self, u: int):
        env, queue, spec = self.env, self.queues[u], self.t.units[u]
        while True:
            if not queue:
                self.work[u] = env.event()
                yield self.work[u]
            j = queue.popleft()
            if self.space[u] is not None and len(queue) <= spec.depth // 2:
                self.space[u].succeed()
                self.space[u] = None
            for kind, found in self.deps[j]:
                for dep, raw in found:
                    if self.start[dep] < 0:
                        waited = env.now
                        yield self._started(dep)
                        self._stall(u, kind, env.now - waited)
                    until = self.ready[dep] if raw else self.start[dep]
                    if until > env.now:
                        self._stall(u, kind, until - env.now)
                        yield env.timeout(until - env.now)
            self.deps[j] = None
            if spec.in_flight:
                pending = self.pending[u]
                while pending and pending[0] <= env.now:
                    heapq.heappop(pending)
                if len(pending) >= spec.in_flight:
                    self.stalls[u, self.reason_inflight] += pending[0] - env.now
                    yield env.timeout(pending[0] - env.now)
                    heapq.heappop(pending)
            grant = env.event()
            self.waiting.append((j, grant))
            if not self.granting:
                self.granting = True
                self._later(GRANT).callbacks.append(self._grant)
            yield grant
            if self.end[j] > env.now:
                yield env.timeout(self.end[j] - env.now)

    def _stall(self, u: int, kind: int, cycles: int) -> None:
        if cycles > 0:
            self.stalls[u, kind] += cycles

    def _started(self, op: int) -> simpy.Event:
        event = self.started_event.get(op)
        if event is None:
            event = self.started_event[op] = self.env.event()
        return event

    def _grant(self, _event) -> None:
        """Start the waiting op first in program order; come back for the next one after
        everything that start causes in this cycle."""
        j, grant = min(self.waiting)
        self.waiting.remove((j, grant))
        self._start(j)
        grant.succeed()
        if self.waiting:
            self._later(GRANT).callbacks.append(self._grant)
        else:
            self.granting = False

    def _start(self, j: int) -> None:
        t, now = self.t, int(self.env.now)
        u = int(t.unit[j])
        self.start[j], self.rank[j] = now, self.started
        self.started += 1
        commit = self.effects.start(j, now)
        end = now + int(t.cycles[j]) + int(t.stall[j])
        if t.stall[j]:
            self.stalls[u, self.reason_static + t.stall_reason[j]] += t.stall[j]
        end += self._traffic(j, now)
        arrival = end
        decoupled = t.units[u].in_flight > 0
        for k in t.transfers(j):
            p = int(t.xfer_port[k])
            if p < 0:
                p = min(t.groups[-1 - p], key=self.free_at.__getitem__)
            nbytes = int(t.xfer_bytes[k])
            begin = max(now, self.free_at[p])
            held = slot_cycles(nbytes, t.ports[p].width)
            self.free_at[p] = begin + held
            self.slot_start[k], self.slot_cycles[k], self.slot_port[k] = begin, held, p
            if begin + held > end and not decoupled:
                self.stalls[u, self.reason_port + p] += begin + held - end
                end = begin + held
            arrival = max(arrival, begin + held + t.ports[p].latency)
        ready = max(end, arrival) + int(t.latency[j])
        self.end[j], self.ready[j] = end, ready
        if commit is not None:
            self.effects.land(j, ready, self.started - 1, commit)
        self.last_ready = max(self.last_ready, ready)
        if decoupled:
            heapq.heappush(self.pending[u], ready)
        self.busy[u] += t.cycles[j]
        self.ops[u] += 1
        self.macs[u] += t.macs[j]
        event = self.started_event.pop(j, None)
        if event is not None:
            event.succeed()

    def _traffic(self, j: int, now: int) -> int:
        t = self.t
        if t.traffic[j] == TRAFFIC_PAY:
            lo, hi = t.acc_ptr[j], t.acc_ptr[j + 1]
            stall, self.iv, self.iv_count = traffic.pay(
                self.iv, self.iv_count, int(t.traffic_master[j]), now, int(t.cycles[j]),
                t.acc_words, t.acc_count, lo, hi, float(t.traffic_words[j]),
                float(max(t.traffic_banks, 1)))
            if stall > 0:
                self.stalls[int(t.unit[j]), self.reason_traffic] += stall
            return int(stall)
        if t.traffic[j] == TRAFFIC_RECORD and t.xfer_ptr[j + 1] > t.xfer_ptr[j]:
            k = t.xfer_ptr[j]
            begin = max(now, self.free_at[int(t.xfer_port[k])])
            span = int(np.ceil(t.xfer_bytes[k] / t.traffic_rate[j]))
            self.iv, self.iv_count = traffic.record(self.iv, self.iv_count,
                                                    int(t.traffic_master[j]), begin, span,
                                                    float(t.traffic_words[j]))
        return 0

    # -- a run -----------------------------------------------------------------------------------
    def run(self, progress=None) -> Records:
        """Run every op; ``progress(dispatched, cycle)`` every 4096 ops. The cyclic garbage
        collector is paused meanwhile (its scans of the many live events cost more than the
        simulation)."""
        self.progress = progress
        for u in range(len(self.t.units)):
            self.env.process(self._serve(u))
        self.env.process(self._front_end())
        collecting = gc.isenabled()
        gc.disable()
        try:
            self.env.run()
        finally:
            if collecting:
                gc.enable()
        if self.started != len(self.t):
            raise HwsimError(f"internal: {len(self.t) - self.started} ops never started")
        self.effects.flush()
        cycles = int(max(self.last_ready, self.end.max(initial=0)))
        return Records(self.t, cycles, self.start, self.end, self.ready, self.rank,
                       self.slot_start, self.slot_cycles, self.slot_port, self.busy, self.ops,
                       self.macs, self.stalls)


def simulate(table: OpTable, effects: Effects | None = None, progress=None) -> Records:
    return Engine(table, effects).run(progress)
