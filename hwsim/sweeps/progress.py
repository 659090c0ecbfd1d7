"""A one-line progress bar over a sweep's points on stderr, drawn only on a terminal."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """``bar(computed, failed)`` after each finished point; ``close()`` clears the line. The
    rate counts only the points computed in this run (not those reused from the store)."""

    WIDTH = 20

    def __init__(self, total: int, reused: int, stream=None):
        self.total, self.reused = total, reused
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.start = self.last = time.monotonic()
        self.shown = False

    def __call__(self, computed: int, failed: int) -> None:
        now = time.monotonic()
        left = self.total - self.reused - computed
        if not self.enabled or (now - self.last < 0.2 and left):
            return
        self.last, self.shown = now, True
        done = self.reused + computed
        rate = computed / (now - self.start) if now > self.start else 0.0
        eta = time.strftime("%H:%M:%S", time.gmtime(left / rate)) if rate else "--:--:--"
        filled = self.WIDTH * done // max(self.total, 1)
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{self.total} "
                          f"points ({self.reused} reused), {failed} failed, "
                          f"{60 * rate:.1f}/min, {eta} left ")
        self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()
