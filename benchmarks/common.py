"""What the benchmark scripts share: their timers, and the MLPerf Tiny models they measure.

The models are the mlcommons/tiny reference models (``benchmark/training/*/trained_models``,
docs/sources.md#mlperf-tiny-models), read from ``$HWSIM_MODELS`` when it is set, else from
``../shared/models`` beside the checkout; without them the scripts measure the synthetic
look-alikes of ``hwsim.tosa.models``.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

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
