"""One NE16 job decoded from its 24 register words: modes, subtile geometry, checks.

The NE16 walks a job as nested subtile loops (gvsoc-pulp ``pulp/ne16/src/ne16_index.cpp``):
k_out subtiles (32 output channels, 16 in depthwise mode) outermost, then output rows and columns
in 3x3 patches, then input-channel subtiles (16 channels; 8 in 16-bit mode) innermost. SUBTILE_NB*
count them and SUBTILE_REM* give the size of the last one (0 means full). The last input patch is
REM2 rows and columns; positions past it read as zero (implicit padding).

Combinations the models reject (GVSoC ``ne16_fsm.cpp`` asserts, pulp-nnx test checks) raise a
``ProgramError`` naming the job: depthwise with 16-bit input or with different k_in/k_out
subtiles, linear mode without filter mode 1x1, streamin without 32-bit output, a filter mask in
1x1 mode, an odd number of 16-bit input bytes, 8 or 16-bit output without normalisation.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwsim.errors import ProgramError
from hwsim.isa import ne16 as isa

TP_IN = 16          # input channel bytes per subtile (ne16_package.sv NE16_TP_IN)
TP_OUT = 32         # output channels per subtile (NE16_TP_OUT)
PATCH = 3           # output patch side (NE16_FILTER_SIZE)
BUFFER = 5          # input buffer side in 3x3 modes (F_BUFFER_SIZE)
LINEAR_VECTORS = 16  # 16-byte input words per linear subtile (RTL infeat_kim_iter = 256 bytes)


def _signed32(value: int) -> int:
    return value - (1 << 32) if value >> 31 else value


# Register indices of the pointers: a job's geometry, modes and costs do not depend on them, so
# jobs that differ only in pointers (the tiles of one layer) share one decoding.
POINTERS = tuple(r.index for r in isa.REGISTERS if r.name.endswith("_PTR"))
# the SUBTILE_* words (two 16-bit fields each, ``isa.ne16``) and the prefix of their fields here
SUBTILE_WORDS = (("SUBTILE_REM0", "rem"), ("SUBTILE_REM1", "rem"), ("SUBTILE_REM2", "rem"),
                 ("SUBTILE_NB0", "nb"), ("SUBTILE_NB1", "nb"))
_DECODED: dict = {}
_CACHE_LIMIT = 4096


@dataclass(frozen=True)
class Ne16Job:
    """A decoded job; ``regs`` are the 24 register words in REGISTERS order."""

    regs: tuple
    index: int = 0

    def __post_init__(self):
        words = list(self.regs)
        for i in POINTERS:
            words[i] = 0
        signature = tuple(words)
        object.__setattr__(self, "signature", signature)
        values = _DECODED.get(signature)
        if values is None:
            values = self._decode()
            if len(_DECODED) >= _CACHE_LIMIT:
                _DECODED.clear()
            _DECODED[signature] = values
        self.__dict__.update(values)      # frozen: fields are set once, here

    def _decode(self) -> dict:
        """The fields and the checks, for a job signature seen for the first time."""
        get = self._get
        c = isa.CONFIG0.decode(self.regs[isa.BY_NAME["CONFIG0"].index])
        pad = isa.PADDING.decode(get("PADDING"))
        mask = isa.FILTER_MASK.decode(get("FILTER_MASK"))
        values = dict(config=c, pad=pad, mask=mask,
                      weight_offset=_signed32(get("WEIGHT_OFFSET")))
        for name, prefix in SUBTILE_WORDS:       # rem_ko, rem_ki, ..., nb_ho, nb_wo
            fields = isa.BY_NAME[name].word.decode(get(name))
            values.update({f"{prefix}_{field}": value for field, value in fields.items()})
        for name, value in values.items():
            object.__setattr__(self, name, value)
        self._check()
        values["useful_macs"] = self._count_macs()
        return values

    def _get(self, name: str) -> int:
        return self.regs[isa.BY_NAME[name].index]

    def reg(self, name: str) -> int:
        """A pointer or stride register; strides are signed 32-bit."""
        value = self._get(name)
        return _signed32(value) if "STRIDE" in name else value

    # -- modes ---------------------------------------------------------------------------------
    @property
    def filter_mode(self) -> int:
        return self.config["filter_mode"]

    depthwise = property(lambda self: self.filter_mode == 1)
    pointwise = property(lambda self: self.filter_mode == 2)
    linear = property(lambda self: bool(self.config["linear"]))
    mode16 = property(lambda self: bool(self.config["mode16"]))
    strided = property(lambda self: bool(self.config["strided2x2"]))
    streamin = property(lambda self: bool(self.config["streamin"]))
    quant = property(lambda self: bool(self.config["quant"]))
    relu = property(lambda self: not self.config["no_relu"])
    weight_bits = property(lambda self: self.config["weight_bits_m1"] + 1)
    out_bits = property(lambda self: isa.MODE_BITS[self.config["out_mode"]])
    norm_bits = property(lambda self: isa.MODE_BITS[self.config["norm_mode"]])

    @property
    def buffer(self) -> int:
        """Side of the input buffer: 5 for 3x3 filters, 3 for 1x1."""
        return PATCH if self.pointwise else BUFFER

    @property
    def taps(self) -> int:
        return 1 if self.pointwise else 9

    @property
    def tp_out(self) -> int:
        return TP_IN if self.depthwise else TP_OUT

    @property
    def channels_in(self) -> int:
        """Input channels per k_in subtile (16 bytes: 16 8-bit or 8 16-bit channels)."""
        return TP_IN // 2 if self.mode16 else TP_IN

    # -- subtile sizes (0 in a remainder register means a full subtile) --------------------------
    def _last(self, index: int, count: int, rem: int, full: int) -> int:
        return rem if index == count - 1 and rem else full

    def k_out_lim(self, ko: int) -> int:
        return self._last(ko, self.nb_ko, self.rem_ko, self.tp_out)

    def k_in_bytes(self, ki: int) -> int:
        """Input bytes loaded per pixel in subtile ``ki`` (channels in 8-bit mode)."""
        return self._last(ki, self.nb_ki, self.rem_ki, TP_IN)

    def h_out(self, i: int) -> int:
        return self._last(i, self.nb_ho, self.rem_ho, PATCH)

    def w_out(self, j: int) -> int:
        return self._last(j, self.nb_wo, self.rem_wo, PATCH)

    def h_in(self, i: int) -> int:
        return self._last(i, self.nb_ho, self.rem_hi, self.buffer)

    def w_in(self, j: int) -> int:
        return self._last(j, self.nb_wo, self.rem_wi, self.buffer)

    def linear_vectors(self, ki: int) -> int:
        """16-byte input words loaded in linear subtile ``ki`` (rem_ki counts 16-channel groups)."""
        per = LINEAR_VECTORS * (2 if self.mode16 else 1)
        last = self.rem_ki * (2 if self.mode16 else 1)
        return self._last(ki, self.nb_ki, last, per)

    @property
    def k_in_subtiles(self) -> int:
        """k_in subtiles the matrix-vector loop visits per output patch (1 in depthwise mode)."""
        return 1 if self.depthwise else self.nb_ki

    def out_words(self, k_out: int) -> int:
        """32-byte stores per output pixel for ``k_out`` channels."""
        return max(1, -(-k_out * self.out_bits // 256)) if self.out_bits > 8 else 1

    @property
    def macs(self) -> int:
        """Useful multiply-accumulates (valid channels, taps and output pixels)."""
        return self.useful_macs

    def _count_macs(self) -> int:
        if self.linear:
            k_in = sum(self.linear_vectors(k) for k in range(self.nb_ki)) * self.channels_in
        else:
            k_in = sum(self.k_in_bytes(k) for k in range(self.nb_ki)) // (2 if self.mode16 else 1)
        k_out = sum(self.k_out_lim(k) for k in range(self.nb_ko))
        if self.linear:
            return k_in * k_out
        pixels = (sum(self.h_out(i) for i in range(self.nb_ho))
                  * sum(self.w_out(j) for j in range(self.nb_wo)))
        if self.strided:
            pixels = (sum((self.h_out(i) + 1) // 2 for i in range(self.nb_ho))
                      * sum((self.w_out(j) + 1) // 2 for j in range(self.nb_wo)))
        m = self.mask
        active = 1 if self.pointwise else (max(0, 3 - m["top"] - m["bottom"])
                                           * max(0, 3 - m["left"] - m["right"]))
        per_pixel = (k_out if self.depthwise else k_in * k_out) * active
        return pixels * per_pixel

    def _check(self) -> None:
        def fail(what: str):
            raise ProgramError(f"ne16 job {self.index}: {what}")
        for name in ("nb_ko", "nb_ki", "nb_ho", "nb_wo"):
            if getattr(self, name) == 0:
                fail(f"SUBTILE_NB {name[3:]} is 0; a job has at least one subtile per loop")
        if self.rem_ko > self.tp_out or self.rem_ki > TP_IN:
            fail(f"subtile remainders ko={self.rem_ko}, ki={self.rem_ki} exceed "
                 f"{self.tp_out} and {TP_IN}")
        if self.rem_ho > PATCH or self.rem_wo > PATCH:
            fail(f"output remainders ho={self.rem_ho}, wo={self.rem_wo} exceed {PATCH}")
        if self.rem_hi > self.buffer or self.rem_wi > self.buffer:
            fail(f"input remainders hi={self.rem_hi}, wi={self.rem_wi} exceed {self.buffer}")
        if self.depthwise and self.mode16:
            fail("depthwise mode does not take 16-bit input (GVSoC ne16_fsm.cpp)")
        if self.depthwise and (self.nb_ko, self.rem_ko) != (self.nb_ki, self.rem_ki):
            fail("depthwise mode needs the same k_in and k_out subtiles")
        if self.linear and not self.pointwise:
            fail("linear mode needs filter_mode 1x1")
        if self.streamin and self.out_bits != 32:
            fail("streamin needs 32-bit output (streamin reads the output words)")
        if not self.quant and self.out_bits != 32:
            fail(f"{self.out_bits}-bit output needs quant=1 (else the 32-bit accumulators are "
                 "streamed out)")
        if self.pointwise and any(self.mask.values()):
            fail("a filter mask needs a 3x3 filter mode")
        if self.mode16 and any(self.k_in_bytes(k) % 2 for k in range(self.nb_ki)) \
                and not self.linear:
            fail("16-bit input needs an even number of input bytes per subtile")
