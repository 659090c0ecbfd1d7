"""Design-space sweeps: every combination of a spec's models, targets, modes, weight widths and
machine parameters, estimated on Dask distributed, collected into one table.

* ``spec``: reading and validating the TOML spec, expanding it into points;
* ``worker``: one point on a worker (``hwsim.estimate``, with the graph and lowering cached);
* ``execute``: the Dask side (a local cluster, or a running one by its scheduler address);
* ``store``: the append-only results store that makes a sweep resumable;
* ``table``: the point and layer tables (pandas; Parquet or CSV);
* ``plot``: a sweep's scatter with its Pareto front; ``progress``: the terminal bar.

``hwsim sweep`` and ``hwsim plot`` (``hwsim.sweeps.cli``) and ``hwsim.sweep`` are the ways in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hwsim.sweeps.spec import Point, Spec, read_spec
from hwsim.sweeps.store import Store, store_path


@dataclass
class Outcome:
    """A finished (or resumed) sweep: its points with their records, and what was reused."""

    spec: Spec
    rows: list          # [(Point, record)] in spec order
    reused: int         # points found finished in the store
    computed: int       # points run this time
    store: Path | None

    @property
    def failed(self) -> int:
        return sum(record["status"] != "ok" for _, record in self.rows)

    def points(self):
        from hwsim.sweeps.table import points_frame
        return points_frame(self.spec, self.rows)

    def layers(self):
        from hwsim.sweeps.table import layers_frame
        return layers_frame(self.spec, self.rows)


def run(spec, workers: int | None = None, scheduler: str | None = None,
        store: str | Path | None = None, progress: bool = False) -> Outcome:
    """Validate ``spec`` (a path, a dict or a ``Spec``), run the points that ``store`` does
    not hold finished, and return them all; ``progress``: a bar on stderr (on a terminal)."""
    from hwsim.sweeps.execute import compute
    from hwsim.sweeps.progress import ProgressBar
    spec = spec if isinstance(spec, Spec) else read_spec(spec)
    points = spec.points()
    results = Store(store)
    todo = [p for p in points if not results.finished(p.key)]
    bar = ProgressBar(len(points), len(points) - len(todo)) if progress else None
    try:
        computed = compute(todo, results, workers, scheduler, bar)
    finally:
        results.close()
        if bar is not None:
            bar.close()
    return Outcome(spec, [(p, results.records[p.key]) for p in points],
                   len(points) - len(todo), computed, results.path)


def sweep(spec_or_path, workers: int | None = None, scheduler: str | None = None,
          layers: bool = False, store: str | Path | None = None):
    """Run a sweep and return its point table as a pandas DataFrame, or (points, layers) with
    ``layers``. ``workers``: local worker processes (default: the core count); ``scheduler``:
    the address of a running Dask cluster instead (``tcp://HOST:PORT``); ``store``: a JSON-lines
    file that keeps finished points, so that a rerun skips them (default: none)."""
    outcome = run(spec_or_path, workers, scheduler, store)
    return (outcome.points(), outcome.layers()) if layers else outcome.points()


__all__ = ["sweep", "run", "read_spec", "Outcome", "Spec", "Point", "Store", "store_path"]
