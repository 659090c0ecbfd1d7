"""Tables of routines that a trace calls by name with named arguments (GAP9's ``cluster``
kernels, SME's ``vec`` routines): how a row declares its arguments, and the checks of one
call's arguments against its row. Each machine keeps its own table and its own checks of
where tensors may live and what shapes come out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hwsim.errors import ProgramError, TraceSyntaxError
from hwsim.tosa_int import helpers as ti

REQUIRED = object()


@dataclass(frozen=True)
class Arg:
    kind: str                   # "in", "out" (tensors), "int", "ints", "num", "word"
    default: Any = REQUIRED
    dtypes: tuple = ()          # tensors: allowed dtypes (empty: any)
    choices: tuple = ()         # words: allowed values


def In(*dtypes, optional=False) -> Arg:
    return Arg("in", None if optional else REQUIRED, dtypes)


def Out(*dtypes) -> Arg:
    return Arg("out", REQUIRED, dtypes)


def _value(arg: Arg, name: str, value, loc, tensor_type):
    if arg.kind == "ints" and isinstance(value, int):
        value = (value,)
    kinds = {"in": tensor_type, "out": tensor_type, "int": int, "ints": tuple,
             "num": (int, float), "word": str}
    if not isinstance(value, kinds[arg.kind]) or (arg.kind == "ints" and not all(
            isinstance(v, int) for v in value)):
        raise TraceSyntaxError(loc, f"argument {name}: expected {arg.kind}, found {value!r}")
    if arg.dtypes and value.dtype not in arg.dtypes:
        raise TraceSyntaxError(loc, f"argument {name}: expected dtype "
                                    f"{' or '.join(arg.dtypes)}, found {value.dtype}")
    if arg.choices and value not in arg.choices:
        raise TraceSyntaxError(loc, f"argument {name}: expected one of "
                                    f"{', '.join(arg.choices)}, found {value!r}")
    return value


def arguments(call, table: dict, what: str, tensor_type) -> tuple[Any, dict, dict]:
    """``call`` (its ``name``, ``args``, ``arg_locs``, ``loc``) checked against its row of
    ``table`` (rows with ``name`` and ``args``: name -> Arg): (row, tensors, other arguments
    with their defaults). ``what``: "MNEMONIC NOUN" for the error of an unknown name."""
    loc = call.loc
    row = table.get(call.name)
    if row is None:
        mnemonic, noun = what.split()
        raise TraceSyntaxError(loc, f"{mnemonic}: unknown {noun} {call.name!r}; expected one "
                                    f"of {', '.join(table)}")
    for name in call.args:
        if name not in row.args:
            raise TraceSyntaxError(call.arg_locs.get(name, loc),
                                   f"{row.name}: unknown argument {name!r}; expected "
                                   f"{', '.join(row.args)}")
    tensors, attrs = {}, {}
    for name, arg in row.args.items():
        if name not in call.args:
            if arg.default is REQUIRED:
                raise TraceSyntaxError(loc, f"{row.name}: missing argument {name}")
            if arg.kind not in ("in", "out"):
                attrs[name] = arg.default
            continue
        value = _value(arg, name, call.args[name], call.arg_locs.get(name, loc), tensor_type)
        (tensors if arg.kind in ("in", "out") else attrs)[name] = value
    return row, tensors, attrs


def broadcast(tensors: dict, names=("a", "b")) -> tuple:
    """The output shape of an elementwise routine on ``tensors[names]`` (TOSA broadcasting:
    same rank, each dimension equal or 1); ProgramError when they do not broadcast."""
    shapes = [tensors[n].shape for n in names]
    if len({len(s) for s in shapes}) != 1:
        raise ProgramError("elementwise: inputs need the same rank (TOSA does not add "
                           "dimensions)")
    out = []
    for dims in zip(*shapes):
        if len(set(dims) - {1}) > 1:
            raise ProgramError(f"elementwise: shapes {' and '.join(map(str, shapes))} do not "
                               "broadcast")
        out.append(max(dims))
    return tuple(out)


def run_rescale(x, a, t):
    """TOSA RESCALE on a routine's values: GAP9's ``cluster rescale``, SME's ``vec rescale``."""
    out = t["out"].dtype
    kind = ("u" + out[1:]) if a["output_unsigned"] else out
    return {"out": ti.rescale(x["in"], x["mult"], x["shift"], a["in_zp"], a["out_zp"], kind,
                              bool(a["scale32"]), a["rounding"] == "double",
                              bool(a["input_unsigned"]), int(t["in"].dtype[1:]))}
