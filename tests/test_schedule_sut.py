"""tosa-tools' generated conformance tests through the GAP9 scheduler (``target=gap9``): the
RESCALE tests (signed and unsigned sides, 16- and 32-bit scales, every rounding mode); the
benchmark (``bench_models.py --conformance``) sweeps more operators."""

import re

import pytest

GENERATE = ["--tosa-version", "1.0", "--seed", "1", "--no-special-tests",
            "--num-rand-permutations", "1", "--test-type", "positive"]
SETS = [["--filter", "^rescale$", "--target-dtype", "int8", "--target-shape", "1,3,4,3"]]


@pytest.fixture(scope="module")
def tests_dir(tmp_path_factory):
    from generator.tosa_verif_build_tests import main as build
    out = tmp_path_factory.mktemp("conformance")
    for options in SETS:
        build(["-o", str(out)] + GENERATE + options)
    return out


def test_generated_operator_tests_pass_on_gap9(tests_dir, capsys):
    from runner.tosa_verif_run_tests import main as run
    run(["-t", str(tests_dir), "-r", "--no-color", "--xunit-file",
         str(tests_dir / "result.xml"), "--sut-module", "hwsim.tosa.sut",
         "--sut-module-args", "hwsim.tosa.sut:target=gap9"])
    out = capsys.readouterr().out
    totals = {name: int(n) for n, name in
              re.findall(r"(\d+) (\w+)", re.search(r"Totals \(hwsim\.tosa\.sut\): (.*)",
                                                   out).group(1))}
    assert totals["expected_pass"] >= 60, out[-2000:]
    assert totals["unexpected_failure"] == totals["internal_error"] == 0, \
        "\n".join(line for line in out.splitlines() if "UNEXPECTED" in line)
