"""GAP9 programs: instruction objects, their text form, and a Python builder.

A program is what the cluster controller executes, one instruction a line:

* ``dma SRC:ADDR -> DST:ADDR NBYTES``: a 1-D copy between the spaces ``l1``, ``l2`` and
  ``mram`` on the cluster DMA, or between ``l3`` (external memory) and ``l2`` on the micro-DMA;
  transfers of both engines are numbered 0, 1, ... in program order;
* ``dma SRC:ADDR -> DST:ADDR ROW_BYTES rows=N src_stride=S dst_stride=D``: a 2-D copy, row i at
  ``ADDR + i * stride`` on each side;
* ``dma wait [ID ...]``: wait for the given transfers, or for every outstanding one;
* ``ne16 acquire``: reserve a job context (waits while two jobs are pending); implicit before a
  job's first register write;
* ``ne16 REGISTER VALUE`` or ``ne16 REGISTER field=value ...``: write a job register (names
  and fields in ``hwsim.isa.ne16``; ``ne16 CONFIG0 filter_mode=1x1 weight_bits_m1=3``);
* ``ne16 commit``: queue the job (commit and trigger); jobs are numbered 0, 1, ...;
* ``ne16 status``: read STATUS (bit 0: context 0 holds a job, bit 8: context 1); the value
  read shows in the timeline;
* ``ne16 wait [JOB]``: sleep until the end-of-job event of JOB (default: the last committed);
* ``cluster KERNEL name=value ...``: run a kernel on the worker cores (``cluster_kernels.KERNELS``);
* ``barrier``: wait for every launched kernel;
* ``layer``: the controller enters the code of a layer (a compiled network's per-layer function:
  argument and tiling set-up before its first transfer), paying ``layer_setup_cycles``.

Kernel arguments are integers (``pad=1,1,1,1`` for lists), words (``rounding=double``) or
tensors ``SPACE:ADDR:DTYPE:SHAPE`` (``l1:0x10000000:i8:1x8x8x16``; dtypes i8 u8 i16 u16 i32).
``Program`` builds the same instruction objects from Python; ``Machine.run`` takes either.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwsim.errors import EncodingError, Location, TraceSyntaxError
from hwsim.isa import ne16
from hwsim.isa.arguments import keywords, parse_value
from hwsim.traces.reader import Token, parse_int, tokens, unknown_directive

DTYPES = ("i8", "u8", "i16", "u16", "i32")
SPACES = ("l1", "l2", "mram", "l3")


@dataclass
class DmaCopy:
    src: str
    src_addr: int
    dst: str
    dst_addr: int
    row_bytes: int
    rows: int = 1
    src_stride: int = 0
    dst_stride: int = 0
    loc: Location = field(default_factory=Location)


@dataclass
class DmaWait:
    ids: tuple = ()
    loc: Location = field(default_factory=Location)


@dataclass
class Ne16Acquire:
    loc: Location = field(default_factory=Location)


@dataclass
class Ne16Write:
    register: str
    value: int
    loc: Location = field(default_factory=Location)


@dataclass
class Ne16Commit:
    loc: Location = field(default_factory=Location)


@dataclass
class Ne16Status:
    loc: Location = field(default_factory=Location)


@dataclass
class Ne16Wait:
    job: int | None = None
    loc: Location = field(default_factory=Location)


@dataclass
class Kernel:
    name: str
    args: dict
    loc: Location = field(default_factory=Location)
    arg_locs: dict = field(default_factory=dict, compare=False, repr=False)


@dataclass
class Barrier:
    loc: Location = field(default_factory=Location)


@dataclass
class LayerStart:
    loc: Location = field(default_factory=Location)


def _int(tok: Token, what: str) -> int:
    return parse_int(tok.text, tok.loc, what)


def _address(tok: Token, what: str) -> tuple[str, int]:
    space, sep, addr = tok.text.partition(":")
    if not sep or space not in SPACES:
        raise TraceSyntaxError(tok.loc, f"{what}: expected SPACE:ADDR with SPACE one of "
                                        f"{', '.join(SPACES)}, found {tok.text!r}")
    return space, parse_int(addr, tok.loc, f"{what} address")


def _value(loc: Location, text: str):
    """A kernel argument or register field value (``hwsim.isa.arguments``)."""
    return parse_value(Token(text, loc), SPACES, DTYPES, floats=False)


def _parse_dma(toks: list[Token], loc: Location):
    if len(toks) >= 2 and toks[1].text == "wait":
        return DmaWait(tuple(_int(t, "transfer id") for t in toks[2:]), loc)
    if len(toks) < 5 or toks[2].text != "->":
        raise TraceSyntaxError(loc, "dma: expected 'dma SRC:ADDR -> DST:ADDR NBYTES' or "
                                    "'dma wait'")
    src, src_addr = _address(toks[1], "dma source")
    dst, dst_addr = _address(toks[3], "dma destination")
    row_bytes = _int(toks[4], "NBYTES")
    opts = keywords(toks[5:])
    known = {"rows", "src_stride", "dst_stride"}
    for key, (_, kloc, _) in opts.items():
        if key not in known:
            raise TraceSyntaxError(kloc, f"dma: unknown option {key!r}; expected "
                                         f"{', '.join(sorted(known))}")
    vals = {k: parse_int(v, kloc, k) for k, (_, kloc, v) in opts.items()}
    if row_bytes <= 0 or vals.get("rows", 1) <= 0:
        raise TraceSyntaxError(toks[4].loc, "dma: NBYTES and rows must be positive")
    return DmaCopy(src, src_addr, dst, dst_addr, row_bytes, vals.get("rows", 1),
                   vals.get("src_stride", 0), vals.get("dst_stride", 0), loc)


def _parse_ne16(toks: list[Token], loc: Location):
    if len(toks) < 2:
        raise TraceSyntaxError(loc, "ne16: expected acquire, commit, status, wait or a "
                                    "register")
    word = toks[1].text
    if word == "acquire" and len(toks) == 2:
        return Ne16Acquire(loc)
    if word == "commit" and len(toks) == 2:
        return Ne16Commit(loc)
    if word == "status" and len(toks) == 2:
        return Ne16Status(loc)
    if word == "wait" and len(toks) <= 3:
        return Ne16Wait(_int(toks[2], "job") if len(toks) == 3 else None, loc)
    try:
        reg = ne16.register(word)
    except EncodingError:
        raise TraceSyntaxError(toks[1].loc, f"ne16: expected acquire, commit, status, wait or "
                                            f"one of {', '.join(ne16.BY_NAME)}, found "
                                            f"{word!r}") from None
    if len(toks) == 3 and "=" not in toks[2].text:
        value = _int(toks[2], f"{reg.name} value")
        try:
            return Ne16Write(reg.name, ne16.word(value), loc)
        except EncodingError as exc:
            raise TraceSyntaxError(toks[2].loc, str(exc)) from None
    fields = {k: _value(kloc, v) for k, (_, kloc, v) in keywords(toks[2:]).items()}
    try:
        return Ne16Write(reg.name, ne16.encode_fields(reg, fields), loc)
    except EncodingError as exc:
        raise TraceSyntaxError(toks[2].loc if len(toks) > 2 else loc, str(exc)) from None


def parse_line(text: str, loc: Location):
    """One program line -> an instruction object."""
    toks = tokens(text, loc.at(1))
    # tokens() numbers columns from the stripped text; shift them to the line's
    toks = [Token(t.text, loc.at(loc.column + t.loc.column - 1)) for t in toks]
    op = toks[0].text.lower()
    if op.startswith("."):
        raise unknown_directive(toks[0].text, toks[0].loc)
    if op == "dma":
        return _parse_dma(toks, loc)
    if op == "ne16":
        return _parse_ne16(toks, loc)
    if op == "cluster":
        if len(toks) < 2:
            raise TraceSyntaxError(loc, "cluster: expected a kernel name")
        words = keywords(toks[2:])
        args = {k: _value(kloc, v) for k, (_, kloc, v) in words.items()}
        return Kernel(toks[1].text, args, loc, {k: kloc for k, (_, kloc, _) in words.items()})
    if op == "barrier" and len(toks) == 1:
        return Barrier(loc)
    if op == "layer" and len(toks) == 1:
        return LayerStart(loc)
    raise TraceSyntaxError(toks[0].loc, f"instruction: expected dma, ne16, cluster, barrier or "
                                        f"layer, found {toks[0].text!r}")


class Program(list):
    """A GAP9 program built from Python: a list of instruction objects ``Machine.run`` takes."""

    def dma(self, src: str, src_addr: int, dst: str, dst_addr: int, nbytes: int, rows: int = 1,
            src_stride: int = 0, dst_stride: int = 0) -> int:
        """Append a copy; returns its transfer id (for ``dma_wait``)."""
        self.append(DmaCopy(src, src_addr, dst, dst_addr, nbytes, rows, src_stride, dst_stride))
        return sum(isinstance(i, DmaCopy) for i in self) - 1

    def dma_wait(self, *ids: int) -> None:
        self.append(DmaWait(tuple(ids)))

    def ne16_job(self, registers: dict, wait: bool = False) -> None:
        """Acquire, write every register given (name -> value or field dict), commit."""
        self.append(Ne16Acquire())
        for name, value in registers.items():
            reg = ne16.register(name)
            word = ne16.encode_fields(reg, value) if isinstance(value, dict) else ne16.word(value)
            self.append(Ne16Write(reg.name, word))
        self.append(Ne16Commit())
        if wait:
            self.append(Ne16Wait())

    def ne16_status(self) -> None:
        self.append(Ne16Status())

    def ne16_wait(self, job: int | None = None) -> None:
        self.append(Ne16Wait(job))

    def cluster(self, kernel: str, /, **args) -> None:
        self.append(Kernel(kernel, dict(args)))

    def barrier(self) -> None:
        self.append(Barrier())

    def layer(self) -> None:
        self.append(LayerStart())
