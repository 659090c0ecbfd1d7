"""The measured figures of ``benchmarks/results/*.json`` as Markdown tables for the docs site.

A page asks for a table with a marker line, ``<!-- results: NAME -->``; this module replaces it
with the table built from the JSON as it is when the site is built, so the figures on the site
are always the last ones measured (``mkdocs.yml`` lists this module as a hook; ``render`` also
works without MkDocs). An unknown name or a missing file fails the build with the page's name.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
MARKER = re.compile(r"^<!-- results: ([\w-]+) -->$", re.M)


def _load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


# -- number formats ----------------------------------------------------------------------------

def _int(value) -> str:
    return f"{int(value):,}"


def _sig(value, digits: int = 3) -> str:
    """A number to ``digits`` significant figures (whole when larger), thousands separated."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def _seconds(value) -> str:
    """Seconds in the unit that reads best (s, ms or us)."""
    if value is None:
        return "-"
    if value >= 1:
        return f"{_sig(value)} s"
    if value >= 1e-3:
        return f"{_sig(value * 1e3)} ms"
    return f"{_sig(value * 1e6)} us"


def _rate(value) -> str:
    """A per-second figure as a multiple of 1e3, 1e6 or 1e9."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{_sig(value / scale)} {suffix}"
    return _sig(value)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# -- the tables --------------------------------------------------------------------------------

def _model_rows(target: str) -> list[dict]:
    return [r for r in _load("models")["rows"] if r["target"] == target]


def models(target: str) -> str:
    """Cycles, simulated time and the check of every model row of one target."""
    rows = [[r["model"], r["mode"], f"{r['macs'] / 1e6:.2f} M", _int(r["cycles"]),
             _seconds(r["simulated_ms"] / 1e3), str(r["layers"]),
             "yes" if r["bit_exact"] else "no"]
            for r in _model_rows(target)]
    return _table(["model", "mode", "MACs", "cycles", "simulated time", "layers",
                   "bit-exact"], rows)


def models_speed(target: str) -> str:
    """How long ``hwsim estimate --check`` takes per model, and where the time goes."""
    rows = []
    for r in _model_rows(target):
        phases = r["phases_s"]
        split = " / ".join(_seconds(phases[k]) if k in phases else "-"
                           for k in ("lower", "simulate", "attribute", "check", "reference"))
        rows.append([r["model"], r["mode"], _seconds(r["reference_s"]), _seconds(r["warm_s"]),
                     f"{r['ratio']:.1f}x", split, _seconds(r["cold_s"]),
                     f"{r['peak_mb']:.0f} MB" + (f" + {r['worker_peak_mb']:.0f} MB"
                                                 if r.get("worker_peak_mb") else ""),
                     f"{r['numerics_speedup']:.2f}x"])
    return _table(["model", "mode", "reference model", "estimate --check (warm)", "ratio",
                   "lower / simulate / attribute / check / reference model",
                   "cold (empty numba cache)",
                   "peak RSS (+ reference worker)", "timing-only speed-up"], rows)


def conformance() -> str:
    rows = [[c["target"], _int(c["expected_pass"]), _int(len(c["wrong"])),
             _int(c["rejected"]), _int(c["skipped"]), _int(c["internal_error"])]
            for c in _load("models")["conformance"]]
    return _table(["target", "pass", "wrong result", "rejected before simulation", "skipped",
                   "internal errors"], rows)


def gemm() -> str:
    rows = []
    for r in _load("gemm")["rows"]:
        unit = "tflops" if "tflops" in r else "gflops"
        scale = "TFLOP/s" if unit == "tflops" else "GFLOP/s"
        busy = r.get("hmx_busy_percent", r.get("mx_busy_percent"))
        rows.append([r["target"], " x ".join(map(str, r["shape"])), r["dtype"],
                     _int(r["cycles"]), _seconds(r["seconds"]),
                     f"{_sig(r[unit])} {scale}", f"{r['percent_of_peak']:.1f}%",
                     f"{busy:.1f}%", "yes" if r["correct"] else "no",
                     _seconds(r["warm_wall_s"]), _seconds(r["timing_only_wall_s"])])
    return _table(["target", "M x K x N", "type", "cycles", "simulated time", "throughput",
                   "of peak", "matrix unit busy", "correct", "wall (warm)", "timing only"],
                  rows)


def check() -> str:
    rows = [[r["target"], r["model"], r["mode"], str(r["layers"]), _seconds(r["reference_s"]),
             _seconds(r["check_s"]), str(r["runs"]), _seconds(r["runs_s"]),
             _seconds(r["fp64_s"]), _seconds(r["precise_s"])]
            for r in _load("check")["rows"]]
    return _table(["target", "model", "mode", "layers", "reference model", "--check",
                   "reference runs", "their time", "fp64 goldens", "precise mode"], rows)


def lower() -> str:
    rows = [[r["case"], r["mode"], _int(r["instructions"]), str(r["layers"]),
             _seconds(r["lower_s"]), _seconds(r["first_lower_s"]),
             f"{r['ns_per_instruction']:.0f} ns"]
            for r in _load("lower")["rows"]]
    return _table(["case", "mode", "instructions", "layers", "lowering (warm)", "first call",
                   "per instruction"], rows)


def stages() -> str:
    rows = [[r["target"], r["model"], r["mode"], f"`{r['function']}`",
             _seconds(r["ms_per_estimate"] / 1e3),
             _seconds(sum(r["phases_ms"].values()) / 1e3)]
            for r in _load("stages")["rows"]]
    return _table(["target", "model", "mode", "function", "per estimate", "the estimate"], rows)


def tosa_models() -> str:
    rows = [[r["model"], _int(r["operators"]), f"{r['macs'] / 1e6:.2f} M",
             _int(r["param_bytes"]), _seconds(r["import_s"]), _seconds(r["reference_s"]),
             _seconds(r["per_layer_goldens_s"]), _rate(r["reference_mac_per_s"])]
            for r in _load("tosa")["models"]]
    return _table(["model", "operators", "MACs", "parameter bytes", "import",
                   "reference run", "per-layer goldens", "reference MAC/s"], rows)


def tosa_conformance() -> str:
    c = _load("tosa")["conformance"]
    return _table(["positive tests through the reference target", "negative tests",
                   "negative tests rejected by the IR"],
                  [[c["positive_through_sut"], _int(c["negative_tests"]),
                    _int(c["negative_rejected_by_ir"])]])


def sweep() -> str:
    s = _load("sweep")
    rows = [[str(n), _seconds(w["cold_s"]), f"{w['cold_points_per_min']:,.0f}",
             _seconds(w["warm_s"]), f"{w['warm_points_per_min']:,.0f}",
             _seconds(w["warm_estimate_s_per_point"])]
            for n, w in s["workers"].items()]
    return (f"{s['points']} points of `{s['model']}`, {s['machine']}; in one process "
            f"{_seconds(s['in_process']['plain_s_per_point'])} a point "
            f"({_seconds(s['in_process']['cached_s_per_point'])} with the lowering cached), "
            f"overhead per point on Dask {_seconds(s['overhead_per_point_s'])}.\n\n"
            + _table(["workers", "cold", "points/min", "warm", "points/min",
                      "estimate per point"], rows))


def engine() -> str:
    rows = [[r["stream"], r["engine"], _int(r["instructions"]), _int(r["cycles"]),
             _seconds(r["wall_s"]), _rate(r["instructions_per_s"])]
            for r in _load("engine")["rows"]]
    return _table(["program", "engine", "instructions", "cycles", "wall", "instructions/s"],
                  rows)


def calibration(name: str) -> str:
    """One calibration set: GVSoC against hwsim per layer, then the summary."""
    data = _load("calibration")[name]
    rows = [[r["label"], _int(round(r["gvsoc"])), _int(r["hwsim"]), f"{100 * r['error']:+.1f}%",
             "yes" if r["target"] else "no"] for r in data["rows"]]
    rows.append(["**total**", _int(data["gvsoc_total"]), _int(data["hwsim_total"]),
                 f"{100 * data['total_error']:+.1f}%", ""])
    return (_table(["layer", "GVSoC", "hwsim", "error", "judged"], rows)
            + f"\n\nJudged rows: median |error| {100 * data['median_abs_error']:.1f}%, "
            f"largest {100 * data['max_abs_error']:.1f}% ({data['mode']} mode, "
            f"`{data['model']}`).")


def flat(name: str) -> str:
    """Every figure of a flat (or one-level nested) results file, as name | value."""
    rows = []
    for key, value in _load(name).items():
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, v in items:
            label = f"{key}.{sub}" if sub else key
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue                       # the command and the host are said elsewhere
            text = _int(v) if isinstance(v, int) else (_rate(v) if v >= 1e3 else _sig(v))
            rows.append([f"`{label}`", text])
    return _table(["figure", "value"], rows)


TABLES = {
    "models-gap9": lambda: models("gap9"),
    "models-hmx": lambda: models("hmx"),
    "models-sme": lambda: models("sme"),
    "speed-gap9": lambda: models_speed("gap9"),
    "speed-hmx": lambda: models_speed("hmx"),
    "speed-sme": lambda: models_speed("sme"),
    "conformance": conformance,
    "gemm": gemm,
    "check": check,
    "lower": lower,
    "stages": stages,
    "tosa-models": tosa_models,
    "tosa-conformance": tosa_conformance,
    "sweep": sweep,
    "engine": engine,
    "calibration-resnet8": lambda: calibration("resnet8"),
    "calibration-kws": lambda: calibration("kws"),
    "bench-hmx": lambda: flat("hmx"),
    "bench-sme": lambda: flat("sme"),
    "bench-gap9": lambda: flat("gap9"),
}


def render(markdown: str, where: str = "<page>") -> str:
    """``markdown`` with every results marker replaced by its table."""
    def table(match: re.Match) -> str:
        name = match.group(1)
        if name not in TABLES:
            raise ValueError(f"{where}: unknown results table {name!r}; expected one of "
                             f"{', '.join(TABLES)}")
        try:
            return TABLES[name]()
        except (OSError, ValueError, KeyError) as exc:    # a results file missing or changed
            raise ValueError(f"{where}: results table {name!r}: {exc!r}") from None
    return MARKER.sub(table, markdown)


def on_page_markdown(markdown, page, config, files):    # the MkDocs hook
    return render(markdown, page.file.src_path)
