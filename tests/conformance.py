"""tosa-tools' conformance generator and runner, as the tests drive them."""

import re


def generate(out, common: list, sets: list) -> None:
    """Generate one batch of operator tests into ``out`` per option set in ``sets``."""
    from generator.tosa_verif_build_tests import main as build
    for options in sets:
        build(["-o", str(out)] + common + options)


def run(folder, capsys, *sut_args) -> tuple[dict, str]:
    """Run the tests in ``folder`` through hwsim's SUT (``target=reference`` unless
    ``sut_args`` say otherwise): the runner's totals by verdict, and its output."""
    from runner.tosa_verif_run_tests import main as runner
    runner(["-t", str(folder), "-r", "--no-color", "--xunit-file", str(folder / "result.xml"),
            "--sut-module", "hwsim.tosa.sut", "--sut-module-args",
            *(f"hwsim.tosa.sut:{a}" for a in sut_args or ["target=reference"])])
    out = capsys.readouterr().out
    line = re.search(r"Totals \(hwsim\.tosa\.sut\): (.*)", out).group(1)
    return {name: int(n) for n, name in re.findall(r"(\d+) (\w+)", line)}, out
