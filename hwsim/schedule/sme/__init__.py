"""The SME lowering: TOSA graphs onto the Arm SME machine (``hwsim.targets.sme``).

``gemm``: GEMM kernels on ZA tiles in four numeric modes; ``layers``: each TOSA operator as
program pieces (dot products as pack + GEMM + bias, the rest as vector routines) and where
things live in ``mem``; ``numerics``: the verdicts of the BF16 modes. This module is the
``Lowering`` (``hwsim.schedule.lowering``).

Layers (``fuse``), in int8 graphs as on GAP9: a CONV2D, DEPTHWISE_CONV2D or MATMUL with the
RESCALE and CLAMP after it, and chains of elementwise operators of one shape (a residual
block's RESCALEs and ADD, a softmax's tables and shifts), each judged on its last output; a
RESHAPE is a view of its input (no instruction); every other operator, and every float
operator (judged by its own TOSA rule), alone. Numeric modes: ``fp32`` (FMOPA), ``bf16-widening``
(BFMOPA into fp32 tiles) and ``bf16`` (non-widening BFMOPA into BF16 tiles) for fp32 graphs,
``int8`` (SMOPA/SUMOPA, RESCALE exact on the vector side) for quantised graphs; the default
follows the graph's types. Memory: one flat ``mem``; constants at its top, every tensor and
scratch buffer placed first-fit by lifetime (a layer output lives until its last reader).
"""

from __future__ import annotations

import functools
import operator
from dataclasses import replace

import numpy as np

from hwsim.isa import sme
from hwsim.schedule.lowering import Checkpoint, Lowered, Lowering, Placement, group
from hwsim.schedule.sme import layers as sl
from hwsim.schedule.sme.gemm import MODES
from hwsim.schedule.sme.judge_bf16 import bf16_golden, judge_bf16
from hwsim.targets.sme.program import ROUTINE, SmeProgram

FLOAT_MODES = ("fp32", "bf16-widening", "bf16")
DATAPATH = {"fp32": "fp32", "bf16-widening": "wide16", "bf16": "b16b16", "int8": "int8"}
BASE = 0x1000          # mem below this stays unused (a null page)
STORES = [form.word for form in sme.FORMS if form.op in ("st1_za", "st1_z")]
# the opcode bits every store has (one test a word cuts the program down to its stores)
STORE_MASK = functools.reduce(operator.and_, (w.const_mask for w in STORES)) & ~functools.reduce(
    operator.or_, (w.const_bits ^ STORES[0].const_bits for w in STORES))
STORE_BITS = STORES[0].const_bits & STORE_MASK
ELEMENTWISE = frozenset({"ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "RESCALE", "CLAMP", "TABLE",
                         "CLZ", "ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT"})


def _merge(members: list, consumer) -> bool:
    """Integer layers only (a float layer is judged by its one operator's rule): a matrix
    operator + RESCALE + CLAMP; chains of elementwise operators of one shape."""
    head, last = members[0], members[-1]
    if not all(t.dtype.is_int for op in members + [consumer] for t in op.outputs):
        return False
    if head.op in sl.DOT_OPS:
        return (len(members) == 1 and consumer.op == "RESCALE") or (
            len(members) == 2 and consumer.op == "CLAMP")
    return all(op.op in ELEMENTWISE for op in members + [consumer]) and \
        consumer.output.shape == last.output.shape


def _view(layer) -> bool:
    return [op.op for op in layer.ops] == ["RESHAPE"]


class SmeLowering(Lowering):
    target = "sme"
    modes = FLOAT_MODES + ("int8",)
    operators = sl.OPERATORS
    compute_units = ("mx", "vec")
    movement_ports = ("load0", "load1", "store")
    levels = {"mem": ("load0", "load1", "store")}
    machine_params: dict = {}

    def default_mode(self, graph) -> str:
        floats = any(t.dtype.is_float for t in graph.tensors.values())
        return "fp32" if floats else "int8"

    def bit_exact(self, mode: str) -> bool:
        return mode == "int8"

    def unsupported(self, op, options) -> str | None:
        float_mode = options.mode in FLOAT_MODES
        for t in op.inputs + op.outputs:
            if t.is_const and op.op not in sl.DOT_OPS:
                continue            # shifts, zero points, tables, multipliers
            if float_mode and t.dtype.name != "fp32":
                return f"tensor {t.name} is {t.dtype.name}; mode {options.mode} takes fp32 " \
                       "graphs (int8 graphs: --mode int8)"
            if not float_mode and not t.dtype.is_int:
                return f"tensor {t.name} is {t.dtype.name}; mode int8 takes integer graphs " \
                       "(fp32 graphs: --mode fp32, bf16-widening or bf16)"
        if op.op in sl.DOT_OPS:
            return sl.dot_unsupported(op)
        return None

    def fuse(self, graph, options):
        return group(graph, _merge)

    def lower(self, graph, layers, machine, options) -> Lowered:
        return _Lower(graph, layers, machine, options).lowered()

    def judges(self, layer, options) -> bool:
        """BF16 dot products are judged on BF16 operands (``judge``); the rest by the scheduler,
        as TOSA says."""
        return options.mode.startswith("bf16") and layer.ops[-1].op in sl.DOT_OPS

    def golden(self, layer, feeds, options, made) -> tuple:
        return bf16_golden(layer.index, layer.ops[-1], feeds, made)

    def judge(self, layers, values, feeds, options, early) -> dict:
        """The BF16 dot products (``judges``), all in one go."""
        dots = [layer for layer in layers if self.judges(layer, options)]
        if not dots:
            return {}
        found = judge_bf16([(layer.index, layer.ops[-1], values[layer.index],
                             feeds[layer.index]) for layer in dots], options.mode, early)
        return {layer.index: replace(verdict, detail="; ".join(filter(None, (verdict.detail,
                                                                               note))))
                for layer, (verdict, note) in zip(dots, found)}

    def lines(self, program: SmeProgram) -> list[str]:
        """Each distinct word disassembled once; the routines as ``vec`` lines."""
        unique, inverse = np.unique(program.words, return_inverse=True)
        texts = np.array(["" if word == ROUTINE else sme.disassemble(int(word))
                          for word in unique], object)
        lines = texts[inverse]
        for position, routine in program.routines.items():
            lines[position] = str(routine)
        return lines.tolist()

    def roofs(self, params) -> dict:
        """The outer-product peaks (modes sharing a rate share a line) and ``mem``'s ports
        together (the level counts loads and stores)."""
        peaks: dict = {}
        for mode, path in DATAPATH.items():
            peaks.setdefault(getattr(params, f"{path}_macs_per_cycle"), []).append(mode)
        ports = params.load_ports * params.load_port_bytes_per_cycle + \
            params.store_port_bytes_per_cycle
        return {"peaks": {f"mx {'/'.join(modes)}": peak for peak, modes in peaks.items()},
                "bandwidths": {"mem": ports}}


class _Lower:
    """One lowering run: places the tensors by lifetime and emits each layer."""

    def __init__(self, graph, layers, machine, options):
        self.graph, self.layers, self.options = graph, layers, options
        end = machine.params.mem_size
        self.e = sl.Emitter(MODES[options.mode], machine.state.svl_bytes, sl.Memory(BASE, end))
        self.refs: dict = {}
        self.root = {}                   # tensor -> the tensor whose bytes it shares (views)
        self.last = self._lifetimes()

    def _lifetimes(self) -> dict:
        """The last layer that reads each tensor's bytes (views extend their root's)."""
        last = {t.name: layer.index for layer in self.layers for t in layer.inputs}
        end = len(self.layers)
        for t in self.graph.outputs:
            last[t.name] = end
        for layer in reversed(self.layers):
            if _view(layer):
                source = layer.ops[0].inputs[0].name
                last[source] = max(last.get(source, 0), last.get(layer.output.name, 0))
        return last

    def lowered(self) -> Lowered:
        e = self.e
        for t in self.graph.inputs:
            self.refs[t.name] = e.tensor(sl.DTYPE[t.dtype.name], t.shape, self.last.get(t.name, 0))
        e.builder.words([sme.assemble("smstart")])
        units, notes, ends = {}, {}, []
        spans = {}       # tensor -> the instructions that write it (a view: its source's)
        for layer in self.layers:
            e.step = layer.index
            start = len(e.builder)
            if _view(layer):
                source = layer.ops[0].inputs[0]
                self.refs[layer.output.name] = sl.reshaped(self.refs[source.name],
                                                           layer.output.shape)
                spans[layer.output.name] = spans.get(source.name, (0, 0))
            else:
                notes[layer.index] = self._layer(layer)
                spans[layer.output.name] = (start, len(e.builder))
                units[layer.index] = ("mx", "vec") if layer.ops[0].op in sl.DOT_OPS else \
                    ("vec",)
            ends.append(len(e.builder))
        program = e.builder.program()
        writes = _writes(program)
        checkpoints = {}
        for layer in self.layers:
            start, end = spans[layer.output.name]
            writers = np.flatnonzero(writes[start:end]) + start
            checkpoints[layer.index] = Checkpoint(self._place(layer.output),
                                                  frozenset(writers.tolist()))
        layer_of = np.repeat(np.int32([layer.index for layer in self.layers]),
                             np.diff(ends, prepend=0))
        image = [("mem", addr, raw) for addr, raw in e.image]
        return Lowered(program, layer_of, image,
                       {t.name: self._place(t) for t in self.graph.inputs},
                       {t.name: self._place(t) for t in self.graph.outputs},
                       checkpoints, units, notes)

    def _layer(self, layer) -> list[str]:
        """Emit one layer: its output lives to its last reader, intermediates in scratch."""
        e, notes = self.e, []
        for op in layer.ops:
            out = op.output
            dtype = sl.DTYPE[out.dtype.name]
            self.refs[out.name] = e.tensor(dtype, out.shape, self.last.get(out.name, e.step)) \
                if op is layer.ops[-1] else e.scratch(dtype, out.shape)
            gemm = sl.lower(e, op, self.refs)
            if gemm is not None:
                notes.append(sl.gemm_note(op, gemm))
        return notes

    def _place(self, tensor) -> Placement:
        ref = self.refs[tensor.name]
        return Placement("mem", ref.addr, tensor.dtype.name, tensor.shape)


def _writes(program: SmeProgram) -> np.ndarray:
    """Which instructions write memory: ST1 of ZA slices or Z registers, and the routines."""
    found = np.zeros(len(program.words), bool)
    maybe = np.flatnonzero((program.words & STORE_MASK) == STORE_BITS)
    words, hit = program.words[maybe], np.zeros(len(maybe), bool)
    for store in STORES:
        hit |= (words & store.const_mask) == store.const_bits
    found[maybe[hit]] = True
    found[list(program.routines)] = True
    return found
