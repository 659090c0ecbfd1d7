"""The conformance plumbing: tosa-tools' generated operator tests run through hwsim's SUT."""

import numpy as np
import pytest

from hwsim.errors import ConfigError
from hwsim.tosa import sut
from tests import conformance

GENERATE = ["--tosa-version", "1.0", "--seed", "0", "--no-special-tests",
            "--num-rand-permutations", "1"]
SETS = [  # a handful of small tests: dot-product compliance, ULP and exact modes, ERROR_IFs
    ["--filter", "^conv2d$", "--target-dtype", "fp32", "--target-shape", "1,5,5,3",
     "--test-type", "positive", "--max-conv-padding", "0", "--max-conv-stride", "1",
     "--max-conv-dilation", "1", "--conv-kernel", "3", "3"],
    ["--filter", "^add$", "--target-dtype", "int32", "fp32", "--target-shape", "1,4,4",
     "--test-type", "positive"],
    ["--filter", "^clamp$", "--target-dtype", "int8", "--test-type", "negative"],
]


@pytest.fixture(scope="module")
def tests_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("conformance")
    conformance.generate(out, GENERATE, SETS)
    return out



def test_generated_tests_pass_through_the_reference_target(tests_dir, capsys):
    totals, out = conformance.run(tests_dir, capsys)
    assert totals["expected_pass"] == 8 and totals["expected_failure"] == 8, out
    assert totals["unexpected_failure"] == totals["internal_error"] == 0, out


def test_a_registered_target_runs_and_is_judged(tests_dir, capsys):
    """A scheduler's hook: a target for ADD only. Others are skipped; a wrong result fails."""
    def numpy_add(graph, inputs):
        return {graph.outputs[0].name: np.add(*inputs)}

    def off_by_one(graph, inputs):
        return {graph.outputs[0].name: np.add(*inputs) + np.array(1, inputs[0].dtype)}

    sut.register_target("numpy-add", numpy_add, operators={"ADD"})
    sut.register_target("off-by-one", off_by_one, operators={"ADD"})
    try:
        totals, out = conformance.run(tests_dir, capsys, "target=numpy-add")
        assert totals["expected_pass"] == 2 and totals["skipped"] == 14, out
        totals, out = conformance.run(tests_dir, capsys, "target=off-by-one")
        assert totals["unexpected_failure"] == 2, out
    finally:
        sut.TARGETS.pop("numpy-add")
        sut.TARGETS.pop("off-by-one")


def test_target_registry_errors():
    with pytest.raises(ConfigError, match="unknown target 'hexagon'; expected one of"):
        sut.target("hexagon")
    sut.register_target("half", lambda g, i: {})
    try:
        from hwsim.tosa.models import model, sample_input
        g = model("autoencoder", width=0.1, resolution=16)
        with pytest.raises(Exception, match="did not return output"):
            sut.run_graph(g, sample_input(g), "half")
        out = sut.run_graph(g, sample_input(g), "reference")
        assert out[g.outputs[0].name].shape == (1, 16)
    finally:
        sut.TARGETS.pop("half")


def test_dot_product_check_agrees_with_tosa_verify(tests_dir, tmp_path):
    """The official verifier is an independent oracle for ``check_dot_product``."""
    import json
    import subprocess

    from hwsim.tosa import load_graph
    from hwsim.tosa.dtypes import dtype
    from hwsim.tosa.judge import dot_product_shape
    from hwsim.tosa.compliance import DotProductRule, check_dot_product
    from hwsim.tosa.reference import reference_fp64
    from hwsim.tosa.schema import tool

    rule = DotProductRule(fp32_abs_factor=3)             # the generator's fp32 ABS_BOUND
    fp32 = dtype("fp32")
    agreements = 0
    for folder in sorted(tests_dir.glob("conv2d*/*_s[03]")):
        desc = json.loads((folder / "desc.json").read_text())
        info = desc["meta"]["compliance"]["tensors"]["result-0"]["dot_product_info"]
        graph = load_graph(folder / desc["tosa_file"])
        op = graph.operators[0]
        ks, acc, has_bias = dot_product_shape(op)
        assert rule.ksb(ks, acc, fp32, has_bias) == info["ksb"]
        values = {n: np.load(folder / f) for n, f in zip(desc["ifm_name"], desc["ifm_file"])}
        ref, bnd = reference_fp64(graph, op, values)
        np.save(tmp_path / "ref.npy", ref)
        np.save(tmp_path / "bnd.npy", bnd)
        unit = np.maximum(bnd * 2.0 ** -24, fp32.normal_min)
        rng = np.random.default_rng(info["s"])
        spikes = np.zeros(ref.size)
        spikes[::97] = 1
        spread = info["variance_error_bound"] ** 0.5
        signs = rng.choice([-1.0, 1.0], ref.shape)
        for delta in (0 * unit, (info["abs_bound"] - 1.5) * spikes.reshape(ref.shape) * unit,
                      (info["abs_bound"] + 0.5) * spikes.reshape(ref.shape) * unit,
                      signs * 0.8 * spread * unit, signs * 1.2 * spread * unit,
                      np.full(ref.shape, 1.5) * unit):
            imp = (ref + delta).astype(np.float32)
            np.save(tmp_path / "imp.npy", imp)
            done = subprocess.run([str(tool("tosa_verify")), "--test_desc",
                                   str(folder / "desc.json"), "--imp_result_file",
                                   str(tmp_path / "imp.npy"), "--ref_result_file",
                                   str(tmp_path / "ref.npy"), "--bnd_result_file",
                                   str(tmp_path / "bnd.npy")], capture_output=True)
            ours = check_dot_product(imp, ref, bnd, fp32, info["ksb"], fp32=True, rule=rule,
                                     test_set=info["s"])
            assert ours.passed == (done.returncode == 0), (folder.name, ours)
            agreements += 1
    assert agreements == 12
