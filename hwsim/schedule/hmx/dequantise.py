"""An int8 graph rewritten as an FP32 graph, so that HMX (an FP16 engine) can run it.

HMX has no integer datapath. With the dequantise mode an int8 graph becomes an FP32 graph that
computes the same layers on integer-valued floats in units of each tensor's LSB with its zero
point removed: an int8 tensor holding q with zero point z becomes q - z; an int32 accumulator
stays its integer value. The rewrite, operator by operator:

* CONV2D, DEPTHWISE_CONV2D, MATMUL: weights w - weight_zp (B - B_zp) as FP32 constants, the
  bias as FP32, zero points 0 (the input is already q - input_zp, and padding is 0 there);
* RESCALE: a MUL by the constant multiplier * 2^-shift (per channel or per tensor), then, for
  an int8/int16 output, a CLAMP to the output type's range minus its zero point (RESCALE
  saturates). **Not reproduced: RESCALE's rounding to an integer**: values keep their
  fractions of an LSB, so the final output differs from the int8 model's by its rounding
  (about half an LSB) plus what the kept fractions change downstream;
* CLAMP: bounds minus the zero point; AVG_POOL2D, ADD, SUB, REDUCE_MAX and the data movement
  operators as they are (PAD's value minus the zero point).

Integer-only arithmetic (TABLE, CLZ, shifts, integer MUL with a shift: the int8 softmax) has no
float equivalent operator by operator and is refused with a ``ScheduleError``. The rewritten
graph's inputs and outputs are FP32 in LSB units (q - z).
"""

from __future__ import annotations

import numpy as np

from hwsim.errors import ScheduleError
from hwsim.tosa.ir import Graph, Operator, Tensor

ZERO_POINTS = {"CONV2D": "input_zp", "DEPTHWISE_CONV2D": "input_zp", "MATMUL": "A_zp",
               "RESCALE": "input_zp", "AVG_POOL2D": "input_zp"}
SAME = ("ADD", "SUB", "REDUCE_MAX", "RESHAPE", "SLICE", "TRANSPOSE", "CONCAT", "IDENTITY")


class _Rewrite:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.zp: dict[str, int] = {}
        self.tensors: dict[str, Tensor] = {}
        self.ops: list[Operator] = []
        self.count = 0

    def zero_point(self, t: Tensor) -> int:
        """The zero point of an int8 tensor: its producer's output zero point, or the input zero
        point of the first operator reading it (through data movement)."""
        if t.name in self.zp:
            return self.zp[t.name]
        for user in self.graph.consumers(t):
            if user.op in ZERO_POINTS:
                return int(user.scalar(ZERO_POINTS[user.op]))
            if user.op in SAME + ("CLAMP", "PAD") and user.inputs[0] is t:
                return self.zero_point(user.output)
        return 0

    def tensor(self, t: Tensor) -> Tensor:
        if t.dtype.kind not in ("int", "float"):
            return t
        if t.name not in self.tensors:
            data = None if t.data is None else np.asarray(t.data, np.float64) - (
                self.zero_point(t) if t.dtype.name == "int8" else 0)
            self.tensors[t.name] = Tensor(t.name, t.shape, "fp32", data)
        return self.tensors[t.name]

    def const(self, values, stem: str) -> Tensor:
        self.count += 1
        array = np.asarray(values, np.float64)
        return Tensor(f"{stem}_dq{self.count}", array.shape, "fp32", array)

    def add(self, op: str, inputs, output: Tensor, **attrs) -> None:
        self.ops.append(Operator(op, inputs, [output], attrs))

    # -- operators ---------------------------------------------------------------------------------
    def matrix(self, op: Operator) -> None:
        x, w = op.inputs[0], op.inputs[1]
        zp = op.scalar(ZERO_POINTS[op.op])
        if self.zero_point(x) != zp:
            raise ScheduleError(f"{op.op}[{op.name}]: input zero point {zp} differs from its "
                                f"producer's {self.zero_point(x)}")
        w_zp = op.scalar("B_zp" if op.op == "MATMUL" else "weight_zp")
        weight = w.data.astype(np.float64) - w_zp if w.is_const else None
        if weight is None:
            raise ScheduleError(f"{op.op}[{op.name}]: weights must be constants")
        zero = [self.const([0.0], "zp"), self.const([0.0], "zp")]
        inputs = [self.tensor(x), self.const(weight, w.name)]
        if op.op != "MATMUL":
            inputs.append(self.const(op.const("bias"), op.inputs[2].name))
        attrs = {k: v for k, v in op.attrs.items() if k != "acc_type"}
        if op.op != "MATMUL":
            attrs["acc_type"] = "fp32"
        self.zp[op.output.name] = 0
        self.add(op.op, inputs + zero, self.tensor(op.output), **attrs)

    def rescale(self, op: Operator) -> None:
        x, out = op.input, op.output
        if self.zero_point(x) != op.scalar("input_zp"):
            raise ScheduleError(f"RESCALE[{op.name}]: input zero point differs from its "
                                "producer's")
        scale = op.const("multiplier").astype(np.float64) * 2.0 ** -op.const("shift").astype(
            np.float64)
        shape = [1] * (x.rank - 1) + [scale.size] if x.rank else []
        zp = int(op.scalar("output_zp")) if out.dtype.name == "int8" else 0
        self.zp[out.name] = zp
        target = self.tensor(out)
        bounded = out.dtype.name in ("int8", "int16")
        scaled = Tensor(f"{out.name}_scaled", out.shape, "fp32") if bounded else target
        self.add("MUL", [self.tensor(x), self.const(scale.reshape(shape), "scale"),
                         Tensor(f"{out.name}_shift", [1], "int8", [0])], scaled)
        if bounded:
            self.add("CLAMP", [scaled], target, min_val=float(out.dtype.min - zp),
                     max_val=float(out.dtype.max - zp), nan_mode="PROPAGATE")

    def clamp(self, op: Operator) -> None:
        zp = self.zero_point(op.input) if op.input.dtype.name == "int8" else 0
        self.zp[op.output.name] = zp
        self.add("CLAMP", [self.tensor(op.input)], self.tensor(op.output),
                 min_val=float(op.min_val - zp), max_val=float(op.max_val - zp),
                 nan_mode="PROPAGATE")

    def avg_pool(self, op: Operator) -> None:
        self.zp[op.output.name] = int(op.scalar("output_zp"))
        attrs = dict(op.attrs, acc_type="fp32")
        self.add("AVG_POOL2D", [self.tensor(op.input), self.const([0.0], "zp"),
                                self.const([0.0], "zp")], self.tensor(op.output), **attrs)

    def pad(self, op: Operator) -> None:
        zp = self.zero_point(op.input1)
        self.zp[op.output.name] = zp
        value = self.const([float(op.scalar("pad_const")) - zp], "pad")
        self.add("PAD", [self.tensor(op.input1), op.padding, value], self.tensor(op.output))

    def same(self, op: Operator) -> None:
        if op.output.dtype.name == "int8":
            self.zp[op.output.name] = self.zero_point(op.inputs[0])
        self.add(op.op, [self.tensor(t) for t in op.inputs], self.tensor(op.output),
                 **op.attrs)


RULES = {"CONV2D": _Rewrite.matrix, "DEPTHWISE_CONV2D": _Rewrite.matrix,
         "MATMUL": _Rewrite.matrix, "RESCALE": _Rewrite.rescale, "CLAMP": _Rewrite.clamp,
         "AVG_POOL2D": _Rewrite.avg_pool, "PAD": _Rewrite.pad,
         **{name: _Rewrite.same for name in SAME}}


def dequantise(graph: Graph) -> Graph:
    """The FP32 graph in LSB units that computes ``graph`` (see the module docstring)."""
    rewrite = _Rewrite(graph)
    for op in graph:
        rule = RULES.get(op.op)
        if rule is None:
            raise ScheduleError(f"{op.op}[{op.name}]: integer-only arithmetic has no float "
                                "equivalent operator by operator (dequantise supports "
                                f"{', '.join(sorted(RULES))})")
        rule(rewrite, op)
    return Graph(rewrite.ops, [rewrite.tensor(t) for t in graph.inputs],
                 [rewrite.tensor(t) for t in graph.outputs], f"{graph.name} dequantised")


def lsb_inputs(graph: Graph, values: dict) -> dict:
    """Inputs of the int8 graph (q) as the dequantised graph takes them (q - zero point)."""
    rewrite = _Rewrite(graph)
    return {t.name: np.asarray(values[t.name], np.float64) - (
        rewrite.zero_point(t) if t.dtype.name == "int8" else 0) for t in graph.inputs}
