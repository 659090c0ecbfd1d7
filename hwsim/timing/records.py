"""What an engine records of a run: when every op started, ended and was ready, and every
transfer's slot, as arrays beside the op table. Statistics, the timeline and per-layer
attribution all derive from them; both engines produce them, so comparing two runs is comparing
arrays (``differences``)."""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from hwsim.timing.optable import OpTable


@dataclass
class Records:
    table: OpTable
    cycles: int                  # the run ends when the last result lands
    start: np.ndarray            # int64 [ops]
    end: np.ndarray              # int64 [ops]: start + cycles + stalls (the unit is free then)
    ready: np.ndarray            # int64 [ops]: results land
    rank: np.ndarray             # int64 [ops]: the order ops started in
    slot_start: np.ndarray       # int64 [transfers]
    slot_cycles: np.ndarray      # int64 [transfers]
    slot_port: np.ndarray        # int64 [transfers]: the port used (groups resolved)
    busy: np.ndarray             # int64 [units]
    ops: np.ndarray              # int64 [units]
    macs: np.ndarray             # int64 [units]
    stalls: np.ndarray           # int64 [units, reasons]: ``OpTable.reason_names`` columns

    FIELDS = ("cycles", "start", "end", "ready", "rank", "slot_start", "slot_cycles",
              "slot_port", "busy", "ops", "macs", "stalls")

    def differences(self, other: "Records") -> list[str]:
        """The fields in which two runs of the same table differ (empty: identical)."""
        return [name for name in self.FIELDS
                if not np.array_equal(np.asarray(getattr(self, name)),
                                      np.asarray(getattr(other, name)))]

    def unit_stalls(self, u: int) -> dict[str, int]:
        names = self.table.reason_names()
        row = self.stalls[u]
        return {names[k]: int(row[k]) for k in np.flatnonzero(row)}

    def port_log(self, p: int) -> np.ndarray:
        """[start, cycles, bytes, tag] rows of the transfers through port ``p`` that moved
        bytes, in reservation order (op start order, then the op's own order)."""
        logs = self.__dict__.get("_port_logs")
        if logs is None:
            logs = self.__dict__["_port_logs"] = self._port_logs()
        return logs[p]

    def _port_logs(self) -> list[np.ndarray]:
        t = self.table
        rows, ptr = _port_rows(self.rank, t.xfer_ptr, t.xfer_bytes, self.slot_start,
                               self.slot_cycles, self.slot_port, t.tag, len(t.ports))
        return [rows[ptr[p]:ptr[p + 1]] for p in range(len(t.ports))]

    def unit_log(self, u: int) -> np.ndarray:
        """[start, cycles, op] rows of unit ``u``'s ops, in program order."""
        ops = np.flatnonzero(self.table.unit == u)
        return np.stack([self.start[ops], self.end[ops] - self.start[ops], ops], axis=1)


@numba.njit(cache=True, nogil=True)
def _port_rows(rank, xfer_ptr, xfer_bytes, slot_start, slot_cycles, slot_port, tag, nports):
    """``port_log``'s rows of every port, one port after the other, and where each port's
    rows begin: the ops walked in the order they started (``rank`` orders every op of a
    finished run), each op's transfers in its own order."""
    n = len(rank)
    by_rank = np.empty(n, np.int64)
    count = np.zeros(nports + 1, np.int64)
    for i in range(n):
        by_rank[rank[i]] = i
        for k in range(xfer_ptr[i], xfer_ptr[i + 1]):
            if xfer_bytes[k] > 0:
                count[slot_port[k] + 1] += 1
    ptr = np.cumsum(count)
    fill = ptr[:-1].copy()
    rows = np.empty((ptr[-1], 4), np.int64)
    for r in range(n):
        i = by_rank[r]
        for k in range(xfer_ptr[i], xfer_ptr[i + 1]):
            if xfer_bytes[k] > 0:
                j = fill[slot_port[k]]
                fill[slot_port[k]] += 1
                rows[j, 0] = slot_start[k]
                rows[j, 1] = slot_cycles[k]
                rows[j, 2] = xfer_bytes[k]
                rows[j, 3] = tag[i]
    return rows, ptr
