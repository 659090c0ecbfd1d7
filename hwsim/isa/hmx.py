"""Hexagon HMX (V81) instructions: register words, the intrinsic-call syntax, program rules.

What a program says, from the V81 HMX Programmer's Reference Manual (80-N2040-62 Rev. AA):

* the scalar register words of every FP16 instruction, declared once as ``Word`` tables:
  activation Rs/Rt (Figure 3, Table 1: address, the split spatial offset and mask in bits 10:7
  and 1, channel start/stop, dY or dC), weight Rs/Rt (Figure 6, Table 2: negate, dW, reserved
  bits that must be zero or all ones), bias Rs (Figure 14, Table 3), convert Rs (Figure 17,
  Table 6), write-convert Rs/Rt (Table 8), the 64-bit bias register (Figure 15, Table 4) and the
  two modelled USR bits (Table 7);
* one line per instruction, written as the manual's intrinsic call with integer arguments:
  ``Q6_activation_hf_mxmem_RR(0x0, (0b1110 << 7) | (31 << 2))``. Arguments are C integer
  constant expressions: literals (``42``, ``0x2a``, ``052``, ``0b101010``, suffixes ``u``/``l``)
  combined with ``| & ^ << >> + - * / %`` (C precedence), unary ``- ~`` and parentheses.
  ``USR = <expr>`` sets USR bits 20 and 21 (every other bit must be zero: they are not
  modelled). The HVX and DMA lines of the machine (``hvx_*``, ``dma_*``) use the same call
  syntax with plain integer arguments;
* the rules the manual states for a sequence: an activation is immediately followed by its
  weight (section 2.2), channel ranges in steps of 8 (4.1.1; start below stop within one
  crouton, 4.2.4), the single's offset only in the mask's Y bits (4.4.1).

Not modelled here: addresses against the VTCM size (the machine knows it), and data types other
than FP16 (the manual covers only FP16).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hwsim.errors import EncodingError, Location, ProgramError, TraceSyntaxError, clip
from hwsim.isa.fields import Field, Reserved, Word
from hwsim.traces.reader import unknown_directive

CROUTON_BYTES = 2048  # 32 spatials x 32 channels x FP16 (Figure 2)
VECTOR_BYTES = 128  # one VTCM/HVX vector (Figures 4, 7, 13)
BIAS_SET_BYTES = 256  # 32 output channels x 64 bits (Figure 13)

_STOP = dict(allowed=lambda v: v % 8 == 7, expect="7, 15, 23 or 31 (ranges in steps of 8)")
_START = dict(allowed=lambda v: v % 8 == 0, expect="0, 8, 16 or 24 (a multiple of 8)")


def _address(bits: str, align: int) -> Field:
    return Field("address", bits, in_place=True, doc=f"{align}-byte aligned VTCM address")


def _activation_rs(single: bool) -> Word:
    offset = (Field("offset", "10:7,1", doc="spatial offset; only Y bits (single, 4.4.1)")
              if single else Reserved("10:7,1", name="offset (only the single takes one)"))
    return Word("activation.Rs", [_address("31:11", CROUTON_BYTES), offset,
                                  Field("channel_start", "6:2", **_START),
                                  Reserved("0")])


def _activation_rt(dy_dc: Field | Reserved) -> Word:
    return Word("activation.Rt", [dy_dc,
                                  Field("spatial_mask", "10:7,1", doc="1 = Y, 0 = X per bit"),
                                  Field("channel_stop", "6:2", **_STOP), Reserved("0")])


ACT_RS = _activation_rs(single=False)
ACT_SINGLE_RS = _activation_rs(single=True)
ACT_RT = _activation_rt(Reserved("31:11", name="dY_dC (0 unless deep or single)"))
ACT_DEEP_RT = _activation_rt(Field("dc", "31:11", allowed=lambda v: v <= 31,
                                   expect="0..31 (dC + 1 croutons, at most 32)",
                                   doc="crouton count - 1 (4.2.1)"))
ACT_SINGLE_RT = _activation_rt(Field("dy", "31:11", signed=True, in_place=True,
                                     doc="signed distance to the second crouton (4.4.1)"))

_ALIGN_128 = "reserved (128-byte alignment)"
WGT_RS = Word("weight.Rs", [_address("31:7", VECTOR_BYTES), Reserved("6", name=_ALIGN_128),
                            Field("negate", "5", doc="MAC = A * -W"),
                            Reserved("4:0", name=_ALIGN_128)])
WGT_RT = Word("weight.Rt", [Field("dw", "31:7", in_place=True,
                                  doc="distance to the last 128-byte weight vector"),
                            Reserved("6:0", ones=True)])

BIAS_RS = Word("bias.Rs", [_address("31:8", BIAS_SET_BYTES),
                           Reserved("7:2", name="reserved (256-byte alignment)"),
                           Field("index", "1:0", doc="bias register set")])

CVT_RS = Word("convert.Rs", [
    Reserved("31:14"), Field("bias_sel", "13:12", doc="bias register set"), Reserved("11:9"),
    Field("rnd", "8", doc="1: keep 4 extra mantissa bits for feedback"), Reserved("7"),
    Field("ovf", "6", doc="1: overflow to maxnorm (Table 7)"), Reserved("5"),
    Field("fb_op", "4", doc="feedback limit: 0 min, 1 max"),
    Field("fb_dest", "3:2", allowed=lambda v: v <= 2,
          expect="0 (none), 1 (output bias) or 2 (scale)", doc="feedback destination"),
    Reserved("1"), Field("acc", "0", doc="0: clear accumulator and swap; 1: retain")])

WR_RS = Word("write.Rs", [_address("31:11", CROUTON_BYTES),
                          Reserved("10:0", name="reserved (2 KB alignment)")])
WR_RT = Word("write.Rt", [Reserved("31:11"), Field("spatial_mask", "10:7,1"),
                          Reserved("6:2"), Reserved("0")])

# The 64-bit bias register of one output channel (Figure 15, Table 4). Split fields read
# MSB-first, so scale = Rs[15:0] << 4 | Rs[35:32]: the FP16 bits followed by 4 extra mantissa bits.
BIAS_REG = Word("bias register", [
    Field("input_bias", "63:43", doc="FP16 with 5 extra mantissa bits"),
    Field("shape", "42:40", doc="shaping function (Table 5)"),
    Field("output_bias", "31:16,39:36", doc="FP16 with 4 extra mantissa bits"),
    Field("scale", "15:0,35:32", doc="FP16 with 4 extra mantissa bits")], width=64)

USR = Word("USR", [Reserved("31:22", name="unmodelled USR bits"),
                   Field("nan_propagate", "21", doc="USR[21] (Table 7)"),
                   Field("infnan_propagate", "20", doc="USR[20] (Table 7)"),
                   Reserved("19:0", name="unmodelled USR bits")])


@dataclass(frozen=True)
class Spec:
    """One instruction: its name, what it does (``kind``) and its arguments: register words or
    plain integer arguments (``ints``, HVX and DMA lines), checked by the machine."""

    name: str
    kind: str
    words: tuple[Word, ...] = ()
    ints: tuple[str, ...] = ()

    @property
    def arity(self) -> int:
        return len(self.words) + len(self.ints)


HMX_SPECS = [
    Spec("Q6_activation_hf_mxmem_RR", "act", (ACT_RS, ACT_RT)),
    Spec("Q6_activation_hf_mxmem_RR_deep", "act_deep", (ACT_RS, ACT_DEEP_RT)),
    Spec("Q6_activation_hf_mxmem_RR_single", "act_single", (ACT_SINGLE_RS, ACT_SINGLE_RT)),
    Spec("Q6_weight_hf_mxmem_RR", "wgt", (WGT_RS, WGT_RT)),
    Spec("Q6_weight_hf_mxmem_RR_deep", "wgt_deep", (WGT_RS, WGT_RT)),
    Spec("Q6_bias_mxmem2_A", "bias_load", (BIAS_RS,)),
    Spec("Q6_mxmem2_bias_A", "bias_store", (BIAS_RS,)),
    Spec("Q6_cvt_hf_acc_R", "cvt", (CVT_RS,)),
    Spec("Q6_mxmem_cvt_RR", "cvt_write", (WR_RS, WR_RT)),
    Spec("Q6_mxclracc_hf", "clracc"),
]


# The HVX and DMA lines of the machine (semantics in hwsim/targets/hmx/hvx.py and machine.py).
HVX_SPECS = [
    Spec("hvx_pack_act", "hvx", ints=("dst", "src", "h", "w", "c", "mask")),
    Spec("hvx_unpack_act", "hvx", ints=("dst", "src", "h", "w", "c", "mask")),
    Spec("hvx_pack_wgt", "hvx", ints=("dst", "src", "k_out", "k_in")),
    Spec("hvx_pack_bias", "hvx", ints=("dst", "src", "k_out", "shape")),
    Spec("hvx_add", "hvx", ints=("dst", "a", "b", "n")),
    Spec("hvx_sub", "hvx", ints=("dst", "a", "b", "n")),
    Spec("hvx_mul", "hvx", ints=("dst", "a", "b", "n")),
    Spec("hvx_relu", "hvx", ints=("dst", "a", "n")),
    Spec("hvx_clamp", "hvx", ints=("dst", "a", "n", "lo", "hi")),
    Spec("hvx_exp", "hvx", ints=("dst", "a", "n")),
    Spec("hvx_recip", "hvx", ints=("dst", "a", "n")),
    Spec("hvx_reduce_sum", "hvx", ints=("dst", "src", "outer", "n", "inner")),
    Spec("hvx_reduce_max", "hvx", ints=("dst", "src", "outer", "n", "inner")),
    Spec("hvx_avg_pool", "hvx", ints=("dst", "src", "h", "w", "c", "kh", "kw", "sh", "sw",
                                      "pad_top", "pad_bottom", "pad_left", "pad_right")),
    Spec("hvx_f32_to_f16", "hvx", ints=("dst", "src", "n")),
    Spec("hvx_f16_to_f32", "hvx", ints=("dst", "src", "n")),
    Spec("hvx_copy", "hvx", ints=("dst", "src", "row_bytes", "rows", "dst_stride",
                                  "src_stride")),
    Spec("hvx_fill", "hvx", ints=("dst", "n", "value")),
]
_DMA_2D = ("row_bytes", "rows", "dst_stride", "src_stride")
DMA_SPECS = [
    Spec("dma_ddr_to_vtcm", "dma", ints=("dst", "src", "nbytes")),
    Spec("dma_vtcm_to_ddr", "dma", ints=("dst", "src", "nbytes")),
    Spec("dma_ddr_to_vtcm_2d", "dma", ints=("dst", "src") + _DMA_2D),
    Spec("dma_vtcm_to_ddr_2d", "dma", ints=("dst", "src") + _DMA_2D),
    Spec("dma_wait", "dma_wait"),
    Spec("dma_fence", "dma_fence"),
]
SPECS = {spec.name: spec for spec in HMX_SPECS + HVX_SPECS + DMA_SPECS}


@dataclass(eq=False, slots=True)
class Instr:
    """One parsed line: its spec, decoded fields (all words merged), plain integer arguments
    and where it came from (``arg_locs``: one per argument, for errors). Never changed once
    made (equal instructions of a program share one), but not frozen: a lowering makes
    thousands, and a frozen dataclass costs three times as much to make."""

    spec: Spec
    fields: dict
    loc: Location
    arg_locs: tuple[Location, ...] = ()

    @property
    def kind(self) -> str:
        return self.spec.kind

    def error(self, message: str, arg: int | None = None) -> ProgramError:
        loc = self.arg_locs[arg] if arg is not None and arg < len(self.arg_locs) else self.loc
        return ProgramError(f"{loc}: {self.spec.name}: {message}")


@dataclass(eq=False, slots=True)
class Multiply:
    """An activation and the weight that follows it: together one multiply (section 2.2);
    never changed once made, as ``Instr``."""

    act: Instr
    wgt: Instr

    @property
    def kind(self) -> str:
        return "mpy"

    @property
    def loc(self) -> Location:
        return self.act.loc


# -- integer constant expressions ---------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(?P<num>0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+)(?P<suffix>[uUlL]*)"
                    r"|(?P<op><<|>>|[-+*/%|&^~(),=;])|(?P<name>[A-Za-z_]\w*)|(?P<bad>\S))")


def _c_div(a: int, b: int) -> int:
    """C division: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


# C precedence, loosest first; division by zero is caught where the operator is applied
_BINARY = {"|": (1, int.__or__), "^": (2, int.__xor__), "&": (3, int.__and__),
           "<<": (4, int.__lshift__), ">>": (4, int.__rshift__),
           "+": (5, int.__add__), "-": (5, int.__sub__),
           "*": (6, int.__mul__), "/": (6, _c_div), "%": (6, lambda a, b: a - _c_div(a, b) * b)}
_SUFFIXES = {"", "u", "l", "ul", "lu", "ll", "ull", "llu"}


def _fits(value: int, loc: Location) -> int:
    """``value`` when it fits in 64 bits (the widest C type): no expression of a trace needs
    more, and unbounded Python integers would let ``1 << 10**9`` exhaust the memory."""
    if not -(1 << 64) < value < 1 << 64:
        raise TraceSyntaxError(loc, f"value {clip(str(value), 30)} does not fit in 64 bits")
    return value


def _literal(text: str, suffix: str, loc: Location) -> int:
    if suffix.lower() not in _SUFFIXES:
        raise TraceSyntaxError(loc, f"integer suffix {suffix!r}: expected u, l, ul or ull")
    if len(text) > 66:                          # 0b and 64 binary digits
        raise TraceSyntaxError(loc, f"integer {clip(text, 30)} does not fit in 64 bits")
    if text[:2].lower() in ("0x", "0b"):
        return _fits(int(text, 0), loc)
    if len(text) > 1 and text[0] == "0":
        if not set(text) <= set("01234567"):
            raise TraceSyntaxError(loc, f"octal literal {text!r} has a digit above 7")
        return _fits(int(text, 8), loc)
    return _fits(int(text), loc)


class _Tokens:
    def __init__(self, text: str, loc: Location):
        self.items = []  # (kind, text, value, column)
        offset = loc.column - 1
        for m in _TOKEN.finditer(text):
            col = offset + m.start() + len(m.group(0)) - len(m.group(0).lstrip()) + 1
            where = loc.at(col)
            if m.group("bad"):
                raise TraceSyntaxError(where, f"unexpected character {m.group('bad')!r}")
            if m.group("num"):
                value = _literal(m.group("num"), m.group("suffix"), where)
                self.items.append(("num", m.group(0).strip(), value, col))
            elif m.group("op"):
                self.items.append(("op", m.group("op"), None, col))
            else:
                self.items.append(("name", m.group("name"), None, col))
        self.end_col = offset + len(text.rstrip()) + 1
        self.pos, self.loc = 0, loc

    def peek(self):
        return self.items[self.pos] if self.pos < len(self.items) else ("end", "", None,
                                                                           self.end_col)

    def take(self):
        item = self.peek()
        self.pos += 1
        return item

    def expect(self, text: str) -> int:
        kind, found, _, col = self.take()
        if found != text:
            shown = repr(found) if kind != "end" else "end of line"
            raise TraceSyntaxError(self.loc.at(col), f"expected {text!r}, found {shown}")
        return col

    def fail(self, what: str):
        kind, found, _, col = self.peek()
        shown = repr(found) if kind != "end" else "end of line"
        raise TraceSyntaxError(self.loc.at(col), f"expected {what}, found {shown}")


def _expression(tokens: _Tokens, min_prec: int = 1) -> int:
    value = _unary(tokens)
    while True:
        kind, text, _, _ = tokens.peek()
        if kind != "op" or text not in _BINARY or _BINARY[text][0] < min_prec:
            return value
        _, op, _, col = tokens.take()
        prec, fn = _BINARY[op]
        right = _expression(tokens, prec + 1)
        if op in ("/", "%") and right == 0:
            raise TraceSyntaxError(tokens.loc.at(col), "division by zero")
        if op in ("<<", ">>") and not 0 <= right < 64:
            raise TraceSyntaxError(tokens.loc.at(col), f"shift count: expected 0..63, "
                                                       f"found {right}")
        value = _fits(fn(value, right), tokens.loc.at(col))


def _unary(tokens: _Tokens) -> int:
    kind, text, value, _ = tokens.peek()
    if kind == "num":
        tokens.take()
        return value
    if text in ("-", "~", "+"):
        tokens.take()
        operand = _unary(tokens)
        return {"-": -operand, "~": ~operand, "+": operand}[text]
    if text == "(":
        tokens.take()
        value = _expression(tokens)
        tokens.expect(")")
        return value
    tokens.fail("an integer (e.g. 42, 0x2a, 0b101010)")


def parse_call(text: str, loc: Location) -> tuple[str, list[tuple[int, Location]]]:
    """``name(expr, ...)`` (an optional ``;``) -> (name, [(value, location), ...])."""
    tokens = _Tokens(text, loc)
    kind, name, _, _ = tokens.take()
    if kind != "name":
        raise TraceSyntaxError(loc, f"expected an instruction name, found {name!r}")
    tokens.expect("(")
    args = []
    if tokens.peek()[1] != ")":
        while True:
            where = loc.at(tokens.peek()[3])
            args.append((_expression(tokens), where))
            if tokens.peek()[1] != ",":
                break
            tokens.take()
    tokens.expect(")")
    if tokens.peek()[1] == ";":
        tokens.take()
    if tokens.peek()[0] != "end":
        tokens.fail("end of line")
    return name, args


_USR_LINE = re.compile(r"USR\s*=(.*)$")


def parse_usr(text: str, loc: Location) -> Instr | None:
    """``USR = <expr>``: sets USR[21:20]; None when the line is not a USR write."""
    match = _USR_LINE.match(text)
    if not match:
        return None
    tokens = _Tokens(match.group(1), loc.at(loc.column + match.start(1)))
    value = _expression(tokens)
    if tokens.peek()[1] == ";":
        tokens.take()
    if tokens.peek()[0] != "end":
        tokens.fail("end of line")
    spec = Spec("USR", "usr", (USR,))
    where = tokens.loc
    return Instr(spec, _decode(spec, USR, value, where), loc, (where,))


def _decode(spec: Spec, word: Word, value: int, loc: Location) -> dict:
    if not -(1 << 31) <= value < (1 << word.width):
        raise ProgramError(f"{loc}: {spec.name}: {word.name} = {value:#x}: expected a "
                           f"{word.width}-bit value")
    try:
        return word.decode(value & ((1 << word.width) - 1))
    except EncodingError as exc:
        raise ProgramError(f"{loc}: {spec.name}: {exc}") from None


def decode_line(spec: Spec, args: list[tuple[int, Location]], loc: Location) -> Instr:
    """Check the arity, decode each register word (errors name the argument's column)."""
    if len(args) != spec.arity:
        raise ProgramError(f"{loc}: {spec.name} takes {spec.arity} arguments, found {len(args)}")
    fields = {}
    for word, (value, where) in zip(spec.words, args):
        fields.update(_decode(spec, word, value, where))
    for name, (value, _) in zip(spec.ints, args[len(spec.words):]):
        fields[name] = value
    instr = Instr(spec, fields, loc, tuple([where for _, where in args]))
    check_instr(instr)
    return instr


def make_instr(spec: Spec, loc: Location, words: tuple = (), ints: tuple = ()) -> Instr:
    """The instruction whose register words encode the field values ``words`` (a dict per
    word) and whose plain arguments are ``ints``: what ``decode_line`` gives for the encoded
    words, checked the same way but without encoding and decoding them (``Word.fields_of``)."""
    if len(words) != len(spec.words) or len(ints) != len(spec.ints):
        raise ProgramError(f"{loc}: {spec.name} takes {spec.arity} arguments, found "
                           f"{len(words) + len(ints)}")
    fields = {}
    for word, values in zip(spec.words, words):
        fields.update(word.fields_of(values))
    fields.update(zip(spec.ints, ints))
    instr = Instr(spec, fields, loc, (loc,) * spec.arity)
    check_instr(instr)
    return instr


def spatial_split(value: int, mask: int) -> tuple[int, int]:
    """(x, y) of a 5-bit spatial value under a spatial mask: mask bits set select Y (2.2.1)."""
    x = y = nx = ny = 0
    for bit in range(5):
        if mask >> bit & 1:
            y |= (value >> bit & 1) << ny
            ny += 1
        else:
            x |= (value >> bit & 1) << nx
            nx += 1
    return x, y


def check_instr(instr: Instr) -> None:
    """The rules of one line that its fields alone decide (chapter 4)."""
    f, kind = instr.fields, instr.kind
    if not kind.startswith("act"):  # every rule here is an activation's
        return
    if kind == "act" and f["channel_start"] > f["channel_stop"]:
        raise instr.error(f"channel_start {f['channel_start']} is above channel_stop "
                          f"{f['channel_stop']}: the start must be below the stop (4.1.1)", 0)
    if kind == "act_deep" and f["dc"] == 0 and f["channel_start"] > f["channel_stop"]:
        raise instr.error("with dC = 0 (one crouton) channel_start must be below channel_stop "
                          "(4.2.4)", 0)
    if kind == "act_single":
        if f["channel_start"] > f["channel_stop"]:
            raise instr.error(f"channel_start {f['channel_start']} is above channel_stop "
                              f"{f['channel_stop']} (4.1.1)", 0)
        if f["offset"] & ~f["spatial_mask"] & 0x1F:
            raise instr.error(f"field offset = {f['offset']:#07b} has X bits set under "
                              f"spatial_mask {f['spatial_mask']:#07b}: expected only Y bits "
                              "(4.4.1)", 0)


def pair(items: list) -> list:
    """Join each activation with the weight after it into a ``Multiply`` (section 2.2)."""
    program = []
    pending = None
    for item in items:
        kind = item.kind
        if pending is not None:
            if kind not in ("wgt", "wgt_deep"):
                raise pending.error(f"activation is not followed by its weight (found "
                                    f"{item.spec.name} at {item.loc}); the two form one "
                                    "multiply (2.2)")
            program.append(Multiply(pending, item))
            pending = None
        elif kind.startswith("act"):
            pending = item
        elif kind in ("wgt", "wgt_deep"):
            raise item.error("weight without an activation before it; the two form one "
                             "multiply (2.2)")
        else:
            program.append(item)
    if pending is not None:
        raise pending.error("activation is not followed by its weight (end of program); the "
                            "two form one multiply (2.2)")
    return program


def format_item(item) -> str:
    """A program item as trace text (a multiply is its two lines): register words re-encoded
    from the fields, so that parsing the text gives the same item."""
    if isinstance(item, Multiply):
        return format_item(item.act) + "\n" + format_item(item.wgt)
    values = [word.encode(**{name: item.fields[name] for name in word.fields})
              for word in item.spec.words]
    if item.kind == "usr":
        return f"USR = {values[0]:#x}"
    args = [f"{v:#x}" for v in values] + [f"{v:#x}" if abs(v) >= 4096 else str(v)
                                          for v in (item.fields[n] for n in item.spec.ints)]
    return f"{item.spec.name}({', '.join(args)})"


def parse_program(lines: list[tuple[str, Location]], specs: dict[str, Spec] = SPECS) -> list:
    """Trace lines -> program items (``Instr`` and ``Multiply``), fully checked."""
    items = []
    cache: dict = {}
    for text, loc in lines:
        if text.startswith("."):
            raise unknown_directive(text.split()[0], loc)
        usr = parse_usr(text, loc)
        if usr is not None:
            items.append(usr)
            continue
        name, args = parse_call(text, loc)
        spec = specs.get(name)
        if spec is None:
            close = [n for n in specs if n.lower().startswith(name.lower()[:8])]
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise TraceSyntaxError(loc, f"unknown instruction {name!r}{hint}")
        key = (name, tuple(v for v, _ in args))
        fields = cache.get(key)
        if fields is None:
            instr = decode_line(spec, args, loc)
            cache[key] = instr.fields
        else:
            instr = Instr(spec, fields, loc, tuple(where for _, where in args))
        items.append(instr)
    return pair(items)
