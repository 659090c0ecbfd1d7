"""The results tables: one row per point (and with ``--layers`` one per point and layer), as
pandas DataFrames written to Parquet or CSV atomically.

Point columns: ``model, target, mode, weight_bits``, one column per swept key (named as the
key; empty for the points of other targets), ``cycles, seconds, macs``, ``bytes_LEVEL`` per
memory level of the targets' reports, ``status`` (ok or error), ``error`` (its one line) and
``wall_s`` (the estimate's wall time on its worker). Layer columns: the point's identity
columns, then ``layer, name, kind, units, cycles, macs``, ``bytes_LEVEL``, ``compute_cycles,
movement_cycles, bound, overlap`` (``hwsim.schedule.report`` says what each means).
"""

from __future__ import annotations

import os
from pathlib import Path

from hwsim.errors import ConfigError

FORMATS = (".parquet", ".csv")
LAYER_COLUMNS = ("layer", "name", "kind", "units", "cycles", "macs")
LAYER_TAIL = ("compute_cycles", "movement_cycles", "bound", "overlap")


def pandas():
    try:
        import pandas
    except ImportError:
        raise ConfigError("sweeps need pandas and dask: pip install 'hwsim[sweep]'") from None
    return pandas


def layers_path(output: str | Path) -> Path:
    """Where ``--layers`` writes: ``out/kws.parquet`` -> ``out/kws.layers.parquet``."""
    output = Path(output)
    return output.with_name(output.stem + ".layers" + output.suffix)


def check_output(path: str | Path, formats=FORMATS, what: str = "-o") -> Path:
    """Refuse an output path before any work: its format, its folder, a folder in its place."""
    path = Path(path)
    if path.suffix.lower() not in formats:
        raise ConfigError(f"{what} {path}: expected a {' or '.join(formats)} file")
    if path.is_dir():
        raise ConfigError(f"{what} {path}: is a folder")
    folder = path.parent
    if not folder.is_dir():
        raise ConfigError(f"{what} {path}: no folder {folder}")
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"{what} {path}: cannot write in {folder}")
    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ConfigError(f"{what} {path}: Parquet needs pyarrow: pip install "
                              "'hwsim[sweep]'") from None
    return path


def points_frame(spec, rows: list):
    """The point table of ``rows`` [(point, record)] in spec order."""
    pd = pandas()
    levels = _levels(record for _, record in rows)
    columns = {name: [] for name in (*_identity(spec), "cycles", "seconds", "macs",
                                     *(f"bytes_{lv}" for lv in levels), "status", "error",
                                     "wall_s")}
    for point, record in rows:
        _identify(columns, spec, point)
        for name in ("cycles", "seconds", "macs", "status", "error", "wall_s"):
            columns[name].append(record[name])
        for level in levels:
            columns[f"bytes_{level}"].append(record["bytes"].get(level))
    frame = pd.DataFrame(columns)
    return _types(frame, spec, ["cycles", "macs", *(f"bytes_{lv}" for lv in levels)])


def layers_frame(spec, rows: list):
    """One row per point and layer (failed points have none)."""
    pd = pandas()
    levels = _levels(layer for _, record in rows for layer in record["layers"])
    columns = {name: [] for name in (*_identity(spec), *LAYER_COLUMNS,
                                     *(f"bytes_{lv}" for lv in levels), *LAYER_TAIL)}
    for point, record in rows:
        for layer in record["layers"]:
            _identify(columns, spec, point)
            for name in LAYER_COLUMNS + LAYER_TAIL:
                columns[name].append(layer[name])
            for level in levels:
                columns[f"bytes_{level}"].append(layer["bytes"].get(level))
    frame = pd.DataFrame(columns)
    return _types(frame, spec, [*(f"bytes_{lv}" for lv in levels)])


def _identity(spec) -> list[str]:
    return ["model", "target", "mode", "weight_bits", *spec.params]


def _identify(columns: dict, spec, point) -> None:
    for name, value in (("model", point.model.text), ("target", point.target),
                        ("mode", point.mode), ("weight_bits", point.weight_bits)):
        columns[name].append(value)
    mine = dict(point.params)
    for key in spec.params:
        columns[key].append(mine.get(key))


def _levels(records) -> list[str]:
    """Memory levels in order of first appearance (a level a target lacks stays empty)."""
    seen: dict[str, None] = {}
    for record in records:
        seen.update(dict.fromkeys(record["bytes"]))
    return list(seen)


def _types(frame, spec, integers: list[str]):
    """Whole numbers as nullable integers (empty for failed points), and each swept column as
    its parameter's type (empty for the points of other targets)."""
    from hwsim.targets import machine_class
    for name in integers:
        frame[name] = frame[name].astype("Int64")
    for key in spec.params:
        target, _, param = key.partition(".")
        kind = type(machine_class(target).PARAMS.rows[param].default)
        dtype = {int: "Int64", float: "float64", bool: "boolean"}.get(kind)
        if dtype:
            frame[key] = frame[key].astype(dtype)
    return frame


def write_table(frame, path: str | Path) -> None:
    """Parquet or CSV by the suffix, atomically (a failed write leaves no file)."""
    from hwsim.traces.files import atomic_open
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        with atomic_open(path, "wb") as fh:
            frame.to_parquet(fh, index=False)
    else:
        with atomic_open(path, "w") as fh:
            frame.to_csv(fh, index=False)


def read_table(path: str | Path):
    """A results table written by ``write_table``."""
    pd = pandas()
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ConfigError(f"{path}: expected a sweep table ({' or '.join(FORMATS)})")
    try:
        return pd.read_parquet(path) if path.suffix.lower() == ".parquet" else pd.read_csv(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the table: {' '.join(str(exc).split())}") \
            from None
