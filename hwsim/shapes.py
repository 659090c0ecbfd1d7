"""Shape arithmetic every layer shares: the output size of a convolution or pooling axis.

TOSA 1.0 (docs/sources.md#tosa) gives it for CONV2D, DEPTHWISE_CONV2D, AVG_POOL2D and
MAX_POOL2D as ``idiv_check(IH - 1 + pad_top + pad_bottom - (KH - 1) * dilation_y, stride_y) + 1``
(pooling has no dilation: ``IH + pad_top + pad_bottom - kernel_y``, the same number); the
graph checker, the graph builder, the TOSA integer operators, the machines' routines and the
scheduler's tilings all compute it here.
"""

from __future__ import annotations


def window_span(size: int, kernel: int, pad_before: int, pad_after: int,
                dilation: int = 1) -> int:
    """The dividend of ``idiv_check``: how far the first window can move along the axis."""
    return size - 1 + pad_before + pad_after - (kernel - 1) * dilation


def conv_out(size: int, kernel: int, pad_before: int, pad_after: int, stride: int,
             dilation: int = 1) -> tuple[int, bool]:
    """(output size, whether ``stride`` divides the span exactly: TOSA's ERROR_IF if not)."""
    span = window_span(size, kernel, pad_before, pad_after, dilation)
    return span // stride + 1, span % stride == 0
