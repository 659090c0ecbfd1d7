"""Running a lowered program once, reading each layer's output, and attributing time and bytes.

**Outputs per layer** (checkpoints): the lowering says where each layer's output lives and which
instructions write it. The ops of those instructions are watched (``Machine.run(watcher=...)``);
when the last of them has applied its results, the output bytes are copied. No op is added and
no cycle changes: a checkpoint is free, and the buffer may be reused afterwards.

**Attribution** (one simulation): every op carries the index of its instruction (its tag), so its
layer; the engine's records give the busy intervals of each unit and the transfers of each port.

* *cycles*: the run's timeline is cut at every op and transfer boundary, and each piece is
  charged to one layer: the layers whose compute units (e.g. NE16, the cluster) are busy then,
  split equally; if none, the layers moving data through the movement ports (L2, MRAM); if
  none, the layers whose other units (controller, DMA set-up) are busy; an idle piece goes to
  the layers of the next busy piece. The layers' cycles add up to the run's cycles. A layer's
  weight prefetch that overlaps the previous layer's compute costs it nothing.
* *span*: first op start to last op end of the layer (spans of neighbours overlap).
* *compute* / *movement*: cycles in which the layer's compute units are busy / its transfers
  through the movement ports are under way (unions of intervals).
* *bound*: ``compute`` if compute >= movement, else ``memory``.
* *overlap*: the share of the layer's movement cycles during which some compute unit (of any
  layer) is busy: 100% means its data movement was hidden behind compute.
* *bytes* per memory level: the bytes of the layer's transfers through that level's ports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numba
import numpy as np

from hwsim.schedule.lowering import Lowered, Lowering
from hwsim.targets.base import PEAK_WINDOW_CYCLES
from hwsim.timing.optable import entries_of
from hwsim.timing.stats import binned


@dataclass
class Simulation:
    result: object                                  # hwsim.timing.stats.Result
    values: dict = field(default_factory=dict)      # layer index -> its simulated output
    outputs: dict = field(default_factory=dict)     # graph output name -> values
    seconds: float = 0.0                            # wall time of the run


class Checkpoints:
    """Copies each layer's output once all of its writers have finished (module docstring): a
    watcher of ``Machine.run``. ``heard(layer, value)``: told each layer's output as it is
    copied."""

    def __init__(self, lowered: Lowered, machine, heard=None):
        self.machine, self.lowered, self.heard = machine, lowered, heard
        self.copied: dict[int, np.ndarray] = {}
        self.pending: dict[int, int] = {}
        self.by_op: dict[int, list[int]] = {}
        self._matched = None
        self._ending: dict[int, list[int]] = {}     # op -> the layers it is the last writer of
        for layer, cp in lowered.checkpoints.items():
            if not cp.writers:
                self._snap(layer)

    def _match(self, table) -> tuple:
        """(ops, writers per op, each (op, layer) pair's layer in op order, layers' write
        counts): every layer's writers matched to ops by their tags, through tables indexed by
        tag (an op's tag is its instruction's index, or -1: the tables' last, empty, entry)."""
        if self._matched is None:
            found = [(layer, cp.writers) for layer, cp in self.lowered.checkpoints.items()
                     if cp.writers]
            tags = np.concatenate([np.zeros(0, np.int64)] + [np.fromiter(w, np.int64, len(w))
                                                             for _, w in found])
            owner = np.repeat(np.array([layer for layer, _ in found], np.int64),
                              [len(w) for _, w in found])
            order = np.argsort(tags, kind="stable")
            tags, owner = tags[order], owner[order]
            op_tags = np.asarray(table.tag, np.int64)
            per_tag = np.bincount(tags, minlength=max(int(op_tags.max(initial=-1)),
                                                      int(tags.max(initial=-1))) + 2)
            count = per_tag[op_tags]
            ops = np.flatnonzero(count)
            n = count[ops]
            # each op's (op, layer) pairs: its tag's entries in the sorted tags
            layer_of = owner[entries_of(np.cumsum(per_tag) - per_tag, op_tags[ops], n)]
            self._matched = ops, n, layer_of, np.bincount(layer_of)
        return self._matched

    def watch(self, table) -> set[int]:
        """The writer ops, each to be reported ``done`` (an engine's order)."""
        ops, n, layer_of, counts = self._match(table)
        watched = np.flatnonzero(counts).tolist()
        self.pending = dict(zip(watched, counts[watched].tolist()))
        pairs, ends = layer_of.tolist(), np.cumsum(n).tolist()
        self.by_op = {op: pairs[end - k:end] for op, k, end in zip(ops.tolist(), n.tolist(), ends)}
        return set(self.by_op)

    def stops(self, table) -> set[int]:
        """In program order, each layer's output is complete after its last writer op: the
        ops to report ``through``."""
        ops, n, layer_of, counts = self._match(table)
        by_layer = np.repeat(ops, n)[np.argsort(layer_of, kind="stable")]   # op order in each
        layers = np.flatnonzero(counts)
        self._ending = {}
        for layer, op in zip(layers.tolist(), by_layer[np.cumsum(counts)[layers] - 1].tolist()):
            self._ending.setdefault(op, []).append(layer)
        return set(self._ending)

    def done(self, op: int) -> None:
        for layer in self.by_op[op]:
            self.pending[layer] -= 1
            if not self.pending[layer]:
                self._snap(layer)

    def through(self, op: int) -> None:
        """Every op up to ``op`` (a stop) has finished, as a machine running its program in
        order reports: the layers ``op`` ends are complete."""
        for layer in self._ending.get(op, ()):
            self._snap(layer)

    def _snap(self, layer: int) -> None:
        if layer not in self.copied:
            place = self.lowered.checkpoints[layer].place
            value = self.copied[layer] = place.decode(
                self.machine.memory(place.space).read(place.addr, place.nbytes))
            if self.heard is not None:
                self.heard(layer, value)

    def values(self) -> dict[int, np.ndarray]:
        for layer in self.lowered.checkpoints:      # writers ending the program
            self._snap(layer)
        return self.copied


def simulate(lowered: Lowered, machine, inputs: dict, params: dict, numerics: bool = True,
             progress=None, engine: str | None = None, heard=None) -> Simulation:
    """Load the image and inputs, run the program, read every layer's output (``heard(layer,
    value)`` is told each as soon as it is read)."""
    for space, addr, data in lowered.image:
        machine.memory(space).write(addr, data)
    for name, place in lowered.inputs.items():
        machine.memory(place.space).write(place.addr, place.encode(inputs[name]))
    watch = Checkpoints(lowered, machine, heard) if numerics else None
    start = time.perf_counter()
    result = machine.run(lowered.program, params=params, numerics=numerics, watcher=watch,
                         progress=progress, engine=engine)
    seconds = time.perf_counter() - start
    sim = Simulation(result, seconds=seconds)
    if numerics:
        sim.values = watch.values()
        for name, place in lowered.outputs.items():
            raw = machine.memory(place.space).read(place.addr, place.nbytes)
            sim.outputs[name] = place.decode(raw)
    return sim


# -- attribution ---------------------------------------------------------------------------------
def _union(intervals: np.ndarray) -> np.ndarray:
    """Sorted, merged [start, end) rows."""
    rows = np.asarray(intervals, np.int64).reshape(-1, 2)
    return _layer_runs(np.argsort(rows[:, 0], kind="stable"), rows,
                       np.zeros(len(rows), np.int64))[0]


@dataclass
class Spans:
    """Intervals of one class of activity: [start, end) rows and the layer of each."""

    rows: np.ndarray
    layers: np.ndarray


@numba.njit(cache=True, nogil=True)
def _runs(group, ngroups, starts, cycles, tags, owner, total):
    """The activity of each group (a unit, a port) from its intervals in their order, clipped
    to the run (transfers may outlast it) and empty ones dropped: consecutive intervals of one
    layer that overlap or touch are merged (each unit and port lists its intervals in order, so
    a layer's ops mostly form one run), the same activity in far fewer rows. ``owner``: the
    layer of each tag, then -1 (the layer of tag -1). Returns the rows, their layers and where
    each group's rows begin."""
    n = len(group)
    ptr = np.zeros(ngroups + 1, np.int64)
    for i in range(n):
        ptr[group[i] + 1] += 1
    for g in range(ngroups):
        ptr[g + 1] += ptr[g]
    rows = np.empty((n, 2), np.int64)
    layers = np.empty(n, np.int64)
    size = np.zeros(ngroups, np.int64)
    for i in range(n):
        g = group[i]
        if cycles[i] <= 0 or starts[i] >= total:
            continue
        start, end = starts[i], starts[i] + cycles[i]
        if end > total:
            end = total
        layer = owner[tags[i]]
        k = ptr[g] + size[g] - 1
        if size[g] > 0 and layers[k] == layer and start <= rows[k, 1]:
            if end > rows[k, 1]:
                rows[k, 1] = end
            continue
        rows[k + 1, 0] = start
        rows[k + 1, 1] = end
        layers[k + 1] = layer
        size[g] += 1
    out_ptr = np.zeros(ngroups + 1, np.int64)
    m = 0
    for g in range(ngroups):            # close the gaps between the groups
        for k in range(ptr[g], ptr[g] + size[g]):
            rows[m, 0] = rows[k, 0]
            rows[m, 1] = rows[k, 1]
            layers[m] = layers[k]
            m += 1
        out_ptr[g + 1] = m
    return rows[:m], layers[:m], out_ptr


def _logs(result, lowered: Lowered, lowering: Lowering, n_layers: int) -> tuple[dict, dict]:
    """The activity of every unit and port as ``Spans`` (by ``kind:name:class``), and the
    bytes each port moved for each layer."""
    records = result.records
    table = records.table
    owner = np.append(np.asarray(lowered.layer_of, np.int64), -1)     # tag -1: no instruction
    out, moved = {}, {}
    rows, layers, ptr = _runs(table.unit.astype(np.int64), len(table.units), records.start,
                              records.end - records.start, table.tag, owner, result.cycles)
    for u, unit in enumerate(table.units):
        kind = "compute" if unit.name in lowering.compute_units else "other"
        out[f"unit:{unit.name}:{kind}"] = Spans(rows[ptr[u]:ptr[u + 1]],
                                                layers[ptr[u]:ptr[u + 1]])
    logs = [records.port_log(p) for p in range(len(table.ports))]
    start, cycles, nbytes, tags = np.ascontiguousarray(
        np.concatenate([np.zeros((0, 4), np.int64)] + logs).T)
    port = np.repeat(np.arange(len(logs)), [len(log) for log in logs])
    rows, layers, ptr = _runs(port, len(logs), start, cycles, tags, owner, result.cycles)
    by_layer = owner[tags]
    for p, spec in enumerate(table.ports):
        kind = "movement" if spec.name in lowering.movement_ports else "port"
        out[f"port:{spec.name}:{kind}"] = Spans(rows[ptr[p]:ptr[p + 1]],
                                                layers[ptr[p]:ptr[p + 1]])
        good = (port == p) & (by_layer >= 0)
        moved[spec.name] = np.bincount(by_layer[good], nbytes[good].astype(float),
                                       minlength=n_layers)
    return out, moved


CLASSES = ("compute", "movement", "other")


def _exclusive(logs: dict, n_layers: int, total: int) -> np.ndarray:
    """Cycles charged to each layer, by the class of activity that won each piece of the
    timeline (module docstring): an array [class, layer]; idle pieces count as "other"."""
    rows, layers, classes = [], [], []
    cover = np.zeros((0, 2), np.int64)     # what the classes before this one keep busy
    for c, name in enumerate(CLASSES):
        found = [s for key, s in logs.items() if key.endswith(":" + name)]
        if not found:
            continue
        r = np.concatenate([s.rows for s in found]).astype(np.int64)
        lay = np.concatenate([s.layers for s in found]).astype(np.int64)
        keep = (lay >= 0) & (r[:, 1] > r[:, 0]) & ~_covered(r, cover)
        r, lay = r[keep], lay[keep]
        rows.append(r)
        layers.append(lay)
        classes.append(np.full(len(lay), c, np.int64))
        if c < len(CLASSES) - 1:
            cover = _union(np.concatenate([cover, r]))
    if not rows:
        return np.zeros((len(CLASSES), n_layers))
    rows = np.concatenate(rows)
    return _sweep(rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64),
                  np.concatenate(layers).astype(np.int64), np.concatenate(classes), n_layers,
                  len(CLASSES), total)


def _covered(rows: np.ndarray, cover: np.ndarray) -> np.ndarray:
    """Which [start, end) rows lie inside one interval of ``cover`` (sorted, merged): a piece
    of time goes to the first busy class, so such a row of a later class changes nothing and
    the sweep need not see it (a GEMM's million loads inside its compute)."""
    if not len(cover) or not len(rows):
        return np.zeros(len(rows), np.bool_)
    at = np.maximum(np.searchsorted(cover[:, 0], rows[:, 0], side="right") - 1, 0)
    return (cover[at, 0] <= rows[:, 0]) & (cover[at, 1] >= rows[:, 1])


def _sweep(starts, ends, layers, classes, n_layers, n_classes, total):
    """The exclusive attribution as one sweep over the intervals' edges: each piece between
    two edges goes, split equally, to the layers active in the first class that has any; an
    idle piece to the layers of the next busy piece (or the last), as "other". The edges are
    sorted here (stable: a start before the end of the same row at equal times), the sweep
    compiled."""
    keep = np.flatnonzero((layers >= 0) & (ends > starts))
    times = np.stack([starts[keep], ends[keep]], axis=1).ravel()
    order = np.argsort(times, kind="stable")
    delta = np.tile(np.array([1, -1], np.int64), len(keep))[order]
    return _swept(times[order], delta, np.repeat(keep, 2)[order], layers, classes, n_layers,
                  n_classes, total)


@numba.njit(cache=True, nogil=True)
def _swept(times, delta, which, layers, classes, n_layers, n_classes, total):
    m2 = len(times)
    count = np.zeros((n_classes, n_layers), np.int64)
    active = np.zeros((n_classes, n_layers), np.int64)      # the active layers of a class
    where = np.full((n_classes, n_layers), -1, np.int64)    # a layer's place in that list
    nact = np.zeros(n_classes, np.int64)
    last = np.zeros(n_layers, np.int64)                      # owners of the last busy piece
    nlast = 0
    out = np.zeros((n_classes, n_layers))
    idle = 0.0
    t = 0
    k = 0
    while True:
        nxt = times[k] if k < m2 else total
        if nxt > t:
            length = nxt - t
            w = -1
            for c in range(n_classes):
                if nact[c] > 0:
                    w = c
                    break
            if w < 0:
                idle += length
            else:
                share, idle_share = length / nact[w], idle / nact[w]
                for a in range(nact[w]):
                    layer = active[w, a]
                    out[w, layer] += share
                    if idle:
                        out[n_classes - 1, layer] += idle_share
                    last[a] = layer
                nlast, idle = nact[w], 0.0
        if k >= m2:
            break
        t = nxt
        while k < m2 and times[k] == t:
            i = which[k]
            c, layer = classes[i], layers[i]
            count[c, layer] += delta[k]
            if delta[k] > 0 and count[c, layer] == 1:
                where[c, layer] = nact[c]
                active[c, nact[c]] = layer
                nact[c] += 1
            elif delta[k] < 0 and count[c, layer] == 0:
                slot = where[c, layer]
                nact[c] -= 1
                moved = active[c, nact[c]]
                active[c, slot] = moved
                where[c, moved] = slot
                where[c, layer] = -1
            k += 1
    if idle and nlast:
        for a in range(nlast):
            out[n_classes - 1, last[a]] += idle / nlast
    return out


def _joined(logs: dict, kind: str) -> Spans:
    found = [s for k, s in logs.items() if k.endswith(kind)]
    if not found:
        return Spans(np.zeros((0, 2), np.int64), np.zeros(0, np.int64))
    return Spans(np.concatenate([s.rows for s in found]),
                 np.concatenate([s.layers for s in found]))


def _per_layer(spans: Spans, total: int) -> tuple[np.ndarray, np.ndarray]:
    """The union of each layer's intervals: merged rows and the layer of each, by layer."""
    ok = np.flatnonzero(spans.layers >= 0)
    key = spans.layers[ok].astype(np.int64) * (total + 1) + spans.rows[ok, 0]
    return _layer_runs(ok[np.argsort(key, kind="stable")],
                       spans.rows.astype(np.int64, copy=False),
                       spans.layers.astype(np.int64, copy=False))


@numba.njit(cache=True, nogil=True)
def _layer_runs(order, rows, layers):
    """``rows`` taken in ``order`` (by layer, then start), those of one layer that overlap or
    touch merged."""
    out = np.empty((len(order), 2), np.int64)
    owner = np.empty(len(order), np.int64)
    m = -1
    for i in order:
        if m >= 0 and layers[i] == owner[m] and rows[i, 0] <= out[m, 1]:
            if rows[i, 1] > out[m, 1]:
                out[m, 1] = rows[i, 1]
        else:
            m += 1
            out[m, 0] = rows[i, 0]
            out[m, 1] = rows[i, 1]
            owner[m] = layers[i]
    return out[:m + 1], owner[:m + 1]


def _covered_before(cover: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The measure of ``cover`` (sorted, merged rows) before each time in ``t``."""
    if not len(cover):
        return np.zeros(len(t), np.int64)
    lengths = cover[:, 1] - cover[:, 0]
    before = np.concatenate([[0], np.cumsum(lengths)])
    i = np.searchsorted(cover[:, 0], t, side="right") - 1
    at = np.maximum(i, 0)
    return np.where(i >= 0, before[at] + np.clip(t - cover[at, 0], 0, lengths[at]), 0)


@numba.njit(cache=True, nogil=True)
def _sums(layers, values, n_layers):
    """The sum of ``values`` of each layer (int64)."""
    out = np.zeros(n_layers, np.int64)
    for i in range(len(layers)):
        out[layers[i]] += values[i]
    return out


NEVER = np.iinfo(np.int64).max


@numba.njit(cache=True, nogil=True)
def _extents(rows, layers, n_layers):
    """Each layer's first start and last end (-1: no rows)."""
    first = np.full(n_layers, NEVER)
    last = np.full(n_layers, -1)
    for i in range(len(layers)):
        layer = layers[i]
        if layer >= 0:
            first[layer] = min(first[layer], rows[i, 0])
            last[layer] = max(last[layer], rows[i, 1])
    return first, last


def compile_attribution() -> None:
    """Compile the attribution's kernels on a tiny log (the argument types of every run's:
    int64 intervals, a port log with transfers and one without), so that a cold start can do
    it while its child compiles the machine's kernels (``hwsim.timing.warm``)."""
    one = np.ones(1, np.int64)
    _runs(0 * one, 1, 0 * one, one, 0 * one, 0 * one, 1)
    rows = np.ones((1, 2), np.int64)
    _layer_runs(0 * one, rows, 0 * one)
    _sums(0 * one, one, 1)
    _extents(rows, 0 * one, 1)
    _sweep(0 * one, one, 0 * one, 0 * one, 1, len(CLASSES), 1)
    for log in (np.ones((2, 3), np.int64), np.zeros((0, 3), np.int64)):
        binned(log, 1, 1)


def attribute(result, lowered: Lowered, lowering: Lowering, n_layers: int) -> dict:
    """Per-layer timing and traffic, and the run's totals (module docstring)."""
    logs, moved = _logs(result, lowered, lowering, n_layers)
    by_class = _exclusive(logs, n_layers, result.cycles)
    cycles = by_class.sum(axis=0)
    compute = _joined(logs, ":compute")
    compute_all = _union(compute.rows)
    rows, layers = _per_layer(compute, result.cycles)
    compute_busy = _sums(layers, rows[:, 1] - rows[:, 0], n_layers)
    rows, layers = _per_layer(_joined(logs, ":movement"), result.cycles)
    movement = _sums(layers, rows[:, 1] - rows[:, 0], n_layers)
    hidden = _sums(layers, _covered_before(compute_all, rows[:, 1])
                   - _covered_before(compute_all, rows[:, 0]), n_layers)
    every = _joined(logs, "")
    first, last = _extents(every.rows.astype(np.int64, copy=False),
                           every.layers.astype(np.int64, copy=False), n_layers)
    nbytes = {level: np.zeros(n_layers) for level in lowering.levels}
    for level, ports in lowering.levels.items():
        for port in ports:
            if port in moved:
                nbytes[level] += moved[port]
    peaks = {u.name: u.peak_macs for u in result.records.table.units}
    out = []
    for layer in range(n_layers):
        busy, moving = int(compute_busy[layer]), int(movement[layer])
        out.append({
            "cycles": float(cycles[layer]),
            "split": {c: float(by_class[k, layer]) for k, c in enumerate(CLASSES)},
            "span": (int(first[layer]), int(last[layer])) if last[layer] >= 0 else None,
            "compute": busy, "movement": moving,
            "overlap": int(hidden[layer]) / moving if moving else None,
            "bound": "compute" if busy >= moving else "memory",
            "bytes": {level: int(v[layer]) for level, v in nbytes.items()},
            "peak": max((peaks[u] for u in lowered.units.get(layer, ()) if u in peaks), default=0),
        })
    return {"layers": out, "totals": _totals(result, lowering)}


def _totals(result, lowering: Lowering) -> dict:
    window = PEAK_WINDOW_CYCLES
    span = max(result.cycles, 1)
    levels = {}
    for level, ports in lowering.levels.items():
        table = result.records.table
        logs = np.concatenate([np.zeros((0, 4), np.int64)] + [
            result.records.port_log(p) for p, port in enumerate(table.ports)
            if port.name in ports])[:, :3]
        nbytes = logs[:, 2].sum()
        sums, width = binned(logs, span, max(1, span // window))
        levels[level] = {"bytes": int(nbytes),
                         "mean_gb_per_s": nbytes / span * result.clock_hz / 1e9,
                         "peak_gb_per_s": float(sums.max() / width) * result.clock_hz / 1e9
                         if len(sums) else 0.0}
    return {"cycles": result.cycles, "seconds": result.seconds, "levels": levels,
            "macs": result.stats["macs"]}
