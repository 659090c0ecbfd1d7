"""The reference model's output for each layer of a model, on the inputs the simulator gave
that layer: one reference run of a graph holding a copy of each layer, its inputs fed as graph
inputs (``hwsim.schedule.check`` judges against these): ``Goldens`` runs it in this process or
submits it to the reference worker (``hwsim.tosa.background``), ``Shared`` splits it between
the two."""

from __future__ import annotations

from hwsim.tosa import background
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


class Goldens:
    """The reference output of each layer on its given inputs (``feeds[index][name]``), from
    one reference run of a graph holding a copy of each layer: submitted to the reference
    worker (``beside``) or run here, when ``result`` is first called. ``valid``: the layers'
    operators are a validated graph's (their copies are not validated again)."""

    def __init__(self, layers: list, feeds: dict, beside: bool = True, valid: bool = True):
        self.layers, self.feeds, self.valid = layers, feeds, valid
        ops, inputs, values, self.which = [], [], [], {}
        for layer in layers:
            layer_ops, layer_inputs, out = _copy(layer, f"L{layer.index}")
            ops += layer_ops
            inputs += layer_inputs
            values += [feeds[layer.index][t.name] for t in layer.inputs]
            self.which[out] = layer.index
        outputs = [t for op in ops for t in op.outputs if t.name in self.which]
        self.graph = Graph(ops, inputs, outputs, "layers", valid_ops=valid) if layers else None
        self.values = values
        self.pending = background.submit(self.graph, values) if beside and layers else None

    def result(self) -> dict:
        """Layer index -> its golden; a layer the reference rejects gets its ReferenceError."""
        if not self.layers:
            return {}
        try:
            found = self.pending.result() if self.pending is not None else \
                run_graph(self.graph, self.values)
            return {self.which[name]: value for name, value in found.items()}
        except ReferenceError:
            if len(self.layers) == 1:
                raise
        out = {}
        for layer in self.layers:                  # find the layer the reference rejects
            try:
                out.update(Goldens([layer], self.feeds, beside=False,
                                   valid=self.valid).result())
            except ReferenceError as exc:
                out[layer.index] = exc
        return out


class Shared:
    """``Goldens(layers, feeds)`` shared with the reference worker: about half of the work
    (``_halves``) submitted when made, the other half run here when ``result`` is called, at
    the same time."""

    def __init__(self, layers: list, feeds: dict, valid: bool = True):
        there, here = _halves(layers) if len(layers) > 1 else ([], layers)
        self.submitted = Goldens(there, feeds, valid=valid)
        self.here = Goldens(here, feeds, beside=False, valid=valid)

    def result(self) -> dict:
        return {**self.here.result(), **self.submitted.result()}


def _halves(layers: list) -> tuple[list, list]:
    """``layers`` in two groups of about the same reference-model work, counted as MACs and
    output elements (largest first, each to the lighter group)."""
    groups, work = ([], []), [0, 0]
    for layer in sorted(layers, key=lambda layer: -(layer.macs + layer.output.size)):
        lighter = work.index(min(work))
        groups[lighter].append(layer)
        work[lighter] += layer.macs + layer.output.size
    return groups
