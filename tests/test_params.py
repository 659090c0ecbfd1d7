"""Parameter tables: types, validation, overrides, TOML, sources."""

import pytest

from hwsim.errors import ConfigError
from hwsim.timing.params import Param, ParamTable, parse_assignment

TABLE = ParamTable([
    Param("clock_hz", 1e9, "Hz", "assumption: test"),
    Param("size", 1024, "bytes", "assumption: test", kind="arch", minimum=1),
    Param("mode", "a", "", "assumption: test", choices=("a", "b")),
    Param("flag", False, "", "assumption: test"),
])


def test_conversion_and_validation():
    p = TABLE.defaults()
    p.update({"clock_hz": "2e9", "size": "8MiB", "mode": "b", "flag": "true"})
    assert (p.clock_hz, p.size, p.mode, p.flag) == (2e9, 8 << 20, "b", True)
    with pytest.raises(ConfigError, match="parameter size = '0x'"):
        p.set("size", "0x")
    with pytest.raises(ConfigError, match="expected one of a, b"):
        p.set("mode", "c")
    with pytest.raises(ConfigError, match="expected >= 1"):
        p.set("size", 0)
    with pytest.raises(ConfigError, match="unknown parameter 'sise'"):
        p.set("sise", 1)


def test_rows_need_a_source():
    with pytest.raises(ValueError, match="no source"):
        Param("x", 1, "", " ")


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
