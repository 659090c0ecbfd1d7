"""An integer softmax, as the TOSA converters lower it, recognised and measured as a float one.

TOSA has no SOFTMAX: the converters lower an int8 softmax to integer arithmetic (a RESCALE of
the logits to int32, REDUCE_MAX, SUB, an exp from TABLEs on the difference, REDUCE_SUM, CLZ,
shifts and a Newton-Raphson reciprocal in MUL, ADD and SUB, a RESCALE to int8). Operator by
operator that arithmetic has no float counterpart; the region as a whole is

    y = K softmax(c x)        x: the int8 logits in LSB units, y: the output in LSB units

``find`` recognises a region: a RESCALE of an int8 tensor to int32 read by a REDUCE_MAX, and
every operator downstream of it up to the first int8 result. It must be closed (its only
non-constant input is the logits, no inner tensor is read outside it or is a graph output),
end in one RESCALE to int8 shaped like the logits, and hold a SUB of the maximum and a
REDUCE_SUM. ``measure`` finds the two constants with the reference model: c from the exp
stage (the operators from that SUB to the REDUCE_SUM) run on every difference 0..-255 and
fitted as E(d) = E(0) e^(c d) in the log domain, refused if it strays from that by more than
1/256 of E(0); K from the whole region run on 256 rows of random logits (spreads from 1 to 255
LSB), fitted where the output is not saturated. ``Softmax.fit_lsb`` is the largest difference
between K softmax(c x) and the region's output over those rows, in output LSB (its rounding
included).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hwsim.errors import HwsimError, ScheduleError
from hwsim.tosa.ir import Graph, Operator, Tensor

ROWS = 256          # probe rows for K
EXP_TOLERANCE = 1 / 256


@dataclass(frozen=True)
class Region:
    head: Operator      # RESCALE of the int8 logits to int32
    maximum: Operator   # REDUCE_MAX of the head's output
    ops: list           # every operator of the region, in topological order
    exit: Operator      # the RESCALE to int8 that gives the probabilities

    @property
    def logits(self) -> Tensor:
        return self.head.input


@dataclass(frozen=True)
class Softmax:
    """y = scale * softmax(slope * x), clamped to [low, high] (the output type in LSB units)."""

    slope: float        # c, per LSB of the logits
    scale: float        # K, output LSB per unit of probability
    low: float
    high: float
    fit_lsb: float      # the largest difference from the integer region on the probe rows

    def __str__(self) -> str:
        return (f"{self.scale:.4g} softmax({self.slope:.4g} x), within {self.fit_lsb:.2g} LSB "
                f"of the integer softmax on {ROWS} random rows")


def find(graph: Graph) -> list[Region]:
    """The integer softmax regions of ``graph`` (module docstring)."""
    regions = []
    for op in graph:
        head = graph.producer(op.inputs[0]) if op.op == "REDUCE_MAX" else None
        if head is not None and head.op == "RESCALE" and head.input.dtype.name == "int8":
            region = _region(graph, head, op)
            if region is not None:
                regions.append(region)
    return regions


def _region(graph: Graph, head: Operator, maximum: Operator) -> Region | None:
    members, frontier, exits = {id(head)}, [head.output], []
    while frontier:
        for user in graph.consumers(frontier.pop()):
            if id(user) in members:
                continue
            members.add(id(user))
            if user.output.dtype.name == "int8":   # the probabilities: the region ends
                exits.append(user)
            else:
                frontier.append(user.output)
    ops = [op for op in graph if id(op) in members]
    inner = {op.output.name for op in ops if all(op is not e for e in exits)}
    closed = all(t.is_const or t.name in inner or t.name == head.input.name
                 for op in ops for t in op.inputs)
    leaks = any(id(user) not in members for name in inner for user in graph.consumers(name)) \
        or any(t.name in inner for t in graph.outputs)
    kinds = {op.op for op in ops}
    if not closed or leaks or len(exits) != 1 or exits[0].op != "RESCALE" or \
            exits[0].output.shape != head.input.shape or not {"SUB", "REDUCE_SUM"} <= kinds:
        return None
    return Region(head, maximum, ops, exits[0])


def measure(region: Region) -> Softmax:
    """The constants of ``region`` as a float softmax (module docstring)."""
    slope = _slope(region)
    zp = int(region.exit.scalar("output_zp"))
    dt = region.exit.output.dtype
    low, high = float(dt.min - zp), float(dt.max - zp)
    x = _rows(region.logits)
    y = _run(region.ops, region.logits, x, lambda s: (len(x),) + tuple(s[1:])).astype(
        np.float64) - zp
    z = slope * (x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    free = y < high
    scale = float((y[free] * p[free]).sum() / (p[free] ** 2).sum())
    fit = float(np.abs(np.clip(scale * p, low, high) - y).max())
    return Softmax(slope, scale, low, high, fit)


def _slope(region: Region) -> float:
    """c of the exp stage E(d) = E(0) e^(c d), from E at every difference 0..-255."""
    ops = region.ops
    sub = next((op for op in ops if op.op == "SUB" and op.inputs[0].name ==
                region.head.output.name and op.inputs[1].name == region.maximum.output.name),
               None)
    total = next(op for op in ops if op.op == "REDUCE_SUM")
    if sub is None:
        raise ScheduleError(f"{region.exit.op}[{region.exit.name}]: an integer softmax without "
                            "a SUB of its maximum")
    stage = _between(ops, sub.output, total.inputs[0])
    d = np.arange(-255, 1)
    e = _run(stage, sub.output, d.reshape((1,) * (sub.output.rank - 1) + (-1,)),
             lambda s: tuple(s[:-1]) + (d.size,)).reshape(-1).astype(np.float64)
    ratio = e / e[-1]
    used = (ratio >= 1 / 256) & (d < 0)
    if e[-1] <= 0 or not used.any():
        raise ScheduleError(f"{total.op}[{total.name}]: the softmax's exp stage gives "
                            f"{e[-1]:g} at 0 and nothing resolved below it")
    logs = np.log(ratio[used])
    slope = float((d[used] @ logs) / (d[used] @ d[used]))
    stray = float(np.abs(ratio - np.exp(slope * d)).max())
    if stray > EXP_TOLERANCE:
        raise ScheduleError(f"{total.op}[{total.name}]: the softmax's exp stage is not "
                            f"exponential: {stray:.3g} of its peak away from e^({slope:.4g} d)")
    return slope


def _between(ops: list, start: Tensor, end: Tensor) -> list:
    """The operators of ``ops`` on a path from tensor ``start`` to tensor ``end``."""
    after = {start.name}
    for op in ops:
        if any(t.name in after for t in op.inputs):
            after.add(op.output.name)
    before, stage = {end.name}, []
    for op in reversed(ops):
        if op.output.name in before and op.output.name in after and op.output.name != start.name:
            stage.insert(0, op)
            before.update(t.name for t in op.inputs)
    return stage


def _rows(logits: Tensor) -> np.ndarray:
    """ROWS rows of int8 logits, spread over 1 to 255 LSB (fixed seed)."""
    rng = np.random.default_rng(0)
    n = logits.shape[-1]
    spread = np.linspace(1, 255, ROWS).round().astype(np.int64)[:, None]
    centre = rng.integers(-128, 128, (ROWS, 1))
    x = np.clip(centre + rng.integers(0, 1 << 16, (ROWS, n)) % (spread + 1) - spread // 2,
                -128, 127)
    return x.reshape((ROWS,) + tuple(logits.shape[1:])).astype(np.int8)


def _run(ops: list, given: Tensor, values: np.ndarray, shape) -> np.ndarray:
    """``ops`` rebuilt with every non-constant tensor shaped ``shape(old shape)``, run on the
    reference model from ``given`` = ``values``; the last operator's output."""
    from hwsim.tosa.reference import run_graph
    made: dict[str, Tensor] = {}

    def tensor(t: Tensor) -> Tensor:
        if t.is_const:
            return t
        if t.name not in made:
            made[t.name] = Tensor(t.name, shape(t.shape), t.dtype)
        return made[t.name]

    rebuilt = [op.on([tensor(t) for t in op.inputs], [tensor(t) for t in op.outputs])
               for op in ops]
    try:
        graph = Graph(rebuilt, [tensor(given)], [rebuilt[-1].output], "softmax probe")
        return run_graph(graph, [values.astype(given.dtype.np)])[rebuilt[-1].output.name]
    except HwsimError as exc:
        raise ScheduleError(f"{ops[-1].op}[{ops[-1].name}]: cannot measure the integer "
                            f"softmax on the reference model: {exc}") from None
