"""The GAP9 machine: memories, the cluster DMA, the NE16 and the cluster cores on the engine.

Units: ``ctrl`` (the cluster controller, which executes the program in order: it programs the
DMA and the NE16 and launches kernels, paying per register access), ``dma`` (decoupled, up to
``dma_channels`` transfers in flight), ``ne16`` (one op per state of each job, jobs in commit
order) and ``cluster`` (the 8 worker cores running one kernel at a time). Ports: ``l2``,
``mram`` and the L1 side of each master (``l1.dma``, ``l1.ne16``, ``l1.cores``); L1 bank
contention between the masters is priced by ``tcdm.Traffic`` and shows as ``l1 contention``
stalls, conflicts among the cores as ``l1 bank conflict`` stalls.

Consecutive job register writes run as one controller op of their summed cost (the same cycles
as one op each: they are back to back on the in-order controller); the op is attributed to the
instruction after them.

The NE16 job queue: two register contexts; a job's first register access acquires the context
its commit will use, waiting while both are pending (the job two commits earlier has not
ended); commit snapshots the context and queues the job. The job's first state reads its
operands; its last state writes the outputs; its end is the event ``ne16 wait`` sleeps on.

Not modelled: the fabric controller and uDMA (MRAM is reached through the cluster DMA), the
cores' instruction streams (kernels are costed, see ``kernels``), HWPE soft clear and IRQs.
"""

from __future__ import annotations

import math

from hwsim.errors import HwsimError, Location, ProgramError, TraceSyntaxError
from hwsim.isa import gap9 as prog
from hwsim.isa import ne16 as isa
from hwsim.memory.dma import Copy, Dma
from hwsim.memory.space import AddressSpace
from hwsim.targets.base import Machine
from hwsim.targets.gap9 import kernels
from hwsim.targets.gap9.ne16_datapath import run_job
from hwsim.targets.gap9.ne16_job import Ne16Job
from hwsim.targets.gap9.ne16_timing import job_states, job_totals
from hwsim.targets.gap9.params import PARAMS
from hwsim.targets.gap9.tcdm import Traffic
from hwsim.timing.engine import Engine, Op, Work

QUEUE = 1 << 16   # deep unit queues: the issue front end must never hold back the controller


class Gap9(Machine):
    name = "gap9"
    description = ("GreenWaves GAP9 cluster: 8 worker cores + controller, L1/L2/MRAM, cluster "
                   "DMA, NE16 neural engine")
    PARAMS = PARAMS

    def make_state(self) -> None:
        p = self.params
        self.spaces = {"l1": AddressSpace("l1", p.l1_size, p.l1_base),
                       "l2": AddressSpace("l2", p.l2_size, p.l2_base),
                       "mram": AddressSpace("mram", p.mram_size, p.mram_base, readonly=True)}
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
        return Copy(self.spaces[d.src], d.src_addr, self.spaces[d.dst], d.dst_addr, d.row_bytes,
                    d.rows, d.src_stride, d.dst_stride)

    # -- units -----------------------------------------------------------------------------------
    def build(self, engine: Engine) -> None:
        t = self.timing
        self.engine = engine
        ports = {"l2": engine.port("l2", t.l2_bytes_per_cycle, t.l2_latency_cycles),
                 "mram": engine.port("mram", t.mram_bytes_per_cycle, t.mram_latency_cycles),
                 "l1": engine.port("l1.dma", t.l1_dma_bytes_per_cycle, t.l1_latency_cycles)}
        self.ne16_port = engine.port("l1.ne16", t.ne16_port_bytes_per_cycle, t.l1_latency_cycles)
        self.cores_port = engine.port("l1.cores", t.cluster_cores * t.l1_word_bytes,
                                      t.l1_latency_cycles)
        self.ctrl = engine.unit("ctrl", queue_depth=QUEUE)
        self.dma = Dma(engine, "dma", ports, t.dma_channels, t.dma_setup_cycles, QUEUE)
        self.ne16 = engine.unit("ne16", QUEUE, peak_macs=t.ne16_products_per_cycle / 8)
        self.cluster = engine.unit("cluster", QUEUE, peak_macs=t.cluster_peak_macs_per_cycle)
        self.traffic = Traffic(t.l1_banks)

    def _ctrl(self, label: str, cycles: int, reads=(), writes=()) -> Op:
        return Op(self.ctrl, lambda: Work(cycles), label, tuple(reads), tuple(writes))

    # -- program -> ops --------------------------------------------------------------------------
    def ops(self, program: list):
        run = _Run(self)
        for instr in program:
            yield from run.step(instr)
        if run.writes:
            yield run.flush_writes()


class _Run:
    """Issue state of one run: transfer ids, jobs, kernels, the context being configured."""

    def __init__(self, machine: Gap9):
        self.m, self.t = machine, machine.timing
        self.transfers: list[int] = []     # ids not yet waited for
        self.dma_count = 0
        self.jobs = 0
        self.acquired = False
        self.kernels = 0
        self.writes: list[str] = []         # register writes not yet issued as an op

    def step(self, instr):
        if self.writes and type(instr) is not prog.Ne16Write:
            yield self.flush_writes()
        yield from HANDLERS[type(instr)](self, instr)

    def flush_writes(self) -> Op:
        names, self.writes = self.writes, []
        return self.m._ctrl(f"ne16 {' '.join(names)}",
                            len(names) * self.t.ctrl_reg_write_cycles)

    def dma(self, d: prog.DmaCopy):
        m, t, n = self.m, self.t, self.dma_count
        self.dma_count += 1
        self.transfers.append(n)
        writes = t.dma_writes_2d if d.rows > 1 else t.dma_writes_1d
        yield m._ctrl(f"dma program #{n}", writes * t.ctrl_reg_write_cycles,
                      writes=(f"dma program #{n}",))
        op = m.dma.op(m._copy(d), token=f"dma #{n}")
        op.reads = (f"dma program #{n}",)
        inner, src = op.execute, m.dma.ports[d.src]

        def execute() -> Work:
            # the transfer's L1 side runs at the rate of its slower end
            now = m.engine.env.now
            begin = max(now, src.free_at)
            nbytes = d.row_bytes * d.rows
            span = math.ceil(nbytes / min(src.width, t.l1_dma_bytes_per_cycle))
            m.traffic.record("dma", begin, span, nbytes / t.l1_word_bytes)
            return inner()
        op.execute = execute
        yield op

    def dma_wait(self, w: prog.DmaWait):
        ids = w.ids or tuple(self.transfers)
        for n in ids:
            if not 0 <= n < self.dma_count:
                raise ProgramError(f"{w.loc}: dma wait {n}: no such transfer (issued: "
                                   f"{self.dma_count})")
        self.transfers = [n for n in self.transfers if n not in ids]
        yield self.m._ctrl("dma wait", self.t.ctrl_reg_read_cycles,
                           reads=[f"dma #{n}" for n in ids])

    def acquire(self, instr):
        if self.acquired:
            raise ProgramError(f"{instr.loc}: ne16 acquire twice without a commit")
        self.acquired = True
        ctx = self.m.ne16_configuring
        yield self.m._ctrl(f"ne16 acquire job {self.jobs}", self.t.ctrl_reg_read_cycles,
                           reads=(f"ne16 context {ctx}",))

    def write(self, w: prog.Ne16Write):
        if not self.acquired:
            yield from self.acquire(w)
        reg = isa.BY_NAME[w.register]
        self.m.ne16_contexts[self.m.ne16_configuring][reg.index] = w.value
        self.writes.append(reg.name)

    def commit(self, c: prog.Ne16Commit):
        if not self.acquired:
            yield from self.acquire(c)
        m, n, ctx = self.m, self.jobs, self.m.ne16_configuring
        try:
            job = Ne16Job(tuple(m.ne16_contexts[ctx]), n)
        except HwsimError as exc:
            raise ProgramError(f"{c.loc}: {exc}") from None
        self.jobs += 1
        self.acquired = False
        m.ne16_configuring = 1 - ctx

        def execute() -> Work:
            m.ne16_holding[ctx] = True
            return Work(self.t.ctrl_reg_write_cycles)
        yield Op(m.ctrl, execute, f"ne16 commit job {n}", (), (f"commit job {n}",))
        yield from _job_ops(m, job, ctx, c.loc)

    def status(self, s: prog.Ne16Status):
        m = self.m
        op = Op(m.ctrl, None, "ne16 status", args={})

        def execute() -> Work:
            op.args["status"] = sum(1 << (8 * c) for c, held in enumerate(m.ne16_holding) if held)
            return Work(self.t.ctrl_reg_read_cycles)
        op.execute = execute
        yield op

    def ne16_wait(self, w: prog.Ne16Wait):
        job = self.jobs - 1 if w.job is None else w.job
        if not 0 <= job < self.jobs:
            raise ProgramError(f"{w.loc}: ne16 wait {job}: no such job (committed: {self.jobs})")
        yield self.m._ctrl(f"ne16 wait job {job}", self.t.event_wakeup_cycles,
                           reads=(f"ne16 job {job}",))

    def kernel(self, k: prog.Kernel):
        m, n = self.m, self.kernels
        self.kernels += 1
        bound = kernels.bind(k, m.spaces)
        yield m._ctrl(f"launch {k.name}", self.t.kernel_launch_cycles,
                      writes=(f"launch #{n}",))
        yield Op(m.cluster, lambda: kernels.execute(bound, m), f"{k.name}",
                 (f"launch #{n}",), (f"kernel #{n}",), args={"kernel": k.name})

    def barrier(self, b: prog.Barrier):
        reads = (f"kernel #{self.kernels - 1}",) if self.kernels else ()
        yield self.m._ctrl("barrier", self.t.barrier_cycles, reads=reads)


# instruction -> _Run method (a class-level table: bound methods kept on the instance would make
# a reference cycle through the machine and its run)
HANDLERS = {prog.DmaCopy: _Run.dma, prog.DmaWait: _Run.dma_wait, prog.Ne16Acquire: _Run.acquire,
            prog.Ne16Write: _Run.write, prog.Ne16Commit: _Run.commit,
            prog.Ne16Status: _Run.status, prog.Ne16Wait: _Run.ne16_wait,
            prog.Kernel: _Run.kernel, prog.Barrier: _Run.barrier}


def _job_ops(m: Gap9, job: Ne16Job, ctx: int, loc: Location):
    """The ops of one job (parameter ``ne16_timeline``): one per NE16 state, or one for the
    whole job. The first computes the job, the last writes its outputs."""
    t = m.timing
    result = {}

    def compute() -> None:
        if not m.engine.numerics:
            return
        try:
            result["writes"] = run_job(job, m.spaces["l1"], t.ne16_bias_add, t.ne16_rounding)
        except HwsimError as exc:
            raise ProgramError(f"{loc}: {exc}") from None

    def write_back() -> None:
        if "writes" in result:
            offsets, data = result["writes"]
            m.spaces["l1"].data[offsets] = data
        m.ne16_holding[ctx] = False

    reads = (f"commit job {job.index}",)
    writes = (f"ne16 job {job.index}", f"ne16 context {ctx}")
    if t.ne16_timeline == "job":
        yield _whole_job(m, job, compute, write_back, reads, writes)
    else:
        yield from _state_ops(m, job, compute, write_back, reads, writes)


def _whole_job(m: Gap9, job: Ne16Job, compute, write_back, reads, writes) -> Op:
    t = m.timing
    totals = job_totals(job, t)
    cycles = t.ne16_start_cycles + totals.cycles + t.ne16_end_cycles

    def execute() -> Work:
        compute()
        stall = m.traffic.conflicts_mixed("ne16", m.engine.env.now, cycles, totals.accesses)
        return Work(cycles, transfers=((m.ne16_port, totals.l1_bytes),), macs=job.macs,
                    stalls={"l1 contention": stall} if stall else None, commit=write_back)
    return Op(m.ne16, execute, f"job {job.index}", reads, writes, args={"job": job.index})


def _state_ops(m: Gap9, job: Ne16Job, compute, write_back, reads, writes):
    """One op per NE16 state. The job's MACs are spread over its matrix-vector states; the
    start latency is added to the first state and the end latency to the last."""
    t = m.timing
    states = job_states(job, t)
    mv_count = sum(s.name == "matrix-vector" for s in states)
    share, extra = divmod(job.macs, mv_count)
    start_cycles, end_cycles = t.ne16_start_cycles, t.ne16_end_cycles
    last_index = len(states) - 1
    for n, state in enumerate(states):
        first, last = n == 0, n == last_index
        macs = share if state.name == "matrix-vector" else 0
        mv_count -= state.name == "matrix-vector"
        macs += extra if macs and mv_count == 0 else 0
        cycles = state.cycles + (start_cycles if first else 0) + (end_cycles if last else 0)

        def execute(state=state, first=first, last=last, macs=macs, cycles=cycles) -> Work:
            if first:
                compute()
            stall = m.traffic.conflicts("ne16", m.engine.env.now, cycles, state.accesses,
                                        state.words_per_access)
            return Work(cycles, transfers=((m.ne16_port, state.l1_bytes),), macs=macs,
                        stalls={"l1 contention": stall} if stall else None,
                        commit=write_back if last else None)
        yield Op(m.ne16, execute, f"job {job.index} {state.name}", reads if first else (),
                 writes if last else (), args={"job": job.index})
