"""What the benchmark scripts share: their timers, and the MLPerf Tiny models they measure."""

from __future__ import annotations

import statistics
import time

# the int8 MLPerf Tiny model files in ../shared/models -> the synthetic look-alike used without them
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
