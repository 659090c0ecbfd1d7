"""TOSA element types: one table row per type, and the conversions every other module needs.

Modelled: the TOSA 1.0 tensor types (spec section "Supported Number Formats") with their numpy
value type, the bytes a constant takes in a ``.tosa`` flatbuffer (int48 as 6 little-endian bytes,
int4 packed two to a byte, low nibble first), the integer view the reference model exchanges
bf16/fp8 tensors in, and the float parameters of the compliance checks (``normal_frac``,
``normal_min``, ``normal_max``, spec Appendix A).
Not modelled: the 1.1-draft microscaling and fp6/fp4 types.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from hwsim.errors import TosaError


@dataclass(frozen=True)
class DType:
    """One TOSA element type. ``np`` holds values; ``view`` is the reference model's bit view."""

    name: str             # hwsim spelling: "int8", "fp32", ...
    enum: str             # the DType enum name in tosa.fbs
    bits: int
    np: np.dtype
    kind: str             # "int", "float", "bool" or "shape"
    frac: int = 0         # floats: normal_frac (explicit mantissa bits)
    emin: int = 0         # floats: log2(normal_min)
    max_normal: float = 0.0
    view: np.dtype | None = None

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def min(self) -> int:
        return -(1 << (self.bits - 1))

    @property
    def max(self) -> int:
        return (1 << (self.bits - 1)) - 1

    @property
    def normal_min(self) -> float:
        return 2.0 ** self.emin

    def nbytes(self, count: int) -> int:
        """Bytes that ``count`` elements take in a flatbuffer (and in parameter totals)."""
        return (count * self.bits + 7) // 8

    def __str__(self) -> str:
        return self.name


def _row(name, enum, bits, npt, kind, frac=0, emin=0, max_normal=0.0, view=None) -> DType:
    return DType(name, enum, bits, np.dtype(npt), kind, frac, emin, max_normal,
                 np.dtype(view) if view else None)


DTYPES: dict[str, DType] = {d.name: d for d in (
    _row("bool", "BOOL", 8, np.bool_, "bool"),
    _row("int4", "INT4", 4, np.int8, "int"),
    _row("int8", "INT8", 8, np.int8, "int"),
    _row("int16", "INT16", 16, np.int16, "int"),
    _row("int32", "INT32", 32, np.int32, "int"),
    _row("int48", "INT48", 48, np.int64, "int"),
    _row("fp16", "FP16", 16, np.float16, "float", 10, -14, 65504.0),
    _row("bf16", "BF16", 16, ml_dtypes.bfloat16, "float", 7, -126,
         float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), np.uint16),
    _row("fp32", "FP32", 32, np.float32, "float", 23, -126,
         float(np.finfo(np.float32).max)),
    _row("fp8e4m3", "FP8E4M3", 8, ml_dtypes.float8_e4m3fn, "float", 3, -6, 448.0, np.uint8),
    _row("fp8e5m2", "FP8E5M2", 8, ml_dtypes.float8_e5m2, "float", 2, -14, 57344.0, np.uint8),
    _row("shape", "SHAPE", 64, np.int64, "shape"),
)}
BY_ENUM: dict[str, DType] = {d.enum: d for d in DTYPES.values()}


def dtype(name: "str | DType") -> DType:
    """The DType called ``name`` (hwsim spelling, or the schema's enum name)."""
    if isinstance(name, DType):
        return name
    found = DTYPES.get(name) or BY_ENUM.get(name)
    if found is None:
        raise TosaError("tensor", f"unknown element type {name!r}; expected one of "
                                  f"{', '.join(DTYPES)}")
    return found


def from_bytes(dt: DType, raw: bytes, shape: tuple[int, ...]) -> np.ndarray:
    """Constant data as a ``.tosa`` file stores it -> an array of ``dt.np`` values."""
    count = int(np.prod(shape, dtype=np.int64))
    buf = np.frombuffer(raw, dtype=np.uint8)
    if dt.name == "int48":
        wide = np.zeros((count, 8), np.uint8)
        wide[:, :6] = buf[:count * 6].reshape(count, 6)
        wide[:, 6:] = np.where(wide[:, 5:6] >= 0x80, 0xFF, 0)[:, :1]
        values = wide.view("<i8").ravel()
    elif dt.name == "int4":
        nibbles = np.stack([buf & 0xF, buf >> 4], axis=1).ravel()[:count].astype(np.int8)
        values = np.where(nibbles >= 8, nibbles - 16, nibbles).astype(np.int8)
    else:
        values = buf[:count * dt.np.itemsize].view(dt.np)  # files are little-endian, as is the host
    if values.size != count:
        raise TosaError("tensor", f"constant data holds {values.size} {dt} values, expected "
                                  f"{count} for shape {list(shape)}")
    return values.astype(dt.np).reshape(shape)


def to_bytes(dt: DType, values) -> bytes:
    """The inverse of ``from_bytes``: values as a ``.tosa`` file stores them."""
    array = np.asarray(values, dtype=dt.np).reshape(-1)
    if dt.name == "int48":
        return array.astype("<i8").view(np.uint8).reshape(-1, 8)[:, :6].tobytes()
    if dt.name == "int4":
        nibbles = (array.astype(np.uint8) & 0xF)
        if nibbles.size % 2:
            nibbles = np.append(nibbles, np.uint8(0))
        return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8).tobytes()
    return array.astype(dt.np.newbyteorder("<")).tobytes()


def to_bits(dt: DType, values: np.ndarray) -> np.ndarray:
    """Values -> what the reference model exchanges: the integer view for bf16/fp8."""
    values = np.array(values, dtype=dt.np, order="C")        # keeps rank 0, unlike ascontiguous
    return values.view(dt.view) if dt.view is not None else values


def from_bits(dt: DType, raw: np.ndarray) -> np.ndarray:
    """What the reference model returns (bytes for bf16/fp8, fp64 in precise mode) -> values."""
    if raw.dtype.kind == "V" or (dt.view is not None and raw.dtype == dt.view):
        return np.array(raw, order="C").view(dt.np)
    return raw.astype(dt.np)


def cast(dt: DType, values) -> np.ndarray:
    """Values checked to fit ``dt`` exactly (ints in range, floats representable)."""
    array = np.asarray(values)
    if dt.kind in ("int", "shape") and array.size:
        if array.dtype.kind == "f" and not np.all(np.isfinite(array) & (array == np.round(array))):
            raise TosaError("tensor", f"non-integer values for a {dt} tensor")
        low, high = (dt.min, dt.max) if dt.is_int else (-(1 << 62), 1 << 62)
        if array.min() < low or array.max() > high:
            raise TosaError("tensor", f"values {array.min()}..{array.max()} do not fit {dt} "
                                      f"({low}..{high})")
    return array.astype(dt.np)
