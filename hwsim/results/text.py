"""The plain-text summary of a run."""

from __future__ import annotations


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def summary_text(result) -> str:
    stats = result.stats
    lines = [f"machine      {result.machine}",
             f"cycles       {result.cycles:,}",
             f"time         {_si(result.seconds, 's')} at {_si(result.clock_hz, 'Hz')}",
             f"instructions {result.instructions:,}",
             f"MACs         {stats['macs']:,}"]
    if stats["peak_macs_per_cycle"]:
        lines.append(f"utilisation  {100 * stats['utilisation']:.1f}% of "
                     f"{stats['peak_macs_per_cycle']:g} MACs/cycle")
    lines.append("")
    lines.append(f"{'unit':<14}{'ops':>9}{'busy':>12}{'stalled':>12}{'idle':>12}  stalls")
    for name, unit in stats["units"].items():
        reasons = ", ".join(f"{k} {v:,}" for k, v in unit["stalls"].items()) or "-"
        lines.append(f"{name:<14}{unit['ops']:>9,}{unit['busy']:>12,}{unit['stalled']:>12,}"
                     f"{unit['idle']:>12,}  {reasons}")
    if stats["ports"]:
        lines.append("")
        lines.append(f"{'port':<14}{'bytes':>14}{'mean B/cyc':>12}{'peak B/cyc':>12}"
                     f"{'mean':>12}{'peak':>12}")
        for name, port in stats["ports"].items():
            lines.append(f"{name:<14}{port['bytes']:>14,}{port['mean_bytes_per_cycle']:>12.2f}"
                         f"{port['peak_bytes_per_cycle']:>12.2f}"
                         f"{_si(port['mean_gb_per_s'] * 1e9, 'B/s'):>12}"
                         f"{_si(port['peak_gb_per_s'] * 1e9, 'B/s'):>12}")
    if result.expect_failures:
        lines.append("")
        lines.extend(f"MISMATCH {failure}" for failure in result.expect_failures)
    return "\n".join(lines)
