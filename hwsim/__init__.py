"""hwsim: a cycle-approximate, instruction-level simulator of ML matrix engines.

    import hwsim
    m = hwsim.machine("hmx")
    m.memory("vtcm").write(0x0, data)
    result = m.run("examples/hmx/basic_multiply.trace")
    print(result.cycles, result.seconds, result.stats["units"])
"""

from hwsim.targets import machine, targets

__version__ = "0.1.0"

__all__ = ["machine", "targets", "__version__"]
