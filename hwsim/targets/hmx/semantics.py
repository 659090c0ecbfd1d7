"""The semantics of the HMX machine's instructions (V81 HMX PRM, chapters 2-5): for each kind,
a builder (``BUILDERS``) that turns one checked instruction into its op on the timeline, with
what it reads, writes and occupies, and the action that changes the state when the op runs.

Multiplies (activation plain, deep with dC + 1 contiguous croutons, single with the Y offset
into a second crouton dY away; channel start/stop; weight negate; weight deep writing both
accumulators; too few weights read as zeros, too many cost flush cycles), bias load/store with
their index, the convert with bias select, rnd, ovf, feedback and retain vs clear-and-swap, the
write of the convert state with its spatial mask, clear accumulators and USR writes; HVX
operations (``hvx.py``) and DMA between DDR and VTCM. A builder takes the machine
(``machine.HmxMachine``: its state, memories and costs), the op rows being built (``Rows``)
and the instruction (``Emit``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from hwsim.isa.hmx import BIAS_SET_BYTES, CROUTON_BYTES, VECTOR_BYTES
from hwsim.targets.hmx import datapath, layouts, numerics
from hwsim.targets.hmx.state import CELLS
from hwsim.timing.optable import DEP_READ, DEP_WRITE, Chunk, OpBuilder


class Rows:
    """The ops of a program as columns (an ``OpBuilder`` chunk), so that an op costs a few list
    appends: its resources are interned by the builder in the order ``add`` would (reads, then
    writes), a VTCM block range's through a per-block table rather than one call per block. Ops
    that go through ``OpBuilder.add`` (the DMA's) come after a ``flush``."""

    def __init__(self, b: OpBuilder, base: int, blocks: int):
        self.b, self.base = b, base
        self.resource = b.resource
        self._block_ids = [-1] * blocks      # VTCM block -> resource id (-1: not yet)
        self._waited_key, self._waited = None, []
        self._named: dict = {}
        self._labels: dict = {}
        self.mpy, self.cvt, self.hvx, self.dma = (b.unit_index[u]
                                                  for u in ("mpy", "cvt", "hvx", "dma"))
        self._columns()

    def _columns(self) -> None:
        self.unit, self.cycles, self.macs, self.tag, self.label = [], [], [], [], []
        self.reads, self.writes, self.dep_res = [], [], []
        self.xfer_count, self.xfer_port, self.xfer_bytes = [], [], []

    def ids(self, keys) -> list:
        resource = self.resource
        return [resource(k) for k in keys]

    def named(self, keys: tuple) -> list:
        """``ids`` of a constant tuple of keys, worked out once (callers do not change it)."""
        found = self._named.get(keys)
        if found is None:
            found = self._named[keys] = self.ids(keys)
        return found

    def waited(self, issue) -> list:
        """The ids of ``issue.waited()`` (the same list until the fence or the wait changes:
        callers do not change it)."""
        key = (issue.fence, issue.sync)
        if key != self._waited_key:
            self._waited_key, self._waited = key, self.ids(issue.waited())
        return self._waited

    def vtcm(self, spans) -> list:
        """The resource ids of the VTCM blocks of each (address, bytes) span, in order."""
        base, out = self.base, []
        for a, n in spans:
            out += self.block_ids((a - base) // CROUTON_BYTES, (a + n - 1 - base) // CROUTON_BYTES)
        return out

    def blocks(self, ranges) -> list:
        """The resource ids of the VTCM blocks ``first..last`` of each range (indices from
        the VTCM's base), in order."""
        out = []
        for first, last in ranges:
            out += self.block_ids(first, last)
        return out

    def block_ids(self, first: int, last: int) -> list:
        """The resource ids of the VTCM blocks ``first..last`` (each interned when first
        seen)."""
        ids = self._block_ids
        part = ids[first:last + 1]
        if -1 in part:
            for j in range(first, last + 1):
                if ids[j] < 0:
                    ids[j] = self.resource(("vtcm", j))
            part = ids[first:last + 1]
        return part

    def labelled(self, key: tuple, text) -> int:
        """The label id of ``key``, its text ``text(*key)`` made once."""
        found = self._labels.get(key)
        if found is None:
            found = self._labels[key] = self.b.label(text(*key))
        return found

    def add(self, unit: int, cycles: int, reads: list, writes: list, tag: int, label: int,
            port: int = -1, nbytes: int = 0, macs: int = 0) -> int:
        """Append an op on unit ``unit`` (its index) reading and writing these resource ids,
        with label id ``label``, moving ``nbytes`` through ``port`` (-1: none); returns its
        index."""
        op = self.b.count + len(self.unit)
        self.unit.append(unit)
        self.cycles.append(cycles)
        self.macs.append(macs)
        self.tag.append(tag)
        self.label.append(label)
        self.reads.append(len(reads))
        self.writes.append(len(writes))
        self.dep_res += reads
        self.dep_res += writes
        if port < 0:
            self.xfer_count.append(0)
        else:
            self.xfer_count.append(1)
            self.xfer_port.append(port)
            self.xfer_bytes.append(nbytes)
        return op

    def flush(self) -> None:
        """Hand the ops so far to the builder (before it appends ops of its own)."""
        if self.unit:
            counts = np.array([self.reads, self.writes], np.int64)
            modes = np.repeat(np.tile(np.array([DEP_READ, DEP_WRITE], np.int8), len(self.unit)),
                              counts.T.reshape(-1))
            self.b.extend(Chunk(
                np.asarray(self.unit, np.int32), np.asarray(self.cycles, np.int64),
                macs=np.asarray(self.macs, np.int64), tag=np.asarray(self.tag, np.int64),
                label=np.asarray(self.label, np.int32),
                dep_count=counts.sum(axis=0), dep_res=np.asarray(self.dep_res, np.int32),
                dep_mode=modes,
                xfer_count=np.asarray(self.xfer_count, np.int64),
                xfer_port=np.asarray(self.xfer_port, np.int32),
                xfer_bytes=np.asarray(self.xfer_bytes, np.int64)))
            self._columns()


class Issue:
    """What the op stream knows in program order: the primary accumulator, the DMA transfers
    not yet waited for, the latest wait every later op depends on, and the fence that the HMX
    and HVX ops since the last ``dma_fence()`` are read by."""

    def __init__(self, primary: int):
        self.primary = primary
        self.dma_tokens: list = []
        self.sync = None
        self.waits = 0
        self.fence = ("dma_fence", 0)

    def waited(self) -> tuple:
        """What every HMX and HVX op reads: the fence, and the last DMA wait."""
        return (self.fence,) if self.sync is None else (self.fence, self.sync)


@dataclass
class Emit:
    """One instruction being turned into its op: its index (the op's tag), the checked step,
    the issue state, and where its action goes (None: no actions wanted). The machine reuses
    one for every instruction: a builder reads it and does not keep it (in an action)."""

    index: int
    step: Any               # machine.CheckedItem
    issue: Issue
    actions: dict | None

    def act(self, op: int, action) -> None:
        if self.actions is not None and action is not None:
            self.actions[op] = action


_SHAPES = {"act": "", "act_deep": " deep", "act_single": " single"}


_ACCS = {(0,): (("acc", 0),), (1,): (("acc", 1),), (0, 1): (("acc", 0), ("acc", 1)),
         (1, 0): (("acc", 1), ("acc", 0))}  # the accumulator resources of the targets


def _multiply(m, rows: Rows, e: Emit) -> None:
    plan, state, vtcm, issue = e.step.plan, m.state, m.spaces["vtcm"], e.issue
    primary = issue.primary
    targets = (primary, 1 - primary) if plan.deep_weights else (primary,)
    cycles = m.cycles("mpy_setup_cycles") + m.cycles("mpy_cycles_per_vector", plan.needed)
    cycles += m.cycles("mpy_flush_cycles_per_vector", max(0, plan.given - plan.needed))
    nbytes = plan.channels * CELLS * 2 + plan.given * VECTOR_BYTES  # activations + weights

    def action():
        datapath.multiply(vtcm, state, plan, targets, m.acc_format, m.acc_round_group,
                          m.buffers)

        def commit():
            for index in targets:
                state.acc[index] = m.buffers.acc[index]
        return commit

    accs = rows.named(_ACCS[targets])
    label = rows.labelled((e.step.item.act.kind, plan.deep_weights, plan.channels, primary),
                          _multiply_label)
    reads = accs + rows.blocks(plan.blocks) + rows.named(("usr",)) + rows.waited(issue)
    op = rows.add(rows.mpy, cycles, reads, accs, e.index, label, m.hmx_port, nbytes,
                  plan.channels * CELLS * CELLS * len(targets))
    e.act(op, action if m.numerics else None)


def _multiply_label(kind: str, deep: bool, channels: int, primary: int) -> str:
    return f"mpy{_SHAPES[kind]}{' 64f' if deep else ''} k={channels} acc{primary}"


def _convert(m, rows: Rows, e: Emit) -> None:
    f, state, issue = e.step.item.fields, m.state, e.issue
    index, sel = issue.primary, f["bias_sel"]
    clear = f["acc"] == 0
    if clear:
        issue.primary = 1 - index
    ebits, mbits = m.acc_format

    def swap():
        if clear:
            state.acc[index] = 0
            state.primary = 1 - index

    def action():
        if not m.numerics:
            return swap
        bias = state.bias_fields(sel)
        numerics.convert(state.acc[index], bias["input_bias"], bias["shape"], bias["scale"],
                         bias["output_bias"], state.cvt, m.cvt_out, m.shapes, f["fb_dest"],
                         f["fb_op"], f["rnd"], f["ovf"], state.usr_field("infnan_propagate"),
                         state.usr_field("nan_propagate"),
                         ebits, mbits)

        def commit():
            state.cvt[...] = m.cvt_out
            swap()
        return commit

    reads = rows.named((("acc", index), ("bias", sel), "usr", "cvt")) + rows.waited(issue)
    writes = rows.named(("cvt", ("acc", index)) if clear else ("cvt",))
    label = rows.labelled((index, sel, clear), _convert_label)
    op = rows.add(rows.cvt, m.cycles("cvt_cycles"), reads, writes, e.index, label)
    e.act(op, action)


def _convert_label(index: int, sel: int, clear: bool) -> str:
    return f"cvt acc{index} bias{sel}" + (" clear+swap" if clear else " retain")


def _write_convert(m, rows: Rows, e: Emit) -> None:
    addr, state, vtcm = e.step.item.fields["address"], m.state, m.spaces["vtcm"]

    def action():
        data = datapath.write_convert(state)
        return lambda: vtcm.store(addr, data)
    op = rows.add(rows.cvt, m.cycles("cvt_write_cycles"),
                  rows.named(("cvt",)) + rows.waited(e.issue),
                  rows.vtcm(((addr, CROUTON_BYTES),)), e.index,
                  rows.b.label(f"write cvt -> {addr:#x}"), m.hmx_port, CROUTON_BYTES)
    e.act(op, action if m.numerics else None)


def _bias(m, rows: Rows, e: Emit) -> None:
    f, state, vtcm = e.step.item.fields, m.state, m.spaces["vtcm"]
    addr, index = f["address"], f["index"]
    load = e.step.item.kind == "bias_load"

    def action():
        if load:
            words = layouts.unpack_bias_words(vtcm.view(addr, BIAS_SET_BYTES))
            return lambda: state.set_bias(index, words)
        data = layouts.pack_bias_words(state.bias[index])
        return lambda: vtcm.store(addr, data)

    label = rows.b.label(f"bias {'load' if load else 'store'} {addr:#x} [{index}]")
    if load:  # resources interned in the order of reads, then writes
        reads = rows.vtcm(((addr, BIAS_SET_BYTES),))
        reads += rows.waited(e.issue)
        writes = rows.named((("bias", index),))
    else:
        reads = rows.named((("bias", index),)) + rows.waited(e.issue)
        writes = rows.vtcm(((addr, BIAS_SET_BYTES),))
    op = rows.add(rows.cvt, m.cycles("bias_cycles"), reads, writes, e.index, label,
                  m.hmx_port, BIAS_SET_BYTES)
    e.act(op, action if m.numerics else None)


def _clear(m, rows: Rows, e: Emit) -> None:
    op = rows.add(rows.mpy, m.cycles("clracc_cycles"), rows.waited(e.issue),
                  rows.named((("acc", 0), ("acc", 1))), e.index, rows.b.label("clear acc"))
    e.act(op, lambda: lambda: m.state.acc.fill(0))


def _usr(m, rows: Rows, e: Emit) -> None:
    value = e.step.plan
    op = rows.add(rows.cvt, m.cycles("usr_cycles"), rows.waited(e.issue),
                  rows.named(("usr",)), e.index, rows.b.label(f"USR = {value:#x}"))
    e.act(op, lambda: lambda: setattr(m.state, "usr", value))


def _hvx(m, rows: Rows, e: Emit) -> None:
    plan, vtcm = e.step.plan, m.spaces["vtcm"]
    reads = rows.vtcm(plan.reads) + rows.waited(e.issue)
    writes = rows.vtcm(plan.writes)
    label = rows.labelled((e.step.item.spec.name, plan.vectors), _hvx_label)
    op = rows.add(rows.hvx, m.cycles(plan.cost, plan.vectors), reads, writes, e.index, label,
                  m.hvx_port, plan.moved)
    e.act(op, (lambda: plan.run(vtcm)) if m.numerics else None)


def _hvx_label(name: str, vectors: int) -> str:
    return f"{name} {vectors}v"


def _dma(m, rows: Rows, e: Emit) -> None:
    copy, issue = e.step.plan, e.issue
    token = ("dma", len(issue.dma_tokens), issue.waits)
    issue.dma_tokens.append(token)
    reads = ()
    if copy.src.name == "vtcm":  # the thread sees its earlier HMX/HVX stores before it starts
        last = copy.src_addr + (copy.rows - 1) * copy.src_stride
        reads = m.blocks(min(copy.src_addr, last), abs(last - copy.src_addr) + copy.row_bytes)
    rows.flush()
    m.dma.add(rows.b, copy, token, e.index, e.actions if m.numerics else None, reads=reads)


def _dma_wait(m, rows: Rows, e: Emit) -> None:
    issue = e.issue
    issue.waits += 1
    tokens, issue.dma_tokens = tuple(issue.dma_tokens), []
    issue.sync = ("dma_wait", issue.waits)
    rows.add(rows.dma, 0, rows.ids(tokens), rows.ids((issue.sync,)), e.index,
             rows.b.label("dma_wait"))


def _dma_fence(m, rows: Rows, e: Emit) -> None:
    # every HMX and HVX op since the last fence reads ``issue.fence``: writing it waits (WAR) for
    # them to start, i.e. to have read their operands; later DMAs queue behind it on the unit
    fence = e.issue.fence
    e.issue.fence = ("dma_fence", fence[1] + 1)
    rows.add(rows.dma, 0, [], rows.ids((fence,)), e.index, rows.b.label("dma_fence"))


BUILDERS: dict[str, Callable] = {
    "mpy": _multiply, "cvt": _convert, "cvt_write": _write_convert, "bias_load": _bias,
    "bias_store": _bias, "clracc": _clear, "usr": _usr, "hvx": _hvx, "dma": _dma,
    "dma_wait": _dma_wait, "dma_fence": _dma_fence,
}
