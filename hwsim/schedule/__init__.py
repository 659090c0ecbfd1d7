"""The scheduler: TOSA graphs lowered onto a machine, run once, reported per layer.

``estimate(model, target, ...)`` loads (or takes) a graph, checks that the target's lowering
supports every operator, groups operators into layers, lowers them into a program for the
machine (``Lowering.lower``), runs it on the simulated machine, attributes cycles and bytes to
the layers (``run``), optionally judges every layer against the TOSA reference (``check``) and
returns a ``Report``. ``compile_model`` writes the same program as a trace ``hwsim run``
accepts. The machine-specific part is a ``Lowering`` (``hwsim.schedule.lowering``); the GAP9 one
lives in ``hwsim.schedule.gap9``.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from hwsim.errors import ConfigError, ScheduleError
from hwsim.schedule import requantise
from hwsim.schedule.lowering import Lowered, Lowering, Rewritten
from hwsim.schedule.report import LayerRow, Report
from hwsim.timing import warm
from hwsim.tosa.ir import Graph
from hwsim.tosa.reference import metered

# target -> "module:class" of its lowering (one line per machine)
LOWERINGS = {"gap9": "hwsim.schedule.gap9:Gap9Lowering",
             "hmx": "hwsim.schedule.hmx:HmxLowering",
             "sme": "hwsim.schedule.sme:SmeLowering"}


def lowering(target: str) -> Lowering:
    if target not in LOWERINGS:
        raise ConfigError(f"no scheduler for target {target!r}; expected one of "
                          f"{', '.join(LOWERINGS)}")
    module, name = LOWERINGS[target].split(":")
    return getattr(importlib.import_module(module), name)()


def _graph(model) -> tuple[Graph, str]:
    if isinstance(model, Graph):
        return model, model.name
    from hwsim.tosa import load_graph
    return load_graph(model), Path(model).name


def _inputs(graph: Graph, inputs) -> dict:
    """Graph input name -> array: given (an array, a list, a dict, a .npy path) or a
    deterministic random sample (uniform in the int type's range, or in [-1, 1) for floats)."""
    from hwsim.tosa.models import sample_input
    from hwsim.tosa.reference import graph_inputs
    if inputs is None:
        rngs = [np.random.default_rng(i) for i in range(len(graph.inputs))]
        inputs = [sample_input(graph)] if len(graph.inputs) == 1 else [
            rng.uniform(-1, 1, t.shape).astype(t.dtype.np) if t.dtype.is_float else
            rng.integers(t.dtype.min, t.dtype.max + 1, t.shape)
            for rng, t in zip(rngs, graph.inputs)]
    elif isinstance(inputs, (str, Path)):
        inputs = np.load(inputs)
    arrays = graph_inputs(graph, inputs)
    return {t.name: a for t, a in zip(graph.inputs, arrays)}


def _machine(low: Lowering, overrides: dict):
    """A fresh machine with the architectural overrides, and the run's timing parameters."""
    from hwsim.targets import machine_class
    cls = machine_class(low.target)
    arch, timing = cls.PARAMS.split(dict(overrides))
    return cls(**arch), {**low.machine_params, **timing}


def _configuration(machine, low: Lowering, overrides: dict) -> tuple[dict, dict]:
    """Every parameter the run's machine has, with its value, and who set those that are not
    the machine's defaults: "lowering" (``Lowering.machine_params``) or "user" (overrides)."""
    values = machine.params.copy()
    values.update(low.machine_params, origin="lowering")
    values.update(overrides, origin="user")
    return values.as_dict(), {row.name: origin for row, _, origin in values.rows()
                              if origin in ("lowering", "user")}


@contextlib.contextmanager
def _no_cycle_collection():
    """Pause the cyclic garbage collector (as ``Engine.run`` does): an estimate makes many
    short-lived objects, and the collector's scans of them cost more than the work."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class Prepared(NamedTuple):
    """A model loaded, checked, fused and lowered, ready to run (``prepare``)."""

    graph: Graph            # as lowered (after the lowering's rewrite)
    name: str               # the model's name (its file name)
    lowering: Lowering
    options: object         # the lowering's options (mode, weight bits, machine parameters)
    machine: object         # a fresh machine with the architectural overrides
    run_params: dict        # the run's timing parameters
    layers: list
    lowered: Lowered


def _warm_up(target: str, mode: str, graph: Graph, program_first: bool, numerics: bool) -> None:
    """On a cold numba cache, compile in a child process the half of the work this process
    needs last (``hwsim.timing.warm``): for a machine that runs its program before the timing,
    SME's first kernels (``hwsim.targets.sme.warm``), the timing core and the attribution's
    kernels; else the machine's kernels (``hwsim.schedule.warm``; not for a timing-only run,
    which calls none), and this process the attribution's; on HMX, whose kernels take the
    longer, it then compiles part of the child's (``hwsim.targets.hmx.warm``)."""
    if program_first:
        from hwsim.targets.sme.warm import child_args
        warm.start("core", [sys.executable, "-m", "hwsim.schedule.warm", "core",
                            *child_args(mode, numerics)])
        return
    if not numerics:
        return
    share = None
    if target == "hmx":       # HMX's share ends with the check's compiled passes
        from hwsim.targets.hmx.warm import share as hmx_share
        from hwsim.schedule.check import PASSES
        share = hmx_share(mode, PASSES)
    dtype = "fp32" if graph.inputs and graph.inputs[0].dtype.is_float else "int8"
    if warm.start("kernels", [sys.executable, "-m", "hwsim.schedule.warm", target, mode, dtype],
                  share):
        from hwsim.schedule.run import compile_attribution
        compile_attribution()       # this process's share while the child compiles


def prepare(model, target: str = "gap9", mode: str | None = None, weight_bits: int = 8,
            params: dict | None = None, numerics: bool = True,
            cache: dict | None = None, warm_up: bool = False, begin=None) -> Prepared:
    """Load, check, fuse and lower. ``cache``: see ``estimate``; ``warm_up``: on a cold numba
    cache, compile what the run will need in a second process meanwhile
    (``hwsim.schedule.warm``); ``begin(rewritten, layers)``: called with the lowering's
    rewrite of the graph (``Rewritten``) and its layers before the lowering itself."""
    if cache is not None and (numerics or not isinstance(model, Graph)):
        # a program may hold the memories of the machine it was lowered for (HMX's DMA
        # copies): only a timing-only run, which moves no data, can reuse it on a fresh machine
        raise ConfigError("a lowering cache is for timing-only estimates (numerics=False) of "
                          "a loaded graph (hwsim.load_graph)")
    graph, name = _graph(model)
    low = lowering(target)
    options = low.options(mode or low.default_mode(graph), weight_bits, params, numerics)
    machine, run_params = _machine(low, options.params)
    if warm_up:
        _warm_up(target, options.mode, graph, machine.program_first(), numerics)
    # the lowerings read the graph, the mode, the weight bits and the machine's architectural
    # parameters (memory sizes and bases, SME's vector length), never a timing parameter
    key = (graph, target, options.mode, options.weight_bits,
           tuple((row.name, value) for row, value, _ in machine.params.rows()
                 if row.kind == "arch"))
    if cache is not None and key in cache:
        graph, layers, lowered = cache[key]
        return Prepared(graph, name, low, options, machine, run_params, layers, lowered)
    rewritten = low.rewrite(graph, options)
    graph = rewritten.graph
    layers = low.layers(graph, options)
    if begin is not None:
        begin(rewritten, layers)
    lowered = low.lower(graph, layers, machine, options)
    lowered.rewritten = rewritten
    for layer in layers:        # what the rewrite made of a layer comes first
        if layer.name in rewritten.notes:
            lowered.notes[layer.index] = rewritten.notes[layer.name] + lowered.notes.get(
                layer.index, [])
    if cache is not None:
        cache[key] = graph, layers, lowered
    return Prepared(graph, name, low, options, machine, run_params, layers, lowered)


def _feeds(rewritten: Rewritten, inputs) -> dict:
    """The run's inputs: those of the graph given to the lowering (``_inputs``), turned into
    the float graph's when it runs an integer graph in LSB units."""
    if rewritten.source is None:
        return _inputs(rewritten.graph, inputs)
    return requantise.feeds(rewritten, _inputs(rewritten.source, inputs))


def estimate(model, target: str = "gap9", *, mode: str | None = None, weight_bits: int = 8,
             params: dict | None = None, check: bool = False, inputs=None,
             numerics: bool = True, progress=None, name: str | None = None,
             engine: str | None = None, cache: dict | None = None) -> Report:
    """Lower ``model`` (a Graph or a model file) onto ``target``, run it and report per layer.
    ``mode``: the lowering's numeric mode; ``weight_bits``: requantise weights (2..8);
    ``params``: machine parameter overrides; ``check``: judge every layer against the TOSA
    reference (needs ``numerics``); ``inputs``: the model input (default: a fixed random
    sample); ``numerics=False``: timing only; ``progress(ops, cycle)``: called while running;
    ``engine``: ``compiled`` (default) or ``simpy`` (the reference twin, identical results);
    ``cache``: a dict that keeps lowered programs between timing-only calls on the same Graph
    object (a call that differs only in timing parameters reuses the lowering on a fresh
    machine)."""
    if check and not numerics:
        raise ConfigError("--check needs the datapaths: drop --no-numerics")
    with _no_cycle_collection():
        return _estimate(model, target, mode, weight_bits, params, check, inputs, numerics,
                         progress, name, engine, cache)


def _estimate(model, target, mode, weight_bits, params, check, inputs, numerics, progress,
              name, engine, cache) -> Report:
    from hwsim.schedule.check import ahead
    from hwsim.schedule.check import begin as begin_check
    from hwsim.schedule.check import check as judge
    from hwsim.schedule.run import attribute, simulate
    wall = {}
    feeds = begun = None

    def begin(rewritten: Rewritten, layers: list) -> None:  # the check's runs beside the lowering
        nonlocal feeds, begun
        feeds = _feeds(rewritten, inputs)
        begun = begin_check(rewritten.graph, layers, feeds, rewritten)

    start = time.perf_counter()
    graph, model_name, low, options, machine, run_params, layers, lowered = prepare(
        model, target, mode, weight_bits, params, numerics, cache,
        warm_up=engine in (None, "compiled"), begin=begin if check else None)
    if feeds is None:
        feeds = _feeds(lowered.rewritten, inputs)
    wall["lower"] = time.perf_counter() - start
    # the layer goldens of a mode that is not bit-exact run beside the simulation
    early = ahead(graph, layers, feeds, low, options, begun, machine.program_first(engine)) \
        if check and not low.bit_exact(options.mode) else None
    sim = simulate(lowered, machine, feeds, run_params, numerics, progress, engine,
                   early.heard if early else None)
    wall["simulate"] = sim.seconds
    start = time.perf_counter()
    stats = attribute(sim.result, lowered, low, len(layers))
    rows = [_row(layer, stats["layers"][layer.index], lowered) for layer in layers]
    values, origins = _configuration(machine, low, options.params)
    report = Report(model=name or model_name, target=low.target, mode=options.mode,
                    weight_bits=low.stored_weight_bits(graph, options),
                    clock_hz=sim.result.clock_hz, cycles=sim.result.cycles, layers=rows,
                    totals=stats["totals"], params=values, param_origins=origins,
                    outputs=_outputs(lowered, sim), numerics=numerics, result=sim.result)
    wall["attribute"] = time.perf_counter() - start
    if check:
        start = time.perf_counter()
        with metered() as reference:
            verdicts = judge(graph, layers, sim.values, sim.outputs, feeds, low, options,
                             lowered.rewritten, begun, early)
        wall["check"] = time.perf_counter() - start - reference[0]
        wall["reference"] = reference[0]        # the reference model's runs in the check
        for row in rows:
            row.verdict = verdicts.layers[row.index]
        report.output_verdicts = verdicts.outputs
    report.wall = wall
    return report


def _outputs(lowered: Lowered, sim) -> dict:
    """The graph outputs as the model given has them (integers, for an integer model run in
    float LSB units)."""
    rewritten = lowered.rewritten
    if not sim.outputs or rewritten is None or rewritten.source is None:
        return sim.outputs
    return requantise.outputs(rewritten, sim.outputs)


def _row(layer, stats: dict, lowered: Lowered) -> LayerRow:
    return LayerRow(index=layer.index, name=layer.name, kind=layer.kind,
                    shape=layer.output.shape, units=lowered.units.get(layer.index, ()),
                    cycles=stats["cycles"], span=stats["span"], macs=layer.macs,
                    peak_macs_per_cycle=stats["peak"], bytes=stats["bytes"],
                    compute_cycles=stats["compute"], movement_cycles=stats["movement"],
                    bound=stats["bound"], overlap=stats["overlap"], split=stats["split"],
                    notes=lowered.notes.get(layer.index, []))


def compile_model(model, path, target: str = "gap9", *, mode: str | None = None,
                  weight_bits: int = 8, params: dict | None = None, inputs=None,
                  name: str | None = None) -> Path:
    """Write the lowered program as a trace ``hwsim run`` accepts: the parameters, the memory
    image and inputs as ``.load`` data files beside it, the instructions with a comment at each
    layer, and in a bit-exact mode ``.expect`` lines with the reference model's outputs."""
    from hwsim.schedule.trace import write_trace
    graph, model_name, low, options, machine, run_params, layers, lowered = prepare(
        model, target, mode, weight_bits, params)
    feeds = _feeds(lowered.rewritten, inputs)
    expected = None
    if low.bit_exact(options.mode):
        from hwsim.tosa.reference import run_graph
        expected = run_graph(graph, [feeds[t.name] for t in graph.inputs])
    return write_trace(Path(path), low, options, graph, name or model_name, layers, lowered,
                       feeds, expected, {**options.params, **run_params})


__all__ = ["estimate", "compile_model", "prepare", "Prepared", "lowering", "Report", "Lowering",
           "ScheduleError", "LOWERINGS"]
