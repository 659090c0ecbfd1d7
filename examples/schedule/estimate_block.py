"""Estimate a small model you build yourself: a 3x3 conv, a depthwise conv and a residual add,
on GAP9 in both numeric modes, each layer checked against the TOSA reference.

    PYTHONPATH=. python examples/schedule/estimate_block.py
"""

import numpy as np

import hwsim
from hwsim.tosa.builder import GraphBuilder

rng = np.random.default_rng(0)
b = GraphBuilder("block")
x = b.input((1, 16, 16, 16), "int8")


def conv(t, depthwise=False):
    shape = (3, 3, 16, 1) if depthwise else (16, 3, 3, 16)
    op = b.depthwise_conv2d if depthwise else b.conv2d
    acc = op(t, b.const(rng.integers(-60, 61, shape), "int8"),
             b.const(rng.integers(-500, 500, 16), "int32"), pad=(1, 1, 1, 1), input_zp=-3)
    return b.clamp(b.rescale(acc, 1 / 900, "int8", output_zp=-128), -128, 127)


y = conv(conv(x), depthwise=True)
total = b.add(b.rescale(x, 0.5, "int32", input_zp=-3), b.rescale(y, 0.5, "int32",
                                                                   input_zp=-128))
graph = b.build(b.rescale(total, 1.0, "int8"))

for mode in ("exact", "ne16"):
    report = hwsim.estimate(graph, "gap9", mode=mode, check=True)
    print(report.table())
