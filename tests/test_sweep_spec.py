"""Sweeps without a cluster: the spec and its errors, the points, the store, the worker's
caches against plain estimates, the Pareto front and the plot command."""

import json
from pathlib import Path

import numpy as np
import pytest

import hwsim
from hwsim.cli import main
from hwsim.errors import ConfigError, HwsimError
from hwsim.sweeps import Store, read_spec
from hwsim.sweeps.plot import pareto_front
from hwsim.sweeps.worker import run_point

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "models" / "ds_cnn_int8.tosa"
EXAMPLE = ROOT / "examples" / "sweeps" / "gap9_kws.toml"


def spec_file(folder: Path, text: str, model: Path = MODEL) -> Path:
    path = folder / "spec.toml"
    path.write_text(f'models = ["{model}"]\n' + text)
    return path


GOOD = 'targets = ["gap9"]\n[params]\n"gap9.l1_size" = [65536]\n'

# (spec after the models line, line of the error, what the error says)
BAD = [
    ('model = "x"\ntargets = ["gap9"]\n', 2, "model: unknown key; expected one of models, "
                                             "targets, modes, weight_bits, numerics, params"),
    ('targets = ["tpu"]\n', 2, "targets: unknown target 'tpu'; expected one of gap9, hmx, sme"),
    ("[params]\n", 0, "targets: missing"),
    ('targets = ["gap9"]\n[params]\n"sme.svl" = [256]\n', 4,
     "sme.svl: target 'sme' is not in targets (gap9)"),
    ('targets = ["gap9"]\n[params]\n"gap9.clock" = [1e8]\n', 4,
     "gap9.clock: unknown parameter 'clock' (did you mean clock_hz?)"),
    ('targets = ["gap9"]\n[params]\n"gap9.l1_size" = ["big"]\n', 4,
     "gap9.l1_size: parameter l1_size = 'big': expected int"),
    ('targets = ["gap9"]\n[params]\n"gap9.l1_size" = [65536, 1024]\n', 4,
     "gap9.l1_size: parameter l1_size = 1024: expected 4,096..67,108,864 bytes"),
    ('targets = ["gap9"]\n[params]\n"gap9.ne16_timeline" = ["fast"]\n', 4,
     "parameter ne16_timeline = 'fast': expected one of state, job"),
    ('targets = ["gap9"]\n[params]\n"gap9.l1_size" = [65536, "64k"]\n', 4,
     "gap9.l1_size: [65536, '64k'] lists a value twice"),
    ('targets = ["gap9"]\n[params]\n"gap9" = [1]\n', 4, "gap9: expected TARGET.PARAM"),
    ('targets = ["gap9"]\nmodes = ["int8"]\n', 3,
     "modes: 'int8' is not a mode of gap9 (exact, ne16, cluster)"),
    ('targets = ["sme"]\nweight_bits = [4, 8]\n', 3,
     "weight_bits: 4: sme does not requantise weights (8 only)"),
    ('targets = ["gap9"]\nweight_bits = [9]\n', 3, "weight_bits: 9: gap9 accepts 2..8"),
    ('targets = ["gap9"]\nnumerics = "yes"\n', 3, "numerics: expected true or false"),
    ('targets = ["gap9"\n', 0, "not valid TOML"),
]


@pytest.mark.parametrize("text, line, message", BAD, ids=[b[2][:30] for b in BAD])
def test_a_bad_spec_fails_with_one_line_naming_the_key(tmp_path, text, line, message):
    path = spec_file(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        read_spec(path)
    text = str(error.value)
    assert "\n" not in text and message in text
    assert text.startswith(f"{path}:{line}: " if line else f"{path}: ")


def test_models_must_exist_be_models_and_differ(tmp_path):
    with pytest.raises(ConfigError, match=r"spec.toml:1: models: nope.tosa: cannot read "
                                          r"model \(No such file or directory\)"):
        read_spec(spec_file(tmp_path, GOOD, Path("nope.tosa")))
    (tmp_path / "notes.tosa").write_text("not a model")
    with pytest.raises(ConfigError) as error:
        read_spec(spec_file(tmp_path, GOOD, tmp_path / "notes.tosa"))
    assert "models: " in str(error.value) and "notes.tosa" in str(error.value)
    (tmp_path / "copy.tosa").write_bytes(MODEL.read_bytes())
    path = tmp_path / "two.toml"
    path.write_text(f'models = ["{MODEL}", "copy.tosa"]\n' + GOOD)
    with pytest.raises(ConfigError, match="copy.tosa are the same model"):
        read_spec(path)


def test_the_command_refuses_a_bad_spec_or_output_before_any_work(tmp_path, capsys):
    bad = spec_file(tmp_path, 'targets = ["gap9"]\n[params]\n"gap9.l1_size" = [1024]\n')
    out = tmp_path / "r.parquet"
    assert main(["sweep", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gap9.l1_size: parameter l1_size = 1024" in err
    assert main(["sweep", str(EXAMPLE), "-o", str(tmp_path / "r.xlsx")]) == 2
    assert "r.xlsx: expected a .parquet or .csv file" in capsys.readouterr().err
    assert main(["sweep", str(EXAMPLE), "-o", str(tmp_path / "no" / "r.csv")]) == 2
    assert "no folder" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [bad]         # no store, no table


def test_points_are_the_grid_of_each_target(tmp_path):
    spec = read_spec(spec_file(tmp_path, 'targets = ["gap9", "sme"]\nmodes = ["exact"]\n'
                                         '[params]\n"gap9.l1_size" = [32768, 65536]\n'
                                         '"gap9.clock_hz" = [240e6, 370e6, 400e6]\n'
                                         '"sme.svl" = [256, 512]\n'))
    points = spec.points()
    assert [(p.target, p.mode, p.params) for p in points] == [
        ("gap9", "exact", (("gap9.l1_size", size), ("gap9.clock_hz", clock)))
        for size in (32768, 65536) for clock in (240e6, 370e6, 400e6)] + [
        ("sme", "int8", (("sme.svl", 256),)), ("sme", "int8", (("sme.svl", 512),))]
    assert len({p.key for p in points}) == 8
    # a dotted key is the same key; an explicit default mode is the same point
    again = read_spec(spec_file(tmp_path, 'targets = ["sme", "gap9"]\n[params]\n'
                                          'sme.svl = [512]\ngap9.clock_hz = 370e6\n'
                                          'gap9.l1_size = ["32k"]\n'))
    assert {p.key for p in again.points()} < {p.key for p in points}


def test_a_spec_as_a_dict_is_relative_to_the_working_directory(monkeypatch):
    monkeypatch.chdir(MODEL.parent)
    spec = read_spec({"models": [MODEL.name], "targets": ["gap9"], "weight_bits": [4, 8]})
    assert [(p.model.path, p.weight_bits) for p in spec.points()] == [
        (str(MODEL), 4), (str(MODEL), 8)]


def test_worker_rows_equal_plain_estimates(tmp_path):
    """The worker's graph and lowering caches change nothing: every point, timing and
    architectural parameters alike, equals a fresh in-process estimate; errors are rows."""
    spec = read_spec(spec_file(tmp_path, 'targets = ["gap9"]\nweight_bits = [4, 8]\n[params]\n'
                                         '"gap9.l1_size" = [4096, 49152, 131072]\n'
                                         '"gap9.mram_bytes_per_cycle" = [2, 8]\n'))
    graph = hwsim.load_graph(MODEL)
    failed = 0
    for point in spec.points():
        record = run_point(point)
        try:
            report = hwsim.estimate(graph, "gap9", weight_bits=point.weight_bits,
                                    params=point.machine_params, numerics=False)
        except HwsimError as exc:
            assert record["status"] == "error" and record["error"] == str(exc)
            failed += 1
            continue
        assert record["status"] == "ok"
        assert (record["cycles"], record["seconds"], record["macs"]) == (
            report.cycles, report.seconds, report.macs)
        assert record["bytes"] == {lv: t["bytes"] for lv, t in report.totals["levels"].items()}
        assert [r["cycles"] for r in record["layers"]] == [r.cycles for r in report.layers]
    assert failed == 4                      # the 4 KiB points: L1 too small for layer 0


def test_the_lowering_cache_is_for_timing_only_graphs():
    graph = hwsim.load_graph(MODEL)
    with pytest.raises(ConfigError, match="timing-only estimates"):
        hwsim.estimate(graph, "gap9", numerics=True, cache={})
    with pytest.raises(ConfigError, match="a loaded graph"):
        hwsim.estimate(MODEL, "gap9", numerics=False, cache={})


@pytest.mark.slow
def test_the_lowering_cache_on_hmx_and_sme():
    """HMX and SME programs reused across timing and architectural parameters."""
    from hwsim.tosa.models import model
    for target, graph, grid in [
            ("hmx", model("ds_cnn", dtype="fp32", width=0.25, resolution=12),
             [{}, {"ddr_bytes_per_cycle": 8}, {"vtcm_size": 1 << 20}]),
            ("sme", model("ds_cnn", width=0.25, resolution=12),
             [{}, {"fp32_latency_cycles": 8}, {"svl": 256}])]:
        cache = {}
        for params in grid:
            cached = hwsim.estimate(graph, target, params=params, numerics=False, cache=cache)
            fresh = hwsim.estimate(graph, target, params=params, numerics=False)
            assert cached.cycles == fresh.cycles and cached.totals == fresh.totals
            assert [r.cycles for r in cached.layers] == [r.cycles for r in fresh.layers]
        assert len(cache) == 2                   # one lowering per architectural variant


def test_the_store_survives_a_cut_line_and_names_a_bad_one(tmp_path):
    path = tmp_path / "r.points.jsonl"
    store = Store(path)
    store.append({"key": "a", "status": "error", "error": "first"})
    store.append({"key": "b", "status": "ok"})
    store.append({"key": "a", "status": "ok"})
    store.close()
    with open(path, "a") as fh:
        fh.write('{"key": "c", "sta')               # killed in the middle of a write
    assert Store(path).records == {"a": {"key": "a", "status": "ok"},
                                   "b": {"key": "b", "status": "ok"}}
    assert path.read_text().endswith('"ok"}\n')     # the cut line is gone
    store = Store(path)
    store.append({"key": "c", "status": "ok"})
    store.close()
    assert [json.loads(line)["key"] for line in path.read_text().splitlines()] == [
        "a", "b", "a", "c"]
    path.write_text('{"key": "a"}\nnot json\n{"key": "b"}\n')
    with pytest.raises(ConfigError, match=r"r.points.jsonl:2: not a sweep results line"):
        Store(path)


def brute_front(x, y) -> np.ndarray:
    return np.array([not any(xj <= xi and yj <= yi and (xj < xi or yj < yi)
                             for xj, yj in zip(x, y)) for xi, yi in zip(x, y)])


def test_the_pareto_front_is_the_set_no_point_dominates():
    rng = np.random.default_rng(5)
    for n in (1, 2, 7, 40, 200):
        x, y = rng.integers(0, 12, n), rng.integers(0, 12, n)    # many ties
        assert np.array_equal(pareto_front(x, y), brute_front(x, y))
    assert pareto_front([3, 1, 2, 1], [1, 3, 2, 3]).tolist() == [True, True, True, True]
    assert pareto_front([1, 2, 2], [5, 1, 4]).tolist() == [True, True, False]


def test_plot_draws_the_front_and_checks_its_output_first(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    import pandas as pd
    table = tmp_path / "t.csv"
    pd.DataFrame({"target": ["gap9"] * 5, "gap9.l1_size": [4096, 16384, 32768, 65536, 131072],
                  "cycles": [None, 303667, 162296, 149912, 149912],
                  "status": ["error", "ok", "ok", "ok", "ok"],
                  "weight_bits": [8] * 5}).to_csv(table, index=False)
    out = tmp_path / "t.png"
    assert main(["plot", str(table), "--x", "gap9.l1_size", "--y", "cycles", "--color",
                 "weight_bits", "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"{out}: 4 points, 3 on the Pareto front of gap9.l1_size and cycles:")
    assert [line.split()[1] for line in lines[2:]] == ["16384", "32768", "65536"]
    assert main(["plot", str(tmp_path / "absent.csv"), "--x", "a", "--y", "b", "-o",
                 str(tmp_path / "t.jpg")]) == 2              # the output is checked first
    assert "t.jpg: expected a .png or .svg or .pdf file" in capsys.readouterr().err
    assert main(["plot", str(table), "--x", "gap9.l2_size", "--y", "cycles", "-o",
                 str(out)]) == 2
    assert "no column 'gap9.l2_size'; it has target, gap9.l1_size" in capsys.readouterr().err
    assert main(["plot", str(table), "--x", "target", "--y", "cycles", "-o", str(out)]) == 2
    assert "column 'target' is not numeric" in capsys.readouterr().err


def test_cluster_arguments_are_checked_before_a_cluster_starts(tmp_path):
    spec = read_spec(spec_file(tmp_path, GOOD))
    with pytest.raises(ConfigError, match="workers: expected a whole number >= 1, found 0"):
        hwsim.sweep(spec, workers=0)
    with pytest.raises(ConfigError, match="give either a scheduler address or a number"):
        hwsim.sweep(spec, workers=2, scheduler="tcp://127.0.0.1:8786")
