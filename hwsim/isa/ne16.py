"""NE16 register interface: the HWPE control registers, the job registers and their fields.

The NE16 is programmed like every HWPE: the controller reads ACQUIRE (offset 0x04) to reserve
one of two register contexts (a job id, or -1 while two jobs are pending), writes the job
registers of that context, and writes COMMIT_TRIGGER (0x00) to queue the job; STATUS (0x0C)
tells which contexts hold jobs, RUNNING_JOB (0x10) the job running, and the end of each job
raises an event. Job registers live from 0x20, one 32-bit word each.

Sources: the offsets and job register order are those of the GVSoC NE16 model (gvsoc-pulp
``pulp/ne16/include/ne16.hpp``, ``src/ne16.cpp``) and the pulp-nnx driver
(``ne16/hal/ne16_task_defs.h``); the bit fields of CONFIG0, PADDING, FILTER_MASK and the subtile
words are those the RTL decodes (pulp-platform/ne16 ``rtl/ctrl/ne16_ctrl.sv``), which agree with
GVSoC's ``ne16_regfile.cpp`` except where noted on the field. The fields are declared once here;
encode, decode, validation and the README table derive from them.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwsim.errors import EncodingError
from hwsim.isa.fields import Field, Reserved, Word

JOB_BASE = 0x20
CONTEXTS = 2


def _one_of(*values: int):
    return lambda v: v in values


CONFIG0 = Word("CONFIG0", [
    Reserved("31:26"),
    Field("norm_bias", "25", doc="load a per-channel int32 bias from SCALE_BIAS_PTR"),
    Field("norm_shift", "24", doc="load a per-channel shift from SCALE_SHIFT_PTR (else [20:16])"),
    Field("no_relu", "23", doc="0: ReLU, output unsigned; 1: keep the sign"),
    Field("out_mode", "22:21", allowed=_one_of(0, 1, 2), expect="0 (8 bit), 1 (16), 2 (32)",
          doc="output bits: 0 = 8, 1 = 16, 2 = 32"),
    Field("shift", "20:16", doc="right shift after normalisation (per layer)"),
    Field("weight_offset_mode", "15",
          doc="pulp-nnx: 0 symmetric, 1 layer-wise; not decoded: WEIGHT_OFFSET always applies"),
    Field("streamin", "14", doc="accumulate onto the int32 partial sums at OUTFEAT_PTR"),
    Field("norm_mode", "13:12", allowed=_one_of(0, 1, 2), expect="0 (8 bit), 1 (16), 2 (32)",
          doc="scale bits: 0 = 8, 1 = 16, 2 = 32"),
    Field("no_round", "11", doc="RTL: use_rounding = ~[11]; see parameter ne16_rounding"),
    Reserved("10:9"),
    Field("strided2x2", "8", doc="write only output pixels (0,0) (0,2) (2,0) (2,2) of a patch"),
    Field("linear", "7", doc="fully connected mode (needs filter_mode 1x1)"),
    Field("filter_mode", "6:5", allowed=_one_of(0, 1, 2), expect="0 (3x3), 1 (3x3dw), 2 (1x1)",
          doc="0 = 3x3, 1 = 3x3 depthwise, 2 = 1x1"),
    Field("quant", "4", doc="normalise + quantise before streamout (else 32-bit accumulators)"),
    Field("mode16", "3", doc="16-bit input activations"),
    Field("weight_bits_m1", "2:0", doc="weight bits minus one"),
])

PADDING = Word("PADDING", [
    Field("top", "31:28"), Field("right", "27:24"), Field("bottom", "23:20"),
    Field("left", "19:16"),
    Field("value", "15:0", doc="[7:0] in 8-bit mode; low/high byte in 16-bit mode"),
])

FILTER_MASK = Word("FILTER_MASK", [
    Field("top", "31:24"), Field("right", "23:16"), Field("bottom", "15:8"), Field("left", "7:0"),
])


def _pair(name: str, hi: str, lo: str) -> Word:
    return Word(name, [Field(hi, "31:16"), Field(lo, "15:0")])


# Symbolic values accepted in program text for the coded fields.
SYMBOLS = {
    ("CONFIG0", "filter_mode"): {"3x3": 0, "3x3dw": 1, "dw": 1, "1x1": 2},
    ("CONFIG0", "out_mode"): {"8bit": 0, "16bit": 1, "32bit": 2},
    ("CONFIG0", "norm_mode"): {"8bit": 0, "16bit": 1, "32bit": 2},
}
MODE_BITS = (8, 16, 32)


@dataclass(frozen=True)
class Register:
    name: str
    index: int
    word: Word | None
    doc: str

    @property
    def offset(self) -> int:
        return JOB_BASE + 4 * self.index


REGISTERS = [Register(*row) for row in [
    ("WEIGHTS_PTR", 0, None, "weights (bit-plane layout) in L1"),
    ("INFEAT_PTR", 1, None, "input feature map in L1 (top-left of the padded window)"),
    ("OUTFEAT_PTR", 2, None, "output feature map in L1"),
    ("SCALE_PTR", 3, None, "per-channel scale, 8/16/32-bit unsigned"),
    ("SCALE_SHIFT_PTR", 4, None, "per-channel shift, one byte each"),
    ("SCALE_BIAS_PTR", 5, None, "per-channel bias, int32"),
    ("INFEAT_D0_STRIDE", 6, None, "bytes between input pixels along W (linear: 16-byte words)"),
    ("INFEAT_D1_STRIDE", 7, None, "bytes between input rows"),
    ("INFEAT_D2_STRIDE", 8, None, "input block stride (not used by the modelled modes)"),
    ("OUTFEAT_D0_STRIDE", 9, None, "bytes between 32-byte output words of one pixel"),
    ("OUTFEAT_D1_STRIDE", 10, None, "bytes between output pixels along W"),
    ("OUTFEAT_D2_STRIDE", 11, None, "bytes between output rows"),
    ("WEIGHTS_D0_STRIDE", 12, None, "bytes between weight bit-planes"),
    ("WEIGHTS_D1_STRIDE", 13, None, "bytes between output channels' weights"),
    ("WEIGHTS_D2_STRIDE", 14, None, "linear mode: bytes between 32-channel output blocks"),
    ("SUBTILE_REM0", 15, _pair("SUBTILE_REM0", "ko", "ki"), "remainders of k_out, k_in"),
    ("SUBTILE_REM1", 16, _pair("SUBTILE_REM1", "ho", "wo"), "remainders of h_out, w_out"),
    ("SUBTILE_REM2", 17, _pair("SUBTILE_REM2", "hi", "wi"), "input rows, columns last subtile"),
    ("SUBTILE_NB0", 18, _pair("SUBTILE_NB0", "ko", "ki"), "number of k_out, k_in subtiles"),
    ("SUBTILE_NB1", 19, _pair("SUBTILE_NB1", "ho", "wo"), "number of h_out, w_out subtiles"),
    ("PADDING", 20, PADDING, "explicit padding per side and its value"),
    ("WEIGHT_OFFSET", 21, None, "signed offset added to every stored (unsigned) weight"),
    ("FILTER_MASK", 22, FILTER_MASK, "3x3 taps masked per side"),
    ("CONFIG0", 23, CONFIG0, "modes (fields above)"),
]]
BY_NAME = {r.name: r for r in REGISTERS}
NUM_REGISTERS = len(REGISTERS)


def register(name: str) -> Register:
    try:
        return BY_NAME[name.upper()]
    except KeyError:
        raise EncodingError("ne16", "register", name,
                            f"one of {', '.join(BY_NAME)}") from None


def encode_fields(reg: Register, values: dict[str, int | str]) -> int:
    """A register word from field values; coded fields also take their symbols (``1x1``)."""
    if reg.word is None:
        raise EncodingError("ne16", reg.name, str(values), "a 32-bit value (it has no fields)")
    plain = {}
    for name, value in values.items():
        symbols = SYMBOLS.get((reg.name, name), {})
        if isinstance(value, str):
            if value not in symbols:
                raise EncodingError(reg.name, name, value,
                                    f"an integer or one of {', '.join(symbols)}"
                                    if symbols else "an integer")
            value = symbols[value]
        plain[name] = value
    return reg.word.encode(**plain)


def word(value: int) -> int:
    """A register value as an unsigned 32-bit word (negative values are two's complement)."""
    if not -(1 << 31) <= value < (1 << 32):
        raise EncodingError("ne16", "value", value, "a 32-bit value")
    return value & 0xFFFFFFFF
