"""GEMM on the matrix engines: a TOSA MATMUL lowered by the scheduler, simulated, and its
throughput at the machine's clock against the machine's peak.

    PYTHONPATH=. python benchmarks/bench_gemm.py [--targets hmx ...]

Each target has a function here (``GEMMS``) returning one row: the GEMM's shape and type, the
simulated cycles, FLOP/s at the clock (2 M K N over the simulated time) and % of peak, the
wall time of the simulation, and whether the result is right. Results are printed and saved in
benchmarks/results/gemm.json; a run replaces the rows of the targets it measured and keeps the
others.

* ``hmx``: 256 x 1024 x 4096 in FP16, A a graph input ([1, 256, 1024]), B a constant
  ([1, 1024, 4096], packed ahead of time and streamed from DDR). The whole program counts: A
  in by DMA and packed into croutons on HVX, B streamed through two VTCM buffers, 1024
  activation-deep multiplies of 32 croutons each, converts overlapping the next multiply, the
  result unpacked and sent to DDR one filter group at a time. The HMX-only figure is the
  multiplier's busy share. Right: every element within half an FP16 ulp (plus the
  accumulator's 2^-24 of sum |a b|) of the exact product; ``rounded_exactly`` is the share
  equal to the exact product rounded once (the accumulator's own rounding can land a value on
  an FP16 rounding boundary). ``wall_s`` is the first run in the process (numba kernels loaded
  from the cache, modules imported); ``warm_wall_s`` a second one, split into its lowering and
  simulation in ``warm_phases_s``.
* ``sme``: 512 x 512 x 512 in fp32 (FMOPA, SVL 512), A a graph input, B a constant packed
  ahead of time into K-major panels. The whole program counts: A packed into panels on the
  vector side, four .S tiles accumulating 32x32 output blocks, the tiles stored row by row.
  Right: the TOSA dot-product rule for fp32 (``--check``'s verdict on the MATMUL layer);
  ``max_rel_err`` is the largest error over the result's largest magnitude.

``peak_rss_mb``: the process's peak resident memory while the target's GEMM ran (Linux: the
peak is reset through ``/proc/self/clear_refs`` before it and read from ``VmHWM`` after it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import hwsim  # noqa: E402
from hwsim.tosa.builder import GraphBuilder  # noqa: E402
from common import save_rows  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "gemm.json"


def matmul_graph(m: int, k: int, n: int, dtype: str, b: np.ndarray):
    """A [1, m, k] x B [1, k, n] as a TOSA MATMUL with B a constant."""
    builder = GraphBuilder(f"gemm_{m}x{k}x{n}")
    a = builder.input((1, m, k), dtype)
    return builder.build(builder.matmul(a, builder.const(b.reshape(1, k, n), dtype)))


def runs(graph, target: str, **options):
    """The estimate (exact numerics) timed three times: its first run in this process
    (numba kernels loaded from the cache), warm, and warm timing only. Returns (warm report,
    first wall, warm wall, timing-only cycles, its wall); no other report is kept, so that
    the peak memory is one estimate's."""
    walls, kept, cycles = [], None, None
    for numerics in (True, True, False):
        start = time.perf_counter()
        report = hwsim.estimate(graph, target, numerics=numerics, **options)
        walls.append(time.perf_counter() - start)
        kept = report if len(walls) == 2 else kept
        cycles = report.cycles
        del report
    return kept, walls[0], walls[1], cycles, walls[2]


def unit(report, name: str):
    return next(u for u in report.result.records.table.units if u.name == name)


def hmx_gemm(m: int = 256, k: int = 1024, n: int = 4096) -> dict:
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((1, m, k)) / 4).astype(np.float16)
    b = (rng.standard_normal((k, n)) / 32).astype(np.float16)
    graph = matmul_graph(m, k, n, "fp16", b)
    report, wall, warm_wall, timing_cycles, timing_wall = runs(graph, "hmx", inputs=[a])
    got = next(iter(report.outputs.values())).reshape(m, n).astype(np.float64)
    a64, b64 = a[0].astype(np.float64), b.astype(np.float64)
    want = a64 @ b64
    slack = 2.0 ** -24 * (np.abs(a64) @ np.abs(b64))  # the accumulator's rounding
    half_ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(want) + slack, 2.0 ** -14))) - 11)
    flops = 2 * m * k * n
    peak_flops = 2 * unit(report, "mpy").peak_macs * report.clock_hz
    mpy = report.result.stats["units"]["mpy"]
    return {"target": "hmx", "shape": [m, k, n], "dtype": "fp16", "cycles": report.cycles,
            "seconds": report.seconds, "tflops": flops / report.seconds / 1e12,
            "peak_tflops": peak_flops / 1e12,
            "percent_of_peak": 100 * flops / report.seconds / peak_flops,
            "hmx_busy_percent": 100 * mpy["busy"] / report.cycles,
            "clock_hz": report.clock_hz,
            "correct": bool((np.abs(got - want) <= half_ulp + slack).all()),
            "rounded_exactly": float((got == want.astype(np.float16)).mean()),
            "timing_only_cycles": timing_cycles, "wall_s": wall, "warm_wall_s": warm_wall,
            "warm_phases_s": report.wall, "timing_only_wall_s": timing_wall}


def sme_gemm(m: int = 512, k: int = 512, n: int = 512) -> dict:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    graph = matmul_graph(m, k, n, "fp32", b)
    report, wall, warm_wall, timing_cycles, timing_wall = runs(graph, "sme", mode="fp32",
                                                               inputs=[a])
    got = next(iter(report.outputs.values())).reshape(m, n).astype(np.float64)
    want = a[0].astype(np.float64) @ b.astype(np.float64)
    flops = 2 * m * k * n
    peak_flops = 2 * unit(report, "mx").peak_macs * report.clock_hz
    busy = report.result.stats["units"]["mx"]["busy"]
    row = {"target": "sme", "shape": [m, k, n], "dtype": "fp32", "cycles": report.cycles,
           "seconds": report.seconds, "gflops": flops / report.seconds / 1e9,
           "peak_gflops": peak_flops / 1e9,
           "percent_of_peak": 100 * flops / report.seconds / peak_flops,
           "mx_busy_percent": 100 * busy / report.cycles, "clock_hz": report.clock_hz,
           "max_rel_err": float(np.abs(got - want).max() / np.abs(want).max()),
           "timing_only_cycles": timing_cycles, "wall_s": wall, "warm_wall_s": warm_wall,
           "warm_phases_s": report.wall, "timing_only_wall_s": timing_wall}
    del report                  # one estimate in memory at a time
    checked = hwsim.estimate(graph, "sme", mode="fp32", inputs=[a], check=True)
    return {**row, "correct": checked.layers[0].verdict.status != "deviates",
            "verdict": str(checked.layers[0].verdict),
            "check_wall_s": sum(checked.wall.values())}


GEMMS = {"hmx": hmx_gemm, "sme": sme_gemm}


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="*", default=list(GEMMS))
    args = parser.parse_args(argv)
    rows = []
    for target in args.targets:
        _reset_peak()
        row = GEMMS[target]()
        row["peak_rss_mb"] = _peak_mb()
        rows.append(row)
        unit = "TFLOP/s" if "tflops" in row else "GFLOP/s"
        rate = row.get("tflops", row.get("gflops"))
        print(f"{target:4} {'x'.join(map(str, row['shape']))} {row['dtype']}: "
              f"{row['cycles']:,} cycles, {row['seconds'] * 1e6:.1f} us, {rate:.2f} {unit} "
              f"({row['percent_of_peak']:.1f}% of peak), correct={row['correct']}, "
              f"wall {row['warm_wall_s']:.2f} s warm ({row['wall_s']:.2f} s first; "
              + ", ".join(f"{k} {v:.2f}" for k, v in row["warm_phases_s"].items())
              + f"), peak {row['peak_rss_mb']:.0f} MB", flush=True)
    save_rows(RESULTS, rows, ("target",), "PYTHONPATH=. python benchmarks/bench_gemm.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
