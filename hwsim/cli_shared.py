"""What the ``hwsim`` commands share (``hwsim.cli`` and the ``cli`` module of each package):
the progress line, the ``--param``/``--params`` overrides and the ``--engine`` option."""

from __future__ import annotations

import argparse
import sys
import time


class Progress:
    """A one-line progress report on stderr, shown only after a second and only on a terminal."""

    def __init__(self, what: str, stream=None):
        # stderr as it is now (a default bound at import would keep a replaced stream)
        self.what, self.stream = what, stream or sys.stderr
        self.start = time.monotonic()
        self.last = self.start
        self.shown = False
        self.enabled = self.stream.isatty()

    def __call__(self, done: int, cycle: int) -> None:
        now = time.monotonic()
        if not self.enabled or now - self.start < 1.0 or now - self.last < 0.2:
            return
        self.last, self.shown = now, True
        self.stream.write(f"\r{self.what}: {done:,} ops issued, cycle {cycle:,}, "
                          f"{now - self.start:.1f} s ")
        self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * 78 + "\r")
            self.stream.flush()


def param_overrides(args) -> dict[str, str]:
    """The ``--params`` file's values, then each ``--param KEY=VALUE`` (the last one wins)."""
    from hwsim.timing.params import parse_assignment, read_toml
    overrides: dict[str, object] = read_toml(args.params) if args.params else {}
    for text in args.param or ():
        key, value = parse_assignment(text)
        overrides[key] = value
    return overrides


def add_engine(parser: argparse.ArgumentParser) -> None:
    from hwsim.targets.base import ENGINES
    parser.add_argument("--engine", choices=ENGINES, default=None,
                        help="timing engine: compiled (default, fast) or simpy (the reference "
                             "twin; identical results)")
