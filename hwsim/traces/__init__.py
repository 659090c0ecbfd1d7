"""Trace input: the trace reader (syntax, directives, data files) and the file helpers every
reader and writer uses (``files``). What a run gives is written by ``hwsim.results``."""

from hwsim.traces.reader import Trace, parse_trace, read_trace

__all__ = ["Trace", "parse_trace", "read_trace"]
