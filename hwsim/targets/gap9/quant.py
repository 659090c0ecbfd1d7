"""GAP9 quantisation (the GreenWaves MLPerf Tiny v1.0 scheme) and the TOSA -> NE16 scale map.

From GreenWaves' quantisation note (docs/sources.md#gap9-quantisation, "the note"): every
tensor is ``r = S (q - Z)``; activations are asymmetric per tensor (8 or 16 bit), weights
symmetric per output channel (2..8 bits on NE16), biases int32 with ``S_b = S_x S_w``, the zero
points folded into the bias, requantisation factors ``S_x S_w / S_y`` as ``M 2^-N`` with M and N
unsigned 8-bit, MatAdd rescales one input into the other's range, Concat/Split share the largest
scale, Softmax uses power-of-two scales and a 16-bit symmetric output.

Two places where the note's prose and formulas disagree are parameters (both tested):

* ``symmetric_range(bits, reading)``: ``"formula"`` applies ``mid = ceil(qrange/2)``,
  ``qmin = -mid``, ``qmax = qrange - mid - 1`` to the type's range (int8: -128..126);
  ``"clipped"`` is the prose "int8 -> -127, 127".
* ``matadd(..., reading)``: ``"formula"`` follows the equations (for S_a > S_b, B is multiplied by
  S_b/S_a into A's range); ``"prose"`` rescales the input with the greater S instead.

The asymmetric zero point is chosen, as the note says, from whichever end (rmin or rmax) lands
closer to an integer; the note writes the candidates with ``abs``, which only keeps the sign
right for unsigned ranges, so the candidates here are ``qmin - rmin/S`` and ``qmax - rmax/S``.
"""

from __future__ import annotations

import math

import numpy as np

from hwsim.errors import ProgramError


def qrange(bits: int, signed: bool = True) -> tuple[int, int]:
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def asymmetric(r_min: float, r_max: float, bits: int = 8, signed: bool = True):
    """(S, Z) of an asymmetric per-tensor quantisation (note: "Asymmetric")."""
    q_min, q_max = qrange(bits, signed)
    r_min, r_max = min(r_min, 0.0), max(r_max, 0.0)      # zero must be representable
    scale = (r_max - r_min) / ((1 << bits) - 1)
    if scale == 0:
        return 1.0, 0
    z1, z2 = q_min - r_min / scale, q_max - r_max / scale
    z = z1 if abs(z1 - round(z1)) < abs(z2 - round(z2)) else z2
    return scale, int(round(z))


def symmetric_range(bits: int, reading: str = "formula") -> tuple[int, int]:
    """(qmin, qmax) of symmetric weights of ``bits`` bits."""
    if reading == "clipped":
        half = (1 << (bits - 1)) - 1
        return -half, half
    q_min, q_max = qrange(bits)
    span = q_max - q_min
    mid = math.ceil(span / 2)
    if span - mid - 1 < 1:
        raise ProgramError(f"the note's symmetric formula leaves {bits}-bit weights no positive "
                           "level; use reading='clipped'")
    return -mid, span - mid - 1


def symmetric(r_min, r_max, bits: int = 8, reading: str = "formula") -> np.ndarray:
    """Per-channel scales S = max(|rmax|/|qmax|, |rmin|/|qmin|) (note: "Symmetric")."""
    q_min, q_max = symmetric_range(bits, reading)
    s = np.maximum(np.abs(np.asarray(r_max, float)) / abs(q_max),
                   np.abs(np.asarray(r_min, float)) / abs(q_min))
    return np.where(s > 0, s, 1.0)


def quantize(r, scale, zero_point=0, bits: int = 8, signed: bool = True, q_range=None):
    """q = clip(round(r / S) + Z) (scales broadcast per channel along the first axis)."""
    lo, hi = q_range or qrange(bits, signed)
    s = np.asarray(scale, float)
    if s.ndim:
        s = s.reshape((-1,) + (1,) * (np.ndim(r) - 1))
    return np.clip(np.round(np.asarray(r, float) / s) + zero_point, lo, hi).astype(np.int64)


def bias(b_real, s_x: float, s_w) -> np.ndarray:
    """int32 bias with S_b = S_x S_w (per channel)."""
    q = np.round(np.asarray(b_real, float) / (s_x * np.asarray(s_w, float)))
    return np.clip(q, -(1 << 31), (1 << 31) - 1).astype(np.int64)


def fold_zero_points(b_q, w_q, z_x: int, z_w: int = 0) -> np.ndarray:
    """B' = B + sum(-Z_x W + Z_x Z_w) over each output channel's weights (w_q: (cout, ...))."""
    w = np.asarray(w_q, np.int64).reshape(np.shape(w_q)[0], -1)
    return np.asarray(b_q, np.int64) - z_x * w.sum(axis=1) + z_x * z_w * w.shape[1]


def fixed_point(factor, m_bits: int = 8, n_max: int = 255):
    """(M, N) unsigned with M 2^-N nearest ``factor`` (per element): the largest N that keeps
    M = round(factor 2^N) within m_bits bits."""
    f = np.asarray(factor, float)
    if np.any(f <= 0) or np.any(f >= (1 << m_bits)):
        raise ProgramError(f"requantisation factor outside (0, {1 << m_bits}): {f}")
    n = np.clip(np.floor(np.log2(((1 << m_bits) - 1) / f)), 0, n_max).astype(np.int64)
    m = np.round(f * np.exp2(n)).astype(np.int64)
    return m, n


def requant(s_x: float, s_w, s_y: float):
    """(M, N) of S_x S_w / S_y as unsigned 8-bit M and N (note: MulBias)."""
    return fixed_point(s_x * np.asarray(s_w, float) / s_y)


def matadd(s_a: float, s_b: float, s_y: float, reading: str = "formula"):
    """Which input MatAdd rescales and by what: (input, inner factor, outer factor) with
    Y = outer * (kept - Z + inner * (rescaled - Z))."""
    rescale_b = (s_a > s_b) if reading == "formula" else not (s_a > s_b)
    if rescale_b:
        return "b", s_b / s_a, s_a / s_y
    return "a", s_a / s_b, s_b / s_y


def common_scale(scales) -> float:
    """Concat/Split: every input (output) takes the greatest scale."""
    return float(max(scales))


def pow2_scale(scale: float) -> float:
    """Softmax inputs: the power of two at or above S."""
    return float(2.0 ** math.ceil(math.log2(scale)))


SOFTMAX_OUTPUT = (16, 2.0 ** -15)      # bits and scale of the 16-bit symmetric (Q15) output


def ne16_scale_shift(multiplier, shift, norm_bits: int = 8, max_shift: int = 31):
    """Nearest NE16 normquant (scale, shift) to a TOSA RESCALE (multiplier, shift), per element.

    TOSA scales by multiplier * 2^-shift; NE16 multiplies by an unsigned ``norm_bits`` scale and
    shifts right by at most ``max_shift`` (CONFIG0.shift has 5 bits). Returns (scale, shift,
    relative deviation of the factor). NE16 truncates where TOSA rounds half up; a bias of
    2^(shift-1) restores the rounding. A factor below 2^-(max_shift+1) is nearest to scale 0
    (deviation -1): the channel then outputs its bias alone.
    """
    factor = np.asarray(multiplier, float) * np.exp2(-np.asarray(shift, float))
    scale, n = fixed_point(factor, norm_bits, max_shift)
    deviation = (scale * np.exp2(-n.astype(float)) - factor) / factor
    return scale, n, deviation
