"""An independent exact-rational model of the HMX numerics documented in
``hwsim/targets/hmx/numerics.py`` (shares no code with it; rounding by ``tests/oracle.py``).

Values are ``(x, neg)``: ``x`` a Fraction, ``inf``/``-inf`` or ``nan`` (floats); ``neg`` the sign
(the only record of it for a zero). Table 7 is written out from the manual's table, row by row.
"""

from fractions import Fraction
import math

from tests import oracle

NAN = float("nan")


def value(bits: int, ebits: int, mbits: int, infnan: bool = True):
    """(x, neg) of a format's bits; without ``infnan`` the top exponent is finite."""
    bits = int(bits)
    neg = bool(bits >> (ebits + mbits) & 1)
    biased = bits >> mbits & ((1 << ebits) - 1)
    if biased == (1 << ebits) - 1 and not infnan:
        frac = bits & ((1 << mbits) - 1)
        bias = (1 << (ebits - 1)) - 1
        mag = (1 + Fraction(frac, 1 << mbits)) * Fraction(2) ** (biased - bias)
        return (-mag if neg else mag), neg
    x = oracle.fmt_value(bits, ebits, mbits)
    return (NAN if x == "nan" else x), neg


def is_nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def is_inf(x) -> bool:
    return isinstance(x, float) and math.isinf(x)


def add(a, b):
    (x, xn), (y, yn) = a, b
    if is_nan(x) or is_nan(y) or (is_inf(x) and is_inf(y) and x != y):
        return NAN, False
    if is_inf(x) or is_inf(y):
        inf = x if is_inf(x) else y
        return inf, inf < 0
    total = x + y
    return total, (xn and yn) if x == 0 and y == 0 else total < 0


def mul(a, b):
    (x, xn), (y, yn) = a, b
    neg = xn != yn
    if is_nan(x) or is_nan(y) or (is_inf(x) and y == 0) or (is_inf(y) and x == 0):
        return NAN, False
    if is_inf(x) or is_inf(y):
        return (-math.inf if neg else math.inf), neg
    return x * y, neg


def inf_bits(neg: bool, ebits: int, mbits: int) -> int:
    return (int(neg) << (ebits + mbits)) | (((1 << ebits) - 1) << mbits)


# -- multiply -------------------------------------------------------------------------------------

def acc_round(v, ebits: int, mbits: int) -> int:
    """An exact sum into the accumulator: NaN is the quiet NaN, zero is +0, RNE."""
    x, _ = v
    if is_nan(x):
        return (((1 << ebits) - 1) << mbits) | (1 << (mbits - 1))
    if is_inf(x):
        return inf_bits(x < 0, ebits, mbits)
    if x == 0:
        return 0
    return oracle.round_to(x, ebits, mbits, oracle.RNE)


def multiply(act, wgt, acc, negate, infnan, ebits, mbits, group):
    """acc[s][o] after the multiply; act[k][s], wgt[k][o] FP16 bits (nested lists or arrays)."""
    n, rows, cols = len(act), len(act[0]), len(wgt[0])
    step = group if group > 0 else n
    out = [[int(acc[s][o]) for o in range(cols)] for s in range(rows)]
    for s in range(rows):
        for o in range(cols):
            for k0 in range(0, n, step):
                total = value(out[s][o], ebits, mbits)
                for k in range(k0, min(n, k0 + step)):
                    a = value(act[k][s], 5, 10, infnan)
                    w = value(wgt[k][o], 5, 10, infnan)
                    if negate:
                        w = (-w[0], not w[1])
                    total = add(total, mul(a, w))
                out[s][o] = acc_round(total, ebits, mbits)
    return out


# -- convert --------------------------------------------------------------------------------------

def table7(kind: str, neg: bool, m: int, usr20: int, usr21: int, ovf: int) -> int:
    """Table 7, for an FP16 (+ extra bits) of m fraction bits: kind 'inf' or 'nan'."""
    ones, top = (1 << m) - 1, 1 << (5 + m)
    if usr20 == 0:  # rows 1-3: +Inf -> +maxpos, -Inf -> -maxpos, NaN -> -maxpos (emax, all 1s)
        sign = True if kind == "nan" else neg
        return (top if sign else 0) | 31 << m | ones
    if ovf == 0:  # IEEE: +-Inf, NaN = 1, emax, all 1s
        return (top | 31 << m | ones) if kind == "nan" else ((top if neg else 0) | 31 << m)
    if kind == "nan":
        return top | (31 if usr21 else 30) << m | ones
    return (top if neg else 0) | 30 << m | ones


def round_output(x: Fraction, neg: bool, m: int, usr20: int, ovf: int) -> int:
    """Round once, to nearest even, to (5, m); overflow per Table 7."""
    if x == 0:
        return int(neg) << (5 + m)
    if usr20:
        return oracle.round_to(x, 5, m, oracle.RNE, saturate=bool(ovf))
    # Inf/NaN off: binades up to 2^16 are finite; saturate at (31, all ones)
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    quantum = Fraction(2) ** (max(e, -14) - m)
    q, rem = divmod(a / quantum, 1)
    n = q + (1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and q % 2) else 0)
    largest = (2 - Fraction(1, 1 << m)) * Fraction(2) ** 16
    rounded = min(n * quantum, largest)
    bits = (31 << m | ((1 << m) - 1)) if rounded == largest else oracle.encode(rounded, False, 5, m)
    return (int(x < 0) << (5 + m)) | bits


def shape(v, code: int, row3: str):
    x, neg = v
    kind = ["x", "min", "max", "abs" if row3 == "abs" else "x"][code & 3]
    if not is_nan(x):
        if kind == "min" and not neg:
            x, neg = Fraction(0), False
        elif kind == "max" and (neg or x == 0):
            x, neg = Fraction(0), False
        elif kind == "abs":
            x, neg = abs(x), False
    if code >= 4 and not is_nan(x):
        x, neg = -x, not neg
    return x, neg


def limit(a_bits: int, b_bits: int, op: int, infnan: bool) -> int:
    """IEEE 754-2019 minimum (op 0) / maximum (op 1) of two FP16+4 bit patterns."""
    a, b = value(a_bits, 5, 14, infnan), value(b_bits, 5, 14, infnan)
    if is_nan(a[0]):
        return a_bits
    if is_nan(b[0]):
        return b_bits
    key_a, key_b = (a[0], not a[1]), (b[0], not b[1])  # -0 below +0
    pick_b = key_b > key_a if op == 1 else key_b < key_a
    return b_bits if pick_b else a_bits


def convert_cell(acc_bits, bias: dict, prev_bits, rs: dict, usr20, usr21, ebits, mbits, row3):
    """The (5, 14) convert state bits of one cell (rs: bias_sel unused, rnd, ovf, fb_*)."""
    infnan = bool(usr20)
    scale, out_bias = bias["scale"], bias["output_bias"]
    if rs["fb_dest"] == 1:
        out_bias = limit(out_bias, prev_bits, rs["fb_op"], infnan)
    elif rs["fb_dest"] == 2:
        scale = limit(scale, prev_bits, rs["fb_op"], infnan)
    t = add(value(acc_bits, ebits, mbits), value(bias["input_bias"], 5, 15, infnan))
    if not is_nan(t[0]) and not is_inf(t[0]):
        if t[0] == 0:
            t_bits = int(t[1]) << (ebits + mbits)
        else:
            t_bits = oracle.round_to(t[0], ebits, mbits, oracle.RNE)
        t = value(t_bits, ebits, mbits)
    x = shape(t, bias["shape"], row3)
    y, neg = add(mul(value(scale, 5, 14, infnan), x), value(out_bias, 5, 14, infnan))
    m = 14 if rs["rnd"] else 10
    if is_nan(y):
        out = table7("nan", False, m, usr20, usr21, rs["ovf"])
    elif is_inf(y):
        out = table7("inf", y < 0, m, usr20, usr21, rs["ovf"])
    else:
        out = round_output(y, neg, m, usr20, rs["ovf"])
    return out if rs["rnd"] else out << 4
