"""Address spaces: byte arrays with a base address, bounds, alignment and write protection.

``read``/``write`` are the host's view (loading inputs, reading results, trace directives) and
may fill a read-only space such as MRAM; ``store`` is what a simulated program does and faults on
a read-only space. ``view`` hands a kernel a window of the bytes without copying.
"""

from __future__ import annotations

import mmap

import numpy as np

from hwsim.errors import MemoryFault


def as_bytes(data) -> np.ndarray:
    """bytes, bytearray, memoryview or any numpy array (its raw bytes) -> uint8 array."""
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(data), dtype=np.uint8)
    raise TypeError(f"expected bytes or a numpy array, found {type(data).__name__}")


class AddressSpace:
    """``size`` bytes starting at ``base``; addresses are absolute."""

    def __init__(self, name: str, size: int, base: int = 0, readonly: bool = False):
        if size <= 0:
            raise ValueError(f"space {name}: size must be positive")
        self.name, self.size, self.base, self.readonly = name, int(size), int(base), readonly
        # zeros mapped from the OS, each page cleared when first touched: a machine's memories
        # (tens of MB) then cost what a program touches, where np.zeros of a size malloc
        # serves from its heap clears every byte each time
        self.data = np.frombuffer(mmap.mmap(-1, self.size), np.uint8)

    @property
    def end(self) -> int:
        return self.base + self.size

    def offset(self, address: int, nbytes: int, align: int = 1) -> int:
        """Offset of ``[address, address + nbytes)`` in the array, or a ``MemoryFault``."""
        if align > 1 and address % align:
            raise MemoryFault(self.name, address, nbytes, f"not aligned to {align} bytes")
        off = address - self.base
        if nbytes < 0 or off < 0 or off + nbytes > self.size:
            raise MemoryFault(self.name, address, nbytes,
                              f"outside {self.base:#x}..{self.end:#x}")
        return off

    def read(self, address: int, nbytes: int, align: int = 1) -> np.ndarray:
        off = self.offset(address, nbytes, align)
        return self.data[off:off + nbytes].copy()

    def view(self, address: int, nbytes: int, align: int = 1) -> np.ndarray:
        off = self.offset(address, nbytes, align)
        return self.data[off:off + nbytes]

    def write(self, address: int, data, align: int = 1) -> None:
        raw = as_bytes(data)
        off = self.offset(address, raw.size, align)
        self.data[off:off + raw.size] = raw

    def store(self, address: int, data, align: int = 1) -> None:
        """A write by the simulated program: faults on a read-only space."""
        if self.readonly:
            raise MemoryFault(self.name, address, as_bytes(data).size, "space is read-only")
        self.write(address, data, align)

    def fill(self, address: int, nbytes: int, value: int) -> None:
        off = self.offset(address, nbytes)
        self.data[off:off + nbytes] = value
