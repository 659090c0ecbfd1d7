"""Bad trace input on every machine: directive typos, unknown targets, huge immediates, long
lines, and .load/.expect files that are empty, not files, too large or of the wrong size."""

import shutil
from pathlib import Path

import numpy as np
import pytest

from hwsim.cli import main
from hwsim.errors import TraceSyntaxError
from hwsim.traces.reader import parse_trace

ROOT = Path(__file__).resolve().parents[1]
HUGE = "1234567890123456789012345"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def hmx(tmp_path):
    """A private copy of the basic multiply example."""
    shutil.copytree(ROOT / "examples" / "hmx" / "data", tmp_path / "data")
    trace = tmp_path / "basic.trace"
    trace.write_text((ROOT / "examples" / "hmx" / "basic_multiply.trace").read_text())
    return trace


def test_a_directive_typo_is_named_at_its_own_line(capsys, hmx):
    lines = hmx.read_text().splitlines()
    assert lines[5].startswith(".load vtcm 0x0800")
    for typo, meant in ((".laod", ".load"), (".parm", ".param"), (".expcet", ".expect")):
        hmx.write_text("\n".join(lines[:5] + [typo + lines[5][5:]] + lines[6:]) + "\n")
        code, _, err = run(capsys, "run", hmx)
        assert (code, err) == (2, f"hwsim: error: {hmx}:6:1: unknown directive {typo}; "
                                  f"did you mean {meant}?\n")


@pytest.mark.parametrize("target, line, machine", [
    ("hmx", ".foo 1", ()), ("gap9", ".foo 1", ()), ("sme", ".foo 1", (".inst",)),
    ("gap9", "  .inst 0x80800000", ()),
])
def test_unknown_directives_on_every_machine(capsys, tmp_path, target, line, machine):
    trace = tmp_path / "t.trace"
    trace.write_text(f".target {target}\n{line}\n")
    code, _, err = run(capsys, "run", trace)
    word = line.split()[0]
    names = ", ".join([".target", ".param", ".load", ".fill", ".store", ".expect", *machine])
    assert (code, err) == (2, f"hwsim: error: {trace}:2:{line.index('.') + 1}: unknown directive "
                              f"{word}; expected one of {names}\n")


def test_sme_keeps_its_inst_directive(capsys, tmp_path):
    from hwsim.isa.sme import assemble
    trace = tmp_path / "t.trace"
    trace.write_text(f".target sme\n.inst {assemble('smstart'):#x}\n")
    assert run(capsys, "run", trace)[0] == 0


def test_an_unknown_target_is_named_before_the_trace(capsys, hmx):
    code, _, err = run(capsys, "run", "--target", "foo", hmx)
    assert (code, err) == (2, "hwsim: error: unknown target 'foo'; expected one of hmx, sme, "
                              "gap9\n")


@pytest.mark.parametrize("target, line", [
    ("hmx", f"Q6_activation_hf_mxmem_RR({HUGE}, 0)"),
    ("hmx", f"Q6_activation_hf_mxmem_RR(0, 1 << {HUGE})"),
    ("hmx", f"Q6_activation_hf_mxmem_RR(0, 0x{'f' * 25})"),
    ("hmx", f".fill vtcm {HUGE} 16 0"),
    ("sme", f"mov x0, #{HUGE}"), ("sme", f".inst 0x{HUGE}"), ("sme", f".fill mem 0 {HUGE} 0"),
    ("gap9", f"dma l2:0x{HUGE} -> l1:0x10000000 64"), ("gap9", f"ne16 WEIGHTS_PTR {HUGE}"),
    ("gap9", f"ne16 CONFIG0 shift={HUGE}"), ("gap9", f"dma wait {HUGE}"),
])
def test_a_25_digit_immediate_is_one_line_on_every_machine(capsys, tmp_path, target, line):
    trace = tmp_path / "t.trace"
    trace.write_text(f".target {target}\n{line}\n")
    code, _, err = run(capsys, "run", trace)
    assert code == 2 and err.startswith(f"hwsim: error: {trace}:2:") and err.count("\n") == 1


def test_hmx_expressions_stay_within_64_bits():
    from hwsim.isa.hmx import parse_call
    from hwsim.errors import Location
    assert parse_call("f((1 << 63) - 1)", Location("t", 1, 1))[1][0][0] == (1 << 63) - 1
    with pytest.raises(TraceSyntaxError, match="t:1:5: shift count: expected 0..63, found 64"):
        parse_call("f(1 << 64)", Location("t", 1, 1))
    with pytest.raises(TraceSyntaxError, match="does not fit in 64 bits"):
        parse_call("f(0xffffffffffffffff * 0xffffffffffffffff)", Location("t", 1, 1))


@pytest.mark.parametrize("target, line", [("hmx", "Q6_" + "9" * 1_000_000 + "()"),
                                          ("gap9", "x" * 1_000_000),
                                          ("sme", "mov x0, #" + "1" * 1_000_000)])
def test_a_1mb_line_is_not_echoed_whole(capsys, tmp_path, target, line):
    trace = tmp_path / "t.trace"
    trace.write_text(f".target {target}\n{line}\n")
    code, _, err = run(capsys, "run", trace)
    assert code == 2 and err.count("\n") == 1 and len(err) < 700, err[:700]
    assert "characters]..." in err


def test_expect_with_nbytes_reports_a_size_mismatch_with_both_sizes(capsys, hmx):
    out = np.load(hmx.parent / "data" / "basic_multiply_out.npy")
    np.save(hmx.parent / "data" / "half.npy", out.reshape(-1)[:out.size // 2])
    text = hmx.read_text()
    good = text.replace(".expect vtcm 0x1800 data/basic_multiply_out.npy",
                        ".expect vtcm 0x1800 2048 data/basic_multiply_out.npy")
    hmx.write_text(good)
    assert run(capsys, "run", hmx)[0] == 0
    hmx.write_text(good.replace("basic_multiply_out.npy", "half.npy"))
    code, out_text, _ = run(capsys, "run", hmx)
    assert code == 1
    assert (f"{hmx}:13:1: .expect vtcm:0x1800 data/half.npy: the file holds 1,024 bytes, the "
            "region 2,048") in out_text
    hmx.write_text(good.replace("2048 data", "2048 4096 data"))
    code, _, err = run(capsys, "run", hmx)
    assert code == 2 and ".expect takes 3 or 4 arguments (SPACE ADDR [NBYTES] FILE), found 5" in err


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_bytes(b""), "is empty (0 bytes)"),
    (lambda p: p.mkdir(), "is a directory, expected a data file"),
    (lambda p: p.symlink_to("/dev/null"), "is not a regular file (a device or a pipe)"),
    (lambda p: np.save(p, np.zeros((0, 4), np.float16)), "holds an empty array float16[0, 4]"),
])
@pytest.mark.parametrize("directive", [".load", ".expect"])
def test_load_and_expect_files_that_hold_nothing_are_refused(capsys, hmx, make, message,
                                                              directive):
    make(hmx.parent / "data" / "bad.npy")
    old = {".load": ".load vtcm 0x0000 data/act.npy",
           ".expect": ".expect vtcm 0x1800 data/basic_multiply_out.npy"}[directive]
    hmx.write_text(hmx.read_text().replace(old, old.split(" data/")[0] + " data/bad.npy"))
    code, _, err = run(capsys, "run", hmx)
    assert code == 2 and err.count("\n") == 1
    assert err.endswith(f"{directive}: {hmx.parent / 'data' / 'bad.npy'} {message}\n")


def test_an_npy_header_is_checked_before_its_data_is_read(capsys, hmx):
    """A header claiming 1e12 elements is refused from the header alone; so is a file shorter
    than its header says, and an array larger than the space after its address."""
    path = hmx.parent / "data" / "big.npy"
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f2", "fortran_order": False,
                                                  "shape": (10 ** 12,)})
        fh.write(b"\0" * 64)
    hmx.write_text(hmx.read_text().replace("data/act.npy", "data/big.npy"))
    code, _, err = run(capsys, "run", hmx)
    assert code == 2 and err.count("\n") == 1
    assert "big.npy is truncated: its header describes 2,000,000,000,000 bytes of data" in err
    np.save(path, np.zeros(5 << 20, np.uint8))           # 5 MB at 0x0 fits the 8 MB VTCM
    hmx.write_text(hmx.read_text().replace(".load vtcm 0x0000", ".load vtcm 0x700000"))
    code, _, err = run(capsys, "run", hmx)
    assert code == 2 and "big.npy holds 5,242,880 bytes (uint8[5242880]); its destination " \
                         "takes 1,048,576" in err


def test_store_paths_are_checked_before_the_run(capsys, hmx):
    hmx.write_text(hmx.read_text() + ".store vtcm 0x1800 16 nowhere/out.bin\n")
    code, _, err = run(capsys, "run", hmx)
    assert code == 2
    assert err == (f"hwsim: error: {hmx}:14:23: .store {hmx.parent / 'nowhere' / 'out.bin'}: "
                   f"no such directory {hmx.parent / 'nowhere'}\n")


def test_setup_order_error_names_the_first_instruction():
    with pytest.raises(TraceSyntaxError, match=r"t:2:1: .fill must come before the first "
                                               r"instruction \(line 1: insn\)"):
        parse_trace("insn\n.fill vtcm 0 1 1\n", "t")
