"""What every machine shares: parameters, memories, and running a trace on the timing engine.

A machine is architectural state (memories and registers that persist across runs) plus
semantics. A subclass declares ``name``, ``PARAMS`` and its spaces, and implements:

* ``parse(lines)``: instruction lines -> a program (a list of instruction objects), raising
  ``TraceSyntaxError``/``EncodingError``/``ProgramError`` before anything runs;
* ``build(engine)``: the units and ports of one run, from ``self.timing`` (this run's parameters);
* ``ops(program)``: the program as a stream of engine ops, in program order. It should read
  the next instruction only after yielding every op of the previous one: ``run`` tags each op
  with the index of the instruction last read (``Op.tag``), which schedulers use to attribute
  time and bytes to layers.

``run`` does the rest the same way for every machine: directives, parameter overrides, setup,
the engine, ``.store``/``.expect`` and the result. ``numerics=False`` runs the program for its
timing only: machines read ``engine.numerics`` and skip their datapaths and data movement, at the
same cost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from hwsim.errors import ConfigError, HwsimError, Location, TraceSyntaxError
from hwsim.memory.space import AddressSpace
from hwsim.timing.engine import Engine, Op
from hwsim.timing.params import ParamSet, ParamTable
from hwsim.timing.stats import Result, collect
from hwsim.traces.files import load_bytes, store_bytes
from hwsim.traces.reader import Directive, Trace, read_trace

# Peak bandwidth is reported over aligned windows of this many cycles: long enough to average out
# single-transfer granularity, short enough to show bursts.
PEAK_WINDOW_CYCLES = 256


class Machine:
    name: str = ""
    description: str = ""
    PARAMS: ParamTable

    def __init__(self, **params: Any):
        self.params: ParamSet = self.PARAMS.defaults()
        self.params.update(params, origin=f"hwsim.machine({self.name!r})")
        self.timing: ParamSet = self.params
        self.spaces: dict[str, AddressSpace] = {}
        self.make_state()

    # -- what a subclass provides -------------------------------------------------------------
    def make_state(self) -> None:
        raise NotImplementedError

    def parse(self, lines: list[tuple[str, Location]]) -> list:
        raise NotImplementedError

    def build(self, engine: Engine) -> None:
        raise NotImplementedError

    def ops(self, program: list) -> Iterator[Op]:
        raise NotImplementedError

    def peak_macs_per_cycle(self) -> float:
        return 0.0

    # -- shared ------------------------------------------------------------------------------
    def memory(self, space: str) -> AddressSpace:
        try:
            return self.spaces[space]
        except KeyError:
            raise ConfigError(f"{self.name} has no memory space {space!r}; it has "
                              f"{', '.join(self.spaces)}") from None

    def run(self, trace: str | Path | Trace | list, params: dict[str, Any] | None = None,
            record: bool = True, progress: Callable[[int, int], None] | None = None,
            numerics: bool = True, observe: Callable[[Op], None] | None = None) -> Result:
        """Run a trace (text, a path, a read ``Trace``, or a program list built in Python).
        ``numerics=False``: timing only; ``observe(op)`` sees each op as it is dispatched."""
        if isinstance(trace, list):
            trace, program = Trace("<program>", Path.cwd()), trace
        else:
            trace = trace if isinstance(trace, Trace) else read_trace(trace)
            program = None
        if trace.target is not None and trace.target.text != self.name:
            raise ConfigError(f"{trace.target.loc}: trace is for {trace.target.text!r}, "
                              f"this machine is {self.name!r}")
        timing = self.params.copy()
        for directive in trace.params:
            key, value = directive.args
            timing.set(key.text, value.text, origin=str(directive.loc))
        timing.update(params or {}, origin="run parameters")
        self._check_arch(timing)
        if program is None:
            program = self.parse(trace.lines)
        setup = [self._setup_action(d, trace.base_dir) for d in trace.setup]
        after = [self._after_action(d, trace.base_dir) for d in trace.after]
        for action in setup:
            action()
        self.timing = timing
        try:
            engine = Engine(clock_hz=timing.clock_hz, record=record)
            engine.progress, engine.numerics, engine.observe = progress, numerics, observe
            self.build(engine)
            engine.run(self.ops(_numbered(program, engine)))
            result = collect(engine, self.name, len(program), self.peak_macs_per_cycle(),
                             PEAK_WINDOW_CYCLES)
        finally:
            self.timing = self.params
        result.stats["expects"] = [check for check in (action() for action in after) if check]
        result.expect_failures += [c["message"] for c in result.stats["expects"] if c["differ"]]
        return result

    def _check_arch(self, timing: ParamSet) -> None:
        for row, value, origin in timing.rows():
            if row.kind == "arch" and value != self.params.as_dict()[row.name]:
                raise ConfigError(f"{origin}: parameter {row.name} shapes the machine's state; "
                                  f"set it when making it: hwsim.machine({self.name!r}, "
                                  f"{row.name}=...) or hwsim run --param {row.name}=...")

    def _space(self, token) -> AddressSpace:
        try:
            return self.spaces[token.text]
        except KeyError:
            raise TraceSyntaxError(token.loc, f"memory space: expected one of "
                                              f"{', '.join(self.spaces)}, found {token.text!r}")

    def _range(self, directive: Directive, nbytes: int) -> tuple[AddressSpace, int]:
        space, addr = self._space(directive.args[0]), directive.args[1].integer("address")
        try:
            space.offset(addr, nbytes)
        except HwsimError as exc:
            raise TraceSyntaxError(directive.loc, str(exc)) from None
        return space, addr

    def _setup_action(self, d: Directive, base: Path) -> Callable[[], None]:
        if d.name == ".fill":
            nbytes, value = d.args[2].integer("NBYTES"), d.args[3].integer("BYTE")
            if not 0 <= value <= 255:
                raise TraceSyntaxError(d.args[3].loc, f"BYTE: expected 0..255, found {value}")
            space, addr = self._range(d, nbytes)
            return lambda: space.fill(addr, nbytes, value)
        data = _read_file(d.args[2], base, ".load")
        space, addr = self._range(d, data.size)
        return lambda: space.write(addr, data)

    def _after_action(self, d: Directive, base: Path) -> Callable[[], dict | None]:
        """``.store`` writes (and returns None); ``.expect`` returns what it compared: the
        region and file (``what``), ``bytes``, how many ``differ`` and the ``message``."""
        if d.name == ".store":
            nbytes = d.args[2].integer("NBYTES")
            space, addr = self._range(d, nbytes)
            path = base / d.args[3].text
            return lambda: store_bytes(path, space.read(addr, nbytes))
        expected = _read_file(d.args[2], base, ".expect")
        space, addr = self._range(d, expected.size)

        what = f"{space.name}:{addr:#x} {d.args[2].text}"

        def check() -> dict:
            found = space.read(addr, expected.size)
            differ = np.flatnonzero(found != expected)
            if differ.size == 0:
                message = f"expect {what}: {expected.size} bytes match"
            else:
                i = int(differ[0])
                message = (f"{d.loc}: .expect {what}: {differ.size} of {expected.size} bytes "
                           f"differ; first at {addr + i:#x}: expected {expected[i]:#04x}, "
                           f"found {found[i]:#04x}")
            return {"what": what, "bytes": int(expected.size), "differ": int(differ.size),
                    "message": message}
        return check


def _numbered(program: list, engine: Engine) -> Iterator:
    """The program's instructions, setting ``engine.tag`` to each one's index as it is read."""
    for index, instr in enumerate(program):
        engine.tag = index
        yield instr


def _read_file(token, base: Path, what: str) -> np.ndarray:
    path = base / token.text
    if not path.is_file():
        raise TraceSyntaxError(token.loc, f"{what}: no such file {path}")
    try:
        return load_bytes(path, what)
    except HwsimError as exc:
        raise TraceSyntaxError(token.loc, str(exc)) from None
