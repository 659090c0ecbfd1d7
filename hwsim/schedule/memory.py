"""Placing buffers in a memory by lifetime: the arena planner every lowering shares.

A buffer lives over an inclusive range of steps (layers); two buffers may share bytes when
their lifetimes do not overlap. ``allocate`` places the biggest first, each at the lowest offset
that is free over its whole lifetime (the greedy-by-size planner of TFLite's arena), aligned.
When a buffer finds no room it reports which one, so that the caller can move something out of
that memory over that lifetime and try again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Buffer:
    name: str
    size: int
    first: int          # first step it is live
    last: int           # last step it is live (inclusive)
    offset: int = -1


class NoRoom(Exception):
    """A buffer that did not fit (``buffer``), with the bytes its placement would need."""

    def __init__(self, buffer: Buffer, needed: int):
        super().__init__(f"{buffer.name}: {buffer.size} bytes over steps {buffer.first}.."
                         f"{buffer.last} need {needed} bytes")
        self.buffer, self.needed = buffer, needed


def align_up(value: int, align: int) -> int:
    return -(-value // align) * align


def allocate(buffers: list[Buffer], capacity: int, align: int = 4) -> int:
    """Set every buffer's offset; returns the bytes used, or raises ``NoRoom``."""
    placed: list[Buffer] = []
    used = 0
    for buf in sorted(buffers, key=lambda b: (-b.size, b.first, b.name)):
        size = align_up(max(buf.size, 1), align)
        offset = 0
        first, last = buf.first, buf.last
        for other in sorted((p for p in placed if p.first <= last and first <= p.last),
                            key=lambda p: p.offset):
            if offset + size <= other.offset:
                break
            offset = max(offset, align_up(other.offset + other.size, align))
        if offset + size > capacity:
            raise NoRoom(buf, offset + size)
        buf.offset = offset
        placed.append(buf)
        used = max(used, offset + size)
    return used
