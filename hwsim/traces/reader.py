"""The line-based trace format shared by every machine.

A trace is text, one item a line. Comments start with ``//`` anywhere, or with ``#`` at the start
of a line or followed by a blank (``#0x10`` is an A64 immediate, not a comment). Lines starting
with ``.`` are directives; every other line is an instruction in the target machine's own syntax.

=====================================  ==========================================================
``.target NAME``                        the machine (``hwsim targets`` lists them)
``.param KEY VALUE``                    override one machine parameter for this run
``.load SPACE ADDR FILE``               copy a file's bytes into memory before the run (``.npy``:
                                        the array's raw bytes; anything else: the file's bytes)
``.fill SPACE ADDR NBYTES BYTE``        set NBYTES bytes to BYTE before the run
``.store SPACE ADDR NBYTES FILE``       after the run, write memory to FILE (``.npy``: a uint8
                                        array; anything else: raw bytes)
``.expect SPACE ADDR [NBYTES] FILE``    after the run, compare memory with FILE's bytes (with
                                        NBYTES, a file of another size is a mismatch too)
=====================================  ==========================================================

Setup directives (``.target``, ``.param``, ``.load``, ``.fill``) come before the first
instruction. Paths are relative to the trace file. Numbers are C literals (``0x800``, ``-4``,
``0b1100``). Errors carry file:line:column. Other lines starting with ``.`` go to the machine
(e.g. SME's ``.inst``); one that is neither is an unknown directive, with the nearest name.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from hwsim.errors import Location, TraceSyntaxError, clip

_TOKEN = re.compile(r'"([^"]*)"|(\S+)')
_COMMENT = re.compile(r"//|(?:^|(?<=\s))#(?=\s|$)")
SETUP = {".target", ".param", ".load", ".fill"}
AFTER = {".store", ".expect"}
_ARITY = {".target": ("NAME",), ".param": ("KEY", "VALUE"),
          ".load": ("SPACE", "ADDR", "FILE"), ".fill": ("SPACE", "ADDR", "NBYTES", "BYTE"),
          ".store": ("SPACE", "ADDR", "NBYTES", "FILE"),
          ".expect": ("SPACE", "ADDR", "[NBYTES]", "FILE")}


@dataclass(frozen=True)
class Token:
    text: str
    loc: Location

    def integer(self, what: str) -> int:
        return parse_int(self.text, self.loc, what)


@dataclass
class Directive:
    name: str
    args: list[Token]
    loc: Location


@dataclass
class Trace:
    """A read trace: its directives by phase and its instruction lines, in order."""

    source: str
    base_dir: Path
    target: Token | None = None
    params: list[Directive] = field(default_factory=list)
    setup: list[Directive] = field(default_factory=list)
    after: list[Directive] = field(default_factory=list)
    lines: list[tuple[str, Location]] = field(default_factory=list)


def parse_int(text: str, loc: Location, what: str) -> int:
    try:
        return int(text.replace("_", ""), 0)
    except ValueError:
        raise TraceSyntaxError(loc, f"{what}: expected an integer (e.g. 42, 0x2a, -8), "
                                    f"found {text!r}") from None


def unknown_directive(word: str, loc: Location, machine: tuple[str, ...] = ()) -> TraceSyntaxError:
    """The error for a ``.word`` that is no directive, naming the nearest one (``machine``: the
    directives the machine adds to the trace format's own)."""
    names = [*_ARITY, *machine]
    close = difflib.get_close_matches(word.lower(), names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else f"; expected one of {', '.join(names)}"
    return TraceSyntaxError(loc, f"unknown directive {word}{hint}")


def strip_comment(text: str) -> str:
    match = _COMMENT.search(text)
    return text[:match.start()] if match else text


def tokens(text: str, loc: Location) -> list[Token]:
    return [Token(m.group(1) if m.group(1) is not None else m.group(2), loc.at(m.start() + 1))
            for m in _TOKEN.finditer(text)]


def read_trace(trace: str | Path) -> Trace:
    """Read a trace from a path, or from text when ``trace`` holds a newline or is not a file."""
    if isinstance(trace, Path) or ("\n" not in trace and Path(trace).is_file()):
        path = Path(trace)
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise TraceSyntaxError(Location(str(path)), f"cannot read trace: {exc}") from None
        return parse_trace(text, str(path), path.parent)
    if "\n" not in trace and trace.strip() and not trace.lstrip().startswith((".", "#", "/")):
        # a path-like word is a missing file; "ptrue p0.s" is a one-line program
        if trace.endswith((".trace", ".s", ".txt", ".prog")) and len(trace.split()) == 1:
            raise TraceSyntaxError(Location(trace), "no such trace file")
    return parse_trace(trace, "<trace>", Path.cwd())


def parse_trace(text: str, source: str = "<trace>", base_dir: Path | None = None) -> Trace:
    trace = Trace(source, base_dir or Path.cwd())
    for number, raw in enumerate(text.splitlines(), start=1):
        code = strip_comment(raw)
        stripped = code.strip()
        if not stripped:
            continue
        column = len(code) - len(code.lstrip()) + 1
        loc = Location(source, number, column)
        if not stripped.startswith("."):
            trace.lines.append((stripped, loc))
            continue
        toks = tokens(code, Location(source, number))
        name = toks[0].text.lower()
        if name not in _ARITY:
            if difflib.get_close_matches(name, _ARITY, n=1, cutoff=0.6):
                raise unknown_directive(toks[0].text, loc)      # a typo of one of ours
            trace.lines.append((stripped, loc))  # a machine directive such as ``.inst``
            continue
        args, want = toks[1:], _ARITY[name]
        optional = sum(w.startswith("[") for w in want)
        if not len(want) - optional <= len(args) <= len(want):
            count = f"{len(want) - optional} or {len(want)}" if optional else len(want)
            raise TraceSyntaxError(loc, f"{name} takes {count} arguments "
                                        f"({' '.join(want)}), found {len(args)}")
        directive = Directive(name, args, loc)
        if name in SETUP and trace.lines:
            first, where = trace.lines[0]
            raise TraceSyntaxError(loc, f"{name} must come before the first instruction "
                                        f"(line {where.line}: {clip(first, 40)})")
        if name == ".target":
            if trace.target is not None and trace.target.text != args[0].text:
                raise TraceSyntaxError(loc, f".target {args[0].text} contradicts .target "
                                            f"{trace.target.text} at line {trace.target.loc.line}")
            trace.target = args[0]
        elif name == ".param":
            trace.params.append(directive)
        elif name in SETUP:
            trace.setup.append(directive)
        else:
            trace.after.append(directive)
    return trace
