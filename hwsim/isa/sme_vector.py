"""Vector-side routines of the SME machine: ``vec NAME arg=value ...`` trace lines.

A routine is one step of the streaming-SVE work around the outer products (a TOSA operator on
tensors in ``mem``, or the packing of a GEMM operand), run by the machine's ``vec`` unit and
costed per vector (``hwsim.targets.sme.vector`` holds the table of routines). The line gives its
arguments by name: tensors ``mem:ADDR:DTYPE:SHAPE`` (``mem:0x4000:i8:1x8x8x16``; dtypes
``i8 u8 i16 i32 bf16 f32``), integer lists ``1,1,1,1``, integers, floats (``0.0``, ``-inf``,
``6.0``) and words (``double``). ``VecOp`` is the parsed line; ``str(op)`` prints it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwsim.errors import Location, TraceSyntaxError
from hwsim.isa.arguments import keywords, parse_value
from hwsim.traces.reader import Token, tokens

# element bytes of each tensor dtype
DTYPES = {"i8": 1, "u8": 1, "i16": 2, "i32": 4, "bf16": 2, "f32": 4}
SPACE = "mem"
MNEMONIC = "vec"


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


def parse_line(text: str, loc: Location) -> VecOp:
    """``vec NAME key=value ...`` -> a ``VecOp`` (values parsed, not yet checked)."""
    toks = [Token(t.text, loc.at(loc.column + t.loc.column - 1)) for t in tokens(text, loc.at(1))]
    if len(toks) < 2 or toks[0].text.lower() != MNEMONIC:
        raise TraceSyntaxError(loc, f"{MNEMONIC}: expected a routine name")
    words = keywords(toks[2:])
    args = {k: parse_value(Token(v, vloc), (SPACE,), DTYPES) for k, (_, vloc, v) in words.items()}
    return VecOp(toks[1].text, args, loc, {k: kloc for k, (kloc, _, _) in words.items()})


def is_vector_line(text: str) -> bool:
    return text.split(None, 1)[0].lower() == MNEMONIC
