"""The Arm SME machine: state, units and ports, and a program as an op table.

Units (in-order queues): ``mx``, the matrix unit (outer products, MOVA, ZERO), pipelined with a
per-datapath rate (MACs per cycle) and latency and a penalty when the datapath changes; ``ls``, a
decoupled load/store unit whose transfers go through ``load_ports`` load ports (each load takes
the one that frees first) and one store port, each with a bandwidth and a latency; ``ctl``, the
core side (address arithmetic, predicates, FPCR, SMSTART/SMSTOP); ``vec``, the streaming-SVE
vector side, running whole routines (``vec NAME ...`` lines, ``vector``) costed per vector.
Dependencies are per register and per ZA row group (``semantics``), so four chains on four .S
tiles overlap while a chain on one tile is latency-bound. Defaults follow the Apple M4 figures
in docs/sources.md#m4-sme (``params``).

A program is an ``SmeProgram`` (A64 words and routines). Its op table is built over the distinct
words: each is decoded once, words that differ only in an immediate (``semantics.VALUE_FIELDS``)
are costed once together (``semantics``), and the per-op columns are gathers; the costs that
depend on program order (a datapath change, the scalar issue width) are computed over the whole
program at once. Every SME hazard is interlocked and memory accesses are ordered, so running the
instructions in program order gives the state the timing gives: the compiled engine runs them
first (``interpreter``), which also fills in the bytes each predicated access moved.

Not modelled: caches (memory is one flat space behind the ports), the core's own pipeline beyond
an issue width for scalar ops, NZCV flags, FPSR, exceptions other than memory faults, and the
multi-vector SME2 instructions.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import replace

import numpy as np

from hwsim.errors import Location, ProgramError
from hwsim.isa import sme, sme_vector
from hwsim.targets.base import Machine
from hwsim.targets.sme import interpreter, numerics, vector
from hwsim.targets.sme.params import PARAMS
from hwsim.targets.sme.program import ROUTINE, SmeProgram
from hwsim.targets.sme.semantics import MEMORY, REQUIRES, SEMANTICS, STORED, VALUE_FIELDS, \
    Recipe
from hwsim.targets.sme.state import FPCR, SmeState
from hwsim.timing.optable import DEP_PART, DEP_READ, DEP_WRITE, Chunk, OpBuilder, PortSpec, \
    UnitSpec, entries_of, pair_columns

DATAPATHS = ("fp32", "wide16", "int8", "b16b16")
VECTOR_WRITES = MEMORY + STORED   # a routine is ordered after the loads and stores before it
UNITS = ("mx", "ls", "ctl", "vec")
LOAD_GROUP = -1                   # a transfer to the load port that frees first
_REGISTER = re.compile(r"([a-z]+)(\d+)")


@functools.lru_cache(maxsize=None)     # a few dozen register names
def resource(name: str):
    """A semantics resource name as a builder key: ``z3`` -> ("z", 3), ``za1.s`` -> ("za", 1);
    stalls are then reported per kind (``wait z``)."""
    m = _REGISTER.match(name)
    return (m.group(1), int(m.group(2))) if m else name


class SmeMachine(Machine):
    name = "sme"
    description = "Arm SME: ZA tiles and outer products (defaults: Apple M4 P-cluster SME unit)"
    PARAMS = PARAMS
    STATE = ("spaces", "state")
    _used: frozenset = frozenset()      # datapaths of the last run's outer products
    in_order = True

    def make_state(self) -> None:
        self.state = SmeState(self.params.svl, self.params.mem_size)
        self.spaces = {"mem": self.state.mem}
        self.numerics = True

    # -- programs --------------------------------------------------------------------------------
    def parse(self, lines) -> SmeProgram:
        items, locs = [], []
        for text, loc in lines:
            if sme_vector.is_vector_line(text):
                items.append(vector.bind(sme_vector.parse_line(text, loc), self.state.mem))
                locs.append(loc)
            else:
                parsed = sme.parse_line(text, loc)
                items += parsed
                locs += [loc] * len(parsed)
        program = SmeProgram.from_items(items, locs)
        self._check_modes(program)
        return program

    def program(self, items) -> SmeProgram:
        """A program given in Python: an ``SmeProgram``, or a list of decoded instructions,
        32-bit words, assembly lines and routines; decoded and checked before anything runs."""
        if isinstance(items, SmeProgram):
            program = SmeProgram(np.asarray(items.words, np.uint32),
                                 {i: self._routine(r) for i, r in items.routines.items()},
                                 items.locs)
        else:
            program = SmeProgram.from_items([self._instruction(item) for item in items])
            program.routines = {i: self._routine(r) for i, r in program.routines.items()}
        self._check_modes(program)
        return program

    def _routine(self, item):
        return item if isinstance(item, vector.Bound) else vector.bind(item, self.state.mem)

    def _instruction(self, item):
        if isinstance(item, (sme.Instruction, vector.Bound, sme_vector.VecOp)):
            return item
        if isinstance(item, (int, np.integer)):
            return sme.decode(int(item))
        if sme_vector.is_vector_line(item):
            return sme_vector.parse_line(item, Location("<program>", 1, 1))
        instructions = sme.parse_line(item)
        if len(instructions) != 1:
            raise ProgramError(f"{item!r} expands to {len(instructions)} instructions; pass "
                               "hwsim.isa.sme.assemble_program(...) instead")
        return instructions[0]

    @staticmethod
    def decoded(program: SmeProgram) -> interpreter.Decoded:
        """The program's distinct words decoded (``interpreter.decode``), once per program; a
        placeholder word where no routine sits is refused."""
        found = program.derived.get("decoded")
        if found is None:
            placeholders = np.flatnonzero(program.words == ROUTINE)
            for i in sorted(set(placeholders.tolist()) - set(program.routines))[:1]:
                sme.decode(ROUTINE, program.loc(i))    # raises: not an instruction
            found = program.derived["decoded"] = interpreter.decode(program.words)
        return found

    def _check_modes(self, program: SmeProgram) -> None:
        """Refuse, before anything runs, an instruction whose PSTATE.SM/ZA would be wrong: the
        distinct words say what each needs; PSTATE changes only at SMSTART/SMSTOP. Each
        stretch between them is judged on the distinct words first, and instruction by
        instruction only if one of its words would be refused."""
        d = self.decoded(program)
        column = interpreter.COLUMNS.index
        needs = d.table[:, column("needs")].copy()
        # routines need streaming mode (every placeholder word holds one: ``decoded``)
        needs[d.words == ROUTINE] = interpreter.NEEDS_SM
        switch_rows = np.flatnonzero(d.table[:, column("kind")] == interpreter.KIND["smstart"])
        switches = np.flatnonzero(np.isin(d.index, switch_rows)).tolist()
        sm, za = self.state.sm, self.state.za_enabled
        bounds = [0] + [i + 1 for i in switches] + [len(d.index)]
        for lo, hi in zip(bounds, bounds[1:]):
            refused = ((needs & interpreter.NEEDS_SM) != 0) & (not sm) | (
                (needs & interpreter.NEEDS_ZA) != 0) & (not za) | (
                (needs & interpreter.NEEDS_B16B16) != 0) & (not self.params.feat_sme_b16b16)
            if refused.any():
                bad = refused[d.index[lo:hi]]
                if bad.any():
                    self._refuse(program, lo + int(np.argmax(bad)), sm, za)
            if hi - 1 in switches:
                a = d.instructions[d.index[hi - 1]].form.attrs
                sm = a["start"] if a["sm"] else sm
                za = a["start"] if a["za"] else za

    def _refuse(self, program, i: int, sm: bool, za: bool):
        if i in program.routines:
            routine = program.routines[i]
            raise ProgramError(f"{routine.call.loc}: vec {routine.row.name}: needs PSTATE.SM = 1 "
                               "(run smstart first)")
        ins = sme.decode(int(program.words[i]), program.loc(i))
        needs = REQUIRES.get(ins.op, "")
        if ("sm" in needs and not sm) or ("za" in needs and not za):
            raise ProgramError(f"{ins.loc}: {ins.text}: needs PSTATE.{needs.upper()} = 1 "
                               "(run smstart first)")
        raise ProgramError(f"{ins.loc}: {ins.text}: needs FEAT_SME_B16B16 "
                           "(parameter feat_sme_b16b16)")

    def peak_macs_per_cycle(self) -> float:
        """The fastest datapath the last run used (all of them before any run)."""
        paths = self._used or DATAPATHS
        return float(max(getattr(self.timing, f"{p}_macs_per_cycle") for p in paths))

    # -- the op table ----------------------------------------------------------------------------
    def compile(self, program: SmeProgram, numerics: bool, actions: bool):
        t = self.timing
        self.numerics = numerics
        self._datapath = {p: (getattr(t, f"{p}_macs_per_cycle"), getattr(t, f"{p}_latency_cycles"))
                          for p in DATAPATHS}
        self.za_move = dict(cycles=t.za_move_cycles,
                            latency=max(0, t.za_move_latency_cycles - t.za_move_cycles))
        self.predicate = dict(cycles=1, latency=max(0, t.predicate_latency_cycles - 1))
        self.scalar = dict(scalar=True)
        self._controls: dict[int, object] = {}
        d = self.decoded(program)
        words, inverse, decoded = d.words, d.index.astype(np.int64), d.instructions
        shared, first = _shared_rows(decoded)
        # the simpy engine's actions need every word's recipe, the table one per shared row
        every = [_recipe(self, ins) for ins in decoded] if actions else None
        recipes = [every[i] if actions else _recipe(self, decoded[i]) for i in first]
        self._used = frozenset(r.path for r in recipes if r is not None and r.path)
        ports = [PortSpec(f"load{i}", t.load_port_bytes_per_cycle, t.load_latency_cycles)
                 for i in range(t.load_ports)]
        ports.append(PortSpec("store", t.store_port_bytes_per_cycle, t.store_latency_cycles))
        units = [UnitSpec("mx", t.queue_depth, peak_macs=self.peak_macs_per_cycle()),
                 UnitSpec("ls", t.queue_depth, in_flight=t.mem_in_flight),
                 UnitSpec("ctl", t.queue_depth), UnitSpec("vec", t.queue_depth)]
        b = OpBuilder(units, ports, groups=[tuple(range(t.load_ports))])
        rows = [_row(b, r) for r in recipes]
        routines = list(program.routines)
        rows += [self._routine_row(b, program.routines[i]) for i in routines]
        # each distinct word its own label (the timeline shows every instruction), then the
        # routines'; a placeholder word is never an op's (every use of it is a routine)
        labels = [0 if ins is None else b.label(sme.disassemble(int(w)))
                  for w, ins in zip(words, decoded)]
        labels += [b.label(f"vec {program.routines[i].row.name}") for i in routines]
        which, named = shared[inverse], inverse.copy()
        which[routines] = len(recipes) + np.arange(len(routines))
        named[routines] = len(words) + np.arange(len(routines))
        chunk = _gather(rows, which, np.array(labels, np.int32)[named])
        self._ordered_costs(chunk, rows, which, t)
        b.extend(chunk)
        table = b.table()
        self._memory_ops = np.flatnonzero(np.array([r.memory is not None for r in rows])[which])
        effects = self._actions(program, table, every, decoded, inverse) if actions else {}
        return table, effects

    def _routine_row(self, b: OpBuilder, bound):
        cost = vector.cost(bound, self.timing, self.state.svl_bytes)
        loads = self.timing.load_ports
        share = -(-cost.loaded // loads)
        xfers = [(p, share) for p in range(loads) if cost.loaded]
        if cost.stored:
            xfers.append((loads, cost.stored))
        deps = [(b.resource(r), DEP_WRITE) for r in VECTOR_WRITES]
        return _Row(UNITS.index("vec"), cost.cycles, cost.latency, 0, deps, xfers, None, False,
                    None)

    def _ordered_costs(self, chunk: Chunk, rows: list, which: np.ndarray, t) -> None:
        """Costs that follow program order: the first outer product after one on another
        datapath pays ``mopa_switch_cycles``; every ``scalar_issue_width``-th scalar op takes
        a cycle, the others share it."""
        paths = np.array([DATAPATHS.index(r.path) if r.path else -1 for r in rows])[which]
        mopa = np.flatnonzero(paths >= 0)
        switched = mopa[1:][paths[mopa[1:]] != paths[mopa[:-1]]]
        latency = np.array([self._datapath[r.path][1] if r.path else 0 for r in rows])[which]
        chunk.cycles[switched] += t.mopa_switch_cycles
        chunk.latency[switched] = np.maximum(0, latency[switched] - chunk.cycles[switched])
        scalar = np.flatnonzero(np.array([r.scalar for r in rows])[which])
        cycles = ((np.arange(1, len(scalar) + 1) % t.scalar_issue_width) == 0).astype(np.int64)
        chunk.cycles[scalar] = cycles
        chunk.latency[scalar] = np.maximum(0, t.scalar_latency_cycles - cycles)

    def _actions(self, program, table, recipes, decoded, inverse) -> dict:
        """The reference semantics of every op (the simpy engine runs them at simulated time):
        a memory op's action also fills in the bytes its transfer moved."""
        actions = {}
        for i, u in enumerate(inverse.tolist()):
            if i in program.routines:
                bound = program.routines[i]
                if self.numerics:
                    actions[i] = lambda bound=bound: vector.start(bound, self.state.mem)
                continue
            recipe = recipes[u]
            ins = decoded[u] if program.locs is None else replace(decoded[u], loc=program.loc(i))
            if recipe.memory:
                actions[i] = _memory_action(recipe, ins, table.xfer_bytes, table.xfer_ptr[i])
            else:
                actions[i] = lambda act=recipe.act, ins=ins: act(ins)
        return actions

    def execute(self, program: SmeProgram, table, numerics: bool, effects) -> None:
        """The program in program order, compiled (``interpreter``), the routines between its
        pieces in Python; fills in the bytes each memory instruction moved. Watched ops are
        reported done as the program passes them (``Effects``)."""
        moved = np.zeros(len(program), np.int64)
        runner = interpreter.Runner(self.state, program, self.decoded(program), numerics,
                                    self.params, moved)
        stops = sorted(effects.watch)
        s = i = 0
        n = len(program)
        while i < n:
            stop = stops[s] + 1 if s < len(stops) else n
            at = runner.run(i, stop)
            i = at
            if at < stop:                   # a routine: its outputs land before the next op
                if numerics:
                    commit = vector.start(program.routines[at], self.state.mem)
                    if commit is not None:
                        commit()
                i = at + 1
            passed = bisect.bisect_left(stops, i, s)
            for op in stops[s:passed]:
                effects.done(op)
            s = passed
        memory = self._memory_ops
        table.xfer_bytes[table.xfer_ptr[memory]] = moved[memory]

    # -- costs and controls used by the semantics -------------------------------------------------
    def timing_of(self, path: str) -> tuple[int, int]:
        return self._datapath[path]

    def controls(self):
        """The numerics control array for the current FPCR (cached per FPCR value)."""
        fpcr = self.state.fpcr
        ctl = self._controls.get(fpcr)
        if ctl is None:
            ctl = self._controls[fpcr] = numerics.controls(fpcr, self.params.feat_afp,
                                                           self.params.bf16_sop_dn)
        return ctl

    def ebf(self) -> bool:
        """FPCR.EBF (RES0 without FEAT_EBF16): the widening BF16 products' behaviour."""
        return bool(self.state.fpcr & FPCR.encode(EBF=1)) and self.params.feat_ebf16


class _Row:
    """The table columns of a shared row (``_shared_rows``) or of a routine, but the label."""

    __slots__ = ("unit", "cycles", "latency", "macs", "deps", "xfers", "path", "scalar",
                 "memory")

    def __init__(self, unit, cycles, latency, macs, deps, xfers, path, scalar, memory):
        self.unit, self.cycles, self.latency, self.macs = unit, cycles, latency, macs
        self.deps, self.xfers, self.path, self.scalar, self.memory = deps, xfers, path, scalar, \
            memory


def _recipe(m: SmeMachine, ins) -> Recipe | None:
    """``ins``'s recipe (None for the routine placeholder word)."""
    return None if ins is None else SEMANTICS[ins.op](m, ins)


def _shared_rows(decoded: list) -> tuple[np.ndarray, list[int]]:
    """Distinct words that differ only in ``VALUE_FIELDS`` cost the same and touch the same
    resources: (each distinct word's shared row, the first word of each row)."""
    rows: dict = {}
    shared, first = np.empty(len(decoded), np.int64), []
    for i, ins in enumerate(decoded):
        key = None if ins is None else (ins.form.name, *(
            v for name, v in ins.fields.items() if name not in VALUE_FIELDS))
        row = rows.get(key)
        if row is None:
            row = rows[key] = len(first)
            first.append(i)
        shared[i] = row
    return shared, first


def _row(b: OpBuilder, r: Recipe | None) -> _Row:
    if r is None:                    # the routine placeholder word: every use is a routine
        return _Row(0, 0, 0, 0, [], [], None, False, None)
    deps = [(b.resource(resource(x)), DEP_READ) for x in r.reads] + \
        [(b.resource(resource(x)), DEP_PART) for x in r.parts] + \
        [(b.resource(resource(x)), DEP_WRITE) for x in r.writes]
    xfers = []
    if r.memory == "load":
        xfers = [(LOAD_GROUP, r.nbytes)]
    elif r.memory == "store":
        xfers = [(len(b.ports) - 1, r.nbytes)]
    return _Row(UNITS.index(r.unit), r.cycles, r.latency, r.macs, deps, xfers, r.path, r.scalar,
                r.memory)


def _gather(rows: list[_Row], which: np.ndarray, label: np.ndarray) -> Chunk:
    """Per-op columns from the rows (``which``: each op's row; ``label``: each op's)."""
    def column(name, dtype):
        return np.array([getattr(r, name) for r in rows], dtype)[which]

    def ragged(name, dtypes):
        lists = [getattr(r, name) for r in rows]
        counts = np.fromiter(map(len, lists), np.int64, len(lists))
        columns = pair_columns([e for entries in lists for e in entries])
        flat = [column.astype(d) for column, d in zip(columns, dtypes)]
        starts = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(counts, out=starts[1:])
        per_op = counts[which]
        entries = entries_of(starts, which, per_op)
        return per_op, [f[entries] if len(f) else f for f in flat]

    dep_count, (dep_res, dep_mode) = ragged("deps", (np.int32, np.int8))
    xfer_count, (xfer_port, xfer_bytes) = ragged("xfers", (np.int32, np.int64))
    return Chunk(column("unit", np.int32), column("cycles", np.int64),
                 column("latency", np.int64), column("macs", np.int64),
                 np.arange(len(which), dtype=np.int64), label, dep_count,
                 dep_res, dep_mode, xfer_count, xfer_port, xfer_bytes)


def _memory_action(recipe: Recipe, ins, xfer_bytes: np.ndarray, k: int):
    def action():
        xfer_bytes[k] = recipe.act(ins)
    return action
