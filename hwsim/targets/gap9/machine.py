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

Consecutive job register writes run as one controller op of their summed cost (the same cycles
as one op each: they are back to back on the in-order controller); the op is attributed to the
instruction after them.

The NE16 job queue: two register contexts; a job's first register access acquires the context
its commit will use, waiting while both are pending (the job two commits earlier has not
ended); commit snapshots the context and queues the job. The job's first state reads its
operands; its last state writes the outputs; its end is the event ``ne16 wait`` sleeps on.

Not modelled: the fabric controller (a micro-DMA transfer costs the controller what a cluster
DMA command does; the request's trip through the fabric controller is in ``l3_latency_cycles``;
MRAM is reached through the cluster DMA), the cores' instruction streams (kernels are costed,
see ``kernels``), HWPE soft clear and IRQs.
"""

from __future__ import annotations

import math

from hwsim.errors import HwsimError, Location, ProgramError, TraceSyntaxError
from hwsim.isa import gap9 as prog
from hwsim.isa import ne16 as isa
from hwsim.memory.dma import Copy, Dma
from hwsim.memory.space import AddressSpace
from hwsim.targets.base import Machine
from hwsim.targets.gap9 import cluster_kernels as kernels
from hwsim.targets.gap9.ne16 import kernel as ne16_kernel
from hwsim.targets.gap9.ne16.job import Ne16Job
from hwsim.targets.gap9.ne16.timing import job_states, job_totals
from hwsim.targets.gap9.params import PARAMS
from hwsim.timing.optable import OpBuilder, PortSpec, UnitSpec

QUEUE = 1 << 16   # deep unit queues: the issue front end must never hold back the controller


class Gap9(Machine):
    name = "gap9"
    description = ("GreenWaves GAP9 cluster: 8 worker cores + controller, L1/L2/MRAM, cluster "
                   "DMA, NE16 neural engine")
    PARAMS = PARAMS
    STATE = ("spaces", "ne16_contexts", "ne16_configuring", "ne16_holding")

    def make_state(self) -> None:
        p = self.params
        self.spaces = {"l1": AddressSpace("l1", p.l1_size, p.l1_base),
                       "l2": AddressSpace("l2", p.l2_size, p.l2_base),
                       "mram": AddressSpace("mram", p.mram_size, p.mram_base, readonly=True),
                       "l3": AddressSpace("l3", p.l3_size, p.l3_base)}
        self.ne16_contexts = [[0] * isa.NUM_REGISTERS for _ in range(isa.CONTEXTS)]
        self.ne16_configuring = 0       # context the next register writes go to
        self.ne16_holding = [False] * isa.CONTEXTS   # committed and not yet ended, per context

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
                self._copy(instr).check()
            except HwsimError as exc:
                raise TraceSyntaxError(loc, f"dma: {exc}") from None
        elif isinstance(instr, prog.Kernel):
            kernels.bind(instr, self.spaces)

    def _copy(self, d: prog.DmaCopy) -> Copy:
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
        run = _Run(self, b, numerics, {} if actions else None)
        for index, instr in enumerate(program):
            run.step(index, instr)
        if run.writes:
            run.flush_writes(len(program) - 1)
        return b.table(), run.actions or {}


class _Params:
    """A run's parameters, each read from its ParamSet once (a ParamSet read is slow: it is
    recorded), then a plain attribute."""

    def __init__(self, values):
        self._values = values

    def __getattr__(self, name: str):
        value = getattr(self._values, name)
        setattr(self, name, value)
        return value


class _Run:
    """Building one run's ops: transfer ids, jobs, kernels, the context being configured."""

    def __init__(self, machine: Gap9, b: OpBuilder, numerics: bool, actions: dict | None):
        self.m, self.t, self.b = machine, _Params(machine.timing), b
        self.numerics, self.actions = numerics, actions
        self.transfers: list[int] = []     # ids not yet waited for
        self.dma_count = 0
        self.jobs = 0
        self.acquired = False
        self.kernels = 0
        self.writes: list[str] = []         # register writes not yet issued as an op
        self.tag = 0
        self.totals: dict = {}              # job signature -> job_totals
        self.states: dict = {}              # job signature -> job_states

    def act(self, op: int, action) -> None:
        if self.actions is not None:
            self.actions[op] = action

    def ctrl(self, label: str, cycles: int, reads=(), writes=()) -> int:
        return self.b.add("ctrl", cycles, reads=reads, writes=writes, label=label, tag=self.tag)

    def step(self, index: int, instr) -> None:
        self.tag = index
        if self.writes and type(instr) is not prog.Ne16Write:
            self.flush_writes(index)
        HANDLERS[type(instr)](self, instr)

    def flush_writes(self, index: int) -> None:
        """Consecutive register writes as one controller op (attributed to the instruction
        after them)."""
        names, self.writes, self.tag = self.writes, [], index
        self.ctrl(f"ne16 {' '.join(names)}", len(names) * self.t.ctrl_reg_write_cycles)

    def dma(self, d: prog.DmaCopy) -> None:
        m, t, n = self.m, self.t, self.dma_count
        self.dma_count += 1
        self.transfers.append(n)
        writes = t.dma_writes_2d if d.rows > 1 else t.dma_writes_1d
        self.ctrl(f"dma program #{n}", writes * t.ctrl_reg_write_cycles,
                  writes=(("dma program", n),))
        actions = self.actions if self.numerics else None
        if "l3" in (d.src, d.dst):      # the micro-DMA: no L1 side
            m.udma.add(self.b, m._copy(d), ("dma", n), self.tag, actions,
                       reads=(("dma program", n),))
            return
        # the transfer's L1 side runs at the rate of its slower end
        rate = min(self.b.ports[m.dma.ports[d.src]].width, t.l1_dma_bytes_per_cycle)
        nbytes = d.row_bytes * d.rows
        m.dma.add(self.b, m._copy(d), ("dma", n), self.tag, actions,
                  reads=(("dma program", n),),
                  traffic=("record", "dma", nbytes / t.l1_word_bytes, rate))

    def dma_wait(self, w: prog.DmaWait) -> None:
        ids = w.ids or tuple(self.transfers)
        for n in ids:
            if not 0 <= n < self.dma_count:
                raise ProgramError(f"{w.loc}: dma wait {n}: no such transfer (issued: "
                                   f"{self.dma_count})")
        self.transfers = [n for n in self.transfers if n not in ids]
        self.ctrl("dma wait", self.t.ctrl_reg_read_cycles, reads=[("dma", n) for n in ids])

    def acquire(self, instr) -> None:
        if self.acquired:
            raise ProgramError(f"{instr.loc}: ne16 acquire twice without a commit")
        self.acquired = True
        ctx = self.m.ne16_configuring
        self.ctrl(f"ne16 acquire job {self.jobs}", self.t.ctrl_reg_read_cycles,
                  reads=(f"ne16 context {ctx}",))

    def write(self, w: prog.Ne16Write) -> None:
        if not self.acquired:
            self.acquire(w)
        reg = isa.BY_NAME[w.register]
        self.m.ne16_contexts[self.m.ne16_configuring][reg.index] = w.value
        self.writes.append(reg.name)

    def commit(self, c: prog.Ne16Commit) -> None:
        if not self.acquired:
            self.acquire(c)
        m, n, ctx = self.m, self.jobs, self.m.ne16_configuring
        try:
            job = Ne16Job(tuple(m.ne16_contexts[ctx]), n)
        except HwsimError as exc:
            raise ProgramError(f"{c.loc}: {exc}") from None
        self.jobs += 1
        self.acquired = False
        m.ne16_configuring = 1 - ctx
        op = self.ctrl(f"ne16 commit job {n}", self.t.ctrl_reg_write_cycles,
                       writes=(("commit job", n),))
        self.act(op, lambda: m.ne16_holding.__setitem__(ctx, True))
        _job_ops(self, job, ctx, c.loc)

    def status(self, s: prog.Ne16Status) -> None:
        m, args = self.m, {"status": 0}
        op = self.b.add("ctrl", self.t.ctrl_reg_read_cycles, label="ne16 status", tag=self.tag,
                        args=args)

        def action() -> None:
            args["status"] = sum(1 << (8 * c) for c, held in enumerate(m.ne16_holding) if held)
        self.act(op, action)

    def ne16_wait(self, w: prog.Ne16Wait) -> None:
        job = self.jobs - 1 if w.job is None else w.job
        if not 0 <= job < self.jobs:
            raise ProgramError(f"{w.loc}: ne16 wait {job}: no such job (committed: {self.jobs})")
        self.ctrl(f"ne16 wait job {job}", self.t.event_wakeup_cycles,
                  reads=(("ne16 job", job),))

    def kernel(self, k: prog.Kernel) -> None:
        m, t, n = self.m, self.t, self.kernels
        self.kernels += 1
        bound = kernels.bind(k, m.spaces)
        self.ctrl(f"launch {k.name}", t.kernel_launch_cycles, writes=(("launch", n),))
        cost = kernels.cost(bound, t)
        cores = t.cluster_cores
        op = self.b.add("cluster", cost.cycles, reads=(("launch", n),), writes=(("kernel", n),),
                        transfers=((self.b.port("l1.cores"), cost.nbytes),), macs=cost.macs,
                        stall=("l1 bank conflict", cost.conflicts),
                        traffic=("pay", "cores", {cores: math.ceil(cost.words / cores)}),
                        label=k.name, tag=self.tag, args={"kernel": k.name})
        if self.numerics:
            self.act(op, lambda: kernels.start(bound, m.spaces["l1"]))

    def barrier(self, b: prog.Barrier) -> None:
        reads = (("kernel", self.kernels - 1),) if self.kernels else ()
        self.ctrl("barrier", self.t.barrier_cycles, reads=reads)

    def layer_start(self, s: prog.LayerStart) -> None:
        self.ctrl("layer set-up", self.t.layer_setup_cycles)


# instruction -> _Run method (a class-level table: bound methods kept on the instance would make
# a reference cycle through the machine and its run)
HANDLERS = {prog.DmaCopy: _Run.dma, prog.DmaWait: _Run.dma_wait, prog.Ne16Acquire: _Run.acquire,
            prog.Ne16Write: _Run.write, prog.Ne16Commit: _Run.commit,
            prog.Ne16Status: _Run.status, prog.Ne16Wait: _Run.ne16_wait,
            prog.Kernel: _Run.kernel, prog.Barrier: _Run.barrier,
            prog.LayerStart: _Run.layer_start}


def _job_ops(run: _Run, job: Ne16Job, ctx: int, loc: Location) -> None:
    """The ops of one job (parameter ``ne16_timeline``): one per NE16 state, or one for the
    whole job. The first computes the job, the last writes its outputs. A job's states and
    their totals depend on its signature only: each distinct one is costed once per run."""
    m, t, b = run.m, run.t, run.b
    commit = []

    def compute() -> None:
        if run.numerics:
            try:
                commit.append(ne16_kernel.start(job, m.spaces["l1"], t.ne16_bias_add,
                                                t.ne16_rounding))
            except HwsimError as exc:
                raise ProgramError(f"{loc}: {exc}") from None

    def write_back() -> None:
        if commit:
            commit.pop()()
        m.ne16_holding[ctx] = False

    n = job.index
    reads = (("commit job", n),)
    writes = (("ne16 job", n), f"ne16 context {ctx}")
    port = b.port("l1.ne16")
    if t.ne16_timeline == "job":
        totals = run.totals.get(job.signature)
        if totals is None:
            totals = run.totals[job.signature] = job_totals(job, t)
        op = b.add("ne16", t.ne16_start_cycles + totals.cycles + t.ne16_end_cycles,
                   reads=reads, writes=writes, transfers=((port, totals.l1_bytes),),
                   macs=job.macs, traffic=("pay", "ne16", totals.accesses), label=f"job {n}",
                   tag=run.tag, args={"job": n})
        run.act(op, lambda: (compute(), write_back)[1])
        return
    states = run.states.get(job.signature)
    if states is None:
        states = run.states[job.signature] = job_states(job, t)
    mv_count = sum(s.name == "matrix-vector" for s in states)
    share, extra = divmod(job.macs, mv_count)
    last_index = len(states) - 1
    for i, state in enumerate(states):
        first, last = i == 0, i == last_index
        macs = share if state.name == "matrix-vector" else 0
        mv_count -= state.name == "matrix-vector"
        macs += extra if macs and mv_count == 0 else 0
        cycles = state.cycles + (t.ne16_start_cycles if first else 0) + (
            t.ne16_end_cycles if last else 0)
        op = b.add("ne16", cycles, reads=reads if first else (), writes=writes if last else (),
                   transfers=((port, state.l1_bytes),), macs=macs,
                   traffic=("pay", "ne16", {state.words_per_access: state.accesses}),
                   label=f"job {n} {state.name}", tag=run.tag, args={"job": n})
        if first or last:
            run.act(op, lambda first=first, last=last: (compute() if first else None,
                                                         write_back if last else None)[1])
