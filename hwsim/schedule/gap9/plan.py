"""The GAP9 memory plan: tensor formats, what stays in L1, tiles, addresses, then the program.

1. **Storage**: a view (RESHAPE, an identity CLAMP) shares its input's bytes; every other
   layer output, and each graph input, is a tensor of its own.
2. **Formats**: an int8 tensor is kept signed or offset-binary (NE16's input format) by a vote
   of the layers reading it (NE16 layers want offset-binary, most cluster kernels signed, a
   RESCALE or a copy either), when its producer can write offset-binary; a reader that gets the
   other format converts a copy (one cluster pass). Graph inputs and outputs are signed.
3. **Residency**: activations live in L1 from producer to last reader when they fit; graph
   inputs and outputs, and whatever is moved out to make room, live in L2 (with the parameter
   ``l1_residency = "none"`` every activation lives in L2, as the GAP SDK keeps them without
   its L1 promotion). Weights and other constants live in MRAM and come to L1 per layer,
   prefetched during the previous layer when there is room.
4. **Tiles**: each layer takes the first of its candidate tilings (fewest tiles first) whose
   buffers fit the L1 left beside the resident tensors live at that layer; operands in L2 go
   through two slots each (``emit.run_steps``).
5. **Addresses**: L1 is one arena placed by lifetime (``hwsim.schedule.memory``); when a
   buffer finds no room, the largest resident tensor live there moves to L2 (or that layer's
   tiles shrink) and the plan is made again. L2 holds the moved tensors the same way; MRAM
   holds every layer's constants one after the other. What MRAM or L2 cannot hold goes to
   external memory (L3) through the micro-DMA (``external``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwsim.errors import ScheduleError
from hwsim.isa import gap9 as isa
from hwsim.schedule.gap9 import external
from hwsim.schedule.gap9.emit import Blocks, Emitter, Operand, run_steps
from hwsim.schedule.gap9.external import Places
from hwsim.schedule.gap9.works import Work
from hwsim.schedule.lowering import Checkpoint, Lowered, Placement
from hwsim.schedule.memory import Buffer, NoRoom, allocate

ATTEMPTS = 400          # re-plans before giving up (each moves one tensor or shrinks a tile)
UNITS = {isa.DmaCopy: "dma", isa.Ne16Commit: "ne16", isa.Kernel: "cluster"}


@dataclass
class Root:
    """Bytes shared by a tensor and its views."""

    name: str
    size: int
    first: int              # layer that writes it (0 for graph inputs)
    last: int               # last layer that reads it (the last layer for graph outputs)
    io: bool
    producer: int = -1      # layer index, -1 for a graph input
    offset: int = 0


@dataclass
class Plan:
    roots: dict = field(default_factory=dict)        # root name -> Root
    root_of: dict = field(default_factory=dict)      # tensor name -> root name
    resident: dict = field(default_factory=dict)   # an ordered set: iteration is reproducible
    tilings: dict = field(default_factory=dict)      # layer -> Tiling
    prefetch: set = field(default_factory=set)       # layers whose constants are prefetched
    l1: dict = field(default_factory=dict)           # buffer name -> address


def lower(graph, layers: list, works: list[Work], machine, options) -> Lowered:
    t = machine.params
    plan = Plan()
    _storage(graph, works, plan)
    _formats(works, plan)
    for w in works:
        w.in_offsets = {n: plan.roots[plan.root_of[n]].offset for n in w.inputs}
        w.out_offset = plan.roots[plan.root_of[w.output]].offset
        w.setup(options.mode, options.weight_bits)
    _fit_l1(works, plan, t.l1_size, t.l1_residency == "promote")
    for w in works:
        w.planned()
    params = {w.layer.index: w.params(plan.tilings[w.layer.index]) for w in works if not w.view}
    places = _outside_l1(works, plan, params, t)
    em = _emit(works, plan, params, places, t.l1_base)
    return _lowered(graph, works, plan, em, places, t.l1_base)


# -- 1. storage and 2. formats -------------------------------------------------------------------
def _storage(graph, works: list[Work], plan: Plan) -> None:
    outputs = {t.name for t in graph.outputs}
    last = len(works) - 1
    for t in graph.inputs:
        plan.root_of[t.name] = t.name
        plan.roots[t.name] = Root(t.name, t.nbytes, 0, 0, True)
    for w in works:
        i = w.layer.index
        for name in w.inputs:
            root = plan.roots[plan.root_of[name]]
            root.last = max(root.last, i)
        if w.view:
            plan.root_of[w.output] = plan.root_of[w.inputs[0]]
        else:
            out = w.layer.output
            plan.root_of[w.output] = w.output
            plan.roots[w.output] = Root(w.output, out.nbytes, i, i, False, i)
        if w.output in outputs:
            root = plan.roots[plan.root_of[w.output]]
            root.io, root.last = True, last


def _formats(works: list[Work], plan: Plan) -> None:
    """Offset-binary or signed for each tensor, by the readers' vote (module docstring)."""
    readers: dict[str, list] = {}
    for w in works:
        for name in w.inputs:
            readers.setdefault(plan.root_of[name], []).append((w, name))
    for w in works:
        root = plan.roots[plan.root_of[w.output]]
        if w.view or root.io:
            continue
        if w.transparent:
            root.offset = plan.roots[plan.root_of[w.inputs[0]]].offset
        elif w.makes_offset() and _votes(root.name, readers, plan) > 0:
            root.offset = 128


def _votes(root: str, readers: dict, plan: Plan) -> int:
    """Readers preferring offset-binary minus those preferring signed (through copies)."""
    total = 0
    for w, name in readers.get(root, []):
        if w.view:
            continue
        if w.transparent:
            total += _votes(plan.root_of[w.output], readers, plan)
        else:
            pref = w.prefers_offset(name)
            total += 0 if pref is None else (1 if pref else -1)
    return total


# -- 3./4./5. residency, tiles, L1 addresses ----------------------------------------------------
def _fit_l1(works: list[Work], plan: Plan, capacity: int, promote: bool) -> None:
    active = [w for w in works if not w.view]
    plan.resident = {r.name: None for r in plan.roots.values()
                     if not r.io and r.size <= capacity // 2 and promote}
    plan.prefetch = {w.layer.index for w in active[1:]}
    shrink = {w.layer.index: 1.0 for w in active}
    for _ in range(ATTEMPTS):
        if not _choose_tilings(active, plan, capacity, shrink):
            continue
        buffers = _l1_buffers(active, plan)
        try:
            allocate(buffers, capacity)
        except NoRoom as full:
            _make_room(full.buffer, active, plan, shrink)
            continue
        plan.l1 = {b.name: b.offset for b in buffers}
        return
    raise ScheduleError(f"no plan fits L1 ({capacity} bytes) after {ATTEMPTS} attempts")


def _live(plan: Plan, index: int) -> list[Root]:
    return [plan.roots[r] for r in plan.resident
            if plan.roots[r].first <= index <= plan.roots[r].last]


def _choose_tilings(active: list[Work], plan: Plan, capacity: int, shrink: dict) -> bool:
    """A tiling per layer within its L1 budget; False after moving a tensor out (re-plan)."""
    for n, w in enumerate(active):
        i = w.layer.index
        nxt = active[n + 1] if n + 1 < len(active) else None
        reserve = _const_bytes(nxt, plan) if nxt and nxt.layer.index in plan.prefetch else 0
        live = _live(plan, i)
        budget = int((capacity - sum(r.size for r in live) - reserve) * shrink[i])
        moved = {name for name in w.inputs + [w.output] if plan.root_of[name] not in
                 plan.resident}
        tiling = next((t for t in w.candidates() if
                       t.footprint(moved, w.const_bytes(t)) <= budget), None)
        if tiling is not None:
            plan.tilings[i] = tiling
            continue
        if live:
            plan.resident.pop(max(live, key=lambda r: r.size).name)
        elif reserve:
            plan.prefetch.discard(nxt.layer.index)
        else:
            need = min(t.footprint(moved, w.const_bytes(t)) for t in w.candidates())
            raise ScheduleError(f"layer {i} ({w.layer.kind} {w.layer.name}) needs {need} "
                                f"bytes of L1 in its smallest tiling; L1 has {capacity}")
        return False
    return True


def _const_bytes(w: Work, plan: Plan) -> int:
    """The constants a layer prefetches (with its current tiling, else its first)."""
    tiling = plan.tilings.get(w.layer.index)
    return w.const_bytes(tiling if tiling is not None else next(w.candidates()))


def _l1_buffers(active: list[Work], plan: Plan) -> list[Buffer]:
    buffers = [Buffer(r, plan.roots[r].size, plan.roots[r].first, plan.roots[r].last)
               for r in plan.resident]
    previous = None
    for w in active:
        i, t = w.layer.index, plan.tilings[w.layer.index]
        consts = w.const_bytes(t)
        if consts:
            first = previous if (i in plan.prefetch and previous is not None) else i
            buffers.append(Buffer(f"{i}:consts", consts, first, i))
        if len(t.blocks) > 1:
            buffers += [Buffer(f"{i}:block{s}", max(t.blocks), i, i) for s in range(2)]
        buffers += [Buffer(f"{i}:scratch:{name}", size, i, i) for name, size in
                    t.scratch.items()]
        for name in w.inputs + [w.output]:
            if plan.root_of[name] in plan.resident:
                continue
            regions = {s.regions[name] for s in t.steps if name in s.regions}
            size = max(r[1] for r in regions)
            buffers += [Buffer(f"{i}:slot:{name}:{s}", size, i, i)
                        for s in range(min(2, len(regions)))]
        previous = i
    return buffers


def _make_room(buffer: Buffer, active: list[Work], plan: Plan, shrink: dict) -> None:
    """After ``buffer`` found no room: move the largest resident tensor live over its lifetime
    to L2, else stop prefetching into it, else shrink that layer's tiles."""
    live = [plan.roots[r] for r in plan.resident
            if plan.roots[r].first <= buffer.last and buffer.first <= plan.roots[r].last]
    if live:
        plan.resident.pop(max(live, key=lambda r: r.size).name)
        return
    layer = int(buffer.name.split(":")[0])
    if buffer.name.endswith(":consts") and layer in plan.prefetch:
        plan.prefetch.discard(layer)
        return
    shrink[layer] *= 0.8


# -- MRAM, L2, L3 -------------------------------------------------------------------------------
def _outside_l1(works: list[Work], plan: Plan, params: dict, t) -> Places:
    """Constants in MRAM or L3; the tensors not resident in L1 in L2 or L3 (``external``)."""
    places, l3_used = external.place_constants(params, t)
    plan.prefetch -= set(places.staged)     # staged in L2 during the layer before instead
    active = [w.layer.index for w in works if not w.view]
    previous = dict(zip(active, active[:1] + active[:-1]))
    uses: dict = {}
    for w in works:
        if not w.view:
            for name in w.inputs + [w.output]:
                uses.setdefault(plan.root_of[name], set()).add(w.layer.index)
    roots = [r for r in plan.roots.values() if r.name not in plan.resident]
    external.place_l2(places, roots, {r.name: sorted(uses.get(r.name, ())) for r in roots},
                      previous, t, l3_used)
    return places


# -- the program --------------------------------------------------------------------------------
def _emit(works: list[Work], plan: Plan, params: dict, places: Places, l1_base: int) -> Emitter:
    em = Emitter()
    active = [w for w in works if not w.view]
    ready: dict[int, list] = {}
    l3 = _L3Moves(em, plan, places)
    l1 = {name: l1_base + off for name, off in plan.l1.items()}
    for n, w in enumerate(active):
        i = em.layer = w.layer.index
        em.layer_start()
        t = plan.tilings[i]
        consts, offsets, blocks = params[i]
        space, consts_at, block_at = places.consts[i]
        if space == "l3":       # the cluster DMA reads the copy staged in L2
            block_at = [a - consts_at + places.stage[i] for a in block_at]
            space, consts_at = "l2", places.stage[i]
        l3.load(w)
        operands = {name: _operand(name, w, plan, places, l1, i) for name in
                    w.inputs + [w.output]}
        spec = Blocks(consts=(consts_at, consts.size, l1[f"{i}:consts"]) if consts.size else (),
                      ready=tuple(ready.pop(i, ())),
                      mram=[(a, b.size) for a, (b, _) in zip(block_at, blocks)],
                      slots=tuple(l1[f"{i}:block{s}"] for s in range(2)) if blocks else (),
                      space=space)
        scratch = {name: l1[f"{i}:scratch:{name}"] for name in t.scratch}
        const_addr = {name: l1.get(f"{i}:consts", 0) + off for name, off in offsets.items()}

        def compute(step, addr, w=w, scratch=scratch, const_addr=const_addr, blocks=blocks):
            block = const_addr if not blocks else {
                k: addr["@block"] + off for k, off in blocks[step.block][1].items()}
            w.compute(em, step, addr, scratch, {"consts": const_addr, "block": block})

        nxt = active[n + 1] if n + 1 < len(active) else None

        def early(nxt=nxt):
            if nxt is None:
                return
            j = nxt.layer.index
            l3.stage(j)
            data = params[j][0]
            if j in plan.prefetch and data.size:
                ready[j] = [em.dma(("mram", places.consts[j][1]), ("l1", l1[f"{j}:consts"]),
                                   data.size, layer=j)]
        run_steps(em, t.steps, operands, spec, compute, early)
        l3.store(w)
    return em


class _L3Moves:
    """The micro-DMA transfers of a program (``external``): a layer's constants staged from L3
    into L2 during the layer before it (or just before it, for the first); a spilled tensor
    loaded into its L2 copy before each reader, and stored from the producer's copy at the end
    of the producer (which waits for the store, so that the copy's bytes can be reused)."""

    def __init__(self, em: Emitter, plan: Plan, places: Places):
        self.em, self.plan, self.places = em, plan, places
        self.staged: dict = {}      # layer -> transfer ids of its staged constants

    def stage(self, layer: int) -> None:
        p = self.places
        if layer in p.staged and layer not in self.staged:
            self.staged[layer] = [self.em.dma(("l3", p.consts[layer][1]), ("l2", p.stage[layer]),
                                              p.staged[layer], layer=layer)]

    def load(self, w: Work) -> None:
        i, p, em = w.layer.index, self.places, self.em
        self.stage(i)
        ids = self.staged.pop(i, [])
        for root in dict.fromkeys(self.plan.root_of[n] for n in w.inputs):
            if root in p.l3:
                ids.append(em.dma(("l3", p.l3[root]), ("l2", p.copies[(root, i)]),
                                  self.plan.roots[root].size))
        em.wait_dma(ids)

    def store(self, w: Work) -> None:
        em, p, root = self.em, self.places, self.plan.root_of[w.output]
        if root in p.l3:
            em.wait_dma([em.dma(("l2", p.copies[(root, w.layer.index)]), ("l3", p.l3[root]),
                                self.plan.roots[root].size)])


def _operand(name: str, w: Work, plan: Plan, places: Places, l1: dict, i: int) -> Operand:
    root = plan.root_of[name]
    if root in plan.resident:
        return Operand("l1", l1[root])
    slots = tuple(l1[k] for k in (f"{i}:slot:{name}:0", f"{i}:slot:{name}:1") if k in l1)
    addr = places.copies[(root, i)] if root in places.l3 else places.l2[root]
    return Operand("l2", addr, slots, output=name == w.output)


def _lowered(graph, works: list[Work], plan: Plan, em: Emitter, places: Places,
             l1_base: int) -> Lowered:
    def place(name: str, tensor) -> Placement:
        root = plan.roots[plan.root_of[name]]
        if root.name in plan.resident:
            space, addr = "l1", l1_base + plan.l1[root.name]
        elif root.name in places.l3:
            space, addr = "l3", places.l3[root.name]
        else:
            space, addr = "l2", places.l2[root.name]
        return Placement(space, addr, tensor.dtype.name, tensor.shape, root.offset,
                         "uint8" if root.offset else "")

    checkpoints, units, notes = {}, {}, {}
    for w in works:
        i = w.layer.index
        root = plan.roots[plan.root_of[w.output]]
        writers = frozenset(em.touched.get(root.producer, ())) if root.producer >= 0 else \
            frozenset()
        checkpoints[i] = Checkpoint(place(w.output, w.layer.output), writers)
        notes[i] = list(w.notes)
    for instr, layer in zip(em.program, em.layer_of):
        unit = UNITS.get(type(instr))
        if unit == "dma" and "l3" in (instr.src, instr.dst):
            unit = "udma"
        if unit:
            units.setdefault(layer, set()).add(unit)
    return Lowered(em.program, em.layer_of, places.image,
                   {t.name: place(t.name, t) for t in graph.inputs},
                   {t.name: place(t.name, t) for t in graph.outputs}, checkpoints,
                   {i: tuple(sorted(u)) for i, u in units.items()}, notes)
