"""What every machine shares: parameters, memories, and running a trace on a timing engine.

A machine is architectural state (memories and registers that persist across runs) plus
semantics. A subclass declares ``name``, ``PARAMS`` and its spaces, and implements:

* ``parse(lines)``: instruction lines -> a program (a sequence of instructions), raising
  ``TraceSyntaxError``/``EncodingError``/``ProgramError`` before anything runs;
* ``compile(program, numerics, actions)``: the program as an ``OpTable`` (units, ports, every
  op's cost and resources, computed once for both engines, each op tagged with the index of its
  instruction: schedulers attribute time and bytes to layers by it) and, when ``actions`` is
  true, the ops' functional actions (``hwsim.timing.effects``): what each op does to the state
  when it starts and what it commits when its results are ready;
* optionally ``execute(program, table, numerics, effects)`` with ``in_order = True``: the
  semantics run in program order by compiled code, for a machine on which every hazard is
  interlocked (so program order gives the same state) and whose costs depend on data (it fills
  them into the table before the timing runs).

``run`` does the rest the same way for every machine: directives, parameter overrides, setup,
the engine, ``.store``/``.expect`` and the result. Engines (``ENGINES``): ``simpy``, the
reference (one simpy event per op, actions at simulated time), and ``compiled``, the default
(``hwsim.timing.core``; actions replayed in the same order afterwards, or ``execute`` first):
identical results. ``numerics=False`` runs the program for its timing only: machines skip their
datapaths and data movement, at the same cost.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hwsim.blas import one_thread
from hwsim.errors import ConfigError, HwsimError, Location, TraceSyntaxError
from hwsim.memory.space import AddressSpace
from hwsim.timing import core, warm
from hwsim.timing import engine as reference
from hwsim.timing.effects import Effects, replay
from hwsim.timing.optable import OpTable
from hwsim.timing.params import ParamSet, ParamTable
from hwsim.timing.stats import Result, collect
from hwsim.traces.files import check_output, load_bytes, store_bytes
from hwsim.traces.reader import Directive, Trace, read_trace

# Peak bandwidth is reported over aligned windows of this many cycles: long enough to average out
# single-transfer granularity, short enough to show bursts.
PEAK_WINDOW_CYCLES = 256
ENGINES = ("compiled", "simpy")


def _engine(name: str) -> str:
    if name not in ENGINES:
        raise ConfigError(f"engine {name!r}: expected one of {', '.join(ENGINES)}")
    return name


class Machine:
    name: str = ""
    description: str = ""
    PARAMS: ParamTable
    STATE: tuple = ("spaces",)   # attributes holding the architectural state

    def __init__(self, engine: str | None = None, **params: Any):
        self.engine = _engine(engine or "compiled")
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

    def compile(self, program, numerics: bool, actions: bool) -> tuple[OpTable, dict]:
        raise NotImplementedError

    in_order = False

    def execute(self, program, table: OpTable, numerics: bool, effects: Effects) -> None:
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

    def program_first(self, engine: str | None = None) -> bool:
        """Whether a run on ``engine`` (default: the machine's) runs the program in order
        before the timing (``in_order``, on the compiled engine): its effects, and so every
        layer's output, are known before the timing runs."""
        return (_engine(engine) if engine else self.engine) == "compiled" and self.in_order

    def run(self, trace: str | Path | Trace | list, params: dict[str, Any] | None = None,
            progress: Callable[[int, int], None] | None = None, numerics: bool = True,
            engine: str | None = None, watcher=None) -> Result:
        """Run a trace (text, a path, a read ``Trace``, or a program built in Python).
        ``numerics=False``: timing only; ``engine``: ``simpy`` or ``compiled`` (default: the
        machine's); ``watcher``: told when ops finish (``watch(table)`` -> op indices,
        ``done(op)``: see ``Effects``; a machine that runs its program in order is told
        ``stops(table)`` -> op indices, ``through(op)``: every op up to a stop has finished)."""
        engine = _engine(engine) if engine else self.engine
        if self.program_first(engine):
            warm.start_core()   # compiled alongside this machine's kernels (``timing.warm``)
        if isinstance(trace, (Trace, str, Path)):
            trace = trace if isinstance(trace, Trace) else read_trace(trace)
            program = None
        else:
            trace, program = Trace("<program>", Path.cwd()), trace
        if trace.target is not None and trace.target.text != self.name:
            raise ConfigError(f"{trace.target.loc}: trace is for {trace.target.text!r}, "
                              f"this machine is {self.name!r}")
        timing = self.params.copy()
        for directive in trace.params:
            key, value = directive.args
            timing.set(key.text, value.text, origin=str(directive.loc))
        timing.update(params or {}, origin="run parameters")
        self._check_arch(timing)
        program = self.parse(trace.lines) if program is None else self.program(program)
        setup = [self._setup_action(d, trace.base_dir) for d in trace.setup]
        after = [self._after_action(d, trace.base_dir) for d in trace.after]
        for action in setup:
            action()
        self.timing = timing
        try:
            with one_thread():
                result = self._simulate(program, numerics, engine, progress, watcher)
        finally:
            self.timing = self.params
        result.stats["expects"] = [check for check in (action() for action in after) if check]
        result.expect_failures += [c["message"] for c in result.stats["expects"] if c["differ"]]
        return result

    def program(self, items):
        """A program given in Python (a list of instructions) as ``parse`` would return it."""
        return items

    def _simulate(self, program, numerics: bool, engine: str, progress, watcher) -> Result:
        in_order = self.program_first(engine)
        table, actions = self.compile(program, numerics, actions=not in_order)
        if watcher is None:
            effects = Effects(actions or {})
        elif in_order:              # told only as the program passes each layer's last writer
            effects = Effects(actions or {}, watcher.stops(table), watcher.through)
        else:
            effects = Effects(actions or {}, watcher.watch(table), watcher.done)
        if engine == "simpy":
            records = reference.simulate(table, effects, progress)
        elif in_order:
            self.execute(program, table, numerics, effects)
            warm.wait("core")
            records = core.simulate(table, progress)
        else:
            records = core.simulate(table, progress)
            warm.wait("kernels")
            replay(records, effects)
        return collect(records, self.name, len(program), self.peak_macs_per_cycle(),
                       self.timing.clock_hz, PEAK_WINDOW_CYCLES)

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
        data = self._read_file(d, d.args[2], base)
        space, addr = self._range(d, data.size)
        return lambda: space.write(addr, data)

    def _after_action(self, d: Directive, base: Path) -> Callable[[], dict | None]:
        """``.store`` writes (and returns None); ``.expect`` returns what it compared: the
        region and file (``what``), ``bytes``, how many ``differ`` and the ``message``."""
        if d.name == ".store":
            nbytes = d.args[2].integer("NBYTES")
            space, addr = self._range(d, nbytes)
            path = base / d.args[3].text
            try:
                check_output(path, ".store")
            except HwsimError as exc:
                raise TraceSyntaxError(d.args[3].loc, str(exc)) from None
            return lambda: store_bytes(path, space.read(addr, nbytes))
        file = d.args[-1]
        expected = self._read_file(d, file, base)
        # with NBYTES, the region's size is given and a file of another size is a mismatch
        nbytes = d.args[2].integer("NBYTES") if len(d.args) == 4 else expected.size
        space, addr = self._range(d, nbytes)
        what = f"{space.name}:{addr:#x} {file.text}"

        def check() -> dict:
            found = space.read(addr, nbytes)
            common = min(nbytes, expected.size)
            differ = np.flatnonzero(found[:common] != expected[:common])
            missing = abs(nbytes - expected.size)           # a size mismatch is a mismatch
            if missing:
                message = (f"{d.loc}: .expect {what}: the file holds {expected.size:,} bytes, "
                           f"the region {nbytes:,}")
            elif differ.size == 0:
                message = f"expect {what}: {expected.size} bytes match"
            else:
                i = int(differ[0])
                message = (f"{d.loc}: .expect {what}: {differ.size} of {expected.size} bytes "
                           f"differ; first at {addr + i:#x}: expected {expected[i]:#04x}, "
                           f"found {found[i]:#04x}")
            return {"what": what, "bytes": int(nbytes), "differ": int(differ.size) + missing,
                    "message": message}
        return check

    def _read_file(self, d: Directive, token, base: Path) -> np.ndarray:
        """The bytes of a ``.load``/``.expect`` file, refused before reading when they cannot
        fit between the directive's address and the end of its space."""
        space, addr = self._range(d, 0)
        path = base / token.text
        if not os.path.lexists(path):
            raise TraceSyntaxError(token.loc, f"{d.name}: no such file {path}")
        try:
            return load_bytes(path, d.name, limit=space.end - addr)
        except HwsimError as exc:
            raise TraceSyntaxError(token.loc, str(exc)) from None
