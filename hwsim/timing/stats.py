"""Statistics of a finished run, and the result object every machine returns.

Per unit: busy, stalled (by reason) and idle cycles, ops, MACs and utilisation against the unit's
peak. Per port: bytes, mean bandwidth over the run and peak bandwidth over aligned windows of
``window`` cycles (bytes of a transfer are spread evenly over its slot). Everything derives from
the engine's records (``hwsim.timing.records``); nothing is sampled per cycle. The writers of a
result (text summary, JSON, timeline) live in ``hwsim.results``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np

from hwsim.timing.records import Records


def binned(log: np.ndarray, total: int, bins: int) -> tuple[np.ndarray, int]:
    """Amounts of integer ``[start, cycles, amount]`` rows falling in each of ``bins`` equal
    windows over ``[0, total)``, spreading each amount evenly over its interval (at least one
    cycle). Returns (sums, width)."""
    width = max(1, -(-total // max(1, bins)))
    nbins = max(1, -(-total // width))
    data = np.asarray(log, dtype=np.int64).reshape(-1, 3)
    return _spread(data[:, 0], data[:, 1], data[:, 2], nbins, width), width


@numba.njit(cache=True, nogil=True)
def _spread(start, cycles, amount, nbins, width):
    """The integer columns are read as floats here rather than copied to float64 up front
    (that copy was about a quarter of ``binned``'s time on SME vww_96_int8). A start's window
    is the integer quotient of the start by the width, the floor of their float quotient,
    which numba computes as Python does (fmod and corrections) at five times the cost."""
    sums = np.zeros(nbins)
    for i in range(len(start)):
        s, c = float(start[i]), max(float(cycles[i]), 1.0)
        e = s + c
        rate = float(amount[i]) / c
        b = max(start[i] // width, 0)
        while b < nbins and b * width < e:
            lo, hi = max(s, b * width), min(e, (b + 1) * width)
            if hi > lo:
                sums[b] += rate * (hi - lo)
            b += 1
    return sums


@dataclass
class Result:
    """One run: cycles, time at the clock, statistics, and the records behind the timeline."""

    machine: str
    cycles: int
    clock_hz: float
    instructions: int
    stats: dict[str, Any]
    records: Records = field(repr=False, default=None)
    expect_failures: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def unit_names(self) -> list[str]:
        return [u.name for u in self.records.table.units]

    @property
    def port_names(self) -> list[str]:
        return [p.name for p in self.records.table.ports]

    def log(self, unit: str) -> list[tuple[int, int, str, dict | None]]:
        """(start, cycles, label, args) of each op of ``unit``, in program order."""
        table = self.records.table
        u = self.unit_names.index(unit)
        return [(start, cycles, table.labels[table.label[op]], table.args.get(op))
                for start, cycles, op in self.records.unit_log(u).tolist()]

    def to_json(self) -> dict[str, Any]:
        return {"machine": self.machine, "cycles": self.cycles, "clock_hz": self.clock_hz,
                "seconds": self.seconds, "instructions": self.instructions, **self.stats}


def collect(records: Records, machine: str, instructions: int, peak_macs_per_cycle: float,
            clock_hz: float, window: int) -> Result:
    """Turn an engine's records into a ``Result``."""
    t = records.table
    cycles = records.cycles
    span = max(cycles, 1)
    units = {}
    for u, spec in enumerate(t.units):
        stalls = records.unit_stalls(u)
        stalled = sum(stalls.values())
        busy = int(records.busy[u])
        entry = {"ops": int(records.ops[u]), "busy": busy, "stalled": stalled,
                 "stalls": dict(sorted(stalls.items())),
                 "idle": max(0, cycles - busy - stalled), "macs": int(records.macs[u])}
        if spec.peak_macs:
            entry["utilisation"] = entry["macs"] / (spec.peak_macs * span)
        units[spec.name] = entry
    ports = {}
    for p, spec in enumerate(t.ports):
        log = records.port_log(p)
        sums, width = binned(log[:, :3], cycles, max(1, span // max(1, window)))
        nbytes = int(log[:, 2].sum())
        mean = nbytes / span
        peak = float(sums.max() / width)
        ports[spec.name] = {
            "bytes": nbytes, "busy": int(log[:, 1].sum()),
            "mean_bytes_per_cycle": mean, "peak_bytes_per_cycle": peak,
            "mean_gb_per_s": mean * clock_hz / 1e9, "peak_gb_per_s": peak * clock_hz / 1e9,
            "width_bytes_per_cycle": float(spec.width)}
    macs = int(records.macs.sum())
    stats = {"macs": macs, "peak_macs_per_cycle": peak_macs_per_cycle,
             "utilisation": macs / (peak_macs_per_cycle * span) if peak_macs_per_cycle else 0.0,
             "units": units, "ports": ports}
    return Result(machine, cycles, clock_hz, instructions, stats, records)
