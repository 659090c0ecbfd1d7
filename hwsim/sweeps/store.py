"""The results store: one JSON line per finished point, appended, flushed and fsynced.

The store survives the sweep being interrupted or killed: every line on disk is a finished
point, and a kill in the middle of a write leaves at most an unterminated last line, which the
next run drops. A rerun reads the store and skips the points it already holds, failed ones
included (an estimate that fails fails again), except those whose task was lost (``lost``: a
worker died under it): those run again, and the new line, which follows, wins.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hwsim.errors import ConfigError


def store_path(output: str | Path) -> Path:
    """The store beside a results table: ``out/kws.parquet`` -> ``out/kws.points.jsonl``."""
    output = Path(output)
    return output.with_name(output.stem + ".points.jsonl")


class Store:
    """Append-only JSON lines; ``path=None`` keeps the records in memory only."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.records: dict[str, dict] = {}
        self._file = None
        if self.path is not None and self.path.exists():
            self._read()

    def _read(self) -> None:
        data = self.path.read_bytes()
        complete = data.rfind(b"\n") + 1
        for number, line in enumerate(data[:complete].splitlines(), 1):
            try:
                record = json.loads(line)
                self.records[record["key"]] = record
            except (ValueError, KeyError, TypeError):
                raise ConfigError(f"{self.path}:{number}: not a sweep results line; move the "
                                  "file away to start afresh") from None
        if complete < len(data):          # a line cut short by a kill: never a finished point
            with open(self.path, "r+b") as fh:
                fh.truncate(complete)

    def finished(self, key: str) -> bool:
        """Whether the point ``key`` needs no run: its record is here and its task was not
        lost."""
        return key in self.records and not self.records[key].get("lost")

    def append(self, record: dict) -> None:
        self.records[record["key"]] = record
        if self.path is None:
            return
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
