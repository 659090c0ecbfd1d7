"""Judging SME layers in each numeric mode against the TOSA 1.0 rules.

``fp32`` and ``int8`` layers are judged as the graph says (the scheduler's default judge):
int8 must be bit-exact, fp32 within the operator's TOSA bound. In the BF16 modes a dot product
multiplies BF16 operands (the activations and weights rounded to nearest even by the packing),
so its reference is the same operator on those rounded operands (bias kept fp32, as the vector
side adds it), in fp64 from the reference model:

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

from typing import Mapping

import numpy as np

from hwsim.targets.sme.layouts import bf16_bits, bf16_values
from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.judge import Verdict, dot_product_shape, judge
from hwsim.tosa.numerics import DotProductRule, check_dot_product

DOT_OPS = ("CONV2D", "DEPTHWISE_CONV2D", "MATMUL")


def bf16_round(values) -> np.ndarray:
    """fp32 values rounded to BF16, as fp32 (what the packing step gives the outer products)."""
    return bf16_values(bf16_bits(values))


def rounded_operator(op: Operator) -> tuple[Graph, Operator]:
    """A one-operator graph of ``op`` whose fp32 constant operands are rounded to BF16 (the
    bias stays fp32)."""
    bias = op.inputs[2].name if op.op in ("CONV2D", "DEPTHWISE_CONV2D") else None
    rounded = {t.name: Tensor(t.name, t.shape, t.dtype, bf16_round(t.data))
               for t in op.inputs if t.is_const and t.dtype.name == "fp32" and t.name != bias}
    inputs = [rounded.get(t.name, t) for t in op.inputs]
    single = Operator(op.op, inputs, op.outputs, op.attrs, op.name)
    graph = Graph([single], list(dict.fromkeys(t for t in inputs if not t.is_const)),
                  op.outputs, f"bf16:{op.name}")
    return graph, single


def judge_bf16(op: Operator, sim: np.ndarray, values: Mapping[str, np.ndarray], mode: str,
               rule: DotProductRule = DotProductRule()) -> tuple[Verdict, str]:
    """The verdict on a dot product's simulated output in a BF16 mode, and a note ("" or how
    far a non-widening layer is from the fp32-accumulation bounds)."""
    from hwsim.tosa.reference import reference_fp64, run_operator
    single_graph, single = rounded_operator(op)
    rounded = {t.name: bf16_round(values[t.name]) for t in single_graph.inputs}
    golden = run_operator(single_graph, single, rounded)[op.output.name]
    ref64, bnd64 = reference_fp64(single_graph, single, rounded)
    fp32 = judge(single, sim, golden, ref64=ref64, bnd64=bnd64, rule=rule)
    if mode == "bf16-widening":
        return fp32, ""
    out = Tensor(op.output.name, op.output.shape, "bf16")
    as_bf16 = Operator(op.op, single.inputs, [out], op.attrs, op.name)
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
