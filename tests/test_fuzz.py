"""Fuzzing: mutated example traces and corrupted model files must give a success or a clean
one-line error, never a traceback, a crash, a hang or a file left behind.

Every shipped example trace gets mutants (numbers made huge, negative or malformed, lines
deleted, repeated or swapped, characters replaced, directive names misspelt, lines cut, tokens
from other machines, invalid UTF-8); every model loader (.tosa, TOSA MLIR, .tflite) gets
byte-flipped and truncated files. The seeds are fixed, so a failure names a reproducible case.
The default run takes a subset of each; the whole set (1,000 traces, 300+ models) is marked slow.
"""

from __future__ import annotations

import random
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from hwsim.cli import main
from hwsim.errors import HwsimError
from hwsim.tosa.loaders import load_graph
from hwsim.tosa.schema import tool
from tests.models import MODELS

ROOT = Path(__file__).resolve().parents[1]
TRACES = sorted((ROOT / "examples").rglob("*.trace"))
TRACE_CASES, TRACE_FAST = 1000, 25
MODEL_CASES = {"tosa": 200, "mlir": 60, "tflite": 60}       # per loader, 320 in all
MODEL_FAST = {"tosa": 30, "mlir": 8, "tflite": 6}
SECONDS_PER_CASE = 60


class Hang(BaseException):
    """A case that ran longer than ``SECONDS_PER_CASE`` (not an Exception: main must not
    catch it)."""


@pytest.fixture(autouse=True)
def watchdog():
    def expired(signum, frame):
        raise Hang
    previous = signal.signal(signal.SIGALRM, expired)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def _limit():
    signal.setitimer(signal.ITIMER_REAL, SECONDS_PER_CASE)


# -- traces ---------------------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])-?(?:0[xX][0-9a-fA-F_]+|0[bB][01]+|\d+)(?![\w.])")
_ODD_NUMBERS = ["1234567890123456789012345", "0x" + "f" * 25, "-1", "0", "4294967296",
                "-2147483649", "0x", "1e30", "nan", "0b", "077777777777777777777777", "-0"]
_ODD_CHARS = list(".()[],=#/:;{}-+*~\t x0") + ["\u00e9", "\x00", "\u2028"]
_TOKENS = sorted({tok for path in TRACES for tok in path.read_text().split()})


def _numbers(text: str, rng: random.Random) -> str:
    found = list(_NUMBER.finditer(text))
    if not found:
        return text
    m = rng.choice(found)
    new = rng.choice(_ODD_NUMBERS + [str(rng.randint(-1 << 40, 1 << 40))])
    return text[:m.start()] + new + text[m.end():]


def _lines(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    if len(lines) < 2:
        return text
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    kind = rng.choice(["delete", "repeat", "swap", "cut"])
    if kind == "delete":
        del lines[i]
    elif kind == "repeat":
        lines.insert(j, lines[i])
    elif kind == "swap":
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines[i] = lines[i][:rng.randrange(len(lines[i]) + 1)]
    return "\n".join(lines) + "\n"


def _chars(text: str, rng: random.Random) -> str:
    i = rng.randrange(len(text))
    return text[:i] + rng.choice(_ODD_CHARS) + text[i + rng.randint(0, 1):]


def _directive(text: str, rng: random.Random) -> str:
    """Two neighbouring letters of a directive's name swapped (``.load`` -> ``.laod``)."""
    found = list(re.finditer(r"^\.(\w{2,})", text, re.M))
    if not found:
        return text
    m = rng.choice(found)
    word, i = m.group(1), rng.randrange(len(m.group(1)) - 1)
    return text[:m.start(1)] + word[:i] + word[i + 1] + word[i] + word[i + 2:] + text[m.end(1):]


def _token(text: str, rng: random.Random) -> str:
    found = list(re.finditer(r"\S+", text))
    m = rng.choice(found)
    return text[:m.start()] + rng.choice(_TOKENS) + text[m.end():]


def _long_line(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    lines.insert(rng.randrange(len(lines) + 1), rng.choice(["Q6_", ".load ", "dma ", "x"])
                 + "9" * 200_000)
    return "\n".join(lines) + "\n"


MUTATIONS = [(_numbers, 5), (_lines, 4), (_chars, 4), (_directive, 2), (_token, 3),
             (_long_line, 0.1)]


def trace_mutant(source: str, seed: str) -> bytes:
    rng = random.Random(seed)
    text = source
    for _ in range(rng.choice([1, 1, 2, 3])):
        mutate = rng.choices([m for m, _ in MUTATIONS], [w for _, w in MUTATIONS])[0]
        text = mutate(text, rng) or text
    data = text.encode()
    if rng.random() < 0.02:                                  # not UTF-8
        i = rng.randrange(len(data) + 1)
        data = data[:i] + b"\xff\xfe" + data[i:]
    return data


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    """A private copy of the examples (the mutants need their data files beside them)."""
    folder = tmp_path_factory.mktemp("fuzz") / "examples"
    shutil.copytree(ROOT / "examples", folder)
    return folder


def _trace_cases(count: int) -> list[tuple[Path, int]]:
    per = -(-count // len(TRACES))
    return [(path, i) for i in range(per) for path in TRACES][:count]


def _run_trace_cases(examples: Path, cases, capsys) -> None:
    outcomes = {0: 0, 1: 0, 2: 0}
    for path, i in cases:
        relative = path.relative_to(ROOT / "examples")
        mutant = examples / relative.parent / "fuzz_mutant.trace"
        seed = f"{relative}:{i}"
        mutant.write_bytes(trace_mutant(path.read_text(), seed))
        before = set(mutant.parent.iterdir())
        _limit()
        try:
            code = main(["run", str(mutant)])
        except Hang:
            pytest.fail(f"case {seed} ran longer than {SECONDS_PER_CASE} s")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        out, err = capsys.readouterr()
        assert code in outcomes, f"case {seed}: exit {code}: {err[:500]}"
        if code == 2:
            assert err.startswith("hwsim: error: ") and err.count("\n") == 1, \
                f"case {seed}: {err[:500]}"
            assert len(err) < 1200, f"case {seed}: a {len(err)}-character error"
        left = {p for p in set(mutant.parent.iterdir()) - before if p.suffix == ".tmp"}
        assert not left, f"case {seed} left {left}"
        outcomes[code] += 1
    assert outcomes[2] > 0 and outcomes[0] + outcomes[1] > 0     # both kinds were reached


def test_trace_mutants_fast(examples, capsys):
    _run_trace_cases(examples, _trace_cases(TRACE_FAST), capsys)


@pytest.mark.slow
def test_trace_mutants_all(examples, capsys):
    _run_trace_cases(examples, _trace_cases(TRACE_CASES)[TRACE_FAST:], capsys)


def test_every_example_trace_is_fuzzed():
    assert len(TRACES) >= 20 and TRACE_CASES >= 1000
    assert {p.parent.name for p in TRACES} >= {"hmx", "sme", "gap9", "microbench"}


# -- model files -----------------------------------------------------------------------------------

def _model_sources(tmp: Path) -> dict[str, bytes | None]:
    """The file each loader is fuzzed with: the bundled .tosa, its MLIR text (written by
    tosa-opt), and the MLPerf Tiny anomaly-detection .tflite when the models are present (the
    converter segfaults on some of its mutants)."""
    tosa = ROOT / "examples" / "models" / "ds_cnn_int8.tosa"
    mlir = tmp / "ds_cnn_int8.mlir"
    (tmp / "empty.mlir").write_text("module {}\n")
    subprocess.run([str(tool("tosa-opt")), str(tmp / "empty.mlir"), "--tosa-deserialize",
                    f"--tosa-deserialize-filename={tosa}", "-o", str(mlir)], check=True)
    tflite = MODELS / "ad01_int8.tflite"
    return {"tosa": tosa.read_bytes(), "mlir": mlir.read_bytes(),
            "tflite": tflite.read_bytes() if tflite.exists() else None}


def model_mutant(data: bytes, seed: str) -> bytes:
    rng = random.Random(seed)
    if rng.random() < 0.3:
        return data[:rng.randrange(len(data))]
    out = bytearray(data)
    edge = min(len(out), 16384)
    for _ in range(rng.choice([1, 1, 1, 2, 4])):
        # most flips go to the first or last 16 KB, where flatbuffers keep tables and offsets
        pos = rng.choice([rng.randrange(edge), len(out) - 1 - rng.randrange(edge),
                          rng.randrange(len(out))])
        out[pos] ^= rng.choice([0x80, 0x01, 0xff, rng.randrange(1, 256)])
    return bytes(out)


def _run_model_cases(kind: str, cases: range, tmp_path, monkeypatch) -> None:
    source = _model_sources(tmp_path)[kind]
    if source is None:
        pytest.skip(f"ad01_int8.tflite not found in {MODELS} (set HWSIM_MODELS)")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))    # where converters put their files
    loaded = failed = 0
    for i in cases:
        seed = f"{kind}:{i}"
        _limit()
        try:
            load_graph(model_mutant(source, seed))
            loaded += 1
        except HwsimError as exc:
            message = str(exc)
            assert "\n" not in message and len(message) < 1000, f"case {seed}: {message[:500]}"
            failed += 1
        except Hang:
            pytest.fail(f"case {seed} ran longer than {SECONDS_PER_CASE} s")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        assert list(scratch.iterdir()) == [], f"case {seed} left files behind"
    assert failed > 0 and loaded + failed == len(cases)


@pytest.mark.parametrize("kind", sorted(MODEL_FAST))
def test_model_mutants_fast(kind, tmp_path, monkeypatch):
    _run_model_cases(kind, range(MODEL_FAST[kind]), tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(MODEL_CASES))
def test_model_mutants_all(kind, tmp_path, monkeypatch):
    _run_model_cases(kind, range(MODEL_FAST[kind], MODEL_CASES[kind]), tmp_path, monkeypatch)
