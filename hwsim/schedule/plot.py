"""Pictures of a report: cycles per layer and a roofline (matplotlib, the ``plot`` extra), and
the Perfetto timeline with a slice per layer.

Left panel: each layer's cycles (``hwsim.schedule.run``: the layers add up to the run) split
by what held them: compute units busy, data movement under way with no compute, control only.
Right panel: each layer with MACs at its MACs per cycle against its arithmetic intensity
(MACs per byte moved from the memories outside L1), under the machine's compute peaks and
memory bandwidth roofs (``Lowering.roofs``).
"""

from __future__ import annotations

from pathlib import Path

from hwsim.errors import ConfigError

COLOURS = {"compute": "#3b75af", "movement": "#ef8636", "other": "#9c9c9c"}


def require():
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("--plot needs matplotlib: pip install 'hwsim[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def check_format(path) -> str:
    """The image format ``path``'s suffix names, refused before any work when matplotlib
    cannot write it."""
    require()
    from matplotlib.backend_bases import FigureCanvasBase
    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(str(path)).suffix.lower().lstrip(".")
    if suffix not in formats:
        raise ConfigError(f"--plot {path}: expected a file name ending in one of "
                          f"{', '.join('.' + f for f in sorted(formats))}")
    return suffix


def plot(report, path, roofs: dict | None = None) -> None:
    """Write the two panels (module docstring) as an image (the format from the suffix)."""
    plt = require()
    from hwsim.schedule import lowering
    from hwsim.targets import machine
    if roofs is None:
        params = machine(report.target).params.copy()
        params.update({k: v for k, v in report.params.items() if k in params.as_dict()})
        roofs = lowering(report.target).roofs(params)
    fig, (bars, roof) = plt.subplots(1, 2, figsize=(15, 5.5),
                                     gridspec_kw={"width_ratios": [3, 2]})
    _bars(bars, report)
    _roofline(roof, report, roofs)
    fig.suptitle(report.table().splitlines()[0], fontsize=9)
    fig.tight_layout()
    from hwsim.traces.files import atomic_open
    with atomic_open(path, "wb", "--plot") as fh:
        fig.savefig(fh, dpi=120, format=check_format(path))
    plt.close(fig)


def _bars(ax, report) -> None:
    x = range(len(report.layers))
    bottom = [0.0] * len(report.layers)
    for part, colour in COLOURS.items():
        values = [r.split.get(part, 0.0) for r in report.layers]
        ax.bar(x, values, bottom=bottom, color=colour, label=part, width=0.8)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xlabel("layer")
    ax.set_ylabel("cycles")
    ax.set_title("cycles per layer", fontsize=10)
    ax.legend(fontsize=8)


def _roofline(ax, report, roofs: dict) -> None:
    levels = [lv for lv in report.totals["levels"] if lv in roofs["bandwidths"]]
    points = []
    for r in report.layers:
        moved = sum(r.bytes.get(lv, 0) for lv in levels)
        if r.macs and moved and r.cycles:
            points.append((r.macs / moved, r.macs_per_cycle, r.index))
    low = min([p[0] for p in points] + [0.1]) / 2
    high = max([p[0] for p in points] + [100.0]) * 2
    for name, peak in roofs["peaks"].items():
        ax.axhline(peak, linestyle="--", linewidth=1, color="#555")
        ax.text(low, peak * 1.05, f"{name} {peak:g} MAC/cyc", fontsize=7)
    for name, bw in roofs["bandwidths"].items():
        top = max(roofs["peaks"].values())
        ax.plot([low, top / bw], [low * bw, top], linewidth=1, color="#888")
        ax.text(low * 1.2, low * bw * 1.3, f"{name} {bw:g} B/cyc", fontsize=7, rotation=30)
    if points:
        ax.scatter([p[0] for p in points], [p[1] for p in points], s=14, zorder=3)
        for xi, yi, index in points:
            ax.annotate(str(index), (xi, yi), fontsize=6, xytext=(2, 2),
                        textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_xlabel(f"MACs per byte from {'/'.join(levels)}")
    ax.set_ylabel("MACs per cycle")
    ax.set_title("roofline", fontsize=10)


def write_timeline(report, path) -> None:
    """The run's Perfetto timeline plus one async slice per layer (its span)."""
    from hwsim.results.chrome import write_chrome
    spans = [(f"{r.index} {r.kind}", r.span[0], r.span[1] - r.span[0],
              {"cycles": round(r.cycles), "bound": r.bound}) for r in report.layers if r.span]
    write_chrome(report.result, path, spans)
