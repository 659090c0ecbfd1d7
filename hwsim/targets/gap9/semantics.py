"""What each GAP9 instruction does and what it occupies: one handler per instruction type.

``Run`` builds one run's ops in program order (``HANDLERS`` maps an instruction's type to its
handler): each handler adds the instruction's ops to the op table, with the resources they read
and write and what they cost, and the actions that change the state (``state.Gap9State``, the
memories) when the ops run.

Consecutive job register writes run as one controller op of their summed cost (the same cycles
as one op each: they are back to back on the in-order controller); the op is attributed to the
instruction after them.

The NE16 job queue: two register contexts; a job's first register access acquires the context
its commit will use, waiting while both are pending (the job two commits earlier has not
ended); commit snapshots the context and queues the job. The job's first state reads its
operands; its last state writes the outputs; its end is the event ``ne16 wait`` sleeps on.
"""

from __future__ import annotations

import math

from hwsim.errors import HwsimError, Location, ProgramError
from hwsim.isa import gap9 as prog
from hwsim.isa import ne16 as isa
from hwsim.targets.gap9 import cluster_kernels
from hwsim.targets.gap9.ne16 import kernel as ne16_kernel
from hwsim.targets.gap9.ne16.job import Ne16Job
from hwsim.targets.gap9.ne16.timing import job_states, job_totals
from hwsim.timing.optable import OpBuilder


class _Params:
    """A run's parameters, each read from its ParamSet once (a ParamSet read is slow: it is
    recorded), then a plain attribute."""

    def __init__(self, values):
        self._values = values

    def __getattr__(self, name: str):
        value = getattr(self._values, name)
        setattr(self, name, value)
        return value


class Run:
    """Building one run's ops: transfer ids, jobs, kernels, the context being configured."""

    def __init__(self, machine, b: OpBuilder, numerics: bool, actions: dict | None):
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
            m.udma.add(self.b, m.transfer(d), ("dma", n), self.tag, actions,
                       reads=(("dma program", n),))
            return
        # the transfer's L1 side runs at the rate of its slower end
        rate = min(self.b.ports[m.dma.ports[d.src]].width, t.l1_dma_bytes_per_cycle)
        nbytes = d.row_bytes * d.rows
        m.dma.add(self.b, m.transfer(d), ("dma", n), self.tag, actions,
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
        ctx = self.m.state.configuring
        self.ctrl(f"ne16 acquire job {self.jobs}", self.t.ctrl_reg_read_cycles,
                  reads=(f"ne16 context {ctx}",))

    def write(self, w: prog.Ne16Write) -> None:
        if not self.acquired:
            self.acquire(w)
        reg = isa.BY_NAME[w.register]
        self.m.state.contexts[self.m.state.configuring][reg.index] = w.value
        self.writes.append(reg.name)

    def commit(self, c: prog.Ne16Commit) -> None:
        if not self.acquired:
            self.acquire(c)
        m, n, ctx = self.m, self.jobs, self.m.state.configuring
        try:
            job = Ne16Job(tuple(m.state.contexts[ctx]), n)
        except HwsimError as exc:
            raise ProgramError(f"{c.loc}: {exc}") from None
        self.jobs += 1
        self.acquired = False
        m.state.configuring = 1 - ctx
        op = self.ctrl(f"ne16 commit job {n}", self.t.ctrl_reg_write_cycles,
                       writes=(("commit job", n),))
        self.act(op, lambda: m.state.holding.__setitem__(ctx, True))
        _job_ops(self, job, ctx, c.loc)

    def status(self, s: prog.Ne16Status) -> None:
        m, args = self.m, {"status": 0}
        op = self.b.add("ctrl", self.t.ctrl_reg_read_cycles, label="ne16 status", tag=self.tag,
                        args=args)

        def action() -> None:
            args["status"] = sum(1 << (8 * c) for c, held in enumerate(m.state.holding) if held)
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
        bound = cluster_kernels.bind(k, m.spaces)
        self.ctrl(f"launch {k.name}", t.kernel_launch_cycles, writes=(("launch", n),))
        cost = cluster_kernels.cost(bound, t)
        cores = t.cluster_cores
        op = self.b.add("cluster", cost.cycles, reads=(("launch", n),), writes=(("kernel", n),),
                        transfers=((self.b.port("l1.cores"), cost.nbytes),), macs=cost.macs,
                        stall=("l1 bank conflict", cost.conflicts),
                        traffic=("pay", "cores", {cores: math.ceil(cost.words / cores)}),
                        label=k.name, tag=self.tag, args={"kernel": k.name})
        if self.numerics:
            self.act(op, lambda: cluster_kernels.start(bound, m.spaces["l1"]))

    def barrier(self, b: prog.Barrier) -> None:
        reads = (("kernel", self.kernels - 1),) if self.kernels else ()
        self.ctrl("barrier", self.t.barrier_cycles, reads=reads)

    def layer_start(self, s: prog.LayerStart) -> None:
        self.ctrl("layer set-up", self.t.layer_setup_cycles)


# instruction -> Run method (a class-level table: bound methods kept on the instance would make
# a reference cycle through the machine and its run)
HANDLERS = {prog.DmaCopy: Run.dma, prog.DmaWait: Run.dma_wait, prog.Ne16Acquire: Run.acquire,
            prog.Ne16Write: Run.write, prog.Ne16Commit: Run.commit,
            prog.Ne16Status: Run.status, prog.Ne16Wait: Run.ne16_wait,
            prog.Kernel: Run.kernel, prog.Barrier: Run.barrier,
            prog.LayerStart: Run.layer_start}


def _job_ops(run: Run, job: Ne16Job, ctx: int, loc: Location) -> None:
    """The ops of one job (parameter ``ne16_timeline``): one per NE16 state, or one for the
    whole job. The first computes the job, the last writes its outputs. A job's states and
    their totals depend on its signature only: each distinct one is costed once per run."""
    m, t, b, numerics = run.m, run.t, run.b, run.numerics
    commit = []

    def compute() -> None:     # referring to ``run`` would make a cycle through its actions
        if numerics:
            try:
                commit.append(ne16_kernel.start(job, m.spaces["l1"], t.ne16_bias_add,
                                                t.ne16_rounding))
            except HwsimError as exc:
                raise ProgramError(f"{loc}: {exc}") from None

    def write_back() -> None:
        if commit:
            commit.pop()()
        m.state.holding[ctx] = False

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
