"""The HMX lowering: float TOSA graphs onto the Hexagon HMX machine (``hwsim.targets.hmx``).

Float graphs run in FP16 (mode ``fp16``): convolutions, depthwise convolutions and constant-B
matrix products on HMX with their scale, bias and ReLU in the convert (planned in ``conv.py``,
written by ``layer.py``), everything else on HVX (``vector.py``); ``lower.py`` places the
tensors, streams the constants and writes the program (``program.py``). Mode ``dequantise``
first rewrites an int8 graph as an FP32 graph in LSB units (``dequantise.py``). Layers
(``merge``): a matrix operator with the RESHAPEs, the per-channel MUL and the CLAMPs after it;
every other operator alone. ``--check`` judges each
layer in FP32 and, where FP16 data puts it outside the FP32 bound, as an FP16 operator with
FP32 accumulation (``compute_types``).
"""

from __future__ import annotations

import numpy as np

from hwsim.errors import ScheduleError
from hwsim.isa.hmx import format_item
from hwsim.schedule.hmx.dequantise import dequantise
from hwsim.schedule.hmx.lower import HMX_OPS, SUPPORTED, Planner, merge, unit_of
from hwsim.schedule.lowering import (Checkpoint, Lowered, Lowering, Placement, Rewritten,
                                     group)
from hwsim.targets.hmx.machine import CheckedItem

FLOATS = ("fp32", "fp16")
UNITS = {"mpy": "mpy", "cvt": "cvt", "bias_load": "cvt", "bias_store": "cvt",
         "cvt_write": "cvt", "clracc": "mpy", "usr": "cvt", "hvx": "hvx", "dma": "dma",
         "dma_wait": "dma", "dma_fence": "dma"}


class HmxLowering(Lowering):
    target = "hmx"
    modes = ("fp16", "dequantise")
    operators = SUPPORTED
    compute_units = ("mpy", "cvt", "hvx")
    movement_ports = ("ddr",)
    levels = {"DDR": ("ddr",), "VTCM": ("vtcm.hmx", "vtcm.hvx", "vtcm.dma")}

    def rewrite(self, graph, options):
        """Dequantise mode for an integer graph (an integer input, or a RESCALE), fp16 mode
        for a float one; the other way round is a one-line error that names the mode."""
        integer = next((t for t in graph.inputs if t.dtype.is_int), None) or next(
            (op.output for op in graph if op.op == "RESCALE"), None)
        if options.mode == "dequantise":
            if integer is None:
                raise ScheduleError("--mode dequantise is for integer graphs; this one is "
                                    "float: leave --mode out (fp16)")
            return dequantise(graph)
        if integer is not None:
            raise ScheduleError(
                f"an integer graph ({integer.name} is {integer.dtype.name}): HMX runs float "
                "graphs in FP16; run it with --mode dequantise (the integers in LSB units as "
                "FP16, checked against the integer model)")
        return Rewritten(graph)

    def compute_types(self, options):
        return ("fp16", "fp32")

    def unsupported(self, op, options) -> str | None:
        for t in op.inputs + op.outputs:
            if t.dtype.kind not in ("shape",) and t.dtype.name not in FLOATS and not (
                    t.is_const and t.dtype.kind == "int" and op.op == "MUL"):
                return f"tensor {t.name} is {t.dtype.name}; HMX runs float graphs in FP16"
        if op.op in HMX_OPS and not all(t.is_const for t in op.inputs[1:]):
            return "its weights (B) are not constants: HMX weights are packed ahead of time"
        if op.op == "MUL" and op.scalar("shift") != 0:
            return "a float MUL has shift 0"
        return None if op.op != "CAST" or op.input.dtype.name in FLOATS else \
            "only casts between float types (the FP16 value is kept)"

    def fuse(self, graph, options):
        return group(graph, merge)

    def lower(self, graph, layers, machine, options) -> Lowered:
        params = machine.params.copy()
        params.update(options.params, origin="options")
        planned = Planner(graph, layers, params.as_dict()).lower()
        p = planned.program
        steps = _steps(machine, p.items)
        layer_of = [max(layer, 0) for layer in p.layer_of]
        writers = _writers(p.layer_of)
        units: dict[int, set] = {}
        for owner, kind in set(zip(layer_of, [step.item.kind for step in steps])):
            units.setdefault(owner, set()).add(kind)
        return Lowered(
            program=steps, layer_of=layer_of,
            image=[(im.space, im.addr, im.data.reshape(-1).view("u1")) for im in p.images],
            inputs={t.name: Placement("ddr", planned.inputs[t.name], t.dtype.name, t.shape)
                    for t in graph.inputs},
            outputs={t.name: Placement("ddr", planned.outputs[t.name], t.dtype.name, t.shape)
                     for t in graph.outputs},
            checkpoints=_checkpoints(graph, layers, planned, writers),
            units={i: tuple(sorted({UNITS[kind] for kind in kinds}))
                   for i, kinds in units.items()},
            notes=_notes(layers, planned),
            params={"vtcm_base": params.vtcm_base, "vtcm_size": params.vtcm_size})

    def text(self, instr) -> str:
        return format_item(getattr(instr, "item", instr))

    def roofs(self, params) -> dict:
        return {"peaks": {"HMX": 2 * 32 * 32 / params.mpy_cycles_per_vector},
                "bandwidths": {"DDR": params.ddr_bytes_per_cycle}}


def _steps(machine, items: list) -> list[CheckedItem]:
    """The items checked and planned by the machine, once per distinct instruction (the program
    makes equal instructions one item)."""
    planned: dict[int, CheckedItem] = {}
    steps = []
    for item in items:
        step = planned.get(id(item))
        if step is None:
            step = planned[id(item)] = machine.plan(item)
        steps.append(step)
    return steps


def _writers(layer_of: list) -> dict[int, list]:
    """Layer index (-1: the graph inputs) -> the indices of its instructions."""
    layers = np.asarray(layer_of, np.int64)
    order = np.argsort(layers, kind="stable")
    keys, first = np.unique(layers[order], return_index=True)
    return {int(k): part.tolist() for k, part in zip(keys, np.split(order, first[1:]))}


def _checkpoints(graph, layers, planned, writers) -> dict:
    """Each layer's FP16 output in VTCM, read once the layer's instructions have committed; for
    a layer that moves no data, its producer's (or the graph inputs' conversion)."""
    producer = {layer.output.name: layer.index for layer in layers}
    out = {}
    for layer in layers:
        source = layer.index
        while source >= 0 and unit_of(layers[source]) == "none":
            source = producer.get(layers[source].ops[0].inputs[0].name, -1)
        t = layer.output
        place = Placement("vtcm", planned.where[t.name], t.dtype.name, t.shape, storage="fp16")
        out[layer.index] = Checkpoint(place, frozenset(writers.get(source, ())))
    return out


def _notes(layers, planned) -> dict:
    """Each HMX layer's plan; the first and last layers also say what the program does before
    and after the layers, which is counted in them (a RESHAPE first costs nothing itself)."""
    notes = {i: [_note(plan) for plan in plans] for i, plans in planned.plans.items()}
    for index, what, steps in ((0, "before", planned.start),
                               (len(layers) - 1, "after", planned.finish)):
        if steps:
            notes.setdefault(index, []).insert(0, f"counts the program's work {what} the "
                                                  f"layers: {'; '.join(steps)}")
    return notes


def _note(plan) -> str:
    c = plan.conv
    form = ("kernel rows folded into channels" if plan.fold_y else
            "kernel rows as singles" if plan.singles() else "kernel rows as whole croutons")
    return (f"{c.kernel[0]}x{c.kernel[1]}{' depthwise' if c.depthwise else ''}: mask "
            f"{plan.mask:#07b}, {plan.tiles[0] * plan.tiles[1]} tiles x {c.groups} filter "
            f"groups, {plan.croutons_e} croutons deep, {form}"
            f"{', weight deep' if plan.weight_deep else ''}")
