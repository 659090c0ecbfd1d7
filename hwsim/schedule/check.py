"""Judging a simulated model against the TOSA reference model, layer by layer.

Each layer's golden is the reference model's output for that layer's operators run on the
inputs the simulator itself used (its producers' simulated outputs), so an error in one layer
does not spread into the verdicts of the next. All layers are judged in one reference run: a
graph holding a copy of every layer, its inputs fed as graph inputs. The graph outputs are
also judged against a whole-graph reference run on the model input. Verdicts are
``hwsim.tosa.judge``'s: integer results must be bit-exact, anything else "deviates" with its
error in LSB.
"""

from __future__ import annotations

from dataclasses import dataclass



from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.judge import Verdict, judge
from hwsim.tosa.reference import ReferenceError, run_graph


@dataclass(frozen=True)
class Check:
    layers: dict            # layer index -> Verdict
    outputs: dict           # graph output name -> Verdict
    golden_outputs: dict    # graph output name -> reference values


def _copy(layer, tag: str) -> tuple[list, list, str]:
    """The layer's operators with their non-constant tensors renamed ``tag:name``: (operators,
    new input tensors, output name)."""
    renamed: dict[str, Tensor] = {}

    def tensor(t: Tensor) -> Tensor:
        if t.is_const:
            return t
        if t.name not in renamed:
            renamed[t.name] = Tensor(f"{tag}:{t.name}", t.shape, t.dtype)
        return renamed[t.name]

    ops = [Operator(op.op, [tensor(t) for t in op.inputs], [tensor(t) for t in op.outputs],
                    op.attrs) for op in layer.ops]
    inputs = [renamed[t.name] for t in layer.inputs]
    return ops, inputs, renamed[layer.output.name].name


def goldens(layers: list, feeds: dict) -> dict:
    """The reference output of each layer on its given inputs (``feeds[index][name]``), from
    one reference run; a layer the reference rejects gets its ReferenceError instead."""
    ops, inputs, outputs, values, which = [], [], [], [], {}
    for layer in layers:
        layer_ops, layer_inputs, out = _copy(layer, f"L{layer.index}")
        ops += layer_ops
        inputs += layer_inputs
        values += [feeds[layer.index][t.name] for t in layer.inputs]
        which[out] = layer.index
    outputs = [t for op in ops for t in op.outputs if t.name in which]
    try:
        found = run_graph(Graph(ops, inputs, outputs, "layers"), values)
        return {which[name]: value for name, value in found.items()}
    except ReferenceError:
        if len(layers) == 1:
            raise
    out = {}
    for layer in layers:                       # find the layer the reference rejects
        try:
            out.update(goldens([layer], feeds))
        except ReferenceError as exc:
            out[layer.index] = exc
    return out


def check(graph: Graph, layers: list, values: dict, outputs: dict, inputs: dict) -> Check:
    """Verdicts of every layer's simulated output (``values``) and of the graph outputs."""
    producer = {layer.output.name: layer.index for layer in layers}
    feeds = {layer.index: {t.name: values[producer[t.name]] if t.name in producer
                           else inputs[t.name] for t in layer.inputs} for layer in layers}
    golden = goldens(layers, feeds)
    verdicts = {}
    for layer in layers:
        g = golden[layer.index]
        if isinstance(g, ReferenceError):
            verdicts[layer.index] = Verdict(layer.name, layer.output.dtype.name, 0, 0, 0.0,
                                            0.0, "LSB", "deviates", "reference", str(g))
        else:
            verdicts[layer.index] = judge(layer.ops[-1], values[layer.index], g)
    reference = run_graph(graph, [inputs[t.name] for t in graph.inputs])
    out_ops = {op.output.name: op for op in graph}
    out_verdicts = {name: judge(out_ops[name], outputs[name], reference[name])
                    for name in outputs if name in out_ops}
    return Check(verdicts, out_verdicts, reference)



