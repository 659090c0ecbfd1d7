"""What the benchmark scripts share: their timers, and the MLPerf Tiny models they measure.

The models are the mlcommons/tiny reference models (``benchmark/training/*/trained_models``,
docs/sources.md#mlperf-tiny-models), read from ``$HWSIM_MODELS`` when it is set, else from
``../shared/models`` beside the checkout; without them the scripts measure the synthetic
look-alikes of ``hwsim.tosa.models``.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from hwsim.traces.files import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
MODELS = Path(os.environ.get("HWSIM_MODELS") or ROOT.parent / "shared" / "models")

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


def provenance() -> dict:
    """What made a row of results: this run's command as typed in the project's root, its
    arguments too, and the commit it ran (``+`` if the checkout had changes, results files
    aside; ``unknown`` outside a git checkout). Files merge the rows of several runs: each row
    keeps its own."""
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(ROOT):
        script = script.relative_to(ROOT)
    command = "PYTHONPATH=. " + shlex.join(["python", str(script), *sys.argv[1:]])
    try:
        commit = _git("rev-parse", "--short", "HEAD")
        if _git("status", "--porcelain", "--untracked-files=no", "--", ".",
                ":!benchmarks/results"):       # a results file is not the code measured
            commit += "+"
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {"command": command, "commit": commit}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def save_rows(path: Path, rows: list[dict], key: tuple[str, ...], command: str) -> None:
    """Write ``rows`` to the results file ``path``, each with its ``provenance``: they replace
    the rows of the same ``key`` fields, the file's other rows are kept, so that a run of a few
    cases updates only those. ``command``: the script's usage, for the file."""
    def ident(row):
        return tuple(row[k] for k in key)
    made = provenance()
    rows = [{**row, **made} for row in rows]
    measured = {ident(r) for r in rows}
    old = json.loads(path.read_text())["rows"] if path.exists() else []
    kept = [r for r in old if ident(r) not in measured]
    atomic_write_text(path, json.dumps({"command": command, "rows": kept + rows}, indent=1) + "\n")
    print(f"saved {path}")
