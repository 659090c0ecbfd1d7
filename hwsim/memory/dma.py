"""A DMA engine: 1-D and 2-D strided copies between address spaces, at simulated time.

The engine is a decoupled unit: a transfer occupies it for ``setup_cycles`` (programming the
descriptor), then moves through the source and destination ports at their bandwidth and latency
while the next transfer is set up; at most ``channels`` transfers are under way. The source is
read when the transfer starts and the destination written when its last byte lands, so a program
that reads the destination before waiting on the transfer sees the old bytes. Timing-only runs
(``engine.numerics`` false) move no bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from hwsim.errors import MemoryFault
from hwsim.memory.space import AddressSpace
from hwsim.timing.engine import Engine, Op, Port, Work


@dataclass(frozen=True)
class Copy:
    """``rows`` rows of ``row_bytes``; row ``i`` at ``src + i*src_stride`` -> ``dst + i*dst_stride``."""

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

    def scatter(self, data: np.ndarray) -> None:
        """Write ``gather``'s bytes to the destination rows, in row order (when rows overlap,
        later rows win)."""
        if self.rows == 1:
            self.dst.write(self.dst_addr, data)
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
    """Copies on one engine unit, through one port per space (``ports[space.name]``)."""

    def __init__(self, engine: Engine, name: str, ports: dict[str, Port], channels: int,
                 setup_cycles: int, queue_depth: int = 16):
        self.unit = engine.unit(name, queue_depth=queue_depth, in_flight=channels)
        self.engine, self.ports, self.setup_cycles = engine, ports, setup_cycles
        self.count = 0

    def op(self, copy: Copy, token=None, label: str | None = None) -> Op:
        """An op performing ``copy``; it writes resource ``token`` (default: a fresh id) so that
        a later op can wait for the transfer by reading it."""
        copy.check()
        self.count += 1
        token = token if token is not None else (self.unit.name, self.count)
        try:
            ports = (self.ports[copy.src.name], self.ports[copy.dst.name])
        except KeyError as exc:
            raise MemoryFault(exc.args[0], copy.src_addr, copy.nbytes,
                              f"{self.unit.name} has no port to this space") from None

        def execute() -> Work:
            commit = None
            if self.engine.numerics:
                data = copy.gather()
                commit = lambda: copy.scatter(data)               # noqa: E731
            return Work(cycles=self.setup_cycles,
                        transfers=((ports[0], copy.nbytes), (ports[1], copy.nbytes)),
                        commit=commit)

        text = label or (f"dma {copy.src.name}:{copy.src_addr:#x} -> {copy.dst.name}:"
                         f"{copy.dst_addr:#x} {copy.nbytes}B")
        return Op(self.unit, execute, text, writes=(token,),
                  args={"bytes": copy.nbytes, "rows": copy.rows})
