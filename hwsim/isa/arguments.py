"""Named arguments of a routine call (``NAME key=value ...``): GAP9's ``cluster`` lines (and its
``dma`` options and ``ne16`` fields) and SME's ``vec`` lines read them here.

A value is a tensor ``SPACE:ADDR:DTYPE:SHAPE`` (``l1:0x10000000:i8:1x8x8x16``), a list of
numbers ``1,1,1,1``, an integer (C literal), a float (``0.0``, ``-inf``) or a word (``double``,
``1x1``). Which spaces and dtypes a machine has, and which kinds each argument takes, the
machine says (``hwsim.targets.routines``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hwsim.errors import Location, TraceSyntaxError
from hwsim.traces.reader import Token, parse_int

ELEMENT_BYTES = {"i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "bf16": 2, "f32": 4}


@dataclass(frozen=True)
class TensorRef:
    """A tensor a routine names: address space, address, element type and shape (C order)."""

    space: str
    addr: int
    dtype: str
    shape: tuple

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * ELEMENT_BYTES[self.dtype]

    def __str__(self) -> str:
        return f"{self.space}:{self.addr:#x}:{self.dtype}:{'x'.join(map(str, self.shape))}"


def keywords(toks: list[Token]) -> dict[str, tuple[Location, Location, str]]:
    """``key=value`` tokens -> key: (where the key starts, where its value starts, the value's
    text); each key once."""
    out = {}
    for tok in toks:
        key, sep, value = tok.text.partition("=")
        if not sep or not key or not value:
            raise TraceSyntaxError(tok.loc, f"expected name=value, found {tok.text!r}")
        if key in out:
            raise TraceSyntaxError(tok.loc, f"argument {key} given twice")
        out[key] = (tok.loc, tok.loc.at(tok.loc.column + len(key) + 1), value)
    return out


def parse_value(tok: Token, spaces: tuple, dtypes, floats: bool = True):
    """``tok``'s text as an argument value: tensor (in one of ``spaces``, of one of ``dtypes``),
    list of numbers, number or word. Without ``floats`` (a machine whose routines take none),
    ``1.5`` or ``nan`` is a word."""
    text = tok.text
    if ":" in text:
        return _tensor(tok, spaces, dtypes)
    if "," in text:
        items = tuple(_number(v, floats) for v in text.split(","))
        if any(isinstance(v, str) for v in items):
            raise TraceSyntaxError(tok.loc, f"list: expected numbers, found {text!r}")
        return items
    return _number(text, floats)


def _tensor(tok: Token, spaces: tuple, dtypes) -> TensorRef:
    text = tok.text
    parts = text.split(":")
    if len(parts) != 4 or parts[0] not in spaces or parts[2] not in dtypes:
        head = spaces[0] if len(spaces) == 1 else "SPACE"
        where = "" if len(spaces) == 1 else f"space in {', '.join(spaces)} and "
        raise TraceSyntaxError(tok.loc, f"tensor: expected {head}:ADDR:DTYPE:SHAPE with {where}"
                                        f"dtype in {', '.join(dtypes)}, found {text!r}")
    dims = tuple(parse_int(d, tok.loc, "tensor dimension") for d in parts[3].split("x"))
    if any(d < 1 for d in dims):
        raise TraceSyntaxError(tok.loc, f"tensor {text!r}: dimensions must be >= 1")
    return TensorRef(parts[0], parse_int(parts[1], tok.loc, "tensor address"), parts[2], dims)


def _number(text: str, floats: bool):
    try:
        return int(text.replace("_", ""), 0)
    except ValueError:
        if not floats:
            return text
    try:
        return float(text)
    except ValueError:
        return text        # a word
