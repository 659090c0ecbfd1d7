"""How long the TOSA reference model takes on the MLPerf Tiny models (the baseline the
schedulers' simulation speed is compared with), and an optional conformance sweep.

    PYTHONPATH=. python benchmarks/bench_tosa.py [--repeat 20] [--conformance]

For each of the four int8 MLPerf Tiny models (``common.MODELS``, skipped when absent) and each
synthetic look-alike (``hwsim.tosa.models``): the import time (.tflite -> validated graph), the
whole-graph reference run in-process (median of ``--repeat``), the same run isolated in a
subprocess (the binary, as the conformance SUT uses it), one-operator goldens for every layer,
MACs and MAC/s. ``--conformance`` also generates TOSA 1.0 operator tests for every operator the
IR checks with tosa_verif_build_tests and runs them through ``hwsim.tosa.sut`` (reference target)
with tosa_verif_run_tests, and counts how many negative (ERROR_IF) tests the IR itself rejects;
this takes tens of minutes. Results: printed, and saved in benchmarks/results/tosa.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hwsim.errors import TosaError  # noqa: E402
from hwsim.tosa import load_graph  # noqa: E402
from hwsim.tosa.models import model, sample_input  # noqa: E402
from hwsim.tosa.ops import checked_ops  # noqa: E402
from hwsim.tosa.reference import goldens, run_graph, run_operator  # noqa: E402
from hwsim.traces.files import atomic_write_text  # noqa: E402
from common import MLPERF_TINY, MODELS, median, provenance  # noqa: E402

# TOSA 1.0 extensions (the generator also makes 1.1-draft int64 and microscaling tests)
EXTENSIONS_1_0 = ("int16", "int4", "bf16", "fp8e4m3", "fp8e5m2", "doubleround", "inexactround")


def measure(name: str, graph, x, repeat: int, import_s: float | None) -> dict:
    whole = median(lambda: run_graph(graph, x), repeat)
    isolated = median(lambda: run_graph(graph, x, isolated=True), max(3, repeat // 5))
    values = goldens(graph, x)
    per_layer = median(lambda: [run_operator(graph, op, values) for op in graph], 3)
    return {"model": name, "operators": len(graph), "macs": graph.macs,
            "param_bytes": graph.param_bytes, "import_s": import_s, "reference_s": whole,
            "reference_isolated_s": isolated, "per_layer_goldens_s": per_layer,
            "reference_mac_per_s": graph.macs / whole}


def models(repeat: int) -> list[dict]:
    rows = []
    for stem, synthetic in MLPERF_TINY.items():
        path = MODELS / f"{stem}.tflite"
        if path.exists():
            start = time.perf_counter()
            graph = load_graph(path)
            rows.append(measure(stem, graph, sample_input(graph), repeat,
                                time.perf_counter() - start))
        graph = model(synthetic)
        rows.append(measure(f"synthetic {synthetic}", graph, sample_input(graph), repeat, None))
    return rows


def conformance(folder: Path) -> dict:
    """Generate TOSA 1.0 tests of the checked operators; run them through hwsim's SUT."""
    ops = "|".join(op.lower() for op in checked_ops())
    common = [sys.executable, "-m", "generator.tosa_verif_build_tests", "--tosa-version", "1.0",
              "--seed", "1", "--num-rand-permutations", "1", "--no-special-tests",
              "--extension"] + [f"tosa-ext-{e}" for e in EXTENSIONS_1_0]
    subprocess.run(common + ["-o", str(folder / "pos"), "--filter", f"^({ops})$",
                             "--test-type", "positive", "--tensor-dim-range", "1,6",
                             "--max-conv-padding", "1", "--max-conv-stride", "2",
                             "--max-conv-dilation", "1", "--max-pooling-padding", "1",
                             "--max-pooling-stride", "2", "--max-pooling-kernel", "3"],
                   check=True, capture_output=True)
    subprocess.run(common + ["-o", str(folder / "neg"), "--filter",
                             "^(conv2d|rescale|clamp|avg_pool2d)$", "--target-dtype", "int8",
                             "--test-type", "negative", "--profile", "tosa-pro-int"],
                   check=True, capture_output=True)
    run = subprocess.run([sys.executable, "-m", "runner.tosa_verif_run_tests", "-t",
                          str(folder / "pos"), "-r", "--no-color", "-j", "2", "--xunit-file",
                          str(folder / "result.xml"), "--sut-module", "hwsim.tosa.sut"],
                         capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    totals = re.search(r"Totals \(hwsim\.tosa\.sut\): (.*)", run.stdout).group(1)
    rejected = total = 0
    for desc in sorted((folder / "neg").rglob("desc.json")):
        total += 1
        try:
            load_graph(desc.parent / json.loads(desc.read_text())["tosa_file"])
        except TosaError:
            rejected += 1
    return {"positive_through_sut": totals, "negative_tests": total,
            "negative_rejected_by_ir": rejected}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--conformance", action="store_true")
    args = parser.parse_args()
    rows = models(args.repeat)
    print(f"{'model':<26} {'ops':>4} {'MACs':>11} {'import':>8} {'reference':>10} "
          f"{'isolated':>9} {'goldens':>9} {'MAC/s':>9}")
    for r in rows:
        imported = f"{r['import_s'] * 1e3:.0f} ms" if r["import_s"] else "-"
        print(f"{r['model']:<26} {r['operators']:>4} {r['macs']:>11,} {imported:>8} "
              f"{r['reference_s'] * 1e3:>7.1f} ms {r['reference_isolated_s'] * 1e3:>6.0f} ms "
              f"{r['per_layer_goldens_s'] * 1e3:>6.0f} ms {r['reference_mac_per_s']:>9.2e}")
    result = {**provenance(), "models": rows}
    if args.conformance:
        with tempfile.TemporaryDirectory(prefix="hwsim-conformance-") as tmp:
            result["conformance"] = conformance(Path(tmp))
        print(json.dumps(result["conformance"], indent=1))
    atomic_write_text(ROOT / "benchmarks" / "results" / "tosa.json",
                      json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
