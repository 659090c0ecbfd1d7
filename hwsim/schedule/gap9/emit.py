"""Writing a GAP9 program: instructions tagged with their layer, and the double-buffered loop.

``Emitter`` appends controller instructions (``hwsim.isa.gap9``) and remembers the layer of
each. It numbers DMA transfers and NE16 jobs as the machine does, and writes only the NE16 job
registers whose value differs from what the job's register context already holds: the two
contexts keep their registers between jobs (hwpe-ctrl ``rtl/hwpe_ctrl_regfile.sv``: job registers
are latches cleared only by a soft clear or at start-up; the machine model keeps them likewise),
so consecutive jobs of a layer mostly rewrite pointers and the subtile words.

``run_steps`` is the loop of one tiled layer. Each step reads regions of its inputs and writes a
region of its output; an operand kept in L1 is used in place, one in L2 goes through two L1 slots
by DMA, and a layer's weights come from MRAM whole or as k-blocks through two slots. The DMA for
step i+1 is issued before step i computes, and step i's output is stored while step i+1
computes (double buffering); the controller waits for a transfer only right before the compute
that needs it, and for a store only before its slot is written again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from hwsim.errors import Location
from hwsim.isa import gap9 as isa
from hwsim.isa import ne16

L1 = "l1"
_NAMES = [reg.name for reg in ne16.REGISTERS]      # in register index order
HERE = Location()       # the location of every lowered instruction (none in a file; immutable)


class Emitter:
    def __init__(self):
        self.program: list = []
        self.layer_of: list[int] = []
        self.layer = -1
        self.dmas = 0
        self.jobs = 0
        self.contexts = [[0] * ne16.NUM_REGISTERS for _ in range(ne16.CONTEXTS)]
        self.touched: dict[int, list[int]] = {}    # layer -> instructions that write memory

    def _add(self, instr, layer: int | None = None, writes: bool = False) -> int:
        layer = self.layer if layer is None else layer
        self.program.append(instr)
        self.layer_of.append(layer)
        if writes:
            self.touched.setdefault(layer, []).append(len(self.program) - 1)
        return len(self.program) - 1

    def dma(self, src: tuple, dst: tuple, nbytes: int, layer: int | None = None) -> int:
        """Copy ``nbytes`` from ``src`` (space, addr) to ``dst``; returns the transfer id."""
        self._add(isa.DmaCopy(src[0], src[1], dst[0], dst[1], nbytes, loc=HERE), layer,
                  writes=True)
        self.dmas += 1
        return self.dmas - 1

    def wait_dma(self, ids) -> None:
        ids = tuple(sorted(set(ids)))
        if ids:
            self._add(isa.DmaWait(ids, HERE))

    def job(self, registers: dict) -> int:
        """Queue an NE16 job, writing the registers its context does not already hold."""
        context = self.contexts[self.jobs % ne16.CONTEXTS]
        for index, name in enumerate(_NAMES):
            value = registers.get(name, 0)
            if value == context[index]:
                continue
            if not 0 <= value < 1 << 32:
                value = ne16.word(value)        # two's complement, or the error
                if value == context[index]:
                    continue
            context[index] = value
            self._add(isa.Ne16Write(name, value, HERE))
        self._add(isa.Ne16Commit(HERE), writes=True)
        self.jobs += 1
        return self.jobs - 1

    def wait_job(self, job: int) -> None:
        self._add(isa.Ne16Wait(job, HERE))

    def kernel(self, name: str, args: dict) -> None:
        self._add(isa.Kernel(name, args, HERE), writes=True)

    def barrier(self) -> None:
        self._add(isa.Barrier(HERE))

    def layer_start(self) -> None:
        self._add(isa.LayerStart(HERE))


@dataclass
class Operand:
    """A tensor a layer reads or writes: in L1 at ``addr`` (``slots`` empty), or in ``space``
    at ``addr`` and moved through two L1 ``slots``."""

    space: str
    addr: int
    slots: tuple = ()
    output: bool = False


@dataclass
class Step:
    """One tile: byte ``regions`` (offset, size) of its operands, the weight ``block`` it uses,
    and anything the layer's compute needs (``data``)."""

    regions: dict
    block: int = 0
    data: dict = field(default_factory=dict)


@dataclass
class Blocks:
    """A layer's parameters in MRAM (or staged in L2: ``space``): ``consts`` (addr, size, L1
    addr) load once (or were prefetched: ``ready`` holds those transfer ids); k-blocks of
    weights (``mram``: (addr, size) each) go through two L1 ``slots``."""

    consts: tuple = ()
    ready: tuple = ()
    mram: list = field(default_factory=list)
    slots: tuple = ()
    space: str = "mram"


def run_steps(em: Emitter, steps: list[Step], operands: dict[str, Operand], blocks: Blocks,
              compute: Callable[[Step, dict], None], early: Callable[[], None] | None = None) \
        -> None:
    """Emit a tiled layer: loads one step ahead, compute, stores behind (module docstring).
    ``compute(step, addr)`` emits the step's work, ending with a wait for it; ``addr`` gives
    the L1 address of each operand's region, the constants (``"@consts"``) and the weight
    block (``"@block"``). ``early`` runs once the first loads are issued (to prefetch the next
    layer's constants behind them)."""
    moves, where = _plan(steps, operands, blocks)
    issued: dict[int, list[int]] = {}

    def issue(i: int) -> None:
        issued[i] = [em.dma(src, dst, size) for src, dst, size in moves[i]]

    if steps:
        issue(0)
    if early is not None:
        early()
    store_wait: dict[int, list[int]] = {}          # L1 slot -> pending store ids
    for i, step in enumerate(steps):
        if i + 1 < len(steps):
            issue(i + 1)
        addr = where[i]
        waits = issued.pop(i) + (list(blocks.ready) if i == 0 else [])
        outputs = [n for n, op in operands.items() if op.output and op.slots and n in addr]
        for name in outputs:
            waits += store_wait.pop(addr[name], [])
        em.wait_dma(waits)
        compute(step, addr)
        for name in outputs:
            region = step.regions[name]
            later = steps[i + 1].regions.get(name) if i + 1 < len(steps) else None
            if later != region:
                op = operands[name]
                store_wait[addr[name]] = [em.dma((L1, addr[name]), (op.space,
                                                                  op.addr + region[0]),
                                                 region[1])]
    em.wait_dma([i for ids in store_wait.values() for i in ids])


def _plan(steps: list[Step], operands: dict, blocks: Blocks) -> tuple[list, list]:
    """Per step: the transfers to issue for it ((space, addr), (l1, slot), size), and the L1
    address of each operand region and of the weight block."""
    moves, where = [], []
    last: dict = {}
    uses: dict = {}

    def slot(name: str, slots: tuple, region) -> tuple[int, bool]:
        """The slot for ``region`` of ``name`` and whether it is new (a fresh slot)."""
        if last.get(name, (None,))[0] == region:
            return last[name][1], False
        uses[name] = uses.get(name, -1) + 1
        last[name] = (region, slots[uses[name] % len(slots)])
        return last[name][1], True

    for i, step in enumerate(steps):
        out, addr = [], {}
        for name, op in operands.items():
            region = step.regions.get(name)
            if region is None:
                continue
            if not op.slots:
                addr[name] = op.addr + region[0]
                continue
            addr[name], fresh = slot(name, op.slots, region)
            if fresh and not op.output:
                out.append(((op.space, op.addr + region[0]), (L1, addr[name]), region[1]))
        if blocks.consts:
            mram, size, addr["@consts"] = blocks.consts
            if i == 0 and not blocks.ready:
                out.append(((blocks.space, mram), (L1, addr["@consts"]), size))
        if blocks.slots:
            addr["@block"], fresh = slot("@block", blocks.slots, step.block)
            if fresh:
                mram, size = blocks.mram[step.block]
                out.append(((blocks.space, mram), (L1, addr["@block"]), size))
        moves.append(out)
        where.append(addr)
    return moves, where
