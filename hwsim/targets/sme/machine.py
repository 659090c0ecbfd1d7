"""The Arm SME machine: state, units and ports, and a program as a stream of engine ops.

Units (in-order queues on the shared engine): ``mx``, the matrix unit (outer products, MOVA,
ZERO), pipelined with a per-datapath rate (MACs per cycle) and latency and a penalty when the
datapath changes; ``ls``, a decoupled load/store unit whose transfers go through ``load_ports``
load ports and one store port, each with a bandwidth and a latency; ``ctl``, the core side
(address arithmetic, predicates, FPCR, SMSTART/SMSTOP); ``vec``, the streaming-SVE vector side,
running whole routines (``vec NAME ...`` lines, ``vector``) costed per vector. Dependencies are per
register and per ZA row group (``semantics``), so four chains on four .S tiles overlap while a
chain on one tile is latency-bound. Defaults follow the Apple M4 figures in FACTS.md
(``params``).

Not modelled: caches (memory is one flat space behind the ports), the core's own pipeline beyond
an issue width for scalar ops, NZCV flags, FPSR, exceptions other than memory faults, and the
multi-vector SME2 instructions.
"""

from __future__ import annotations

from functools import partial
from operator import attrgetter
from types import SimpleNamespace
from typing import Iterator

import numpy as np

from hwsim.errors import Location, ProgramError
from hwsim.isa import sme, sme_vector
from hwsim.targets.base import Machine
from hwsim.targets.sme import numerics, vector
from hwsim.targets.sme.params import PARAMS
from hwsim.targets.sme.program import ROUTINE, SmeProgram
from hwsim.targets.sme.semantics import MEMORY, REQUIRES, SEMANTICS, STORED, Recipe
from hwsim.targets.sme.state import FPCR, SmeState
from hwsim.timing.engine import Engine, Op, Work

DATAPATHS = ("fp32", "wide16", "int8", "b16b16")
VECTOR_WRITES = MEMORY + STORED   # a routine is ordered after the loads and stores before it
_FREE_AT = attrgetter("free_at")   # a load goes to the load port that frees first


class SmeMachine(Machine):
    name = "sme"
    description = "Arm SME: ZA tiles and outer products (defaults: Apple M4 P-cluster SME unit)"
    PARAMS = PARAMS
    _used: set = frozenset()      # datapaths of the last run's outer products

    def make_state(self) -> None:
        self.state = SmeState(self.params.svl, self.params.mem_size)
        self.spaces = {"mem": self.state.mem}

    def parse(self, lines) -> list:
        program = []
        for text, loc in lines:
            if sme_vector.is_vector_line(text):
                program.append(vector.bind(sme_vector.parse_line(text, loc), self.state.mem))
            else:
                program += sme.parse_line(text, loc)
        self._check_modes(program)
        return program

    def run(self, trace, *args, **kwargs):
        """As ``Machine.run``; a program list or an ``SmeProgram`` is decoded and checked before
        anything runs."""
        if isinstance(trace, SmeProgram):
            trace = self._expand(trace)
            self._check_modes(trace)
        elif isinstance(trace, list):
            trace = [self._instruction(item) for item in trace]
            self._check_modes(trace)
        return super().run(trace, *args, **kwargs)

    def peak_macs_per_cycle(self) -> float:
        """The fastest datapath the last run used (all of them before any run)."""
        paths = self._used or DATAPATHS
        return float(max(getattr(self.timing, f"{p}_macs_per_cycle") for p in paths))

    # -- one run ---------------------------------------------------------------------------------
    def build(self, engine: Engine) -> None:
        t = self.timing
        self.engine = engine
        depth = t.queue_depth
        self._used = set()
        self.units = {"mx": engine.unit("mx", depth, peak_macs=self.peak_macs_per_cycle()),
                      "ls": engine.unit("ls", depth, in_flight=t.mem_in_flight),
                      "ctl": engine.unit("ctl", depth), "vec": engine.unit("vec", depth)}
        self.load_ports = [engine.port(f"load{i}", t.load_port_bytes_per_cycle,
                                       t.load_latency_cycles) for i in range(t.load_ports)]
        self.store_port = engine.port("store", t.store_port_bytes_per_cycle,
                                      t.store_latency_cycles)
        self._datapath = {p: (getattr(t, f"{p}_macs_per_cycle"), getattr(t, f"{p}_latency_cycles"))
                          for p in DATAPATHS}
        # this run's costs as plain attributes, and the Work of fixed-cost ops, made once
        self.cost = SimpleNamespace(**{name: getattr(t, name) for name in (
            "mopa_switch_cycles", "za_array_transfer_cycles", "smstart_cycles",
            "scalar_issue_width")})
        self._za_work = Work(t.za_move_cycles, max(0, t.za_move_latency_cycles - t.za_move_cycles))
        self._scalar_work = [Work(c, max(0, t.scalar_latency_cycles - c)) for c in (0, 1)]
        self._predicate_work = Work(1, max(0, t.predicate_latency_cycles - 1))
        self._last_path = None
        self._scalar_ops = 0
        self._controls: dict[int, object] = {}
        self._recipes: dict[int, Recipe] = {}

    def ops(self, program) -> Iterator[Op]:
        units, recipes = self.units, self._recipes
        for ins in program:
            if isinstance(ins, vector.Bound):
                yield Op(units["vec"], partial(vector.execute, ins, self), f"vec {ins.op.name}",
                         writes=VECTOR_WRITES)
                continue
            recipe = recipes.get(ins.word)
            if recipe is None:
                recipe = recipes[ins.word] = SEMANTICS[ins.op](self, ins)
                recipe.label = ins.text
            # memory ops report faults with the instruction's own location; the others need none
            run = partial(recipe.run, ins) if recipe.unit == "ls" else recipe.run
            yield Op(units[recipe.unit], run, recipe.label, recipe.reads, recipe.writes, None,
                     recipe.parts)

    def _expand(self, program: SmeProgram) -> list:
        """The program's instruction objects (each distinct word decoded once) and its routines
        bound to memory. A stop-gap until ops are generated from the arrays themselves."""
        unique, inverse = np.unique(program.words, return_inverse=True)
        decoded = np.empty(len(unique), object)
        decoded[:] = [None if word == ROUTINE else sme.decode(int(word)) for word in unique]
        items = decoded[inverse].tolist()
        for position, routine in program.routines.items():
            items[position] = self._instruction(routine)
        return items

    def _instruction(self, item):
        if isinstance(item, (sme.Instruction, vector.Bound)):
            return item
        if isinstance(item, sme_vector.VecOp):
            return vector.bind(item, self.state.mem)
        if isinstance(item, int):
            return sme.decode(item)
        if sme_vector.is_vector_line(item):
            return vector.bind(sme_vector.parse_line(item, Location("<program>", 1, 1)),
                               self.state.mem)
        instructions = sme.parse_line(item)
        if len(instructions) != 1:
            raise ProgramError(f"{item!r} expands to {len(instructions)} instructions; pass "
                               "hwsim.isa.sme.assemble_program(...) instead")
        return instructions[0]

    def _check_modes(self, program: list[sme.Instruction]) -> None:
        """Refuse, before anything runs, an instruction whose PSTATE.SM/ZA would be wrong."""
        sm, za = self.state.sm, self.state.za_enabled
        b16b16 = self.params.feat_sme_b16b16
        for ins in program:
            if isinstance(ins, vector.Bound):
                if not sm:
                    raise ProgramError(f"{ins.op.loc}: vec {ins.op.name}: needs PSTATE.SM = 1 "
                                       "(run smstart first)")
                continue
            needs = REQUIRES.get(ins.op, "")
            if ("sm" in needs and not sm) or ("za" in needs and not za):
                raise ProgramError(f"{ins.loc}: {ins.text}: needs PSTATE.{needs.upper()} = 1 "
                                   "(run smstart first)")
            if ins.form.attrs.get("dtype") == "bf16" and not b16b16:
                raise ProgramError(f"{ins.loc}: {ins.text}: needs FEAT_SME_B16B16 "
                                   "(parameter feat_sme_b16b16)")
            if ins.op == "smstart":
                a = ins.form.attrs
                sm = a["start"] if a["sm"] else sm
                za = a["start"] if a["za"] else za

    # -- costs and controls used by the semantics -------------------------------------------------
    def timing_of(self, path: str) -> tuple[int, int]:
        return self._datapath[path]

    def switch(self, path: str) -> bool:
        """Whether the matrix unit changes datapath (which costs ``mopa_switch_cycles``)."""
        changed = self._last_path is not None and path != self._last_path
        if changed or self._last_path is None:
            self._used.add(path)      # utilisation is against the datapaths in use
            self.units["mx"].peak_macs = self.peak_macs_per_cycle()
        self._last_path = path
        return changed

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

    def memory_work(self, nbytes: int, load: bool, cycles: int = 0) -> Work:
        port = min(self.load_ports, key=_FREE_AT) if load else self.store_port
        return Work(cycles, transfers=((port, nbytes),))

    def vector_transfers(self, loaded: int, stored: int) -> tuple:
        """A vector routine's port traffic: loads spread over the load ports, stores."""
        share = -(-loaded // len(self.load_ports))
        return tuple((port, share) for port in self.load_ports if loaded) + (
            ((self.store_port, stored),) if stored else ())

    def za_work(self) -> Work:
        return self._za_work

    def scalar_work(self) -> Work:
        # ``scalar_issue_width`` ops share a cycle: every width-th op takes it
        self._scalar_ops += 1
        return self._scalar_work[self._scalar_ops % self.cost.scalar_issue_width == 0]

    def predicate_work(self) -> Work:
        return self._predicate_work

