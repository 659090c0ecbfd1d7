"""A TOSA graph lowered onto HMX: layers, VTCM placement, the program and where results are.

Float graphs (FP32 or FP16) run in FP16: every activation is an FP16 tensor in VTCM, row-major
(NHWC for images). The graph's inputs arrive in DDR in their own type; FP32 ones are brought in
by DMA and converted on HVX (``hvx_f32_to_f16``), and the outputs go back the same way. The
operators become layers, in topological order:

* CONV2D, DEPTHWISE_CONV2D and MATMUL with a constant B run on HMX (``conv.py``; MATMUL is a
  1x1 convolution of a [1, H, C] image by B's columns, one batch at a time). What follows them
  is fused (``merge``), behind RESHAPEs: a MUL by positive per-channel constants becomes the
  convert's scale, a CLAMP with lower bound 0 its shape (ReLU); other bounds, or an upper
  bound below the FP16 range, are one ``hvx_clamp`` over the layer's output.
* Everything else runs on HVX (``vector.py``, table ``VECTOR``); RESHAPE, IDENTITY and CASTs
  between float types move no data (the FP16 value is the same).

Constants (packed weights and bias sets) are placed in DDR and streamed through two VTCM buffers
for the whole program, so the next layer's weights arrive while this one computes; the float
constants of HVX operators come into VTCM at the start. Layer outputs stay in VTCM until the
end (every layer's result can be read and judged); scratch (expanded inputs, croutons) is freed
after each layer. A graph output made by an HMX layer leaves for DDR a crouton row at a time.
What HMX cannot run (integer tensors, a non-constant B) is refused before this by
``HmxLowering.unsupported``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from hwsim.isa.hmx import VECTOR_BYTES
from hwsim.schedule.hmx import conv as C
from hwsim.schedule.hmx import layer as L
from hwsim.schedule.hmx import vector as V
from hwsim.schedule.hmx.program import Arena, HmxProgram, WeightStream
from hwsim.tosa.ir import Graph, Operator, Tensor

FP16_MAX = 65504.0
ALIASES = ("RESHAPE", "IDENTITY", "CAST")
HMX_OPS = ("CONV2D", "DEPTHWISE_CONV2D", "MATMUL")


@dataclass
class Planned:
    """The program and what a caller needs around it."""

    program: HmxProgram
    where: dict[str, int]  # tensor name -> VTCM address of its FP16 values
    inputs: dict[str, int]  # graph input name -> DDR address (in the input's own type)
    outputs: dict[str, int]  # graph output name -> DDR address
    plans: dict[int, list]  # layer index -> its ConvPlans (HMX layers)
    start: list[str]  # what the program does before the first layer (counted in layer 0)
    finish: list[str]  # what it does after the last layer (counted in the last one)


def unit_of(layer) -> str:
    """Where a layer runs: "hmx", "hvx", or "none" (it moves no data)."""
    head = layer.ops[0].op
    return "hmx" if head in HMX_OPS else "none" if head in ALIASES else "hvx"


def merge(members: list[Operator], consumer: Operator) -> bool:
    """A matrix operator takes the RESHAPEs, one MUL by positive per-channel constants (before
    any CLAMP) and the CLAMPs after it: the convert's scale, its ReLU shape, and one clamp."""
    if members[0].op not in HMX_OPS:
        return False
    if consumer.op in ("RESHAPE", "CLAMP"):
        return True
    return consumer.op == "MUL" and not any(op.op in ("MUL", "CLAMP") for op in members) and \
        channel_scale(members[-1].output, consumer) is not None


def channel_scale(x: Tensor, mul: Operator) -> np.ndarray | None:
    """The per-channel factors of a MUL of ``x`` by a positive constant that varies only along
    the last axis, or None."""
    other = mul.input2 if mul.input1 is x else mul.input1
    if not other.is_const or mul.scalar("shift") != 0 or other.shape[:-1] != (1,) * (
            other.rank - 1) or other.shape[-1] not in (1, x.shape[-1]):
        return None
    values = np.broadcast_to(np.asarray(other.data, np.float64).reshape(-1), (x.shape[-1],))
    return values if np.all(values > 0) and np.all(np.isfinite(values)) else None


@dataclass(frozen=True)
class Epilogue:
    """What follows an HMX layer's dot products: per-channel ``scale`` (or None), and the
    combined clamp bounds."""

    scale: np.ndarray | None = None
    low: float = -math.inf
    high: float = math.inf


def epilogue(ops: list[Operator]) -> Epilogue:
    scale, low, high = None, -math.inf, math.inf
    for prev, op in zip(ops, ops[1:]):
        if op.op == "MUL":
            scale = channel_scale(prev.output, op)
        elif op.op == "CLAMP":
            low, high = max(low, op.min_val), min(high, op.max_val)
    return Epilogue(scale, low, high)


class Planner:
    """Lower ``graph``, grouped into ``layers`` (``hwsim.schedule.lowering.Layer``), with the
    machine's parameters (``params``: name -> value)."""

    def __init__(self, graph: Graph, layers: list, params: dict, chunk_bytes: int = 64 << 10):
        self.graph, self.layers, self.timing = graph, layers, params
        self.chunk_bytes = chunk_bytes
        self.program = HmxProgram()
        self.vtcm = Arena("VTCM", params["vtcm_base"], params["vtcm_size"])
        self.ddr = Arena("DDR", params["ddr_base"], params["ddr_size"])
        self.stream = WeightStream(self.ddr, self.vtcm)
        self.where: dict[str, int] = {}
        self.prepared: dict[int, list] = {}
        self.epilogues: dict[int, Epilogue] = {}  # HMX layer index -> what follows its products
        self.chunk_layer: list[int] = []  # the layer each streamed constant chunk belongs to
        self.start: list[str] = []
        self.finish: list[str] = []

    def lower(self) -> Planned:
        for layer in self.layers:  # constants first: the stream needs all its chunks to start
            if unit_of(layer) == "hmx":
                self._prepare(layer)
        p = self.program
        p.usr(infnan_propagate=1)  # IEEE infinities and NaNs in HMX, as HVX has them
        p.clear_accumulators()
        inputs = self._inputs()
        self.out_ddr = {t.name: self.ddr.alloc(t.nbytes, f"output {t.name}", VECTOR_BYTES)
                        for t in self.graph.outputs}
        self.streamed: set[str] = set()
        self.stream.open(p)
        if self.stream.chunks:
            self.start.append(f"the DMA of layer {self.chunk_layer[0]}'s first "
                              f"{self.stream.chunks[0][1]:,} bytes of weights started (its "
                              "bytes count here)")
        for layer in self.layers:
            p.layer = layer.index
            self._layer(layer)
        p.layer = len(self.layers) - 1
        outputs = self._outputs()
        self.stream.close()
        plans = {i: [item.plan for item in items] for i, items in self.prepared.items()}
        return Planned(p, self.where, inputs, outputs, plans, self.start, self.finish)

    # -- graph inputs and outputs ----------------------------------------------------------------
    def _constants(self) -> None:
        """Float constants that HVX layers read as data (HMX layers get theirs packed, their
        fused scales in the convert): FP16 in DDR, brought into VTCM at the start."""
        count = nbytes = 0
        for layer in self.layers:
            if unit_of(layer) != "hvx":
                continue
            for t in (t for op in layer.ops for t in op.inputs):
                if t.is_const and t.dtype.is_float and t.name not in self.where:
                    with np.errstate(over="ignore"):
                        data = np.asarray(t.data).astype(np.float16)
                    addr = self.ddr.alloc(data.nbytes, f"constant {t.name}", VECTOR_BYTES)
                    self.program.place("ddr", addr, data, t.name)
                    self.where[t.name] = self._alloc(t)
                    self.program.dma_in(self.where[t.name], addr, data.nbytes, t.name)
                    count, nbytes = count + 1, nbytes + data.nbytes
        if count:
            self.start.append(f"{count} constant{'s' * (count > 1)} of HVX layers from DDR "
                              f"({nbytes:,} bytes)")

    def _inputs(self) -> dict[str, int]:
        self._constants()
        addrs = {}
        for t in self.graph.inputs:
            addrs[t.name] = self.ddr.alloc(t.nbytes, f"input {t.name}", VECTOR_BYTES)
            self.where[t.name] = self._alloc(t)
            self.start.append(f"input {t.name} from DDR ({t.nbytes:,} bytes)" + (
                "" if t.dtype.name == "fp16" else f", converted {t.dtype.name.upper()} to "
                                                   "FP16 on HVX"))
            if t.dtype.name == "fp16":
                self.program.dma_in(self.where[t.name], addrs[t.name], t.nbytes, t.name)
                continue
            staging = self.vtcm.alloc(t.nbytes, f"staging {t.name}", VECTOR_BYTES)
            self.program.dma_in(staging, addrs[t.name], t.nbytes, t.name)
            self.program.dma_wait()
            V.cast(self.program, self.where[t.name], staging, t.size, True)
        self.program.dma_wait()
        return addrs

    def _outputs(self) -> dict[str, int]:
        p = self.program
        self.stream.flush()
        for t in self.graph.outputs:
            if t.name in self.streamed:
                continue
            src = self.where[t.name]
            if t.dtype.name == "fp32":
                src = self.vtcm.alloc(t.nbytes, f"staging {t.name}", VECTOR_BYTES)
                V.cast(p, src, self.where[t.name], t.size, False)
            p.dma_out(self.out_ddr[t.name], src, t.nbytes, t.name)
            self.finish.append(f"output {t.name} to DDR ({t.nbytes:,} bytes)" + (
                ", converted from FP16 on HVX" if t.dtype.name == "fp32" else ""))
        p.dma_wait()
        return self.out_ddr

    def _stream_out(self, tensor: Tensor, plan: C.ConvPlan, y: int, ddr: int):
        """For a graph output made by an HMX layer: each finished crouton row leaves for DDR
        while the next ones are computed (FP32 outputs once all filter groups are in)."""
        c, ny = plan.conv, plan.grid[0]
        fp32 = tensor.dtype.name == "fp32"
        staging = self.vtcm.alloc(c.h_out * c.w_out * c.k_out * 4, f"staging {tensor.name}",
                                  VECTOR_BYTES) if fp32 else 0
        p = self.program

        def unpacked(g: int, ty: int) -> None:
            rows = min(ny, c.h_out - ty * ny) * c.w_out
            first = ty * ny * c.w_out * c.k_out
            if fp32 and g == c.groups - 1:
                V.cast(p, staging + first * 4, y + first * 2, rows * c.k_out, False)
                self.stream.defer(lambda: p.dma_out(ddr + first * 4, staging + first * 4,
                                                    rows * c.k_out * 4))
            elif not fp32:
                at, chans = (first + g * C.CH) * 2, min(C.CH, c.k_out - g * C.CH)
                self.stream.defer(lambda: p.dma_out_2d(ddr + at, y + at, chans * 2, rows,
                                                       c.k_out * 2, c.k_out * 2))
        return unpacked

    def _alloc(self, t: Tensor) -> int:
        return self.vtcm.alloc(t.size * 2, f"tensor {t.name}", VECTOR_BYTES)

    # -- layers --------------------------------------------------------------------------------
    def _layer(self, layer) -> None:
        op = layer.ops[0]
        if unit_of(layer) == "none":
            self.where[op.output.name] = self.where[op.inputs[0].name]
            return
        out = self.where[layer.output.name] = self._alloc(layer.output)
        if unit_of(layer) == "hmx":
            self._hmx(layer, out)
        else:
            VECTOR[op.op](self, op, out)

    def _prepare(self, layer) -> None:
        ep = self.epilogues[layer.index] = epilogue(layer.ops)
        first = len(self.stream.chunks)
        for conv, weight, bias in _hmx_convs(layer.ops[0]):
            relu = ep.low == 0 and L.fits_fp16(bias)
            plan = C.choose(replace(conv, relu=relu), self.timing)
            self.prepared.setdefault(layer.index, []).append(
                L.prepare(self.program, self.stream, plan, weight, bias, self.chunk_bytes,
                          layer.name, ep.scale))
        self.chunk_layer += [layer.index] * (len(self.stream.chunks) - first)

    def _hmx(self, layer, out: int) -> None:
        op, x = layer.ops[0], self.where[layer.ops[0].inputs[0].name]
        prepared = self.prepared[layer.index]
        step_in = math.prod(op.inputs[0].shape[1:]) * 2
        step_out = layer.output.size // op.inputs[0].shape[0] * 2
        ep = self.epilogues[layer.index]
        low = -math.inf if prepared[0].plan.conv.relu else ep.low
        capped = low > -FP16_MAX or ep.high < FP16_MAX
        leaves = layer.output in self.graph.outputs and not capped
        for i, item in enumerate(prepared):  # one per batch
            y = out + i * step_out
            size = 4 if layer.output.dtype.name == "fp32" else 2
            unpacked = self._stream_out(layer.output, item.plan, y,
                                        self.out_ddr[layer.output.name] + i * step_out // 2 *
                                        size) if leaves else None
            L.emit(self.program, self.vtcm, self.stream, item, x + i * step_in, y, unpacked)
        if leaves:
            self.streamed.add(layer.output.name)
        if capped:
            V.unary(self.program, "CLAMP", out, out, layer.output.size, low, ep.high)


def _hmx_convs(op: Operator) -> list:
    """(Conv, weight, bias) per batch image of an HMX operator."""
    if op.op == "MATMUL":  # constant weights: HmxLowering.unsupported made sure
        n, h, c = op.A.shape
        w = op.B.shape[2]
        b = op.const("B")  # rounded to FP16 once, when packed
        return [(C.Conv(1, h, c, w), b[i].T[:, None, None, :], np.zeros(w))
                for i in range(n)]
    n, h, w, c = op.input.shape
    depthwise = op.op == "DEPTHWISE_CONV2D"
    kernel = op.weight.shape[:2] if depthwise else op.weight.shape[1:3]
    conv = C.Conv(h, w, c, op.output.shape[3], tuple(kernel), tuple(op.stride), tuple(op.pad),
                  tuple(op.dilation), depthwise)
    bias = np.broadcast_to(op.const("bias").astype(np.float64), (conv.k_out,))
    return [(conv, op.const("weight"), bias)] * n


# -- HVX operators: (planner, operator, output address) ------------------------------------------

def _binary(lw: Planner, op: Operator, out: int) -> None:
    V.binary(lw.program, lw.vtcm, op.op, out, lw.where[op.input1.name],
             lw.where[op.input2.name], op.input1.shape, op.input2.shape, op.output.shape)


def _unary(lw: Planner, op: Operator, out: int) -> None:
    bounds = (op.min_val, op.max_val) if op.op == "CLAMP" else ()
    V.unary(lw.program, op.op, out, lw.where[op.inputs[0].name], op.output.size, *bounds)


def _reduce(lw: Planner, op: Operator, out: int) -> None:
    V.reduce(lw.program, op.op, out, lw.where[op.input.name], op.input.shape, op.axis)


def _avg_pool(lw: Planner, op: Operator, out: int) -> None:
    V.avg_pool(lw.program, out, lw.where[op.input.name], op.input.shape, op.kernel, op.stride,
               op.pad)


def _slice(lw: Planner, op: Operator, out: int) -> None:
    V.slice_(lw.program, out, lw.where[op.input1.name], op.input1.shape,
             op.const("start").tolist(), op.output.shape)


def _pad(lw: Planner, op: Operator, out: int) -> None:
    V.pad(lw.program, out, lw.where[op.input1.name], op.input1.shape,
          op.const("padding").tolist(), float(op.scalar("pad_const")))


def _concat(lw: Planner, op: Operator, out: int) -> None:
    V.concat(lw.program, out, [lw.where[t.name] for t in op.input1], [t.shape for t in op.input1],
             op.axis)


def _transpose(lw: Planner, op: Operator, out: int) -> None:
    V.transpose(lw.program, out, lw.where[op.input1.name], op.input1.shape, op.perms)


VECTOR = {"ADD": _binary, "SUB": _binary, "MUL": _binary, "CLAMP": _unary, "EXP": _unary,
          "RECIPROCAL": _unary, "REDUCE_SUM": _reduce, "REDUCE_MAX": _reduce,
          "AVG_POOL2D": _avg_pool, "SLICE": _slice, "PAD": _pad, "CONCAT": _concat,
          "TRANSPOSE": _transpose}
SUPPORTED = frozenset(VECTOR) | frozenset(HMX_OPS) | frozenset(ALIASES)
