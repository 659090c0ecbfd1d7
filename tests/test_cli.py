"""The shared command line and Python API, driven through a real machine (HMX)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import hwsim
from hwsim.cli import main
from hwsim.errors import ConfigError, TraceSyntaxError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "hmx"


@pytest.fixture
def example(tmp_path):
    """A private copy of the basic multiply example (trace and data)."""
    shutil.copytree(EXAMPLES / "data", tmp_path / "data")
    trace = tmp_path / "basic.trace"
    trace.write_text((EXAMPLES / "basic_multiply.trace").read_text())
    return trace


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_prints_summary_and_writes_outputs(capsys, example, tmp_path):
    timeline, summary = tmp_path / "t.json", tmp_path / "s.json"
    code, out, err = run(capsys, "run", example, "--timeline", timeline, "--json", summary)
    assert code == 0, err
    for word in ("cycles", "time", "MACs", "utilisation", "busy", "stalled", "bytes"):
        assert word in out
    data = json.loads(summary.read_text())
    assert data["machine"] == "hmx" and data["cycles"] > 0 and data["macs"] == 32 * 32 * 32
    assert data["seconds"] == pytest.approx(data["cycles"] / data["clock_hz"])
    assert out.splitlines()[-1] == "expect vtcm:0x1800 data/basic_multiply_out.npy: 2048 " \
                                   "bytes match"   # the trace checked itself, and says so
    assert data["expects"] == [{"what": "vtcm:0x1800 data/basic_multiply_out.npy",
                                "bytes": 2048, "differ": 0,
                                "message": out.splitlines()[-1]}]
    events = json.loads(timeline.read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert len(tracks) >= 2
    assert any(e["ph"] == "X" for e in events) and any(e["ph"] == "C" for e in events)


def test_expect_mismatch_exits_1(capsys, example):
    out_file = example.parent / "data" / "basic_multiply_out.npy"
    data = np.load(out_file)
    data.reshape(-1)[0] ^= 1
    np.save(out_file, data)
    code, out, _ = run(capsys, "run", example)
    assert code == 1
    assert "MISMATCH" in out and "bytes differ" in out and "bytes match" not in out


@pytest.mark.parametrize("argv, message", [
    (["--param", "no_such_param=1"], "unknown parameter 'no_such_param'"),
    (["--param", "clock_hz"], "expected KEY=VALUE"),
    (["--param", "clock_hz=fast"], "clock_hz = 'fast': expected float"),
    (["--target", "sme"], "contradicts"),
    (["--params", "/nonexistent.toml"], "cannot read parameter file"),
    (["--param", "clock_hz=0"], "parameter clock_hz = 0.0: expected 1e+06..1e+11 Hz (1 MHz"),
    (["--param", "mpy_cycles_per_vector=nan"], "= nan: expected a finite number in 0.01..1,000"),
    (["--param", "vtcm_latency_cycles=-10"], "= -10: expected 0..10,000 cycles"),
])
def test_bad_input_is_one_line_and_exits_2(capsys, example, argv, message):
    code, out, err = run(capsys, "run", example, *argv)
    assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_trace_errors_name_file_line_column(capsys, tmp_path):
    trace = tmp_path / "bad.trace"
    trace.write_text(".target hmx\n.fill vtcm 0x0 16 300\n")
    code, _, err = run(capsys, "run", trace)
    assert code == 2 and f"{trace}:2:" in err and "BYTE: expected 0..255, found 300" in err
    trace.write_text("Q6_mxclracc_hf()\n")
    code, _, err = run(capsys, "run", trace)
    assert code == 2 and "no target" in err
    code, _, err = run(capsys, "run", tmp_path / "missing.trace")
    assert code == 2 and "no such trace file" in err


def test_debug_shows_the_traceback(example):
    with pytest.raises(ConfigError):
        main(["--debug", "run", str(example), "--param", "bogus=1"])


def test_param_overrides_last_one_wins(capsys, example, tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text("clock_hz = 1e9\n")
    summaries = []
    for extra in ([], ["--params", toml], ["--params", toml, "--param", "clock_hz=2e9"]):
        out_json = tmp_path / "s.json"
        assert run(capsys, "run", example, "--json", out_json, *extra)[0] == 0
        summaries.append(json.loads(out_json.read_text()))
    assert summaries[1]["clock_hz"] == 1e9 and summaries[2]["clock_hz"] == 2e9
    assert summaries[0]["cycles"] == summaries[1]["cycles"] == summaries[2]["cycles"]


def test_targets_lists_every_timing_parameter_with_source(capsys):
    code, out, _ = run(capsys, "targets")
    assert code == 0
    for name in hwsim.targets():
        assert f"{name}:" in out
        cls = hwsim.machine(name).__class__
        for row in cls.PARAMS:
            if row.kind == "timing":
                assert row.name in out and row.source[:20] in out
                line = next(line for line in out.splitlines() if f" {row.name} " in line)
                assert f" {row.limits()} " in line


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert hwsim.__version__ in capsys.readouterr().out


def test_python_api_state_persists_across_runs(example):
    m = hwsim.machine("hmx")
    first = m.run(example)
    assert first.cycles == 72 and first.seconds == 72 / 2.11e9 and first.stats["macs"] == 32768
    out = m.memory("vtcm").read(0x1800, 2048)
    assert out.dtype == np.uint8 and out.size == 2048 and not first.expect_failures
    # a second run on the same machine sees the first run's memory: convert the same result again
    m.memory("vtcm").write(0x1800, np.zeros(1024, np.float16))
    m.run("Q6_mxmem_cvt_RR(0x1800, (0b11100 >> 1) << 7)\n")
    assert np.array_equal(m.memory("vtcm").read(0x1800, 2048), out)
    with pytest.raises(ConfigError, match="no memory space 'dram'"):
        m.memory("dram")
    with pytest.raises(ConfigError, match="unknown target"):
        hwsim.machine("tpu")


def test_missing_trace_path_is_a_clear_error():
    with pytest.raises(TraceSyntaxError, match="no such trace file"):
        hwsim.machine("hmx").run("nowhere/kernel.trace")
