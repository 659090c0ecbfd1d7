"""Chrome/Perfetto trace JSON (the "JSON trace event format"), streamed to disk.

One process per run, one thread track per unit with a slice per op, and counter tracks: bytes per
cycle through each port and the busy fraction of each unit, averaged over windows of the run.
``spans`` adds named intervals that may overlap (e.g. a scheduler's layers) as async slices.
Timestamps are cycles: in the viewer, 1 us stands for 1 cycle (``otherData`` says so).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hwsim.timing.stats import binned
from hwsim.traces.files import atomic_open

COUNTER_BINS = 1000


def write_chrome(result, path: str | Path, spans=()) -> None:
    """``spans``: (name, start, cycles, args) intervals shown as async slices."""
    with atomic_open(path, "w") as fh:
        fh.write('{"displayTimeUnit": "ns", "otherData": ')
        json.dump({"machine": result.machine, "time_unit": "1 us in the viewer = 1 cycle",
                   "clock_hz": result.clock_hz, "cycles": result.cycles}, fh)
        fh.write(',\n"traceEvents": [\n')
        first = True

        def emit(event: dict) -> None:
            nonlocal first
            fh.write(("" if first else ",\n") + json.dumps(event, separators=(",", ":")))
            first = False

        emit({"ph": "M", "pid": 1, "name": "process_name", "args": {"name": result.machine}})
        records = result.records
        table = records.table
        labels, label, args = table.labels, table.label, table.args
        for u, unit in enumerate(table.units):
            tid = u + 1
            emit({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name",
                  "args": {"name": unit.name}})
            for start, cycles, op in records.unit_log(u).tolist():
                event = {"ph": "X", "pid": 1, "tid": tid, "ts": start, "dur": cycles,
                         "name": labels[label[op]]}
                if op in args:
                    event["args"] = args[op]
                emit(event)
        for n, (name, start, cycles, span_args) in enumerate(spans):
            base = {"pid": 1, "cat": "span", "id": n, "name": name}
            emit({**base, "ph": "b", "ts": start, "args": span_args or {}})
            emit({**base, "ph": "e", "ts": start + cycles})
        span = max(result.cycles, 1)
        for p, port in enumerate(table.ports):
            sums, width = binned(records.port_log(p)[:, :3], span, COUNTER_BINS)
            for i, amount in enumerate(sums):
                emit({"ph": "C", "pid": 1, "ts": i * width, "name": f"{port.name} bytes/cycle",
                      "args": {"bytes/cycle": round(float(amount) / width, 3)}})
        for u, unit in enumerate(table.units):
            log = records.unit_log(u)
            busy = np.stack([log[:, 0], log[:, 1], log[:, 1]], axis=1)
            sums, width = binned(busy, span, COUNTER_BINS)
            for i, amount in enumerate(sums):
                emit({"ph": "C", "pid": 1, "ts": i * width, "name": f"{unit.name} occupancy",
                      "args": {"busy %": round(100.0 * float(amount) / width, 1)}})
        fh.write("\n]}\n")
