"""The reference model's output for each layer of a model, on the inputs the simulator gave
that layer: one reference run of a graph holding a copy of each layer, its inputs fed as graph
inputs (``hwsim.schedule.check`` judges against these)."""

from __future__ import annotations

from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.reference import ReferenceError, run_graph


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
    one reference run of a graph holding a copy of each layer; a layer the reference rejects
    gets its ReferenceError instead."""
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
