"""tosa-tools' generated conformance tests through the GAP9 scheduler (``target=gap9``): the
RESCALE tests (signed and unsigned sides, 16- and 32-bit scales, every rounding mode); the
benchmark (``bench_models.py --conformance``) sweeps more operators."""

import pytest

from tests import conformance

GENERATE = ["--tosa-version", "1.0", "--seed", "1", "--no-special-tests",
            "--num-rand-permutations", "1", "--test-type", "positive"]
SETS = [["--filter", "^rescale$", "--target-dtype", "int8", "--target-shape", "1,3,4,3"]]


@pytest.fixture(scope="module")
def tests_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("conformance")
    conformance.generate(out, GENERATE, SETS)
    return out


@pytest.mark.slow
def test_generated_operator_tests_pass_on_gap9(tests_dir, capsys):
    totals, out = conformance.run(tests_dir, capsys, "target=gap9")
    assert totals["expected_pass"] >= 60, out[-2000:]
    assert totals["unexpected_failure"] == totals["internal_error"] == 0, \
        "\n".join(line for line in out.splitlines() if "UNEXPECTED" in line)
