"""Splitting work into tiles: row ranges and the input rows a window of output rows needs.

Shared by the lowerings. Tensors are row-major; a tile is a range of rows along one axis whose
leading axes are all 1, so that each tile of a tensor is one contiguous byte range.
"""

from __future__ import annotations

import math


def split(count: int, parts: int, multiple: int = 1) -> list[tuple[int, int]]:
    """``[start, end)`` ranges cutting ``count`` rows into at most ``parts`` pieces, each a
    multiple of ``multiple`` rows except the last."""
    size = max(multiple, math.ceil(math.ceil(count / max(1, parts)) / multiple) * multiple)
    return [(r, min(count, r + size)) for r in range(0, count, size)]


def window_rows(r0: int, r1: int, stride: int, kernel: int, pad_top: int, size: int,
                dilation: int = 1) -> tuple[int, int, int, int]:
    """Input rows [first, end) that output rows [r0, r1) of a windowed operator read, and the
    padding rows above and below them."""
    top = r0 * stride - pad_top
    bottom = (r1 - 1) * stride + (kernel - 1) * dilation + 1 - pad_top
    return max(0, top), min(size, bottom), max(0, -top), max(0, bottom - size)


def split_axis(shape: tuple) -> int:
    """The first axis longer than 1 (rows of a contiguous tiling), or the last axis."""
    return next((i for i, d in enumerate(shape) if d > 1), len(shape) - 1)


def row_bytes(shape: tuple, axis: int, itemsize: int) -> int:
    """Bytes of one row along ``axis``."""
    return math.prod(shape[axis + 1:]) * itemsize
