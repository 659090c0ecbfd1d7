"""A lowered program as a trace file that ``hwsim run`` accepts (``hwsim compile``).

Beside ``NAME.trace`` go its data files: ``NAME.SPACE.bin`` with the memory image (constants),
``NAME.INPUT.npy`` with each graph input as stored, and ``NAME.OUTPUT.expect.npy`` with the
reference model's outputs when they are given (bit-exact modes), checked by ``.expect``. The trace
sets the parameters the program was lowered with, so that it runs with the same cycles as the
estimate it came from.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from hwsim.traces.files import atomic_open, atomic_write_bytes

SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _file(stem: str, part: str) -> str:
    return f"{stem}.{SAFE.sub('_', part)}"


def _npy(path: Path, array: np.ndarray) -> None:
    import io
    buffer = io.BytesIO()
    np.save(buffer, array)
    atomic_write_bytes(path, buffer.getvalue())


def write_trace(path: Path, low, options, graph, model: str, layers: list, lowered,
                feeds: dict, expected: dict | None, params: dict) -> Path:
    path = path if path.suffix == ".trace" else path.with_suffix(".trace")
    folder, stem = path.parent, path.stem
    bits = low.stored_weight_bits(graph, options)
    head = [f"// {model} lowered for {low.target} by hwsim compile: {options.mode} mode, "
            + (f"{bits}-bit weights, " if bits is not None else "")
            + f"{len(layers)} layers, {len(lowered.program)} instructions",
            f".target {low.target}"]
    head += [f".param {key} {value}" for key, value in params.items()]
    spaces: dict[str, list] = {}
    for space, addr, data in lowered.image:
        spaces.setdefault(space, []).append((addr, data))
    for space, chunks in spaces.items():
        first = min(a for a, _ in chunks)
        image = np.zeros(max(a + d.size for a, d in chunks) - first, np.uint8)
        for addr, data in chunks:
            image[addr - first:addr - first + data.size] = data
        name = _file(stem, f"{space}.bin")
        atomic_write_bytes(folder / name, image.tobytes())
        head.append(f".load {space} {first:#x} {name}")
    for tensor, place in lowered.inputs.items():
        name = _file(stem, f"{tensor}.npy")
        _npy(folder / name, place.encode(feeds[tensor]))
        head.append(f".load {place.space} {place.addr:#x} {name}")
    tail = []
    for tensor, place in lowered.outputs.items():
        if expected is None:
            tail.append(f"// {tensor}: no .expect (only bit-exact modes match the reference)")
            continue
        name = _file(stem, f"{tensor}.expect.npy")
        _npy(folder / name, place.encode(expected[tensor]))
        tail.append(f".expect {place.space} {place.addr:#x} {name}")
    names = {layer.index: f"{layer.kind} {layer.name}" for layer in layers}
    with atomic_open(path, "w") as fh:
        fh.write("\n".join(head) + "\n")
        lines, layer_of = low.lines(lowered.program), np.asarray(lowered.layer_of)
        starts = np.flatnonzero(np.diff(layer_of, prepend=-1)).tolist()   # a comment at each
        for start, end in zip(starts, starts[1:] + [len(lines)]):
            layer = int(layer_of[start])
            fh.write(f"// layer {layer}: {names.get(layer, '')}\n")
            fh.write("".join(line + "\n" for line in lines[start:end]))
        fh.write("\n".join(tail) + "\n")
    return path
