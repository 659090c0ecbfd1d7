"""``hwsim estimate`` and ``hwsim compile`` from the command line."""

import json

import numpy as np
import pytest

from hwsim.cli import main
from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.loaders import save_graph
from hwsim.tosa.models import model, sample_input


@pytest.fixture(scope="module")
def tosa(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    graph = model("ds_cnn", width=0.25, resolution=12)
    save_graph(graph, folder / "ds_cnn.tosa")
    np.save(folder / "input.npy", sample_input(graph, seed=3))
    return folder


def test_estimate_prints_a_table_with_verdicts(tosa, capsys):
    assert main(["estimate", str(tosa / "ds_cnn.tosa"), "--check", "--input",
                 str(tosa / "input.npy")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "on gap9 (exact mode, 8-bit weights): 69,345 cycles" in out[0]
    assert out[1].split()[:4] == ["#", "layer", "shape", "unit"]
    rows = [line for line in out[2:] if line[:3].strip().isdigit()]
    assert len(rows) == 26 and all(line.rstrip().endswith("exact") for line in rows)
    assert any(line.startswith("output ") and ": exact" in line for line in out)


def test_estimate_writes_json_and_csv(tosa, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["estimate", str(tosa / "ds_cnn.tosa"), "--mode", "ne16", "--report", "json",
                 "-o", str(out), "--param", "l2_bytes_per_cycle=4"]) == 0
    data = json.loads(out.read_text())
    assert data["mode"] == "ne16" and data["params"]["l2_bytes_per_cycle"] == 4
    assert sum(layer["cycles"] for layer in data["layers"]) == pytest.approx(data["cycles"])
    assert {"L3", "L2", "MRAM", "L1"} == set(data["totals"]["levels"])
    assert "on gap9 (ne16 mode" in capsys.readouterr().out         # the headline only
    assert main(["estimate", str(tosa / "ds_cnn.tosa"), "--report", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("index,name,kind,shape,units,cycles,macs")


def test_timing_only_and_its_errors(tosa, capsys):
    assert main(["estimate", str(tosa / "ds_cnn.tosa"), "--no-numerics"]) == 0
    assert "timing only" in capsys.readouterr().out.splitlines()[0]
    assert main(["estimate", str(tosa / "ds_cnn.tosa"), "--no-numerics", "--check"]) == 2
    assert "--check needs the datapaths" in capsys.readouterr().err
    assert main(["estimate", str(tosa / "ds_cnn.tosa"), "--mode", "fast"]) == 2
    assert "numeric mode 'fast'; expected one of exact, ne16, cluster" in \
        capsys.readouterr().err
    assert main(["estimate", str(tosa / "ds_cnn.tosa"), "--mode", "cluster", "--weight-bits",
                 "4"]) == 2
    assert capsys.readouterr().err == "hwsim: error: gap9: cluster mode runs int8 weights; " \
                                      "weight bits: expected 8, found 4\n"
    assert main(["estimate", str(tosa / "ds_cnn.tosa"), "--weight-bits", "9"]) == 2
    assert "weight bits: expected 2..8, found 9" in capsys.readouterr().err
    assert main(["estimate", str(tosa / "ds_cnn.tosa"), "--target", "hmx"]) == 2
    assert "HMX runs float graphs in FP16" in capsys.readouterr().err
    for bad in ("conv_sdot_cycles=-2", "clock_hz=0", "l2_bytes_per_cycle=0"):
        assert main(["estimate", str(tosa / "ds_cnn.tosa"), "--param", bad]) == 2
        err = capsys.readouterr().err
        assert f"parameter {bad.split('=')[0]} = " in err and err.count("\n") == 1


def test_an_unsupported_operator_is_one_line(tmp_path, capsys):
    b = GraphBuilder("float")
    x = b.input((1, 4), "fp32")
    save_graph(b.build(b.unary("EXP", x)), tmp_path / "exp.tosa")
    assert main(["estimate", str(tmp_path / "exp.tosa")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "EXP[" in err[0] and "cannot run on gap9" in err[0]


def test_plot_and_timeline(tosa, tmp_path):
    pytest.importorskip("matplotlib")
    assert main(["estimate", str(tosa / "ds_cnn.tosa"), "--plot", str(tmp_path / "p.png"),
                 "--timeline", str(tmp_path / "t.json")]) == 0
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    layers = [e for e in events if e.get("cat") == "span" and e["ph"] == "b"]
    assert layers and layers[0]["name"].startswith("0 CONV2D")


def test_compile_then_run_gives_the_estimated_cycles(tosa, tmp_path, capsys):
    program = tmp_path / "ds.trace"
    assert main(["compile", str(tosa / "ds_cnn.tosa"), "-o", str(program), "--input",
                 str(tosa / "input.npy")]) == 0
    capsys.readouterr()
    assert main(["run", str(program)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("cycles"))
    assert main(["estimate", str(tosa / "ds_cnn.tosa"), "--report", "json", "-o",
                 str(tmp_path / "e.json"), "--input", str(tosa / "input.npy")]) == 0
    cycles = json.loads((tmp_path / "e.json").read_text())["cycles"]
    assert line.split()[1] == f"{cycles:,}"


def test_the_example_runs_and_is_exact_in_exact_mode(capsys):
    import runpy
    from pathlib import Path
    runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "schedule" /
                       "estimate_block.py"), run_name="__main__")
    exact, native = capsys.readouterr().out.split("\n\n")[:2]
    assert "(exact mode" in exact and "(ne16 mode" in native
    rows = [line for line in exact.splitlines() if line[:3].strip().isdigit()]
    assert len(rows) == 3 and all(line.rstrip().endswith("exact") for line in rows)
    assert any(line.startswith("output rescale") and line.endswith("reference: exact")
               for line in exact.splitlines())
