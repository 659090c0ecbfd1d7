"""Statistics of a finished run, and the result object every machine returns.

Per unit: busy, stalled (by reason) and idle cycles, ops, MACs and utilisation against the unit's
peak. Per port: bytes, mean bandwidth over the run and peak bandwidth over aligned windows of
``window`` cycles (bytes of a transfer are spread evenly over its slot). Everything derives from
the engine's logs; nothing is sampled per cycle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


def binned(log: list[tuple[int, int, int]], total: int, bins: int) -> tuple[np.ndarray, int]:
    """Amounts of ``(start, cycles, amount)`` intervals falling in each of ``bins`` equal windows
    over ``[0, total)``, spreading each amount evenly over its interval. Returns (sums, width)."""
    width = max(1, -(-total // max(1, bins)))
    nbins = max(1, -(-total // width))
    if not log:
        return np.zeros(nbins), width
    data = np.asarray(log, dtype=np.float64)
    start, cycles, amount = data[:, 0], np.maximum(data[:, 1], 1.0), data[:, 2]
    rate = amount / cycles
    # Cumulative amount is piecewise linear: its slope changes by +rate at a start, -rate at an end.
    points = np.concatenate([start, start + cycles])
    slopes = np.concatenate([rate, -rate])
    order = np.argsort(points, kind="stable")
    points, slopes = points[order], np.cumsum(slopes[order])
    cumulative = np.concatenate([[0.0], np.cumsum(slopes[:-1] * np.diff(points))])
    edges = np.arange(nbins + 1, dtype=np.float64) * width
    at_edges = np.interp(edges, points, cumulative, left=0.0, right=cumulative[-1])
    return np.diff(at_edges), width


@dataclass
class Result:
    """One run: cycles, time at the clock, statistics, and the logs behind the timeline."""

    machine: str
    cycles: int
    clock_hz: float
    instructions: int
    stats: dict[str, Any]
    units: list = field(repr=False, default_factory=list)
    ports: list = field(repr=False, default_factory=list)
    expect_failures: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.cycles / self.clock_hz

    def write_timeline(self, path: str | Path, spans=()) -> None:
        """Chrome/Perfetto trace JSON: a track per unit, counter tracks for bandwidth/occupancy;
        ``spans`` (name, start, cycles, args) are added as async slices."""
        from hwsim.traces.chrome import write_chrome
        write_chrome(self, path, spans)

    def to_json(self) -> dict[str, Any]:
        return {"machine": self.machine, "cycles": self.cycles, "clock_hz": self.clock_hz,
                "seconds": self.seconds, "instructions": self.instructions, **self.stats}

    def write_json(self, path: str | Path) -> None:
        from hwsim.traces.files import atomic_write_text
        atomic_write_text(path, json.dumps(self.to_json(), indent=2) + "\n")

    def summary(self) -> str:
        from hwsim.traces.report import summary_text
        return summary_text(self)


def collect(engine, machine: str, instructions: int, peak_macs_per_cycle: float,
            window: int) -> Result:
    """Turn a finished engine into a ``Result``."""
    cycles = int(engine.env.now)
    span = max(cycles, 1)
    units = {}
    for unit in engine.units.values():
        stalled = sum(unit.stalls.values())
        entry = {"ops": unit.ops, "busy": unit.busy, "stalled": stalled,
                 "stalls": dict(sorted(unit.stalls.items())),
                 "idle": max(0, cycles - unit.busy - stalled), "macs": unit.macs}
        if unit.peak_macs:
            entry["utilisation"] = unit.macs / (unit.peak_macs * span)
        units[unit.name] = entry
    ports = {}
    for port in engine.ports.values():
        sums, width = binned(port.log, cycles, max(1, span // max(1, window)))
        mean = port.bytes / span
        ports[port.name] = {
            "bytes": port.bytes, "busy": port.busy_cycles,
            "mean_bytes_per_cycle": mean, "peak_bytes_per_cycle": float(sums.max() / width),
            "mean_gb_per_s": mean * engine.clock_hz / 1e9,
            "peak_gb_per_s": float(sums.max() / width) * engine.clock_hz / 1e9,
            "width_bytes_per_cycle": port.width}
    macs = sum(u.macs for u in engine.units.values())
    stats = {"macs": macs, "peak_macs_per_cycle": peak_macs_per_cycle,
             "utilisation": macs / (peak_macs_per_cycle * span) if peak_macs_per_cycle else 0.0,
             "units": units, "ports": ports}
    return Result(machine, cycles, engine.clock_hz, instructions, stats,
                  list(engine.units.values()), list(engine.ports.values()))
