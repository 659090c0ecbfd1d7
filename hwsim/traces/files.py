"""Reading data files and writing outputs.

Inputs (``.load``, ``.expect``) are checked before they are read: a directory, a device, an empty
file, or a ``.npy`` whose header claims more data than the file holds or than its destination
takes is a one-line error, never a read of gigabytes. Outputs are checked before any work
(``check_output``: the folder must exist, it is never created) and written so that a failed run
leaves nothing half-written: a regular file (or a new path) through a temporary file beside it
that replaces it only when complete; anything else (a FIFO, a device, a symlink) straight through
to what it names; ``-`` and ``/dev/stdout`` mean standard output. New files get the umask's
permissions; a replaced file keeps its own.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import IO, Iterator

import numpy as np

from hwsim.errors import HwsimError

STANDARD_OUTPUT = ("-", "/dev/stdout")


def load_bytes(path: Path, what: str, limit: int | None = None) -> np.ndarray:
    """A ``.npy`` array's raw bytes, or any other file's bytes, as uint8. ``limit``: the most
    bytes the destination takes; a larger file is refused before it is read."""
    try:
        info = path.stat()
    except OSError as exc:
        raise HwsimError(f"{what}: cannot read {path}: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise HwsimError(f"{what}: {path} is a directory, expected a data file")
    if not stat.S_ISREG(info.st_mode):
        raise HwsimError(f"{what}: {path} is not a regular file (a device or a pipe)")
    if info.st_size == 0:
        raise HwsimError(f"{what}: {path} is empty (0 bytes)")
    try:
        if path.suffix == ".npy":
            _check_npy(path, info.st_size, what, limit)
            array = np.load(path, allow_pickle=False)
            return np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        if limit is not None and info.st_size > limit:
            raise HwsimError(f"{what}: {path} holds {info.st_size:,} bytes; its destination "
                             f"takes {limit:,}")
        return np.fromfile(path, dtype=np.uint8)
    except (OSError, ValueError, EOFError) as exc:
        raise HwsimError(f"{what}: cannot read {path}: {exc}") from None


def _check_npy(path: Path, size: int, what: str, limit: int | None) -> None:
    """Refuse a ``.npy`` whose header describes no data, more data than the file holds, or
    more than ``limit`` bytes, from its header alone."""
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f".npy format version {version[0]}.{version[1]}; expected 1.0 or 2.0")
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, _, dtype = read(fh)
        data_start = fh.tell()
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes == 0:
        raise HwsimError(f"{what}: {path} holds an empty array {dtype}{list(shape)}")
    if nbytes > size - data_start:
        raise HwsimError(f"{what}: {path} is truncated: its header describes {nbytes:,} bytes "
                         f"of data ({dtype}{list(shape)}), the file holds {size - data_start:,}")
    if limit is not None and nbytes > limit:
        raise HwsimError(f"{what}: {path} holds {nbytes:,} bytes ({dtype}{list(shape)}); its "
                         f"destination takes {limit:,}")


def store_bytes(path: Path, data: np.ndarray) -> None:
    """``.npy``: a uint8 array; anything else: raw bytes."""
    if path.suffix == ".npy":
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(data, dtype=np.uint8))
        atomic_write_bytes(path, buffer.getvalue())
    else:
        atomic_write_bytes(path, np.asarray(data, dtype=np.uint8).tobytes())


def check_output(path: str | Path, what: str = "output") -> None:
    """Refuse, before any work, an output path that cannot be written: a directory, a path in
    a folder that does not exist (it is never created: a typo must not go unnoticed) or cannot
    be written, a path under a file."""
    if str(path) in STANDARD_OUTPUT:
        return
    path = Path(path)
    if os.path.islink(path) and not path.exists():        # a dangling link: its target is new
        return check_output(path.resolve(), what)
    problem = _output_problem(path)
    if problem:
        raise HwsimError(f"{what} {path}: {problem}")


def _output_problem(path: Path) -> str | None:
    folder = path.parent
    if path.is_dir():
        return "is a directory"
    if not folder.is_dir():
        existing = next((p for p in (folder, *folder.parents) if os.path.lexists(p)), Path("."))
        return (f"{existing} is not a directory" if not existing.is_dir()
                else f"no such directory {folder}")
    if os.path.lexists(path) and not _regular(path):
        return None if os.access(path, os.W_OK) else "permission denied"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"cannot create files in {folder} (permission denied)"
    return None


def _regular(path: Path) -> bool:
    """A regular file itself (not a symlink to one, a FIFO or a device)."""
    return stat.S_ISREG(os.lstat(path).st_mode)


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", what: str = "output") -> Iterator[IO]:
    """Open an output for writing (module docstring: checked, atomic for regular files and new
    paths, straight through otherwise, ``-`` for standard output). Errors are one line."""
    if str(path) in STANDARD_OUTPUT:
        stream = sys.stdout.buffer if "b" in mode else sys.stdout
        yield stream
        stream.flush()
        return
    path = Path(path)
    check_output(path, what)
    try:
        if os.path.lexists(path) and not _regular(path):
            with open(path, mode) as fh:
                yield fh
        else:
            with _replacing(path, mode) as fh:
                yield fh
    except OSError as exc:
        raise HwsimError(f"{what} {path}: cannot write: {exc.strerror or exc}") from None


@contextlib.contextmanager
def _replacing(path: Path, mode: str) -> Iterator[IO]:
    """A temporary file beside ``path`` that replaces it once closed without an error (and is
    removed on any error, Ctrl-C or SIGTERM)."""
    keep = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else None
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)     # the umask applies
    try:
        with os.fdopen(fd, mode) as fh:
            if keep is not None:
                os.fchmod(fh.fileno(), keep)
            yield fh
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str, what: str = "output") -> None:
    with atomic_open(path, "w", what) as fh:
        fh.write(text)


def atomic_write_bytes(path: str | Path, data: bytes, what: str = "output") -> None:
    with atomic_open(path, "wb", what) as fh:
        fh.write(data)
