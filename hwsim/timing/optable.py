"""A program as the timing engines see it: one row per op, in arrays.

A machine turns its program into an ``OpTable`` once, before anything runs; both engines (the
simpy reference, ``engine``, and the compiled core, ``core``) read the same table, so a cost is
computed in one place. A row says everything timing needs about one op (an instruction, or a
state of a unit's state machine):

* ``unit``: the in-order unit that executes it; ``cycles``: how long it occupies the unit;
  ``latency``: further cycles until its results are ready; ``macs``;
* ``stall`` cycles (reason ``stall_reason``) a machine's analytic model charges the op up front
  (e.g. memory bank conflicts counted from its addresses);
* its dependency resources, in order: each read, partly written (``parts``: one row of a tile) or
  written (``DEP_READ``, ``DEP_PART``, ``DEP_WRITE``), as resource ids whose kind names the
  stall (``wait z``, ``wait acc``);
* its transfers: (port, bytes) pairs; a port may be a group (``group``: the port of the group that
  frees first), and the bytes of a predicated access are filled in by the functional semantics;
* L1 ``traffic`` it makes for the contention model (``hwsim.timing.traffic``): none, paying for
  its accesses (``TRAFFIC_PAY`` with an access pattern), or recording a transfer's traffic for
  others to pay (``TRAFFIC_RECORD``);
* ``tag`` (the program instruction it belongs to: schedulers attribute time to layers by it),
  a ``label`` and ``args`` for the timeline.

Ragged columns (dependencies, transfers, access patterns) are CSR: ``dep_ptr[i]:dep_ptr[i+1]``
indexes op ``i``'s entries. ``OpBuilder`` appends rows one at a time (machines with thousands of
ops) or a whole ``Chunk`` of rows as arrays (machines with millions).
"""

from __future__ import annotations

import itertools
import math
import struct
from dataclasses import dataclass, field

import numba
import numpy as np

DEP_READ, DEP_PART, DEP_WRITE = 0, 1, 2
TRAFFIC_NONE, TRAFFIC_PAY, TRAFFIC_RECORD = 0, 1, 2


@dataclass(frozen=True)
class UnitSpec:
    """An in-order unit: ``depth`` ops buffered ahead of the front end; ``in_flight`` > 0 makes
    it decoupled (a DMA engine: its transfers proceed in the ports while it takes the next op, at
    most ``in_flight`` under way); ``peak_macs`` per cycle for utilisation."""

    name: str
    depth: int = 1
    in_flight: int = 0
    peak_macs: float = 0.0


@dataclass(frozen=True)
class PortSpec:
    """A pipe of ``width`` bytes per cycle plus ``latency`` cycles, first come first served."""

    name: str
    width: float
    latency: int = 0

    def __post_init__(self):
        if not self.width > 0:
            raise ValueError(f"port {self.name}: width must be positive")


@dataclass
class OpTable:
    """The rows of a program (module docstring) and the machine they run on."""

    units: list
    ports: list
    groups: list                 # port groups: tuples of port indices
    unit: np.ndarray             # int32 [n]
    cycles: np.ndarray           # int64 [n]
    latency: np.ndarray          # int64 [n]
    macs: np.ndarray             # int64 [n]
    tag: np.ndarray              # int64 [n], -1: none
    label: np.ndarray            # int32 [n] into ``labels``
    stall: np.ndarray            # int64 [n]
    stall_reason: np.ndarray     # int32 [n] into ``reasons``, -1: none
    dep_ptr: np.ndarray          # int64 [n + 1]
    dep_res: np.ndarray          # int32 [dependencies]
    dep_mode: np.ndarray         # int8 [dependencies]: DEP_READ, DEP_PART, DEP_WRITE
    xfer_ptr: np.ndarray         # int64 [n + 1]
    xfer_port: np.ndarray        # int32 [transfers]: a port, or -1 - group
    xfer_bytes: np.ndarray       # int64 [transfers]
    traffic: np.ndarray          # int8 [n]: TRAFFIC_*
    traffic_master: np.ndarray   # int32 [n]
    traffic_words: np.ndarray    # float64 [n]: L1 words the op moves
    traffic_rate: np.ndarray     # float64 [n]: bytes/cycle of a recorded transfer
    acc_ptr: np.ndarray          # int64 [n + 1]: the access pattern of a paying op
    acc_words: np.ndarray        # float64: words per access
    acc_count: np.ndarray        # int64: accesses
    labels: list                 # str
    reasons: list                # str: static stall reasons
    kinds: list                  # str: resource kinds
    res_kind: np.ndarray         # int32 [resources] into ``kinds``
    args: dict = field(default_factory=dict)   # op -> timeline args
    traffic_banks: int = 0       # L1 banks of the contention model (0: no model)
    traffic_reason: str = "l1 contention"

    def __len__(self) -> int:
        return len(self.unit)

    def deps(self, i: int) -> list[tuple[int, int]]:
        """(resource, mode) of op ``i``."""
        lo, hi = self.dep_ptr[i], self.dep_ptr[i + 1]
        return list(zip(self.dep_res[lo:hi].tolist(), self.dep_mode[lo:hi].tolist()))

    def transfers(self, i: int) -> range:
        return range(self.xfer_ptr[i], self.xfer_ptr[i + 1])

    def reason_names(self) -> list[str]:
        """Every stall reason an engine reports, by index (``Records.stalls`` columns): waits
        per resource kind, per port, transfers in flight, the static reasons, contention."""
        return ([f"wait {k}" for k in self.kinds] + [f"port {p.name}" for p in self.ports]
                + ["transfers in flight"] + list(self.reasons) + [self.traffic_reason])


@dataclass
class Chunk:
    """Many rows at once, as arrays (columns as in ``OpTable``; resources, labels and reasons
    already interned with the builder). Unset columns take their defaults. The arrays are handed
    over: the table may keep them as its columns."""

    unit: np.ndarray
    cycles: np.ndarray
    latency: np.ndarray = None
    macs: np.ndarray = None
    tag: np.ndarray = None
    label: np.ndarray = None
    dep_count: np.ndarray = None       # dependencies per op
    dep_res: np.ndarray = None
    dep_mode: np.ndarray = None
    xfer_count: np.ndarray = None      # transfers per op
    xfer_port: np.ndarray = None
    xfer_bytes: np.ndarray = None


ROW_INTS = 13       # the integer columns of ``_Rows.ints``
_ROW = struct.Struct(f"<{ROW_INTS}q")     # one op's integer columns, as ``_Rows`` keeps them
_PAIR = struct.Struct("<2q")              # a dependency's or a transfer's two integers


def pair_columns(pairs: list) -> np.ndarray:
    """[2, n] int64 from n pairs of integers (dependencies, transfers)."""
    return np.fromiter(itertools.chain.from_iterable(pairs), np.int64,
                       2 * len(pairs)).reshape(-1, 2).T


@numba.njit(cache=True, nogil=True)
def _entries(starts, which, counts, out):
    k = 0
    for i in range(which.size):
        first = starts[which[i]]
        for j in range(counts[i]):
            out[k] = first + j
            k += 1


def entries_of(starts: np.ndarray, which: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The flat indices of the entries of rows ``which`` of a ragged column whose row ``r``
    begins at ``starts[r]``, row after row (``counts``: each one's entries): how a table
    repeats the dependencies of the distinct instructions its ops are."""
    out = np.empty(int(counts.sum()), np.int64)
    _entries(starts, which, counts, out)
    return out


class _Rows:
    """Rows added one at a time: each op's integer columns, its dependencies and its transfers
    packed as int64 as they come (``struct`` converts Python integers several times faster
    than NumPy converts lists of them), which ``table`` reads as arrays."""

    def __init__(self):
        self.count = 0
        self.ints = bytearray()         # ROW_INTS per op
        self.deps = bytearray()         # (resource, mode) pairs
        self.xfers = bytearray()        # (port, bytes) pairs
        self.traffic: list = []         # (row, words, bytes per cycle) of ops with traffic
        self.acc_words: list = []
        self.acc_count: list = []

    def arrays(self) -> tuple:
        n = self.count
        cols = np.frombuffer(self.ints, np.int64).reshape(n, ROW_INTS).T
        (unit, cycles, latency, macs, tag, label, stall, reason, dep_count, xfer_count,
         traffic, master, acc_n) = cols
        words, rate = np.zeros(n), np.zeros(n)
        if self.traffic:
            row, w, r = zip(*self.traffic)
            words[list(row)], rate[list(row)] = w, r
        dep_res, dep_mode = np.frombuffer(self.deps, np.int64).reshape(-1, 2).T
        xfer_port, xfer_bytes = np.frombuffer(self.xfers, np.int64).reshape(-1, 2).T
        return (unit, cycles, latency, macs, tag, label, stall, reason, dep_count, dep_res,
                dep_mode, xfer_count, xfer_port, xfer_bytes, traffic, master, words, rate, acc_n,
                np.asarray(self.acc_words, np.float64), np.asarray(self.acc_count, np.int64))


class OpBuilder:
    """Builds an ``OpTable`` row by row (``add``) or chunk by chunk (``extend``)."""

    def __init__(self, units: list[UnitSpec], ports: list[PortSpec], groups=(),
                 traffic_banks: int = 0):
        self.units, self.ports, self.groups = list(units), list(ports), [tuple(g) for g in groups]
        self.unit_index = {u.name: i for i, u in enumerate(self.units)}
        self.port_index = {p.name: i for i, p in enumerate(self.ports)}
        self.traffic_banks = traffic_banks
        self._labels: dict[str, int] = {}
        self._reasons: dict[str, int] = {}
        self._kinds: dict[str, int] = {}
        self._resources: dict = {}
        self._res_kind: list[int] = []
        self._masters: dict[str, int] = {}
        self._rows = _Rows()            # rows since the last chunk
        self._chunks: list = []
        self.args: dict = {}
        self.count = 0

    # -- interning ---------------------------------------------------------------------------
    def resource(self, key) -> int:
        """The id of a dependency resource: a string (its own kind) or a tuple whose first
        element is its kind (``("z", 3)``, ``("vtcm", 17)``)."""
        found = self._resources.get(key)
        if found is None:
            kind = key[0] if isinstance(key, tuple) else key
            k = self._kinds.setdefault(str(kind), len(self._kinds))
            found = self._resources[key] = len(self._res_kind)
            self._res_kind.append(k)
        return found

    def label(self, text: str) -> int:
        return self._labels.setdefault(text, len(self._labels))

    def reason(self, text: str) -> int:
        return self._reasons.setdefault(text, len(self._reasons))

    def master(self, name: str) -> int:
        return self._masters.setdefault(name, len(self._masters))

    def port(self, name: str) -> int:
        return self.port_index[name]

    # -- rows --------------------------------------------------------------------------------
    def add(self, unit: str, cycles: int, latency: int = 0, *, reads=(), parts=(), writes=(),
            transfers=(), macs: int = 0, label: str = "", tag: int = -1, stall=None,
            traffic=None, args: dict | None = None) -> int:
        """Append one op; returns its index. ``transfers``: (port index or -1 - group, bytes);
        ``stall``: (reason, cycles); ``traffic``: ``("pay", master, {words: accesses})`` or
        ``("record", master, words, bytes_per_cycle)``."""
        rows = self._rows
        deps, xfers = rows.deps, rows.xfers
        first_dep, first_xfer = len(deps), len(xfers)
        resource, pair = self.resource, _PAIR.pack
        for r in reads:
            deps += pair(resource(r), DEP_READ)
        for r in parts:
            deps += pair(resource(r), DEP_PART)
        for r in writes:
            deps += pair(resource(r), DEP_WRITE)
        for p, b in transfers:
            xfers += pair(int(p), int(b))
        reason, stall_cycles = (-1, 0) if not stall or not stall[1] else \
            (self.reason(stall[0]), int(stall[1]))
        kind, master, accesses = (TRAFFIC_NONE, -1, 0) if traffic is None else \
            self._traffic(rows, traffic)
        rows.ints += _ROW.pack(self.unit_index[unit], int(cycles), int(latency), int(macs),
                               int(tag), self.label(label), stall_cycles, reason,
                               (len(deps) - first_dep) // _PAIR.size,
                               (len(xfers) - first_xfer) // _PAIR.size, kind, master, accesses)
        rows.count += 1
        if args:
            self.args[self.count] = args
        self.count += 1
        return self.count - 1

    def _traffic(self, rows: _Rows, traffic: tuple) -> tuple[int, int, int]:
        """(kind, master, accesses) of an op's ``traffic`` (``add``), its words and rate and
        access pattern recorded in ``rows``."""
        master = self.master(traffic[1])
        if traffic[0] != "pay":
            rows.traffic.append((rows.count, traffic[2], traffic[3]))
            return TRAFFIC_RECORD, master, 0
        words = 0
        for w, c in traffic[2].items():
            rows.acc_words.append(float(w))
            rows.acc_count.append(int(c))
            words += w * c
        rows.traffic.append((rows.count, words, 0.0))
        return TRAFFIC_PAY, master, len(traffic[2])

    def extend(self, chunk: Chunk) -> None:
        self._flush()
        n = len(chunk.unit)
        self._chunks.append(("chunk", chunk))
        self.count += n

    def _flush(self) -> None:
        if self._rows.count:
            self._chunks.append(("rows", self._rows))
            self._rows = _Rows()

    # -- the table ---------------------------------------------------------------------------
    def table(self) -> OpTable:
        self._flush()
        parts = [data.arrays() if kind == "rows" else self._chunk_arrays(data)
                 for kind, data in self._chunks]
        cols = {}
        names = ("unit", "cycles", "latency", "macs", "tag", "label", "stall", "stall_reason",
                 "dep_count", "dep_res", "dep_mode", "xfer_count", "xfer_port", "xfer_bytes",
                 "traffic", "traffic_master", "traffic_words", "traffic_rate", "acc_count_op",
                 "acc_words", "acc_count")
        dtypes = (np.int32, np.int64, np.int64, np.int64, np.int64, np.int32, np.int64,
                  np.int32, np.int64, np.int32, np.int8, np.int64, np.int32, np.int64, np.int8,
                  np.int32, np.float64, np.float64, np.int64, np.float64, np.int64)
        for k, (name, dtype) in enumerate(zip(names, dtypes)):
            arrays = [p[k] for p in parts]
            # a lone contiguous part is taken without a copy (a chunk's arrays are handed over);
            # every column is contiguous, so that the core compiles one signature for all
            cols[name] = np.zeros(0, dtype) if not arrays else \
                np.ascontiguousarray(arrays[0], dtype) if len(arrays) == 1 else \
                np.concatenate(arrays).astype(dtype, copy=False)
        return OpTable(
            self.units, self.ports, self.groups, cols["unit"], cols["cycles"], cols["latency"],
            cols["macs"], cols["tag"], cols["label"], cols["stall"], cols["stall_reason"],
            _ptr(cols["dep_count"]), cols["dep_res"], cols["dep_mode"], _ptr(cols["xfer_count"]),
            cols["xfer_port"], cols["xfer_bytes"], cols["traffic"], cols["traffic_master"],
            cols["traffic_words"], cols["traffic_rate"], _ptr(cols["acc_count_op"]),
            cols["acc_words"], cols["acc_count"], list(self._labels), list(self._reasons),
            list(self._kinds), np.asarray(self._res_kind, np.int32), dict(self.args),
            self.traffic_banks)

    @staticmethod
    def _chunk_arrays(c: Chunk) -> tuple:
        n = len(c.unit)

        def col(value, dtype, fill=0):
            return np.full(n, fill, dtype) if value is None else np.asarray(value, dtype)

        return (col(c.unit, np.int32), col(c.cycles, np.int64), col(c.latency, np.int64),
                col(c.macs, np.int64), col(c.tag, np.int64, -1), col(c.label, np.int32),
                np.zeros(n, np.int64), np.full(n, -1, np.int32), col(c.dep_count, np.int64),
                np.asarray(c.dep_res if c.dep_res is not None else [], np.int32),
                np.asarray(c.dep_mode if c.dep_mode is not None else [], np.int8),
                col(c.xfer_count, np.int64),
                np.asarray(c.xfer_port if c.xfer_port is not None else [], np.int32),
                np.asarray(c.xfer_bytes if c.xfer_bytes is not None else [], np.int64),
                np.zeros(n, np.int8), np.full(n, -1, np.int32), np.zeros(n), np.zeros(n),
                np.zeros(n, np.int64), np.zeros(0), np.zeros(0, np.int64))


def _ptr(counts: np.ndarray) -> np.ndarray:
    ptr = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr


def slot_cycles(nbytes: int, width: float) -> int:
    """Cycles a port of ``width`` bytes/cycle is held by ``nbytes`` (at least one if any)."""
    return max(1, math.ceil(nbytes / width)) if nbytes else 0
