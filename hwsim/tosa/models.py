"""Synthetic models shaped like the MLPerf Tiny v1.x networks, with random weights.

So that tests and benchmarks run without downloaded models. Architectures follow the MLPerf
Tiny reference models (github.com/mlcommons/tiny, ``benchmark/training``): DS-CNN for keyword
spotting (49x10 MFCC input, 10x4 stride-2 conv, four depthwise-separable blocks, average pool,
12 classes), MobileNetV1 at width 0.25 on 96x96x3 for visual wake words (2 classes), ResNet-8
on 32x32x3 CIFAR-10 (three stacks with a 1x1 stride-2 shortcut, 10 classes) and the fully
connected anomaly-detection autoencoder (640-128-128-128-128-8-128-128-128-128-640). ``width``
scales channel counts and ``resolution`` the input size, for faster test variants.

int8 graphs are quantised the way TFLite/the TOSA converters lower them: per-channel symmetric
int8 weights, int32 biases, RESCALE (scale32, DOUBLE_ROUND) after every conv, CLAMP for ReLU
(zero point -128), int32 rescaling around residual ADDs, fully connected layers as 1x1 CONV2D
between RESHAPEs, and an integer softmax built from TABLE, REDUCE_MAX/SUM, CLZ, shifts and a
Newton-Raphson reciprocal with MUL (output scale 1/256, zero point -128). Quantisation scales
come from the weight statistics (no calibration data), aiming at about 40 LSB of spread before
each activation. fp32 graphs have the same layers with fp32 weights, CLAMP(0, max) as ReLU and
a softmax of REDUCE_MAX, SUB, EXP, REDUCE_SUM, RECIPROCAL and MUL. Not modelled: batch
normalisation (folded into weights by the converters anyway) and trained accuracy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hwsim.errors import ConfigError
from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.ir import Graph, Tensor

SPREAD_LSB = 40.0          # target rms, in output LSB, of each int8 layer before activation
FP32_MAX = float(np.finfo(np.float32).max)


@dataclass
class Act:
    """An activation: its tensor and, for int8, real scale and zero point; ``rms`` estimates
    its real root-mean-square value (to choose the next layer's output scale)."""

    tensor: Tensor
    rms: float
    scale: float = 1.0
    zp: int = 0


class Net:
    """Layers on a GraphBuilder in int8 or fp32, with random weights from one seeded RNG."""

    def __init__(self, name: str, dt: str, seed: int):
        if dt not in ("int8", "fp32"):
            raise ConfigError(f"synthetic models are int8 or fp32, not {dt!r}")
        self.b, self.dt = GraphBuilder(name), dt
        self.rng = np.random.default_rng(seed)

    @property
    def quantized(self) -> bool:
        return self.dt == "int8"

    def input(self, shape) -> Act:
        x = self.b.input(shape, self.dt, "input")
        return Act(x, 1 / math.sqrt(3), 1 / 128, 0)     # real values uniform in [-1, 1)

    def conv(self, a: Act, out_ch: int, kernel, stride=(1, 1), pad=(0, 0, 0, 0), relu=True,
             depthwise=False) -> Act:
        kh, kw = kernel
        cin = a.tensor.shape[3]
        out_ch = cin if depthwise else out_ch
        a, pad = self._exact(a, kernel, stride, pad)
        fan_in = kh * kw * (1 if depthwise else cin)
        shape = (kh, kw, cin, 1) if depthwise else (out_ch, kh, kw, cin)
        w = self.rng.normal(0, math.sqrt(2 / fan_in), shape)
        bias = self.rng.normal(0, 0.05, out_ch)
        rms = a.rms * math.sqrt(2.0)                     # He initialisation keeps the spread
        op = self.b.depthwise_conv2d if depthwise else self.b.conv2d
        if not self.quantized:
            out = op(a.tensor, self.b.const(w.astype(np.float32), "fp32"),
                     self.b.const(bias.astype(np.float32), "fp32"), stride, pad)
            return self._relu(Act(out, rms), relu)
        axes = (0, 1, 3) if depthwise else (1, 2, 3)
        w_scale = np.maximum(np.abs(w).max(axis=axes), 1e-8) / 127
        wq = np.round(w / w_scale.reshape((1, 1, -1, 1) if depthwise else (-1, 1, 1, 1)))
        acc_scale = a.scale * w_scale
        bq = np.round(bias / acc_scale).astype(np.int64)
        acc = op(a.tensor, self.b.const(wq.astype(np.int8), "int8"),
                 self.b.const(bq, "int32"), stride, pad, input_zp=a.zp)
        return self._requant(acc, acc_scale, rms, relu)

    def _exact(self, a: Act, kernel, stride, pad) -> tuple[Act, tuple]:
        """Trim bottom/right padding, then input rows/columns, that a strided window never
        reaches, so that TOSA's output-size division is exact (as the converters do)."""
        pad, size = list(pad), list(a.tensor.shape)
        for axis in (0, 1):
            extra = (size[axis + 1] - 1 + pad[2 * axis] + pad[2 * axis + 1]
                     - (kernel[axis] - 1)) % stride[axis]
            trim = min(extra, pad[2 * axis + 1])
            pad[2 * axis + 1] -= trim
            size[axis + 1] -= extra - trim
        if list(a.tensor.shape) != size:
            a = Act(self.b.slice(a.tensor, [0, 0, 0, 0], size), a.rms, a.scale, a.zp)
        return a, tuple(pad)

    def _requant(self, acc: Tensor, acc_scale, rms: float, relu: bool) -> Act:
        scale = rms / SPREAD_LSB
        zp = -128 if relu else 0
        out = self.b.rescale(acc, np.asarray(acc_scale) / scale, "int8", output_zp=zp)
        act = Act(out, rms, scale, zp)
        return self._relu(act, relu)

    def _relu(self, a: Act, relu: bool) -> Act:
        if not relu:
            return a
        low, high = (-128, 127) if self.quantized else (0.0, FP32_MAX)
        return Act(self.b.clamp(a.tensor, low, high), a.rms / math.sqrt(2), a.scale, a.zp)

    def dense(self, a: Act, out_features: int, relu=True) -> Act:
        n, cin = a.tensor.shape
        x4 = Act(self.b.reshape(a.tensor, (n, 1, 1, cin)), a.rms, a.scale, a.zp)
        y = self.conv(x4, out_features, (1, 1), relu=relu)
        return Act(self.b.reshape(y.tensor, (n, out_features)), y.rms, y.scale, y.zp)

    def avg_pool(self, a: Act, kernel) -> Act:
        out = self.b.avg_pool2d(a.tensor, kernel, kernel, input_zp=a.zp, output_zp=a.zp)
        return Act(out, a.rms, a.scale, a.zp)

    def flatten(self, a: Act) -> Act:
        n = a.tensor.shape[0]
        return Act(self.b.reshape(a.tensor, (n, a.tensor.size // n)), a.rms, a.scale, a.zp)

    def add(self, a: Act, b: Act, relu=True) -> Act:
        rms = math.hypot(a.rms, b.rms)
        if not self.quantized:
            return self._relu(Act(self.b.add(a.tensor, b.tensor), rms), relu)
        # as the converters lower a quantised ADD: both sides to int32 at a common scale
        common = 2 * max(a.scale, b.scale) / (1 << 20)
        sides = [self.b.rescale(x.tensor, x.scale / common, "int32", input_zp=x.zp)
                 for x in (a, b)]
        return self._requant(self.b.add(*sides), common, rms, relu)

    def softmax(self, a: Act) -> Tensor:
        return softmax_int8(self.b, a.tensor, a.scale, a.zp) if self.quantized else \
            softmax_fp32(self.b, a.tensor)

    def build(self, out: Tensor) -> Graph:
        return self.b.build(out)


def softmax_fp32(b: GraphBuilder, x: Tensor) -> Tensor:
    axis = x.rank - 1
    e = b.unary("EXP", b.sub(x, b.reduce("REDUCE_MAX", x, axis)))
    return b.mul(e, b.unary("RECIPROCAL", b.reduce("REDUCE_SUM", e, axis)))


def softmax_int8(b: GraphBuilder, x: Tensor, scale: float, zp: int) -> Tensor:
    """Softmax of int8 logits (real value ``scale * (x - zp)``) on the last axis -> int8 with
    scale 1/256 and zero point -128. exp comes from a 513-entry TABLE indexed by the logit
    difference in LSB; 1/sum from CLZ normalisation and three Newton-Raphson steps in Q29.
    Exact for up to 512 classes (the sum stays below 2^31)."""
    axis, n_rows = x.rank - 1, x.shape[:-1] + (1,)

    def col(value: int) -> Tensor:                                    # one int32 per row
        return b.const(np.full(n_rows, value), "int32")

    def q29(value: float) -> Tensor:                                  # Q2.29 fixed point
        return col(round(value * (1 << 29)))

    r = b.rescale(x, 1.0, "int32", input_zp=zp)                       # x - zp
    d = b.sub(r, b.reduce("REDUCE_MAX", r, axis))                     # -255 .. 0
    k = np.arange(-256, 257)
    table = np.where(k <= 0, np.round(32767 * np.exp(scale * np.minimum(k, 0))), 32767)
    e = b.table(b.rescale(d, 128.0, "int16"), table.astype(np.int16))   # exp << 7 (16.7)
    total = b.reduce("REDUCE_SUM", e, axis)
    lead = b.unary("CLZ", total)
    f = b.logical_left_shift(total, b.sub(lead, col(1)))              # in [2^30, 2^31)
    x_est = b.sub(q29(48 / 17), b.mul(f, q29(32 / 17), shift=31))     # 1/f to 1/17
    for _ in range(3):
        x_est = b.mul(x_est, b.sub(q29(2.0), b.mul(f, x_est, shift=31)), shift=29)
    scaled = b.mul(e, x_est, shift=31)                                # e / (4 f)
    probs = b.arithmetic_right_shift(scaled, b.sub(col(22), lead), round=True)   # 256 e / sum
    return b.rescale(probs, 1.0, "int8", output_zp=-128)


def _same_pad(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TF 'same' padding (more at the end), so that TOSA's division is exact."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def _pad2d(shape, kernel, stride) -> tuple[int, int, int, int]:
    return _same_pad(shape[1], kernel[0], stride[0]) + _same_pad(shape[2], kernel[1], stride[1])


def _channels(count: int, width: float) -> int:
    return max(2, int(round(count * width)))


def ds_cnn(dtype="int8", width=1.0, resolution=49, seed=0) -> Graph:
    """DS-CNN keyword spotting: [1, resolution, 10, 1] MFCCs -> 12 classes."""
    net = Net("ds_cnn", dtype, seed)
    a = net.input((1, resolution, 10, 1))
    ch = _channels(64, width)
    a = net.conv(a, ch, (10, 4), (2, 2), _pad2d(a.tensor.shape, (10, 4), (2, 2)))
    for _ in range(4):
        a = net.conv(a, ch, (3, 3), pad=(1, 1, 1, 1), depthwise=True)
        a = net.conv(a, ch, (1, 1))
    a = net.flatten(net.avg_pool(a, a.tensor.shape[1:3]))
    return net.build(net.softmax(net.dense(a, 12, relu=False)))


def mobilenet_v1(dtype="int8", width=0.25, resolution=96, seed=0) -> Graph:
    """MobileNetV1 visual wake words: [1, resolution, resolution, 3] -> 2 classes."""
    net = Net("mobilenet_v1", dtype, seed)
    a = net.input((1, resolution, resolution, 3))
    a = net.conv(a, _channels(32, width), (3, 3), (2, 2), _pad2d(a.tensor.shape, (3, 3), (2, 2)))
    blocks = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + \
        [(1024, 2), (1024, 1)]
    for ch, s in blocks:
        pad = _pad2d(a.tensor.shape, (3, 3), (s, s))
        a = net.conv(a, 0, (3, 3), (s, s), pad, depthwise=True)
        a = net.conv(a, _channels(ch, width), (1, 1))
    a = net.flatten(net.avg_pool(a, a.tensor.shape[1:3]))
    return net.build(net.softmax(net.dense(a, 2, relu=False)))


def resnet8(dtype="int8", width=1.0, resolution=32, seed=0) -> Graph:
    """ResNet-8 image classification: [1, resolution, resolution, 3] -> 10 classes."""
    net = Net("resnet8", dtype, seed)
    a = net.input((1, resolution, resolution, 3))
    ch = _channels(16, width)
    a = net.conv(a, ch, (3, 3), pad=(1, 1, 1, 1))
    for stack, mult in enumerate((1, 2, 4)):
        s = 1 if stack == 0 else 2
        y = net.conv(a, ch * mult, (3, 3), (s, s), _pad2d(a.tensor.shape, (3, 3), (s, s)))
        y = net.conv(y, ch * mult, (3, 3), pad=(1, 1, 1, 1), relu=False)
        short = a if s == 1 else net.conv(a, ch * mult, (1, 1), (2, 2), relu=False)
        a = net.add(y, short)
    a = net.flatten(net.avg_pool(a, a.tensor.shape[1:3]))
    return net.build(net.softmax(net.dense(a, 10, relu=False)))


def autoencoder(dtype="int8", width=1.0, resolution=640, seed=0) -> Graph:
    """Anomaly-detection autoencoder: [1, resolution] -> [1, resolution]."""
    net = Net("autoencoder", dtype, seed)
    a = net.input((1, resolution))
    hidden = _channels(128, width)
    for features in [hidden] * 4 + [8] + [hidden] * 4:
        a = net.dense(a, features)
    return net.build(net.dense(a, resolution, relu=False).tensor)


MODELS = {"ds_cnn": ds_cnn, "mobilenet_v1": mobilenet_v1, "resnet8": resnet8,
          "autoencoder": autoencoder}


def model(name: str, **options) -> Graph:
    """A synthetic model by name (``MODELS``), e.g. ``model("resnet8", dtype="fp32")``."""
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; expected one of {', '.join(MODELS)}")
    return MODELS[name](**options)


def sample_input(graph: Graph, seed: int = 0) -> np.ndarray:
    """A random input for the graph's (single) input: uniform int8, or uniform [-1, 1) floats."""
    t = graph.inputs[0]
    rng = np.random.default_rng(seed)
    if t.dtype.is_int:
        return rng.integers(-128, 128, t.shape).astype(t.dtype.np)
    return rng.uniform(-1, 1, t.shape).astype(t.dtype.np)
