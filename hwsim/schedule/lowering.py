"""What a machine lowering implements, and the shared pieces every lowering uses.

A lowering turns a TOSA graph into a program for one machine. It implements ``Lowering``:

* ``target``, ``modes`` (numeric modes, the default first), ``operators`` (the TOSA operators
  it can lower at all), ``compute_units`` (engine units whose busy time is compute),
  ``movement_ports`` (ports of transfers to and from the memories outside the compute units'
  local memory), ``levels`` (report memory level -> the ports whose bytes it counts) and
  ``weight_bits`` (the weight widths it can requantise to; default 8 only);
* ``unsupported(op, options)``: why ``op`` cannot run (None if it can). ``layers`` calls it on
  every operator first, so a graph with an unsupported operator fails with a
  ``ScheduleError`` naming it before anything is simulated;
* ``fuse(graph, options)``: operators grouped into layers (``group`` does it from a merge
  predicate: a producer's layer joins its only consumer when the predicate allows);
* ``lower(graph, layers, machine, options)``: a ``Lowered`` program, each instruction tagged
  with the layer it belongs to, with the memory image to load before the run, where the graph
  inputs and outputs live, and where each layer's output can be read once its writers have
  committed (``Checkpoint``);
* ``text(instruction)``: the instruction as a trace line (for ``hwsim compile``), or
  ``lines(program)``: the whole program's (default: ``text`` of each instruction);
* optionally ``rewrite(graph, options)`` (a ``Rewritten``: the graph it actually runs; for an
  integer graph run in float LSB units, also the integer graph and its zero points, so that
  the scheduler feeds integer inputs, rounds results back and judges them against it) and
  ``compute_types(options)`` (the narrower float format it computes in, for ``--check``);
* ``roofs(params)``: the machine's compute peaks (MAC/cycle) and memory bandwidths
  (bytes/cycle) by name, for the roofline plot;
* ``machine_params``: parameter values its programs are meant to run with (overridable);
* optionally ``default_mode(graph)`` (the mode when none is given; default: the first),
  ``bit_exact(mode)`` (whether that mode must match the reference bit for bit; default: the
  mode named ``exact``) and ``judge(layers, values, feeds, options)`` (verdicts of the layers
  the lowering judges itself; default: none, the scheduler's judgement,
  ``hwsim.schedule.check``).

The scheduler (``hwsim.schedule``) does the rest the same way for every machine: it runs the
program once, attributes time and bytes to layers from the engine's logs, checks each layer
against the TOSA reference and reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from hwsim.errors import ConfigError, ScheduleError
from hwsim.tosa.ir import Graph, Operator, Tensor


@dataclass(frozen=True)
class Options:
    """What the user chose: numeric ``mode``, NE16-style ``weight_bits`` (2..8), machine
    parameter overrides, and whether the datapaths run (``numerics=False``: timing only)."""

    mode: str = ""
    weight_bits: int = 8
    params: dict = field(default_factory=dict)
    numerics: bool = True


@dataclass(frozen=True)
class Rewritten:
    """The graph a lowering runs in place of the one it was given (``Lowering.rewrite``).
    ``source``: the integer graph that ``graph`` computes in float LSB units, or None (the
    graph runs as given); for its integer tensors, ``offsets``: the zero point their float
    values omit, and ``units``: LSB per float unit where that is not 1 (q = value * unit +
    offset); ``notes``: tensor name -> what the rewrite made of it, for the report row of the
    layer producing it."""

    graph: Graph
    source: Graph | None = None
    offsets: dict = field(default_factory=dict)
    units: dict = field(default_factory=dict)
    notes: dict = field(default_factory=dict)


@dataclass
class Layer:
    """TOSA operators fused into one unit of work; ``ops`` in topological order, the last one
    producing the layer's output."""

    index: int
    ops: list

    @property
    def name(self) -> str:
        return self.ops[-1].name

    @property
    def output(self) -> Tensor:
        return self.ops[-1].output

    @property
    def kind(self) -> str:
        return "+".join(op.op for op in self.ops)

    @property
    def macs(self) -> int:
        return sum(op.macs for op in self.ops)

    @property
    def inputs(self) -> list[Tensor]:
        """Non-constant tensors the layer reads from outside itself, in order of first use."""
        inside = {op.output.name for op in self.ops}
        seen: dict[str, Tensor] = {}
        for op in self.ops:
            for t in op.inputs:
                if not t.is_const and t.name not in inside:
                    seen.setdefault(t.name, t)
        return list(seen.values())


# storage of TOSA types in memory (little-endian)
STORAGE = {"int8": np.dtype("i1"), "int16": np.dtype("<i2"), "int32": np.dtype("<i4"),
           "uint8": np.dtype("u1"), "uint16": np.dtype("<u2"), "fp16": np.dtype("<f2"),
           "fp32": np.dtype("<f4")}


@dataclass(frozen=True)
class Placement:
    """A tensor in a machine memory: contiguous, row-major, each value stored as
    ``value + offset`` in ``storage`` (e.g. int8 values offset by 128 as uint8). A float
    storage holds the values rounded to it (e.g. FP32 values kept as FP16); no offset."""

    space: str
    addr: int
    dtype: str              # TOSA element type of the values
    shape: tuple
    offset: int = 0
    storage: str = ""       # STORAGE key; default: dtype

    @property
    def raw_dtype(self) -> np.dtype:
        return STORAGE[self.storage or self.dtype]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.raw_dtype.itemsize

    def encode(self, values: np.ndarray) -> np.ndarray:
        if self.raw_dtype.kind == "f":
            return np.asarray(values, np.float64).astype(self.raw_dtype)
        return (np.asarray(values, np.int64) + self.offset).astype(self.raw_dtype)

    def decode(self, raw: np.ndarray) -> np.ndarray:
        stored = np.asarray(raw, np.uint8).view(self.raw_dtype)
        if self.raw_dtype.kind == "f":
            return stored.astype(STORAGE[self.dtype]).reshape(self.shape)
        values = stored.astype(np.int64) - self.offset
        return values.astype(STORAGE[self.dtype]).reshape(self.shape)

    def reshaped(self, shape: tuple) -> "Placement":
        return Placement(self.space, self.addr, self.dtype, tuple(shape), self.offset,
                         self.storage)


@dataclass(frozen=True)
class Checkpoint:
    """Where a layer's output can be read, and after which instructions: every op of the
    ``writers`` (instruction indices) has committed. No writers: before the run starts."""

    place: Placement
    writers: frozenset = frozenset()


@dataclass
class Lowered:
    """A lowered program and what the scheduler needs to run and judge it."""

    program: object                     # a list of instructions, or a machine's arrays (SME)
    layer_of: object                    # layer index of each instruction: a list or an array
    image: list                         # (space, addr, uint8 bytes) loaded before the run
    inputs: dict                        # graph input name -> Placement
    outputs: dict                       # graph output name -> Placement
    checkpoints: dict                   # layer index -> Checkpoint
    units: dict                         # layer index -> units it uses, e.g. ("ne16", "dma")
    notes: dict = field(default_factory=dict)    # layer index -> [text]
    params: dict = field(default_factory=dict)   # machine parameters the program assumes
    rewritten: Rewritten | None = None           # what the scheduler lowered, when rewritten


class Lowering:
    """The interface of a machine lowering (see the module docstring)."""

    target: str = ""
    modes: tuple = ()
    operators: frozenset = frozenset()
    compute_units: tuple = ()
    movement_ports: tuple = ()
    levels: dict = {}
    machine_params: dict = {}
    weight_bits: tuple = (8,)   # weight widths it can requantise to

    def options(self, mode: str | None = None, weight_bits: int = 8, params=None,
                numerics: bool = True) -> Options:
        mode = mode or self.modes[0]
        if mode not in self.modes:
            raise ConfigError(f"{self.target}: numeric mode {mode!r}; expected one of "
                              f"{', '.join(self.modes)}")
        if int(weight_bits) not in self.weight_bits:
            lo, hi = min(self.weight_bits), max(self.weight_bits)
            raise ConfigError(f"{self.target}: weight bits: expected "
                              f"{lo if lo == hi else f'{lo}..{hi}'}, found {weight_bits}")
        return Options(mode, int(weight_bits), dict(params or {}), numerics)

    def unsupported(self, op: Operator, options: Options) -> str | None:
        raise NotImplementedError

    def rewrite(self, graph: Graph, options: Options) -> Rewritten:
        """The graph the lowering runs (default: as given); the scheduler feeds, runs and
        judges this graph (e.g. HMX's dequantise mode turns an int8 graph into a float one,
        and the ``Rewritten`` says how to go back to the int8 model's values)."""
        return Rewritten(graph)

    def compute_types(self, options: Options) -> tuple[str, str] | None:
        """(element type, accumulator type) the machine computes float layers in, when it is
        narrower than the graph's: a float layer outside its graph type's bound is judged
        again as that type's operator, to tell the format's error from a wrong result."""
        return None

    def fuse(self, graph: Graph, options: Options) -> list[Layer]:
        raise NotImplementedError

    def lower(self, graph: Graph, layers: list[Layer], machine, options: Options) -> Lowered:
        raise NotImplementedError

    def text(self, instr) -> str:
        raise NotImplementedError

    def lines(self, program) -> list[str]:
        return [self.text(instr) for instr in program]

    def roofs(self, params) -> dict:
        raise NotImplementedError

    def default_mode(self, graph: Graph) -> str:
        return self.modes[0]

    def stored_weight_bits(self, graph: Graph, options: Options) -> int | None:
        """The width weights are requantised to, where this lowering requantises them (its
        ``weight_bits`` offers a choice) and ``graph`` is integer; else None: the weights keep
        the graph's own type, and a report names no width."""
        integer = not any(t.dtype.is_float for op in graph for t in op.inputs + op.outputs)
        return options.weight_bits if len(self.weight_bits) > 1 and integer else None

    def bit_exact(self, mode: str) -> bool:
        return mode == "exact"

    def judges(self, layer: Layer, options: Options) -> bool:
        """Whether the lowering judges ``layer`` itself (``judge``). Default: none."""
        return False

    def golden(self, layer: Layer, feeds: dict, options: Options, made: dict) -> tuple:
        """For a layer the lowering judges, the reference run its ``judge`` needs, given the
        layer's input values: (a layer of the same index, its input values by name). ``made``:
        kept between calls, for the tensors they make (runs of several layers together must
        share a tensor the layers share)."""
        raise NotImplementedError

    def judge(self, layers: list[Layer], values: dict, feeds: dict, options: Options,
              early) -> dict:
        """Verdicts (layer index -> Verdict) of the layers the lowering judges itself
        (``judges``), given every layer's simulated output and inputs (``values[index]``,
        ``feeds[index][name]``) and the runs ``golden`` gave submitted during the simulation
        (``hwsim.schedule.goldens.Ahead``); the scheduler judges the rest. Default: none."""
        return {}

    def layers(self, graph: Graph, options: Options) -> list[Layer]:
        """Check every operator, then fuse: a ``ScheduleError`` names the first operator the
        machine cannot run."""
        for op in graph:
            reason = (f"the {self.target} lowering has no {op.op}"
                      if op.op not in self.operators else self.unsupported(op, options))
            if reason:
                raise ScheduleError(f"{op.op}[{op.name}]: cannot run on {self.target}: "
                                    f"{reason}")
        return self.fuse(graph, options)


def group(graph: Graph, merge: Callable[[list, Operator], bool]) -> list[Layer]:
    """Layers from merging each operator's layer into its only consumer where ``merge(members,
    consumer)`` allows (``members``: the operators of the producer's layer so far, the
    producer last); never across a graph output or a tensor read twice. Layers are ordered by
    their last operator, which keeps them in a topological order."""
    users: dict[str, list[Operator]] = {}
    for op in graph:
        for name in dict.fromkeys(t.name for t in op.inputs):
            users.setdefault(name, []).append(op)
    outputs = {t.name for t in graph.outputs}
    members: dict[int, list[Operator]] = {}
    roots = []
    for op in graph:                     # topological: every producer is settled first
        mine = members.pop(id(op), []) + [op]
        readers = users.get(op.output.name, [])
        if (len(op.outputs) == 1 and len(readers) == 1 and op.output.name not in outputs
                and merge(mine, readers[0])):
            members.setdefault(id(readers[0]), []).extend(mine)
        else:
            roots.append(mine)
    order = {id(op): i for i, op in enumerate(graph)}
    roots.sort(key=lambda ops: order[id(ops[-1])])
    return [Layer(i, sorted(ops, key=lambda op: order[id(op)])) for i, ops in enumerate(roots)]
