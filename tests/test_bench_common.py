"""benchmarks/common.py's results files: every row says what made it (the command with its
arguments, and the commit), and a run replaces only the rows it measured."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def common():
    spec = importlib.util.spec_from_file_location("bench_common", ROOT / "benchmarks" / "common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_row_keeps_the_command_and_commit_that_measured_it(common, tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    script = str(ROOT / "benchmarks" / "bench_stages.py")
    monkeypatch.setattr(sys, "argv", [script, "hmx", "kws_ref_model", "--mode", "a b"])
    common.save_rows(path, [{"case": 1, "s": 0.5}, {"case": 2, "s": 0.7}], ("case",), "usage")
    monkeypatch.setattr(sys, "argv", [script, "sme", "--repeat", "3"])
    common.save_rows(path, [{"case": 2, "s": 0.6}], ("case",), "usage")
    saved = json.loads(path.read_text())
    assert saved["command"] == "usage"
    first, second = saved["rows"]
    assert (first["case"], first["s"], second["case"], second["s"]) == (1, 0.5, 2, 0.6)
    assert first["command"] == ("PYTHONPATH=. python benchmarks/bench_stages.py hmx "
                                "kws_ref_model --mode 'a b'")
    assert second["command"] == "PYTHONPATH=. python benchmarks/bench_stages.py sme --repeat 3"
    assert first["commit"] == second["commit"] != ""
    if (ROOT / ".git").exists():
        assert first["commit"].rstrip("+") != "unknown"


def test_a_changed_checkout_is_marked_and_no_git_says_unknown(common, monkeypatch):
    answers = {"rev-parse": "abc1234", "status": " M hwsim/x.py"}
    monkeypatch.setattr(common, "_git", lambda *args: answers[args[0]])
    assert common.provenance()["commit"] == "abc1234+"
    answers["status"] = ""
    assert common.provenance()["commit"] == "abc1234"

    def missing(*args):
        raise OSError("no git")
    monkeypatch.setattr(common, "_git", missing)
    assert common.provenance()["commit"] == "unknown"
