"""The reference model's output for each layer of a model, on the inputs the simulator gave
that layer: one reference run of a graph holding a copy of each layer, its inputs fed as graph
inputs (``hwsim.schedule.check`` judges against these): ``Goldens`` runs it in this process or
submits it to the reference worker (``hwsim.tosa.background``), ``Shared`` splits it between
the two, ``Ahead`` submits them while the simulation is still running, as it reads the layers'
outputs."""

from __future__ import annotations

from typing import Callable

from hwsim.tosa import background
from hwsim.tosa.ir import Graph, Tensor
from hwsim.tosa.reference import ReferenceError, run_graph


def _copy(layer, tag: str, constants: dict) -> tuple[list, list, str]:
    """The layer's operators with their non-constant tensors renamed ``tag:name``, and their
    constants too where ``constants`` (name -> tensor, of the layers copied before into the
    same graph) has another of the same name (a judge's copy of an operator with rounded
    weights beside a layer reading the originals): (operators, new input tensors, output
    name)."""
    renamed: dict[str, Tensor] = {}

    def tensor(t: Tensor) -> Tensor:
        if t.is_const:
            if constants.setdefault(t.name, t) is t:
                return t
            if t.name not in renamed:
                renamed[t.name] = Tensor(f"{tag}:{t.name}", t.shape, t.dtype, t.data)
            return renamed[t.name]
        if t.name not in renamed:
            renamed[t.name] = Tensor(f"{tag}:{t.name}", t.shape, t.dtype)
        return renamed[t.name]

    ops = [op.on([tensor(t) for t in op.inputs], [tensor(t) for t in op.outputs])
           for op in layer.ops]
    inputs = [renamed[t.name] for t in layer.inputs]
    return ops, inputs, renamed[layer.output.name].name


class Goldens:
    """The reference output of each layer on its given inputs (``feeds[index][name]``), from
    one reference run of a graph holding a copy of each layer: submitted to the reference
    worker (``beside``) or run here, when ``result`` is first called. ``valid``: the layers'
    operators are a validated graph's (their copies are not validated again)."""

    def __init__(self, layers: list, feeds: dict, beside: bool = True, valid: bool = True):
        self.layers, self.feeds, self.valid = layers, feeds, valid
        ops, inputs, values, self.which, constants = [], [], [], {}, {}
        for layer in layers:
            layer_ops, layer_inputs, out = _copy(layer, f"L{layer.index}", constants)
            ops += layer_ops
            inputs += layer_inputs
            values += [feeds[layer.index][t.name] for t in layer.inputs]
            self.which[out] = layer.index
        outputs = [t for op in ops for t in op.outputs if t.name in self.which]
        self.graph = Graph(ops, inputs, outputs, "layers", valid_ops=valid) if layers else None
        self.values = values
        self.pending = background.submit(self.graph, values) if beside and layers else None

    def done(self) -> bool:
        """Whether the worker has finished the run."""
        return self.pending is not None and self.pending.done()

    def take_back(self) -> bool:
        """Take the run back from the worker if it has not started it (then ``result`` runs
        it here); whether it was."""
        return self.pending is not None and self.pending.take_back()

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
    (``_parts``) submitted when made, the other half run here when ``result`` is called, at
    the same time."""

    def __init__(self, layers: list, feeds: dict, valid: bool = True):
        there, here = _parts(layers, 2) if len(layers) > 1 else ([], layers)
        self.submitted = Goldens(there, feeds, valid=valid)
        self.here = Goldens(here, feeds, beside=False, valid=valid)

    def result(self) -> dict:
        return {**self.here.result(), **self.submitted.result()}


def _parts(layers: list, n: int) -> list[list]:
    """``layers`` in ``n`` groups (the empty ones left out) of about the same reference-model
    work, counted as MACs and output elements (largest first, each to the lightest group)."""
    groups, work = [[] for _ in range(n)], [0] * n
    for size, _, layer in sorted(((_work(layer), -i, layer) for i, layer in enumerate(layers)),
                                 reverse=True):
        lightest = work.index(min(work))
        groups[lightest].append(layer)
        work[lightest] += size
    return [group for group in groups if group]


def _work(layer) -> int:
    """A layer's reference-model work: its MACs and output elements."""
    return layer.macs + layer.output.size


def layer_feeds(layer, producer: dict, values: dict, inputs: dict) -> dict:
    """The values of ``layer``'s inputs by name: its producers' simulated outputs (``producer``:
    tensor name -> layer index, ``values``: layer index -> output) or the model's ``inputs``."""
    return {t.name: values[producer[t.name]] if t.name in producer else inputs[t.name]
            for t in layer.inputs}


PARTS = 4               # the runs ``Parts`` splits goldens in, at most
PART_WORK = 1 << 20     # and the work of each, at least: about 4 ms of the reference model's
# the work of a run ``Ahead`` submits before its share, at least: about 1 ms of the reference
# model's, as much as a run's own cost (its graph built and sent, the worker's flatbuffer)
RUN_WORK = PART_WORK // 4


def _collect(runs: list) -> dict:
    """The goldens of ``runs`` (``Goldens`` submitted in turn): each run the worker has not
    started taken back, from the last, and run here meanwhile, until it has started them all;
    then the others' results."""
    found, left = {}, list(runs)
    while left and left[-1].take_back():
        found.update(left.pop().result())
    for goldens in left:
        found.update(goldens.result())
    return found


class Parts:
    """``Goldens(layers, feeds)`` submitted as up to ``PARTS`` runs of about equal work (none
    less than ``PART_WORK``, below which splitting costs more than it saves), which the worker
    runs first to last: ``result`` takes back, from the last, each run it has not started and
    runs it here in the meantime, until it has started them all."""

    def __init__(self, layers: list, feeds: dict, valid: bool = True):
        n = min(PARTS, max(1, sum(map(_work, layers)) // PART_WORK))
        self.runs = [Goldens(part, feeds, valid=valid) for part in _parts(layers, n)]
        self._result: dict | None = None

    def result(self) -> dict:
        if self._result is None:
            self._result = _collect(self.runs)
        return self._result


class Ahead:
    """Layer goldens run while the simulation goes on, in the reference worker. Once the
    simulation has read the outputs of the layers that feed a layer (``heard``), the run
    ``make`` gives for it is made, and the runs made are submitted together as soon as the
    worker has finished those submitted before (if they are worth a run: ``RUN_WORK``), their
    work reaches a ``PARTS``-th of the whole (``PART_WORK`` at least) or every layer has its
    run: as the simulation reads the outputs one by one, the worker runs the first layers'
    goldens while it goes on, in runs that grow while it is busy (``results``: as
    ``Parts``).
    ``make(layer, feeds)``: the layer to run for ``layer`` (itself, or a copy of its operators
    as a judge runs them, with the same index) and its input values, or None if it needs no
    run of its own (``made``: layer index -> the run and its inputs, of those made).
    ``layers``: every layer of the model (``Ahead()``, with none, submits nothing); ``inputs``:
    the model's; ``valid``: as ``Goldens``."""

    def __init__(self, layers: list = (), inputs: dict | None = None,
                 make: Callable[[object, dict], tuple | None] | None = None,
                 valid: bool = True):
        self.layers, self.inputs, self.make, self.valid = list(layers), inputs, make, valid
        self.producer = {layer.output.name: layer.index for layer in self.layers}
        self.values: dict = {}
        self.waiting = {layer.index: {self.producer[t.name] for t in layer.inputs
                                      if t.name in self.producer} for layer in self.layers}
        self.readers: dict = {index: [] for index in self.producer.values()}
        for layer in self.layers:
            for index in self.waiting[layer.index]:
                self.readers[index].append(layer)
        self.made: dict = {}        # layer index -> (the layer run, its input values)
        self.batch: list = []       # the indices of runs made, not yet submitted
        self.batch_work = 0         # and their work (``_work``)
        self.runs: list = []        # the runs submitted, each a Goldens
        self.share = max(PART_WORK, sum(map(_work, self.layers)) // PARTS)
        self._result: dict | None = None
        self._make([layer for layer in self.layers if not self.waiting[layer.index]])

    def heard(self, index: int, value) -> None:
        """Layer ``index``'s simulated output is ``value``."""
        if index not in self.readers or index in self.values:
            return
        self.values[index] = value
        ready = []
        for layer in self.readers[index]:
            waits = self.waiting[layer.index]
            waits.discard(index)
            if not waits:
                ready.append(layer)
        self._make(ready)

    def _make(self, ready: list) -> None:
        """Make the runs of the layers ``ready`` (no output is awaited for them), and submit
        the runs made if the worker has finished those before and they are worth a run
        (``RUN_WORK``), or they are a share of the work, or they are the last."""
        for layer in ready:
            del self.waiting[layer.index]
            run = self.make(layer, layer_feeds(layer, self.producer, self.values, self.inputs))
            if run is not None:
                self.made[run[0].index] = run
                self.batch.append(run[0].index)
                self.batch_work += _work(run[0])
        work = self.batch_work
        if self.batch and (not self.waiting or work >= self.share or (
                work >= RUN_WORK and all(run.done() for run in self.runs))):
            self._submit(beside=True)

    def _submit(self, beside: bool) -> None:
        runs = [self.made[i] for i in self.batch]
        self.runs.append(Goldens([run for run, _ in runs],
                                 {run.index: feeds for run, feeds in runs}, beside=beside,
                                 valid=self.valid))
        self.batch, self.batch_work = [], 0

    def results(self) -> dict:
        """Layer index -> golden (or ReferenceError) of every layer made (those not yet
        submitted, of a simulation that did not tell every output, run here)."""
        if self._result is None:
            if self.batch:
                self._submit(beside=False)
            self._result = _collect(self.runs)
        return self._result
