"""What an engine records of a run: when every op started, ended and was ready, and every
transfer's slot, as arrays beside the op table. Statistics, the timeline and per-layer
attribution all derive from them; both engines produce them, so comparing two runs is comparing
arrays (``differences``)."""

from __future__ import annotations

from dataclasses import dataclass

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
        owner = np.repeat(np.arange(len(t)), np.diff(t.xfer_ptr))
        moved = np.flatnonzero(t.xfer_bytes > 0)
        # transfers of one op are consecutive, so sorting by the owner's rank keeps their order
        order = moved[np.argsort(self.rank[owner[moved]], kind="stable")]
        ports = self.slot_port[order]
        rows = np.stack([self.slot_start[order], self.slot_cycles[order], t.xfer_bytes[order],
                         t.tag[owner[order]]], axis=1)
        return [rows[ports == p] for p in range(len(t.ports))]

    def unit_log(self, u: int) -> np.ndarray:
        """[start, cycles, op] rows of unit ``u``'s ops, in program order."""
        ops = np.flatnonzero(self.table.unit == u)
        return np.stack([self.start[ops], self.end[ops] - self.start[ops], ops], axis=1)
