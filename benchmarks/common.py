"""What the benchmark scripts share: their timers, and the MLPerf Tiny models they measure.

The models are the mlcommons/tiny reference models (``benchmark/training/*/trained_models``,
docs/sources.md#mlperf-tiny-models), read from ``$HWSIM_MODELS`` when it is set, else from
``../shared/models`` beside the checkout; without them the scripts measure the synthetic
look-alikes of ``hwsim.tosa.models``.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from hwsim.traces.files import atomic_write_text

MODELS = Path(os.environ.get("HWSIM_MODELS") or
              Path(__file__).resolve().parents[2] / "shared" / "models")

# the int8 MLPerf Tiny model files in MODELS -> the synthetic look-alike used without them
MLPERF_TINY = {"kws_ref_model": "ds_cnn", "vww_96_int8": "mobilenet_v1",
               "resnet8_int8": "resnet8", "ad01_int8": "autoencoder"}


def best(fn, repeats: int = 5, clock=time.perf_counter, warm_up: bool = True) -> float:
    """The shortest of ``repeats`` timings of ``fn()`` on ``clock`` (wall or process CPU
    time), after one untimed call that loads the numba caches unless ``warm_up`` is off."""
    if warm_up:
        fn()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def median(fn, repeats: int) -> float:
    """The median of ``repeats`` wall-clock timings of ``fn()``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def save_rows(path: Path, rows: list[dict], key: tuple[str, ...], command: str) -> None:
    """Write ``rows`` to the results file ``path``: they replace the rows of the same ``key``
    fields, the file's other rows are kept, so that a run of a few cases updates only those."""
    def ident(row):
        return tuple(row[k] for k in key)
    measured = {ident(r) for r in rows}
    old = json.loads(path.read_text())["rows"] if path.exists() else []
    kept = [r for r in old if ident(r) not in measured]
    atomic_write_text(path, json.dumps({"command": command, "rows": kept + rows}, indent=1) + "\n")
    print(f"saved {path}")
