"""The three kinds of GAP9 layer: a view, an NE16 layer, a chain of cluster kernels.

Each kind says which input format it prefers (offset-binary int8 for NE16, see ``cluster``),
whether it can write its output offset-binary, which constants it needs in L1, how it can be
tiled (``tilings``: candidates from fewest tiles up, each a list of ``Step``s with the byte
regions of its operands, plus scratch buffers and weight blocks) and what one step emits.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from hwsim.isa.arguments import TensorRef
from hwsim.schedule.gap9 import cluster
from hwsim.schedule.gap9.cluster import KTYPE
from hwsim.schedule.gap9.emit import Emitter, Step
from hwsim.schedule.gap9.ne16 import Ne16Layer, concat, rows_in
from hwsim.schedule.lowering import STORAGE, Layer
from hwsim.schedule.tiles import row_bytes, split, split_axis, window_rows

L1 = "l1"


def _itemsize(dtype: str) -> int:
    return STORAGE[dtype].itemsize


@dataclass
class Tiling:
    steps: list
    scratch: dict = field(default_factory=dict)     # name -> bytes
    blocks: list = field(default_factory=list)      # bytes of each k-block (several: slots)
    _slots: dict = field(default_factory=dict, repr=False, compare=False)

    def footprint(self, moved: set, consts: int) -> int:
        """L1 bytes of the layer's own buffers when the operands in ``moved`` go through
        slots (two if their region changes between steps)."""
        total = consts + sum(self.scratch.values())
        for name in moved:
            total += self.slot_bytes(name)
        if len(self.blocks) > 1:
            total += 2 * max(self.blocks)
        return total

    def slot_bytes(self, name: str) -> int:
        """The L1 slots operand ``name`` needs when it is not resident: its largest region,
        twice if its region changes between steps (worked out once per operand)."""
        found = self._slots.get(name)
        if found is None:
            regions = {s.regions[name] for s in self.steps if name in s.regions}
            found = self._slots[name] = max(r[1] for r in regions) * min(2, len(regions)) \
                if regions else 0
        return found


class Work:
    """A layer as the GAP9 lowering plans it."""

    view = False
    transparent = False     # the output keeps the input's format (views, copies)

    def __init__(self, layer: Layer):
        self.layer = layer
        self.inputs = [t.name for t in layer.inputs]
        self.output = layer.output.name
        self.tensors = {t.name: t for op in layer.ops for t in op.inputs + op.outputs}
        self.in_offsets: dict = {}
        self.out_offset = 0
        self.notes: list = []
        self._made: list = []           # the tilings made so far (``candidates``)
        self._source = None

    def prefers_offset(self, name: str) -> bool | None:
        return False

    def makes_offset(self) -> bool:
        return False

    def setup(self, mode: str, bits: int) -> None:
        """Fix the numerics once the formats (``in_offsets``, ``out_offset``) are known."""

    def params(self, tiling: Tiling) -> tuple[np.ndarray, dict, list]:
        """Constants loaded once (bytes, {name: offset}) and the k-blocks (bytes, offsets)."""
        return np.zeros(0, np.uint8), {}, []

    def const_bytes(self, tiling: Tiling) -> int:
        """The size of ``params(tiling)[0]`` (cheaply)."""
        return 0

    def tilings(self):
        return iter(())

    def candidates(self, limit: int = 256):
        """The first ``limit`` of ``tilings()``, each made once (planning walks them again
        after every change of residency)."""
        for n in range(limit):
            if n == len(self._made):
                if self._source is None:    # the first time, or after ``planned``
                    self._source = itertools.islice(self.tilings(), n, None)
                tiling = next(self._source, None)
                if tiling is None:
                    return
                self._made.append(tiling)
            yield self._made[n]

    def planned(self) -> None:
        """Planning is over: drop the generator of further tilings. Its frame refers to this
        work, a reference cycle that would keep the work and its tilings until the cyclic
        collector ran."""
        self._source = None


class View(Work):
    """RESHAPE, or a CLAMP that changes nothing: the output is the input's bytes."""

    view = True
    transparent = True

    def prefers_offset(self, name: str) -> bool | None:
        return None


class Ne16Work(Work):
    """A convolution (or constant-B MATMUL) on NE16 with its RESCALE and CLAMP."""

    def prefers_offset(self, name: str) -> bool | None:
        return True

    def makes_offset(self) -> bool:
        ops = self.layer.ops
        tail = [op for op in ops[1:] if not cluster.is_identity_clamp(op)]
        return (len(tail) == 1 and tail[0].op == "RESCALE"
                and tail[0].output.dtype.name == "int8" and not tail[0].output_unsigned)

    def setup(self, mode: str, bits: int) -> None:
        self.ne16 = Ne16Layer(self.layer.ops, mode, bits, self.out_offset)
        self.notes = self.ne16.notes
        self.convert = self.in_offsets[self.inputs[0]] == 0
        self.tail = self.ne16.tail()
        self.clamp = self.ne16.clamp
        self.small_bytes = sum(-(-p.size // 4) * 4 for p in self._small_parts().values())

    def _small_parts(self) -> dict:
        parts = {}
        if self.tail is not None:
            parts.update(tail_mult=self.tail["mult"].view(np.uint8),
                         tail_shift=self.tail["shift"].astype(np.int8).view(np.uint8))
        if self.convert:
            parts.update({name: data.view(np.uint8) for name, data in (cluster.ONE,
                                                                       cluster.SHIFT)})
        return parts

    def const_bytes(self, tiling: Tiling) -> int:
        kblocks = tiling.steps[-1].data["kblocks"]
        return self.small_bytes + (self.ne16.block_bytes(*kblocks[0]) if len(kblocks) == 1
                                   else 0)

    def params(self, tiling: Tiling) -> tuple[np.ndarray, dict, list]:
        parts = self._small_parts()
        kblocks = tiling.steps[-1].data["kblocks"]
        if len(kblocks) == 1:
            parts.update(self.ne16.parts(*kblocks[0]))
            return (*concat(parts), [])
        return (*concat(parts), [concat(self.ne16.parts(k0, k1)) for k0, k1 in kblocks])

    def tilings(self):
        """Row bands x k-blocks, fewest steps first (k-blocks of whole NE16 subtiles first,
        then finer: the last subtile of a block may be partial)."""
        g = self.ne16.geo
        multiple = 2 if g.stride == 2 else 1
        whole = math.ceil(g.k_out / g.group)
        pairs = sorted(((b, k) for b in range(1, g.h_out + 1)
                        for k in range(1, math.ceil(g.k_out / 8) + 1)),
                       key=lambda bk: (bk[0] * bk[1], bk[1]))
        for bands, count in pairs:
            rows = split(g.h_out, bands, multiple)
            kblocks = split(g.k_out, count, g.group if count <= whole else 8)
            if len(rows) == bands and len(kblocks) == count:
                yield self._tiling(rows, kblocks)

    def _tiling(self, rows: list, kblocks: list) -> Tiling:
        g = self.ne16.geo
        in_row = g.w_in * g.k_in
        out_row = g.w_out * g.k_out * _itemsize(self.tensors[self.output].dtype.name)
        steps, widest_in, widest_out = [], 0, 0
        for r0, r1 in rows:
            first, end, _, _ = rows_in(g, r0, r1)
            widest_in, widest_out = max(widest_in, end - first), max(widest_out, r1 - r0)
            for n, (k0, k1) in enumerate(kblocks):
                steps.append(Step({self.inputs[0]: (first * in_row, (end - first) * in_row),
                                   self.output: (r0 * out_row, (r1 - r0) * out_row)}, n,
                                  {"rows": (r0, r1), "k": (k0, k1), "first": n == 0,
                                   "last": n == len(kblocks) - 1, "kblocks": kblocks}))
        scratch = {}
        if self.convert:
            scratch["convert"] = widest_in * in_row
        if self.tail is not None:
            scratch["acc"] = widest_out * g.w_out * g.k_out * 4
        blocks = [self.ne16.block_bytes(k0, k1) for k0, k1 in kblocks] \
            if len(kblocks) > 1 else []
        return Tiling(steps, scratch, blocks)

    def compute(self, em: Emitter, step: Step, addr: dict, scratch: dict, base: dict) -> None:
        """Emit one step: convert the input band, run the jobs, rescale on the cluster."""
        g, d = self.ne16.geo, step.data
        (r0, r1), (k0, k1) = d["rows"], d["k"]
        source = addr[self.inputs[0]]
        first, end, _, _ = rows_in(g, r0, r1)
        band_in = (1, end - first, g.w_in, g.k_in)
        if self.convert:
            if d["first"]:
                em.kernel("rescale", self._convert_args(source, scratch["convert"], band_in,
                                                        base["consts"]))
                em.barrier()
            source = scratch["convert"]
        out = scratch["acc"] if self.tail is not None else addr[self.output]
        parts = base["block"]
        job = None
        for regs in self.ne16.jobs((r0, r1), k0, k1, {"in": source, "out": out, **parts}):
            job = em.job(regs)
        em.wait_job(job)
        if self.tail is not None and d["last"]:
            shape = (1, r1 - r0, g.w_out, g.k_out)
            self._tail(em, scratch["acc"], addr[self.output], shape, base["consts"])

    def _convert_args(self, src: int, dst: int, shape: tuple, consts: dict) -> dict:
        c = cluster.convert("in", "out", 128)
        refs = {"in": TensorRef(L1, src, "i8", shape), "out": TensorRef(L1, dst, "i8", shape),
                "mult": TensorRef(L1, consts[cluster.ONE[0]], "i32", (1,)),
                "shift": TensorRef(L1, consts[cluster.SHIFT[0]], "i8", (1,))}
        return {**refs, **c.args}

    def _tail(self, em: Emitter, acc: int, out: int, shape: tuple, consts: dict) -> None:
        rescale = self.ne16.rescale
        k = self.tail["mult"].size
        mult_type = "i32" if rescale.scale32 else "i16"
        out_type = KTYPE[rescale.output.dtype.name]
        args = cluster.call(rescale).args
        if self.out_offset:
            args.update(output_unsigned=1, out_zp=args["out_zp"] + self.out_offset)
        em.kernel("rescale", {"in": TensorRef(L1, acc, "i32", shape),
                              "mult": TensorRef(L1, consts["tail_mult"], mult_type, (k,)),
                              "shift": TensorRef(L1, consts["tail_shift"], "i8", (k,)),
                              "out": TensorRef(L1, out, out_type, shape), **args})
        if self.clamp is not None:
            ref = TensorRef(L1, out, out_type, shape)
            em.kernel("clamp", {"in": ref, "out": ref, "min": int(self.clamp.min_val),
                                "max": int(self.clamp.max_val)})
        em.barrier()


class ClusterWork(Work):
    """Operators run as cluster kernels, tile by tile (rows of the output)."""

    def __init__(self, layer: Layer):
        super().__init__(layer)
        self.transparent = len(layer.ops) == 1 and layer.ops[0].op in cluster.COPIES
        head = layer.ops[0]
        if head.op in cluster.WINDOWED and head.inputs[0].shape[0] == 1:
            self.mode = "window"       # bands of rows (contiguous in batch 1)
        elif head.op in cluster.WINDOWED:
            self.mode = "whole"
        elif all(op.op in cluster.ELEMENTWISE for op in layer.ops):
            self.mode = "rows"
        else:
            self.mode = "whole"

    def prefers_offset(self, name: str) -> bool | None:
        return None if cluster.reads_offset(self.layer.ops, name) else False

    def makes_offset(self) -> bool:
        return cluster.makes_offset(self.layer.ops)

    def setup(self, mode: str, bits: int) -> None:
        self.calls = cluster.calls(self.layer.ops, self.in_offsets, self.out_offset)
        made = dict([cluster.ONE, cluster.SHIFT])
        names = dict.fromkeys(n for c in self.calls for k, n in c.tensors.items()
                              if n in made or (n in self.tensors and self.tensors[n].is_const))
        self.const_data = {n: made[n] if n in made else self.tensors[n].data for n in names}
        produced = {c.out for c in self.calls}
        self.temps = [n for n in produced if n != self.output]
        self.temps += [n for c in self.calls for n in c.tensors.values()
                       if n.endswith("@s8") and n not in self.temps]
        self.temps = list(dict.fromkeys(self.temps))
        self._consts = concat({n: np.ascontiguousarray(d).reshape(-1).view(np.uint8)
                               for n, d in self.const_data.items()})

    def params(self, tiling: Tiling) -> tuple[np.ndarray, dict, list]:
        return (*self._consts, [])

    def const_bytes(self, tiling: Tiling) -> int:
        return self._consts[0].size

    # -- shapes and tiles -------------------------------------------------------------------------
    def _shape(self, name: str) -> tuple:
        if name.endswith("@s8"):
            return self.tensors[name[:-3]].shape
        if name in self.const_data and name not in self.tensors:
            return self.const_data[name].shape
        return self.tensors[name].shape

    def _dtype(self, name: str) -> str:
        if name.endswith("@s8"):
            return "int8"
        if name in self.const_data and name not in self.tensors:
            return {np.dtype(np.int32): "int32", np.dtype(np.int8): "int8"}[
                self.const_data[name].dtype]
        return self.tensors[name].dtype.name

    def tilings(self):
        out = self.tensors[self.output].shape
        if self.mode == "whole":
            yield self._rows_tiling(0, [(0, out[0])], tiled=False)
            return
        axis = 1 if self.mode == "window" else split_axis(out)
        for count in range(1, out[axis] + 1):
            rows = split(out[axis], count)
            if count == 1 or len(rows) == count:
                yield self._rows_tiling(axis, rows, tiled=True)

    def _tile_shape(self, name: str, axis: int, rows: tuple, step_rows: dict) -> tuple:
        shape = self._shape(name)
        if name in self.const_data:
            return shape
        source = name[:-3] if name.endswith("@s8") else name
        if source in step_rows:
            first, end = step_rows[source]
            return shape[:axis] + (end - first,) + shape[axis + 1:]
        out = self.tensors[self.output].shape
        if len(shape) == len(out) and shape[axis] == out[axis]:
            return shape[:axis] + (rows[1] - rows[0],) + shape[axis + 1:]
        return shape

    def _in_rows(self, rows: tuple) -> dict:
        """Windowed head: the input rows a band of output rows reads, and its padding."""
        if self.mode != "window":
            return {}
        head = self.layer.ops[0]
        kernel = head.kernel[0] if "POOL" in head.op else head.weight.shape[
            0 if head.op == "DEPTHWISE_CONV2D" else 1]
        dilation = 1 if "POOL" in head.op else head.dilation[0]
        first, end, top, bottom = window_rows(rows[0], rows[1], head.stride[0], kernel,
                                              head.pad[0], head.inputs[0].shape[1], dilation)
        return {head.inputs[0].name: (first, end), "@pad": (top, bottom)}

    def _rows_tiling(self, axis: int, rows_list: list, tiled: bool) -> Tiling:
        steps, scratch = [], {}
        for rows in rows_list:
            step_rows = self._in_rows(rows) if tiled else {}
            regions = {}
            for name in self.inputs + [self.output]:
                shape = self._shape(name)
                size = _itemsize(self._dtype(name))
                tile = self._tile_shape(name, axis, rows, step_rows) if tiled else shape
                if tile == shape:
                    regions[name] = (0, math.prod(shape) * size)
                else:
                    start = step_rows.get(name, rows)[0]
                    regions[name] = (start * row_bytes(shape, axis, size),
                                     math.prod(tile) * size)
            for name in self.temps:
                tile = self._tile_shape(name, axis, rows, step_rows) if tiled else \
                    self._shape(name)
                nbytes = math.prod(tile) * _itemsize(self._dtype(name))
                scratch[name] = max(scratch.get(name, 0), nbytes)
            steps.append(Step(regions, 0, {"axis": axis, "rows": rows, "tiled": tiled,
                                           "in_rows": step_rows}))
        return Tiling(steps, scratch)

    def compute(self, em: Emitter, step: Step, addr: dict, scratch: dict, base: dict) -> None:
        d = step.data
        consts = base["consts"]
        for c in self.calls:
            args = dict(c.args)
            for key, name in c.tensors.items():
                if name in addr:
                    where = addr[name]
                elif name in scratch:
                    where = scratch[name]
                else:
                    where = consts[name]
                shape = self._tile_shape(name, d["axis"], d["rows"], d["in_rows"]) \
                    if d["tiled"] else self._shape(name)
                args[key] = TensorRef(L1, where, KTYPE[self._dtype(name)], shape)
            if "@pad" in d["in_rows"] and "pad" in args:
                top, bottom = d["in_rows"]["@pad"]
                args["pad"] = (top, bottom) + tuple(args["pad"][2:])
            em.kernel(c.kernel, args)
        em.barrier()


def make(layer: Layer, matrix: bool, off_ne16: str | None) -> Work:
    """The work of ``layer``: a view, NE16 for a ``matrix`` layer unless ``off_ne16`` says
    why not (the reason becomes the layer's note), else cluster kernels."""
    ops = layer.ops
    if len(ops) == 1 and (ops[0].op == "RESHAPE" or cluster.is_identity_clamp(ops[0])):
        return View(layer)
    if matrix and off_ne16 is None:
        return Ne16Work(layer)
    work = ClusterWork(layer)
    if matrix:
        work.notes.append(f"on the cluster, not NE16: {off_ne16}")
    return work


