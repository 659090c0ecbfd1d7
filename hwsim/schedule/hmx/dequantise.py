"""An int8 graph rewritten as an FP32 graph, so that HMX (an FP16 engine) can run it.

HMX has no integer datapath. With the dequantise mode an int8 graph becomes an FP32 graph that
computes the same layers on integer-valued floats: an int8 or int16 tensor holding q with zero
point z becomes q - z (its LSB units), an int32 accumulator stays its integer value, and an
int32 result of a RESCALE (a residual block's common scale, 2^20 times an int8 LSB in
ResNet-8) is kept in units of 2^k LSB, k the largest exponent of such RESCALEs in the graph,
so that it stays within FP16's range (``units``). The rewrite, operator by operator:

* CONV2D, DEPTHWISE_CONV2D, MATMUL: weights w - weight_zp (B - B_zp) as FP32 constants, the
  bias as FP32, zero points 0 (the input is already q - input_zp, and padding is 0 there);
* RESCALE: a MUL by the constant multiplier * 2^-shift (per channel or per tensor, times the
  change of unit), then, for an int8/int16 output, a CLAMP to the output type's range minus
  its zero point (RESCALE saturates). **Not reproduced: RESCALE's rounding to an integer**:
  values keep their fractions of an LSB, so each layer's output differs from the int8 model's
  by its rounding (about half an LSB) plus what the fractions of its inputs change;
* CLAMP: bounds minus the zero point (in the tensor's unit); ADD and SUB on the larger unit of
  their operands (the other one multiplied to it); AVG_POOL2D, REDUCE_MAX and the data
  movement operators as they are (PAD's value minus the zero point);
* the int8 softmax (TABLE, CLZ, shifts, integer MUL with a shift), which has no float
  equivalent operator by operator, as a whole (``softmax.py``): REDUCE_MAX, SUB, a MUL by the
  exponent's slope per LSB, EXP, REDUCE_SUM, RECIPROCAL, a MUL by the output scale, MUL and a
  CLAMP to the output range, its constants measured on the reference model (noted in the
  report). Other integer-only arithmetic is refused with a ``ScheduleError``.

A zero point follows the data: AVG_POOL2D keeps its input's offset from its input_zp (the
converters give it 0 and 0 for a tensor at -128); a matrix operator or RESCALE whose input
zero point differs from its input's is refused. ``dequantise`` returns the float graph (inputs
and outputs FP32 in LSB units) with each integer tensor's zero point and unit, which the
scheduler uses to feed it from integer inputs and to take its results back to the integer
model's values (``hwsim.schedule.requantise``).
"""

from __future__ import annotations

import math

import numpy as np

from hwsim.errors import ScheduleError
from hwsim.schedule.hmx import softmax as S
from hwsim.schedule.lowering import Rewritten
from hwsim.tosa.ir import Graph, Operator, Tensor

ZERO_POINTS = {"CONV2D": "input_zp", "DEPTHWISE_CONV2D": "input_zp", "MATMUL": "A_zp",
               "RESCALE": "input_zp", "AVG_POOL2D": "input_zp"}
SAME = ("REDUCE_MAX", "RESHAPE", "SLICE", "TRANSPOSE", "CONCAT", "IDENTITY")
BOUNDED = ("int8", "int16")     # RESCALE saturates to these; their tensors are in LSB units


def _scale(op: Operator) -> np.ndarray:
    return op.const("multiplier").astype(np.float64) * 2.0 ** -op.const("shift").astype(
        np.float64)


def wide_unit(graph: Graph, skip: set) -> float:
    """LSB per float unit of the int32 results of RESCALEs: 2^k, k the largest (rounded)
    exponent of the scales of the RESCALEs from int8 to int32 outside ``skip``."""
    exponents = [round(math.log2(float(_scale(op).max()))) for op in graph
                 if op.op == "RESCALE" and id(op) not in skip and
                 op.input.dtype.name in BOUNDED and op.output.dtype.name == "int32"]
    return 2.0 ** max(exponents + [0])


class _Rewrite:
    def __init__(self, graph: Graph, wide: float):
        self.graph, self.wide = graph, wide
        self.zp: dict[str, int] = {}
        self.unit: dict[str, float] = {}      # LSB per float unit, where not 1
        self.tensors: dict[str, Tensor] = {}
        self.ops: list[Operator] = []
        self.count = 0
        self.notes: dict[str, list] = {}

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

    def add(self, op: str, inputs, output: Tensor, **attrs) -> Tensor:
        self.ops.append(Operator(op, inputs, [output], attrs))
        return output

    def mul(self, x: Tensor, factor: np.ndarray, out: Tensor) -> Tensor:
        """x times constant factors (broadcast along the last axis)."""
        factor = np.asarray(factor, np.float64).reshape(-1)
        shape = [1] * (x.rank - 1) + [factor.size] if x.rank else []
        return self.add("MUL", [x, self.const(factor.reshape(shape), "scale"),
                                Tensor(f"{out.name}_shift", [1], "int8", [0])], out)

    def in_unit(self, t: Tensor, unit: float) -> Tensor:
        """The float tensor of ``t`` in ``unit`` LSB per float unit."""
        have, name = self.unit.get(t.name, 1.0), f"{t.name}_in_{unit:g}"
        if have == unit:
            return self.tensor(t)
        if name not in self.tensors:
            self.tensors[name] = self.mul(self.tensor(t), have / unit,
                                          Tensor(name, t.shape, "fp32"))
        return self.tensors[name]

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
        zp = int(op.scalar("output_zp")) if out.dtype.name == "int8" else 0
        self.zp[out.name] = zp
        bounded = out.dtype.name in BOUNDED
        unit = 1.0 if bounded or out.dtype.name != "int32" else self.wide
        if unit != 1.0:
            self.unit[out.name] = unit
        target = self.tensor(out)
        scaled = Tensor(f"{out.name}_scaled", out.shape, "fp32") if bounded else target
        self.mul(self.tensor(x), _scale(op) * self.unit.get(x.name, 1.0) / unit, scaled)
        if bounded:
            self.add("CLAMP", [scaled], target, min_val=float(out.dtype.min - zp),
                     max_val=float(out.dtype.max - zp), nan_mode="PROPAGATE")

    def clamp(self, op: Operator) -> None:
        zp = self.zero_point(op.input) if op.input.dtype.name == "int8" else 0
        unit = self._keep(op)
        self.zp[op.output.name] = zp
        self.add("CLAMP", [self.tensor(op.input)], self.tensor(op.output),
                 min_val=float(op.min_val - zp) / unit, max_val=float(op.max_val - zp) / unit,
                 nan_mode="PROPAGATE")

    def avg_pool(self, op: Operator) -> None:
        # the mean of q - input_zp, plus output_zp: the output keeps the input's offset from
        # input_zp (converters emit zero points 0 and 0 for an int8 tensor at -128)
        self.zp[op.output.name] = self.zero_point(op.input) - int(op.scalar("input_zp")) + \
            int(op.scalar("output_zp"))
        self._keep(op)
        attrs = dict(op.attrs, acc_type="fp32")
        self.add("AVG_POOL2D", [self.tensor(op.input), self.const([0.0], "zp"),
                                self.const([0.0], "zp")], self.tensor(op.output), **attrs)

    def pad(self, op: Operator) -> None:
        zp = self.zero_point(op.input1)
        self.zp[op.output.name] = zp
        unit = self._keep(op)
        value = self.const([(float(op.scalar("pad_const")) - zp) / unit], "pad")
        self.add("PAD", [self.tensor(op.input1), op.padding, value], self.tensor(op.output))

    def add_sub(self, op: Operator) -> None:
        unit = max(self.unit.get(t.name, 1.0) for t in op.inputs)
        if unit != 1.0:
            self.unit[op.output.name] = unit
        self.add(op.op, [self.in_unit(t, unit) for t in op.inputs], self.tensor(op.output))

    def same(self, op: Operator) -> None:
        if op.output.dtype.name == "int8":
            self.zp[op.output.name] = self.zero_point(op.inputs[0])
        self._keep(op)
        self.add(op.op, [self.tensor(t) for t in op.inputs], self.tensor(op.output),
                 **op.attrs)

    def _keep(self, op: Operator) -> float:
        """The output keeps the unit of the (first) input; a CONCAT's inputs must agree."""
        units = {self.unit.get(t.name, 1.0) for t in op.inputs if not t.is_const and
                 t.dtype.kind == "int"} or {1.0}
        if len(units) > 1:
            raise ScheduleError(f"{op.op}[{op.name}]: inputs in different units")
        unit = units.pop()
        if unit != 1.0:
            self.unit[op.output.name] = unit
        return unit

    def softmax(self, region: S.Region) -> None:
        fit, out = S.measure(region), region.exit.output
        x, name = self.tensor(region.logits), out.name
        axis, row = x.rank - 1, x.shape[:-1] + (1,)

        def made(suffix: str, shape) -> Tensor:
            return Tensor(f"{name}_{suffix}", shape, "fp32")

        top = self.add("REDUCE_MAX", [x], made("max", row), axis=axis, nan_mode="PROPAGATE")
        z = self.mul(self.add("SUB", [x, top], made("diff", x.shape)), [fit.slope],
                     made("z", x.shape))
        e = self.add("EXP", [z], made("exp", x.shape))
        total = self.add("REDUCE_SUM", [e], made("sum", row), axis=axis)
        scale = self.mul(self.add("RECIPROCAL", [total], made("inverse", row)), [fit.scale],
                         made("k", row))
        y = self.add("MUL", [e, scale, Tensor(f"{name}_y_shift", [1], "int8", [0])],
                     made("y", x.shape))
        self.zp[name] = int(region.exit.scalar("output_zp"))
        self.add("CLAMP", [y], self.tensor(out), min_val=fit.low, max_val=fit.high,
                 nan_mode="PROPAGATE")
        self.notes[name] = [f"the int8 softmax of {region.logits.name} ({len(region.ops)} "
                            f"integer operators) as {fit}"]


RULES = {"CONV2D": _Rewrite.matrix, "DEPTHWISE_CONV2D": _Rewrite.matrix,
         "MATMUL": _Rewrite.matrix, "RESCALE": _Rewrite.rescale, "CLAMP": _Rewrite.clamp,
         "AVG_POOL2D": _Rewrite.avg_pool, "PAD": _Rewrite.pad, "ADD": _Rewrite.add_sub,
         "SUB": _Rewrite.add_sub, **{name: _Rewrite.same for name in SAME}}


def dequantise(graph: Graph) -> Rewritten:
    """The FP32 graph in LSB units that computes ``graph``, with each integer tensor's zero
    point and unit and the notes on what was measured (see the module docstring)."""
    regions = S.find(graph)
    region_of = {id(op): region for region in regions for op in region.ops}
    rewrite = _Rewrite(graph, wide_unit(graph, set(region_of)))
    for op in graph:
        region = region_of.get(id(op))
        if region is not None:
            if op is region.exit:
                rewrite.softmax(region)
            continue
        rule = RULES.get(op.op)
        if rule is None:
            raise ScheduleError(f"{op.op}[{op.name}]: integer-only arithmetic has no float "
                                "equivalent operator by operator (dequantise supports "
                                f"{', '.join(sorted(RULES))} and the int8 softmax)")
        rule(rewrite, op)
    offsets = {t.name: rewrite.zero_point(t) if t.dtype.name == "int8" else 0
               for t in graph.tensors.values() if t.name in rewrite.tensors and not t.is_const}
    return Rewritten(Graph(rewrite.ops, [rewrite.tensor(t) for t in graph.inputs],
                           [rewrite.tensor(t) for t in graph.outputs],
                           f"{graph.name} dequantised"), graph, offsets, rewrite.unit,
                     rewrite.notes)
