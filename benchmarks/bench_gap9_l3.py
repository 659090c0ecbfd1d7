"""MobileNetV1 224x224 x1.0 on GAP9 with its large weights in external memory (L3): cycles,
bytes per memory level and how long the estimate takes.

    PYTHONPATH=. python benchmarks/bench_gap9_l3.py [--repeat 2] [--modes exact ne16]

The model is the synthetic look-alike (``hwsim.tosa.models.model("mobilenet_v1", width=1.0,
resolution=224)``); 3.26 MB of constants against 2 MB of MRAM, so the plan stages some in L3
(docs/gap9-memory.md). For each numeric mode: ``cycles`` and ``levels`` (bytes per memory
level), ``cycles_big_mram`` (the same with a 4 MB MRAM, to show what L3 costs), and the wall
time of ``estimate`` three ways, each the median of ``--repeat`` runs after one warm-up:
``timing_only_s`` (``numerics=False``), ``numerics_s`` and ``check_s`` (``check=True``, every
layer judged against the TOSA reference model), with the phases of the last.

Results are printed and saved in benchmarks/results/gap9_l3.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hwsim.schedule import estimate  # noqa: E402
from hwsim.tosa.models import model  # noqa: E402
from hwsim.traces.files import atomic_write_text  # noqa: E402
from common import median  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "gap9_l3.json"
VARIANTS = {"timing_only_s": {"numerics": False}, "numerics_s": {}, "check_s": {"check": True}}


def measure(graph, mode: str, repeat: int) -> dict:
    report = estimate(graph, "gap9", mode=mode, numerics=False)         # warm-up
    big = estimate(graph, "gap9", mode=mode, numerics=False, params={"mram_size": 4 << 20})
    row = {"mode": mode, "cycles": report.cycles, "cycles_big_mram": big.cycles,
           "levels": {k: v["bytes"] for k, v in report.totals["levels"].items()},
           "l3_layers": [r.index for r in report.layers if r.bytes["L3"]]}
    for key, options in VARIANTS.items():
        last = {}

        def run(options=options):
            last["report"] = estimate(graph, "gap9", mode=mode, **options)
        row[key] = round(median(run, repeat), 2)
    row["check_phases_s"] = {k: round(v, 2) for k, v in last["report"].wall.items()}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--modes", nargs="+", default=["exact", "ne16"])
    args = parser.parse_args()
    graph = model("mobilenet_v1", width=1.0, resolution=224)
    rows = [measure(graph, mode, args.repeat) for mode in args.modes]
    for r in rows:
        print(f"{r['mode']:>6}: {r['cycles']:,} cycles ({r['cycles_big_mram']:,} with 4 MB MRAM),"
              f" L3 layers {r['l3_layers']}, bytes {r['levels']}; estimate {r['timing_only_s']} s"
              f" timing only, {r['numerics_s']} s with numerics, {r['check_s']} s checked")
    atomic_write_text(RESULTS, json.dumps({"rows": rows, "note": "2-core machine shared with "
                                           "other work: wall times are rough"}, indent=1) + "\n")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
