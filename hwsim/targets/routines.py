"""Tables of routines that a trace calls by name with named arguments (GAP9's ``cluster``
kernels, SME's ``vec`` routines): how a row declares its arguments and its shape rule, the
checks of one call against its row (``bind``), and the semantics both tables share
(``run_rescale``). Each machine keeps its own table, its costs, and says where tensors may
live."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NoReturn

from hwsim.errors import HwsimError, ProgramError, TraceSyntaxError
from hwsim.tosa_int import helpers as ti

REQUIRED = object()


@dataclass(frozen=True)
class Arg:
    kind: str                   # "in", "out" (tensors), "int", "ints", "num", "word"
    default: Any = REQUIRED
    dtypes: tuple = ()          # tensors: allowed dtypes (empty: any)
    choices: tuple = ()         # words: allowed values


@dataclass(frozen=True)
class Row:
    """A routine of a table: its arguments once, its shape rule and its semantics. Machines
    add their cost fields (GAP9's ``KernelDef``, SME's ``Routine``)."""

    name: str
    args: dict          # name -> Arg
    infer: Callable     # (tensors, attrs) -> {output name: what the machine checks}
    run: Callable       # (values, attrs, tensors) -> {output name: values}


@dataclass
class Bound:
    """A trace's call checked against its row: tensors (name -> the ISA's tensor reference)
    and the other arguments with their defaults."""

    row: Row
    tensors: dict
    attrs: dict
    call: Any           # the parsed line (its ``loc``, ``name``, ``arg_locs``)


def fail(message: str) -> NoReturn:
    """A shape rule's refusal (``bind`` reports it at the call)."""
    raise ProgramError(message)


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


def where(call, name: str):
    """The location of argument ``name`` of ``call`` (the line's, if it was not given)."""
    return call.arg_locs.get(name, call.loc)


def bind(call, table: dict, what: str, tensor_type, space_for) -> tuple[Bound, Any]:
    """``call`` checked against its row of ``table`` (``arguments``), each tensor inside the
    address space ``space_for(row, name, ref)`` gives (which may refuse the space), then the
    row's shape rule: (the bound call, the rule's expected outputs for the machine to check).
    Every refusal is a TraceSyntaxError at the argument or the line."""
    row, tensors, attrs = arguments(call, table, what, tensor_type)
    for name, ref in tensors.items():
        try:
            space_for(row, name, ref).offset(ref.addr, ref.nbytes)
        except TraceSyntaxError:
            raise
        except HwsimError as exc:
            raise TraceSyntaxError(where(call, name), f"{row.name}: tensor {name}: {exc}") \
                from None
    try:
        expected = row.infer(tensors, attrs)
    except ProgramError as exc:
        raise TraceSyntaxError(call.loc, f"{row.name}: {exc}") from None
    return Bound(row, tensors, attrs, call), expected


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
