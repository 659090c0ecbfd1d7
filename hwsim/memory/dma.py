"""A DMA engine: 1-D and 2-D strided copies between address spaces, at simulated time.

The engine is a decoupled unit (``UnitSpec.in_flight`` = its channels): a transfer occupies it
for ``setup_cycles`` (programming the descriptor), then moves through the source and destination
ports at their bandwidth and latency while the next transfer is set up. The source is read when
the transfer starts and the destination written when its last byte lands, so a program that
reads the destination before waiting on the transfer sees the old bytes. Timing-only runs move
no bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from hwsim.errors import MemoryFault
from hwsim.memory.space import AddressSpace
from hwsim.timing.optable import OpBuilder


@dataclass(slots=True)
class Copy:
    """``rows`` rows of ``row_bytes``; row ``i`` at ``src + i*src_stride`` ->
    ``dst + i*dst_stride``. Made once per instruction that moves data (not frozen: a frozen
    dataclass costs four times as much to make)."""

    src: AddressSpace
    src_addr: int
    dst: AddressSpace
    dst_addr: int
    row_bytes: int
    rows: int = 1
    src_stride: int = 0
    dst_stride: int = 0

    @property
    def nbytes(self) -> int:
        return self.row_bytes * self.rows

    def check(self) -> None:
        """Fault before anything moves if any row falls outside its space."""
        if self.row_bytes <= 0 or self.rows <= 0:
            raise MemoryFault(self.src.name, self.src_addr, self.nbytes, "empty transfer")
        for space, addr, stride in ((self.src, self.src_addr, self.src_stride),
                                    (self.dst, self.dst_addr, self.dst_stride)):
            last = addr + (self.rows - 1) * stride
            space.offset(min(addr, last), 0)
            space.offset(max(addr, last), self.row_bytes)
        if self.dst.readonly:
            raise MemoryFault(self.dst.name, self.dst_addr, self.nbytes, "space is read-only")

    def gather(self) -> np.ndarray:
        """The source rows, one after the other (a copy)."""
        if self.rows == 1:
            return self.src.read(self.src_addr, self.row_bytes)
        out = np.empty(self.nbytes, dtype=np.uint8)
        _gather(self.src.data, self.src_addr - self.src.base, self.src_stride, self.rows,
                self.row_bytes, out)
        return out

    def start(self):
        """Read the source now; the returned commit writes the destination."""
        data = self.gather()
        return lambda: self.scatter(data)

    def scatter(self, data: np.ndarray) -> None:
        """Write ``gather``'s bytes to the destination rows, in row order (when rows overlap,
        later rows win)."""
        if self.rows == 1:  # the range is checked (``check``, or the machine's own checks)
            start = self.dst_addr - self.dst.base
            self.dst.data[start:start + self.row_bytes] = data
            return
        _scatter(self.dst.data, self.dst_addr - self.dst.base, self.dst_stride, self.rows,
                 self.row_bytes, data)


@numba.njit(cache=True, nogil=True)
def _gather(data, start, stride, rows, row_bytes, out):
    for i in range(rows):  # loops, not slice assignments: their shape checks cost compiling
        for j in range(row_bytes):
            out[i * row_bytes + j] = data[start + i * stride + j]


@numba.njit(cache=True, nogil=True)
def _scatter(data, start, stride, rows, row_bytes, src):
    for i in range(rows):
        for j in range(row_bytes):
            data[start + i * stride + j] = src[i * row_bytes + j]


class Dma:
    """Copies as ops of one decoupled unit, through one port per space (``ports[space.name]``:
    port indices of an ``OpBuilder``)."""

    def __init__(self, unit: str, ports: dict[str, int], setup_cycles: int):
        self.unit, self.ports, self.setup_cycles = unit, ports, setup_cycles

    def add(self, b: OpBuilder, copy: Copy, token, tag: int, actions: dict | None,
            reads=(), label: str | None = None, traffic=None) -> int:
        """Append an op performing ``copy`` that writes resource ``token`` (a later op waits for
        the transfer by reading it); its action (``actions`` None: timing only) moves the bytes."""
        copy.check()
        try:
            ports = (self.ports[copy.src.name], self.ports[copy.dst.name])
        except KeyError as exc:
            raise MemoryFault(exc.args[0], copy.src_addr, copy.nbytes,
                              f"{self.unit} has no port to this space") from None
        text = label or (f"dma {copy.src.name}:{copy.src_addr:#x} -> {copy.dst.name}:"
                         f"{copy.dst_addr:#x} {copy.nbytes}B")
        op = b.add(self.unit, self.setup_cycles, reads=reads, writes=(token,),
                   transfers=((ports[0], copy.nbytes), (ports[1], copy.nbytes)), label=text,
                   tag=tag, traffic=traffic, args={"bytes": copy.nbytes, "rows": copy.rows})
        if actions is not None:
            actions[op] = copy.start
        return op
