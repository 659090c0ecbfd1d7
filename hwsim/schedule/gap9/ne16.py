"""CONV2D, DEPTHWISE_CONV2D and MATMUL on NE16: weights, normalisation and jobs.

Which layers fit (``fit``): int8 input and weights, no dilation, batch 1, padding up to 2 above
and left and 1 below and right; 3x3 filters at stride 1 or 2x2 (depthwise with multiplier 1
too), 1x1 filters at stride 1 (linear mode for one output pixel), MATMUL with a constant B.
Everything else runs on the cluster.

How TOSA maps onto NE16 (checked bit for bit against the reference model by the tests):

* NE16 reads unsigned 8-bit activations: the scheduler keeps its inputs offset-binary (int8 + 128
  as uint8), so the accumulators hold sum(w (x + 128)). The input zero point and the offset fold
  into the bias: ``bias - (zp + 128) sum(w)``, and padding uses the value ``zp + 128`` (which
  contributes nothing after the fold, as TOSA's zero-point padding does).
* Weights are stored unsigned (``w + 2^(bits-1)``) in bit-planes; WEIGHT_OFFSET subtracts that
  and the weight zero point. ``weight_bits`` < 8 requantises them per output channel
  (symmetric, ``hwsim.targets.gap9.quant``) and folds the change of scale into the RESCALE.
* ``exact`` mode: normalisation by 1 plus the folded bias gives the TOSA int32 accumulator
  exactly (32-bit output); the RESCALE (and a CLAMP NE16 cannot express) runs on the cluster.
* ``ne16`` mode: the RESCALE becomes NE16's per-channel 8-bit scale and shift
  (``quant.ne16_scale_shift``); the bias carries the folded bias times the scale, the rounding
  (2^(shift-1): NE16 truncates) and the output zero point. ReLU clamps to 0..255, which is the
  int8 range offset by 128, so an offset-binary output costs nothing; a signed output clamps to
  -128..127. A CLAMP narrower than int8, an int16 output or a bias that does not fit 32 bits
  falls back to the exact path for that layer (noted in the report). The shift is lowered where
  needed so that scale x |accumulator bound| stays below 2^31 (NE16 truncates the product to 32
  bits before adding the bias); a factor below half the smallest step becomes scale 0 (noted
  with its error bound).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from hwsim.schedule.gap9.cluster import is_identity_clamp
from hwsim.schedule.tiles import window_rows
from hwsim.targets.gap9 import quant
from hwsim.targets.gap9.ne16 import layout
from hwsim.targets.gap9.ne16.driver import LayerSpec, conv_jobs
from hwsim.tosa.builder import quantize_scale
from hwsim.tosa_int import helpers as ti

ALIGN = 4


def fit(op) -> str | None:
    """Why NE16 cannot run ``op`` (None: it can), in words a report can show."""
    x = op.inputs[0]
    if x.shape[0] != 1:     # a job's registers address one image
        return f"batch {x.shape[0]}: this lowering gives NE16 batch-1 layers only"
    if op.op == "MATMUL":
        if not op.B.is_const:
            return "MATMUL with a B that is not a constant (NE16 weights are packed ahead)"
        return None if x.dtype.name == "int8" else "MATMUL input is not int8"
    if x.dtype.name != "int8" or op.weight.dtype.name != "int8":
        return "NE16 takes int8 activations and weights"
    kh, kw = (op.weight.shape[0], op.weight.shape[1]) if op.op == "DEPTHWISE_CONV2D" else \
        (op.weight.shape[1], op.weight.shape[2])
    stride = tuple(op.stride)
    if op.op == "DEPTHWISE_CONV2D" and op.weight.shape[3] != 1:
        return "depthwise multiplier is not 1"
    if not ((kh, kw) == (3, 3) and stride in ((1, 1), (2, 2)) or (kh, kw) == (1, 1) and
            stride == (1, 1) and op.op == "CONV2D" and not any(op.pad)):
        return f"NE16 takes 3x3 filters at stride 1 or 2 and unpadded 1x1 at stride 1, not " \
               f"{kh}x{kw} at stride {stride[0]}x{stride[1]}"
    if tuple(op.dilation) != (1, 1):
        return f"dilation {op.dilation[0]}x{op.dilation[1]} (NE16 has none)"
    top, bottom, left, right = op.pad
    if max(top, left) > 2 or max(bottom, right) > 1:
        # PADDING.bottom/right apply to the last 3x3 patch only; a second padded row or column
        # can fall in the patch before it
        return f"padding {list(op.pad)}: NE16 takes up to 2 above/left and 1 below/right"
    return None


def geometry(op) -> LayerSpec:
    """The layer as NE16 sees it: its shapes (HWC input h_in x w_in x k_in), filter, stride and
    padding; the numerics are left at their defaults (``Ne16Layer.spec`` sets them)."""
    x = op.inputs[0].shape
    if op.op == "MATMUL":       # M rows as a 1 x M image: linear mode for a single row
        return LayerSpec(1, x[1], x[2], op.B.shape[2], kernel=1, linear=x[1] == 1)
    w = op.weight.shape
    depthwise = op.op == "DEPTHWISE_CONV2D"
    kernel = w[1]
    return LayerSpec(x[1], x[2], x[3], x[3] if depthwise else w[0], kernel=kernel,
                     depthwise=depthwise, linear=kernel == 1 and x[1] * x[2] == 1,
                     stride=op.stride[0], padding=tuple(op.pad))


def rows_in(g: LayerSpec, r0: int, r1: int) -> tuple[int, int, int, int]:
    """Input rows [first, end) and the padding above and below for output rows [r0, r1)."""
    return window_rows(r0, r1, g.stride, g.kernel, g.padding[0], g.h_in)


def _weights(op) -> np.ndarray:
    """Effective weights ``w - zp`` as (cout, cin, kh, kw) (depthwise: (c, 1, 3, 3)), int32:
    they are 8 or 16-bit weights, and int64 arrays of them cost several times as much to
    make and sum."""
    if op.op == "MATMUL":
        return (op.const("B")[0].T.astype(np.int32) - op.scalar("B_zp"))[:, :, None, None]
    w = op.const("weight").astype(np.int32) - op.scalar("weight_zp")
    if op.op == "DEPTHWISE_CONV2D":
        return w[:, :, :, 0].transpose(2, 0, 1)[:, None]
    return w.transpose(0, 3, 1, 2)


def _requantise(w: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Per output channel symmetric ``bits``-bit weights and their scale in the old units."""
    flat = w.reshape(w.shape[0], -1).astype(float)
    scale = quant.symmetric(flat.min(axis=1), flat.max(axis=1), bits, reading="clipped")
    q = quant.quantize(w, scale, 0, q_range=quant.symmetric_range(bits, "clipped"))
    return q, scale


class Ne16Layer:
    """The numerics of one NE16 layer: stored weights, normalisation, and the cluster tail of
    the exact path. ``ops``: the matrix operator, then optionally RESCALE and CLAMP."""

    def __init__(self, ops: list, mode: str, weight_bits: int, out_offset: int):
        self.op = ops[0]
        self.rescale = next((op for op in ops[1:] if op.op == "RESCALE"), None)
        clamps = [op for op in ops[1:] if op.op == "CLAMP" and not is_identity_clamp(op)]
        self.clamp = clamps[0] if clamps else None
        self.geo = geometry(self.op)
        self.bits, self.out_offset = weight_bits, out_offset
        self.notes: list[str] = []
        w = _weights(self.op)
        scale = np.ones(w.shape[0])
        if weight_bits < 8:
            w, scale = _requantise(w, weight_bits)
            self.notes.append(f"weights requantised to {weight_bits} bits")
        self.w, self.w_scale = w, scale
        self.stored, self.weight_offset = self._stored(w)
        bias = self._bias()
        self.bias = np.round(bias / scale).astype(np.int64) if weight_bits < 8 else bias
        self.folded = self.bias - (self._input_zp() + 128) * self._sums()
        blocker = None if mode == "exact" else self._ne16_blocker()
        self.exact = mode == "exact" or blocker is not None
        if blocker is not None:
            self.notes.append(f"exact path: {blocker}")
        self.norm = self._exact_norm() if self.exact else self._ne16_norm()

    # -- inputs -----------------------------------------------------------------------------------
    def _input_zp(self) -> int:
        return int(self.op.scalar("A_zp" if self.op.op == "MATMUL" else "input_zp"))

    def _bias(self) -> np.ndarray:
        k = self.geo.k_out
        if self.op.op == "MATMUL":
            return np.zeros(k, np.int64)
        return np.broadcast_to(self.op.const("bias").astype(np.int64).reshape(-1), (k,)).copy()

    def _sums(self) -> np.ndarray:
        return self.w.reshape(self.w.shape[0], -1).sum(axis=1)

    def _stored(self, w: np.ndarray) -> tuple[np.ndarray, int]:
        if self.bits == 8:            # effective w - zp may exceed int8: store w, offset -128-zp
            zp = int(self.op.scalar("B_zp" if self.op.op == "MATMUL" else "weight_zp"))
            return (w + zp + 128).astype(np.uint8), -128 - zp
        return layout.to_unsigned(w, self.bits), layout.weight_offset(self.bits)

    # -- normalisation ---------------------------------------------------------------------------
    @property
    def out_dtype(self) -> str:
        last = self.clamp or self.rescale
        return (last or self.op).output.dtype.name

    @functools.cached_property
    def _factor(self) -> np.ndarray:
        mult = self.rescale.const("multiplier").astype(float).reshape(-1)
        shift = self.rescale.const("shift").astype(float).reshape(-1)
        factor = mult * np.exp2(-shift) * self.w_scale
        return np.broadcast_to(factor, (self.geo.k_out,))

    def _ne16_blocker(self) -> str | None:
        if self.rescale is None:
            return "no RESCALE to fuse (int32 output)"
        if self.out_dtype != "int8" or self.rescale.input_unsigned or \
                self.rescale.output_unsigned:
            return "NE16 writes int8 here, the RESCALE another type"
        if self.clamp is not None:
            return "a CLAMP narrower than int8"
        if self.geo.stride == 2 and self.geo.k_out % 2:
            return "stride 2 with an odd number of output channels"
        _, _, bias = self._ne16
        if np.abs(bias).max(initial=0) >= 1 << 31:
            return "the normalisation bias does not fit 32 bits"
        return None

    @functools.cached_property
    def _ne16(self) -> tuple:
        """(scale, shift, bias) per output channel of the fused normalisation."""
        factor = self._factor
        scale, shift, _ = quant.ne16_scale_shift(factor, 0, norm_bits=8, max_shift=24)
        sums = np.abs(self.w.reshape(self.w.shape[0], -1)).sum(axis=1)
        bound = sums * 255 + np.abs(self.bias)
        for _ in range(32):       # keep scale * |accumulator| below 2^31
            over = (scale * bound + (257 << shift)) >= (1 << 31)
            if not over.any():
                break
            shift = np.where(over & (shift > 0), shift - 1, shift)
            scale = np.round(factor * np.exp2(shift)).astype(np.int64)
        zp = int(self.rescale.scalar("output_zp")) + self.out_offset
        rounding = np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)
        bias = scale * self.folded + rounding + (zp << shift)
        # a channel without weights outputs a constant: scale 0, the exact value as its bias
        dead = sums == 0
        constant = self._constant() + zp if dead.any() else 0
        return (np.where(dead, 0, scale), np.where(dead, 0, shift),
                np.where(dead, constant, bias))

    def _constant(self) -> np.ndarray:
        """The TOSA RESCALE of each channel's bias (the output of a channel without weights,
        before the output zero point)."""
        r = self.rescale
        mult = np.broadcast_to(r.const("multiplier").reshape(-1), (self.geo.k_out,))
        shift = np.broadcast_to(r.const("shift").reshape(-1), (self.geo.k_out,))
        return ti.rescale(self.bias, mult, shift, 0, 0, "i32", bool(r.scale32),
                          r.rounding_mode == "DOUBLE_ROUND")

    def _ne16_norm(self) -> dict:
        scale, shift, bias = self._ne16
        live = scale > 0
        deviation = scale[live] * np.exp2(-shift[live].astype(float)) / self._factor[live] - 1
        self.notes.append(f"NE16 scale/shift deviates from the RESCALE by up to "
                          f"{100 * np.abs(deviation).max(initial=0):.2f}%")
        # a factor below half NE16's smallest step rounds to scale 0 (quant.ne16_scale_shift)
        sums = np.abs(self.w.reshape(self.w.shape[0], -1)).sum(axis=1)
        small = ~live & (sums > 0)
        if small.any():
            worst = (self._factor[small] * (sums[small] * 255 + np.abs(self.bias[small]))).max()
            self.notes.append(f"{int(small.sum())} channels scale by less than NE16's smallest "
                              f"step: scale 0, off by at most {worst:.2f} LSB")
        return {"scale": scale, "shift": shift, "bias": bias}

    def _exact_norm(self) -> dict:
        k = self.geo.k_out
        return {"scale": np.ones(k, np.int64), "shift": np.zeros(k, np.int64),
                "bias": self.folded}

    def spec(self, h_in: int, pad: tuple, k_out: int) -> LayerSpec:
        """The layer's band of ``h_in`` input rows (padding ``pad``) and ``k_out`` output
        channels, with this layer's numerics."""
        g = self.geo
        return replace(g, h_in=h_in, k_in=k_out if g.depthwise else g.k_in, k_out=k_out,
                       padding=pad, pad_value=self._input_zp() + 128, weight_bits=self.bits,
                       out_bits=32 if self.exact else 8, quant=True,
                       relu=not self.exact and self.out_offset == 128, norm_bits=8,
                       norm_bias=True, norm_shift=not self.exact, offset=self.weight_offset,
                       extra={"no_round": 1})

    # -- the cluster tail of the exact path -------------------------------------------------------
    def tail(self) -> dict | None:
        """Arrays of the RESCALE the cluster applies (exact path), or None."""
        if not self.exact or self.rescale is None:
            return None
        mult = self.rescale.const("multiplier").reshape(-1)
        shift = self.rescale.const("shift").reshape(-1)
        if self.bits < 8:
            pairs = [quantize_scale(float(f), bool(self.rescale.scale32)) for f in self._factor]
            mult = np.array([m for m, _ in pairs], mult.dtype)
            shift = np.array([s for _, s in pairs], np.int8)
        return {"mult": mult, "shift": shift}

    # -- parameters in memory --------------------------------------------------------------------
    def parts(self, k0: int, k1: int) -> dict:
        """Weights and normalisation of output channels [k0, k1), as byte arrays."""
        zero = -self.weight_offset
        w = self.stored[k0:k1]
        if self.geo.linear:
            packed = layout.pack_linear_weights(w[:, :, 0, 0], self.bits, zero)
        else:
            packed = layout.pack_conv_weights(w, self.bits, depthwise=self.geo.depthwise,
                                              zero=zero)
        n = self.norm
        return {"weights": packed, "scale": layout.pack_scale(n["scale"][k0:k1], 8),
                "shift": layout.pack_shift(n["shift"][k0:k1]),
                "bias": layout.pack_bias(n["bias"][k0:k1])}

    def block_bytes(self, k0: int, k1: int) -> int:
        """Bytes of ``parts(k0, k1)`` laid out by ``concat``, without packing them."""
        k, g = k1 - k0, self.geo
        if g.linear:
            weights = k * self.bits * -(-g.k_in // 16) * 2
        else:
            weights = layout.conv_weight_bytes(1 if g.depthwise else k, k if g.depthwise
                                               else g.k_in, g.kernel ** 2, self.bits)
        return sum(-(-n // ALIGN) * ALIGN for n in (weights, k, k, 4 * k))

    def jobs(self, rows: tuple, k0: int, k1: int, ptr: dict) -> list[dict]:
        """Registers of the jobs computing output rows [r0, r1) and channels [k0, k1).
        ``ptr``: L1 addresses of the input band (its first row, all channels), the output band
        (its first row), and the block parts."""
        g = self.geo
        first, end, top, bottom = rows_in(g, *rows)
        spec = self.spec(end - first, (top, bottom, *g.padding[2:]), k1 - k0)
        in_bytes, out_bytes = 1, spec.out_bytes
        full_in, full_out = g.k_in * in_bytes, g.k_out * out_bytes
        blk_in = spec.k_in * in_bytes
        blk_out = spec.k_out * out_bytes
        jobs = conv_jobs(spec, ptr["in"], ptr["out"], ptr["weights"], ptr["scale"],
                         ptr["shift"], ptr["bias"])
        if (blk_in, blk_out) == (full_in, full_out):
            return jobs
        # a k-block: whole pixels of the full tensors, this block's channels
        s = spec.stride
        for regs in jobs:
            if g.depthwise:
                pixel = (regs["INFEAT_PTR"] - ptr["in"]) // blk_in
                regs.update(INFEAT_PTR=ptr["in"] + pixel * full_in + k0 * in_bytes,
                            INFEAT_D0_STRIDE=full_in, INFEAT_D1_STRIDE=full_in * g.w_in)
            pixel = (regs["OUTFEAT_PTR"] - ptr["out"]) // blk_out
            regs.update(OUTFEAT_PTR=ptr["out"] + pixel * full_out + k0 * out_bytes,
                        OUTFEAT_D1_STRIDE=full_out // s,
                        OUTFEAT_D2_STRIDE=full_out * g.w_out // s)
        return jobs


def concat(parts: dict) -> tuple[np.ndarray, dict]:
    """Byte arrays laid end to end, each aligned: (bytes, {name: offset})."""
    offsets, chunks, at = {}, [], 0
    for name, data in parts.items():
        data = np.asarray(data, np.uint8).reshape(-1)
        offsets[name] = at
        pad = -data.size % ALIGN
        chunks += [data, np.zeros(pad, np.uint8)]
        at += data.size + pad
    return (np.concatenate(chunks) if chunks else np.zeros(0, np.uint8)), offsets
