"""How fast a sweep runs on Dask, and what it costs per point over a plain in-process estimate.

    PYTHONPATH=. python benchmarks/bench_sweep.py [--workers 1 2]

The grid: KWS on GAP9, timing only (the sweep default), 2 clocks x 3 L2 x 3 MRAM bandwidths x
7 weight widths (2..8) = 126 points, on ../shared/models/kws_ref_model.tflite (else the bundled
look-alike, examples/models/ds_cnn_int8.tosa).

* ``in_process``: the same 126 points as plain ``hwsim.estimate`` calls in this process (the
  graph loaded once, numba warm), seconds per point, the best of ``--repeat`` passes;
  ``cached``: the same with the lowering cache a sweep worker keeps (``estimate(cache=...)``).
* per number of workers, ``cold``: ``hwsim.sweep(spec, workers=N)`` end to end (a new
  LocalCluster, its worker processes starting and loading numba's cache, the store), as points
  per minute; ``warm``: the same grid on a LocalCluster that has already run two points per
  worker (``scheduler=`` its address), which is the rate of a long sweep (the best of
  ``--repeat`` sweeps, each with a new store).
* ``overhead_per_point_s``: warm sweep seconds per point on 1 worker minus the mean wall time
  of the estimates on that worker (the table's ``wall_s``, measured in the same run, so the
  machine's load weighs on both alike): what Dask, the store and the table cost per point.
  Compare ``warm_estimate_s_per_point`` with ``in_process`` for the cache's gain.

Results are printed and saved in benchmarks/results/sweep.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import hwsim  # noqa: E402
from hwsim.sweeps import read_spec  # noqa: E402
from hwsim.sweeps.execute import cores  # noqa: E402
from hwsim.traces.files import atomic_write_text  # noqa: E402
from common import best  # noqa: E402

KWS = ROOT.parent / "shared" / "models" / "kws_ref_model.tflite"
BUNDLED = ROOT / "examples" / "models" / "ds_cnn_int8.tosa"
GRID = {"gap9.clock_hz": [240e6, 370e6], "gap9.l2_bytes_per_cycle": [4, 8, 16],
        "gap9.mram_bytes_per_cycle": [2, 4, 8]}
WEIGHT_BITS = list(range(2, 9))


def in_process(spec, repeats: int) -> dict:
    """Seconds per point of plain estimates and of estimates with the lowering cache (the
    best of ``repeats`` passes over the grid)."""
    graph = hwsim.load_graph(spec.models[0].path)
    points = spec.points()
    out = {}
    for name, cache in (("plain", None), ("cached", {})):
        def grid():
            for p in points:
                hwsim.estimate(graph, "gap9", weight_bits=p.weight_bits,
                               params=p.machine_params, numerics=False, cache=cache)
        out[f"{name}_s_per_point"] = best(grid, repeats) / len(points)
    return out


def swept(spec_data: dict, workers: int, folder: Path, repeats: int) -> dict:
    from distributed import LocalCluster
    n = len(read_spec(spec_data).points())
    start = time.perf_counter()
    hwsim.sweep(spec_data, workers=workers, store=folder / f"cold{workers}.jsonl")
    cold = time.perf_counter() - start
    with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster:
        address = cluster.scheduler_address
        # two points per worker first (clocks not in the grid): numba and the graph loaded
        hwsim.sweep({**spec_data, "params": {"gap9.clock_hz": [1e8, 2e8, 3e8, 4e8][:2 * workers]},
                     "weight_bits": [8]}, scheduler=address)
        runs = []
        for i in range(repeats):        # a new store each time: every point runs
            start = time.perf_counter()
            frame = hwsim.sweep(spec_data, scheduler=address,
                                store=folder / f"warm{workers}_{i}.jsonl")
            runs.append((time.perf_counter() - start, float(frame["wall_s"].mean())))
            assert (frame["status"] == "ok").all()
    warm, estimate = min(runs)
    return {"cold_s": cold, "cold_points_per_min": 60 * n / cold,
            "warm_s": warm, "warm_points_per_min": 60 * n / warm,
            "warm_estimate_s_per_point": estimate}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3,
                        help="warm sweeps and in-process passes: the best of this many")
    args = parser.parse_args(argv)
    model = KWS if KWS.exists() else BUNDLED
    spec_data = {"models": [str(model)], "targets": ["gap9"], "weight_bits": WEIGHT_BITS,
                 "params": GRID}
    spec = read_spec(spec_data)
    result = {"model": model.name, "points": len(spec.points()), "cores": cores(),
              "machine": "shared 2-core machine, other jobs running",
              "repeats": args.repeat, "in_process": in_process(spec, args.repeat), "workers": {}}
    with tempfile.TemporaryDirectory() as folder:
        for n in args.workers:
            result["workers"][str(n)] = swept(spec_data, n, Path(folder), args.repeat)
    if "1" in result["workers"]:
        one = result["workers"]["1"]
        result["overhead_per_point_s"] = (one["warm_s"] / result["points"]
                                          - one["warm_estimate_s_per_point"])
    print(f"{result['model']}, {result['points']} points on GAP9, timing only "
          f"({result['machine']})")
    ip = result["in_process"]
    print(f"  in process: {ip['plain_s_per_point'] * 1e3:.1f} ms/point plain, "
          f"{ip['cached_s_per_point'] * 1e3:.1f} ms/point with the lowering cache")
    for n, r in result["workers"].items():
        print(f"  {n} worker(s): cold {r['cold_points_per_min']:.0f} points/min "
              f"({r['cold_s']:.1f} s), warm {r['warm_points_per_min']:.0f} points/min "
              f"({r['warm_s']:.1f} s; the estimate itself "
              f"{r['warm_estimate_s_per_point'] * 1e3:.1f} ms/point)")
    if "overhead_per_point_s" in result:
        print(f"  overhead per point (warm, 1 worker: sweep wall per point - the estimate's "
              f"own wall on the worker): {result['overhead_per_point_s'] * 1e3:.1f} ms")
    out = ROOT / "benchmarks" / "results" / "sweep.json"
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
