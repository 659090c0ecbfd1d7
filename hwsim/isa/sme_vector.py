"""Vector-side routines of the SME machine: ``vec NAME arg=value ...`` trace lines.

A routine is one step of the streaming-SVE work around the outer products (a TOSA operator on
tensors in ``mem``, or the packing of a GEMM operand), run by the machine's ``vec`` unit and
costed per vector (``hwsim.targets.sme.vector`` holds the table of routines). The line gives its
arguments by name: tensors ``mem:ADDR:DTYPE:SHAPE`` (``mem:0x4000:i8:1x8x8x16``; dtypes
``i8 u8 i16 i32 bf16 f32``), integer lists ``1,1,1,1``, integers, floats (``0.0``, ``-inf``,
``6.0``) and words (``double``). ``VecOp`` is the parsed line; ``str(op)`` prints it back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hwsim.errors import Location, TraceSyntaxError
from hwsim.traces.reader import Token, parse_int, tokens

# element bytes of each tensor dtype
DTYPES = {"i8": 1, "u8": 1, "i16": 2, "i32": 4, "bf16": 2, "f32": 4}
SPACE = "mem"
MNEMONIC = "vec"


@dataclass(frozen=True)
class TensorRef:
    """A tensor in ``mem``: address, element type and shape (C order)."""

    addr: int
    dtype: str
    shape: tuple

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * DTYPES[self.dtype]

    def __str__(self) -> str:
        return f"{SPACE}:{self.addr:#x}:{self.dtype}:{'x'.join(map(str, self.shape))}"


@dataclass(frozen=True, eq=False)
class VecOp:
    """One routine call: its name, arguments (values as parsed) and where it was written."""

    name: str
    args: dict
    loc: Location = field(default_factory=Location)
    arg_locs: dict = field(default_factory=dict, repr=False)

    def __str__(self) -> str:
        return " ".join([MNEMONIC, self.name] + [f"{k}={_text(v)}" for k, v in self.args.items()])


def _text(value) -> str:
    if isinstance(value, tuple):
        return ",".join(map(_text, value))
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _tensor(tok: Token, text: str) -> TensorRef:
    parts = text.split(":")
    if len(parts) != 4 or parts[0] != SPACE or parts[2] not in DTYPES:
        raise TraceSyntaxError(tok.loc, f"tensor: expected {SPACE}:ADDR:DTYPE:SHAPE with DTYPE "
                                        f"one of {', '.join(DTYPES)}, found {text!r}")
    dims = tuple(parse_int(d, tok.loc, "tensor dimension") for d in parts[3].split("x"))
    if any(d < 1 for d in dims):
        raise TraceSyntaxError(tok.loc, f"tensor {text!r}: dimensions must be >= 1")
    return TensorRef(parse_int(parts[1], tok.loc, "tensor address"), parts[2], dims)


def _number(text: str):
    try:
        return int(text.replace("_", ""), 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text        # a word


def parse_value(tok: Token):
    """An argument value: tensor, list of numbers, number, or word."""
    text = tok.text
    if ":" in text:
        return _tensor(tok, text)
    if "," in text:
        items = tuple(_number(v) for v in text.split(","))
        if any(isinstance(v, str) for v in items):
            raise TraceSyntaxError(tok.loc, f"list: expected numbers, found {text!r}")
        return items
    return _number(text)


def parse_line(text: str, loc: Location) -> VecOp:
    """``vec NAME key=value ...`` -> a ``VecOp`` (values parsed, not yet checked)."""
    toks = [Token(t.text, loc.at(loc.column + t.loc.column - 1)) for t in tokens(text, loc.at(1))]
    if len(toks) < 2 or toks[0].text.lower() != MNEMONIC:
        raise TraceSyntaxError(loc, f"{MNEMONIC}: expected a routine name")
    args, locs = {}, {}
    for tok in toks[2:]:
        key, sep, value = tok.text.partition("=")
        if not sep or not key or not value:
            raise TraceSyntaxError(tok.loc, f"expected name=value, found {tok.text!r}")
        if key in args:
            raise TraceSyntaxError(tok.loc, f"argument {key} given twice")
        where = tok.loc.at(tok.loc.column + len(key) + 1)
        args[key], locs[key] = parse_value(Token(value, where)), tok.loc
    return VecOp(toks[1].text, args, loc, locs)


def is_vector_line(text: str) -> bool:
    return text.split(None, 1)[0].lower() == MNEMONIC
