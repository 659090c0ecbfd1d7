"""DMA copies move the bytes row by row as declared, whatever the strides."""

import numpy as np
import pytest

from hwsim.memory import AddressSpace, Copy


def rowwise(copy: Copy, src: bytes, dst: bytearray) -> bytearray:
    """The copy done one row at a time, in order, on plain bytes (base address 0x100)."""
    rows = [src[copy.src_addr - 0x100 + i * copy.src_stride:][:copy.row_bytes]
            for i in range(copy.rows)]
    for i, row in enumerate(rows):
        at = copy.dst_addr - 0x100 + i * copy.dst_stride
        dst[at:at + copy.row_bytes] = row
    return dst


@pytest.mark.parametrize("row_bytes, rows, src_at, src_stride, dst_at, dst_stride", [
    (4, 3, 0x100, 16, 0x100, 4),       # gather rows into one run
    (8, 5, 0x180, -24, 0x140, 32),     # a negative source stride
    (6, 4, 0x120, 0, 0x100, 6),        # a stride of 0 repeats one row
    (5, 7, 0x100, 5, 0x200, -9),       # a negative destination stride
    (8, 6, 0x100, 8, 0x100, 3),        # overlapping destination rows: later rows win
    (16, 1, 0x110, 0, 0x1f0, 0),       # one row
])
def test_strided_copy_matches_rowwise(row_bytes, rows, src_at, src_stride, dst_at, dst_stride):
    src, dst = AddressSpace("a", 512, 0x100), AddressSpace("b", 512, 0x100)
    src.write(0x100, np.random.default_rng(0).integers(0, 256, 512, dtype=np.uint8))
    dst.write(0x100, np.full(512, 0xEE, dtype=np.uint8))
    copy = Copy(src, src_at, dst, dst_at, row_bytes, rows, src_stride, dst_stride)
    copy.check()
    want = rowwise(copy, src.read(0x100, 512).tobytes(), bytearray(dst.read(0x100, 512)))
    data = copy.gather()
    src.write(0x100, np.zeros(512, dtype=np.uint8))  # the source was read at the start
    copy.scatter(data)
    assert dst.read(0x100, 512).tobytes() == bytes(want)
