"""Judging a simulated model against the TOSA reference model, layer by layer.

Each layer's golden is the reference model's output for that layer's operators run on the
inputs the simulator itself used (its producers' simulated outputs), so an error in one layer
does not spread into the verdicts of the next. The reference model runs at most once per set
of layer inputs: the whole graph on the model input, every tensor between its layers an
output, gives the graph outputs' goldens and the golden of every layer whose inputs are bit
for bit what that run computed for them (all of them when the simulation is exact); the other
layers run once more, together, as a graph holding a copy of each, its inputs fed as graph
inputs. Runs whose inputs are known before their results are needed go to the reference
worker (``hwsim.tosa.background``) and run meanwhile: the whole graph (and the integer model)
before the lowering and the simulation (``begin``); the goldens of a narrower compute type, and
on a machine that knows every layer's output long before its simulation ends the graph type's,
as the simulation reads the outputs that feed them (``ahead``); the rest of the narrower
type's and the integer model's before the goldens of the graph type's layers, which are
otherwise shared with the worker (``hwsim.schedule.goldens.Shared``). Verdicts are
``hwsim.tosa.judge``'s: integer results must be bit-exact, anything else "deviates" with its
error in LSB.

Float layers that are not bit-exact are judged with the TOSA precision rule of their first
operator (its dot-product, ULP or error bound) on that operator's fp64 reference and bound
(computed in-process as the reference model's precise mode defines them, ``hwsim.tosa.fp64``),
carried exactly through the rest of the layer when the rest only reshapes, clamps or multiplies
by constants (a convolution with its fused scale and ReLU); other layers by their last
operator's rule against the golden. When a machine computes in a narrower float type than the
graph's (``Lowering.compute_types``, e.g. HMX's FP16), a layer outside its graph type's bound is
judged again as that type's operator, on the same inputs rounded to it (``Verdict.narrow``):
within that bound, the deviation is the format's, not an error. A lowering may judge a layer
itself instead (``Lowering.judge``: SME's BF16 dot products, judged on BF16-rounded operands).
When the lowering ran an integer graph in float LSB units (``Rewritten.source``: HMX's
dequantise mode), every int8 layer and output is also judged as the integer model, in LSB
(``Verdict.requantised``, ``hwsim.schedule.requantise``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from hwsim.schedule import requantise
from hwsim.schedule.goldens import Ahead, Goldens, Parts, Shared, layer_feeds
from hwsim.schedule.lowering import Layer
from hwsim.tosa import background, compliance, fp64
from hwsim.tosa.dtypes import dtype as lookup
from hwsim.tosa.fp64 import references
from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.judge import Verdict, exact_count, judge, statistics
from hwsim.tosa.reference import ReferenceError

TAIL = ("RESHAPE", "IDENTITY", "CLAMP", "MUL")   # applied exactly to an fp64 reference
# the compiled passes of a float check in the order it calls them, (kernel, a call that
# compiles it) each: the fp64 references' depthwise sums, the verdicts' per-element errors
PASSES = fp64.PASSES + compliance.PASSES


def compile_passes() -> None:
    """Compile ``PASSES``, for a cold start's spare time (``hwsim.timing.warm``)."""
    for _, call in PASSES:
        call()


@dataclass(frozen=True)
class Check:
    layers: dict            # layer index -> Verdict
    outputs: dict           # graph output name -> Verdict
    golden_outputs: dict    # graph output name -> reference values


def rounded(values, np_type) -> np.ndarray:
    """Float ``values`` rounded to nearest in ``np_type``, in one cast from their own type,
    without a copy in fp64: the same as through one (each of the 2^32 float32 values that is
    not a NaN rounds to the same float16 either way; ``tests/test_schedule_check.py`` checks
    every sign and exponent with the bits that decide a normal result's rounding). A NaN stays
    a NaN, a signalling one signalling (fp64 quiets it); verdicts count NaNs of any payload as
    equal."""
    with np.errstate(over="ignore"):
        return np.asarray(values).astype(np_type)


def retyped(ops: list, dtype: str, acc: str, made: dict | None = None) -> list:
    """``ops`` with their float tensors in ``dtype`` (constants rounded to nearest), float dot
    products accumulating in ``acc`` and float CLAMP bounds rounded to ``dtype``; ``made``
    keeps the converted tensors by name, to share them between calls."""
    np_type = lookup(dtype).np.type
    made = {} if made is None else made

    def convert(t: Tensor) -> Tensor:
        if not t.dtype.is_float:
            return t
        if t.name not in made:
            data = None if t.data is None else rounded(t.data, np_type)
            made[t.name] = Tensor(t.name, t.shape, dtype, data)
        return made[t.name]

    out = []
    for op in ops:
        attrs = dict(op.attrs)
        if "acc_type" in attrs and op.output.dtype.is_float:
            attrs["acc_type"] = acc
        if op.op == "CLAMP" and op.inputs[0].dtype.is_float:
            with np.errstate(over="ignore"):
                attrs.update(min_val=float(np_type(op.min_val)),
                             max_val=float(np_type(op.max_val)))
        out.append(Operator(op.op, [convert(t) for t in op.inputs],
                            [convert(t) for t in op.outputs], attrs, op.name))
    return out


def _tail(ops: list, ref: np.ndarray, bnd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An fp64 reference and bound carried through reshapes, clamps and constant MULs."""
    for prev, op in zip(ops, ops[1:]):
        if op.op == "CLAMP":
            ref = np.clip(ref, op.min_val, op.max_val)
        elif op.op == "MUL":
            other = op.inputs[1] if op.inputs[0].name == prev.output.name else op.inputs[0]
            ref, bnd = ref * other.data, bnd * np.abs(other.data)
        ref, bnd = ref.reshape(op.output.shape), np.broadcast_to(bnd, ref.shape).reshape(
            op.output.shape)
    return ref, bnd


@dataclass
class _Float:
    """A float layer to judge: its operators, simulated output, golden and input values."""

    index: int
    ops: list
    sim: np.ndarray
    golden: np.ndarray
    feeds: dict


def _carried(ops: list) -> bool:
    """The operators after the first only reshape, clamp or multiply by constants."""
    return all(op.op in TAIL and (op.op != "MUL" or any(t.is_const for t in op.inputs))
               for op in ops[1:])


def _float_verdicts(cases: list) -> dict:
    """Verdicts of float layers (module docstring), with fp64 references and bounds computed
    in-process (``hwsim.tosa.fp64``)."""
    verdicts, pending = {}, []
    for c in cases:
        exact = exact_count(c.sim, c.golden, c.ops[-1].output.dtype)
        if exact == np.size(c.golden) or not _carried(c.ops):
            verdicts[c.index] = judge(c.ops[-1], c.sim, c.golden)
        else:
            pending.append((c, exact))
    bounds = references([(c.ops[0], c.feeds) for c, _ in pending])
    for (c, exact), (ref, bnd) in zip(pending, bounds):
        first = c.ops[0]
        ref, bnd = _tail(c.ops, ref, bnd)
        shape = first.output.shape
        x = c.feeds.get(first.inputs[0].name) if first.inputs else None
        verdicts[c.index] = judge(first, np.reshape(c.sim, shape), np.reshape(c.golden, shape),
                                  ref64=ref.reshape(shape), bnd64=bnd.reshape(shape), x=x,
                                  exact=exact)    # the tail keeps the type: the same count
    return verdicts


def _fits(ops: list, dtype: str) -> bool:
    """Every float constant of ``ops`` is within the range of ``dtype``. One beyond it (e.g. a
    dequantised int32 bias, which HMX takes in its wider bias field) would be infinite in that
    type's operator, and no bound of that type says anything about the layer."""
    top = lookup(dtype).max_normal
    return all(np.abs(t.data).max(initial=0) <= top
               for op in ops for t in op.inputs if t.is_const and t.dtype.is_float)


def _narrowing(types) -> Callable[[Layer, dict], tuple | None]:
    """The run judging a layer again as a narrower compute type ``types`` (element,
    accumulator) needs (``_Narrow``), given the layer's input values: the layer as that type's
    operators and its inputs rounded to that type, or None for a layer it does not judge (not
    a float output of a wider type, or constants that type cannot hold: ``_fits``)."""
    dtype, acc = types
    made: dict = {}

    def make(layer: Layer, feeds: dict) -> tuple | None:
        out = layer.output.dtype
        if not out.is_float or out.name == dtype or not _fits(layer.ops, dtype):
            return None
        narrow = Layer(layer.index, retyped(layer.ops, dtype, acc, made))
        return narrow, {t.name: rounded(feeds[t.name], t.dtype.np) for t in narrow.inputs}

    return make


class _Narrow:
    """The layers of ``candidates`` that a narrower compute type ``types`` may judge again
    (module docstring; ``_narrowing``): their goldens as that type's operators are submitted to
    the reference worker when made, before the graph type's verdicts say which layers deviate
    (nearly all do, where a machine computes in a narrower type), so that the reference model
    computes them meanwhile; in parts, of which this process runs those the worker has not
    started when they are wanted (``Parts``). Those ``early`` made during the simulation are
    its."""

    def __init__(self, candidates: list, feeds: dict, values: dict, types, early: Ahead):
        make, self.early, self.runs, self.sims = _narrowing(types), early, {}, {}
        for layer in candidates:
            run = early.made.get(layer.index) or make(layer, feeds[layer.index])
            if run is not None:
                self.runs[layer.index] = run
                self.sims[layer.index] = rounded(values[layer.index], run[0].output.dtype.np)
        later = [run for run, _ in self.runs.values() if run.index not in early.made]
        self.goldens = Parts(later, {run.index: self.runs[run.index][1] for run in later},
                             valid=False)

    def verdicts(self, indices: list) -> dict:
        """The verdicts of the layers ``indices`` (those of the candidates that deviate)."""
        chosen = [i for i in indices if i in self.runs]
        if not chosen:
            return {}
        golden = {**self.early.results(), **self.goldens.result()}
        return _float_verdicts([_Float(i, self.runs[i][0].ops, self.sims[i], golden[i],
                                       self.runs[i][1]) for i in chosen])


@dataclass(frozen=True)
class Begun:
    """The reference runs of a check that need only the model input (``begin``)."""

    whole: background.Pending               # the tensors between the layers
    source: background.Pending | None       # the integer graph's outputs (``requantise``)


def begin(graph: Graph, layers: list, inputs: dict, rewritten=None) -> Begun:
    """Submit the runs that need only the model input ``inputs``, to run beside the lowering
    and the simulation (``hwsim.tosa.background``): the whole graph, with the tensors between
    its ``layers`` as outputs (each layer's inputs and output: what the check compares and
    judges; not those inside a layer, which would cost the run and the transfer of its result
    only); when ``rewritten`` runs an integer graph in float LSB units, that graph on its
    integer inputs."""
    between = {t.name for layer in layers for t in layer.inputs + [layer.output]}
    whole = background.goldens(graph, [inputs[t.name] for t in graph.inputs], between)
    source = None
    if rewritten is not None and rewritten.source is not None:
        source = requantise.source_run(rewritten, inputs)
    return Begun(whole, source)


@dataclass
class Early:
    """The goldens ``ahead`` submits during the simulation: the graph type's layers' (or the
    runs the lowering's own judge needs), and a narrower compute type's (``_Narrow``)."""

    golden: Ahead = field(default_factory=Ahead)
    narrow: Ahead = field(default_factory=Ahead)

    def heard(self, index: int, value) -> None:
        """Layer ``index``'s simulated output is ``value`` (``run.simulate(heard=...)``)."""
        self.golden.heard(index, value)
        self.narrow.heard(index, value)


def ahead(graph: Graph, layers: list, inputs: dict, low, options, begun: Begun,
          program_first: bool) -> Early | None:
    """The goldens ``check`` will need for ``layers`` on the simulated values, submitted as
    the simulation reads the outputs that feed them, while it goes on (``goldens.Ahead``), or
    None if none go early. Where the machine computes in a narrower type, the layers as that
    type's (``_narrowing``). Where it runs its program before the timing (``program_first``),
    every layer's output is known long before the simulation ends, and the graph type's runs
    go too: for a layer the lowering judges itself, the run its judge needs
    (``Lowering.golden``); for the others, the layer unless the whole-graph run gives it (it
    is fed the model input only, or that run is done by then and ``_computed`` says so).
    Elsewhere the outputs come as effects replayed after the timing, and the check runs the
    graph type's itself while the worker finishes the narrower type's."""
    early = Early()
    types = low.compute_types(options)
    if types:
        narrowing = _narrowing(types)
        early.narrow = Ahead(layers, inputs, lambda layer, feeds: None if low.judges(
            layer, options) else narrowing(layer, feeds), valid=False)
    if program_first:
        whole, made, given = begun.whole, {}, {t.name for t in graph.inputs}

        def make(layer, feeds: dict) -> tuple | None:
            if low.judges(layer, options):
                return low.golden(layer, feeds, options, made)
            if graph.producer(layer.output) is layer.ops[-1] and (
                    all(t.name in given for t in layer.inputs) or
                    whole.done() and _computed(graph, layer, feeds, whole.result())):
                return None
            return layer, feeds

        early.golden = Ahead(layers, inputs, make)
    return early if types or program_first else None


def check(graph: Graph, layers: list, values: dict, outputs: dict, inputs: dict,
          low, options, rewritten=None, begun: Begun | None = None,
          early: Early | None = None) -> Check:
    """Verdicts of every layer's simulated output (``values``) and of the graph outputs, by
    the lowering ``low`` where it judges a layer itself (``Lowering.judge``), else as the
    module docstring says; when ``rewritten`` runs an integer graph in float LSB units, each
    verdict also holds the integer model's (``Verdict.requantised``, ``requantise``).
    ``begun``: the runs ``begin`` submitted for these inputs (else they are made here);
    ``early``: the goldens ``ahead`` submitted during the simulation."""
    early = early if early is not None else Early()
    begun = begun or begin(graph, layers, inputs, rewritten)
    compute_types = low.compute_types(options)
    producer = {layer.output.name: layer.index for layer in layers}
    feeds = {layer.index: layer_feeds(layer, producer, values, inputs) for layer in layers}
    verdicts = dict(low.judge(layers, values, feeds, options, early.golden))
    rest = [layer for layer in layers if layer.index not in verdicts]
    narrow = None
    if compute_types:
        narrow = _Narrow(rest, feeds, values, compute_types, early.narrow)
    requantising = rewritten is not None and rewritten.source is not None
    if requantising:
        integer = requantise.Verdicts(rewritten, layers, values, inputs)
    whole = begun.whole.result()
    golden = _goldens(graph, rest, feeds, whole, narrow is None and not requantising,
                      early.golden)
    floats = []
    for layer in rest:
        g = golden[layer.index]
        if isinstance(g, ReferenceError):
            verdicts[layer.index] = Verdict(layer.name, layer.output.dtype.name, 0, 0, 0.0,
                                            0.0, "LSB", "deviates", "reference", str(g))
        elif layer.output.dtype.is_float:
            floats.append(_Float(layer.index, layer.ops, values[layer.index], g,
                                 feeds[layer.index]))
        else:
            verdicts[layer.index] = judge(layer.ops[-1], values[layer.index], g)
    verdicts.update(_float_verdicts(floats))
    # the integer model's goldens were submitted last: asked for first, they are taken back
    # and run here if the worker is still busy with the narrower type's (Pending.result)
    integers = integer.result() if requantising else {}
    if narrow is not None:
        deviating = [c.index for c in floats if verdicts[c.index].status == "deviates"]
        for index, verdict in narrow.verdicts(deviating).items():
            verdicts[index] = replace(verdicts[index], narrow=verdict)
    reference = {t.name: whole[t.name] for t in graph.outputs}
    out_ops = {op.output.name: op for op in graph}
    out_verdicts = {name: _output_verdict(out_ops[name], outputs[name], reference[name])
                    for name in outputs if name in out_ops}
    for index, verdict in integers.items():
        verdicts[index] = replace(verdicts[index], requantised=verdict)
    if requantising:
        for name, verdict in requantise.output_verdicts(rewritten, outputs,
                                                        begun.source.result()).items():
            out_verdicts[name] = replace(out_verdicts[name], requantised=verdict)
    return Check(verdicts, out_verdicts, reference)


def _goldens(graph: Graph, layers: list, feeds: dict, whole: dict, share: bool,
             early: Ahead) -> dict:
    """Each layer's golden: its output in the whole-graph run ``whole`` (``begin``) when
    ``_computed``; else from one reference run of all the other layers (``Goldens``), or with
    ``share`` (the reference worker has nothing else to run) two at the same time, one in the
    worker (``Shared``), except those submitted during the simulation (``early``), picked up
    after that."""
    found = {layer.index: whole[layer.output.name] for layer in layers
             if _computed(graph, layer, feeds[layer.index], whole)}
    rest = [layer for layer in layers if layer.index not in found]
    later = [layer for layer in rest if layer.index not in early.made]
    found.update((Shared(later, feeds) if share else Goldens(later, feeds, beside=False)).result())
    ran = early.results() if len(later) < len(rest) else {}
    found.update((layer.index, ran[layer.index]) for layer in rest if layer.index not in found)
    return found


def _computed(graph: Graph, layer, feeds: dict, whole: dict) -> bool:
    """The whole-graph run ``whole`` gives ``layer``'s golden: the layer is the graph's
    operators and its inputs (``feeds``) are the values that run computed for them, as the
    reference model computes the same from the same."""
    return graph.producer(layer.output) is layer.ops[-1] and all(
        _identical(feeds[t.name], whole[t.name], t.dtype) for t in layer.inputs)


def _identical(a, b, dt) -> bool:
    """Two values of a tensor are the same once cast to its type (as a reference run casts its
    inputs), bit for bit: NaNs by payload, zeros by sign."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if dt.is_float:
        return np.asarray(a, dt.np).tobytes() == np.asarray(b, dt.np).tobytes()
    return bool(np.array_equal(a, b))


def _output_verdict(op: Operator, sim: np.ndarray, golden: np.ndarray) -> Verdict:
    """A graph output against the whole-graph reference. Float errors accumulate over the
    layers, which no per-operator bound covers: floats get the statistics only."""
    if not op.output.dtype.is_float:
        return judge(op, sim, golden)
    exact, max_err, mean_err = statistics(sim, golden, op.output.dtype)
    size = int(np.size(golden))
    return Verdict(f"{op.op}[{op.name}]", op.output.dtype.name, size, exact, max_err, mean_err,
                   "ULP", "exact" if exact == size else "deviates",
                   "whole graph: errors accumulate over the layers")



