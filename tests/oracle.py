"""Independent arbitrary-precision oracles for the tests (exact rationals, no shared code)."""

from fractions import Fraction
import math

RNE, RTZ, RUP, RDN, RNA, ROD = range(6)


def fmt_value(bits: int, ebits: int, mbits: int):
    """Exact value of a format's bits: Fraction, or 'nan', or +/-inf as float."""
    sign = -1 if bits >> (ebits + mbits) & 1 else 1
    biased = bits >> mbits & ((1 << ebits) - 1)
    frac = bits & ((1 << mbits) - 1)
    bias = (1 << (ebits - 1)) - 1
    if biased == (1 << ebits) - 1:
        return "nan" if frac else sign * math.inf
    if biased == 0:
        return sign * Fraction(frac, 1 << mbits) * Fraction(2) ** (1 - bias)
    return sign * (1 + Fraction(frac, 1 << mbits)) * Fraction(2) ** (biased - bias)


def encode(value: Fraction, negative: bool, ebits: int, mbits: int) -> int:
    """Bits of an exactly representable non-negative magnitude ``value``."""
    bias = (1 << (ebits - 1)) - 1
    sign = (1 << (ebits + mbits)) if negative else 0
    if value == 0:
        return sign
    e = value.numerator.bit_length() - value.denominator.bit_length()
    while Fraction(2) ** e > value:
        e -= 1
    while Fraction(2) ** (e + 1) <= value:
        e += 1
    if e < 1 - bias:
        frac = value / Fraction(2) ** (1 - bias - mbits)
        assert frac.denominator == 1
        return sign | int(frac)
    frac = (value / Fraction(2) ** e - 1) * (1 << mbits)
    assert frac.denominator == 1
    return sign | ((e + bias) << mbits) | int(frac)


def _round_multiple(x: Fraction, mode, negative: bool) -> int:
    """The non-negative ``x`` rounded to an integer in ``mode`` (for a value of this sign)."""
    lo = math.floor(x)
    rem = x - lo
    if rem == 0:
        return lo
    if mode == RNE:
        return lo + (1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and lo % 2) else 0)
    if mode == RNA:
        return lo + (1 if rem >= Fraction(1, 2) else 0)
    if mode == RTZ:
        return lo
    if mode == RUP:
        return lo + (0 if negative else 1)
    if mode == RDN:
        return lo + (1 if negative else 0)
    return lo | 1


def round_to(x: Fraction, ebits: int, mbits: int, mode=RNE, flush=False, saturate=False) -> int:
    """Round the exact rational ``x`` once to the format; the bits. ``flush``: False, True (tiny
    before rounding) or "after" (tiny once rounded with an unbounded exponent)."""
    negative = x < 0
    a = abs(x)
    bias = (1 << (ebits - 1)) - 1
    emin = 1 - bias
    sign = (1 << (ebits + mbits)) if negative else 0
    if a == 0:
        return sign
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    if flush == "after" and e < emin:  # tiny once rounded with an unbounded exponent
        q = Fraction(2) ** (e - mbits)
        if _round_multiple(a / q, mode, negative) * q < Fraction(2) ** emin:
            return sign
    elif flush and e < emin:
        return sign
    quantum = Fraction(2) ** (max(e, emin) - mbits)
    value = _round_multiple(a / quantum, mode, negative) * quantum
    largest = (2 - Fraction(1, 1 << mbits)) * Fraction(2) ** bias
    if value > largest:
        to_inf = not saturate and (mode in (RNE, RNA) or (mode == RUP and not negative)
                                   or (mode == RDN and negative))
        if to_inf:
            return sign | (((1 << ebits) - 1) << mbits)
        return encode(largest, negative, ebits, mbits)
    return encode(value, negative, ebits, mbits)
