"""The per-layer verdicts of ``estimate(..., check=True)`` on the MLPerf Tiny models, recorded.

``CASES`` lists (target, model file, numeric mode): GAP9 in both modes on the int8 models, HMX
on the FP32 models and on the int8 ones dequantised, SME on the int8 models and on the
FP32 ones in each float mode. ``record`` runs one case and returns every layer's and graph
output's ``Verdict`` as plain data; ``tests/data/check_verdicts.json`` holds them as the check
computed them with the reference model's precise mode in a subprocess (before the fp64
references moved in-process), and ``test_check_verdicts`` compares a run with it.

    python -m tests.check_verdicts       # rewrite tests/data/check_verdicts.json
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

FIXTURE = Path(__file__).parent / "data" / "check_verdicts.json"
INT8 = ("kws_ref_model", "vww_96_int8", "resnet8_int8", "ad01_int8")
FP32 = ("resnet8_fp32", "ad01_fp32")
CASES = ([("gap9", name, mode) for mode in ("exact", "ne16") for name in INT8]
         + [("hmx", name, None) for name in FP32]
         + [("hmx", name, "dequantise") for name in INT8]
         + [("sme", name, "int8") for name in INT8]
         + [("sme", name, mode) for mode in ("fp32", "bf16-widening", "bf16") for name in FP32])


def key(target: str, name: str, mode: str | None) -> str:
    return f"{target}/{name}/{mode or 'default'}"


def record(path, target: str, mode: str | None) -> dict:
    """The verdicts of one checked estimate: {"layers": {index: verdict}, "outputs": {...}}."""
    from hwsim.schedule import estimate
    report = estimate(str(path), target, mode=mode, check=True)
    return {"layers": {str(row.index): asdict(row.verdict) for row in report.layers},
            "outputs": {name: asdict(v) for name, v in report.output_verdicts.items()}}


def main() -> int:
    from tests.models import MODELS
    found = {}
    for target, name, mode in CASES:
        print(key(target, name, mode), flush=True)
        found[key(target, name, mode)] = record(MODELS / f"{name}.tflite", target, mode)
    FIXTURE.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
