"""Judging SME layers in each numeric mode against the TOSA 1.0 rules.

``fp32`` and ``int8`` layers are judged as the graph says (the scheduler's default judge):
int8 must be bit-exact, fp32 within the operator's TOSA bound. In the BF16 modes a dot product
multiplies BF16 operands (the activations and weights rounded to nearest even by the packing),
so its reference is the same operator on those rounded operands (bias kept fp32, as the vector
side adds it): the golden from the reference model (one run for all the layers), the fp64
reference and bound from ``hwsim.tosa.fp64``:

* ``bf16-widening`` accumulates in fp32 tiles and stores fp32: it is judged by the fp32 dot-product
  rule (accumulator and output fp32), the bound TOSA sets for BF16 inputs with an fp32
  accumulator;
* ``bf16`` (non-widening BFMOPA) accumulates in BF16 tiles. TOSA has no BF16 accumulator: a BF16
  dot product must accumulate in fp32 (``acc_type``), so the layer is judged by that rule with a
  BF16 output (errors in BF16 units), and the verdict's note says by how much it misses it and the
  fp32-output bound (``max |err| / ABS_BOUND``).

Operators other than dot products compute in fp32 in every float mode and are judged as fp32.
"""

from __future__ import annotations

import numpy as np

from hwsim.schedule.goldens import Ahead, Shared
from hwsim.schedule.lowering import Layer
from hwsim.targets.sme.layouts import bf16_bits, bf16_values
from hwsim.tosa.fp64 import references
from hwsim.tosa.ir import Operator, Tensor
from hwsim.tosa.judge import Verdict, dot_product_shape, judge
from hwsim.tosa.compliance import DotProductRule, check_dot_product
from hwsim.tosa.reference import ReferenceError

DOT_OPS = ("CONV2D", "DEPTHWISE_CONV2D", "MATMUL")


def bf16_round(values) -> np.ndarray:
    """fp32 values rounded to BF16, as fp32 (what the packing step gives the outer products)."""
    return bf16_values(bf16_bits(values))


def rounded_operator(op: Operator, made: dict | None = None) -> Operator:
    """``op`` with its fp32 constant operands rounded to BF16 (the bias stays fp32); ``made``
    keeps the rounded tensors by name, to share them between calls."""
    bias = op.inputs[2].name if op.op in ("CONV2D", "DEPTHWISE_CONV2D") else None
    made = {} if made is None else made
    for t in op.inputs:
        if t.is_const and t.dtype.name == "fp32" and t.name != bias and t.name not in made:
            made[t.name] = Tensor(t.name, t.shape, t.dtype, bf16_round(t.data))
    inputs = [made.get(t.name, t) if t.is_const else t for t in op.inputs]
    return op.on(inputs, op.outputs, op.name)


def bf16_golden(index: int, op: Operator, values: dict, made: dict | None = None) \
        -> tuple[Layer, dict]:
    """The reference run that judges the dot product ``op`` (of layer ``index``) in a BF16 mode,
    given its input values by name: the operator on BF16-rounded operands, as a layer, and
    its input values rounded to BF16; ``made`` as in ``rounded_operator``."""
    layer = Layer(index, [rounded_operator(op, made)])
    return layer, {t.name: bf16_round(values[t.name]) for t in layer.inputs}


def judge_bf16(cases: list, mode: str, early: Ahead | None = None,
               rule: DotProductRule = DotProductRule()) -> list[tuple[Verdict, str]]:
    """The verdict on each (layer index, dot product, simulated output, its input values by
    name) in a BF16 mode, and a note ("" or how far a non-widening layer is from the
    fp32-accumulation bounds). The goldens are those ``early`` ran (the runs ``bf16_golden``
    says, submitted during the simulation) or come from one reference run, the fp64
    references and bounds from ``hwsim.tosa.fp64``."""
    early, made, layers, feeds = early or Ahead(), {}, [], {}
    for index, op, _, values in cases:
        layer, feeds[index] = early.made.get(index) or bf16_golden(index, op, values, made)
        layers.append(layer)
    shared = Shared([layer for layer in layers if layer.index not in early.made], feeds)
    bounds = references([(layer.ops[0], feeds[layer.index]) for layer in layers])
    golden = shared.result()
    if len(golden) < len(layers):
        golden = {**early.results(), **golden}
    failed = next((golden[layer.index] for layer in layers
                   if isinstance(golden[layer.index], ReferenceError)), None)
    if failed is not None:
        raise failed
    return [_verdict(layer.ops[0], sim, golden[layer.index], ref64, bnd64, mode, rule)
            for layer, (_, _, sim, _), (ref64, bnd64) in zip(layers, cases, bounds)]


def _verdict(single: Operator, sim, golden, ref64, bnd64, mode: str, rule: DotProductRule) \
        -> tuple[Verdict, str]:
    fp32 = judge(single, sim, golden, ref64=ref64, bnd64=bnd64, rule=rule)
    if mode == "bf16-widening":
        return fp32, ""
    out = Tensor(single.output.name, single.output.shape, "bf16")
    as_bf16 = Operator(single.op, single.inputs, [out], single.attrs, single.name)
    verdict = judge(as_bf16, sim, golden, ref64=ref64, bnd64=bnd64, rule=rule)
    return verdict, "BF16 accumulation vs the fp32-output bound: " + miss(single, sim, ref64,
                                                                          bnd64, rule)


def miss(op: Operator, sim, ref64, bnd64, rule: DotProductRule) -> str:
    """How far ``sim`` is from ``op``'s dot-product bound: ``max |err| / ABS_BOUND`` (< 1
    passes)."""
    ks, acc, has_bias = dot_product_shape(op)
    out = op.output.dtype
    result = check_dot_product(sim, ref64, bnd64, out, rule.ksb(ks, acc, out, has_bias),
                               fp32=True, rule=rule)
    return (f"max |err| {result.max_err:.3g} vs ABS_BOUND {result.abs_bound:g} "
            f"({result.max_err / result.abs_bound:.3g}x)")
