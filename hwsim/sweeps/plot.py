"""A sweep as a picture: one column against another, every finished point, the Pareto front
of the two (both minimised) drawn as a staircase through its points.

A point is on the front when no other point is at least as good in both columns and better in
one. Failed points (``status`` error) and points with an empty x or y are left out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hwsim.errors import ConfigError

IMAGE_FORMATS = (".png", ".svg", ".pdf")


def pareto_front(x, y) -> np.ndarray:
    """Boolean mask of the points no other point dominates (lower is better in both)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    order = np.lexsort((y, x))           # by x, then y
    front = np.zeros(len(x), bool)
    best_y, best_x = np.inf, None
    for i in order:
        if y[i] < best_y or (y[i] == best_y and x[i] == best_x):   # equal points tie
            front[i] = True
            best_y, best_x = y[i], x[i]
    return front


def finished(frame, columns: list[str], path):
    """The rows of ``frame`` to draw: status ok, with the named columns (x, y and the colour)
    present, x and y numeric and not empty."""
    for name in columns:
        if name not in frame.columns:
            raise ConfigError(f"{path}: no column {name!r}; it has {', '.join(frame.columns)}")
    if "status" in frame.columns:
        frame = frame[frame["status"] == "ok"]
    frame = frame.dropna(subset=columns[:2])
    for name in columns[:2]:
        if frame[name].dtype.kind not in "iuf":
            raise ConfigError(f"{path}: column {name!r} is not numeric")
    if frame.empty:
        raise ConfigError(f"{path}: no finished point has both {columns[0]} and {columns[1]}")
    return frame


def plot(frame, x: str, y: str, output: str | Path, color: str | None = None,
         title: str = ""):
    """Draw ``frame``'s ``y`` against ``x`` to ``output`` (PNG, SVG or PDF, atomically) and
    return the rows on the front, sorted by ``x``."""
    from hwsim.schedule.plot import require
    from hwsim.traces.files import atomic_open
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError("hwsim plot needs matplotlib: pip install 'hwsim[plot]'") from None
    plt = require()
    front = pareto_front(frame[x], frame[y])
    fig, ax = plt.subplots(figsize=(8, 5.5))
    _scatter(ax, frame, x, y, color)
    rows = frame[front].sort_values([x, y])
    ax.step(rows[x], rows[y], where="post", color="#d62728", linewidth=1.2, zorder=2,
            label=f"Pareto front ({len(rows)} of {len(frame)})")
    ax.scatter(rows[x], rows[y], s=70, facecolors="none", edgecolors="#d62728",
               linewidths=1.5, zorder=4)
    ax.set_xlabel(f"{x} (lower is better)")
    ax.set_ylabel(f"{y} (lower is better)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_open(output, "wb") as fh:
        fig.savefig(fh, dpi=120, format=Path(output).suffix.lower()[1:])
    plt.close(fig)
    return rows


def _scatter(ax, frame, x: str, y: str, color: str | None) -> None:
    if color is None:
        ax.scatter(frame[x], frame[y], s=24, color="#3b75af", zorder=3)
    elif frame[color].dtype.kind in "iuf" and frame[color].nunique() > 8:
        points = ax.scatter(frame[x], frame[y], s=24, c=frame[color], cmap="viridis", zorder=3)
        ax.figure.colorbar(points, ax=ax, label=color)
    else:
        for value, group in frame.groupby(color, dropna=False, sort=True):
            ax.scatter(group[x], group[y], s=24, zorder=3, label=f"{color} = {value}")
