"""The GAP9 lowering: TOSA graphs onto the cluster and NE16 (``hwsim.targets.gap9``).

Layers (``fuse``): a CONV2D, DEPTHWISE_CONV2D or MATMUL with the RESCALE and CLAMP after it;
chains of elementwise operators of one shape (a residual block's RESCALEs and ADD, a softmax's
TABLEs, shifts and ADDs); RESHAPE and identity CLAMPs as views of their input; every other
operator alone. Matrix layers go to NE16 where its modes fit (``ne16.fit``), everything else to
the cluster kernels (``cluster``), computed for real. ``plan`` decides formats, residency,
tiles and addresses and writes the program; ``external`` places what does not fit MRAM or L2
in external memory (L3).

RESCALE's INEXACT_ROUND runs as SINGLE_ROUND, which the spec says meets its error bound (TOSA
1.0 RESCALE "Precision Requirements").

Numeric modes: ``exact`` (NE16 accumulates to int32 exactly, the RESCALE runs on the cluster;
every layer bit-exact), ``ne16`` (each RESCALE fused into NE16's normalisation, with the
deviation reported per layer) and ``cluster`` (no NE16: every layer runs as int8 software kernels
on the 8 worker cores, as the GAP SDK's cluster kernels do; bit-exact, 8-bit weights only).
"""

from __future__ import annotations

from hwsim.errors import ConfigError
from hwsim.schedule.gap9 import cluster, ne16, plan, text
from hwsim.schedule.gap9.works import make
from hwsim.schedule.lowering import Lowering, group

INTEGER = {"int8", "int16", "int32"}
MATRIX = {"CONV2D", "DEPTHWISE_CONV2D", "MATMUL"}


def _off_ne16(op) -> str | None:
    """Why a matrix operator runs on the cluster rather than NE16 (None: NE16 runs it, or it
    is no matrix operator)."""
    return ne16.fit(op) if op.op in MATRIX else None


def _merge(members: list, consumer) -> bool:
    """Matrix operator + RESCALE + CLAMP; elementwise chains of one shape."""
    head, last = members[0], members[-1]
    if head.op in MATRIX:
        return (len(members) == 1 and consumer.op == "RESCALE") or (
            len(members) == 2 and consumer.op == "CLAMP")
    return (all(op.op in cluster.ELEMENTWISE for op in members)
            and consumer.op in cluster.ELEMENTWISE
            and consumer.output.shape == last.output.shape)


class Gap9Lowering(Lowering):
    target = "gap9"
    modes = ("exact", "ne16", "cluster")
    weight_bits = tuple(range(2, 9))    # NE16's weights are bit-serial
    operators = frozenset(cluster.OPERATORS)
    compute_units = ("ne16", "cluster")
    movement_ports = ("l2", "mram", "l3")
    levels = {"L3": ("l3",), "L2": ("l2",), "MRAM": ("mram",),
              "L1": ("l1.dma", "l1.ne16", "l1.cores")}
    machine_params = {"ne16_timeline": "job"}

    def options(self, mode: str | None = None, weight_bits: int = 8, params=None,
                numerics: bool = True):
        options = super().options(mode, weight_bits, params, numerics)
        if options.mode == "cluster" and options.weight_bits != 8:
            raise ConfigError(f"gap9: cluster mode runs int8 weights; weight bits: expected 8, "
                              f"found {options.weight_bits}")
        return options

    def bit_exact(self, mode: str) -> bool:
        return mode in ("exact", "cluster")

    def unsupported(self, op, options) -> str | None:
        for t in op.inputs + op.outputs:
            if t.dtype.kind != "shape" and t.dtype.name not in INTEGER:
                return f"tensor {t.name} is {t.dtype.name}; the GAP9 kernels take int8, " \
                       f"int16 and int32"
        if op.op in ("CONV2D", "DEPTHWISE_CONV2D", "MATMUL") and op.inputs[0].dtype.name \
                != "int8":
            return "matrix operators take int8 input (int16 needs an int48 accumulator)"
        if op.op == "CONCAT" and len(op.inputs) > 4:
            return f"CONCAT of {len(op.inputs)} tensors (the kernel takes up to 4)"
        return None

    def fuse(self, graph, options):
        return group(graph, _merge)

    def lower(self, graph, layers, machine, options):
        on_ne16 = options.mode != "cluster"
        works = [make(layer, on_ne16 and layer.ops[0].op in MATRIX, _off_ne16(layer.ops[0]))
                 for layer in layers]
        return plan.lower(graph, layers, works, machine, options)

    def text(self, instr) -> str:
        return text.text(instr)

    def roofs(self, params) -> dict:
        return {"peaks": {"NE16": params.ne16_products_per_cycle / 8,
                          "cluster": params.cluster_peak_macs_per_cycle},
                "bandwidths": {"L2": params.l2_bytes_per_cycle,
                               "MRAM": params.mram_bytes_per_cycle,
                               "L3": params.l3_bytes_per_cycle}}
