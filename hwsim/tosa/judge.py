"""A verdict per layer: is a simulated output exact, TOSA-compliant, or does it deviate?

``judge`` compares one operator's simulated output with its golden (the reference model's
output for the same inputs) and applies the operator's TOSA 1.0 precision rule from
``hwsim.tosa.compliance``; ``judge_layer`` first gets that golden (and, for a floating-point
result that is not bit-exact, the fp64 reference and dot-product bound) from the reference
model. Verdicts: ``exact`` (every element bit-identical; NaNs of any payload count as equal),
``compliant`` (not bit-exact, but within the operator's TOSA bound; never for integers, which
must be exact), ``deviates`` (outside it), each with the counts and error figures (LSB for
integers; for floats ULP of the golden, or for a dot product ULP of the size of its terms
against the fp64 reference) that ``str(verdict)`` prints on one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from hwsim.errors import HwsimError
from hwsim.tosa.compliance import (ABS_BOUND_OPS, DOT_OPS, ULP_OPS, DotProductRule,
                                   abs_error_bound, check_cast_fp, check_dot_product, check_fp,
                                   check_fp_bnd, lsb_error, ulp_error)
from hwsim.tosa.dtypes import DType, dtype
from hwsim.tosa.ir import Graph, Operator


@dataclass(frozen=True)
class Verdict:
    layer: str
    dtype: str
    count: int
    exact: int            # bit-exact elements
    max_err: float        # in ``unit``
    mean_err: float
    unit: str             # "LSB" or "ULP"
    status: str           # "exact", "compliant" or "deviates"
    check: str            # the rule that decided
    detail: str = ""
    narrow: "Verdict | None" = None   # the same result judged in a narrower compute type
    requantised: "Verdict | None" = None   # rounded to the integer model's type, against it

    def __str__(self) -> str:
        return f"{self.layer}: {self.brief(detail=True)}"

    def brief(self, detail: bool = False) -> str:
        """The verdicts on one line, the one that matters most first: against the integer
        model (``requantised``), as the machine's compute type (``narrow``), then in the
        graph's own type; e.g. ``compliant as fp16 (max 1 ULP, 11779/16384 bit-exact); fp32:
        deviates (max 4.45e+03 ULP, 2052/16384 bit-exact)``. ``detail`` adds the mean errors
        and each rule with its figures."""
        parts = []
        if (q := self.requantised) is not None:
            parts.append(f"{q.dtype} " + ("exact" if q.exact == q.count else
                                          f"within {q.max_err:g} LSB ({q.exact}/{q.count} "
                                          "equal" + (f", mean {q.mean_err:.3g} LSB" if detail
                                                     else "") + ")"))
        if (n := self.narrow) is not None:
            parts.append(n._phrase(detail, f" as {n.dtype}"))
        parts.append(f"{self.dtype}: {self._phrase(detail)}" if parts else self._phrase(detail))
        return "; ".join(parts)

    def _phrase(self, detail: bool, label: str = "") -> str:
        if self.status == "exact":
            return "exact" + label
        text = (f"{self.status}{label} (max {self.max_err:.3g} {self.unit}, {self.exact}/"
                f"{self.count} bit-exact")
        if detail:
            text += f", mean {self.mean_err:.3g} {self.unit}; {self.check}" + (
                f": {self.detail}" if self.detail else "")
        return text + ")"


def exact_count(sim: np.ndarray, golden: np.ndarray, dt: DType) -> int:
    """How many elements of ``sim`` are bit for bit the golden's (NaNs of any payload equal)."""
    sim, golden = _same_shape(sim, golden, dt)
    return int(np.count_nonzero(_exact(sim, golden, dt)))


def statistics(sim: np.ndarray, golden: np.ndarray, dt: DType) -> tuple[int, float, float]:
    """(bit-exact count, max error, mean error) in LSB (integers) or ULP of the golden
    (floats; ``hwsim.tosa.compliance.ulp_error``)."""
    sim, golden = _same_shape(sim, golden, dt)
    exact = int(np.count_nonzero(_exact(sim, golden, dt)))
    if exact == golden.size:            # the usual case for integers: no error to measure
        return exact, 0.0, 0.0
    err = ulp_error(sim, golden, dt) if dt.is_float else \
        lsb_error(sim, golden).astype(np.float64)
    return exact, float(err.max()), float(err.mean())


def _same_shape(sim, golden, dt: DType) -> tuple[np.ndarray, np.ndarray]:
    sim, golden = np.asarray(sim, dt.np), np.asarray(golden, dt.np)
    if sim.shape != golden.shape:
        raise HwsimError(f"simulated shape {list(sim.shape)} != golden {list(golden.shape)}")
    return sim, golden


def _exact(sim: np.ndarray, golden: np.ndarray, dt: DType) -> np.ndarray:
    if not dt.is_float:
        return sim == golden
    bits = np.dtype(f"u{dt.np.itemsize}")
    same = sim.view(bits) == golden.view(bits)
    if same.all():
        return same
    # numpy and ml_dtypes have an isnan loop for every float type; a signalling NaN is a NaN
    with np.errstate(invalid="ignore"):
        return same | (np.isnan(sim) & np.isnan(golden))


def dot_product_shape(op: Operator) -> tuple[int, DType, bool]:
    """(KS, accumulator type, has a non-zero bias) of a dot-product operator (spec Appendix A
    "Floating-Point Operator Test Data" defines KS per operator)."""
    out, first = op.output.dtype, op.inputs[0]
    acc = dtype(op.attrs.get("acc_type", out.name))
    weight = op.inputs[1] if len(op.inputs) > 1 else None
    if op.op in ("CONV2D", "TRANSPOSE_CONV2D", "CONV3D"):       # weight [OC, ..., IC]
        ks = int(np.prod(weight.shape[1:]))
    elif op.op == "DEPTHWISE_CONV2D":                           # weight [KH, KW, C, M]
        ks = weight.shape[0] * weight.shape[1]
    elif op.op == "MATMUL":                                     # A [N, H, C]
        ks = first.shape[2]
    elif op.op == "AVG_POOL2D":
        ks = int(np.prod(op.kernel))
    else:                                           # REDUCE_SUM: bf16 accumulates in fp32
        ks, acc = first.shape[op.axis], dtype("fp32" if out.name == "bf16" else out.name)
    bias = op.inputs[2] if op.op in ("CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D",
                                     "CONV3D") else None
    has_bias = bias is not None and (not bias.is_const or bool(np.any(bias.data != 0)))
    return ks, acc, has_bias


def judge(op: Operator, sim: np.ndarray, golden: np.ndarray, *, ref64=None, bnd64=None,
          x=None, rule: DotProductRule = DotProductRule(), test_set=None,
          exact: int | None = None) -> Verdict:
    """The verdict on ``sim`` for ``op``'s output. Floats that are not bit-exact need ``ref64``
    (else the golden stands in for it), dot products ``bnd64`` too, EXP/LOG/SIGMOID/TANH the
    input ``x``. ``exact``: a float dot product's ``exact_count``, when the caller has it."""
    dt = op.output.dtype
    if dt.is_float and op.op in DOT_OPS:    # its errors are measured against ref64 below
        exact = exact_count(sim, golden, dt) if exact is None else exact
        max_err, mean_err = 0.0, 0.0
    else:
        exact, max_err, mean_err = statistics(sim, golden, dt)
    size = int(np.asarray(golden).size)

    def verdict(status: str, check: str, detail: str = "") -> Verdict:
        return Verdict(f"{op.op}[{op.name}]", dt.name, size, exact, max_err, mean_err,
                       "ULP" if dt.is_float else "LSB", status, check, detail)

    if exact == size:
        return verdict("exact", "bit-exact")
    if not dt.is_float:
        return verdict("deviates", "integers must be bit-exact")
    ref = np.asarray(golden if ref64 is None else ref64, np.float64)
    if op.op in DOT_OPS:
        if ref64 is None or bnd64 is None:
            raise HwsimError(f"{op.op}[{op.name}]: the dot-product test needs ref64 and bnd64 "
                             "(hwsim.tosa.reference.reference_fp64)")
        # the error against the exact value, in ulps of the size of the terms (their bound):
        # cancellation, or a ReLU that zeroed the golden, does not inflate it
        err = ulp_error(sim, ref, dt, np.reshape(bnd64, np.shape(ref)))
        max_err, mean_err = float(err.max()), float(err.mean())
        ks, acc, has_bias = dot_product_shape(op)
        ksb = rule.ksb(ks, acc, dt, has_bias)
        fp32 = all(t.dtype.name == "fp32" for t in op.inputs[:2])
        result = check_dot_product(sim, ref, bnd64, dt, ksb, fp32=fp32, rule=rule,
                                   test_set=test_set)
        detail = result.reason or (f"max |err| {result.max_err:.3g} <= {result.abs_bound:g}, "
                                   f"variance {result.variance:.3g} <= "
                                   f"{result.variance_bound:g}")
        return verdict("compliant" if result.passed else "deviates",
                       f"dot product, ksb {ksb}", detail)
    ok, check = _elementwise(op, sim, ref, dt, x)
    bad = int(np.size(ok) - np.count_nonzero(ok))
    where = "" if ref64 is not None else " (vs the golden, no fp64 reference)"
    return verdict("compliant" if bad == 0 else "deviates", check + where,
                   f"{bad} elements outside" if bad else "")


def _elementwise(op: Operator, sim, ref, dt: DType, x) -> tuple[np.ndarray, str]:
    if op.op in ULP_OPS:
        n = ULP_OPS[op.op]
        return check_fp(sim, ref, n, dt), f"{n:g} ulp"
    if op.op in ABS_BOUND_OPS:
        if x is None:
            raise HwsimError(f"{op.op}[{op.name}]: its error bound needs the input values x")
        return check_fp_bnd(sim, ref, abs_error_bound(op.op, ref, x, dt), dt), \
            "absolute error bound"
    if op.op == "CAST" and op.inputs[0].dtype.is_float:
        return check_cast_fp(sim, ref, dt), "cast: round to zero or nearest"
    if op.op == "CAST":
        return check_fp(sim, ref, 0.5, dt), "0.5 ulp"
    return check_fp(sim, ref, 0, dt), "exact up to zero sign and flushed subnormals"


def judge_layer(graph: Graph, op: Operator, sim: np.ndarray, values: Mapping[str, np.ndarray],
                rule: DotProductRule = DotProductRule()) -> Verdict:
    """Judge the simulated output of ``op`` given the input tensors it was computed from."""
    from hwsim.tosa.reference import reference_fp64, run_operator
    golden = run_operator(graph, op, values)[op.output.name]
    dt = op.output.dtype
    ref64 = bnd64 = exact = None
    if dt.is_float:
        exact = exact_count(sim, golden, dt)
        if exact != golden.size:
            ref64, bnd64 = reference_fp64(graph, op, values)
    x = values.get(op.inputs[0].name) if op.inputs else None
    return judge(op, sim, golden, ref64=ref64, bnd64=bnd64, x=x, rule=rule, exact=exact)
