"""hwsim: a cycle-approximate, instruction-level simulator of ML matrix engines.

    import hwsim, numpy as np
    m = hwsim.machine("hmx")
    m.memory("vtcm").write(0x0, np.load("examples/hmx/data/act.npy"))
    result = m.run("examples/hmx/basic_multiply.trace")
    print(result.cycles, result.seconds, result.stats["units"])
    report = hwsim.estimate("model.tflite", "gap9", check=True)   # per-layer cycles, verdicts
    table = hwsim.sweep("examples/sweeps/gap9_kws.toml", workers=2)  # a pandas DataFrame
"""

from hwsim.targets import machine, targets
from hwsim.version import __version__


def load_graph(model, batch: int = 1):
    """A validated TOSA graph (``hwsim.tosa.Graph``) from a ``.tosa``, TOSA MLIR or ``.tflite``
    file; a dynamic batch dimension becomes ``batch``."""
    from hwsim.tosa import load_graph as load
    return load(model, batch)


def estimate(model, target: str = "gap9", **options):
    """Lower a model (a path or a ``hwsim.tosa.Graph``) onto ``target``, simulate it and return
    the per-layer report (``hwsim.schedule.Report``); options as ``hwsim.schedule.estimate``."""
    from hwsim.schedule import estimate as run
    return run(model, target, **options)


def sweep(spec_or_path, workers: int | None = None, scheduler: str | None = None,
          layers: bool = False, **options):
    """Run a design-space sweep (a TOML spec's path, or the same data as a dict) on Dask and
    return one row per point as a pandas DataFrame, or (points, layers) with ``layers``;
    options as ``hwsim.sweeps.sweep`` (docs/sweeps.md)."""
    from hwsim.sweeps import sweep as run
    return run(spec_or_path, workers, scheduler, layers, **options)


__all__ = ["machine", "targets", "load_graph", "estimate", "sweep", "__version__"]
