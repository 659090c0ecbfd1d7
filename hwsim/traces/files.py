"""Reading data files and writing outputs atomically (a failed run leaves no half-written file)."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

import numpy as np

from hwsim.errors import HwsimError


def load_bytes(path: Path, what: str) -> np.ndarray:
    """A ``.npy`` array's raw bytes, or any other file's bytes, as uint8."""
    try:
        if path.suffix == ".npy":
            array = np.load(path, allow_pickle=False)
            return np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        return np.fromfile(path, dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise HwsimError(f"{what}: cannot read {path}: {exc}") from None


def store_bytes(path: Path, data: np.ndarray) -> None:
    """``.npy``: a uint8 array; anything else: raw bytes."""
    if path.suffix == ".npy":
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(data, dtype=np.uint8))
        atomic_write_bytes(path, buffer.getvalue())
    else:
        atomic_write_bytes(path, np.asarray(data, dtype=np.uint8).tobytes())


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Write to a temporary file beside ``path`` and rename it into place only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_open(path, "w") as fh:
        fh.write(text)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_open(path, "wb") as fh:
        fh.write(data)
