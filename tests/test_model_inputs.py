"""Model files that used to crash the process or pass when they should not: a converter that
segfaults or reports an error, corrupt .tosa files, absurd batches, non-UTF-8 parameter files;
the converters' temporary files go whatever happens."""

import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hwsim.cli import main
from hwsim.errors import TosaError
from hwsim.tosa.loaders import load_graph
from tests.models import model

ROOT = Path(__file__).resolve().parents[1]
DS_CNN = ROOT / "examples" / "models" / "ds_cnn_int8.tosa"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """The temporary folder the converters use, to see that they leave nothing behind."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.parametrize("byte", [0, 1])
def test_a_corrupt_tosa_file_is_one_line(capsys, tmp_path, byte):
    data = bytearray(DS_CNN.read_bytes())
    data[byte] ^= 0x80
    (tmp_path / "bad.tosa").write_bytes(data)
    with pytest.raises(TosaError, match=r"^<bytes>: corrupt flatbuffer: "):
        load_graph(bytes(data))
    code, _, err = run(capsys, "inspect", tmp_path / "bad.tosa")
    assert code == 2 and err.startswith(f"hwsim: error: {tmp_path / 'bad.tosa'}: corrupt ")
    assert err.count("\n") == 1


@pytest.mark.parametrize("command", ["inspect", "import", "estimate"])
@pytest.mark.parametrize("batch", ["99999999999999999999", "0", "-1", "65537"])
def test_absurd_batches_are_refused(capsys, tmp_path, command, batch):
    extra = ["-o", tmp_path / "out.tosa"] if command == "import" else []
    code, _, err = run(capsys, command, DS_CNN, "--batch", batch, *extra)
    assert (code, err) == (2, f"hwsim: error: batch: expected 1..65,536, found {batch}\n")


def test_a_params_file_that_is_not_utf8_is_one_line(capsys, tmp_path):
    (tmp_path / "p.toml").write_bytes(b"clock_hz = 1e9 # caf\xe9\n")
    code, _, err = run(capsys, "run", ROOT / "examples" / "hmx" / "basic_multiply.trace",
                       "--params", tmp_path / "p.toml")
    assert (code, err) == (2, f"hwsim: error: {tmp_path / 'p.toml'}: not UTF-8 text (at byte "
                              "offset 20): TOML files are UTF-8\n")


def test_a_converter_crash_is_one_line_and_leaves_nothing(capsys, tmp_path, scratch):
    """Byte 275127 of ad01_int8.tflite XOR 0xbc makes the converter segfault."""
    data = bytearray(model("ad01_int8.tflite").read_bytes())
    data[275127] ^= 0xBC
    (tmp_path / "crash.tflite").write_bytes(data)
    code, _, err = run(capsys, "import", tmp_path / "crash.tflite", "-o", tmp_path / "x.tosa")
    assert (code, err) == (2, f"hwsim: error: {tmp_path / 'crash.tflite'}: "
                              "tosa-converter-for-tflite crashed (SIGSEGV); the model file is "
                              "probably corrupt\n")
    assert list(scratch.iterdir()) == [] and not (tmp_path / "x.tosa").exists()


def _shift_out_of_range(tmp_path) -> Path:
    """kws_ref_model.tflite with one quantisation scale (the float at byte 36704) set to 3e9:
    the converter prints an error for the RESCALE it cannot build, then exits 0."""
    data = bytearray(model("kws_ref_model.tflite").read_bytes())
    data[36704:36708] = struct.pack("<f", 3e9)
    path = tmp_path / "shift.tflite"
    path.write_bytes(data)
    return path


def test_a_converter_error_fails_the_import(capsys, tmp_path, scratch):
    path = _shift_out_of_range(tmp_path)
    message = (f"{path}: tosa-converter-for-tflite failed: buildRescaleOpConvOutput: shift must "
               "be in the range 2 <= shift <= 62")
    with pytest.raises(TosaError) as error:
        load_graph(path)
    assert str(error.value) == message
    code, out, err = run(capsys, "inspect", path)
    assert (code, out, err) == (2, "", f"hwsim: error: {message}\n")      # no converter chatter
    assert list(scratch.iterdir()) == []


def test_debug_shows_the_converters_own_messages(capsys, tmp_path, scratch):
    path = _shift_out_of_range(tmp_path)
    with pytest.raises(TosaError):
        main(["--debug", "inspect", str(path)])
    err = capsys.readouterr().err
    assert "hwsim.tosa.loaders: tosa-converter-for-tflite: loc(" in err
    assert '("model.tflite":0:0)): error: buildRescaleOpConvOutput' in err     # no temp paths


SLOW_CONVERTER = """
import sys, time
from pathlib import Path
import hwsim.tosa.loaders as loaders
# a converter that announces itself and then takes its time, so that the test can interrupt it
loaders._CONVERTER = "import sys, time; open(sys.argv[2], 'w').close(); time.sleep(60)"
from hwsim.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("sig, status, line", [(signal.SIGINT, 130, "hwsim: interrupted\n"),
                                               (signal.SIGTERM, 143, "hwsim: terminated\n")])
def test_an_interrupted_conversion_leaves_no_temporary_files(tmp_path, sig, status, line):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    (tmp_path / "m.tflite").write_bytes(b"\0\0\0\0TFL3" + b"\0" * 64)
    child = subprocess.Popen([sys.executable, "-c", SLOW_CONVERTER, "import",
                              str(tmp_path / "m.tflite"), "-o", str(tmp_path / "m.tosa")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**__import__("os").environ, "TMPDIR": str(scratch)})
    deadline = time.monotonic() + 60
    while not list(scratch.glob("hwsim-import-*/model.mlirbc")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(scratch.glob("hwsim-import-*/model.mlirbc")), child.communicate()
    child.send_signal(sig)
    _, err = child.communicate(timeout=30)
    assert (child.returncode, err) == (status, line)
    assert list(scratch.iterdir()) == []
