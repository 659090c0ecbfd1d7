"""The event timeline every machine runs on: units, ports, dependencies, statistics.

Time is in integer cycles of the machine clock. A program becomes a stream of ``Op``s, each bound
to a ``Unit`` (one simpy process per functional unit). Ops on one unit start in program order; an
op starts when its unit is free and the ops it depends on are done, then:

* ``op.execute()`` runs at the start: it reads operands and computes, and returns ``Work``: how
  many cycles the unit is occupied, the extra latency until results exist, the bytes it moves
  through which ports, its MACs, and a ``commit`` callable that writes the results;
* port transfers are reserved from the start time; a port is a pipe of ``width`` bytes per cycle
  shared first come, first served, plus a latency that concurrent users overlap. When a transfer
  outlasts the op's own cycles the unit is stalled on that port;
* ``stalls`` are extra cycles a machine's own analytic model charges to the op, by reason (e.g.
  memory bank conflicts counted from the op's addresses): they extend the op and show in the
  unit's stall statistics;
* ``commit`` runs when the results are ready, before anything else that happens in that cycle, so a
  reader that starts in the same cycle sees the new data and one that starts earlier sees the old.
  Commits are applied lazily, in (ready, issue) order, just before anything could observe them:
  an op starting, an ``at`` action, the front end taking the next op, the end of the run.

Dependencies are tracked on named resources (an accumulator, a ZA tile, a DMA transfer id): a
reader waits for the last writer's results (RAW), a writer for the last writer (WAW) and for the
readers since to have started (WAR). An op may also write only part of a resource (``parts``: one
row of a tile): partial writes wait like writes but not for each other, and the next reader or
writer waits for all of them. Memory is not tracked: as on silicon, a program that does not wait
for its DMA reads stale data.

Each op costs one simpy event for its occupancy (plus one per dependency stall); the front end only
yields when a unit's queue is full. Same input, same event order, same cycles.

Attribution: ``Engine.tag`` is stamped on every op dispatched while it is set (``Op.tag``; the
machine base class sets it to the index of the program instruction being turned into ops), and
each unit and port keeps the tags of its logged ops and transfers in ``tags``, parallel to
``log``, so that a scheduler can total time and bytes per layer from one run. ``observe`` sees
every op as it is dispatched (e.g. to wrap its commit). ``numerics`` tells machines whether to
compute their datapaths or only to cost them (timing-only runs; the cycles must not change).
"""

from __future__ import annotations

import gc
import heapq
import math
from collections import defaultdict, deque
from typing import Callable, Iterable, Iterator

import simpy
from simpy.events import URGENT

from hwsim.errors import HwsimError


class Work:
    """What an op does once started. ``cycles``: unit occupancy; ``latency``: more cycles until
    results are ready; ``transfers``: ((port, nbytes), ...); ``commit``: writes the results;
    ``stalls``: {reason: cycles} the op is additionally held, from a machine's analytic model."""

    __slots__ = ("cycles", "latency", "transfers", "macs", "commit", "stalls")

    def __init__(self, cycles: int = 1, latency: int = 0, transfers=(), macs: int = 0,
                 commit: Callable[[], None] | None = None, stalls: dict | None = None):
        self.cycles, self.latency, self.transfers = cycles, latency, transfers
        self.macs, self.commit, self.stalls = macs, commit, stalls


class Op:
    """One instruction (or state) on one unit. ``execute`` returns ``Work`` when the op starts."""

    __slots__ = ("unit", "execute", "label", "reads", "writes", "parts", "deps", "started_at",
                 "ready_at", "_started", "args", "tag")

    def __init__(self, unit: "Unit", execute: Callable[[], Work], label: str,
                 reads: tuple = (), writes: tuple = (), args: dict | None = None,
                 parts: tuple = ()):
        self.unit, self.execute, self.label = unit, execute, label
        self.reads, self.writes, self.args, self.parts = reads, writes, args, parts
        self.deps: list = []
        self.started_at: int | None = None
        self.ready_at: int | None = None
        self._started: simpy.Event | None = None
        self.tag = None


class Port:
    """A pipe of ``width`` bytes per cycle with a fixed ``latency``, first come first served."""

    def __init__(self, name: str, width_bytes: float, latency_cycles: int = 0):
        if width_bytes <= 0:
            raise ValueError(f"port {name}: width must be positive")
        self.name, self.width, self.latency = name, float(width_bytes), int(latency_cycles)
        self.free_at = 0
        self.bytes = 0
        self.busy_cycles = 0
        self.log: list[tuple[int, int, int]] = []  # (start, cycles, bytes)
        self.tags: list = []                        # Op.tag of each log entry

    def reserve(self, now: int, nbytes: int, tag=None) -> tuple[int, int]:
        """Reserve the pipe for ``nbytes`` from ``now``: (end of the slot, data arrival)."""
        start = max(now, self.free_at)
        cycles = max(1, math.ceil(nbytes / self.width)) if nbytes else 0
        self.free_at = start + cycles
        self.bytes += nbytes
        self.busy_cycles += cycles
        if nbytes:
            self.log.append((start, cycles, nbytes))
            self.tags.append(tag)
        return start + cycles, start + cycles + self.latency


class Unit:
    """A functional unit: an in-order queue of ops served by one simpy process."""

    def __init__(self, engine: "Engine", name: str, queue_depth: int, peak_macs: float = 0.0,
                 in_flight: int = 0):
        self.engine, self.name, self.depth = engine, name, max(1, queue_depth)
        self.peak_macs = peak_macs
        # in_flight > 0 makes a decoupled unit (a DMA engine): an op occupies it only for its own
        # cycles, its transfers proceed in the ports, and at most in_flight of them are under way.
        self.in_flight = in_flight
        self._pending: list[int] = []
        self.queue: deque[Op] = deque()
        self.busy = 0
        self.stalls: dict[str, int] = {}
        self.ops = 0
        self.macs = 0
        self.log: list[tuple[int, int, str, dict | None]] = []  # (start, cycles, label, args)
        self.tags: list = []                                     # Op.tag of each log entry
        self._work: simpy.Event | None = None
        self._space: simpy.Event | None = None
        self.process = engine.env.process(self._serve())

    def _stall(self, reason: str, cycles: int) -> None:
        if cycles > 0:
            self.stalls[reason] = self.stalls.get(reason, 0) + cycles

    def _serve(self):
        env, record, in_flight = self.engine.env, self.engine.record, self.in_flight
        reasons: dict = {}   # stall reason strings, made once per resource
        while True:
            if not self.queue:
                self._work = env.event()
                yield self._work
            op = self.queue.popleft()
            if self._space is not None and len(self.queue) <= self.depth // 2:
                # wake the front end at half depth, so that it refills in batches
                self._space.succeed()
                self._space = None
            for dep, raw, resource in op.deps:
                reason = reasons.get(resource)
                if reason is None:
                    reason = reasons[resource] = f"wait {resource}"
                if dep.started_at is None:
                    if dep._started is None:
                        dep._started = env.event()
                    waited_from = env.now
                    yield dep._started
                    self._stall(reason, env.now - waited_from)
                until = dep.ready_at if raw else dep.started_at
                now = env.now
                if until > now:
                    self._stall(reason, until - now)
                    yield env.timeout(until - now)
            op.deps = ()  # done with them: let finished ops be freed
            if in_flight:
                pending = self._pending
                while pending and pending[0] <= env.now:
                    heapq.heappop(pending)
                if len(pending) >= in_flight:
                    self._stall("transfers in flight", pending[0] - env.now)
                    yield env.timeout(pending[0] - env.now)
                    heapq.heappop(pending)
            start = env.now
            op.started_at = start
            self.engine.flush()
            work = op.execute()
            end = start + work.cycles
            if work.stalls:
                for reason, cycles in work.stalls.items():
                    self._stall(reason, cycles)
                    end += max(0, cycles)
            arrival = end
            for port, nbytes in work.transfers:
                slot_end, data_at = port.reserve(start, nbytes, op.tag)
                if slot_end > end and not in_flight:
                    self._stall(f"port {port.name}", slot_end - end)
                    end = slot_end
                if data_at > arrival:
                    arrival = data_at
            ready = (end if end > arrival else arrival) + work.latency
            op.ready_at = ready
            if ready > self.engine.last_ready:
                self.engine.last_ready = ready
            if in_flight:
                heapq.heappush(self._pending, ready)
            if op._started is not None:
                op._started.succeed()
            self.busy += work.cycles
            self.ops += 1
            self.macs += work.macs
            if record:
                self.log.append((start, end - start, op.label, op.args))
                self.tags.append(op.tag)
            if work.commit is not None:
                if ready == start:
                    work.commit()
                else:
                    self.engine.defer(ready, work.commit)
            if end > start:
                yield env.timeout(end - start)


class _Track:
    """The scoreboard entry of one resource: its last writer, the readers and partial writers
    since."""

    __slots__ = ("writer", "readers", "parts")

    def __init__(self):
        self.writer: Op | None = None
        self.readers: list[Op] = []
        self.parts: list[Op] = []


def _unfinished(op: Op | None, now: int) -> bool:
    """``op`` exists and its results are not ready by ``now``."""
    return op is not None and (op.ready_at is None or op.ready_at > now)


def _after_readers(track: _Track, op: Op, resource, deps: list) -> None:
    """A write waits (WAR) for the readers since the last write that have not started."""
    for reader in track.readers:
        if reader is not op and reader.started_at is None:
            deps.append((reader, False, resource))


class Engine:
    """A simpy environment with named units and ports and a scoreboard of resources."""

    def __init__(self, clock_hz: float, record: bool = True):
        self.env = simpy.Environment()
        self.clock_hz = clock_hz
        self.record = record
        self.units: dict[str, Unit] = {}
        self.ports: dict[str, Port] = {}
        self._tracks: defaultdict = defaultdict(_Track)   # resource -> _Track
        self.issued = 0
        self.progress: Callable[[int, int], None] | None = None
        self._commits: list = []  # heap of (ready, sequence, commit)
        self._sequence = 0
        self.last_ready = 0             # the cycle the latest result lands (the run ends there)
        self.tag = None                 # stamped on ops dispatched from now on
        self.observe: Callable[[Op], None] | None = None
        self.numerics = True            # False: machines cost their datapaths without computing

    def unit(self, name: str, queue_depth: int = 1, peak_macs: float = 0.0,
             in_flight: int = 0) -> Unit:
        if name in self.units:
            raise ValueError(f"unit {name} exists")
        self.units[name] = Unit(self, name, queue_depth, peak_macs, in_flight)
        return self.units[name]

    def port(self, name: str, width_bytes: float, latency_cycles: int = 0) -> Port:
        if name in self.ports:
            raise ValueError(f"port {name} exists")
        self.ports[name] = Port(name, width_bytes, latency_cycles)
        return self.ports[name]

    def at(self, cycle: int, action: Callable[[], None]) -> None:
        """Run ``action`` at ``cycle`` before any op starts in that cycle."""
        event = simpy.Event(self.env)
        event._ok, event._value = True, None
        event.callbacks.append(lambda _event: (self.flush(), action()))
        self.env.schedule(event, URGENT, cycle - self.env.now)

    def defer(self, cycle: int, commit: Callable[[], None]) -> None:
        """Apply ``commit`` at ``cycle``: before anything that starts at or after it."""
        heapq.heappush(self._commits, (cycle, self._sequence, commit))
        self._sequence += 1

    def flush(self) -> None:
        """Apply the commits that are due."""
        commits, now = self._commits, self.env.now
        while commits and commits[0][0] <= now:
            heapq.heappop(commits)[2]()

    def dispatch(self, op: Op) -> Op:
        """Record ``op``'s dependencies (program order) and queue it on its unit. Dependencies
        already met (a writer whose results are ready, a reader that started) are left out: time
        only moves forward."""
        deps, tracks, now = op.deps, self._tracks, self.env.now
        if op.tag is None:
            op.tag = self.tag
        if self.observe is not None:
            self.observe(op)
        for resource in op.reads:
            track = tracks[resource]
            if _unfinished(track.writer, now):
                deps.append((track.writer, True, resource))
            if track.parts:
                deps.extend((part, True, resource) for part in track.parts)
            readers = track.readers
            if len(readers) >= 64:  # readers that started no longer hold a writer back
                readers[:] = [r for r in readers if r.started_at is None]
            readers.append(op)
        for resource in op.parts:
            track = tracks[resource]
            if _unfinished(track.writer, now):
                deps.append((track.writer, True, resource))
            _after_readers(track, op, resource, deps)
            track.parts.append(op)
        for resource in op.writes:
            track = tracks[resource]
            if track.writer is not op and _unfinished(track.writer, now):
                deps.append((track.writer, True, resource))
            if track.parts:
                deps.extend((part, True, resource) for part in track.parts)
                track.parts = []
            _after_readers(track, op, resource, deps)
            track.readers = []
            track.writer = op
        unit = op.unit
        unit.queue.append(op)
        if unit._work is not None:
            unit._work.succeed()
            unit._work = None
        self.issued += 1
        return op

    def _front_end(self, ops: Iterator[Op]):
        ops = iter(ops)
        while True:
            self.flush()  # the op stream may read state
            op = next(ops, None)
            if op is None:
                return
            unit = op.unit
            while len(unit.queue) >= unit.depth:
                if unit._space is None:
                    unit._space = self.env.event()
                yield unit._space
            self.dispatch(op)
            if self.progress is not None and self.issued % 4096 == 0:
                self.progress(self.issued, self.env.now)

    def run(self, ops: Iterable[Op]) -> int:
        """Issue ``ops`` in order, run until everything is done, return the cycle count.

        The cyclic garbage collector is paused meanwhile: its scans of the many live ops and
        events cost more than the simulation itself, and nothing here needs it.
        """
        self.env.process(self._front_end(iter(ops)))
        collecting = gc.isenabled()
        gc.disable()
        try:
            self.env.run()
            if self.last_ready > self.env.now:  # the last results land after the last op
                self.env.run(self.env.timeout(self.last_ready - self.env.now))
            self.flush()
        finally:
            if collecting:
                gc.enable()
        stuck = [u.name for u in self.units.values() if u.queue]
        if stuck:
            raise HwsimError(f"internal: units {', '.join(stuck)} still hold ops at the end")
        self._release()
        return int(self.env.now)

    def _release(self) -> None:
        """Break the reference cycles of a finished run (unit processes, units and engine, the
        hooks), so that its ops and events go when the last reference does, without leaving
        the cyclic collector tens of thousands of objects to trace."""
        for unit in self.units.values():
            unit.process._generator.close()
            unit.process = unit._work = unit._space = None
            unit.engine = None
        # ops still on the scoreboard drop their closures, which may hold the machine
        for track in self._tracks.values():
            for op in [track.writer, *track.readers, *track.parts]:
                if op is not None:
                    op.execute = None
        self.observe = self.progress = None
