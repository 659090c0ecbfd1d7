"""The GAP9 machine: memories, the cluster DMA, the NE16 and the cluster cores on the engine.

Units: ``ctrl`` (the cluster controller, which executes the program in order: it programs the
DMA and the NE16 and launches kernels, paying per register access), ``dma`` (decoupled, up to
``dma_channels`` transfers in flight), ``ne16`` (one op per state of each job, jobs in commit
order) and ``cluster`` (the 8 worker cores running one kernel at a time). Ports: ``l2``,
``mram`` and the L1 side of each master (``l1.dma``, ``l1.ne16``, ``l1.cores``); L1 bank
contention between the masters is priced by ``hwsim.timing.traffic`` and shows as ``l1 contention``
stalls, conflicts among the cores as ``l1 bank conflict`` stalls.

External memory (``l3``, port ``l3``) is reached by the micro-DMA (unit ``udma``): copies
between L3 and L2, one at a time over the HyperBus/Octal-SPI link (docs/gap9-memory.md).

State (``state.py``): the memories and the NE16's two register contexts; what each instruction
does to it and which ops it becomes: ``semantics.py``.

Not modelled: the fabric controller (a micro-DMA transfer costs the controller what a cluster
DMA command does; the request's trip through the fabric controller is in ``l3_latency_cycles``;
MRAM is reached through the cluster DMA), the cores' instruction streams (kernels are costed,
see ``cluster_kernels``), HWPE soft clear and IRQs.
"""

from __future__ import annotations

from hwsim.errors import HwsimError, Location, TraceSyntaxError
from hwsim.isa import gap9 as prog
from hwsim.memory.dma import Copy, Dma
from hwsim.targets.base import Machine
from hwsim.targets.gap9 import cluster_kernels
from hwsim.targets.gap9.params import PARAMS
from hwsim.targets.gap9.semantics import Run
from hwsim.targets.gap9.state import Gap9State, memories
from hwsim.timing.optable import OpBuilder, PortSpec, UnitSpec

QUEUE = 1 << 16   # deep unit queues: the issue front end must never hold back the controller


class Gap9(Machine):
    name = "gap9"
    description = ("GreenWaves GAP9 cluster: 8 worker cores + controller, L1/L2/MRAM, cluster "
                   "DMA, NE16 neural engine")
    PARAMS = PARAMS
    STATE = ("spaces", "state")

    def make_state(self) -> None:
        self.spaces = memories(self.params)
        self.state = Gap9State()

    def peak_macs_per_cycle(self) -> float:
        t = self.timing
        return t.ne16_products_per_cycle / 8 + t.cluster_peak_macs_per_cycle

    # -- program text ----------------------------------------------------------------------------
    def parse(self, lines: list[tuple[str, Location]]) -> list:
        program = [prog.parse_line(text, loc) for text, loc in lines]
        for instr in program:
            self._check(instr)
        return program

    def _check(self, instr) -> None:
        loc = instr.loc
        if isinstance(instr, prog.DmaCopy):
            try:
                self.transfer(instr).check()
            except HwsimError as exc:
                raise TraceSyntaxError(loc, f"dma: {exc}") from None
        elif isinstance(instr, prog.Kernel):
            cluster_kernels.bind(instr, self.spaces)

    def transfer(self, d: prog.DmaCopy) -> Copy:
        """The copy a ``dma`` line describes, between spaces it may join."""
        for space in (d.src, d.dst):
            if space not in self.spaces:
                raise TraceSyntaxError(d.loc, f"dma: expected a space in "
                                              f"{', '.join(self.spaces)}, found {space!r}")
        if "l3" in (d.src, d.dst) and {d.src, d.dst} != {"l3", "l2"}:
            raise TraceSyntaxError(d.loc, f"dma: the micro-DMA moves between l3 and l2, found "
                                          f"{d.src} -> {d.dst}")
        return Copy(self.spaces[d.src], d.src_addr, self.spaces[d.dst], d.dst_addr, d.row_bytes,
                    d.rows, d.src_stride, d.dst_stride)

    # -- the op table ------------------------------------------------------------------------
    def compile(self, program: list, numerics: bool, actions: bool):
        t = self.timing
        ports = [PortSpec("l2", t.l2_bytes_per_cycle, t.l2_latency_cycles),
                 PortSpec("mram", t.mram_bytes_per_cycle, t.mram_latency_cycles),
                 PortSpec("l3", t.l3_bytes_per_cycle, t.l3_latency_cycles),
                 PortSpec("l1.dma", t.l1_dma_bytes_per_cycle, t.l1_latency_cycles),
                 PortSpec("l1.ne16", t.ne16_port_bytes_per_cycle, t.l1_latency_cycles),
                 PortSpec("l1.cores", t.cluster_cores * t.l1_word_bytes, t.l1_latency_cycles)]
        units = [UnitSpec("ctrl", QUEUE), UnitSpec("dma", QUEUE, in_flight=t.dma_channels),
                 UnitSpec("ne16", QUEUE, peak_macs=t.ne16_products_per_cycle / 8),
                 UnitSpec("cluster", QUEUE, peak_macs=t.cluster_peak_macs_per_cycle),
                 UnitSpec("udma", QUEUE, in_flight=1)]
        b = OpBuilder(units, ports, traffic_banks=t.l1_banks)
        self.dma = Dma("dma", {"l2": b.port("l2"), "mram": b.port("mram"),
                               "l1": b.port("l1.dma")}, t.dma_setup_cycles)
        self.udma = Dma("udma", {"l3": b.port("l3"), "l2": b.port("l2")}, t.dma_setup_cycles)
        run = Run(self, b, numerics, {} if actions else None)
        for index, instr in enumerate(program):
            run.step(index, instr)
        if run.writes:
            run.flush_writes(len(program) - 1)
        return b.table(), run.actions or {}
