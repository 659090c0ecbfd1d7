"""Output files: checked before any work, never creating folders, written atomically only to
regular files, honouring the umask; signals and internal errors of the command."""

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hwsim.cli import main
from hwsim.errors import HwsimError
from hwsim.traces.files import STANDARD_OUTPUT, atomic_open, atomic_write_text, check_output

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "examples" / "hmx" / "basic_multiply.trace"
MODEL = ROOT / "examples" / "models" / "ds_cnn_int8.tosa"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# Every writer, with the model or trace it reads replaced by a missing file: the output must be
# refused first, so the error names the output, not the input.
WRITERS = [
    ("run", "missing.trace", "--json"), ("run", "missing.trace", "--timeline"),
    ("estimate", "missing.tosa", "-o"), ("estimate", "missing.tosa", "--timeline"),
    ("estimate", "missing.tosa", "--plot"), ("import", "missing.tflite", "-o"),
    ("compile", "missing.tosa", "-o"), ("inspect", "missing.tosa", "--json"),
]


@pytest.mark.parametrize("command, source, option", WRITERS)
def test_a_missing_folder_is_refused_before_any_work_and_not_created(capsys, tmp_path, command,
                                                                     source, option):
    out = tmp_path / "no" / "such" / "out.png"
    code, _, err = run(capsys, command, tmp_path / source, option, out)
    assert code == 2
    assert err == f"hwsim: error: {option} {out}: no such directory {out.parent}\n"
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("command, source, option", WRITERS)
def test_an_output_under_a_file_is_one_line(capsys, tmp_path, command, source, option):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "sub" / "out.png"
    code, _, err = run(capsys, command, tmp_path / source, option, out)
    assert code == 2
    assert err == f"hwsim: error: {option} {out}: {tmp_path / 'file'} is not a directory\n"


def test_plot_format_is_checked_before_simulating(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    code, _, err = run(capsys, "estimate", tmp_path / "missing.tosa", "--plot", tmp_path / "a.txt")
    assert code == 2 and err.count("\n") == 1
    assert f"--plot {tmp_path / 'a.txt'}: expected a file name ending in one of " in err
    assert ".png" in err and ".svg" in err


def test_a_directory_is_not_an_output(tmp_path):
    with pytest.raises(HwsimError, match=f"^--json {tmp_path}: is a directory$"):
        check_output(tmp_path, "--json")


def test_files_honour_the_umask_and_replaced_files_keep_their_mode(tmp_path):
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "new.txt", "x")
        assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640
        os.chmod(tmp_path / "new.txt", 0o604)
        atomic_write_text(tmp_path / "new.txt", "y")
        assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o604
        assert (tmp_path / "new.txt").read_text() == "y"
    finally:
        os.umask(old)


def test_a_failed_write_leaves_neither_output_nor_temporary_file(tmp_path):
    (tmp_path / "out.json").write_text("old")
    for error in (ValueError, KeyboardInterrupt):
        with pytest.raises(error):
            with atomic_open(tmp_path / "out.json") as fh:
                fh.write("half")
                raise error
    assert os.listdir(tmp_path) == ["out.json"]
    assert (tmp_path / "out.json").read_text() == "old"


def test_symlinks_and_fifos_are_written_through(capsys, tmp_path):
    target = tmp_path / "real.json"
    target.write_text("")
    (tmp_path / "link.json").symlink_to(target)
    assert run(capsys, "run", TRACE, "--json", tmp_path / "link.json")[0] == 0
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads(target.read_text())["machine"] == "hmx"

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    assert run(capsys, "run", TRACE, "--json", fifo)[0] == 0
    reader.join(10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(received[0])["machine"] == "hmx"
    assert sorted(os.listdir(tmp_path)) == ["link.json", "pipe.json", "real.json"]


@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_dash_and_dev_stdout_are_standard_output(capsys, name):
    # by name, never through the file system: a writer that replaced /dev/stdout (a symlink)
    # with a file would break the system; check that before trying
    assert name in STANDARD_OUTPUT
    code, out, _ = run(capsys, "run", TRACE, "--json", name)
    assert code == 0
    assert json.loads(out[out.index("{"):])["machine"] == "hmx"


def test_import_and_estimate_to_standard_output(capsysbinary, tmp_path):
    assert main(["import", str(MODEL), "-o", "-"]) == 0
    out, err = capsysbinary.readouterr()
    from hwsim.tosa.loaders import load_graph
    assert len(load_graph(out)) == len(load_graph(MODEL))      # nothing but the flatbuffer
    assert err.decode().startswith("-: ") and b"operators" in err
    assert main(["estimate", str(MODEL), "--no-numerics", "--report", "csv", "-o", "-"]) == 0
    out = capsysbinary.readouterr().out.decode().splitlines()
    assert out[0].startswith("index,name,kind") and len(out) > 5


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_device_is_written_through_and_its_error_is_one_line(capsys, tmp_path):
    """Through a link in the test's folder: were the device ever replaced by a regular file
    (the bug this guards against), only the link would be."""
    (tmp_path / "full").symlink_to("/dev/full")
    code, _, err = run(capsys, "run", TRACE, "--json", tmp_path / "full")
    assert (code, err) == (2, f"hwsim: error: output {tmp_path / 'full'}: cannot write: No space "
                              "left on device\n")
    assert (tmp_path / "full").is_symlink() and stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_ctrl_c_during_start_up_is_one_line(capsys, monkeypatch):
    """The heavy imports happen inside ``main`` (building the parser), where Ctrl-C is caught;
    importing the command module itself loads neither numpy nor the engine."""
    def interrupted():
        raise KeyboardInterrupt
    monkeypatch.setattr("hwsim.cli.build_parser", interrupted)
    assert run(capsys, "--version") == (130, "", "hwsim: interrupted\n")
    loaded = subprocess.run([sys.executable, "-c", "import sys, hwsim.cli; print(sorted("
                             "m for m in ('numpy', 'simpy', 'numba') if m in sys.modules))"],
                            capture_output=True, text=True, check=True).stdout
    assert loaded == "[]\n"


def test_an_internal_error_has_its_own_status_and_asks_for_a_report(capsys, monkeypatch):
    def broken(args):
        return 1 / 0
    monkeypatch.setattr("hwsim.cli.cmd_targets", broken)
    code, _, err = run(capsys, "targets")
    assert code == 3 and err.count("\n") == 1
    assert err.startswith("hwsim: internal error: ZeroDivisionError: division by zero (a bug")
    assert "--debug" in err
    with pytest.raises(ZeroDivisionError):
        main(["--debug", "targets"])


SLOW_WRITE = """
import sys, time
from pathlib import Path
import hwsim.results.chrome as chrome
marker = Path(sys.argv[1])
dump = chrome.json.dumps
def slow(*args, **kwargs):
    marker.touch()          # the output's temporary file is open: wait for the signal here
    time.sleep(30)
    return dump(*args, **kwargs)
chrome.json.dumps = slow
from hwsim.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_sigterm_during_a_write_cleans_up_and_exits_143(tmp_path):
    marker, out = tmp_path / "writing", tmp_path / "out" / "timeline.json"
    out.parent.mkdir()
    child = subprocess.Popen([sys.executable, "-c", SLOW_WRITE, str(marker), "run", str(TRACE),
                              "--timeline", str(out)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    assert [p.name.endswith(".tmp") for p in out.parent.iterdir()] == [True]
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 143 and err == "hwsim: terminated\n"
    assert list(out.parent.iterdir()) == []
