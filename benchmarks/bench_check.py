"""Where the time of ``estimate(..., check=True)``'s check phase goes, against the reference model.

    PYTHONPATH=. python benchmarks/bench_check.py [--repeat 5] [--targets hmx] [--models NAME ...]

For each case (``CASES``: the MLPerf Tiny models in ../shared/models on each target and mode
whose check differs in kind, and a 76 M-MAC ResNet-8 look-alike, width 2.5, on HMX), the model is
lowered and simulated once; then, as medians of ``--repeat`` runs on those simulated values:

* ``reference_s``: the official TOSA reference model on the whole graph and input (the
  baseline of ``bench_models.py``);
* ``check_s``: the check phase (``hwsim.schedule.check.check``; with no reference worker, so
  that every run of the reference model is in this process, ``hwsim.tosa.background``), and
  ``runs`` / ``runs_s``: the reference model runs inside it (the whole graph with every tensor
  an output, the layers whose inputs differ, a narrower type's goldens, BF16 goldens, the
  integer model's) and their time;
* ``fp64_s`` and ``precise_s``: the fp64 references and bounds of the first operator of every
  float layer on its simulated inputs, in-process (``hwsim.tosa.fp64.references``) and from one
  run of the reference model binary in precise mode (what the check ran before, kept as the
  tests' oracle); ``fp64_max_rel`` is their largest difference relative to the bound.

The machine these run on is shared: compare the figures of one run. Results are printed and
saved in benchmarks/results/check.json (a run replaces the rows it measured).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# the check's reference runs, counted and timed here, all in this process
os.environ["HWSIM_REFERENCE_WORKER"] = "0"

import numpy as np  # noqa: E402

import hwsim.schedule.check as check_module  # noqa: E402
import hwsim.tosa.reference as reference  # noqa: E402
from hwsim.schedule import _feeds, prepare  # noqa: E402
from hwsim.schedule.run import simulate  # noqa: E402
from hwsim.tosa import fp64, load_graph  # noqa: E402
from hwsim.tosa.models import model, sample_input  # noqa: E402
from common import MODELS, save_rows  # noqa: E402

BIG = "resnet8 fp32 width 2.5"
CASES = [("resnet8_fp32", "hmx", None), ("ad01_fp32", "hmx", None), (BIG, "hmx", None),
         ("resnet8_int8", "hmx", "dequantise"), ("kws_ref_model", "gap9", "exact"),
         ("resnet8_int8", "gap9", "exact"), ("resnet8_int8", "gap9", "ne16"),
         ("vww_96_int8", "sme", "int8"), ("resnet8_fp32", "sme", "fp32"),
         ("resnet8_fp32", "sme", "bf16")]


def median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class Runs:
    """Counts the reference model's in-process runs and their time."""

    def __init__(self):
        self.real = reference.run_graph
        self.times: list[float] = []

    def __enter__(self):
        def counted(*args, **kwargs):
            start = time.perf_counter()
            try:
                return self.real(*args, **kwargs)
            finally:
                self.times.append(time.perf_counter() - start)
        reference.run_graph = check_module.run_graph = counted
        return self

    def __exit__(self, *exc):
        reference.run_graph = check_module.run_graph = self.real


def measure(name: str, target: str, mode: str | None, repeat: int) -> dict:
    source = model("resnet8", dtype="fp32", width=2.5) if name == BIG else \
        load_graph(MODELS / f"{name}.tflite")
    graph, _, low, options, machine, params, layers, lowered = prepare(source, target, mode)
    feeds = _feeds(lowered.rewritten, sample_input(source))
    sim = simulate(lowered, machine, feeds, params, True, None, None)

    def check():
        return check_module.check(graph, layers, sim.values, sim.outputs, feeds, low, options,
                                  lowered.rewritten)

    check()                                                   # warm-up
    with Runs() as runs:
        check()
    producer = {layer.output.name: layer.index for layer in layers}
    items = [(layer.ops[0], {t.name: sim.values[producer[t.name]] if t.name in producer
                             else feeds[t.name] for t in layer.inputs})
             for layer in layers if layer.output.dtype.is_float]
    row = {"target": target, "model": name, "mode": options.mode, "layers": len(layers),
           "macs": graph.macs,
           "reference_s": median(lambda: reference.run_graph(
               graph, [feeds[t.name] for t in graph.inputs]), repeat),
           "check_s": median(check, repeat), "runs": len(runs.times),
           "runs_s": sum(runs.times), "fp64_s": None, "precise_s": None, "fp64_max_rel": None}
    if items:
        ours = fp64.references(items)
        theirs = fp64.from_binary(items)
        row.update(fp64_s=median(lambda: fp64.references(items), repeat),
                   precise_s=median(lambda: fp64.from_binary(items), max(1, repeat // 2)),
                   fp64_max_rel=max(_difference(a, b) for a, b in zip(ours, theirs)))
    return row


def _difference(ours, theirs) -> float:
    """The largest |difference| of reference and bound, relative to the binary's bound."""
    (ref, bnd), (ref_b, bnd_b) = ours, theirs
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(np.stack([ref - ref_b, bnd - bnd_b])) / bnd_b
    return float(np.nanmax(np.where(np.isfinite(rel), rel, 0.0), initial=0.0))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--targets", nargs="*", help="only these targets (default: all)")
    parser.add_argument("--models", nargs="*", help="only these models (default: all)")
    args = parser.parse_args(argv)
    rows = []
    for name, target, mode in CASES:
        if (args.targets and target not in args.targets) or (args.models and
                                                            name not in args.models):
            continue
        if name != BIG and not (MODELS / f"{name}.tflite").exists():
            print(f"skipped {name}: not in {MODELS}")
            continue
        row = measure(name, target, mode, args.repeat)
        rows.append(row)
        fp64_text = "" if row["fp64_s"] is None else (
            f"  fp64 {row['fp64_s'] * 1e3:6.1f} ms vs precise {row['precise_s'] * 1e3:7.1f} ms "
            f"(max rel {row['fp64_max_rel']:.1e})")
        print(f"{target:5} {name:22} {row['mode']:10} ref {row['reference_s'] * 1e3:6.1f} ms  "
              f"check {row['check_s'] * 1e3:7.1f} ms ({row['check_s'] / row['reference_s']:4.1f}x"
              f"; {row['runs']} reference runs {row['runs_s'] * 1e3:6.1f} ms){fp64_text}",
              flush=True)
    out = ROOT / "benchmarks" / "results" / "check.json"
    save_rows(out, rows, ("target", "model", "mode"),
              "PYTHONPATH=. python benchmarks/bench_check.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
