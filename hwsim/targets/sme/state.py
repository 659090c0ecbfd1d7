"""Architectural state of the SME machine, as real storage, and the ZA tile layout.

* Z0-Z31: SVL bits each, one byte array row per register; typed views for .H/.S/.D elements.
* P0-P15: SVL/8 bits each, stored one bool per bit; bit ``i`` governs byte ``i`` of a vector, so
  element ``e`` of size ``s`` bytes is active when bit ``e * s`` is set (Arm ARM, "predicate
  registers").
* ZA: SVL/8 x SVL/8 bytes. A tile ``ZAt.<T>`` with ``s``-byte elements is every ``s``-th row of the
  array starting at row ``t``: row ``i`` of the tile is array row ``i * s + t`` (Arm ARM B1.4,
  "ZA tile to array mapping"), so ZA0.H holds the even rows, ZA0.S rows 0, 4, 8, ... and a .H tile
  overlaps two .S tiles. Tiles are numpy views of the array, never copies.
* X0-X30 and SP (index 31), 64 bits, one uint64 array; register 31 is SP or XZR depending on the
  instruction.
* PSTATE.SM and PSTATE.ZA, FPCR (the fields below; FPSR is not modelled: the ZA-targeting
  instructions never write it), one small uint64 array ``control`` (``CONTROL_*`` indices) read
  through properties, and the flat memory ``mem``.

Every register lives in a numpy array so that the compiled interpreter (``interpreter``) and the
Python semantics (``semantics``) share one storage.
"""

from __future__ import annotations

import copy

import numpy as np

from hwsim.isa.fields import Field, Reserved, Word
from hwsim.memory.space import AddressSpace

# FPCR, Arm ARM C5.2: the fields the outer products read. AArch32-only and reserved bits read as
# zero here (they are RES0 in AArch64).
FPCR = Word("FPCR", [
    Reserved("31:27"), Field("AHP", "26"), Field("DN", "25"), Field("FZ", "24"),
    Field("RMode", "23:22"), Reserved("21:20"), Field("FZ16", "19"), Reserved("18:16"),
    Field("IDE", "15"), Reserved("14"), Field("EBF", "13"), Field("IXE", "12"), Field("UFE", "11"),
    Field("OFE", "10"), Field("DZE", "9"), Field("IOE", "8"), Reserved("7:3"), Field("NEP", "2"),
    Field("AH", "1"), Field("FIZ", "0"),
])

CONTROL_FPCR, CONTROL_SM, CONTROL_ZA = range(3)   # indices into ``SmeState.control``
ELEMENT_TYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
MASK64 = (1 << 64) - 1


def tile_rows(esize: int, tile: int, svl_bytes: int) -> np.ndarray:
    """ZA array rows holding tile ``tile`` of ``esize``-byte elements, in tile-row order."""
    return np.arange(tile, svl_bytes, esize)


def row_tile(row: int, esize: int) -> tuple[int, int]:
    """The inverse of ``tile_rows``: (tile, tile row) of ZA array row ``row``."""
    return row % esize, row // esize


class SmeState:
    """Registers, ZA and memory of one machine; persists across runs."""

    def __init__(self, svl_bits: int, mem_size: int):
        n = svl_bits // 8
        self.svl_bytes = n
        self.z = np.zeros((32, n), dtype=np.uint8)
        self.p = np.zeros((16, n), dtype=np.bool_)
        self.za = np.zeros((n, n), dtype=np.uint8)
        self.x = np.zeros(32, dtype=np.uint64)      # X0-X30, and SP at index 31
        self.control = np.zeros(3, dtype=np.uint64)  # FPCR, PSTATE.SM, PSTATE.ZA
        self.mem = AddressSpace("mem", mem_size)
        self._views()

    def _views(self) -> None:
        self.zv = {s: self.z.view(t) for s, t in ELEMENT_TYPES.items()}
        self.za_typed = {s: self.za.view(t) for s, t in ELEMENT_TYPES.items()}
        self.tiles = {(s, t): self.za[t::s].view(ELEMENT_TYPES[s])
                      for s in ELEMENT_TYPES for t in range(s)}

    def __deepcopy__(self, memo):
        """A copy whose typed views look at its own arrays (a copied view would not)."""
        other = SmeState.__new__(SmeState)
        memo[id(self)] = other
        for name, value in vars(self).items():
            if name not in ("zv", "za_typed", "tiles"):
                setattr(other, name, copy.deepcopy(value, memo))
        other._views()
        return other

    @property
    def fpcr(self) -> int:
        return int(self.control[CONTROL_FPCR])

    @fpcr.setter
    def fpcr(self, value: int) -> None:
        self.control[CONTROL_FPCR] = value

    @property
    def sm(self) -> bool:
        return bool(self.control[CONTROL_SM])

    @sm.setter
    def sm(self, value: bool) -> None:
        self.control[CONTROL_SM] = bool(value)

    @property
    def za_enabled(self) -> bool:
        return bool(self.control[CONTROL_ZA])

    @za_enabled.setter
    def za_enabled(self, value: bool) -> None:
        self.control[CONTROL_ZA] = bool(value)

    def tile(self, esize: int, tile: int) -> np.ndarray:
        """The live (dim x dim) view of tile ``ZA<tile>`` with ``esize``-byte elements."""
        return self.tiles[(esize, tile)]

    def slice(self, esize: int, tile: int, index: int, vertical: bool) -> np.ndarray:
        """The live view of one horizontal (row) or vertical (column) slice of a tile."""
        view = self.tiles[(esize, tile)]
        return view[:, index] if vertical else view[index]

    def reg(self, n: int, bits: int = 64) -> int:
        """X<n> (or W<n>) as an unsigned value; 31 reads as SP here (callers pass ZR as -1)."""
        value = 0 if n < 0 else int(self.x[n])
        return value & ((1 << bits) - 1)

    def set_reg(self, n: int, value: int, bits: int = 64) -> None:
        """Write X<n>, or W<n> zero-extended; n < 0 is XZR (discarded)."""
        if n >= 0:
            self.x[n] = value & ((1 << bits) - 1)

    def active(self, p: int, esize: int) -> np.ndarray:
        """The per-element active flags of P<p> for ``esize``-byte elements."""
        return self.p[p, ::esize]

    def set_predicate(self, p: int, esize: int, count: int) -> None:
        """P<p> with its first ``count`` ``esize``-byte elements active, the rest inactive."""
        self.p[p] = False
        self.p[p, :count * esize:esize] = True

    def reset_vectors(self) -> None:
        """Entering or leaving streaming mode zeroes Z, P (and FFR) (Arm ARM, ResetSVEState)."""
        self.z[:] = 0
        self.p[:] = False

    def read_tile(self, esize: int, tile: int) -> np.ndarray:
        """A copy of a tile as a (dim x dim) array of its element type (layout: ``tile_rows``)."""
        return self.tiles[(esize, tile)].copy()

    def write_tile(self, esize: int, tile: int, values: np.ndarray) -> None:
        """Store a (dim x dim) array into a tile: the inverse of ``read_tile``."""
        view = self.tiles[(esize, tile)]
        view[...] = np.asarray(values).view(view.dtype).reshape(view.shape)
