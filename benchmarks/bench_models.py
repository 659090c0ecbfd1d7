"""How fast the scheduler estimates whole models, against the TOSA reference model's own speed.

    PYTHONPATH=. python benchmarks/bench_models.py [--repeat 5] [--targets gap9] [--modes ne16]
                                                  [--models resnet8_int8]

For each target with a scheduler and each model and numeric mode it supports (``CASES``: GAP9
the four int8 MLPerf Tiny models (``common.MODELS``) in its three modes; HMX the FP32 ones in its
FP16 mode and the four int8 ones in its dequantise mode; SME the int8 ones through SMOPA and
the FP32 ones in each float mode; else their synthetic look-alikes; ``--modes`` picks modes):

* ``warm_s``: wall time of ``estimate(..., check=True)`` (lower, simulate, attribute, judge every
  layer and the outputs) with the numba cache warm: the median of ``--repeat`` runs after one
  warm-up in this process, each on a fresh copy of the graph (so that every run is a first
  estimate of that graph: nothing a lowering keeps with a graph object is reused);
  ``phases_s`` splits it (``reference``: the time the check spent on the reference model's
  runs, its own and the waits for those of the reference worker, ``hwsim.tosa.background``;
  the worker is started, and waited for, before anything is measured, as it is up in any
  process from soon after its first check on);
* ``cold_s``: the same call in a fresh subprocess with an empty ``NUMBA_CACHE_DIR`` (numba
  compiles every kernel), and ``cold_process_s`` the whole subprocess (imports too);
* ``peak_mb``: the subprocess's peak resident memory (Linux ``VmHWM``; not ``ru_maxrss``,
  which a child inherits from the parent it was forked from), and ``worker_peak_mb`` that of
  its reference worker (0 without one);
* ``reference_s``: the official TOSA reference model running the same graph on the same input
  (``hwsim.tosa.reference.run_graph``), measured in the same process, each reference run
  right before an estimate run so that both see the same machine load; ``ratio`` is the median
  of the paired ratios estimate / reference (the aim is 2 or less);
* ``timing_only_s`` and ``numerics_speedup``: ``estimate`` without ``check`` with and without
  the datapaths (``numerics=False``), and their ratio.

``--conformance`` also runs tosa-tools' generated operator tests (positive tests of the
operators the lowering supports, small shapes; int8/int16/int32 for GAP9, fp16 for HMX, int8
and fp32 for SME)
through each target's system under test (``hwsim.tosa.sut``) and counts the verdicts.

Results are printed and saved in benchmarks/results/models.json: one row per (target, model,
mode); a run replaces the rows it measured and keeps the others. ``exact`` says whether every
layer was bit-exact, ``explained`` whether every layer was within the TOSA bound of its type or
of the machine's narrower compute type (HMX: FP16).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from hwsim.schedule import LOWERINGS, estimate, lowering  # noqa: E402
from hwsim.tosa import background, load_graph  # noqa: E402
from hwsim.tosa.ir import Graph, Operator, Tensor  # noqa: E402
from hwsim.tosa.models import model, sample_input  # noqa: E402
from hwsim.tosa.reference import run_graph  # noqa: E402
from hwsim.traces.files import atomic_write_text  # noqa: E402
from common import MLPERF_TINY, MODELS, median, provenance  # noqa: E402

# target -> (model file stem, synthetic stand-in, its dtype, numeric mode or None: the default)
CASES = {
    "gap9": [(name, synthetic, "int8", mode) for mode in ("exact", "ne16", "cluster")
             for name, synthetic in MLPERF_TINY.items()],
    "hmx": [("resnet8_fp32", "resnet8", "fp32", None), ("ad01_fp32", "autoencoder", "fp32", None),
            ("ds_cnn fp32", "ds_cnn", "fp32", None),
            ("mobilenet_v1 fp32", "mobilenet_v1", "fp32", None),
            *[(name, synthetic, "int8", "dequantise")
              for name, synthetic in MLPERF_TINY.items()]],
    "sme": [(name, synthetic, "int8", "int8") for name, synthetic in MLPERF_TINY.items()]
    + [(name, synthetic, "fp32", mode) for mode in ("fp32", "bf16-widening", "bf16")
       for name, synthetic in (("resnet8_fp32", "resnet8"), ("ad01_fp32", "autoencoder"),
                               ("ds_cnn fp32", "ds_cnn"))],
}
COLD = """
import sys, time
start = time.perf_counter()
from hwsim.schedule import estimate
from hwsim.tosa import load_graph
import numpy as np
graph = load_graph(sys.argv[1]) if sys.argv[1].endswith(".tflite") else None
if graph is None:
    from hwsim.tosa.models import model
    graph = model(sys.argv[1], dtype=sys.argv[5])
x = np.load(sys.argv[3])
t = time.perf_counter()
estimate(graph, sys.argv[2], mode=sys.argv[4] or None, check=True, inputs=x)
call = time.perf_counter() - t
from hwsim.tosa import background
def peak_kb(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
worker = background.worker_pid()
print(call, time.perf_counter() - start, peak_kb("self"), 0 if worker is None else peak_kb(worker))
"""


def cold(source: str, target: str, x: np.ndarray, mode: str | None, dtype: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="hwsim-bench-") as tmp:
        np.save(Path(tmp) / "x.npy", x)
        env = {**os.environ, "NUMBA_CACHE_DIR": str(Path(tmp) / "numba"),
               "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", COLD, source, target,
                              str(Path(tmp) / "x.npy"), mode or "", dtype],
                             capture_output=True, text=True, env=env, check=True)
    call, process, rss_kb, worker_kb = out.stdout.split()
    return {"cold_s": float(call), "cold_process_s": float(process),
            "peak_mb": int(rss_kb) / 1024, "worker_peak_mb": int(worker_kb) / 1024}


def explained(report) -> bool:
    """Every layer within its graph type's bound, or within its compute type's (HMX: FP16),
    or, where no compute-type bound applies (a dequantised layer whose int32 bias FP16 cannot
    hold), judged as the int8 model."""
    def ok(v) -> bool:
        if v.status != "deviates":
            return True
        return v.narrow.status != "deviates" if v.narrow is not None else \
            v.requantised is not None
    return all(ok(r.verdict) for r in report.layers)


def measure(name: str, source: str, graph, target: str, repeat: int, mode: str | None = None,
            dtype: str = "int8") -> dict:
    x = np.load(MODELS / "kws_sample_input.npy") if name == "kws_ref_model" else \
        sample_input(graph)
    run = dict(mode=mode, inputs=x)
    report = estimate(graph, target, check=True, **run)             # warm-up (numba cache)
    reference_graph = report_graph(graph, target, mode)
    run_graph(reference_graph, x)
    pairs, reports = [], []
    for _ in range(repeat):
        reference = median(lambda: run_graph(reference_graph, x), 1)
        warm = timed(graph, lambda g: reports.append(estimate(g, target, check=True, **run)))
        pairs.append((reference, warm))
    phases = {k: statistics.median(r.wall[k] for r in reports) for k in reports[0].wall}
    full = statistics.median(timed(graph, lambda g: estimate(g, target, **run))
                             for _ in range(repeat))
    timing = statistics.median(timed(graph, lambda g: estimate(g, target, numerics=False, **run))
                               for _ in range(repeat))
    exact = all(r.verdict.status == "exact" for r in report.layers)
    return {"target": target, "model": name, "mode": report.mode, "layers": len(report.layers),
            "operators": len(graph), "macs": graph.macs, "cycles": report.cycles,
            "simulated_ms": report.seconds * 1e3, "bit_exact": exact,
            "explained": explained(report),
            "reference_s": statistics.median(r for r, _ in pairs),
            "warm_s": statistics.median(w for _, w in pairs),
            "ratio": statistics.median(w / r for r, w in pairs),
            "phases_s": phases, **cold(source, target, x, mode, dtype), "full_s": full,
            "timing_only_s": timing, "numerics_speedup": full / timing}


def timed(graph, fn) -> float:
    """Wall time of ``fn`` on a fresh copy of ``graph`` (made before the clock starts): each
    estimate is a first one, so nothing kept with a graph between estimates is measured."""
    fresh = _copy(graph)
    start = time.perf_counter()
    fn(fresh)
    return time.perf_counter() - start


def _copy(graph: Graph) -> Graph:
    """The same graph made of new tensors (constants' data copied) and operators."""
    made: dict = {}

    def tensor(t: Tensor) -> Tensor:
        if t.name not in made:
            made[t.name] = Tensor(t.name, t.shape, t.dtype,
                                  None if t.data is None else t.data.copy())
        return made[t.name]

    ops = [Operator(op.op, [tensor(t) for t in op.inputs], [tensor(t) for t in op.outputs],
                    dict(op.attrs), op.name) for op in graph]
    return Graph(ops, [tensor(t) for t in graph.inputs], [tensor(t) for t in graph.outputs],
                 graph.name, graph.version)


def report_graph(graph, target: str, mode: str | None):
    """The graph the target actually runs (after its rewrite, e.g. HMX dequantise)."""
    low = lowering(target)
    return low.rewrite(graph, low.options(mode or low.default_mode(graph))).graph


def cases(target: str) -> list:
    """(name, source, graph, mode, dtype) of the models a target runs: the real files when
    ``common.MODELS`` has them, else the synthetic look-alikes."""
    out = []
    for stem, synthetic, dtype, mode in CASES.get(target, []):
        path = MODELS / f"{stem}.tflite"
        if path.exists():
            out.append((stem, str(path), load_graph(path), mode, dtype))
        else:
            out.append((f"synthetic {synthetic} {dtype}", synthetic, model(synthetic, dtype=dtype),
                        mode, dtype))
    return out


CONFORMANCE = [
    ["^conv2d$", "1,6,5,4"], ["^depthwise_conv2d$", "1,5,6,3"], ["^matmul$", "1,4,6"],
    ["^(avg_pool2d|max_pool2d)$", "1,6,6,3"],
    ["^(add|sub|mul|rescale|clamp|table|clz|cast|arithmetic_right_shift|logical_left_shift|"
     "maximum|minimum)$", "1,3,4,3"],
    ["^(reduce_sum|reduce_max|reshape|transpose|concat|pad|slice)$", "1,3,4,3"],
]


DTYPES = {"gap9": ["int8", "int16", "int32"], "hmx": ["fp16"],   # HMX computes in FP16
          "sme": ["int8", "fp32"]}


def conformance(target: str) -> dict:
    """Generate the CONFORMANCE operator tests and run them on ``target``: verdict counts, and
    the failures split into tests the lowering rejects (unsupported types or shapes: the
    ScheduleError the SUT reports) and wrong results, and the tests whose run crashed."""
    import contextlib
    import io
    import re
    from generator.tosa_verif_build_tests import main as build
    from runner.tosa_verif_run_tests import main as run
    from hwsim.errors import ScheduleError
    low = lowering(target)
    with tempfile.TemporaryDirectory(prefix="hwsim-conf-") as tmp:
        for pattern, shape in CONFORMANCE:
            with contextlib.redirect_stdout(io.StringIO()):
                build(["-o", tmp, "--tosa-version", "1.0", "--seed", "0",
                       "--no-special-tests", "--num-rand-permutations", "1", "--test-type",
                       "positive", "--filter", pattern, "--target-shape", shape,
                       "--target-dtype", *DTYPES.get(target, ["int8", "int16", "int32"])])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            run(["-t", tmp, "-r", "--no-color", "--xunit-file", f"{tmp}/r.xml",
                 "--sut-module", "hwsim.tosa.sut", "--sut-module-args",
                 f"hwsim.tosa.sut:target={target}"])
        text = out.getvalue()
        rejected, wrong = [], []
        for path in re.findall(r"UNEXPECTED_FAILURE (\S+)", text):
            graph = load_graph(next(Path(path).glob("*.tosa")))
            try:
                low.layers(graph, low.options(low.default_mode(graph)))
                wrong.append(Path(path).name)
            except ScheduleError as exc:
                rejected.append(f"{Path(path).name}: {exc}")
        crashed = [Path(path).name for path in re.findall(r"INTERNAL_ERROR (\S+)", text)]
    totals = re.search(r"Totals \(hwsim\.tosa\.sut\): (.*)", text).group(1)
    return {"target": target, **{k: int(n) for n, k in re.findall(r"(\d+) (\w+)", totals)},
            "rejected": len(rejected), "wrong": wrong, "crashed": crashed,
            "rejected_examples": sorted({r.split(": ", 1)[1] for r in rejected})}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--targets", nargs="*", default=list(LOWERINGS))
    parser.add_argument("--modes", nargs="*", help="only these numeric modes (default: all)")
    parser.add_argument("--models", nargs="*", help="only these models (default: all)")
    parser.add_argument("--conformance", action="store_true",
                        help="also run generated TOSA operator tests on each target")
    args = parser.parse_args(argv)
    background.start(wait=60)
    rows = []
    for target in args.targets:
        for name, source, graph, mode, dtype in cases(target):
            if args.modes and (mode or lowering(target).default_mode(graph)) not in args.modes:
                continue
            if args.models and name not in args.models:
                continue
            row = measure(name, source, graph, target, args.repeat, mode, dtype)
            rows.append(row)
            print(f"{target:5} {name:18} {row['mode']:10} ref {row['reference_s'] * 1e3:6.1f} "
                  f"ms  warm {row['warm_s'] * 1e3:7.1f} ms ({row['ratio']:4.1f}x)  cold "
                  f"{row['cold_s']:5.2f} s  peak {row['peak_mb']:5.0f} MB  timing-only "
                  f"x{row['numerics_speedup']:.2f}  {row['cycles']:,} cycles  "
                  f"exact={row['bit_exact']} explained={row['explained']}", flush=True)
    out = ROOT / "benchmarks" / "results" / "models.json"
    result = json.loads(out.read_text()) if out.exists() else {}
    measured = {(r["target"], r["model"], r["mode"]) for r in rows}
    kept = [r for r in result.get("rows", [])
            if (r["target"], r["model"], r["mode"]) not in measured]
    made = provenance()
    result.update(command="PYTHONPATH=. python benchmarks/bench_models.py",
                  rows=kept + [{**row, **made} for row in rows])
    if args.conformance:
        done = [conformance(target) for target in args.targets]
        result["conformance"] = [c for c in result.get("conformance", [])
                                 if c["target"] not in args.targets] + done
        for c in done:
            print(f"{c['target']} conformance: {c.get('expected_pass', 0)} pass, "
                  f"{c['rejected']} rejected by the lowering (unsupported), "
                  f"{len(c['wrong'])} wrong, {len(c['crashed'])} crashed, "
                  f"{c.get('skipped', 0)} skipped")
            for kind in ("wrong", "crashed"):
                for name in c[kind]:
                    print(f"  {kind}:", name)
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
