"""The result of estimating a model: one row per layer and the totals, as text, JSON or CSV.

Columns (see ``hwsim.schedule.run`` for how each is attributed from one simulation):
``cycles`` (the layer's share of the run; layers add up to the total), ``MACs``,
``MAC/cyc`` (MACs / cycles) and ``%peak`` (against the peak of the fastest compute unit the
layer uses), bytes through each memory level, ``bound`` (compute or memory: which of its compute
and its data-movement cycles is larger), ``overlap`` (share of its data movement hidden behind
compute), and with ``--check`` the verdict against the TOSA reference (its type, status,
max error and unit: LSB for integers, ULP for floats, ``hwsim.tosa.compliance.ulp_error``),
led by the verdict that matters most: against the integer model, then as the machine's
narrower compute type, then in the graph's own type (``Verdict.brief``).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field


@dataclass
class LayerRow:
    index: int
    name: str
    kind: str               # fused TOSA operators, e.g. CONV2D+RESCALE+CLAMP
    shape: tuple            # output shape
    units: tuple
    cycles: float
    span: tuple | None
    macs: int
    peak_macs_per_cycle: float
    bytes: dict             # memory level -> bytes
    compute_cycles: int
    movement_cycles: int
    bound: str
    overlap: float | None
    split: dict = field(default_factory=dict)   # cycles by what held them: compute/movement/other
    notes: list = field(default_factory=list)
    verdict: object = None  # hwsim.tosa.judge.Verdict

    @property
    def macs_per_cycle(self) -> float:
        return self.macs / self.cycles if self.cycles else 0.0

    @property
    def peak_fraction(self) -> float | None:
        return self.macs_per_cycle / self.peak_macs_per_cycle if self.peak_macs_per_cycle and \
            self.macs else None

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in ("index", "name", "kind", "units", "cycles", "macs",
                                             "bytes", "compute_cycles", "movement_cycles",
                                             "bound", "overlap", "split", "notes")}
        out.update(shape=list(self.shape), span=list(self.span) if self.span else None,
                   macs_per_cycle=self.macs_per_cycle, peak_fraction=self.peak_fraction)
        if self.verdict is not None:
            v = self.verdict
            out["verdict"] = _verdict_json(v)
        return out


def _verdict_json(v) -> dict:
    out = {"status": v.status, "exact": v.exact, "count": v.count, "max_err": v.max_err,
           "mean_err": v.mean_err, "unit": v.unit, "check": v.check, "detail": v.detail}
    for other in (v.narrow, v.requantised):
        if other is not None:
            out["as_" + other.dtype] = _verdict_json(other)
    return out


def _verdict_csv(v) -> list:
    """The CSV verdict columns (``CSV_VERDICT``) of one layer's verdict (or None)."""
    cells = []
    for w in (v, v and v.narrow, v and v.requantised):
        cells += [w.dtype, w.status, w.max_err, w.unit, w.exact] if w is not None else [""] * 5
    return cells


MOVERS = ("dma", "udma")      # units the table leaves out: its byte columns show their work

# a verdict, then the same result judged in the machine's narrower compute type (HMX: fp16),
# then rounded to the integer model's type against that model (HMX dequantise mode)
CSV_VERDICT = [f"{prefix}{name}" for prefix in ("", "narrow_", "requantised_")
               for name in ("type", "verdict", "max_err", "err_unit", "bit_exact")]


@dataclass
class Report:
    """What ``hwsim.estimate`` returns (fields are plain data; ``result`` is the machine run)."""

    model: str
    target: str
    mode: str
    weight_bits: int | None     # None: the lowering keeps the graph's weights as they are
    clock_hz: float
    cycles: int
    layers: list
    totals: dict
    params: dict = field(default_factory=dict)          # every machine parameter -> value
    param_origins: dict = field(default_factory=dict)   # those not at their default -> who set
    # them: "user" (an override) or "lowering" (the value its programs are meant to run with)
    outputs: dict = field(default_factory=dict)          # graph output -> simulated values
    output_verdicts: dict = field(default_factory=dict)  # graph output -> Verdict
    wall: dict = field(default_factory=dict)             # seconds per phase
    numerics: bool = True
    result: object = field(default=None, repr=False)

    @property
    def seconds(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def macs(self) -> int:
        return sum(r.macs for r in self.layers)

    def verdicts(self) -> dict:
        return {r.index: r.verdict for r in self.layers if r.verdict is not None}

    def to_json(self) -> dict:
        return {"model": self.model, "target": self.target, "mode": self.mode,
                "weight_bits": self.weight_bits, "clock_hz": self.clock_hz,
                "cycles": self.cycles, "seconds": self.seconds, "macs": self.macs,
                "numerics": self.numerics, "params": self.params,
                "param_origins": self.param_origins, "totals": self.totals,
                "wall_seconds": self.wall,
                "outputs": {k: v.tolist() for k, v in self.outputs.items()},
                "output_verdicts": {k: str(v) for k, v in self.output_verdicts.items()},
                "layers": [r.to_json() for r in self.layers]}

    def json(self) -> str:
        return json.dumps(self.to_json(), indent=1) + "\n"

    def csv(self) -> str:
        levels = list(self.totals["levels"])
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["index", "name", "kind", "shape", "units", "cycles", "macs",
                         "macs_per_cycle", "peak_fraction"] + [f"bytes_{lv}" for lv in levels]
                        + ["compute_cycles", "movement_cycles", "bound", "overlap"]
                        + CSV_VERDICT + ["notes"])
        for r in self.layers:
            v = r.verdict
            writer.writerow([r.index, r.name, r.kind, "x".join(map(str, r.shape)),
                             "+".join(r.units), round(r.cycles, 1), r.macs,
                             round(r.macs_per_cycle, 3),
                             "" if r.peak_fraction is None else round(r.peak_fraction, 4)]
                            + [r.bytes.get(lv, 0) for lv in levels]
                            + [r.compute_cycles, r.movement_cycles, r.bound,
                               "" if r.overlap is None else round(r.overlap, 3)]
                            + _verdict_csv(v) + ["; ".join(r.notes)])
        return buffer.getvalue()

    def table(self) -> str:
        levels = list(self.totals["levels"])
        check = any(r.verdict is not None for r in self.layers)
        head = (f"{'#':>3}  {'layer':<28} {'shape':<14} {'unit':<12} {'cycles':>9} "
                f"{'MACs':>10} {'MAC/cyc':>7} {'%peak':>6} "
                + " ".join(f"{lv:>8}" for lv in levels)
                + f" {'bound':>7} {'overlap':>7}" + ("  verdict" if check else ""))
        lines = [self._headline(), head]
        for r in self.layers:
            peak = "" if r.peak_fraction is None else f"{100 * r.peak_fraction:.1f}"
            overlap = "" if r.overlap is None else f"{100 * r.overlap:.0f}%"
            kind = r.kind if len(r.kind) <= 28 else r.kind[:25] + "..."
            line = (f"{r.index:>3}  {kind:<28} {'x'.join(map(str, r.shape)):<14} "
                    f"{'+'.join(u for u in r.units if u not in MOVERS) or '-':<12} "
                    f"{r.cycles:>9,.0f} {r.macs:>10,} {r.macs_per_cycle:>7.2f} {peak:>6} "
                    + " ".join(f"{r.bytes.get(lv, 0):>8,}" for lv in levels)
                    + f" {r.bound:>7} {overlap:>7}")
            if r.verdict is not None:
                line += f"  {r.verdict.brief()}"
            lines.append(line)
        lines += self._footer()
        return "\n".join(lines) + "\n"

    def _headline(self) -> str:
        how = [f"{self.mode} mode"] + ([f"{self.weight_bits}-bit weights"]
                                       if self.weight_bits is not None else []) + (
            [] if self.numerics else ["timing only"])
        return (f"{self.model} on {self.target} ({', '.join(how)}): {self.cycles:,} cycles, "
                f"{self.seconds * 1e3:.3f} ms at {self.clock_hz / 1e6:g} MHz, "
                f"{self.macs:,} MACs")

    def _footer(self) -> list[str]:
        lines = []
        for level, t in self.totals["levels"].items():
            lines.append(f"{level}: {t['bytes']:,} bytes, mean {t['mean_gb_per_s']:.3f} GB/s, "
                         f"peak {t['peak_gb_per_s']:.3f} GB/s")
        for name, v in self.output_verdicts.items():
            lines.append(f"output {name} vs the whole-graph reference: {v.brief()}")
        for r in self.layers:
            for note in r.notes:
                lines.append(f"note: layer {r.index}: {note}")
        for r in self.layers:     # why each layer that is not bit-exact passed or failed
            v = r.verdict
            if v is not None and v.status != "exact":
                lines.append(f"check: layer {r.index}: {v.brief(detail=True)}")
        return lines
