"""Judging FP16 layers of FP32 graphs: the TOSA verdict for the graph's mode, and why it differs.

HMX computes an FP32 graph in FP16: inputs and weights are rounded to FP16 (2^-11 relative
against FP32's 2^-24), products are exact, sums go into the 37-bit accumulator (29 fraction
bits: finer than FP32's 23), and each result is rounded to FP16. The FP32 compliance bounds of
TOSA 1.0 assume FP32 data, so most layers deviate from them. ``check_layer`` reports both:

* the verdict of ``hwsim.tosa.judge.judge_layer`` in the graph's own mode (FP32), with how far
  outside the bound the layer is;
* when that is not met, the verdict of the same operator as an **FP16 operator** (FP16 inputs,
  constants rounded to FP16, FP16 output, FP32 accumulation for the dot products, as the HMX
  accumulator is at least that precise) on exactly the FP16 values the simulator used. A layer
  compliant there deviates only because of the FP16 data format, not because of its arithmetic.

The FP16 operator's bias is the FP32 bias rounded to FP16; the simulator keeps it with 5 more
mantissa bits (the bias register's input-bias field), a difference far inside the bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.judge import Verdict, judge_layer

WHY = ("FP16 data: inputs and weights rounded to FP16 (2^-11 relative) and the result rounded "
       "to FP16, against the FP32 bound's 2^-24")


@dataclass
class LayerCheck:
    """The verdict in the graph's mode and, when it is not met, as an FP16 operator."""

    mode: Verdict
    fp16: Verdict | None = None

    @property
    def status(self) -> str:
        return self.mode.status

    @property
    def explained(self) -> bool:
        """Within the graph's bound, or within the FP16 operator's bound."""
        return self.mode.status != "deviates" or (self.fp16 is not None and
                                                  self.fp16.status != "deviates")

    def __str__(self) -> str:
        if self.fp16 is None:
            return str(self.mode)
        verdict = "within" if self.fp16.status != "deviates" else "OUTSIDE"
        return (f"{self.mode}; as FP16 ({WHY}): {verdict} the FP16 bound: {self.fp16.status} "
                f"({self.fp16.check}, max {self.fp16.max_err:.3g} {self.fp16.unit}"
                f"{': ' + self.fp16.detail if self.fp16.detail else ''})")


def fp16_operator(op: Operator) -> Operator:
    """``op`` with every floating-point tensor in FP16 (constants rounded to nearest), FP32
    accumulation for dot products, CLAMP bounds rounded to FP16."""
    def convert(t: Tensor) -> Tensor:
        if not t.dtype.is_float:
            return t
        with np.errstate(over="ignore"):
            data = None if t.data is None else np.asarray(t.data).astype(np.float16)
        return Tensor(t.name, t.shape, "fp16", data)

    attrs = dict(op.attrs)
    if "acc_type" in attrs and op.output.dtype.is_float:
        attrs["acc_type"] = "fp32"
    for bound in ("min_val", "max_val"):
        if bound in attrs and op.input.dtype.is_float:
            with np.errstate(over="ignore"):
                attrs[bound] = float(np.float16(attrs[bound]))
    return Operator(op.op, [convert(t) for t in op.inputs], [convert(t) for t in op.outputs],
                    attrs, op.name)


def check_layer(graph: Graph, op: Operator, sim: np.ndarray,
                values: Mapping[str, np.ndarray]) -> LayerCheck:
    """Judge ``sim`` (the simulated output of ``op``, FP16 values) given the input values the
    simulator used (FP16 values in the graph's types)."""
    mode = judge_layer(graph, op, np.asarray(sim, op.output.dtype.np), values)
    if mode.status != "deviates" or not op.output.dtype.is_float or \
            op.output.dtype.name == "fp16":
        return LayerCheck(mode)
    op16 = fp16_operator(op)
    single = graph.operator_graph(op16)
    values16 = {t.name: np.asarray(values[t.name], t.dtype.np) for t in single.inputs}
    sim16 = np.asarray(sim, np.float32).astype(np.float16)
    return LayerCheck(mode, judge_layer(single, op16, sim16, values16))
