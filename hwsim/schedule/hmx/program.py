"""An HMX program as it is built: instructions, the memory images it needs, VTCM allocation.

``HmxProgram`` collects the instructions of a trace for the HMX machine (``hwsim/isa/hmx.py``
syntax) as the items parsing that trace gives: the fields of the HMX register words are checked
with the ISA's own field tables as encoding and decoding them would (``make_instr``, once per
distinct instruction), so a lowering never writes shift-and-mask code, without writing and
tokenising text. HVX and DMA instructions are plain calls. The program also
holds the images to place in memory before it runs (constants and inputs in DDR) and where its
results are; ``text()`` is the trace, ``run(machine)`` places the images and runs that text.

``Arena`` allocates one address range (VTCM, or DDR for constants): first fit, aligned, with a
high-water mark; running out is a ``ScheduleError`` naming what did not fit.

``WeightStream`` streams constant chunks (packed weights and bias sets) from DDR into two VTCM
buffers: chunk j + 1 is on its way while chunk j is used. Before chunk j is used the program
waits for the DMA (``dma_wait``, which waits for everything issued before: chunk j is the only
transfer in flight), then fences (``dma_fence``: the instructions that read the buffer chunk
j + 1 goes to, chunk j - 1's, have read it) and starts chunk j + 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hwsim.errors import Location, ScheduleError
from hwsim.isa.hmx import (CROUTON_BYTES, SPECS, USR, VECTOR_BYTES, Instr, Multiply, Spec,
                           format_item, make_instr)
from hwsim.targets.hmx.layouts import check_mask

SPATIALS = 32


def spatial_offset(y: int, mask: int) -> int:
    """The 5-bit spatial value with Y coordinate ``y`` and X 0 under ``mask`` (the inverse of
    ``hwsim.isa.hmx.spatial_split`` for a pure Y offset)."""
    check_mask(mask)
    value, taken = 0, 0
    for bit in range(5):
        if mask >> bit & 1:
            value |= (y >> taken & 1) << bit
            taken += 1
    if y >> taken:
        raise ScheduleError(f"a Y offset of {y} does not fit the {taken} Y bits of mask "
                            f"{mask:#07b}")
    return value


def tile_mask(h: int, w: int) -> int:
    """The spatial mask whose crouton (32 / 2^k wide, 2^k tall) covers an h x w plane with the
    fewest croutons; ties go to the wider crouton (more kernel-row offsets are whole croutons).
    Y bits are the high bits: mask 0b11100 is 4 wide and 8 tall, spatial s = 4 y + x."""
    def tiles(ybits: int) -> int:
        ny = 1 << ybits
        return -(-h // ny) * -(-w // (SPATIALS // ny))
    ybits = min(range(6), key=lambda b: (tiles(b), b))
    return ((1 << ybits) - 1) << (5 - ybits)


@dataclass
class Image:
    """Bytes placed in a memory before the program runs (or read after it: ``output``)."""

    space: str
    addr: int
    data: np.ndarray
    name: str


@dataclass
class HmxProgram:
    """The program for the HMX machine as checked items (``hwsim.isa.hmx`` ``Instr`` and
    ``Multiply``, as parsing its text gives them), the layer each belongs to (``layer``: the
    current one), comments to show before them, and the memory images they assume. Equal
    instructions are one item, made and checked where the program first has them."""

    items: list = field(default_factory=list)
    layer_of: list[int] = field(default_factory=list)
    notes: dict[int, str] = field(default_factory=dict)  # item index -> comment before it
    images: list[Image] = field(default_factory=list)
    layer: int = -1
    lines: int = 0  # trace lines so far (a multiply is two)
    _act: Instr | None = None  # an activation waiting for its weight
    _made: dict = field(default_factory=dict)  # what makes an instruction -> the instruction
    _multiplies: dict = field(default_factory=dict)  # (activation, weight) ids -> Multiply

    def emit(self, name: str, *args: int, comment: str = "") -> None:
        """Add the instruction ``name(args...)`` with plain integer arguments (HVX, DMA)."""
        self._emit_once((name, args), name, (), args, comment)

    def _emit_once(self, key: tuple, name: str, words: tuple = (), ints: tuple = (),
                   comment: str = "") -> None:
        """Add instruction ``name`` with these register word fields (``make_instr``) and plain
        arguments, made and checked once per distinct ``key`` (what determines it)."""
        instr = self._made.get(key)
        if instr is None:
            loc = Location("<hmx program>", self.lines + 1, 1)
            instr = self._made[key] = make_instr(SPECS[name], loc, words, ints)
        self._add(instr, comment)

    def _add(self, instr: Instr, comment: str = "") -> None:
        if comment:
            self.comment(comment)
        self.lines += 1
        kind = instr.kind
        weight = kind in ("wgt", "wgt_deep")
        if weight != (self._act is not None):
            raise ScheduleError(f"<hmx program>:{self.lines}:1: {instr.spec.name}: an "
                                "activation and its weight must follow each other (one multiply)")
        if kind.startswith("act"):
            self._act = instr
            return
        if weight:
            key = (id(self._act), id(instr))
            item = self._multiplies.get(key)
            if item is None:
                item = self._multiplies[key] = Multiply(self._act, instr)
            self._act = None
        else:
            item = instr
        self.items.append(item)
        self.layer_of.append(self.layer)

    def comment(self, text: str) -> None:
        at = len(self.items)
        self.notes[at] = f"{self.notes[at]}; {text}" if at in self.notes else text

    def place(self, space: str, addr: int, data, name: str) -> None:
        self.images.append(Image(space, addr, np.ascontiguousarray(data), name))

    # -- HMX -----------------------------------------------------------------------------------
    def usr(self, **fields: int) -> None:
        """``USR = ...`` with these ``isa.hmx.USR`` fields set, the others zero."""
        loc = Location("<hmx program>", self.lines + 1, 1)
        self._add(Instr(Spec("USR", "usr", (USR,)), USR.decode(USR.encode(**fields)), loc))

    def clear_accumulators(self) -> None:
        self.emit("Q6_mxclracc_hf")

    def act(self, addr: int, mask: int, stop: int, count: int = 1) -> None:
        """A plain (``count`` 1) or deep activation of ``count`` croutons, channels 0..stop of
        the last one."""
        rs = {"address": addr, "channel_start": 0}
        if count == 1:
            self._emit_once(("act", addr, mask, stop), "Q6_activation_hf_mxmem_RR",
                            (rs, {"spatial_mask": mask, "channel_stop": stop}))
        else:
            self._emit_once(("act_deep", addr, mask, stop, count),
                            "Q6_activation_hf_mxmem_RR_deep",
                            (rs, {"dc": count - 1, "spatial_mask": mask, "channel_stop": stop}))

    def act_single(self, addr: int, mask: int, stop: int, dy_bytes: int, y: int) -> None:
        key = ("act_single", addr, mask, stop, dy_bytes, y)
        instr = self._made.get(key)
        if instr is not None:  # the spatial offset is worked out once per instruction
            self._add(instr)
            return
        self._emit_once(key, "Q6_activation_hf_mxmem_RR_single", (
            {"address": addr, "offset": spatial_offset(y, mask), "channel_start": 0},
            {"dy": dy_bytes, "spatial_mask": mask, "channel_stop": stop}))

    def wgt(self, addr: int, vectors: int, deep: bool = False) -> None:
        self._emit_once(("wgt", addr, vectors, deep),
                        "Q6_weight_hf_mxmem_RR_deep" if deep else "Q6_weight_hf_mxmem_RR",
                        ({"address": addr}, {"dw": (vectors - 1) * VECTOR_BYTES}))

    def bias_load(self, addr: int, index: int) -> None:
        self._emit_once(("bias_load", addr, index), "Q6_bias_mxmem2_A",
                        ({"address": addr, "index": index},))

    def convert(self, bias_sel: int) -> None:
        """Convert the primary accumulator with bias set ``bias_sel``, clear it and swap."""
        self._emit_once(("convert", bias_sel), "Q6_cvt_hf_acc_R",
                        ({"bias_sel": bias_sel, "acc": 0},))

    def write(self, addr: int, mask: int) -> None:
        self._emit_once(("write", addr, mask), "Q6_mxmem_cvt_RR",
                        ({"address": addr}, {"spatial_mask": mask}))

    # -- HVX and DMA ---------------------------------------------------------------------------
    def hvx(self, name: str, *args: int, comment: str = "") -> None:
        self.emit(f"hvx_{name}", *args, comment=comment)

    def dma_in(self, dst: int, src: int, nbytes: int, comment: str = "") -> None:
        self.emit("dma_ddr_to_vtcm", dst, src, nbytes, comment=comment)

    def dma_out(self, dst: int, src: int, nbytes: int, comment: str = "") -> None:
        self.emit("dma_vtcm_to_ddr", dst, src, nbytes, comment=comment)

    def dma_out_2d(self, dst: int, src: int, row_bytes: int, rows: int, dst_stride: int,
                   src_stride: int) -> None:
        self.emit("dma_vtcm_to_ddr_2d", dst, src, row_bytes, rows, dst_stride, src_stride)

    def dma_wait(self) -> None:
        self.emit("dma_wait")

    def dma_fence(self) -> None:
        self.emit("dma_fence")

    # -- output --------------------------------------------------------------------------------
    def text(self) -> str:
        out = [".target hmx"]
        for i, item in enumerate(self.items):
            if i in self.notes:
                out.append(f"// {self.notes[i]}")
            out.append(format_item(item))
        return "\n".join(out) + "\n"

    def run(self, machine, **options):
        """Place the images in the machine's memories and run the program's text on it (so
        that the text is what runs)."""
        for image in self.images:
            machine.memory(image.space).write(image.addr, image.data)
        return machine.run(self.text(), **options)


class Arena:
    """First-fit allocation in ``[base, base + size)``; ``peak`` is the high-water mark."""

    def __init__(self, name: str, base: int, size: int):
        self.name, self.base, self.size = name, base, size
        self.free_blocks = [(base, size)]
        self.used: dict[int, int] = {}
        self.peak = 0

    def alloc(self, nbytes: int, what: str, align: int = CROUTON_BYTES) -> int:
        nbytes = max(nbytes, 1)
        for i, (start, length) in enumerate(self.free_blocks):
            addr = -(-start // align) * align
            end = addr + nbytes
            if end <= start + length:
                rest = [(start, addr - start)] if addr > start else []
                rest += [(end, start + length - end)] if end < start + length else []
                self.free_blocks[i:i + 1] = rest
                self.used[addr] = end - addr
                self.peak = max(self.peak, end - self.base)
                return addr
        largest = max((n for _, n in self.free_blocks), default=0)
        raise ScheduleError(f"{self.name}: no room for {what} ({nbytes:,} bytes); the largest "
                            f"free block is {largest:,} of {self.size:,} bytes")

    def free(self, addr: int) -> None:
        nbytes = self.used.pop(addr)
        blocks = sorted(self.free_blocks + [(addr, nbytes)])
        merged = [blocks[0]]
        for start, length in blocks[1:]:
            last_start, last_length = merged[-1]
            if last_start + last_length == start:
                merged[-1] = (last_start, last_length + length)
            else:
                merged.append((start, length))
        self.free_blocks = merged


class WeightStream:
    """Constant chunks streamed from DDR through two VTCM buffers (see the module docstring).

    ``add`` registers a chunk while planning (its bytes go to DDR) and returns its index;
    ``open(program)`` reserves the buffers and starts chunk 0; ``use(program, j)`` returns the
    VTCM address of chunk j once the program has waited for it and started chunk j + 1.
    """

    def __init__(self, ddr: Arena, vtcm: Arena):
        self.ddr, self.vtcm = ddr, vtcm
        self.chunks: list[tuple[int, int]] = []  # (DDR address, bytes)
        self.buffers: list[int] = []
        self.started = 0
        self.deferred: list = []  # emitters of DMAs out, run after the next wait

    def add(self, program: HmxProgram, data: np.ndarray, name: str) -> int:
        data = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        addr = self.ddr.alloc(data.size, name, VECTOR_BYTES)
        program.place("ddr", addr, data, name)
        self.chunks.append((addr, data.size))
        return len(self.chunks) - 1

    def open(self, program: HmxProgram) -> None:
        """Reserve the buffers and start chunk 0 (after a fence: the buffers may hold what
        earlier instructions still have to read)."""
        if not self.chunks:
            return
        largest = max(n for _, n in self.chunks)
        count = min(2, len(self.chunks))
        self.buffers = [self.vtcm.alloc(largest, "weight buffer") for _ in range(count)]
        program.dma_fence()
        self._start(program, 0)

    def _start(self, program: HmxProgram, j: int) -> None:
        addr, nbytes = self.chunks[j]
        program.dma_in(self.buffers[j % len(self.buffers)], addr, nbytes, f"constants {j}")
        self.started = j + 1

    def use(self, program: HmxProgram, j: int) -> int:
        if j + 1 != self.started:
            raise ScheduleError(f"weight chunk {j} used out of order (next is {self.started - 1})")
        program.dma_wait()
        if j + 1 < len(self.chunks):
            if j >= 1:
                program.dma_fence()
            self._start(program, j + 1)
        self.flush()
        return self.buffers[j % len(self.buffers)]

    def defer(self, emit) -> None:
        """Emit a DMA out of VTCM after the next wait for a chunk: ``dma_wait`` waits for every
        DMA before it, and the next chunk's wait should not wait for results leaving."""
        self.deferred.append(emit)

    def flush(self) -> None:
        for emit in self.deferred:
            emit()
        self.deferred = []

    def close(self) -> None:
        self.flush()
        for addr in self.buffers:
            self.vtcm.free(addr)
        self.buffers = []
