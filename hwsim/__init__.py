"""hwsim: a cycle-approximate, instruction-level simulator of ML matrix engines.

    import hwsim, numpy as np
    m = hwsim.machine("hmx")
    m.memory("vtcm").write(0x0, np.load("examples/hmx/data/act.npy"))
    result = m.run("examples/hmx/basic_multiply.trace")
    print(result.cycles, result.seconds, result.stats["units"])
    report = hwsim.estimate("model.tflite", "gap9", check=True)   # per-layer cycles, verdicts
"""

from hwsim.targets import machine, targets

__version__ = "0.1.0"


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


__all__ = ["machine", "targets", "load_graph", "estimate", "__version__"]
