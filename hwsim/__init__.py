"""hwsim: a cycle-approximate, instruction-level simulator of ML matrix engines.

    import hwsim
    m = hwsim.machine("hmx")
    m.memory("vtcm").write(0x0, data)
    result = m.run("examples/hmx/basic_multiply.trace")
    print(result.cycles, result.seconds, result.stats["units"])
"""

from hwsim.targets import machine, targets

__version__ = "0.1.0"


def load_graph(model, batch: int = 1):
    """A validated TOSA graph (``hwsim.tosa.Graph``) from a ``.tosa``, TOSA MLIR or ``.tflite``
    file; a dynamic batch dimension becomes ``batch``."""
    from hwsim.tosa import load_graph as load
    return load(model, batch)


__all__ = ["machine", "targets", "load_graph", "__version__"]
