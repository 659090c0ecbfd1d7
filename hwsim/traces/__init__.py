"""What we record: the trace reader, Chrome/Perfetto timelines, JSON summaries, reports."""

from hwsim.traces.reader import Trace, parse_trace, read_trace

__all__ = ["Trace", "parse_trace", "read_trace"]
