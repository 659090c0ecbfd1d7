"""hwsim's GAP9 cycles against GVSoC's, layer by layer (the calibration set).

    PYTHONPATH=. python benchmarks/bench_calibration.py [--sets resnet8 kws]

The calibration set is the GreenWaves MLPerf Tiny v1.0 submission's GVSoC per-layer cycle
counts (docs/gap9-calibration.md has the rows and their source): ResNet-8 in software int8 on
the 8 cluster cores, compared with hwsim's ``cluster`` mode, and KWS (DS-CNN) on NE16 with 8-bit
weights, compared with hwsim's ``ne16`` mode. Each GVSoC row is matched to hwsim's layers of the
real model (``common.MODELS``) by its operators, output shape and MACs (``SETS``); layers that
only move data for the next one (a SLICE that trims a stride-2 convolution's input, a RESHAPE)
count towards that next row, and a SoftMax row is every layer from the first one of the TOSA
softmax sequence on (the converter writes it as 14 small operator chains).

Rows in the acceptance (convolution, depthwise, pointwise, pooling, linear) have ``target``
true; the others (MatAdd, SoftMax, KWS's first layer, a generic fallback in that build) are
shown with their error but not judged. The error is ``hwsim / GVSoC - 1``; where GVSoC gives a
range for four equal layers, the reference is its midpoint. hwsim runs with its defaults
except ``l1_residency = "none"`` (``BUILD``): like the GVSoC builds, every activation lives in
L2 and each layer moves it through L1 by DMA. Printed as a table and saved in
benchmarks/results/calibration.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hwsim.schedule import estimate  # noqa: E402
from hwsim.traces.files import atomic_write_text  # noqa: E402
from common import MODELS  # noqa: E402

RESULT = ROOT / "benchmarks" / "results" / "calibration.json"
BUILD = {"l1_residency": "none"}    # the GVSoC builds keep activations in L2 (no L1 promotion)
MOVERS = ("SLICE", "PAD", "RESHAPE", "TRANSPOSE")


def conv(label, cycles, shape, macs, relu, target=True):
    """A row matched by a matrix layer's output shape, MACs and whether it ends in a CLAMP."""
    return {"label": label, "gvsoc": cycles, "target": target,
            "match": lambda r: (r.kind.split("+")[0] in ("CONV2D", "DEPTHWISE_CONV2D")
                                and r.shape == shape and r.macs == macs
                                and r.kind.endswith("CLAMP") == relu)}


def kind(label, cycles, head, shape, target):
    """A row matched by the first operator of the layer and its output shape."""
    return {"label": label, "gvsoc": cycles, "target": target,
            "match": lambda r: r.kind.split("+")[0] == head and r.shape == shape}


def add(label, cycles, shape):
    return {"label": label, "gvsoc": cycles, "target": False,
            "match": lambda r: "ADD" in r.kind.split("+") and r.shape == shape
            and r.kind.startswith("RESCALE")}


SOFTMAX = {"label": "SoftMax", "target": False, "match": None}

SETS = {
    "resnet8": {
        "model": "resnet8_int8.tflite", "mode": "cluster", "gvsoc_total": 2066826,
        "rows": [
            conv("Conv2d+ReLU 16x3x3x3 s1 32x32", 86705, (1, 32, 32, 16), 442368, True),
            conv("Conv2d+ReLU 16x16x3x3 s1 32x32", 308171, (1, 32, 32, 16), 2359296, True),
            conv("Conv2d 16x16x3x3 s1 32x32", 300020, (1, 32, 32, 16), 2359296, False),
            add("MatAdd+ReLU 16x32x32", 31145, (1, 32, 32, 16)),
            conv("Conv2d+ReLU 32x16x3x3 s2 16x16", 194987, (1, 16, 16, 32), 1179648, True),
            conv("Conv2d 32x32x3x3 s1 16x16", 320342, (1, 16, 16, 32), 2359296, False),
            conv("Conv2d 32x16x1x1 s2 16x16", 70948, (1, 16, 16, 32), 131072, False),
            add("MatAdd+ReLU 32x16x16", 16206, (1, 16, 16, 32)),
            conv("Conv2d+ReLU 64x32x3x3 s2 8x8", 249510, (1, 8, 8, 64), 1179648, True),
            conv("Conv2d 64x64x3x3 s1 8x8", 432464, (1, 8, 8, 64), 2359296, False),
            conv("Conv2d 64x32x1x1 s2 8x8", 38222, (1, 8, 8, 64), 131072, False),
            add("MatAdd+ReLU 64x8x8", 8688, (1, 8, 8, 64)),
            kind("AveragePool 8x8 64 ch", 5063, "AVG_POOL2D", (1, 1, 1, 64), True),
            conv("Linear 10x64", 2350, (1, 1, 1, 10), 640, False),
            dict(SOFTMAX, gvsoc=2005),
        ]},
    "kws": {
        "model": "kws_ref_model.tflite", "mode": "ne16", "gvsoc_total": 558884,
        "rows": [
            conv("Conv2d+ReLU 64x1x10x4 s2 (fallback; not a target)", 412289, (1, 25, 5, 64),
                 320000, True, target=False),
            *[row for _ in range(4) for row in (
                conv("depthwise 3x3+ReLU 64 ch 25x5", (18747 + 19441) / 2, (1, 25, 5, 64),
                     72000, True),
                conv("pointwise 1x1+ReLU 64->64 25x5", (15089 + 15653) / 2, (1, 25, 5, 64),
                     512000, True))],
            kind("AveragePool 25x5 64 ch", 4657, "AVG_POOL2D", (1, 1, 1, 64), True),
            conv("Linear 12x64", 2820, (1, 1, 1, 12), 768, False),
            dict(SOFTMAX, gvsoc=2025),
        ]},
}


def match(rows: list, layers: list) -> list:
    """hwsim's cycles and layer indices per row, in row order; raises when a row finds no
    layer or a layer no row (the model is not the one the set describes)."""
    found, pending = {}, []
    softmax_from = None
    for layer in layers:
        head = layer.kind.split("+")[0]
        if softmax_from is not None:
            found.setdefault(len(rows) - 1, []).append(layer)
            continue
        if head in MOVERS:
            pending.append(layer)
            continue
        n = next((i for i, row in enumerate(rows) if i not in found and row["match"] is not None
                  and row["match"](layer)), None)
        if n is None:
            if rows[-1]["match"] is None and layer.kind.startswith("RESCALE"):
                softmax_from = layer.index
                found[len(rows) - 1] = pending + [layer]
                pending = []
                continue
            raise SystemExit(f"layer {layer.index} ({layer.kind} {layer.shape}) matches no "
                             f"calibration row")
        found[n] = pending + [layer]
        pending = []
    missing = [rows[i]["label"] for i in range(len(rows)) if i not in found]
    if missing:
        raise SystemExit(f"calibration rows without a layer: {', '.join(missing)}")
    return [(sum(r.cycles for r in found[i]), [r.index for r in found[i]])
            for i in range(len(rows))]


def run_set(name: str) -> dict:
    spec = SETS[name]
    path = MODELS / spec["model"]
    if not path.exists():
        raise SystemExit(f"{path}: not found (set HWSIM_MODELS to the MLPerf Tiny models)")
    report = estimate(path, "gap9", mode=spec["mode"], params=BUILD, numerics=False)
    rows = []
    for row, (cycles, indices) in zip(spec["rows"], match(spec["rows"], report.layers)):
        rows.append({"label": row["label"], "gvsoc": row["gvsoc"], "hwsim": round(cycles),
                     "error": cycles / row["gvsoc"] - 1, "target": row["target"],
                     "layers": indices})
    errors = [abs(r["error"]) for r in rows if r["target"]]
    return {"model": spec["model"], "mode": spec["mode"], "rows": rows,
            "gvsoc_total": spec["gvsoc_total"], "hwsim_total": report.cycles,
            "total_error": report.cycles / spec["gvsoc_total"] - 1,
            "median_abs_error": statistics.median(errors), "max_abs_error": max(errors),
            "accepted": statistics.median(errors) <= 0.15 and max(errors) <= 0.30}


def table(name: str, result: dict) -> str:
    lines = [f"{name}: {result['model']} in {result['mode']} mode",
             f"  {'layer':<52} {'GVSoC':>9} {'hwsim':>9} {'error':>7}  hwsim layers"]
    for r in result["rows"]:
        mark = "" if r["target"] else " (not judged)"
        lines.append(f"  {r['label'][:52]:<52} {r['gvsoc']:>9,.0f} {r['hwsim']:>9,} "
                     f"{100 * r['error']:>+6.1f}%  {','.join(map(str, r['layers']))}{mark}")
    lines.append(f"  {'total':<52} {result['gvsoc_total']:>9,} {result['hwsim_total']:>9,} "
                 f"{100 * result['total_error']:>+6.1f}%")
    lines.append(f"  judged rows: median |error| {100 * result['median_abs_error']:.1f}%, "
                 f"max {100 * result['max_abs_error']:.1f}% "
                 f"({'within' if result['accepted'] else 'outside'} 15% / 30%)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", nargs="+", choices=sorted(SETS), default=sorted(SETS))
    args = ap.parse_args()
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    saved = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    for name in args.sets:
        saved[name] = run_set(name)
        print(table(name, saved[name]))
    atomic_write_text(RESULT, json.dumps(saved, indent=1) + "\n")
    print(f"saved {RESULT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
