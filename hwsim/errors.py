"""One exception hierarchy for hwsim.

Every error renders as a single line that names where it happened (file:line:column, the
instruction and field, the memory space and address) and what was expected and found. The CLI
prints ``str(error)`` and exits with status 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

MESSAGE_LIMIT = 600


def clip(text: str, limit: int = 200) -> str:
    """``text``, or when it is longer than ``limit`` its head and tail around a note of how much
    was cut: an error echoes what it found, and a 1 MB trace line must not reach the terminal."""
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 8
    return f"{text[:head]}...[{len(text) - head - tail:,} characters]...{text[len(text) - tail:]}"


class HwsimError(Exception):
    """Root of every error hwsim raises on purpose. Its message is one line of bounded length:
    an error that quotes what it found (a trace line, a shape read from a corrupt file) is cut
    to ``MESSAGE_LIMIT`` characters."""

    def __init__(self, message: str = "", *args):
        super().__init__(clip(" ".join(str(message).splitlines()), MESSAGE_LIMIT), *args)


class Location:
    """Where a piece of input came from: file, line and column (1-based; 0 = unknown)."""

    __slots__ = ("file", "line", "column")

    def __init__(self, file: str = "<input>", line: int = 0, column: int = 0):
        self.file, self.line, self.column = file, line, column

    def __str__(self) -> str:
        text = self.file
        if self.line:
            text += f":{self.line}"
            if self.column:
                text += f":{self.column}"
        return text

    def at(self, column: int) -> "Location":
        return Location(self.file, self.line, column)


class TraceSyntaxError(HwsimError):
    """A trace or program line that cannot be read."""

    def __init__(self, loc: Location, message: str):
        self.loc, self.message = loc, message
        super().__init__(f"{loc}: {message}")


class EncodingError(HwsimError):
    """An instruction or register word with a field that does not fit or is not allowed."""

    def __init__(self, instruction: str, field: str, value, expected: str):
        self.instruction, self.field, self.value, self.expected = instruction, field, value, expected
        if isinstance(value, int) and not isinstance(value, bool):
            shown = hex(value) if abs(value) > 9 else str(value)
        else:
            shown = repr(value)
        super().__init__(f"{instruction}: field {field} = {shown}, expected {expected}")


class MemoryFault(HwsimError):
    """An access outside a space, misaligned, or to memory that cannot be written."""

    def __init__(self, space: str, address: int, size: int, reason: str):
        self.space, self.address, self.size, self.reason = space, address, size, reason
        super().__init__(f"memory fault in {space}: {size} bytes at {address:#x}: {reason}")


class ProgramError(HwsimError):
    """A sequence of instructions the machine does not allow (e.g. a weight load alone)."""


class TosaError(HwsimError):
    """A TOSA graph that breaks an ERROR_IF condition or cannot be read."""

    def __init__(self, operator: str, condition: str):
        self.operator, self.condition = operator, condition
        super().__init__(f"{operator}: {condition}")


class ScheduleError(HwsimError):
    """A graph (or part of one) that cannot be lowered onto a machine, and why."""


class ConfigError(HwsimError):
    """An unknown parameter, a bad parameter value, or an unknown machine."""


class ExpectMismatch(HwsimError):
    """Memory after a run differs from an ``.expect`` file (CLI exit status 1)."""
