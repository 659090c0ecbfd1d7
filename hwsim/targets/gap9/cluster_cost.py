"""What a convolution, matrix product or pooling kernel costs on the 8 worker cores.

The kernels are modelled on the GAP SDK's int8 software kernels (the AutoTiler's ``SQ8``
convolutions, which GVSoC's ResNet-8 rows measure, docs/gap9-calibration.md): the output is
split over the cores by output channel, or by output row when there are fewer channels than
cores (whichever leaves the busiest core the least work: the busiest core is the kernel's
time, so a split that does not divide evenly costs its remainder, load imbalance). Each output
is a dot product of ``sdot`` instructions, 4 int8 lanes each (``cluster_simd_lanes``) over the
input channels: a layer with 1 or 3 input channels leaves lanes idle, because a lane cannot
take a second filter tap. Per core:

* **convolution** (a kernel larger than 1x1): outputs x (``conv_output_cycles`` + sdots x
  ``conv_sdot_cycles``, times ``1 + conv_stride2_extra`` at stride 2: the input pixels of
  neighbouring outputs no longer share registers) + output channels x input channels x
  ``conv_channel_setup_cycles`` (each filter's loop set-up, weight and pointer set-up per input
  channel);
* **1x1 convolution and matrix product**: outputs x (``conv_output_cycles`` + sdots x
  ``conv_sdot_cycles``); at stride 2 the input is first gathered (subsampled) at
  ``conv_gather_cycles`` per byte, by one core, because the SDK subsamples it with a 2-D DMA
  of one-byte elements;
* **depthwise convolution**: no input-channel reduction, so the lanes run along the filter
  row (3 of 4 for a 3x3 filter): outputs x (``conv_output_cycles`` + kh x ceil(kw / 4) x
  ``conv_sdot_cycles``) + channels x ``conv_channel_setup_cycles`` (not in the calibration set:
  the convolution costs are reused, an assumption);
* **pooling**: channels x (``pool_channel_cycles`` + window elements x ``pool_element_cycles``).

Im2col is not a separate term: the SDK's direct kernels read the window in place, and the
per-output cost covers the pointer arithmetic. L1 bank conflicts among the cores are priced by
``kernels`` (``tcdm.core_stalls``) on top; launch and barrier by the machine.
"""

from __future__ import annotations

import math


def _split(channels: int, rows: int, per_row: int, cores: int) -> tuple[int, int]:
    """(outputs, output channels) of the busiest core, split by channel or by row."""
    by_channel = math.ceil(channels / cores) * rows * per_row
    by_row = math.ceil(rows / cores) * per_row * channels
    if by_channel <= by_row:
        return by_channel, math.ceil(channels / cores)
    return by_row, channels


def conv_cycles(t, out_shape: tuple, kernel: tuple, k_in: int, stride: tuple,
                depthwise: bool = False) -> int:
    """Cycles of the busiest core for a convolution producing NHWC ``out_shape`` with a
    ``kernel`` (kh, kw) window over ``k_in`` input channels (depthwise: per channel)."""
    n, h, w, k_out = out_shape
    kh, kw = kernel
    lanes = t.cluster_simd_lanes
    outputs, channels = _split(k_out, n * h, w, t.cluster_cores)
    if depthwise:
        sdots = kh * math.ceil(kw / lanes)
        setup = channels * t.conv_channel_setup_cycles
    else:
        sdots = kh * kw * math.ceil(k_in / lanes)
        setup = channels * k_in * t.conv_channel_setup_cycles if kh * kw > 1 else 0
    strided = max(stride) > 1
    sdot = t.conv_sdot_cycles * (1 + t.conv_stride2_extra if strided and kh * kw > 1 else 1)
    gather = n * h * w * k_in * t.conv_gather_cycles if strided and kh * kw == 1 else 0
    return math.ceil(outputs * (t.conv_output_cycles + sdots * sdot) + setup + gather)


def matmul_cycles(t, out_shape: tuple, k: int) -> int:
    """A matrix product [N, H, K] x [N, K, W]: a 1x1 convolution of H pixels, W channels."""
    n, h, w = out_shape
    return conv_cycles(t, (n, h, 1, w), (1, 1), k, (1, 1))


def pool_cycles(t, out_shape: tuple, kernel: tuple) -> int:
    """Cycles of the busiest core for a pooling window over NHWC ``out_shape``."""
    n, h, w, c = out_shape
    channels = math.ceil(c / t.cluster_cores)
    window = n * h * w * kernel[0] * kernel[1]
    return math.ceil(channels * (t.pool_channel_cycles + window * t.pool_element_cycles))
