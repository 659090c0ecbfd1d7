"""A float run of an integer model, taken back to integers and judged as the integer model.

A lowering may run an integer graph as a float graph in LSB units (``Lowering.rewrite`` gives a
``Rewritten`` with the integer ``source`` graph and each tensor's zero point: HMX's dequantise
mode). A float value v then stands for the integer q = v * unit + zero point (the unit is 1
but for int32 tensors kept in multiples of their LSB). ``integers`` goes back: it rounds to the
nearest integer (halves up, as RESCALE rounds), adds the zero point and saturates to the
tensor's type. ``feeds`` turns the integer model's inputs into the float
graph's; ``Verdicts`` judges every layer whose output is a tensor of the integer graph against
that graph's operators for it (``layer_ops``), run by the reference model on the integers the
simulator handed the layer (its inputs rounded the same way), so that errors do not accumulate
over layers; ``outputs`` gives the graph outputs as integers and judges them against a whole
run of the integer graph. Errors are in LSB of each tensor's own type: how far FP16 execution
lands from the int8 model. Only int8 and int16 results, the model's activations, are judged:
an int32 intermediate (a residual block's sum at 2^20 times an int8 LSB) would count FP16's
rounding in LSBs no user thinks in; its effect shows in the int8 layer after it. Layers whose
output exists only in the float graph (a rescale's product before its clamp, the inside of a
softmax) have no integer verdict either.
"""

from __future__ import annotations

import numpy as np

from hwsim.schedule.goldens import Goldens
from hwsim.schedule.lowering import Layer, Rewritten
from hwsim.tosa import background
from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.judge import Verdict, judge

JUDGED = ("int8", "int16")


def integers(values: np.ndarray, tensor: Tensor, offset: int, unit: float = 1.0) -> np.ndarray:
    """Float values as ``tensor``'s integers (module docstring)."""
    dt = tensor.dtype
    q = np.floor(np.asarray(values, np.float64) * unit + 0.5) + offset
    return np.clip(q, dt.min, dt.max).astype(dt.np).reshape(tensor.shape)


def feeds(rewritten: Rewritten, inputs: dict) -> dict:
    """The integer model's inputs (name -> q) as the float graph takes them (q - zero point)."""
    return {t.name: ((np.asarray(inputs[t.name], np.float64) - rewritten.offsets[t.name]) /
                     rewritten.units.get(t.name, 1.0)).astype(t.dtype.np)
            for t in rewritten.graph.inputs}


def layer_ops(source: Graph, name: str, available: set) -> list[Operator]:
    """The operators of ``source`` that compute tensor ``name`` from the ``available`` ones
    (and constants), in topological order."""
    ops, stack, seen = [], [name], set()
    while stack:
        op = source.producer(stack.pop())
        if op is None or id(op) in seen:
            continue
        seen.add(id(op))
        ops.append(op)
        stack += [t.name for t in op.inputs if not t.is_const and t.name not in available]
    order = {id(op): i for i, op in enumerate(source)}
    return sorted(ops, key=lambda op: order[id(op)])


class Verdicts:
    """Layer index -> the verdict on its output as integers (module docstring): made with the
    simulated ``values``, their goldens' reference run submitted to the reference worker
    (``hwsim.schedule.goldens.Goldens``); ``result`` judges."""

    def __init__(self, rewritten: Rewritten, layers: list, values: dict, inputs: dict):
        source = rewritten.source
        produced = {t.name for op in source for t in op.outputs}
        known = {layer.output.name: layer.index for layer in layers
                 if layer.output.name in produced}
        given = {t.name: _integers(rewritten, inputs[t.name], t) for t in source.inputs}

        def value(t: Tensor) -> np.ndarray:
            return given[t.name] if t.name in given else \
                _integers(rewritten, values[known[t.name]], t)

        self.cases, feeds_of = [], {}
        for name, index in known.items():
            if source.tensor(name).dtype.name not in JUDGED:
                continue
            ops = layer_ops(source, name, (set(known) | set(given)) - {name})
            case = Layer(index, ops)
            self.cases.append(case)
            feeds_of[index] = {t.name: value(t) for t in case.inputs}
        self.rewritten, self.values = rewritten, values
        self.goldens = Goldens(self.cases, feeds_of)

    def result(self) -> dict:
        golden, out = self.goldens.result(), {}
        for case in self.cases:
            sim = _integers(self.rewritten, self.values[case.index], case.output)
            out[case.index] = judge(case.ops[-1], sim, golden[case.index])
        return out


def _integers(rewritten: Rewritten, values: np.ndarray, t: Tensor) -> np.ndarray:
    return integers(values, t, rewritten.offsets.get(t.name, 0), rewritten.units.get(t.name, 1))


def outputs(rewritten: Rewritten, simulated: dict) -> dict:
    """The graph outputs as the integer model's values."""
    return {t.name: _integers(rewritten, simulated[t.name], t) for t in rewritten.source.outputs}


def source_run(rewritten: Rewritten, inputs: dict) -> background.Pending:
    """A whole run of the integer graph on the integer inputs, submitted
    (``hwsim.tosa.background``)."""
    source = rewritten.source
    return background.submit(source, [_integers(rewritten, inputs[t.name], t)
                                      for t in source.inputs])


def output_verdicts(rewritten: Rewritten, simulated: dict, reference: dict) -> dict[str, Verdict]:
    """Each graph output as integers against ``reference``, the outputs of a whole run of the
    integer graph on the integer inputs (``source_run``; errors accumulate over the layers
    here)."""
    source = rewritten.source
    ints = outputs(rewritten, simulated)
    return {t.name: judge(source.producer(t), ints[t.name], reference[t.name])
            for t in source.outputs}
