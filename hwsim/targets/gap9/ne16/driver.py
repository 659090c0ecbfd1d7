"""NE16 job registers for a convolution or a linear layer, as a driver computes them.

``conv_jobs`` returns the register values (by name) of the job(s) that compute one layer with
HWC tensors in L1, weights packed by ``layout``: the subtile counts and remainders, the strides,
PADDING and CONFIG0 (after the pulp-nnx driver ``ne16/hal/ne16_task.c``). Two choices differ
from that driver, both so that a non-zero padding value is exact:

* the last patch along an axis whose window runs into the bottom/right padding loads the whole
  5-row buffer and marks the rows past the input as explicit padding (PADDING.bottom/right =
  rows past the input), because the rows past REM2 are implicit zeros, not the padding value;
* stride 2 runs one job per 2x2 block of outputs (as pulp-nnx does): the job computes a stride-1
  3x3 patch over a 5x5 window and the strided2x2 flag writes its corners, with the output strides
  halved so that corner (0, 2) lands on the next output pixel.

The scheduler uses these; tests and examples use them to program the machine.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from hwsim.errors import ProgramError
from hwsim.isa import ne16 as isa
from hwsim.shapes import conv_out
from hwsim.targets.gap9.ne16.layout import weight_offset
from hwsim.targets.gap9.ne16.job import BUFFER, PATCH, TP_IN, TP_OUT

_MODE = {8: 0, 16: 1, 32: 2}


@dataclass(frozen=True)
class LayerSpec:
    """One NE16 layer: shapes (HWC input, h_in x w_in x k_in), filter and numerics. The
    scheduler's view of a layer too (``schedule.gap9.ne16.geometry``)."""

    h_in: int
    w_in: int
    k_in: int
    k_out: int
    kernel: int = 3                      # 3 or 1
    depthwise: bool = False
    linear: bool = False
    stride: int = 1                      # 1 or 2
    padding: tuple = (0, 0, 0, 0)        # top, bottom, left, right
    pad_value: int = 0
    filter_mask: tuple = (0, 0, 0, 0)    # top, right, bottom, left
    weight_bits: int = 8
    in_bits: int = 8
    out_bits: int = 8
    quant: bool = True
    relu: bool = False
    norm_bits: int = 8
    shift: int = 0
    norm_bias: bool = False
    norm_shift: bool = False
    streamin: bool = False
    offset: int | None = None            # WEIGHT_OFFSET; default -2^(bits-1)
    extra: dict = field(default_factory=dict)   # raw CONFIG0 fields (e.g. no_round)

    @property
    def h_out(self) -> int:
        return conv_out(self.h_in, self.kernel, *self.padding[0:2], self.stride)[0]

    @property
    def w_out(self) -> int:
        return conv_out(self.w_in, self.kernel, *self.padding[2:4], self.stride)[0]

    @property
    def group(self) -> int:
        """Output channels per k_out subtile."""
        return TP_IN if self.depthwise else TP_OUT

    @property
    def in_bytes(self) -> int:
        return self.in_bits // 8

    @property
    def out_bytes(self) -> int:
        return (self.out_bits if self.quant else 32) // 8


def _edge(out_count: int, kernel: int, in_count: int, pad_lo: int) -> tuple[int, int, int, int]:
    """(subtiles, output remainder, input remainder, explicit end padding) along one axis."""
    nb = -(-out_count // PATCH)
    last_out = out_count - PATCH * (nb - 1)
    if kernel == 1:
        return nb, last_out % PATCH, last_out, 0
    needed = last_out + kernel - 1
    available = in_count + pad_lo - PATCH * (nb - 1)
    if available >= needed:
        return nb, last_out % PATCH, needed, 0
    return nb, last_out % PATCH, BUFFER, BUFFER - available


def _config(spec: LayerSpec) -> int:
    mode = 2 if spec.kernel == 1 else (1 if spec.depthwise else 0)
    return _encode(isa.CONFIG0, dict(
        norm_bias=int(spec.norm_bias), norm_shift=int(spec.norm_shift),
        no_relu=int(not spec.relu), out_mode=_MODE[spec.out_bits if spec.quant else 32],
        shift=spec.shift, weight_offset_mode=1, streamin=int(spec.streamin),
        norm_mode=_MODE[spec.norm_bits], strided2x2=int(spec.stride == 2),
        linear=int(spec.linear), filter_mode=mode, quant=int(spec.quant),
        mode16=int(spec.in_bits == 16), weight_bits_m1=spec.weight_bits - 1, **spec.extra))


_WORDS: dict = {}


def _encode(word, fields: dict) -> int:
    """``word.encode(**fields)``, each distinct one encoded (and checked) once: the tiles of a
    layer repeat a few CONFIG0, PADDING and FILTER_MASK words."""
    key = (word.name, *fields.items())
    found = _WORDS.get(key)
    if found is None:
        if len(_WORDS) >= 4096:
            _WORDS.clear()
        found = _WORDS[key] = word.encode(**fields)
    return found


def _word(register: str, **fields: int) -> int:
    """A register's word from its ``isa.ne16`` fields (``_encode``)."""
    return _encode(isa.BY_NAME[register].word, fields)


def _weights_strides(spec: LayerSpec, nb_ki: int) -> tuple[int, int, int]:
    bpp = 1 if spec.in_bits == 16 else 2
    qw = spec.weight_bits
    if spec.linear:
        row = -(-spec.k_in // 16) * 2
        return row, qw * row, TP_OUT * qw * row
    if spec.kernel == 1:
        return bpp * qw, bpp * qw * nb_ki, 0
    if spec.depthwise:
        return 9 * bpp, 0, 0
    return 9 * bpp, 9 * bpp * qw * nb_ki, 0


def _check(spec: LayerSpec) -> None:
    if spec.kernel not in (1, 3) or spec.stride not in (1, 2):
        raise ProgramError(f"NE16 takes 1x1 or 3x3 filters at stride 1 or 2, found "
                           f"{spec.kernel}x{spec.kernel} stride {spec.stride}")
    if spec.kernel == 1 and any(spec.padding):
        raise ProgramError("NE16 1x1 mode takes no padding")
    if spec.stride == 2 and (spec.kernel != 3 or spec.k_out * spec.out_bytes % 2):
        raise ProgramError("stride 2 needs a 3x3 filter and an even number of output bytes "
                           "per pixel (the output strides are halved)")
    if spec.h_out < 1 or spec.w_out < 1:
        raise ProgramError(f"no output pixels for a {spec.h_in}x{spec.w_in} input")


def conv_jobs(spec: LayerSpec, input_ptr: int, output_ptr: int, weights_ptr: int,
              scale_ptr: int = 0, shift_ptr: int = 0, bias_ptr: int = 0) -> list[dict]:
    """Register values (name -> int) of the jobs computing ``spec``."""
    _check(spec)
    depthwise = spec.depthwise
    tp = TP_IN if depthwise else TP_OUT
    k_in_bytes = spec.k_in * spec.in_bytes
    nb_ki = -(-spec.k_in // 256) if spec.linear else -(-k_in_bytes // TP_IN)
    rem_ki = -(-(spec.k_in % 256) // 16) if spec.linear else k_in_bytes % TP_IN
    d0, d1, d2 = _weights_strides(spec, nb_ki)
    offset = weight_offset(spec.weight_bits) if spec.offset is None else spec.offset
    t, r, b, l = spec.filter_mask
    common = {
        "WEIGHTS_PTR": weights_ptr, "SCALE_PTR": scale_ptr, "SCALE_SHIFT_PTR": shift_ptr,
        "SCALE_BIAS_PTR": bias_ptr, "WEIGHTS_D0_STRIDE": d0, "WEIGHTS_D1_STRIDE": d1,
        "WEIGHTS_D2_STRIDE": d2, "WEIGHT_OFFSET": isa.word(offset),
        "INFEAT_D0_STRIDE": TP_IN if spec.linear else k_in_bytes,
        "INFEAT_D1_STRIDE": k_in_bytes * spec.w_in, "INFEAT_D2_STRIDE": 0,
        "OUTFEAT_D0_STRIDE": 32,
        "FILTER_MASK": _encode(isa.FILTER_MASK, dict(top=t, right=r, bottom=b, left=l)),
        "CONFIG0": _config(spec),
        "SUBTILE_NB0": _word("SUBTILE_NB0", ko=-(-spec.k_out // tp), ki=nb_ki),
        "SUBTILE_REM0": _word("SUBTILE_REM0", ko=spec.k_out % tp, ki=rem_ki),
    }
    if spec.linear:
        return [dict(common, INFEAT_PTR=input_ptr, OUTFEAT_PTR=output_ptr,
                     SUBTILE_NB1=_word("SUBTILE_NB1", ho=1, wo=1), SUBTILE_REM1=0,
                     SUBTILE_REM2=0, PADDING=0, OUTFEAT_D1_STRIDE=0, OUTFEAT_D2_STRIDE=0)]
    h_out, w_out, out_pixel = spec.h_out, spec.w_out, spec.k_out * spec.out_bytes
    # the output strides and the padding value, the same for every tile
    common.update(OUTFEAT_D1_STRIDE=out_pixel // spec.stride,
                  OUTFEAT_D2_STRIDE=out_pixel * w_out // spec.stride)
    value = spec.pad_value & (0xFFFF if spec.in_bits == 16 else 0xFF)
    if spec.stride == 1:
        return [_tile(spec, common, value, input_ptr, output_ptr, 0, 0, h_out, w_out)]
    jobs = []
    for ty in range(-(-h_out // 2)):
        for tx in range(-(-w_out // 2)):
            rows, cols = min(2, h_out - 2 * ty), min(2, w_out - 2 * tx)
            out = output_ptr + (2 * ty * w_out + 2 * tx) * out_pixel
            jobs.append(_tile(spec, common, value, input_ptr, out, 4 * ty, 4 * tx,
                              2 * rows - 1, 2 * cols - 1))
    return jobs


def _tile(spec: LayerSpec, common: dict, value: int, input_ptr: int, output_ptr: int,
          row0: int, col0: int, h_out: int, w_out: int) -> dict:
    """One job over the stride-1 output window starting at padded input (row0, col0)."""
    pt, pb, pl, pr = spec.padding
    top, left = (pt if row0 == 0 else 0), (pl if col0 == 0 else 0)
    rows = _edge(h_out, spec.kernel, spec.h_in + pt - row0, 0)
    cols = _edge(w_out, spec.kernel, spec.w_in + pl - col0, 0)
    first = input_ptr + ((row0 - pt) * spec.w_in + (col0 - pl)) * spec.k_in * spec.in_bytes
    return dict(common, INFEAT_PTR=first, OUTFEAT_PTR=output_ptr,
                **_geometry(rows, cols, top, left, value))


@functools.lru_cache(maxsize=4096)
def _geometry(rows: tuple, cols: tuple, top: int, left: int, value: int) -> dict:
    """The subtile and padding words of a window with the ``_edge`` of its rows and columns
    (the tiles of a layer share a few)."""
    nb_ho, rem_ho, rem_hi, bottom = rows
    nb_wo, rem_wo, rem_wi, right = cols
    return dict(SUBTILE_NB1=_word("SUBTILE_NB1", ho=nb_ho, wo=nb_wo),
                SUBTILE_REM1=_word("SUBTILE_REM1", ho=rem_ho, wo=rem_wo),
                SUBTILE_REM2=_word("SUBTILE_REM2", hi=rem_hi, wi=rem_wi),
                PADDING=_encode(isa.PADDING, dict(top=top, right=right, bottom=bottom,
                                                  left=left, value=value)))
