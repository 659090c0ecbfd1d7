"""Parameter tables: types, validation, overrides, TOML, sources; every row of every machine."""

import math
import re

import pytest

import hwsim
from hwsim.errors import ConfigError
from hwsim.targets import machine_class
from hwsim.timing.params import Param, ParamTable, Range, parse_assignment

TABLE = ParamTable([
    Param("clock_hz", 1e9, "Hz", "assumption: test", valid=Range(1e6, 1e11, "test")),
    Param("size", 1024, "bytes", "assumption: test", kind="arch",
          valid=Range(1, 1 << 20, "test")),
    Param("mode", "a", "", "assumption: test", choices=("a", "b")),
    Param("flag", False, "", "assumption: test"),
])


def test_conversion_and_validation():
    p = TABLE.defaults()
    p.update({"clock_hz": "2e9", "size": "8KiB", "mode": "b", "flag": "true"})
    assert (p.clock_hz, p.size, p.mode, p.flag) == (2e9, 8 << 10, "b", True)
    with pytest.raises(ConfigError, match="parameter size = '0x'"):
        p.set("size", "0x")
    with pytest.raises(ConfigError, match="expected one of a, b"):
        p.set("mode", "c")
    with pytest.raises(ConfigError, match=r"size = 0: expected 1..1,048,576 bytes \(test\)$"):
        p.set("size", 0)
    with pytest.raises(ConfigError, match="unknown parameter 'sise'"):
        p.set("sise", 1)


def test_rows_need_a_source_and_numbers_a_range():
    with pytest.raises(ValueError, match="no source"):
        Param("x", 1, "", " ", valid=Range(0, 1, "test"))
    with pytest.raises(ValueError, match="declares no valid range or choices"):
        Param("x", 1, "", "assumption: test")
    with pytest.raises(ValueError, match="declares no valid range or choices"):
        Param("x", "a", "", "assumption: test")
    with pytest.raises(ValueError, match="needs low <= high and a reason"):
        Range(0, 1, " ")
    with pytest.raises(ConfigError, match="default: parameter x = 5"):
        Param("x", 5, "", "assumption: test", valid=Range(0, 1, "test"))


def test_toml_and_unread(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('clock_hz = 5e8\n[group]\nx = 1\n')
    p = TABLE.defaults()
    with pytest.raises(ConfigError, match="unknown parameter 'group.x'"):
        p.load_toml(f)
    f.write_text('clock_hz = 5e8\nsize = 2048\n')
    p.load_toml(f)
    assert p.clock_hz == 5e8
    assert set(p.unread()) == {"size", "mode", "flag"}
    (tmp_path / "bad.toml").write_text("x = = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        p.load_toml(tmp_path / "bad.toml")


def test_parse_assignment():
    assert parse_assignment("a.b = 3") == ("a.b", "3")
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_assignment("novalue")


ROWS = [(name, row) for name in hwsim.targets() for row in machine_class(name).PARAMS]


def _step(value):
    return 1 if isinstance(value, int) else max(abs(value) * 1e-6, 1e-9)


@pytest.mark.parametrize("row", [row for _, row in ROWS], ids=[f"{m}.{r.name}" for m, r in ROWS])
def test_every_row_checks_its_type_and_range(row):
    assert row.source.strip()
    assert row.convert(row.default, "default") == row.default
    assert row.convert(str(row.default), "text") == row.default
    kind = type(row.default)
    if kind is bool:
        with pytest.raises(ConfigError, match=f"parameter {row.name} = 'maybe': expected bool"):
            row.convert("maybe", "test")
        return
    if row.choices is not None:
        bad = "nonsense" if kind is str else max(row.choices) + 1
        with pytest.raises(ConfigError, match=f"{row.name} = .*: expected one of"):
            row.convert(bad, "test")
    if kind is str:
        return
    for bad in (math.nan, math.inf, -math.inf, 1e30, -1e30):
        with pytest.raises(ConfigError, match=f"test: parameter {row.name} = "):
            row.convert(bad, "test")
    if row.valid is None:
        return
    assert row.valid.why.strip()
    assert row.convert(row.valid.low, "low") == row.valid.low
    assert row.convert(row.valid.high, "high") == row.valid.high
    for bad in (row.valid.low - _step(row.valid.low), row.valid.high + _step(row.valid.high)):
        bad = kind(bad)
        with pytest.raises(ConfigError) as error:
            row.convert(bad, "test")
        assert str(error.value) == (f"test: parameter {row.name} = {bad!r}: expected "
                                    f"{row.valid}{' ' + row.unit if row.unit else ''} "
                                    f"({row.valid.why})")


@pytest.mark.parametrize("text, message", [
    ("nan", "mpy_cycles_per_vector = nan: expected a finite number in 0.01..1,000"),
    ("1e30", "mpy_cycles_per_vector = 1e+30: expected 0.01..1,000 cycles"),
    ("-1", "mpy_cycles_per_vector = -1.0: expected 0.01..1,000 cycles"),
])
def test_nan_huge_and_negative_values_are_refused(text, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        hwsim.machine("hmx").params.set("mpy_cycles_per_vector", text)


EXAMPLES = {"hmx": "examples/hmx/dma_hvx_overlap.trace", "sme": "examples/sme/gemm_fp32.trace",
            "gap9": "examples/gap9/conv3x3.trace"}


@pytest.mark.parametrize("end", ["low", "high"])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_timing_parameter_at_its_limit_runs(name, end):
    """Every timing parameter at its lowest (or highest) valid value at once: the example still
    runs, gives its expected result, and takes a bounded number of cycles."""
    from pathlib import Path
    trace = Path(__file__).resolve().parents[1] / EXAMPLES[name]
    params = {row.name: getattr(row.valid, end) for row in machine_class(name).PARAMS
              if row.kind == "timing" and row.valid is not None}
    result = hwsim.machine(name).run(trace, params=params)
    assert not result.expect_failures
    assert 0 < result.cycles < 1e9
