"""What runs on a worker: one design point through ``hwsim.estimate``, as a plain record.

A worker process keeps what does not depend on the point: each model's graph, loaded once (and
checked against the content hash the spec was validated with), and in timing-only sweeps each
lowered program (``estimate(cache=...)``: keyed by the graph, target, mode, weight bits and
the machine's architectural parameters, which are all the lowerings read; timing parameters
apply when the program runs, on a fresh machine). With ``numerics = true`` every point is
lowered again: a lowered program may hold the memories of the machine it was made for.

Points run one at a time per process (a lock): the simulator is Python-bound, so threads in one
worker would only take turns on the GIL, and the caches are not built for concurrent fills.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

from hwsim.errors import HwsimError

_GRAPHS: dict = {}       # (model path, sha256) -> Graph
_LOWERED: dict = {}      # estimate's lowering cache (timing-only points)
_LOCK = threading.Lock()


def run_point(point) -> dict:
    """The point's record (``status`` ok or error with a one-line ``error``): totals, bytes
    per memory level, one row per layer, and the wall time on the worker."""
    from hwsim.schedule import estimate
    start = time.perf_counter()
    try:
        with _LOCK:
            report = estimate(
                _graph(point.model), point.target, mode=point.mode,
                weight_bits=point.weight_bits, params=point.machine_params,
                numerics=point.numerics, check=False, name=point.model.text,
                cache=None if point.numerics else _LOWERED)
        record = {"status": "ok", "error": "", "cycles": report.cycles,
                  "seconds": report.seconds, "macs": report.macs,
                  "bytes": {level: t["bytes"] for level, t in report.totals["levels"].items()},
                  "layers": [_layer(row) for row in report.layers]}
    except HwsimError as exc:
        record = error_record(str(exc))
    except Exception as exc:   # a bug in hwsim: the sweep goes on, the row names the exception
        record = error_record(f"{type(exc).__name__}: {exc}")
    record["wall_s"] = time.perf_counter() - start
    return record


def error_record(message: str) -> dict:
    """A failed point's record, its message on one line."""
    return {"status": "error", "error": " ".join(message.split()), "cycles": None,
            "seconds": None, "macs": None, "bytes": {}, "layers": []}


def _graph(model):
    key = (model.path, model.sha256)
    if key not in _GRAPHS:
        from hwsim.errors import ConfigError
        from hwsim.tosa import load_graph
        try:
            data = Path(model.path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"{model.text}: cannot read {model.path} on this worker "
                              f"({exc.strerror})") from None
        if hashlib.sha256(data).hexdigest() != model.sha256:
            raise ConfigError(f"{model.text}: {model.path} differs from the file the sweep "
                              "was started with (changed since, or another file on this host)")
        _GRAPHS[key] = load_graph(model.path)
    return _GRAPHS[key]


def _layer(row) -> dict:
    return {"layer": row.index, "name": row.name, "kind": row.kind,
            "units": "+".join(row.units), "cycles": row.cycles, "macs": row.macs,
            "bytes": dict(row.bytes), "compute_cycles": row.compute_cycles,
            "movement_cycles": row.movement_cycles, "bound": row.bound,
            "overlap": row.overlap}


def hwsim_version() -> str:
    """Run on every worker before a sweep: the workers must import the same hwsim."""
    from hwsim.version import __version__
    return __version__
