"""Running a lowered program once, reading each layer's output, and attributing time and bytes.

**Outputs per layer** (checkpoints): the lowering says where each layer's output lives and which
instructions write it. Every op of those instructions is watched as it is dispatched
(``Machine.run(observe=...)``); when the last of them has committed (and no later instruction
has started), the output bytes are copied. No op is added and no cycle changes: a checkpoint is
free, and the buffer may be reused afterwards.

**Attribution** (one simulation): every engine op carries the index of its instruction, so its
layer; unit logs give the busy intervals and port logs the transfers of each layer.

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

import heapq
import time
from dataclasses import dataclass, field

import numpy as np

from hwsim.schedule.lowering import Lowered, Lowering
from hwsim.targets.base import PEAK_WINDOW_CYCLES
from hwsim.timing.stats import binned


@dataclass
class Simulation:
    result: object                                  # hwsim.timing.stats.Result
    values: dict = field(default_factory=dict)      # layer index -> its simulated output
    outputs: dict = field(default_factory=dict)     # graph output name -> values
    seconds: float = 0.0                            # wall time of the run


class Checkpoints:
    """Copies each layer's output once all of its writers have committed (module docstring)."""

    def __init__(self, lowered: Lowered, machine):
        self.machine, self.lowered = machine, lowered
        self.raw: dict[int, np.ndarray] = {}
        self.by_writer: dict[int, list[int]] = {}
        self.pending: dict[int, int] = {}
        self.armed: set[int] = set()
        self.queue: list = []
        for layer, cp in lowered.checkpoints.items():
            if not cp.writers:
                self._snap(layer)
                continue
            self.pending[layer] = 0
            heapq.heappush(self.queue, (max(cp.writers), layer))
            for instr in cp.writers:
                self.by_writer.setdefault(instr, []).append(layer)

    def _snap(self, layer: int) -> None:
        if layer not in self.raw:
            place = self.lowered.checkpoints[layer].place
            self.raw[layer] = self.machine.memory(place.space).read(place.addr, place.nbytes)

    def _done(self, layers: list[int]) -> None:
        for layer in layers:
            self.pending[layer] -= 1
            if not self.pending[layer] and layer in self.armed:
                self._snap(layer)

    def observe(self, op) -> None:
        queue = self.queue
        while queue and queue[0][0] < op.tag:       # every writer of this layer is dispatched
            _, layer = heapq.heappop(queue)
            self.armed.add(layer)
            if not self.pending[layer]:
                self._snap(layer)
        layers = self.by_writer.get(op.tag)
        if not layers:
            return
        for layer in layers:
            self.pending[layer] += 1
        inner = op.execute

        def execute():
            work = inner()
            commit = work.commit
            if commit is None:
                self._done(layers)
            else:
                def committed():
                    commit()
                    self._done(layers)
                work.commit = committed
            return work
        op.execute = execute

    def values(self) -> dict[int, np.ndarray]:
        for layer in self.lowered.checkpoints:      # writers ending the program
            self._snap(layer)
        return {layer: self.lowered.checkpoints[layer].place.decode(raw)
                for layer, raw in self.raw.items()}


def simulate(lowered: Lowered, machine, inputs: dict, params: dict, numerics: bool = True,
             progress=None) -> Simulation:
    """Load the image and inputs, run the program, read every layer's output."""
    for space, addr, data in lowered.image:
        machine.memory(space).write(addr, data)
    for name, place in lowered.inputs.items():
        machine.memory(place.space).write(place.addr, place.encode(inputs[name]))
    watch = Checkpoints(lowered, machine) if numerics else None
    start = time.perf_counter()
    result = machine.run(lowered.program, params=params, record=True, numerics=numerics,
                         observe=watch.observe if watch else None, progress=progress)
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
    if not len(intervals):
        return np.zeros((0, 2), np.int64)
    iv = intervals[np.argsort(intervals[:, 0], kind="stable")]
    ends = np.maximum.accumulate(iv[:, 1])
    new = np.concatenate([[True], iv[1:, 0] > ends[:-1]])
    starts = iv[new, 0]
    groups = np.cumsum(new) - 1
    merged_end = np.zeros(len(starts), np.int64)
    np.maximum.at(merged_end, groups, ends)
    return np.stack([starts, merged_end], axis=1)


def _measure(union: np.ndarray) -> int:
    return int((union[:, 1] - union[:, 0]).sum()) if len(union) else 0


def _intersection(a: np.ndarray, b: np.ndarray) -> int:
    """Measure of the intersection of two merged interval sets."""
    total, j = 0, 0
    for start, end in a:
        while j < len(b) and b[j, 1] <= start:
            j += 1
        k = j
        while k < len(b) and b[k, 0] < end:
            total += min(end, b[k, 1]) - max(start, b[k, 0])
            k += 1
    return int(total)


@dataclass
class Spans:
    """Intervals of one class of activity: [start, end) rows and the layer of each."""

    rows: np.ndarray
    layers: np.ndarray
    amounts: np.ndarray = None      # bytes of transfers


def _logs(result, lowered: Lowered, lowering: Lowering) -> dict[str, Spans]:
    layer_of = np.append(np.asarray(lowered.layer_of, np.int64), -1)

    def spans(entries, tags, amount=None) -> Spans:
        if not entries:
            return Spans(np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(0))
        data = np.asarray([(e[0], e[1]) for e in entries], np.int64)
        rows = np.stack([data[:, 0], data[:, 0] + np.maximum(data[:, 1], 0)], axis=1)
        rows = np.minimum(rows, result.cycles)   # a transfer may outlast the last op
        index = np.asarray([-1 if t is None else t for t in tags], np.int64)
        amounts = None if amount is None else np.asarray([e[2] for e in entries], float)
        return Spans(rows, layer_of[index], amounts)

    out = {}
    for unit in result.units:
        kind = "compute" if unit.name in lowering.compute_units else "other"
        out[f"unit:{unit.name}:{kind}"] = spans(unit.log, unit.tags)
    for port in result.ports:
        kind = "movement" if port.name in lowering.movement_ports else "port"
        out[f"port:{port.name}:{kind}"] = spans(port.log, port.tags, amount=True)
    return out


CLASSES = ("compute", "movement", "other")


def _exclusive(logs: dict, n_layers: int, total: int) -> np.ndarray:
    """Cycles charged to each layer, by the class of activity that won each piece of the
    timeline (module docstring): an array [class, layer]; idle pieces count as "other"."""
    classes = [[s for k, s in logs.items() if k.endswith(":" + c)] for c in CLASSES]
    every = [s for group in classes for s in group]
    points = np.unique(np.concatenate([[0, total]] + [s.rows.reshape(-1) for s in every]))
    points = points[(points >= 0) & (points <= total)]
    seg = np.diff(points).astype(float)
    out = np.zeros((len(CLASSES), n_layers))
    if not len(seg):
        return out
    owner = np.zeros((n_layers, len(seg)), bool)
    winner = np.full(len(seg), len(CLASSES) - 1)
    taken = np.zeros(len(seg), bool)
    for c, group in enumerate(classes):
        active = np.zeros((n_layers + 1, len(seg) + 1), np.int64)
        for s in group:
            ok = s.layers >= 0
            lo = np.searchsorted(points, s.rows[ok, 0])
            hi = np.searchsorted(points, s.rows[ok, 1])
            np.add.at(active, (s.layers[ok], lo), 1)
            np.add.at(active, (s.layers[ok], hi), -1)
        busy = np.cumsum(active, axis=1)[:n_layers, :-1] > 0
        fresh = busy.any(axis=0) & ~taken
        owner[:, fresh] = busy[:, fresh]
        winner[fresh] = c
        taken |= fresh
    if taken.any():              # idle pieces go to the next busy piece (or the last one)
        index = np.where(taken, np.arange(len(seg)), len(seg))
        nxt = np.minimum.accumulate(index[::-1])[::-1]
        nxt = np.where(nxt == len(seg), np.flatnonzero(taken)[-1], nxt)
        owner = owner[:, nxt]
    share = owner * (seg / np.maximum(owner.sum(axis=0), 1))
    for c in range(len(CLASSES)):
        out[c] = share[:, winner == c].sum(axis=1)
    return out


def _joined(logs: dict, kind: str) -> Spans:
    found = [s for k, s in logs.items() if k.endswith(kind)]
    if not found:
        return Spans(np.zeros((0, 2), np.int64), np.zeros(0, np.int64))
    return Spans(np.concatenate([s.rows for s in found]),
                 np.concatenate([s.layers for s in found]))


def _by_layer(spans: Spans, n_layers: int) -> list[np.ndarray]:
    """The merged intervals of each layer."""
    order = np.argsort(spans.layers, kind="stable")
    bounds = np.searchsorted(spans.layers[order], np.arange(n_layers + 1))
    rows = spans.rows[order]
    return [_union(rows[bounds[i]:bounds[i + 1]]) for i in range(n_layers)]


def attribute(result, lowered: Lowered, lowering: Lowering, n_layers: int) -> dict:
    """Per-layer timing and traffic, and the run's totals (module docstring)."""
    logs = _logs(result, lowered, lowering)
    by_class = _exclusive(logs, n_layers, result.cycles)
    cycles = by_class.sum(axis=0)
    compute = _joined(logs, ":compute")
    compute_all = _union(compute.rows)
    per_compute = _by_layer(compute, n_layers)
    per_movement = _by_layer(_joined(logs, ":movement"), n_layers)
    every = _joined(logs, "")
    ok = every.layers >= 0
    first = np.full(n_layers, np.iinfo(np.int64).max)
    last = np.full(n_layers, -1)
    np.minimum.at(first, every.layers[ok], every.rows[ok, 0])
    np.maximum.at(last, every.layers[ok], every.rows[ok, 1])
    nbytes = {level: np.zeros(n_layers) for level in lowering.levels}
    for level, ports in lowering.levels.items():
        for port in ports:
            s = logs.get(f"port:{port}:movement", logs.get(f"port:{port}:port"))
            if s is not None and len(s.layers):
                good = s.layers >= 0
                nbytes[level] += np.bincount(s.layers[good], s.amounts[good],
                                             minlength=n_layers)
    peaks = {u.name: u.peak_macs for u in result.units}
    rows = []
    for layer in range(n_layers):
        busy, moved = _measure(per_compute[layer]), _measure(per_movement[layer])
        rows.append({
            "cycles": float(cycles[layer]),
            "split": {c: float(by_class[k, layer]) for k, c in enumerate(CLASSES)},
            "span": (int(first[layer]), int(last[layer])) if last[layer] >= 0 else None,
            "compute": busy, "movement": moved,
            "overlap": _intersection(per_movement[layer], compute_all) / moved if moved else
            None,
            "bound": "compute" if busy >= moved else "memory",
            "bytes": {level: int(v[layer]) for level, v in nbytes.items()},
            "peak": max((peaks[u] for u in lowered.units.get(layer, ()) if u in peaks), default=0),
        })
    return {"layers": rows, "totals": _totals(result, lowering)}


def _totals(result, lowering: Lowering) -> dict:
    window = PEAK_WINDOW_CYCLES
    span = max(result.cycles, 1)
    levels = {}
    for level, ports in lowering.levels.items():
        logs = [e for p in result.ports if p.name in ports for e in p.log]
        nbytes = sum(e[2] for e in logs)
        sums, width = binned(logs, span, max(1, span // window))
        levels[level] = {"bytes": int(nbytes),
                         "mean_gb_per_s": nbytes / span * result.clock_hz / 1e9,
                         "peak_gb_per_s": float(sums.max() / width) * result.clock_hz / 1e9
                         if len(sums) else 0.0}
    return {"cycles": result.cycles, "seconds": result.seconds, "levels": levels,
            "macs": result.stats["macs"]}
