"""Where the GAP9 plan puts what does not stay in L1: MRAM and L2 first, external memory (L3)
for what they cannot hold (docs/gap9-memory.md).

* **Constants**: each layer's constants and weight k-blocks lie together, in MRAM when they fit
  in what is left of it (layers in order, first fit), else in L3. A layer with its constants in
  L3 has them staged whole into an L2 buffer by the micro-DMA during the layer before it; the
  cluster DMA takes them on to L1 from there as it would from MRAM.
* **Tensors**: the tensors that leave L1 live in L2 from producer to last reader. When they do
  not all fit, the largest one live where the allocation failed is spilled to L3: it is then
  in L2 only during the layers that use it (its producer writes an L2 copy that the micro-DMA
  stores to L3 before the layer ends; each reader loads an L2 copy first). A graph input or
  output that is spilled is given and read in L3.

Not done: a layer whose operands and staged constants do not fit L2 together (L3 tiles through
L2 slots) is refused with the sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwsim.errors import ScheduleError
from hwsim.schedule.memory import Buffer, NoRoom, align_up, allocate


@dataclass
class Places:
    """The addresses outside L1: constants (``consts``: layer -> (space, consts addr, [block
    addrs])), staged constants in L2 (``stage``: layer -> addr), tensors in L2 (``l2``: root ->
    addr), spilled tensors in L3 (``l3``: root -> addr) and their L2 copies (``copies``: (root,
    layer) -> addr)."""

    consts: dict = field(default_factory=dict)
    staged: dict = field(default_factory=dict)      # layer -> bytes staged from L3
    stage: dict = field(default_factory=dict)
    l2: dict = field(default_factory=dict)
    l3: dict = field(default_factory=dict)
    copies: dict = field(default_factory=dict)
    image: list = field(default_factory=list)


def place_constants(params: dict, t) -> tuple[Places, int]:
    """Every layer's constants and k-blocks, in MRAM first fit, the rest in L3; returns the
    places and the L3 bytes used."""
    places, used = Places(), {"mram": 0, "l3": 0}
    base = {"mram": t.mram_base, "l3": t.l3_base}
    for i, (consts, _, blocks) in params.items():
        parts = [consts] + [b for b, _ in blocks]
        size = sum(align_up(p.size, 4) for p in parts)
        space = "mram" if used["mram"] + size <= t.mram_size else "l3"
        at, addrs = base[space] + used[space], []
        for data in parts:
            addrs.append(at)
            if data.size:
                places.image.append((space, at, data))
            at += align_up(data.size, 4)
        used[space] += size
        places.consts[i] = (space, addrs[0], addrs[1:])
        if space == "l3":
            places.staged[i] = size
    if used["l3"] > t.l3_size:
        raise ScheduleError(f"constants take {used['mram'] + used['l3']} bytes; MRAM has "
                            f"{t.mram_size} and L3 {t.l3_size}")
    return places, used["l3"]


def place_l2(places: Places, roots: list, uses: dict, previous: dict, t, l3_used: int) -> None:
    """L2 addresses of the tensors in ``roots`` (not resident in L1) and of the staged
    constants, spilling tensors to L3 until they fit. ``uses``: root name -> the layers that
    read or write it; ``previous``: layer -> the active layer before it (itself for the
    first)."""
    spilled: set = set()
    while True:
        buffers = [(Buffer(f"stage {i}", size, previous[i], i), places.stage, i)
                   for i, size in places.staged.items()]
        for r in roots:
            if r.name not in spilled:
                buffers.append((Buffer(r.name, r.size, r.first, r.last), places.l2, r.name))
                continue
            for i in uses[r.name]:
                buffers.append((Buffer(f"{r.name} at {i}", r.size, i, i), places.copies,
                                (r.name, i)))
        try:
            allocate([b for b, _, _ in buffers], t.l2_size)
            break
        except NoRoom as full:
            b = full.buffer
            live = [r for r in roots if r.name not in spilled and r.first <= b.last and
                    b.first <= r.last]
            if not live:
                raise ScheduleError(f"L2 ({t.l2_size} bytes) cannot hold the operands and "
                                    f"staged constants of layers {b.first}..{b.last} even with "
                                    f"the other tensors in L3 ({full})") from None
            spilled.add(max(live, key=lambda r: (r.size, r.name)).name)
    for b, table, key in buffers:
        table[key] = t.l2_base + b.offset
    at = t.l3_base + l3_used
    for r in roots:
        if r.name in spilled:
            places.l3[r.name] = at
            at = align_up(at + r.size, 4)
    if at > t.l3_base + t.l3_size:
        raise ScheduleError(f"constants and spilled tensors take {at - t.l3_base} bytes; L3 "
                            f"has {t.l3_size}")
