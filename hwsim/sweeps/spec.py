"""A sweep's spec: read, validated whole, and expanded into design points.

The spec is TOML (paths relative to the spec file) or the same data as a dict (paths relative
to the working directory)::

    models = ["../models/ds_cnn_int8.tosa"]   # .tflite, .tosa or TOSA MLIR
    targets = ["gap9"]
    modes = ["exact"]          # optional; a target with none of them runs its default mode
    weight_bits = [4, 8]       # optional, default [8]; every target must accept each value
    numerics = false           # optional, default false: timing only
    [params]                   # TARGET.PARAM as `hwsim targets NAME --all` lists them
    "gap9.l1_size" = [65536, 131072]
    "gap9.l2_bytes_per_cycle" = [4, 8]

Every value is checked by its parameter's own table (``ParamSet.set``: the name, the type and
the range the machine declares) and every model is loaded before any point runs, so a bad spec
fails with one line naming the file, line and key. The points of a target are every
combination of its keys' values, for each model, mode and weight width.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from hwsim.errors import ConfigError, HwsimError

KEYS = ("models", "targets", "modes", "weight_bits", "numerics", "params")


@dataclass(frozen=True)
class Model:
    text: str        # as the spec names it
    path: str        # absolute
    sha256: str      # of the file's bytes: a point's identity follows the content


@dataclass(frozen=True)
class Point:
    """One design point: what ``hwsim.estimate`` is called with."""

    model: Model
    target: str
    mode: str
    weight_bits: int
    numerics: bool
    params: tuple    # (TARGET.PARAM, value) in spec order, values as their parameter's type

    @property
    def machine_params(self) -> dict:
        return {key.split(".", 1)[1]: value for key, value in self.params}

    @property
    def key(self) -> str:
        """A stable name for the point's results: the same point in any later run of the same
        hwsim version has it."""
        from hwsim.version import __version__
        ident = [__version__, self.model.sha256, self.target, self.mode, self.weight_bits,
                 self.numerics, sorted(self.machine_params.items())]
        return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Spec:
    origin: str                  # the spec file, or "spec" for a dict
    models: tuple
    targets: tuple
    modes: tuple | None
    weight_bits: tuple
    numerics: bool
    params: dict                 # TARGET.PARAM -> tuple of values (spec order)
    default_modes: dict          # (model path, target) -> the target's default for the graph

    def points(self) -> list[Point]:
        out = []
        for model, target in itertools.product(self.models, self.targets):
            keys = [k for k in self.params if k.split(".", 1)[0] == target]
            for mode in self._modes(model, target):
                for bits in self.weight_bits:
                    for values in itertools.product(*(self.params[k] for k in keys)):
                        out.append(Point(model, target, mode, bits, self.numerics,
                                         tuple(zip(keys, values))))
        return out

    def _modes(self, model: Model, target: str) -> list[str]:
        from hwsim.schedule import lowering
        known = [m for m in self.modes or () if m in lowering(target).modes]
        return known or [self.default_modes[model.path, target]]


def read_spec(spec) -> Spec:
    """A validated ``Spec`` from a TOML file's path or a dict (module docstring)."""
    if isinstance(spec, dict):
        return _validate(dict(spec), "spec", "", Path.cwd())
    path = Path(spec)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read sweep spec: {exc.strerror}") from None
    from hwsim.timing.params import tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return _validate(data, str(path), text, path.resolve().parent)


def _validate(data: dict, origin: str, text: str, base: Path) -> Spec:
    def where(key: str) -> str:
        return f"{origin}{_line(text, key)}: {key}"

    for key in data:
        if key not in KEYS:
            raise ConfigError(f"{where(key)}: unknown key; expected one of {', '.join(KEYS)}")
    for key in ("models", "targets"):
        if key not in data:
            raise ConfigError(f"{origin}: {key}: missing (a list)")
    targets = _targets(_strings(data["targets"], where("targets")), where("targets"))
    models = tuple(_model(m, base, where("models")) for m in
                   _strings(data["models"], where("models")))
    for a, b in itertools.combinations(models, 2):
        if a.sha256 == b.sha256:
            raise ConfigError(f"{where('models')}: {a.text} and {b.text} are the same model "
                              "(identical bytes)")
    modes = _check_modes(data["modes"], targets, where("modes")) if "modes" in data else None
    bits = _weight_bits(data.get("weight_bits", [8]), targets, where("weight_bits"))
    numerics = data.get("numerics", False)
    if not isinstance(numerics, bool):
        raise ConfigError(f"{where('numerics')}: expected true or false, found {numerics!r}")
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise ConfigError(f"{where('params')}: expected a table of TARGET.PARAM = [values]")
    swept = {key: _values(key, values, targets, f"{origin}{_line(text, key)}")
             for key, values in _flatten(params).items()}
    return Spec(origin, models, targets, modes, bits, numerics, swept,
                _default_modes(models, targets, where("models")))


def _strings(value, where: str) -> list[str]:
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a non-empty list of strings, found {value!r}")
    if len(set(value)) < len(value):
        raise ConfigError(f"{where}: {value!r} lists an entry twice")
    return value


def _targets(names: list[str], where: str) -> tuple:
    from hwsim.schedule import LOWERINGS
    for name in names:
        if name not in LOWERINGS:
            raise ConfigError(f"{where}: unknown target {name!r}; expected one of "
                              f"{', '.join(LOWERINGS)}")
    return tuple(names)


def _model(text: str, base: Path, where: str) -> Model:
    path = (base / text).resolve()
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ConfigError(f"{where}: {text}: cannot read model ({exc.strerror})") from None
    return Model(text, str(path), digest)


def _check_modes(value, targets: tuple, where: str) -> tuple:
    from hwsim.schedule import lowering
    modes = _strings(value, where)
    for mode in modes:
        if not any(mode in lowering(t).modes for t in targets):
            raise ConfigError(f"{where}: {mode!r} is not a mode of "
                              + "; ".join(f"{t} ({', '.join(lowering(t).modes)})"
                                          for t in targets))
    return tuple(modes)


def _weight_bits(value, targets: tuple, where: str) -> tuple:
    from hwsim.schedule import lowering
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ConfigError(f"{where}: expected a non-empty list of integers, found {value!r}")
    if len(set(value)) < len(value):
        raise ConfigError(f"{where}: {value!r} lists a width twice")
    for target in targets:
        accepted = lowering(target).weight_bits
        for bits in value:
            if bits not in accepted:
                raise ConfigError(
                    f"{where}: {bits}: {target} does not requantise weights (8 only)"
                    if accepted == (8,) else
                    f"{where}: {bits}: {target} accepts {min(accepted)}..{max(accepted)}")
    return tuple(value)


def _values(key: str, values, targets: tuple, origin: str) -> tuple:
    """The values of one swept key, each converted and checked by the parameter's table."""
    from hwsim.targets import machine_class
    where = f"{origin}: {key}"
    target, dot, name = key.partition(".")
    if not dot or not name:
        raise ConfigError(f"{where}: expected TARGET.PARAM (e.g. gap9.clock_hz)")
    if target not in targets:
        raise ConfigError(f"{where}: target {target!r} is not in targets "
                          f"({', '.join(targets)})")
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if not values:
        raise ConfigError(f"{where}: expected at least one value")
    table = machine_class(target).PARAMS.defaults()
    converted = []
    for value in values:
        table.set(name, value, origin=where)
        converted.append(table.as_dict()[name])
    if len(set(converted)) < len(converted):
        raise ConfigError(f"{where}: {values!r} lists a value twice")
    return tuple(converted)


def _default_modes(models: tuple, targets: tuple, where: str) -> dict:
    """Each model is loaded here, once, so that an unreadable model fails before any work."""
    from hwsim.schedule import lowering
    from hwsim.tosa import load_graph
    out = {}
    for model in models:
        try:
            graph = load_graph(model.path)
        except HwsimError as exc:
            raise ConfigError(f"{where}: {model.text}: {exc}") from None
        for target in targets:
            out[model.path, target] = lowering(target).default_mode(graph)
    return out


def _flatten(table: dict, prefix: str = "") -> dict:
    """``"gap9.clock_hz" = [...]`` and ``gap9.clock_hz = [...]`` (a nested table) alike."""
    flat = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _line(text: str, key: str) -> str:
    """``:LINE`` of the line that assigns ``key`` (quoted or dotted), or "" if not found."""
    pattern = r"|".join(re.escape(k) for k in (f'"{key}"', f"'{key}'", key))
    match = re.search(rf"^[ \t]*(?:{pattern})[ \t]*=", text, re.M)
    return f":{text.count(chr(10), 0, match.start()) + 1}" if match else ""
